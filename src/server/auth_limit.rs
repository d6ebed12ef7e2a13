//! The failed-connect limit per peer address: after `max_failures` refused connects within
//! `window`, further connects from that address are refused at once until the window has
//! passed, so a token cannot be guessed at network speed.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The numbers of the limit (`Options::auth_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthLimit {
    pub max_failures: usize,
    pub window: Duration,
}

impl Default for AuthLimit {
    fn default() -> Self {
        AuthLimit {
            max_failures: 5,
            window: Duration::from_secs(60),
        }
    }
}

/// Addresses tracked at once; past it, addresses whose failures have all expired are
/// forgotten first (memory stays bounded under a spray of source addresses).
const MAX_PEERS: usize = 10_000;

pub struct Limiter {
    limit: AuthLimit,
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl Limiter {
    pub fn new(limit: AuthLimit) -> Limiter {
        Limiter {
            limit,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// How long `ip` must still wait, if it is locked out now.
    pub fn locked_out(&self, ip: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let times = map.get_mut(&ip)?;
        self.expire(times, now);
        if times.len() < self.limit.max_failures.max(1) {
            return None;
        }
        let oldest = times.front()?;
        Some(
            self.limit
                .window
                .saturating_sub(now.duration_since(*oldest)),
        )
    }

    /// Records a refused connect from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        let now = Instant::now();
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_PEERS && !map.contains_key(&ip) {
            map.retain(|_, t| {
                t.back()
                    .is_some_and(|b| now.duration_since(*b) < self.limit.window)
            });
            if map.len() >= MAX_PEERS {
                // Still full of live entries: forget one rather than grow.
                if let Some(k) = map.keys().next().copied() {
                    map.remove(&k);
                }
            }
        }
        let times = map.entry(ip).or_default();
        self.expire(times, now);
        times.push_back(now);
        // Only the newest `max_failures` matter.
        while times.len() > self.limit.max_failures.max(1) {
            times.pop_front();
        }
    }

    fn expire(&self, times: &mut VecDeque<Instant>, now: Instant) {
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.limit.window)
        {
            times.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_locks_out_after_max_failures_and_only_that_address() {
        let l = Limiter::new(AuthLimit {
            max_failures: 3,
            window: Duration::from_secs(3600),
        });
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        for _ in 0..2 {
            l.failed(a);
        }
        assert_eq!(l.locked_out(a), None);
        l.failed(a);
        let wait = l.locked_out(a).expect("locked out after 3 failures");
        assert!(wait > Duration::from_secs(3500), "{wait:?}");
        assert_eq!(l.locked_out(b), None);
    }

    #[test]
    fn failures_older_than_the_window_do_not_count() {
        let l = Limiter::new(AuthLimit {
            max_failures: 1,
            window: Duration::ZERO,
        });
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        l.failed(a);
        assert_eq!(l.locked_out(a), None);
    }
}
