//! `idempotencyKey` on `chat.send` and `agent`: a repeat of a key within `TTL` gets the
//! first call's answer (its run) without sending the message again. Bounded: the oldest keys
//! go first once `MAX_KEYS` are held, and expired ones on every lookup.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// How long a key is remembered (OpenClaw's dedupe window is of this order).
pub const TTL: Duration = Duration::from_secs(10 * 60);
/// The most keys remembered at once, across every connection.
pub const MAX_KEYS: usize = 10_000;

/// What the first call with a key set off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub run_id: Option<String>,
    pub key: String,
    /// The engine's answer to an owner command (no run).
    pub command_reply: Option<String>,
}

pub type Slot = Arc<OnceCell<Accepted>>;

#[derive(Default)]
pub struct Idempotency {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    slots: HashMap<String, (Instant, Slot)>,
    /// Keys in the order they were first seen, for expiry and the cap.
    order: VecDeque<(Instant, String)>,
}

impl Idempotency {
    /// The slot of `key`: empty for a first call (which fills it once its message is
    /// recorded), filled — or being filled — for a repeat.
    pub fn slot(&self, key: &str) -> Slot {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((at, _)) = inner.order.front() {
            let expired = now.duration_since(*at) >= TTL;
            if !expired && inner.order.len() < MAX_KEYS {
                break;
            }
            if let Some((at, old)) = inner.order.pop_front()
                && inner.slots.get(&old).is_some_and(|(t, _)| *t == at)
            {
                inner.slots.remove(&old);
            }
        }
        if let Some((_, slot)) = inner.slots.get(key) {
            return slot.clone();
        }
        let slot: Slot = Arc::new(OnceCell::new());
        inner.slots.insert(key.to_string(), (now, slot.clone()));
        inner.order.push_back((now, key.to_string()));
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_repeat_gets_the_first_answer_and_the_map_stays_bounded() {
        let idem = Idempotency::default();
        let first = idem.slot("k");
        let a = Accepted {
            run_id: Some("r1".into()),
            key: "agent:main:main".into(),
            command_reply: None,
        };
        first.get_or_init(|| async { a.clone() }).await;
        assert_eq!(idem.slot("k").get(), Some(&a));
        for i in 0..(MAX_KEYS + 10) {
            idem.slot(&format!("other {i}"));
        }
        let inner = idem.inner.lock().expect("lock");
        assert!(inner.slots.len() <= MAX_KEYS, "{}", inner.slots.len());
        assert!(inner.order.len() <= MAX_KEYS);
        assert!(!inner.slots.contains_key("k"), "the oldest key went first");
    }
}
