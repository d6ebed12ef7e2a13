//! Deliveries as the console shows them (issue 29): how many stand in each status (the
//! header counts the failed ones, `/status` all of them), and the selected session's own,
//! so a reply of its transcript that did not reach its chat is marked under it. Kept live
//! from `Delivery` and `DeliveryUpdated` events; the counts are read again (at most once a
//! tick) after a change, since an update does not say what a row was before.

use crate::transcript::TranscriptLine;
use switchboard_types::api::{
    ApiError, DeliveryCounts, EngineEvent, OutboxRow, OutboxStatus, SendKind,
};
use switchboard_types::text_safety::safe_text;

/// How many of a session's newest deliveries are kept for its transcript's marks.
pub const SESSION_ROWS: u32 = 200;

/// What the console knows of deliveries.
#[derive(Debug, Clone, Default)]
pub struct Deliveries {
    /// Per status, over the whole engine (`None`: not read yet, or not recorded there: an
    /// OpenClaw gateway keeps no outbox).
    pub counts: Option<DeliveryCounts>,
    /// The counts changed since they were read.
    pub stale: bool,
    /// A read of the counts is under way.
    pub counting: bool,
    /// The engine records no deliveries: nothing to ask again.
    pub unrecorded: bool,
    /// The session `rows` are for (the selected one once loaded).
    pub key: Option<String>,
    /// That session's deliveries, newest first, their texts as the transcript shows them
    /// (escaped, trimmed) so a reply's line is found by its text.
    pub rows: Vec<OutboxRow>,
    /// The rows may be stale (a delivery was queued for that session, or one changed while
    /// a read was under way, whose answer may predate it): read them again.
    pub reread: bool,
    /// The session whose rows are being read.
    pub loading: Option<String>,
}

impl Deliveries {
    pub fn new() -> Deliveries {
        Deliveries {
            stale: true,
            ..Deliveries::default()
        }
    }

    /// The engine's failed deliveries, when it records them.
    pub fn failed(&self) -> Option<u64> {
        self.counts.map(|c| c.failed)
    }

    /// An engine event, as far as deliveries go.
    pub fn event(&mut self, e: &EngineEvent) {
        match e {
            EngineEvent::Delivery { key, .. } => {
                self.stale = true;
                // Read again rather than made up here: the row's time is the engine's clock,
                // which is what a reply's line is dated by.
                if self.key.as_deref() == Some(key.as_str()) {
                    self.reread = true;
                }
            }
            EngineEvent::DeliveryUpdated { .. } => {
                self.stale = true;
                for row in &mut self.rows {
                    if row.apply(e) {
                        break;
                    }
                }
                // The answer of a read under way may be older than this change.
                if self.loading.is_some() {
                    self.reread = true;
                }
            }
            _ => {}
        }
    }

    /// Events were missed: read everything again.
    pub fn missed(&mut self) {
        self.key = None;
        self.rows.clear();
        self.stale = !self.unrecorded;
    }

    /// Whether to read the counts now (and note that a read is under way).
    pub fn take_count(&mut self) -> bool {
        let due = self.stale && !self.counting && !self.unrecorded;
        if due {
            self.stale = false;
            self.counting = true;
        }
        due
    }

    pub fn counted(&mut self, result: Result<Option<DeliveryCounts>, ApiError>) {
        self.counting = false;
        match result {
            Ok(Some(c)) => self.counts = Some(c),
            Ok(None) | Err(ApiError::Unavailable(_)) => {
                self.counts = None;
                self.unrecorded = true;
            }
            // Asked again after the next change.
            Err(_) => {}
        }
    }

    /// The selected session changed, or a delivery was queued for it: its deliveries are to
    /// be read (`true`), unless the engine records none.
    pub fn select(&mut self, key: Option<&str>) -> bool {
        let read = if self.key.as_deref() == key {
            // One read at a time: a change during it is read after it.
            self.reread && self.loading.is_none()
        } else {
            self.key = key.map(str::to_string);
            self.rows.clear();
            true
        };
        if !read || key.is_none() || self.unrecorded {
            return false;
        }
        self.reread = false;
        self.loading = key.map(str::to_string);
        true
    }

    pub fn loaded(&mut self, key: &str, result: Result<Vec<OutboxRow>, ApiError>) {
        if self.loading.as_deref() == Some(key) {
            self.loading = None;
        }
        if self.key.as_deref() != Some(key) {
            return;
        }
        match result {
            Ok(mut rows) => {
                for r in &mut rows {
                    r.text = shown(&r.text);
                }
                self.rows = rows;
            }
            Err(ApiError::Unavailable(_)) => self.unrecorded = true,
            Err(e) => tracing::debug!(error = %e, "reading a session's deliveries failed"),
        }
    }

    /// The delivery of reply `line` (an assistant line of the selected session): the reply
    /// delivery with its text queued at or after it, the nearest in time.
    pub fn of_line(&self, line: &TranscriptLine) -> Option<&OutboxRow> {
        if line.role != "assistant" {
            return None;
        }
        let text = line.text.trim();
        // The newest such delivery queued at or after the line (the line is dated when the
        // reply was recorded, its delivery queued just after).
        self.rows
            .iter()
            .filter(|r| {
                r.kind == SendKind::Reply.as_str()
                    && r.created_at >= line.timestamp
                    && r.text == text
            })
            .min_by_key(|r| r.created_at)
    }

    /// The mark under a reply that did not (yet) reach its chat; none once it was sent.
    pub fn mark(&self, line: &TranscriptLine, now: i64) -> Option<String> {
        let row = self.of_line(line)?;
        let words = row.route_words(now);
        match row.status {
            OutboxStatus::Sent => None,
            OutboxStatus::Failed => Some(format!("⚠ not delivered: {words}")),
            OutboxStatus::Retrying => Some(format!("⚠ not delivered yet: {words}")),
            OutboxStatus::Queued | OutboxStatus::Sending => Some(format!("… {words}")),
        }
    }

    /// The session's deliveries for `/status`: how many in each status, and the newest
    /// failed one.
    pub fn summary(rows: &[OutboxRow]) -> String {
        if rows.is_empty() {
            return "none".to_string();
        }
        let mut c = DeliveryCounts::default();
        for r in rows {
            c.add(r.status, 1);
        }
        let mut s = counts_words(&c);
        if let Some(f) = rows.iter().find(|r| r.status == OutboxStatus::Failed) {
            s.push_str(&format!(
                " · newest failed: #{} to {} {}: {}",
                f.id,
                f.channel,
                f.to,
                f.last_error.as_deref().unwrap_or("failed")
            ));
        }
        s
    }
}

/// A delivery's text as a transcript line shows it.
fn shown(text: &str) -> String {
    crate::cells::stable(&safe_text(text.trim()))
        .trim()
        .to_string()
}

/// `3 sent · 1 retrying · 2 failed`: the statuses with any, in their order.
pub fn counts_words(c: &DeliveryCounts) -> String {
    let words: Vec<String> = c
        .by_status()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    if words.is_empty() {
        "none".to_string()
    } else {
        words.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: i64, at: i64, text: &str, status: OutboxStatus) -> OutboxRow {
        OutboxRow {
            id,
            created_at: at,
            session_key: "agent:main:telegram:group:-1".into(),
            kind: "reply".into(),
            channel: "telegram".into(),
            to: "group:-1".into(),
            text: text.into(),
            status,
            ..OutboxRow::default()
        }
    }

    fn line(at: i64, text: &str) -> TranscriptLine {
        TranscriptLine {
            seq: 1,
            role: "assistant",
            timestamp: at,
            from: "agent".into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_reply_is_matched_to_the_delivery_of_its_text_queued_after_it() {
        let mut d = Deliveries::new();
        assert!(d.select(Some("k")));
        d.loaded(
            "k",
            Ok(vec![
                reply(3, 300, "same\n", OutboxStatus::Failed),
                reply(2, 200, "same", OutboxStatus::Sent),
                reply(1, 100, "other", OutboxStatus::Failed),
            ]),
        );
        assert_eq!(d.of_line(&line(150, "same")).map(|r| r.id), Some(2));
        assert_eq!(d.of_line(&line(250, " same\n")).map(|r| r.id), Some(3));
        assert_eq!(d.of_line(&line(350, "same")), None);
        assert_eq!(d.mark(&line(150, "same"), 0), None, "sent: no mark");
        let failed = d.mark(&line(250, "same"), 0).expect("marked");
        assert!(
            failed.starts_with("⚠ not delivered: failed to reach telegram group:-1"),
            "{failed}"
        );
        assert!(failed.contains("deliveries retry 3"), "{failed}");
    }

    #[test]
    fn events_keep_the_rows_and_mark_the_counts_stale() {
        let mut d = Deliveries::new();
        assert!(d.select(Some("k")));
        assert!(!d.select(Some("k")), "the same session is not read twice");
        d.loaded("k", Ok(Vec::new()));
        assert!(d.take_count());
        d.counted(Ok(Some(DeliveryCounts::default())));
        assert!(!d.take_count(), "nothing changed");
        d.event(&EngineEvent::Delivery {
            key: "k".into(),
            kind: SendKind::Reply,
            channel: "telegram".into(),
            to: "1".into(),
            account_id: None,
            text: "hi".into(),
            outbox_id: 9,
        });
        assert!(d.select(Some("k")), "a delivery queued there: read again");
        assert!(!d.select(Some("k")));
        d.loaded("k", Ok(vec![reply(9, 1_000, "hi", OutboxStatus::Queued)]));
        d.event(&EngineEvent::DeliveryUpdated {
            outbox_id: 9,
            channel: "telegram".into(),
            status: OutboxStatus::Retrying,
            attempt: 1,
            message_id: None,
            next_at: Some(5_000),
            error: Some("429".into()),
        });
        assert_eq!(d.rows[0].status, OutboxStatus::Retrying);
        assert_eq!(
            d.mark(&line(900, "hi"), 1_000).as_deref(),
            Some("⚠ not delivered yet: retrying (next attempt in 4 s) to telegram group:-1 · 429")
        );
        assert!(d.take_count(), "a change asks for the counts again");
    }

    /// The console showed a failed reply as "sending" for good: the read begun when the reply
    /// was queued answered after the failure's event, with the row as it was before.
    #[test]
    fn a_change_during_a_read_is_read_again_after_it() {
        let mut d = Deliveries::new();
        assert!(d.select(Some("k")));
        d.event(&EngineEvent::DeliveryUpdated {
            outbox_id: 9,
            channel: "telegram".into(),
            status: OutboxStatus::Failed,
            attempt: 1,
            message_id: None,
            next_at: None,
            error: Some("400".into()),
        });
        assert!(!d.select(Some("k")), "not while the read is under way");
        d.loaded("k", Ok(vec![reply(9, 1, "hi", OutboxStatus::Sending)]));
        assert!(
            d.select(Some("k")),
            "the answer may predate the change: read again"
        );
        d.loaded("k", Ok(vec![reply(9, 1, "hi", OutboxStatus::Failed)]));
        assert!(!d.select(Some("k")));
        assert_eq!(d.rows[0].status, OutboxStatus::Failed);
    }

    #[test]
    fn an_engine_without_deliveries_is_not_asked_again() {
        let mut d = Deliveries::new();
        assert!(d.take_count());
        d.counted(Err(ApiError::Unavailable("no outbox".into())));
        d.missed();
        assert!(!d.take_count());
        assert!(!d.select(Some("k")));
        assert_eq!(d.failed(), None);
    }
}
