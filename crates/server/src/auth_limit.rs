//! The failed-connect limit: refused connects are counted per peer address and across all
//! addresses (GCRA rate limits from `governor`). Past either rate, a refusal says "too many
//! failed attempts; retry in N s" and is held back for `TARPIT` before it is sent, so
//! guesses cannot be tried at network speed even from a spray of source addresses. The
//! limit is keyed on failures only and looked at only after the token: a correct token is
//! admitted whatever strangers did before it.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The numbers of the limit (`Options::auth_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthLimit {
    /// Failures one address may have in `window` before it is over the limit.
    pub max_failures: u32,
    /// Failures all addresses together may have in `window`.
    pub max_failures_global: u32,
    pub window: Duration,
}

impl Default for AuthLimit {
    fn default() -> Self {
        AuthLimit {
            max_failures: 5,
            max_failures_global: 60,
            window: Duration::from_secs(60),
        }
    }
}

/// How long a refusal past the limit is held back before it is sent.
pub const TARPIT: Duration = Duration::from_secs(2);

/// Addresses tracked at once. Only failures within the global rate reach the per-address
/// table, so it grows by at most `max_failures_global` addresses a window; this is the
/// backstop that clears it if it ever gets this large.
const MAX_PEERS: usize = 10_000;

pub struct Limiter {
    limit: AuthLimit,
    /// In a mutex only so it can be replaced whole when it is full of live entries.
    per_address: Mutex<DefaultKeyedRateLimiter<IpAddr>>,
    per_address_quota: Quota,
    global: DefaultDirectRateLimiter,
}

/// A failure rate: `n` failures allowed at once, then one more every `window / n`.
fn quota(n: u32, window: Duration) -> Quota {
    let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    let period = (window / n.get()).max(Duration::from_millis(1));
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(n)
}

impl Limiter {
    pub fn new(limit: AuthLimit) -> Limiter {
        let per_address_quota = quota(limit.max_failures, limit.window);
        Limiter {
            limit,
            per_address: Mutex::new(RateLimiter::keyed(per_address_quota)),
            per_address_quota,
            global: RateLimiter::direct(quota(limit.max_failures_global, limit.window)),
        }
    }

    /// The numbers this limiter keeps.
    pub fn numbers(&self) -> AuthLimit {
        self.limit
    }

    /// Records a refused connect from `peer`. `Err(wait)`: this failure is past the
    /// address's or the global rate; `wait` is how long until one more would be within it.
    pub fn failed(&self, peer: Option<IpAddr>) -> Result<(), Duration> {
        let clock = DefaultClock::default();
        if let Err(not_until) = self.global.check() {
            return Err(not_until.wait_time_from(clock.now()));
        }
        let Some(ip) = peer else {
            return Ok(());
        };
        let mut per_address = self.per_address.lock().unwrap_or_else(|p| p.into_inner());
        if per_address.len() >= MAX_PEERS {
            per_address.retain_recent();
            if per_address.len() >= MAX_PEERS {
                // Still full of live entries: forget them rather than grow (the global limit
                // still holds meanwhile).
                *per_address = RateLimiter::keyed(self.per_address_quota);
            }
        }
        per_address
            .check_key(&ip)
            .map_err(|not_until| not_until.wait_time_from(clock.now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per: u32, global: u32) -> Limiter {
        Limiter::new(AuthLimit {
            max_failures: per,
            max_failures_global: global,
            window: Duration::from_secs(3600),
        })
    }

    #[test]
    fn an_address_is_over_the_limit_after_max_failures_and_only_that_address() {
        let l = limit(3, 100);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        for _ in 0..3 {
            assert_eq!(l.failed(Some(a)), Ok(()));
        }
        let wait = l
            .failed(Some(a))
            .expect_err("over the limit after 3 failures");
        assert!(wait > Duration::from_secs(1000), "{wait:?}");
        assert_eq!(l.failed(Some(b)), Ok(()));
    }

    #[test]
    fn a_spray_of_addresses_meets_the_global_limit() {
        let l = limit(5, 10);
        let over = (0..200u8)
            .filter(|i| l.failed(Some(IpAddr::from([127, 5, 0, *i]))).is_err())
            .count();
        assert_eq!(
            over, 190,
            "each address failed once; the global rate stops all but 10"
        );
    }
}
