//! Where one outbound delivery stands (the outbox's statuses): stored by the stores, shown
//! by the console and `switchboard deliveries`, carried by `EngineEvent::DeliveryUpdated`.

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
