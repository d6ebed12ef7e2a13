//! The inbound side of the Telegram channel: long polling (`getUpdates`) from the offset the
//! caller kept, each message judged by the access rules, the admitted ones handed to an
//! `Inbox` (which records them in their session), and the offset moved past an update only
//! once its message is recorded, then saved. A crash between recording and saving hands the
//! same update over again: the inbox recognises it by its id (`Inbox::take` gets it), so a
//! message is recorded once. Failures wait with a backoff (Telegram's `retry_after` when it
//! gives one); a refused token stops the loop and says so.

use std::future::Future;
use std::time::Duration;

use backon::BackoffBuilder;

use crate::access::{Access, Admit, Ignored};
use crate::bot::Bot;
use crate::error::TelegramError;
use crate::types::User;

/// How long one `getUpdates` waits for something to arrive.
pub const LONG_POLL: Duration = Duration::from_secs(25);

/// Where admitted messages go, and where the offset is kept.
pub trait Inbox: Send + Sync {
    /// Record `admitted` (from update `update_id`); `Err` leaves the update to be taken
    /// again. The same update may come twice after a crash: record it once.
    fn take(
        &self,
        update_id: i64,
        admitted: Admit,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Keep `offset` (the next update wanted) for the next start.
    fn save_offset(&self, offset: i64) -> impl Future<Output = ()> + Send;

    /// A message was ignored, and why (for the channel's counts).
    fn ignored(&self, why: Ignored);
}

/// Why polling stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The token was refused: the channel is down until it is fixed.
    Revoked(String),
    /// `stop` resolved.
    Asked,
}

/// Poll until `stop` resolves or the token is refused, starting after `offset`.
pub async fn run<I: Inbox>(
    bot: &Bot,
    me: &User,
    access: &Access,
    mut offset: Option<i64>,
    inbox: &I,
    stop: impl Future<Output = ()>,
) -> Stopped {
    let polling = async {
        let mut backoff = failure_backoff();
        loop {
            match bot.get_updates(offset, LONG_POLL).await {
                Ok(updates) => {
                    backoff = failure_backoff();
                    for update in updates {
                        if let Some(message) = &update.message {
                            match access.admit(message, me) {
                                Admit::Ignored(why) => inbox.ignored(why),
                                admitted => {
                                    if let Err(e) = inbox.take(update.update_id, admitted).await {
                                        // Not confirmed: asked for again after a pause.
                                        tracing::warn!(update = update.update_id, error = %e, "a Telegram message could not be recorded; it is asked for again");
                                        tokio::time::sleep(backoff.next().unwrap_or(MAX_PAUSE))
                                            .await;
                                        break;
                                    }
                                }
                            }
                        }
                        offset = Some(update.update_id + 1);
                    }
                    if let Some(next) = offset {
                        inbox.save_offset(next).await;
                    }
                }
                Err(e) if e.revoked() => return Stopped::Revoked(e.to_string()),
                Err(e) => {
                    let pause = pause_after(&e, &mut backoff);
                    tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "polling Telegram failed; trying again");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    };
    tokio::select! {
        stopped = polling => stopped,
        () = stop => Stopped::Asked,
    }
}

/// The longest pause between failed polls.
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Pauses between failed polls: 1 s doubling to a minute, with jitter, for as long as they
/// fail.
fn failure_backoff() -> backon::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(MAX_PAUSE)
        .with_jitter()
        .without_max_times()
        .build()
}

/// How long to wait after `e`: what Telegram asked for, else the next backoff step.
fn pause_after(e: &TelegramError, backoff: &mut backon::ExponentialBackoff) -> Duration {
    match e.retry() {
        Some(Some(asked)) => asked,
        _ => backoff.next().unwrap_or(MAX_PAUSE),
    }
}
