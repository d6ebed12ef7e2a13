//! The outbox drain: claims due deliveries from the store, sends each through its channel's
//! adapter with bounded concurrency, and records what the channel answered (sent with its
//! message id, retrying at a time, failed with the reason, or held while its channel is
//! stopped). Several drains (nodes) share one outbox safely: a claim takes rows no other
//! holds, and an outcome is recorded only under the claim that sent it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_store::{OutboxClaim, OutboxOutcome, OutboxRow, OutboxStatus, Store};
use switchboard_types::api::time::now_ms;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use crate::channel::{Channel, SendError, Sent};
use crate::retry::RetryPolicy;

/// How a drain runs.
#[derive(Debug, Clone)]
pub struct DrainOptions {
    /// The engine instance claiming rows (its id: a dead one's claims are released).
    pub owner: String,
    /// How often the outbox is looked at when nothing woke the drain.
    pub poll: Duration,
    /// Rows claimed at a time.
    pub batch: u32,
    /// Sends in flight at once, over all channels.
    pub concurrency: usize,
    /// How long a claim holds a row: past it, the sender is presumed dead and the row is
    /// claimed again (at least once). Longer than any adapter's own timeout.
    pub claim_for: Duration,
    /// How long a delivery whose channel is stopped (or not set up here) waits before it
    /// is looked at again.
    pub hold: Duration,
}

impl DrainOptions {
    pub fn new(owner: String) -> DrainOptions {
        DrainOptions {
            owner,
            poll: Duration::from_millis(500),
            batch: 128,
            concurrency: 32,
            claim_for: Duration::from_secs(120),
            hold: Duration::from_secs(30),
        }
    }
}

/// One configured adapter, with its retry policy and whether it was stopped.
pub struct Adapter {
    channel: Arc<dyn Channel>,
    retry: RetryPolicy,
    /// Why the channel was stopped (its credentials refused); `None` while it sends.
    stopped: Mutex<Option<String>>,
}

impl Adapter {
    pub fn new(channel: Arc<dyn Channel>, retry: RetryPolicy) -> Adapter {
        Adapter {
            channel,
            retry,
            stopped: Mutex::new(None),
        }
    }

    /// `kind` or `kind:instance`, as logs and messages name the channel.
    pub fn name(&self) -> String {
        match self.channel.instance() {
            Some(i) => format!("{}:{i}", self.channel.kind()),
            None => self.channel.kind().to_string(),
        }
    }

    fn serves(&self, row: &OutboxRow) -> bool {
        self.channel.kind() == row.channel && self.channel.instance().is_none_or(|i| i == row.to)
    }

    fn stopped(&self) -> Option<String> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stop the channel; true the first time (so it is said once).
    fn stop(&self, reason: &str) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        let first = stopped.is_none();
        if first {
            *stopped = Some(reason.to_string());
        }
        first
    }
}

/// Called with each row whose status the drain changed (the composition root turns it into
/// `EngineEvent::DeliveryUpdated`).
pub type OnUpdate = Arc<dyn Fn(&OutboxRow) + Send + Sync>;

/// A drain to start: the store, the adapters, the options.
pub struct Drain {
    store: Arc<dyn Store>,
    adapters: Vec<Arc<Adapter>>,
    options: DrainOptions,
    on_update: OnUpdate,
}

/// A running drain.
pub struct DrainHandle {
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl DrainHandle {
    /// Look at the outbox now (a delivery was queued).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// A cheap handle that only wakes the drain.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Stop claiming; sends in flight finish and are recorded (each bounded by its
    /// adapter's timeout), then this returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Drain {
    pub fn new(
        store: Arc<dyn Store>,
        adapters: Vec<Arc<Adapter>>,
        options: DrainOptions,
        on_update: OnUpdate,
    ) -> Drain {
        Drain {
            store,
            adapters,
            options,
            on_update,
        }
    }

    /// The channel kinds this drain claims for.
    fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .adapters
            .iter()
            .map(|a| a.channel.kind().to_string())
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Start draining in the background (inside a tokio runtime).
    pub fn start(self) -> DrainHandle {
        let wake = Arc::new(Notify::new());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(Arc::new(self).run(wake.clone(), stopped));
        DrainHandle { wake, stop, task }
    }

    async fn run(self: Arc<Self>, wake: Arc<Notify>, mut stopped: watch::Receiver<bool>) {
        let kinds = self.kinds();
        if kinds.is_empty() {
            return;
        }
        let permits = Arc::new(Semaphore::new(self.options.concurrency.max(1)));
        let mut sends = JoinSet::new();
        loop {
            if *stopped.borrow() {
                break;
            }
            let claimed = self.claim(&kinds).await;
            let full = claimed.len() as u32 >= self.options.batch;
            for row in claimed {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                let me = self.clone();
                sends.spawn(async move {
                    me.deliver(row).await;
                    drop(permit);
                });
                // Finished sends are collected as they go (each records its own outcome).
                while sends.try_join_next().is_some() {}
            }
            if full {
                // More may be due: claim again at once.
                continue;
            }
            tokio::select! {
                _ = stopped.changed() => {}
                _ = wake.notified() => {}
                _ = tokio::time::sleep(self.options.poll) => {}
            }
        }
        // In-flight sends end by their adapters' timeouts; they are recorded, not dropped.
        while sends.join_next().await.is_some() {}
    }

    async fn claim(&self, kinds: &[String]) -> Vec<OutboxRow> {
        let now = now_ms();
        let claim = OutboxClaim {
            owner: self.options.owner.clone(),
            now,
            claim_until: now + self.options.claim_for.as_millis() as i64,
            limit: self.options.batch,
            channels: kinds.to_vec(),
        };
        match self.store.claim_outbox(claim).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim deliveries from the outbox; trying again");
                Vec::new()
            }
        }
    }

    /// Send one claimed row and record the outcome.
    async fn deliver(&self, mut row: OutboxRow) {
        (self.on_update)(&row);
        let adapter = self.adapters.iter().find(|a| a.serves(&row));
        let hold = self.options.hold;
        let outcome = match adapter {
            None => OutboxOutcome::Held {
                next_at: now_ms() + hold.as_millis() as i64,
                error: format!(
                    "no {} channel for \"{}\" is configured on this node",
                    row.channel, row.to
                ),
            },
            Some(a) => match a.stopped() {
                Some(why) => held_for_stopped(a, &why, hold),
                None => {
                    let sent = a.channel.send(&row).await;
                    if let Some(reason) = revoked(&sent)
                        && a.stop(reason)
                    {
                        tracing::error!(
                            channel = %a.name(),
                            %reason,
                            "channel stopped: its credentials were refused; its deliveries wait \
                             (fix the config and restart); the other channels keep sending"
                        );
                    }
                    decide(&row, sent, &a.retry, now_ms(), hold, &a.name())
                }
            },
        };
        let now = now_ms();
        match self
            .store
            .record_outbox(row.id, &self.options.owner, now, outcome.clone())
            .await
        {
            Ok(true) => {
                apply(&mut row, &outcome, now);
                log_outcome(&row);
                (self.on_update)(&row);
            }
            Ok(false) => tracing::warn!(
                outbox_id = row.id,
                "a delivery's claim lapsed before its outcome was recorded; another drain has it"
            ),
            Err(e) => tracing::warn!(
                outbox_id = row.id,
                error = %e,
                "cannot record a delivery's outcome; it is sent again once its claim lapses"
            ),
        }
    }
}

/// Why the channel refused its credentials, if it did (after some parts went, too).
fn revoked(sent: &Result<Sent, SendError>) -> Option<&str> {
    match sent {
        Err(SendError::Revoked { reason }) => Some(reason),
        Err(SendError::Partly { then, .. }) => match then.as_ref() {
            SendError::Revoked { reason } => Some(reason),
            _ => None,
        },
        _ => None,
    }
}

fn held_for_stopped(a: &Adapter, why: &str, hold: Duration) -> OutboxOutcome {
    OutboxOutcome::Held {
        next_at: now_ms() + hold.as_millis() as i64,
        error: format!("channel {} stopped: {why}", a.name()),
    }
}

/// The state machine: what a send's result makes of the row (pure, for tests).
pub fn decide(
    row: &OutboxRow,
    sent: Result<Sent, SendError>,
    retry: &RetryPolicy,
    now: i64,
    hold: Duration,
    channel: &str,
) -> OutboxOutcome {
    match sent {
        Ok(Sent { message_id }) => OutboxOutcome::Sent { message_id },
        Err(SendError::Fatal { reason }) => OutboxOutcome::Failed { error: reason },
        Err(SendError::Revoked { reason }) => OutboxOutcome::Held {
            next_at: now + hold.as_millis() as i64,
            error: format!("channel {channel} stopped: {reason}"),
        },
        // What the failure makes of it, with the parts that went kept.
        Err(SendError::Partly { sent, then }) => OutboxOutcome::Partly {
            sent,
            then: Box::new(decide(row, Err(*then), retry, now, hold, channel)),
        },
        Err(SendError::Retry { after, reason }) => match retry.next_delay(row.attempt, after) {
            Some(delay) => OutboxOutcome::Retry {
                next_at: now + delay.as_millis() as i64,
                error: reason,
            },
            None => OutboxOutcome::Failed {
                error: format!("{reason} (gave up after {} attempts)", row.attempt),
            },
        },
    }
}

/// The row as the store now holds it after `outcome` (what `record_outbox` wrote).
fn apply(row: &mut OutboxRow, outcome: &OutboxOutcome, now: i64) {
    let c = outcome.columns();
    row.status = c.status;
    row.next_at = c.next_at;
    if let Some(id) = c.message_id {
        row.message_id = Some(id.to_string());
    }
    row.last_error = c.last_error.map(str::to_string);
    row.attempt = row.attempt.saturating_sub(c.uncount as u32);
    row.claimed_by = None;
    row.claim_until = None;
    row.updated_at = Some(now);
}

fn log_outcome(row: &OutboxRow) {
    match row.status {
        OutboxStatus::Sent => tracing::info!(
            outbox_id = row.id,
            channel = %row.channel,
            attempt = row.attempt,
            message_id = row.message_id.as_deref().unwrap_or(""),
            "delivery sent"
        ),
        OutboxStatus::Failed => tracing::warn!(
            outbox_id = row.id,
            channel = %row.channel,
            attempt = row.attempt,
            error = row.last_error.as_deref().unwrap_or(""),
            "delivery failed"
        ),
        _ => tracing::info!(
            outbox_id = row.id,
            channel = %row.channel,
            status = %row.status,
            attempt = row.attempt,
            next_at = row.next_at.unwrap_or_default(),
            error = row.last_error.as_deref().unwrap_or(""),
            "delivery not sent yet"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(attempt: u32) -> OutboxRow {
        OutboxRow {
            id: 1,
            status: OutboxStatus::Sending,
            attempt,
            ..OutboxRow::default()
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            jitter: false,
        }
    }

    const HOLD: Duration = Duration::from_secs(30);

    fn retry(after: Option<Duration>) -> Result<Sent, SendError> {
        Err(SendError::Retry {
            after,
            reason: "HTTP 500".into(),
        })
    }

    #[test]
    fn a_send_accepted_is_sent_with_the_channels_id() {
        let sent = Ok(Sent {
            message_id: "m7".into(),
        });
        assert_eq!(
            decide(&row(1), sent, &policy(), 0, HOLD, "webhook:a"),
            OutboxOutcome::Sent {
                message_id: "m7".into()
            }
        );
    }

    #[test]
    fn a_retryable_failure_is_retried_by_backoff_or_the_channels_wait_until_the_last() {
        let by_backoff = decide(&row(1), retry(None), &policy(), 1_000, HOLD, "w");
        assert_eq!(
            by_backoff,
            OutboxOutcome::Retry {
                next_at: 1_100,
                error: "HTTP 500".into()
            }
        );
        let asked = decide(
            &row(2),
            retry(Some(Duration::from_secs(2))),
            &policy(),
            1_000,
            HOLD,
            "w",
        );
        assert_eq!(
            asked,
            OutboxOutcome::Retry {
                next_at: 3_000,
                error: "HTTP 500".into()
            }
        );
        assert_eq!(
            decide(&row(3), retry(None), &policy(), 1_000, HOLD, "w"),
            OutboxOutcome::Failed {
                error: "HTTP 500 (gave up after 3 attempts)".into()
            }
        );
    }

    #[test]
    fn a_refused_message_fails_at_once_and_a_revoked_channel_holds_it() {
        let fatal = Err(SendError::Fatal {
            reason: "HTTP 400: chat not found".into(),
        });
        assert_eq!(
            decide(&row(1), fatal, &policy(), 0, HOLD, "w"),
            OutboxOutcome::Failed {
                error: "HTTP 400: chat not found".into()
            }
        );
        let revoked = Err(SendError::Revoked {
            reason: "HTTP 401".into(),
        });
        assert_eq!(
            decide(&row(1), revoked, &policy(), 0, HOLD, "webhook:a"),
            OutboxOutcome::Held {
                next_at: 30_000,
                error: "channel webhook:a stopped: HTTP 401".into()
            }
        );
    }

    #[test]
    fn parts_that_went_before_a_failure_are_kept_with_its_outcome() {
        let partly = Err(SendError::Partly {
            sent: "11,12".into(),
            then: Box::new(SendError::Retry {
                after: None,
                reason: "HTTP 500".into(),
            }),
        });
        let outcome = decide(&row(1), partly, &policy(), 1_000, HOLD, "telegram");
        assert_eq!(
            outcome,
            OutboxOutcome::Partly {
                sent: "11,12".into(),
                then: Box::new(OutboxOutcome::Retry {
                    next_at: 1_100,
                    error: "HTTP 500".into()
                }),
            }
        );
        let mut r = row(1);
        apply(&mut r, &outcome, 1_000);
        assert_eq!(r.status, OutboxStatus::Retrying);
        assert_eq!(r.message_id.as_deref(), Some("11,12"));
        assert_eq!(r.next_at, Some(1_100));
    }

    #[test]
    fn applying_an_outcome_gives_the_stored_row() {
        let mut r = row(2);
        r.claimed_by = Some("me".into());
        apply(
            &mut r,
            &OutboxOutcome::Held {
                next_at: 5,
                error: "stopped".into(),
            },
            3,
        );
        assert_eq!(r.status, OutboxStatus::Retrying);
        assert_eq!(r.attempt, 1, "a held row's claim did not try");
        assert_eq!(r.claimed_by, None);
        assert_eq!(r.next_at, Some(5));
    }
}
