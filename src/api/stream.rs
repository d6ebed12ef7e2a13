//! A subscription to engine events: numbered events in order, and a clear signal when some
//! were missed (the subscriber fell behind, or a connection dropped), never a silent gap.

use tokio::sync::broadcast;

use super::Sequenced;

/// What a subscriber gets next.
#[derive(Debug, Clone, PartialEq)]
// Items are handed over one at a time, never stored in bulk: a box per event would cost
// more than the size difference.
#[allow(clippy::large_enum_variant)]
pub enum StreamItem {
    Event(Sequenced),
    /// This many events were lost before the next one: reload what they would have told.
    Missed(u64),
    /// The engine (or the connection to it) is gone.
    Closed,
}

/// Events from a broadcast channel, checked for gaps by sequence number (a remote engine
/// feeds the same channel, so its gaps show the same way).
pub struct EventStream {
    rx: broadcast::Receiver<Sequenced>,
    /// The last sequence number handed out (None: nothing yet).
    last: Option<u64>,
}

impl EventStream {
    pub fn new(rx: broadcast::Receiver<Sequenced>) -> EventStream {
        EventStream { rx, last: None }
    }

    /// The next event, or word of a gap, or the end.
    pub async fn next(&mut self) -> StreamItem {
        match self.rx.recv().await {
            Ok(e) => self.checked(e),
            Err(broadcast::error::RecvError::Lagged(n)) => self.missed(n),
            Err(broadcast::error::RecvError::Closed) => StreamItem::Closed,
        }
    }

    /// The next event if one is queued (never waits).
    pub fn try_next(&mut self) -> Option<StreamItem> {
        match self.rx.try_recv() {
            Ok(e) => Some(self.checked(e)),
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(self.missed(n)),
            Err(broadcast::error::TryRecvError::Closed) => Some(StreamItem::Closed),
            Err(broadcast::error::TryRecvError::Empty) => None,
        }
    }

    /// The channel dropped `n` events: reported here, so the next event (numbered past
    /// them) is not taken for a second gap.
    fn missed(&mut self, n: u64) -> StreamItem {
        self.last = self.last.map(|l| l + n);
        StreamItem::Missed(n)
    }

    fn checked(&mut self, e: Sequenced) -> StreamItem {
        let gap = match self.last {
            Some(last) if e.seq > last + 1 => e.seq - last - 1,
            _ => 0,
        };
        self.last = Some(e.seq);
        if gap > 0 {
            // The event itself is fine, but what came between is lost: the reload covers
            // both, so report the gap and let the next call carry on from here.
            return StreamItem::Missed(gap);
        }
        StreamItem::Event(e)
    }
}
