//! Where one outbound delivery stands (the outbox's statuses): stored by the stores, shown
//! by the console and `switchboard deliveries`, carried by `EngineEvent::DeliveryUpdated`;
//! the outbox's rows as stores keep them and front ends read them (`SessionsApi::deliveries`).

use serde::{Deserialize, Serialize};

/// Where one delivery stands. Stored as its lowercase name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxStatus {
    /// Waiting for a drain with an adapter for its channel.
    #[default]
    Queued,
    /// Claimed by a drain (`claimed_by`) and being sent; a claim whose owner died is taken
    /// again (at least once).
    Sending,
    /// The channel accepted it (`message_id`).
    Sent,
    /// A send failed in a way worth trying again, at `next_at`.
    Retrying,
    /// Given up: the channel refused it or the last attempt failed (`last_error`).
    Failed,
}

impl OutboxStatus {
    pub const ALL: [OutboxStatus; 5] = [
        OutboxStatus::Queued,
        OutboxStatus::Sending,
        OutboxStatus::Sent,
        OutboxStatus::Retrying,
        OutboxStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Queued => "queued",
            OutboxStatus::Sending => "sending",
            OutboxStatus::Sent => "sent",
            OutboxStatus::Retrying => "retrying",
            OutboxStatus::Failed => "failed",
        }
    }

    /// The status a stored name means, for showing it; an unknown name (a newer build's)
    /// reads as `queued`. Claims match the stored words, so such a row is never claimed.
    pub fn parse(s: &str) -> OutboxStatus {
        OutboxStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .unwrap_or_default()
    }
}

impl std::fmt::Display for OutboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message handed to a channel, and how its delivery stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxRow {
    pub id: i64,
    pub created_at: i64,
    pub session_key: String,
    pub kind: String,
    pub channel: String,
    pub to: String,
    pub account_id: Option<String>,
    pub thread_id: Option<String>,
    pub text: String,
    pub status: OutboxStatus,
    pub run_id: Option<String>,
    pub flow_id: Option<String>,
    /// Sends started so far (a claim counts one).
    pub attempt: u32,
    /// When the row is due (queued / retrying), ms since the epoch.
    pub next_at: Option<i64>,
    /// The engine instance sending it (status `sending`).
    pub claimed_by: Option<String>,
    /// When a `sending` claim lapses and another drain may take the row (its owner is
    /// presumed dead).
    pub claim_until: Option<i64>,
    /// The channel's id of the sent message.
    pub message_id: Option<String>,
    /// Why the last attempt failed, or why the row waits (channel stopped).
    pub last_error: Option<String>,
    /// When the status last changed.
    pub updated_at: Option<i64>,
}

impl OutboxRow {
    /// Where the delivery stands, in words: `sent (message 42)`, `retrying (next attempt in
    /// 4 s)`, `failed: <why>`, `queued`, `sending (attempt 2)`. `now`: ms since the epoch.
    pub fn state_words(&self, now: i64) -> String {
        match self.status {
            OutboxStatus::Retrying => match self.next_at {
                Some(at) if at > now => {
                    format!("retrying (next attempt in {} s)", (at - now + 999) / 1000)
                }
                _ => "retrying (due now)".to_string(),
            },
            OutboxStatus::Sent => match &self.message_id {
                Some(id) => format!("sent (message {id})"),
                None => "sent".to_string(),
            },
            OutboxStatus::Failed => match &self.last_error {
                Some(why) => format!("failed: {why}"),
                None => "failed".to_string(),
            },
            OutboxStatus::Sending if self.attempt > 1 => {
                format!("sending (attempt {})", self.attempt)
            }
            s => s.as_str().to_string(),
        }
    }

    /// Where the delivery stands with its route, in one line: `sent to telegram group:-1
    /// (message 42)`, `failed to reach telegram 5: <why> · \`switchboard deliveries retry 7\``.
    pub fn route_words(&self, now: i64) -> String {
        let to = format!("{} {}", self.channel, self.to);
        match self.status {
            OutboxStatus::Queued => format!("queued for {to}"),
            OutboxStatus::Sending => format!("sending to {to}"),
            OutboxStatus::Sent => match &self.message_id {
                Some(id) => format!("sent to {to} (message {id})"),
                None => format!("sent to {to}"),
            },
            OutboxStatus::Retrying => {
                let mut s = format!("{} to {to}", self.state_words(now));
                if let Some(e) = &self.last_error {
                    s.push_str(&format!(" · {e}"));
                }
                s
            }
            OutboxStatus::Failed => format!(
                "failed to reach {to}: {} · `switchboard deliveries retry {}` sends it again",
                self.last_error.as_deref().unwrap_or("no reason recorded"),
                self.id
            ),
        }
    }

    /// Apply `e` when it is a `DeliveryUpdated` of this row; whether it was.
    pub fn apply(&mut self, e: &super::EngineEvent) -> bool {
        match e {
            super::EngineEvent::DeliveryUpdated {
                outbox_id,
                status,
                attempt,
                message_id,
                next_at,
                error,
                ..
            } if *outbox_id == self.id => {
                self.status = *status;
                self.attempt = *attempt;
                self.message_id = message_id.clone().or(self.message_id.take());
                self.next_at = *next_at;
                self.last_error = error.clone();
                true
            }
            _ => false,
        }
    }
}

/// Which rows a list of deliveries holds, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboxQuery {
    /// Only `failed` rows.
    pub failed_only: bool,
    pub limit: u32,
    /// Only this session's rows.
    pub session_key: Option<String>,
    /// Only this exchange's rows (with `session_key`: the exchange's rows are its
    /// target's, and the session's index finds them).
    pub flow_id: Option<String>,
}

/// How many deliveries stand in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeliveryCounts {
    pub queued: u64,
    pub sending: u64,
    pub sent: u64,
    pub retrying: u64,
    pub failed: u64,
}

impl DeliveryCounts {
    /// Count one more row in `status`.
    pub fn add(&mut self, status: OutboxStatus, n: u64) {
        let slot = match status {
            OutboxStatus::Queued => &mut self.queued,
            OutboxStatus::Sending => &mut self.sending,
            OutboxStatus::Sent => &mut self.sent,
            OutboxStatus::Retrying => &mut self.retrying,
            OutboxStatus::Failed => &mut self.failed,
        };
        *slot += n;
    }

    /// Each status with its count.
    pub fn by_status(&self) -> [(OutboxStatus, u64); 5] {
        [
            (OutboxStatus::Queued, self.queued),
            (OutboxStatus::Sending, self.sending),
            (OutboxStatus::Sent, self.sent),
            (OutboxStatus::Retrying, self.retrying),
            (OutboxStatus::Failed, self.failed),
        ]
    }

    /// Not yet sent nor given up on.
    pub fn pending(&self) -> u64 {
        self.queued + self.sending + self.retrying
    }
}
