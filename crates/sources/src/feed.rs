//! One event stream out of several: each source's events, their references qualified,
//! numbered anew in the order they are passed on. A source's gap (it fell behind, its link
//! dropped) is passed on as a gap, so the subscriber reloads; a source that ends stops only
//! its own forwarding.

use std::sync::{Arc, Mutex};

use switchboard_types::api::{EventStream, Fed, Sequenced, StreamItem};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::refs::Qualify;

/// How many events wait for a slow subscriber before it is told it missed some.
pub const CAPACITY: usize = 4096;

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
            loop {
                match stream.next().await {
                    StreamItem::Event(Sequenced { seq, mut event }) => {
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
