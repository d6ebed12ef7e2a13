//! Sessions the book shows with a run going are read again when the gateway has said nothing
//! of them for a while: the run's end may have been lost (a dropped event, a gateway that
//! restarted and forgot the run), and a round shown "running" would stay so forever. The
//! session's row (`sessions.describe`: `hasActiveRun`) and newest lines (`chat.history`) then
//! say what the record says: the reply, or no reply and no run (the round "not recorded"
//! once the exchange settles), or a run still going (checked again later).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::events::Activity;
use crate::rpc::Rpc;

/// A session shown running and silent this long is read again. OpenClaw waits at most 60 s
/// for each step of an exchange, so a run quiet for longer has most likely ended unseen.
pub const RECHECK_AFTER: Duration = Duration::from_secs(90);

/// Sessions read again per check at most (the rest wait for the next one).
const PER_CHECK: usize = 16;

/// When each session shown running was first seen so (a row read at the backfill has no
/// event to date it from).
#[derive(Debug, Default)]
pub struct Rechecks {
    noticed: HashMap<String, Instant>,
}

impl Rechecks {
    /// The sessions of `running` due for a re-read: nothing heard of them (an event, or the
    /// last re-read) for `after`. Each one due is dated now, so it is read once per `after`.
    pub fn due(
        &mut self,
        running: &HashSet<String>,
        activity: &Activity,
        after: Duration,
    ) -> Vec<String> {
        let now = Instant::now();
        self.noticed.retain(|k, _| running.contains(k));
        let mut out = Vec::new();
        for k in running {
            let noticed = *self.noticed.entry(k.clone()).or_insert(now);
            let heard = activity.of(k).map_or(noticed, |s| s.last.max(noticed));
            if out.len() < PER_CHECK && now.duration_since(heard) >= after {
                self.noticed.insert(k.clone(), now);
                out.push(k.clone());
            }
        }
        out.sort();
        out
    }
}

/// A session read again: its row (`Some(None)`: the gateway has no such session any more)
/// and its newest lines, each `None` when that read failed.
#[derive(Debug)]
pub struct Reread {
    pub key: String,
    pub row: Option<Option<Value>>,
    pub page: Option<Value>,
}

/// Read `key`'s newest `lines` lines, and its row too when `with_row`.
pub async fn read(rpc: &dyn Rpc, key: String, lines: usize, with_row: bool) -> Reread {
    let row = if with_row {
        match rpc
            .request("sessions.describe", json!({ "key": key }))
            .await
        {
            Ok(p) => Some(p.get("session").filter(|s| s.is_object()).cloned()),
            Err(e) => {
                tracing::warn!("openclaw: re-checking {key}'s row failed: {e}");
                None
            }
        }
    } else {
        None
    };
    let page = rpc
        .request("chat.history", json!({ "sessionKey": key, "limit": lines }))
        .await;
    if let Err(e) = &page {
        tracing::warn!("openclaw: re-reading {key} failed: {e}");
    }
    Reread {
        key,
        row,
        page: page.ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session is due once it has been shown running and unheard of for the whole
    /// re-check time, counted from when it was first seen so; then once per that time.
    #[test]
    fn a_silent_running_session_is_due_once_per_period() {
        let after = Duration::from_millis(50);
        let running: HashSet<String> = ["agent:main:a".to_string()].into();
        let (mut checks, activity) = (Rechecks::default(), Activity::default());
        assert!(checks.due(&running, &activity, after).is_empty());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(checks.due(&running, &activity, after), ["agent:main:a"]);
        assert!(checks.due(&running, &activity, after).is_empty());
        // No longer shown running: forgotten.
        assert!(checks.due(&HashSet::new(), &activity, after).is_empty());
        assert!(checks.noticed.is_empty());
    }
}
