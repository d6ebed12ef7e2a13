//! A session's lane: its runs execute one at a time, in the order they were started. The
//! place in line is taken when the run is started (synchronously), not when its task first
//! gets polled, so two runs started one after the other never swap.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

#[derive(Default)]
struct Line {
    busy: bool,
    waiting: VecDeque<oneshot::Sender<Turn>>,
}

/// One session's line of runs.
#[derive(Default)]
pub(crate) struct Lane {
    line: Mutex<Line>,
}

/// The right to run now; dropping it (the run ended, panicked or was cancelled) hands the
/// lane to the next run still waiting.
pub(crate) struct Turn {
    lane: Arc<Lane>,
    armed: bool,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.armed {
            self.lane.pass();
        }
    }
}

/// A place in line: resolves to the turn.
pub(crate) enum Place {
    Now(Turn),
    Later(oneshot::Receiver<Turn>),
}

impl Place {
    pub(crate) async fn turn(self) -> Option<Turn> {
        match self {
            Place::Now(t) => Some(t),
            // An error means the lane was dropped with us in line: nothing runs on it any
            // more, so neither do we.
            Place::Later(rx) => rx.await.ok(),
        }
    }
}

impl Lane {
    /// Take a place in line now.
    pub(crate) fn enter(self: &Arc<Self>) -> Place {
        let mut line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        if line.busy {
            let (tx, rx) = oneshot::channel();
            line.waiting.push_back(tx);
            Place::Later(rx)
        } else {
            line.busy = true;
            Place::Now(Turn {
                lane: self.clone(),
                armed: true,
            })
        }
    }

    /// Give the lane to the next one waiting whose task still exists.
    fn pass(self: &Arc<Self>) {
        loop {
            let next = {
                let mut line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
                match line.waiting.pop_front() {
                    Some(tx) => tx,
                    None => {
                        line.busy = false;
                        return;
                    }
                }
            };
            let turn = Turn {
                lane: self.clone(),
                armed: true,
            };
            match next.send(turn) {
                Ok(()) => return,
                // That run is gone: take the turn back (without passing it twice), try the
                // next one.
                Err(mut turn) => turn.armed = false,
            }
        }
    }

    fn idle(&self) -> bool {
        let line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        !line.busy && line.waiting.is_empty()
    }
}

/// Every session's lane, created on first use and forgotten once idle.
#[derive(Default)]
pub(crate) struct Lanes {
    lanes: Mutex<(HashMap<String, Arc<Lane>>, usize)>,
}

impl Lanes {
    /// Take a place in `key`'s line.
    pub(crate) fn enter(&self, key: &str) -> Place {
        let mut guard = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let (lanes, prune_at) = &mut *guard;
        if lanes.len() > *prune_at {
            // Idle lanes nobody holds: forgotten, so the map stays as small as the activity.
            lanes.retain(|_, l| Arc::strong_count(l) > 1 || !l.idle());
            *prune_at = (lanes.len() * 2).max(256);
        }
        lanes.entry(key.to_string()).or_default().clone().enter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn runs_take_their_turns_in_the_order_they_were_started() {
        let lanes = Arc::new(Lanes::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..200 {
            let place = lanes.enter("k");
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let _turn = place.turn().await.expect("turn");
                order.lock().expect("order").push(i);
                tokio::task::yield_now().await;
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let order = order.lock().expect("order").clone();
        assert_eq!(order, (0..200).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_run_that_goes_away_while_waiting_does_not_block_the_lane() {
        let lanes = Lanes::default();
        let first = lanes.enter("k").turn().await.expect("first");
        let gone = lanes.enter("k");
        let third = lanes.enter("k");
        drop(gone);
        drop(first);
        assert!(third.turn().await.is_some());
        // And the lane is free again afterwards.
        assert!(matches!(lanes.enter("k"), Place::Now(_)));
    }
}
