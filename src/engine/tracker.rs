//! Background work the engine started (runs, exchanges, deliveries), counted so a command
//! can wait until everything it set off has finished before it exits (DESIGN §3.1), and
//! named, so a wait that lasts says what it is waiting for.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct Tracker {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    active: AtomicUsize,
    idle: Notify,
    next: AtomicU64,
    /// What each task is, by start order: (description, started).
    tasks: Mutex<BTreeMap<u64, (String, Instant)>>,
}

impl Inner {
    fn tasks(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, (String, Instant)>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Decrements on drop, so a task that panics or is cancelled still counts as finished.
struct Active {
    inner: Arc<Inner>,
    id: u64,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.inner.tasks().remove(&self.id);
        if self.inner.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

/// The work still running when a bounded wait gave up, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    pub waited: Duration,
    pub tasks: Vec<(String, Duration)>,
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} task(s) still running after {:.0?}",
            self.tasks.len(),
            self.waited
        )?;
        for (i, (what, age)) in self.tasks.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            write!(f, "{sep}{what} (for {:.1?})", age)?;
        }
        Ok(())
    }
}

impl Tracker {
    /// Spawn `fut` on the current tokio runtime, counted (as `what`) until it ends.
    pub fn spawn<F>(&self, what: impl Into<String>, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        self.inner.tasks().insert(id, (what.into(), Instant::now()));
        self.inner.active.fetch_add(1, Ordering::AcqRel);
        let active = Active {
            inner: self.inner.clone(),
            id,
        };
        tokio::spawn(async move {
            let _active = active;
            fut.await
        })
    }

    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// What is running now, oldest first, with how long it has been running.
    pub fn running(&self) -> Vec<(String, Duration)> {
        self.inner
            .tasks()
            .values()
            .map(|(what, since)| (what.clone(), since.elapsed()))
            .collect()
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

    /// Like `idle`, but give up after `limit`, saying what is still running.
    pub async fn idle_for(&self, limit: Duration) -> Result<(), Busy> {
        match tokio::time::timeout(limit, self.idle()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(Busy {
                waited: limit,
                tasks: self.running(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_tasks_spawned_by_tasks() {
        let t = Tracker::default();
        let inner = t.clone();
        t.spawn("outer", async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            inner.spawn("inner", async {
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

    #[tokio::test(start_paused = true)]
    async fn a_bounded_wait_names_what_is_still_running() {
        let t = Tracker::default();
        t.spawn("run r1 on agent:main:main (message)", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        t.spawn("quick", async {});
        let busy = t
            .idle_for(Duration::from_secs(5))
            .await
            .expect_err("the long task is still running");
        assert_eq!(busy.tasks.len(), 1);
        assert_eq!(busy.tasks[0].0, "run r1 on agent:main:main (message)");
        let text = busy.to_string();
        assert!(
            text.starts_with(
                "1 task(s) still running after 5s: run r1 on agent:main:main (message) (for "
            ),
            "{text}"
        );
    }
}
