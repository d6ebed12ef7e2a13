//! The outbox as the store keeps it: a message handed to a channel, its delivery status
//! (`queued` → `sending` → `sent` | `retrying` | `failed`), and the operations a drain
//! performs on it (claim due rows, record what the channel answered, list, retry).
//! docs/ARCHITECTURE.md, "Channels", says why each status exists.

use serde::Serialize;

pub use switchboard_types::api::OutboxStatus;

/// A message handed to a channel, and how its delivery stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
        }
    }
}

/// What a row left `sending` by a dead engine says until it is sent again.
pub const RELEASED_ERROR: &str = "the engine sending it stopped before recording the outcome";

/// Which rows `list_outbox` returns, newest first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxQuery {
    /// Only `failed` rows.
    pub failed_only: bool,
    pub limit: u32,
}

/// The columns every outbox read selects, in `OutboxRow`'s order (both stores read them by
/// position).
pub const OUTBOX_COLUMNS: &str = "id, created_at, session_key, kind, channel, recipient, \
account_id, thread_id, text, status, run_id, flow_id, attempt, next_at, claimed_by, \
claim_until, message_id, last_error, updated_at";
