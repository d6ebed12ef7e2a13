//! Discord's rate limits for the REST sender (https://discord.com/developers/docs/topics/rate-limits):
//! each answer names the route's bucket (`X-RateLimit-Bucket`), how many requests it has left
//! (`X-RateLimit-Remaining`) and when it refills (`X-RateLimit-Reset-After`, seconds). A
//! bucket at 0 is waited out before the next send to it, instead of spending a request on a
//! 429; a 429 blocks its bucket for `retry_after`, and a global one (`X-RateLimit-Global`,
//! or `global: true`) blocks every route. Sends in flight at once each take one of the
//! remaining requests, so 32 concurrent sends to a bucket with 1 left send one.
//!
//! Buckets are per major parameter (the channel): two channels sharing a bucket hash are
//! limited apart, as Discord limits them. Memory is bounded: past `MAX_ROUTES` routes the
//! lapsed entries go, and if that is not enough the table starts again (its worst is a 429
//! Discord answers, which is then waited out).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::time::Instant;

/// The most routes (channels) remembered.
const MAX_ROUTES: usize = 10_000;

/// The longest wait taken from a header (a wrong one must not park sends for days).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// What is known of one bucket (for one channel).
#[derive(Debug, Clone, Copy)]
struct Window {
    /// Requests left before `reset`; `None` when unknown (never answered yet).
    remaining: Option<u64>,
    /// When the bucket refills.
    reset: Instant,
}

#[derive(Debug, Default)]
struct Table {
    /// Route (`channel:<id>`) → its bucket's hash, once Discord named it.
    bucket_of: HashMap<String, String>,
    /// `<bucket hash or route>:<route>` → its window.
    windows: HashMap<String, Window>,
    /// Every route waits until then (a global 429).
    global_until: Option<Instant>,
}

impl Table {
    fn key(&self, route: &str) -> String {
        match self.bucket_of.get(route) {
            Some(hash) => format!("{hash}:{route}"),
            None => route.to_string(),
        }
    }

    fn bound(&mut self, now: Instant) {
        if self.windows.len() < MAX_ROUTES && self.bucket_of.len() < MAX_ROUTES {
            return;
        }
        self.windows.retain(|_, w| w.reset > now);
        if self.windows.len() >= MAX_ROUTES || self.bucket_of.len() >= MAX_ROUTES {
            self.windows.clear();
            self.bucket_of.clear();
        }
    }
}

/// The rate-limit state of one bot's REST sends.
#[derive(Debug, Default)]
pub struct Buckets {
    table: Mutex<Table>,
}

/// What Discord said about a rate limit in one answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    pub bucket: Option<String>,
    pub remaining: Option<u64>,
    pub reset_after: Option<Duration>,
    pub global: bool,
}

impl Limits {
    /// The `X-RateLimit-*` headers of an answer.
    pub fn of(headers: &HeaderMap) -> Limits {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        Limits {
            bucket: text("x-ratelimit-bucket")
                .filter(|b| !b.is_empty() && b.len() <= 64)
                .map(str::to_string),
            remaining: text("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok()),
            reset_after: text("x-ratelimit-reset-after").and_then(seconds),
            global: text("x-ratelimit-global").is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }
    }
}

/// Seconds as Discord writes them (`1.25`), bounded.
pub fn seconds(text: &str) -> Option<Duration> {
    seconds_of(text.trim().parse().ok()?)
}

/// A number of seconds as a wait, held to an hour (`None`: negative or not a number). Held
/// before it becomes a `Duration`, which panics on a value past its range (`1e30`).
pub fn seconds_of(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64())))
}

impl Buckets {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding it cannot leave the table half-written in a way that
        // matters (the worst is a 429 Discord answers): go on with it.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take one request of `route`'s bucket: `Ok` to send now, `Err(wait)` when the bucket
    /// (or every route) is spent until `wait` from `now`.
    pub fn take(&self, route: &str, now: Instant) -> Result<(), Duration> {
        let mut t = self.table();
        if let Some(until) = t.global_until.filter(|u| *u > now) {
            return Err(until - now);
        }
        let key = t.key(route);
        match t.windows.get_mut(&key) {
            Some(w) if w.reset <= now => {
                t.windows.remove(&key);
                Ok(())
            }
            Some(Window {
                remaining: Some(0),
                reset,
            }) => Err(*reset - now),
            Some(Window {
                remaining: Some(left),
                ..
            }) => {
                *left -= 1;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// What an answer to a send on `route` said, at `now`.
    pub fn record(&self, route: &str, limits: &Limits, now: Instant) {
        let mut t = self.table();
        t.bound(now);
        if let Some(hash) = &limits.bucket {
            t.bucket_of.insert(route.to_string(), hash.clone());
        }
        let key = t.key(route);
        if let (Some(remaining), Some(after)) = (limits.remaining, limits.reset_after) {
            t.windows.insert(
                key,
                Window {
                    remaining: Some(remaining),
                    reset: now + after,
                },
            );
        }
    }

    /// A 429 on `route`: its bucket (or, when `global`, every route) waits `after`.
    pub fn limited(&self, route: &str, after: Duration, global: bool, now: Instant) {
        let until = now + after.min(MAX_WAIT);
        let mut t = self.table();
        if global {
            t.global_until = Some(t.global_until.map_or(until, |u| u.max(until)));
            return;
        }
        t.bound(now);
        let key = t.key(route);
        t.windows.insert(
            key,
            Window {
                remaining: Some(0),
                reset: until,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(bucket: &str, remaining: u64, reset_after_ms: u64) -> Limits {
        Limits {
            bucket: Some(bucket.into()),
            remaining: Some(remaining),
            reset_after: Some(Duration::from_millis(reset_after_ms)),
            global: false,
        }
    }

    #[test]
    fn a_bucket_at_zero_waits_until_its_reset_then_sends() {
        let b = Buckets::default();
        let now = Instant::now();
        assert_eq!(b.take("channel:1", now), Ok(()));
        b.record("channel:1", &limits("abc", 0, 1500), now);
        assert_eq!(
            b.take("channel:1", now + Duration::from_millis(500)),
            Err(Duration::from_millis(1000))
        );
        // Another channel is limited apart, even in the same bucket.
        assert_eq!(b.take("channel:2", now), Ok(()));
        assert_eq!(
            b.take("channel:1", now + Duration::from_millis(1500)),
            Ok(())
        );
    }

    #[test]
    fn sends_at_once_share_what_is_left() {
        let b = Buckets::default();
        let now = Instant::now();
        b.record("channel:1", &limits("abc", 2, 1000), now);
        assert_eq!(b.take("channel:1", now), Ok(()));
        assert_eq!(b.take("channel:1", now), Ok(()));
        assert_eq!(b.take("channel:1", now), Err(Duration::from_millis(1000)));
    }

    #[test]
    fn a_429_blocks_its_bucket_and_a_global_one_every_route() {
        let b = Buckets::default();
        let now = Instant::now();
        b.limited("channel:1", Duration::from_secs(2), false, now);
        assert_eq!(b.take("channel:1", now), Err(Duration::from_secs(2)));
        assert_eq!(b.take("channel:2", now), Ok(()));
        b.limited("channel:2", Duration::from_secs(3), true, now);
        assert_eq!(b.take("channel:9", now), Err(Duration::from_secs(3)));
        assert_eq!(b.take("channel:9", now + Duration::from_secs(3)), Ok(()));
    }

    #[test]
    fn headers_are_read_and_bounded() {
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-bucket", "abcd1234".parse().unwrap());
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset-after", "1.25".parse().unwrap());
        h.insert("x-ratelimit-global", "true".parse().unwrap());
        assert_eq!(
            Limits::of(&h),
            Limits {
                bucket: Some("abcd1234".into()),
                remaining: Some(0),
                reset_after: Some(Duration::from_millis(1250)),
                global: true,
            }
        );
        assert_eq!(seconds("1e12"), Some(MAX_WAIT));
        assert_eq!(seconds("1e30"), Some(MAX_WAIT));
        assert_eq!(seconds_of(f64::MAX), Some(MAX_WAIT));
        assert_eq!(seconds("-1"), None);
        assert_eq!(seconds("NaN"), None);
    }

    #[test]
    fn the_table_stays_bounded() {
        let b = Buckets::default();
        let now = Instant::now();
        for i in 0..(MAX_ROUTES + 10) {
            b.record(&format!("channel:{i}"), &limits("h", 1, 60_000), now);
        }
        let t = b.table();
        assert!(t.windows.len() <= MAX_ROUTES && t.bucket_of.len() <= MAX_ROUTES);
    }
}
