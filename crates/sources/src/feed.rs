//! One event stream out of several: each source's events, their references qualified,
//! numbered anew in the order they are passed on. A source's gap (it fell behind, its link
//! dropped) is passed on as a gap, so the subscriber reloads; a source that ends stops only
//! its own forwarding. A source that floods (more than `RATE` events a second past a burst
//! of `BURST`) has its excess dropped here, not in the shared channel, where it would push
//! the other sources' events out; once it calms down, one gap says what it missed. A
//! source's own gaps are held the same way and told with its next event passed on, or after
//! a quiet spell (`QUIET`).

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::{Quota, RateLimiter};

use switchboard_types::api::{EventStream, Fed, Sequenced, StreamItem};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::refs::Qualify;

/// How many events wait for a slow subscriber before it is told it missed some.
pub const CAPACITY: usize = 8192;

/// Events a second one source may pass on, past its burst (a busy gateway streaming replies
/// stays well under it; a screen shows far fewer).
pub const RATE: u32 = 2_000;
/// After dropping a flood's excess, this long without an event reports the drop.
const QUIET: std::time::Duration = std::time::Duration::from_millis(250);

/// What one source may pass on at once before its rate applies: together, every source's
/// burst stays under the channel's capacity for up to four sources.
pub const BURST: u32 = 2_000;

/// The merged stream's sender and its numbering (one lock: numbers go out in order).
pub struct Feed {
    tx: broadcast::Sender<Fed>,
    seq: Mutex<u64>,
}

impl Feed {
    pub fn new() -> Arc<Feed> {
        Arc::new(Feed {
            tx: broadcast::channel(CAPACITY).0,
            seq: Mutex::new(0),
        })
    }

    pub fn subscribe(&self) -> EventStream {
        EventStream::remote(self.tx.subscribe())
    }

    /// Pass one item on. Nobody listening is not an error.
    pub fn send(&self, item: Fed) {
        let mut seq = match self.seq.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let item = match item {
            Fed::Event(mut s) => {
                *seq += 1;
                s.seq = *seq;
                Fed::Event(s)
            }
            gap => gap,
        };
        let _ = self.tx.send(item);
    }

    /// Forward one source's stream until it closes.
    pub fn forward(self: &Arc<Feed>, source: String, mut stream: EventStream) -> JoinHandle<()> {
        let feed = self.clone();
        tokio::spawn(async move {
            let q = Qualify { source: &source };
            let quota = Quota::per_second(NonZeroU32::new(RATE).unwrap_or(NonZeroU32::MIN))
                .allow_burst(NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN));
            let limit = RateLimiter::direct(quota);
            // Events of this source dropped for its rate, not yet reported.
            let mut dropped: u64 = 0;
            loop {
                let item = if dropped > 0 {
                    // A flood that stops leaves no event to report it with: a quiet spell
                    // does.
                    match tokio::time::timeout(QUIET, stream.next()).await {
                        Ok(item) => item,
                        Err(_) => {
                            feed.send(Fed::Gap(std::mem::take(&mut dropped)));
                            continue;
                        }
                    }
                } else {
                    stream.next().await
                };
                match item {
                    StreamItem::Event(Sequenced { seq, mut event }) => {
                        if limit.check().is_err() {
                            if dropped == 0 {
                                tracing::warn!(%source, "a source floods events; its excess is dropped");
                            }
                            dropped += 1;
                            continue;
                        }
                        if dropped > 0 {
                            // Calm again: what it showed missed events, so reload.
                            feed.send(Fed::Gap(std::mem::take(&mut dropped)));
                        }
                        q.event(&mut event);
                        feed.send(Fed::Event(Sequenced { seq, event }));
                    }
                    // Gaps are held like dropped events: a source whose own channel keeps
                    // overflowing must not flood the shared one with gaps instead.
                    StreamItem::Missed(n) => dropped += n.max(1),
                    StreamItem::Closed => {
                        tracing::info!(%source, "a source's event stream ended");
                        // What it showed may be stale from here on: say so once.
                        feed.send(Fed::Gap(0));
                        return;
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_types::api::EngineEvent;
    use tokio::sync::broadcast;

    fn updated(key: &str, seq: u64) -> Sequenced {
        Sequenced {
            seq,
            event: EngineEvent::SessionUpdated { key: key.into() },
        }
    }

    /// A flooding source's excess is dropped in its own forwarding: the calm source's events
    /// all arrive, and the flood's drop is reported as a gap once it is quiet.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_pushes_no_calm_event_out() {
        let feed = Feed::new();
        let mut sub = feed.subscribe();
        let (calm_tx, calm_rx) = broadcast::channel(64);
        let (flood_tx, flood_rx) = broadcast::channel(100_000);
        let _c = feed.forward("calm".into(), EventStream::new(calm_rx));
        let _f = feed.forward("flood".into(), EventStream::new(flood_rx));
        for i in 1..=30_000u64 {
            let _ = flood_tx.send(updated("agent:x:y", i));
            if i % 3_000 == 0 {
                let _ = calm_tx.send(updated("agent:main:main", i / 3_000));
            }
        }
        let (mut calm, mut flood, mut gaps) = (0, 0, 0);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while (calm < 10 || gaps == 0) && tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(std::time::Duration::from_millis(50), sub.next()).await {
                Ok(StreamItem::Event(e)) => match e.event {
                    EngineEvent::SessionUpdated { key } if key.starts_with("calm/") => calm += 1,
                    _ => flood += 1,
                },
                Ok(StreamItem::Missed(_)) => gaps += 1,
                Ok(StreamItem::Closed) => break,
                Err(_) => {}
            }
        }
        assert_eq!(calm, 10, "{flood} of the flood passed, {gaps} gaps");
        assert!(flood < 30_000 && gaps >= 1, "{flood} {gaps}");
    }
}
