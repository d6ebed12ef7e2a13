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

/// Events from a broadcast channel, checked for gaps by sequence number.
pub struct EventStream {
    rx: Source,
    /// The last sequence number handed out (None: nothing yet).
    last: Option<u64>,
}

/// The embedded engine's numbered events, or a remote feed that also carries gap markers
/// (a dropped connection, or a restarted server whose numbers start again: sequence
/// numbers alone cannot show either).
enum Source {
    Engine(broadcast::Receiver<Sequenced>),
    Remote(broadcast::Receiver<Fed>),
}

/// One item of a remote feed.
#[derive(Debug, Clone, PartialEq)]
// As `StreamItem`: handed over one at a time.
#[allow(clippy::large_enum_variant)]
pub enum Fed {
    Event(Sequenced),
    /// Events were lost (`0`: how many is unknown); numbering may start again after it.
    Gap(u64),
}

impl EventStream {
    pub fn new(rx: broadcast::Receiver<Sequenced>) -> EventStream {
        EventStream {
            rx: Source::Engine(rx),
            last: None,
        }
    }

    /// A stream over a remote feed (see `Fed`).
    pub fn remote(rx: broadcast::Receiver<Fed>) -> EventStream {
        EventStream {
            rx: Source::Remote(rx),
            last: None,
        }
    }

    /// The next event, or word of a gap, or the end.
    pub async fn next(&mut self) -> StreamItem {
        let got = match &mut self.rx {
            Source::Engine(rx) => rx.recv().await.map(Fed::Event),
            Source::Remote(rx) => rx.recv().await,
        };
        match got {
            Ok(f) => self.fed(f),
            Err(broadcast::error::RecvError::Lagged(n)) => self.missed(n),
            Err(broadcast::error::RecvError::Closed) => StreamItem::Closed,
        }
    }

    /// The next event if one is queued (never waits).
    pub fn try_next(&mut self) -> Option<StreamItem> {
        let got = match &mut self.rx {
            Source::Engine(rx) => rx.try_recv().map(Fed::Event),
            Source::Remote(rx) => rx.try_recv(),
        };
        match got {
            Ok(f) => Some(self.fed(f)),
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(self.missed(n)),
            Err(broadcast::error::TryRecvError::Closed) => Some(StreamItem::Closed),
            Err(broadcast::error::TryRecvError::Empty) => None,
        }
    }

    fn fed(&mut self, f: Fed) -> StreamItem {
        match f {
            Fed::Event(e) => self.checked(e),
            Fed::Gap(n) => {
                // The numbering after a remote gap may restart: the next event starts afresh.
                self.last = None;
                StreamItem::Missed(n)
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EngineEvent;

    fn ev(seq: u64) -> Sequenced {
        Sequenced {
            seq,
            event: EngineEvent::SessionDeleted {
                key: format!("k{seq}"),
            },
        }
    }

    #[test]
    fn a_remote_gap_is_reported_and_numbering_may_restart() {
        let (tx, rx) = broadcast::channel(16);
        let mut s = EventStream::remote(rx);
        tx.send(Fed::Event(ev(7))).expect("send");
        tx.send(Fed::Gap(0)).expect("send");
        // A restarted server counts from 1 again: not a gap, not dropped.
        tx.send(Fed::Event(ev(1))).expect("send");
        tx.send(Fed::Event(ev(3))).expect("send");
        assert_eq!(s.try_next(), Some(StreamItem::Event(ev(7))));
        assert_eq!(s.try_next(), Some(StreamItem::Missed(0)));
        assert_eq!(s.try_next(), Some(StreamItem::Event(ev(1))));
        assert_eq!(s.try_next(), Some(StreamItem::Missed(1)));
        assert_eq!(s.try_next(), None);
    }
}
