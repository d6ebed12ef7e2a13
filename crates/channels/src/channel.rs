//! The outbound seam every adapter implements: send one delivery, and say how a failure
//! should be treated (retry, give up on this message, or stop the whole channel).

use std::time::Duration;

use async_trait::async_trait;
use switchboard_store::OutboxRow;

/// What a channel gave back for an accepted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The channel's id of the message (Telegram's `message_id`, a webhook receiver's
    /// answer or the delivery's own key when it gives none).
    pub message_id: String,
}

/// Why a send failed, by what the drain does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Worth trying again (429, 5xx, a timeout, the connection refused): after `after`
    /// when the channel said (`Retry-After`, Telegram's `retry_after`), else by backoff.
    #[error("{reason}")]
    Retry {
        after: Option<Duration>,
        reason: String,
    },
    /// This message will never go (400: unknown chat, message refused): failed now.
    #[error("{reason}")]
    Fatal { reason: String },
    /// The channel's credentials were refused (401/403): the whole channel stops, the
    /// others keep sending; its deliveries wait.
    #[error("{reason}")]
    Revoked { reason: String },
    /// Parts of a long message were accepted (`sent`: their ids, comma-separated, the ones
    /// earlier attempts had accepted first), then the next part failed with `then`.
    #[error("{then} (after parts {sent} were sent)")]
    Partly { sent: String, then: Box<SendError> },
}

/// Sends a message's `parts` in order with `post` (the part's index and text → its id),
/// skipping the parts an earlier attempt had accepted (their ids are `row.message_id`), so a
/// retry after a failure part-way posts only the rest. All the ids once every part went;
/// `SendError::Partly` when a part fails after others went.
pub async fn send_parts<F, Fut>(
    row: &OutboxRow,
    parts: &[String],
    mut post: F,
) -> Result<Sent, SendError>
where
    F: FnMut(usize, String) -> Fut,
    Fut: std::future::Future<Output = Result<String, SendError>>,
{
    let mut ids: Vec<String> = row
        .message_id
        .as_deref()
        .filter(|m| !m.is_empty())
        .map(|m| m.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    // More ids than parts: a row written otherwise (a single id of a one-part message
    // sent); nothing is left to send.
    for (i, part) in parts.iter().enumerate().skip(ids.len()) {
        match post(i, part.clone()).await {
            Ok(id) => ids.push(id),
            Err(e) if ids.is_empty() => return Err(e),
            Err(e) => {
                return Err(SendError::Partly {
                    sent: ids.join(","),
                    then: Box::new(e),
                });
            }
        }
    }
    Ok(Sent {
        message_id: ids.join(","),
    })
}

/// Whether a channel recognises a repeated delivery, which decides what a crash between its
/// accepting a message and our recording it costs (docs/ARCHITECTURE.md, "Channels").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    /// Each delivery carries an idempotency key (its outbox id) the receiver can drop
    /// repeats by: at most once as the receiver sees it, if it honours the key.
    IdempotencyKey,
    /// No way to tell a repeat: at least once.
    None,
}

/// An outbound channel adapter.
#[async_trait]
pub trait Channel: Send + Sync {
    /// The channel's name as deliveries name it (`webhook`, `telegram`, …).
    fn kind(&self) -> &str;

    /// Which of this channel's deliveries it sends: for a webhook, its name (a delivery's
    /// `to`); `None` for a channel that sends all of its kind.
    fn instance(&self) -> Option<&str> {
        None
    }

    fn dedup(&self) -> Dedup;

    /// Send one delivery. Must end by itself (its own timeouts).
    async fn send(&self, delivery: &OutboxRow) -> Result<Sent, SendError>;
}

/// How a failed HTTP answer is classed, for adapters over HTTP APIs: 429 and 5xx retry
/// (after `retry_after` when given), 401/403 stop the channel, any other 4xx fails the
/// message.
pub fn class_of_status(status: u16, retry_after: Option<Duration>, reason: String) -> SendError {
    match status {
        429 | 500..=599 | 408 => SendError::Retry {
            after: retry_after,
            reason,
        },
        401 | 403 => SendError::Revoked { reason },
        _ => SendError::Fatal { reason },
    }
}
