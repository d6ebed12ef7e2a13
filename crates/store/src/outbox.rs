//! The outbox as the store keeps it: a message handed to a channel, its delivery status
//! (`queued` → `sending` → `sent` | `retrying` | `failed`), and the operations a drain
//! performs on it (claim due rows, record what the channel answered, list, retry).
//! docs/ARCHITECTURE.md, "Channels", says why each status exists.

pub use switchboard_types::api::{DeliveryCounts, OutboxQuery, OutboxRow, OutboxStatus};

/// A drain's claim: up to `limit` due rows of `channels`, marked `sending` by `owner` until
/// `claim_until`. Due: queued or retrying with `next_at <= now`, or `sending` under a claim
/// that lapsed before `now`.
#[derive(Debug, Clone)]
pub struct OutboxClaim {
    pub owner: String,
    pub now: i64,
    pub claim_until: i64,
    pub limit: u32,
    pub channels: Vec<String>,
}

/// What a drain records after a send. Applied only to a row still `sending` under the
/// recording owner's claim (a claim that lapsed and was taken again is the new owner's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxOutcome {
    Sent {
        message_id: String,
    },
    /// Try again at `next_at` (the attempt counts).
    Retry {
        next_at: i64,
        error: String,
    },
    /// Given up.
    Failed {
        error: String,
    },
    /// Not tried (the channel is stopped or not up here): back to waiting at `next_at`, the
    /// claim's attempt not counted.
    Held {
        next_at: i64,
        error: String,
    },
    /// Some parts of a long message were accepted (their ids, comma-separated, kept as the
    /// row's `message_id` so the next attempt sends only the rest), then `then`.
    Partly {
        sent: String,
        then: Box<OutboxOutcome>,
    },
}

/// The columns an outcome writes (both stores apply it with one `UPDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeColumns<'a> {
    pub status: OutboxStatus,
    pub next_at: Option<i64>,
    /// Kept as it was when `None`.
    pub message_id: Option<&'a str>,
    pub last_error: Option<&'a str>,
    /// Attempts to take back (1 for `Held`: the claim did not try).
    pub uncount: i64,
}

impl OutboxOutcome {
    pub fn columns(&self) -> OutcomeColumns<'_> {
        let base = OutcomeColumns {
            status: OutboxStatus::Retrying,
            next_at: None,
            message_id: None,
            last_error: None,
            uncount: 0,
        };
        match self {
            OutboxOutcome::Sent { message_id } => OutcomeColumns {
                status: OutboxStatus::Sent,
                message_id: Some(message_id),
                ..base
            },
            OutboxOutcome::Retry { next_at, error } => OutcomeColumns {
                next_at: Some(*next_at),
                last_error: Some(error),
                ..base
            },
            OutboxOutcome::Failed { error } => OutcomeColumns {
                status: OutboxStatus::Failed,
                last_error: Some(error),
                ..base
            },
            OutboxOutcome::Held { next_at, error } => OutcomeColumns {
                next_at: Some(*next_at),
                last_error: Some(error),
                uncount: 1,
                ..base
            },
            OutboxOutcome::Partly { sent, then } => OutcomeColumns {
                message_id: Some(sent),
                ..then.columns()
            },
        }
    }
}

/// What a row left `sending` by a dead engine says until it is sent again.
pub const RELEASED_ERROR: &str = "the engine sending it stopped before recording the outcome";

/// The columns every outbox read selects, in `OutboxRow`'s order (both stores read them by
/// position).
pub const OUTBOX_COLUMNS: &str = "id, created_at, session_key, kind, channel, recipient, \
account_id, thread_id, text, status, run_id, flow_id, attempt, next_at, claimed_by, \
claim_until, message_id, last_error, updated_at";
