//! Background work the engine started (runs, exchanges, deliveries), counted so a command
//! can wait until everything it set off has finished before it exits (DESIGN §3.1).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct Tracker {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    active: AtomicUsize,
    idle: Notify,
}

/// Decrements on drop, so a task that panics or is cancelled still counts as finished.
struct Active(Arc<Inner>);

impl Drop for Active {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Tracker {
    /// Spawn `fut` on the current tokio runtime, counted until it ends.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.active.fetch_add(1, Ordering::AcqRel);
        let active = Active(self.inner.clone());
        tokio::spawn(async move {
            let _active = active;
            fut.await
        })
    }

    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// Resolve once nothing is running (at once if nothing is).
    pub async fn idle(&self) {
        loop {
            // Created before the check, so a wake-up between check and await is not lost.
            let notified = self.inner.idle.notified();
            if self.active() == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_tasks_spawned_by_tasks() {
        let t = Tracker::default();
        let inner = t.clone();
        t.spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            inner.spawn(async {
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        });
        let start = tokio::time::Instant::now();
        t.idle().await;
        assert_eq!(t.active(), 0);
        assert!(start.elapsed() >= Duration::from_secs(6));
    }

    #[tokio::test]
    async fn idle_returns_at_once_when_nothing_runs() {
        Tracker::default().idle().await;
    }
}
