//! One event stream out of several: each source's events, their references qualified,
//! numbered anew in the order they are passed on. A source's gap (it fell behind, its link
//! dropped) is passed on as a gap, so the subscriber reloads; a source that ends stops only
//! its own forwarding. A source that floods (more than `RATE` events a second past a burst
//! of `BURST`) has its excess dropped here, not in the shared channel, where it would push
//! the other sources' events out; once it calms down, one gap says what it missed.

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
                    StreamItem::Missed(n) => feed.send(Fed::Gap(n)),
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
