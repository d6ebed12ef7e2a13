//! Events relayed between nodes: each node numbers the events it relays and sends them as
//! `NOTIFY switchboard_events` payloads (delivered in commit order to every listener); the
//! listener (changes.rs) hands the others' events on, and a gap in a node's numbers (an
//! event too large for a notice, a full queue, a reconnect) as `Relayed::Gap`, upon which
//! readers read again. While a node relays, its commits' change notices say so, and the
//! others skip them: its events already tell what changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};
use switchboard_store::nodes::Relayed;
use switchboard_types::api::EngineEvent;
use tokio::sync::mpsc;

/// The channel events are relayed on.
pub const CHANNEL: &str = "switchboard_events";

/// PostgreSQL refuses notice payloads of 8,000 bytes or more; an event larger than this
/// goes as a gap, and the others read what changed.
const MAX_PAYLOAD: usize = 7_900;

/// Events queued for relaying at most; past it they are dropped (and counted, so the others
/// see a gap).
const QUEUE: usize = 16_384;

/// Events sent in one notify statement at most.
const BATCH: usize = 256;

/// Relaying nodes remembered at most (each restart is a new one).
const MAX_ORIGINS: usize = 1_024;

/// Relayed events waiting for the engine, at most; past it the oldest news is a gap.
const INBOX: usize = 16_384;

#[derive(Serialize, Deserialize)]
struct Payload {
    /// The relaying store's origin id.
    o: String,
    /// Its number for this event (from 1, dense).
    s: u64,
    /// The event; absent when it was too large.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<EngineEvent>,
}

/// Both ends of a store's relay. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    inner: Arc<Inner>,
}

struct Inner {
    origin: String,
    /// Whether an engine took the relayed events (and so relays its own).
    on: AtomicBool,
    outgoing: Mutex<Option<mpsc::Sender<EngineEvent>>>,
    queued: Mutex<Option<mpsc::Receiver<EngineEvent>>>,
    /// Events dropped on a full queue since the last one sent.
    dropped: AtomicU64,
    /// Events queued and not yet handed to the server (`flush` waits for none).
    pending: AtomicU64,
    inbox: Mutex<Option<mpsc::Sender<Relayed>>>,
    /// A gap to report once the inbox has room.
    owed_gap: AtomicBool,
}

impl Relay {
    pub fn new(origin: String) -> Relay {
        let (tx, rx) = mpsc::channel(QUEUE);
        Relay {
            inner: Arc::new(Inner {
                origin,
                on: AtomicBool::new(false),
                outgoing: Mutex::new(Some(tx)),
                queued: Mutex::new(Some(rx)),
                dropped: AtomicU64::new(0),
                pending: AtomicU64::new(0),
                inbox: Mutex::new(None),
                owed_gap: AtomicBool::new(false),
            }),
        }
    }

    pub fn is_on(&self) -> bool {
        self.inner.on.load(Ordering::Relaxed)
    }

    /// The events the other nodes relay, from now on; the first caller only.
    pub fn take_inbox(&self) -> Option<mpsc::Receiver<Relayed>> {
        let mut inbox = self.inner.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if inbox.is_some() {
            return None;
        }
        let (tx, rx) = mpsc::channel(INBOX);
        *inbox = Some(tx);
        self.inner.on.store(true, Ordering::Relaxed);
        Some(rx)
    }

    /// Queue `events` for the others (only once an engine took the inbox: a store nobody
    /// listens through relays nothing, and its commits tick the others as before).
    pub fn send(&self, events: Vec<EngineEvent>) {
        if !self.is_on() {
            return;
        }
        let outgoing = self
            .inner
            .outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(tx) = outgoing.as_ref() else {
            return;
        };
        for event in events {
            if matches!(event, EngineEvent::ExternalChange) {
                continue;
            }
            self.inner.pending.fetch_add(1, Ordering::Relaxed);
            if tx.try_send(event).is_err() {
                self.inner.pending.fetch_sub(1, Ordering::Relaxed);
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Wait (at most `within`) until every queued event was handed to the server: a node
    /// that stops cleanly relays its last events, whose commits told the others nothing.
    pub fn flush(&self, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        while self.inner.pending.load(Ordering::Relaxed) > 0 && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Hand a relayed event (or a gap) to the engine; a full inbox owes a gap instead.
    fn deliver(&self, news: Relayed) {
        let inbox = self.inner.inbox.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = inbox.as_ref() else {
            return;
        };
        if self.inner.owed_gap.load(Ordering::Relaxed) {
            if tx.try_send(Relayed::Gap).is_err() {
                return;
            }
            self.inner.owed_gap.store(false, Ordering::Relaxed);
        }
        if tx.try_send(news).is_err() {
            self.inner.owed_gap.store(true, Ordering::Relaxed);
        }
    }
}

/// Send queued events as notices, a batch per statement, on a pooled connection; a batch
/// the server did not take is lost and the others see a gap.
pub async fn publish(pool: Pool, relay: Relay) {
    let queued = relay
        .inner
        .queued
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let Some(mut queued) = queued else {
        return;
    };
    let mut seq: u64 = 0;
    let mut batch = Vec::with_capacity(BATCH);
    while queued.recv_many(&mut batch, BATCH).await > 0 {
        let mut payloads = Vec::with_capacity(batch.len());
        for event in batch.drain(..) {
            seq += 1 + relay.inner.dropped.swap(0, Ordering::Relaxed);
            let mut p = Payload {
                o: relay.inner.origin.clone(),
                s: seq,
                e: Some(event),
            };
            let mut text = serde_json::to_string(&p).unwrap_or_default();
            if text.len() > MAX_PAYLOAD || text.is_empty() {
                p.e = None;
                text = serde_json::to_string(&p).unwrap_or_default();
            }
            payloads.push(text);
        }
        let sent = async {
            let c = pool.get().await.ok()?;
            c.execute(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n",
                &[&CHANNEL, &payloads],
            )
            .await
            .ok()
        };
        if sent.await.is_none() {
            tracing::debug!(
                events = payloads.len(),
                "relaying events failed; the others see a gap"
            );
        }
    }
}

/// What the listener keeps of each relaying node: the number it expects next.
#[derive(Default)]
pub struct Expected {
    next: HashMap<String, u64>,
}

impl Expected {
    /// Take one notice's payload: hand its event on, or a gap when numbers were skipped or
    /// the event did not fit. Our own and unreadable ones are skipped.
    pub fn take(&mut self, relay: &Relay, payload: &str) {
        let Ok(p) = serde_json::from_str::<Payload>(payload) else {
            return;
        };
        if p.o == relay.inner.origin {
            return;
        }
        if self.next.len() >= MAX_ORIGINS && !self.next.contains_key(&p.o) {
            // Nodes come and go; forget the old ones rather than grow.
            self.next.clear();
        }
        let expected = self.next.insert(p.o, p.s + 1);
        // A node first heard mid-stream is no gap: we were not listening before.
        let gap = expected.is_some_and(|n| p.s != n);
        if gap {
            relay.deliver(Relayed::Gap);
        }
        match p.e {
            Some(event) => relay.deliver(Relayed::Event(event)),
            None => relay.deliver(Relayed::Gap),
        }
    }

    /// After a reconnect nothing is known of what was sent meanwhile.
    pub fn reset(&mut self, relay: &Relay) {
        self.next.clear();
        relay.deliver(Relayed::Gap);
    }
}
