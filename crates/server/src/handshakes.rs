//! Connections still in their handshake (TLS, WebSocket upgrade, `connect`): at most `max`
//! at once, and when a new one comes past that, the oldest gives way. A peer that opens
//! sockets and never finishes a handshake (trickling, or just idle) thus holds its places
//! only until newer connections need them, while a real client, whose handshake takes a
//! round trip or two, is served even during such a flood (with a plain cap it would be
//! turned away for as long as the flood lasted).
//!
//! Each remote address may hold at most `per_address` of the places (OpenClaw's pre-auth
//! budget, 32): past it a new connection from that address is turned away, so one flooding
//! address can neither make everyone else's handshakes give way nor hold every place. The
//! count per address lives only while its handshakes do (bounded by `max`).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

pub struct Handshakes {
    max: usize,
    per_address: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    next: u64,
    /// Handshakes in progress by age (ids rise), with their peer's address: dropping a
    /// sender tells its connection to give way.
    live: BTreeMap<u64, (oneshot::Sender<()>, IpAddr)>,
    /// Handshakes in progress per address (no entry at zero).
    per_peer: HashMap<IpAddr, usize>,
}

impl Inner {
    /// Takes handshake `id` out (when still in), and out of its address's count.
    fn remove(&mut self, id: u64) {
        if let Some((_, ip)) = self.live.remove(&id) {
            self.forget(ip);
        }
    }

    fn pop_oldest(&mut self) -> bool {
        match self.live.pop_first() {
            Some((_, (_, ip))) => {
                self.forget(ip);
                true
            }
            None => false,
        }
    }

    fn forget(&mut self, ip: IpAddr) {
        if let Some(n) = self.per_peer.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&ip);
            }
        }
    }
}

/// One connection's place among the handshakes in progress, given back when dropped.
pub struct Ticket {
    id: u64,
    owner: Arc<Handshakes>,
    evicted: oneshot::Receiver<()>,
}

impl Handshakes {
    pub fn new(max: usize, per_address: usize) -> Arc<Handshakes> {
        Arc::new(Handshakes {
            max: max.max(1),
            per_address: per_address.max(1),
            inner: Mutex::new(Inner {
                next: 0,
                live: BTreeMap::new(),
                per_peer: HashMap::new(),
            }),
        })
    }

    /// Whether `ip` already holds all the handshakes one address may (its next connection
    /// is turned away).
    pub fn address_full(&self, ip: IpAddr) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.per_peer.get(&ip).copied().unwrap_or(0) >= self.per_address
    }

    /// A place for a new connection from `ip`; the oldest handshake gives way when all are
    /// taken. True in the second value when one had to. (The accept loop asks
    /// `address_full` first; it alone admits, so the answer still holds.)
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> (Ticket, bool) {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut evicted = false;
        while inner.live.len() >= self.max {
            // Dropping the oldest sender resolves that connection's `given_way`.
            evicted |= inner.pop_oldest();
        }
        let id = inner.next;
        inner.next += 1;
        inner.live.insert(id, (tx, ip));
        *inner.per_peer.entry(ip).or_insert(0) += 1;
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
        inner.pop_oldest()
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
            .remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[tokio::test]
    async fn the_oldest_handshake_gives_way_to_a_new_one() {
        let h = Handshakes::new(2, 32);
        let (mut first, evicted) = h.admit(A);
        assert!(!evicted);
        let (_second, _) = h.admit(A);
        let (_third, evicted) = h.admit(A);
        assert!(evicted, "the third took the oldest's place");
        first.given_way().await;
        assert_eq!(h.len(), 2);
        drop(first);
        assert_eq!(h.len(), 2, "a ticket that gave way is not counted twice");
    }

    #[tokio::test]
    async fn a_finished_handshake_gives_its_place_back() {
        let h = Handshakes::new(1, 32);
        let (first, _) = h.admit(A);
        drop(first);
        let (_second, evicted) = h.admit(A);
        assert!(!evicted);
        assert_eq!(h.len(), 1);
    }

    #[tokio::test]
    async fn one_address_holds_at_most_its_budget_and_gets_it_back() {
        let h = Handshakes::new(10, 2);
        let (first, _) = h.admit(A);
        let (_second, _) = h.admit(A);
        assert!(h.address_full(A));
        assert!(!h.address_full(B), "another address is not held back");
        drop(first);
        assert!(
            !h.address_full(A),
            "a finished handshake frees its address's place"
        );
        // One that gave way is counted out once, not again when its ticket drops.
        let h = Handshakes::new(1, 1);
        let (mut old, _) = h.admit(A);
        let (_new, evicted) = h.admit(B);
        assert!(evicted);
        old.given_way().await;
        assert!(!h.address_full(A));
        drop(old);
        assert!(h.address_full(B));
        assert!(!h.inner.lock().expect("lock").per_peer.contains_key(&A));
    }
}
