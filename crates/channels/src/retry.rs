//! When a failed delivery is tried again: exponential backoff with jitter from `backon` (the
//! delay before attempt n+1, and when to give up), unless the channel said when
//! (`Retry-After`), which is honoured up to `MAX_RETRY_AFTER`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// The longest a channel's own `Retry-After` is waited (a wrong header must not park a
/// delivery for days).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// A channel's retry settings (`channels.<kind>.<name>.retry` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends in all, the first included.
    pub attempts: u32,
    pub min_delay: Duration,
    pub max_delay: Duration,
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    fn backoff(&self) -> impl Iterator<Item = Duration> {
        let builder = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            // The first send is not a retry.
            .with_max_times(self.attempts.saturating_sub(1) as usize);
        match self.jitter {
            true => builder.with_jitter().build(),
            false => builder.build(),
        }
    }

    /// After attempt `attempt` (1-based) failed: how long until the next, or `None` when
    /// that was the last. `asked`: the channel's own wait, which replaces the backoff's.
    pub fn next_delay(&self, attempt: u32, asked: Option<Duration>) -> Option<Duration> {
        let index = attempt.max(1) as usize - 1;
        let backoff = self.backoff().nth(index)?;
        Some(match asked {
            Some(wait) => wait.min(MAX_RETRY_AFTER),
            None => backoff,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            jitter: false,
        }
    }

    #[test]
    fn delays_grow_to_the_cap_and_stop_after_the_last_attempt() {
        let p = policy(5);
        // In whole ms: the backoff multiplies floats.
        let delays: Vec<_> = (1..=5)
            .map(|a| p.next_delay(a, None).map(|d| d.as_millis()))
            .collect();
        assert_eq!(
            delays,
            vec![Some(100), Some(200), Some(400), Some(400), None]
        );
    }

    #[test]
    fn the_channels_own_wait_replaces_the_backoff_but_not_the_last_attempt() {
        let p = policy(2);
        assert_eq!(
            p.next_delay(1, Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(p.next_delay(2, Some(Duration::from_secs(7))), None);
        assert_eq!(
            p.next_delay(1, Some(Duration::from_secs(86_400))),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn one_attempt_means_no_retry() {
        assert_eq!(policy(1).next_delay(1, None), None);
    }
}
