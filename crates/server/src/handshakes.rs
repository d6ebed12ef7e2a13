//! Connections still in their handshake (TLS, WebSocket upgrade, `connect`): at most `max`
//! at once, and when a new one comes past that, the oldest gives way. A peer that opens
//! sockets and never finishes a handshake (trickling, or just idle) thus holds its places
//! only until newer connections need them, while a real client, whose handshake takes a
//! round trip or two, is served even during such a flood (with a plain cap it would be
//! turned away for as long as the flood lasted).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

pub struct Handshakes {
    max: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    next: u64,
    /// Handshakes in progress by age (ids rise): dropping a sender tells its connection
    /// to give way.
    live: BTreeMap<u64, oneshot::Sender<()>>,
}

/// One connection's place among the handshakes in progress, given back when dropped.
pub struct Ticket {
    id: u64,
    owner: Arc<Handshakes>,
    evicted: oneshot::Receiver<()>,
}

impl Handshakes {
    pub fn new(max: usize) -> Arc<Handshakes> {
        Arc::new(Handshakes {
            max: max.max(1),
            inner: Mutex::new(Inner {
                next: 0,
                live: BTreeMap::new(),
            }),
        })
    }

    /// A place for a new connection; the oldest handshake gives way when all are taken.
    /// True in the second value when one had to.
    pub fn admit(self: &Arc<Self>) -> (Ticket, bool) {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut evicted = false;
        while inner.live.len() >= self.max {
            // Dropping the oldest sender resolves that connection's `given_way`.
            evicted |= inner.live.pop_first().is_some();
        }
        let id = inner.next;
        inner.next += 1;
        inner.live.insert(id, tx);
        let ticket = Ticket {
            id,
            owner: self.clone(),
            evicted: rx,
        };
        (ticket, evicted)
    }

    /// Tells the oldest handshake in progress to give way (its connection then closes and
    /// frees its place among all connections); false when none is in progress.
    pub fn give_way_oldest(&self) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.live.pop_first().is_some()
    }

    /// Handshakes in progress now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .live
            .len()
    }
}

impl Ticket {
    /// Resolves when a newer connection needed this place.
    pub async fn given_way(&mut self) {
        let _ = (&mut self.evicted).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.owner
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .live
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_handshake_gives_way_to_a_new_one() {
        let h = Handshakes::new(2);
        let (mut first, evicted) = h.admit();
        assert!(!evicted);
        let (_second, _) = h.admit();
        let (_third, evicted) = h.admit();
        assert!(evicted, "the third took the oldest's place");
        first.given_way().await;
        assert_eq!(h.len(), 2);
        drop(first);
        assert_eq!(h.len(), 2, "a ticket that gave way is not counted twice");
    }

    #[tokio::test]
    async fn a_finished_handshake_gives_its_place_back() {
        let h = Handshakes::new(1);
        let (first, _) = h.admit();
        drop(first);
        let (_second, evicted) = h.admit();
        assert!(!evicted);
        assert_eq!(h.len(), 1);
    }
}
