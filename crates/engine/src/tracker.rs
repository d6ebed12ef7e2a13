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
    /// Work groups by id: what one API call set off. Weak, so a group lives exactly as long
    /// as a task of it (or the call that opened it) does.
    groups: Arc<Mutex<Groups>>,
}

#[derive(Default)]
struct Groups {
    next: u64,
    live: std::collections::HashMap<u64, std::sync::Weak<Inner>>,
    /// Prune dead entries when the map grows past this (doubles with what stays live).
    prune_at: usize,
}

tokio::task_local! {
    /// The work group the current task belongs to: tasks it spawns join it too.
    static WORK: Arc<Inner>;
}

/// One call's work, open while the call runs (see `Tracker::open_group`).
pub struct Group {
    pub id: u64,
    inner: Arc<Inner>,
}

impl Group {
    /// Run `fut` inside this group: every task it spawns through the tracker (and every
    /// task those spawn) is counted in the group.
    pub async fn scope<F: Future>(&self, fut: F) -> F::Output {
        WORK.scope(self.inner.clone(), fut).await
    }
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

impl Inner {
    fn enter(self: &Arc<Self>, what: String) -> Active {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.tasks().insert(id, (what, Instant::now()));
        self.active.fetch_add(1, Ordering::AcqRel);
        Active {
            inner: self.clone(),
            id,
        }
    }

    fn running(&self) -> Vec<(String, Duration)> {
        self.tasks()
            .values()
            .map(|(what, since)| (what.clone(), since.elapsed()))
            .collect()
    }

    /// Resolve once nothing is running (at once if nothing is).
    async fn idle(&self) {
        loop {
            // Created before the check, so a wake-up between check and await is not lost.
            let notified = self.idle.notified();
            if self.active.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
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
            "{} still running after {:.0?}",
            switchboard_types::words::count(self.tasks.len(), "task"),
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
        let what = what.into();
        // The group of the task spawning this one (if any) counts it too, and the new task
        // runs inside that group, so whatever it spawns is counted there as well.
        let group = WORK.try_with(Arc::clone).ok();
        let in_group = group.as_ref().map(|g| g.enter(what.clone()));
        let active = self.inner.enter(what);
        tokio::spawn(async move {
            let _active = active;
            let _in_group = in_group;
            match group {
                Some(g) => WORK.scope(g, fut).await,
                None => fut.await,
            }
        })
    }

    /// Open a work group for one call; run the call inside `Group::scope`.
    pub fn open_group(&self) -> Group {
        let inner = Arc::new(Inner::default());
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.next += 1;
        let id = groups.next;
        groups.live.insert(id, Arc::downgrade(&inner));
        if groups.live.len() > groups.prune_at {
            groups.live.retain(|_, g| g.strong_count() > 0);
            groups.prune_at = (groups.live.len() * 2).max(64);
        }
        Group { id, inner }
    }

    fn group(&self, id: u64) -> Option<Arc<Inner>> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.live.get(&id).and_then(std::sync::Weak::upgrade)
    }

    /// Wait up to `limit` for group `id` to finish; true when it has (or never existed in
    /// this engine: a finished group is forgotten).
    pub async fn group_idle_for(&self, id: u64, limit: Duration) -> bool {
        let Some(g) = self.group(id) else {
            return true;
        };
        tokio::time::timeout(limit, g.idle()).await.is_ok()
    }

    /// What group `id` still runs, oldest first.
    pub fn group_running(&self, id: u64) -> Vec<(String, Duration)> {
        self.group(id).map(|g| g.running()).unwrap_or_default()
    }

    #[cfg(test)]
    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// What is running now, oldest first, with how long it has been running.
    pub fn running(&self) -> Vec<(String, Duration)> {
        self.inner.running()
    }

    /// Resolve once nothing is running (at once if nothing is).
    pub async fn idle(&self) {
        self.inner.idle().await
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

    #[tokio::test(start_paused = true)]
    async fn a_group_waits_for_its_own_work_and_what_that_spawned_not_for_others() {
        let t = Tracker::default();
        t.spawn("someone else's", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let group = t.open_group();
        let inner = t.clone();
        group
            .scope(async {
                t.spawn("mine", async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    inner.spawn("spawned by mine", async {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    });
                });
            })
            .await;
        let id = group.id;
        drop(group);
        assert!(!t.group_idle_for(id, Duration::from_secs(3)).await);
        assert_eq!(t.group_running(id).len(), 1, "{:?}", t.group_running(id));
        assert!(t.group_idle_for(id, Duration::from_secs(10)).await);
        assert_eq!(t.active(), 1, "the other task still runs");
        assert!(
            t.group_idle_for(id + 100, Duration::ZERO).await,
            "unknown groups are done"
        );
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
                "1 task still running after 5s: run r1 on agent:main:main (message) (for "
            ),
            "{text}"
        );
    }
}
