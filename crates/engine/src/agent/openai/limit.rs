//! The cap on concurrent model requests to one provider (`models.providers.<id>.maxConcurrent`):
//! a request waits for a free slot before it is sent, so a burst of runs queues here instead
//! of overloading a local model server. The wait is part of the run (its timeout counts it)
//! but not of the HTTP request (whose timeout starts once the slot is taken).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;

/// Slots for one provider's requests in flight.
#[derive(Debug, Clone)]
pub struct Limiter {
    slots: Arc<Semaphore>,
}

impl Limiter {
    pub fn new(max_concurrent: usize) -> Limiter {
        Limiter {
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }

    /// Runs `request` once a slot is free, holding the slot until it ends (or is dropped:
    /// an aborted run frees its slot at once).
    pub async fn run<F: Future>(&self, request: F) -> F::Output {
        // The semaphore is never closed, so the acquire cannot fail; were it closed, the
        // request goes ahead unlimited rather than failing the run.
        let _slot = self.slots.acquire().await.ok();
        request.await
    }

    /// Slots free now (for tests and diagnostics).
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slot_is_held_while_the_request_runs_and_freed_after() {
        let limiter = Limiter::new(2);
        let inner = limiter.clone();
        let seen = limiter.run(async move { inner.available() }).await;
        assert_eq!(seen, 1);
        assert_eq!(limiter.available(), 2);
    }

    #[tokio::test]
    async fn a_dropped_request_frees_its_slot() {
        let limiter = Limiter::new(1);
        let held = limiter.run(std::future::pending::<()>());
        let mut held = Box::pin(held);
        // Polled once: it takes the slot and waits forever.
        assert!(futures_poll_once(held.as_mut()).await.is_none());
        assert_eq!(limiter.available(), 0);
        drop(held);
        assert_eq!(limiter.available(), 1);
    }

    #[test]
    fn zero_means_one() {
        assert_eq!(Limiter::new(0).available(), 1);
    }

    async fn futures_poll_once<F: Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::time::timeout(std::time::Duration::from_millis(1), f)
            .await
            .ok()
    }
}
