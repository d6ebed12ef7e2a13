//! Merged pages. Each source pages itself; a merged page takes the first rows of every
//! source's page in the merged order and remembers how far into each source it got, so the
//! next page asks each source from its own position (its cursor), never from a merged offset
//! it cannot know. Positions are kept per query for the pages handed out (bounded); a page
//! asked for with no kept position is walked to from the nearest one that is.

use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};

use switchboard_types::api::{ExchangeSummary, SessionRow, SessionsOrder, SessionsQuery};

/// Positions kept, over every query (the oldest go first).
const KEPT: usize = 1024;

/// What identifies a listing apart from where its page starts and how long it is.
pub fn signature(q: &SessionsQuery) -> String {
    format!(
        "{:?}|{}|{}|{:?}|{}|{}|{:?}|{:?}",
        q.kinds, q.text, q.archived, q.active_since, q.entries, q.previews, q.order, q.source
    )
}

/// The merged order of session rows: newest activity first, or by shown name; ties by key
/// (a reference, so the same key on two sources has one fixed order too).
pub fn compare_rows(order: SessionsOrder, a: &SessionRow, b: &SessionRow) -> Ordering {
    match order {
        SessionsOrder::Activity => b.updated_at.cmp(&a.updated_at).then(a.key.cmp(&b.key)),
        SessionsOrder::Name => a
            .name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then(a.key.cmp(&b.key)),
    }
}

/// The merged order of exchanges: newest start first, ties by id (as each store orders its
/// own).
pub fn compare_exchanges(a: &ExchangeSummary, b: &ExchangeSummary) -> Ordering {
    b.started_at
        .cmp(&a.started_at)
        .then_with(|| b.id.cmp(&a.id))
}

/// Merge per-source pages (each already in `cmp` order): the first `limit` items overall,
/// and how many were taken from each source.
pub fn merge<T>(
    pages: Vec<Vec<T>>,
    limit: usize,
    cmp: impl Fn(&T, &T) -> Ordering,
) -> (Vec<T>, Vec<usize>) {
    let mut taken = vec![0; pages.len()];
    let mut heads: Vec<VecDeque<T>> = pages.into_iter().map(VecDeque::from).collect();
    let mut out = Vec::with_capacity(limit);
    while out.len() < limit {
        let mut best: Option<usize> = None;
        for (i, head) in heads.iter().enumerate() {
            let Some(candidate) = head.front() else {
                continue;
            };
            let better = match best.and_then(|b| heads[b].front()) {
                Some(current) => cmp(candidate, current) == Ordering::Less,
                None => true,
            };
            if better {
                best = Some(i);
            }
        }
        let Some(b) = best else { break };
        if let Some(item) = heads[b].pop_front() {
            out.push(item);
            taken[b] += 1;
        }
    }
    (out, taken)
}

/// Per-source positions of merged pages handed out, by listing and merged offset.
#[derive(Default)]
pub struct Positions {
    kept: HashMap<(String, usize), Vec<usize>>,
    order: VecDeque<(String, usize)>,
}

impl Positions {
    /// The positions of merged offset `offset` of listing `sig`, or the nearest kept one
    /// before it (with its offset) to walk from; offset 0 is always known.
    pub fn nearest(&self, sig: &str, offset: usize, sources: usize) -> (usize, Vec<usize>) {
        let mut best = (0, vec![0; sources]);
        for ((s, at), positions) in &self.kept {
            if s == sig && *at <= offset && *at >= best.0 && positions.len() == sources {
                best = (*at, positions.clone());
            }
        }
        best
    }

    pub fn keep(&mut self, sig: &str, offset: usize, positions: Vec<usize>) {
        let k = (sig.to_string(), offset);
        if self.kept.insert(k.clone(), positions).is_none() {
            self.order.push_back(k);
        }
        while self.order.len() > KEPT {
            if let Some(old) = self.order.pop_front() {
                self.kept.remove(&old);
            }
        }
    }
}

/// Where the next page of exchanges starts on one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    /// From its newest.
    Start,
    /// After this exchange (its bare id).
    After(String),
    /// Nothing more there.
    Done,
}

/// Per-source cursors of merged exchange pages, by the merged page's last id.
#[derive(Default)]
pub struct Cursors {
    kept: HashMap<String, Vec<Cursor>>,
    order: VecDeque<String>,
}

impl Cursors {
    pub fn get(&self, last: &str) -> Option<Vec<Cursor>> {
        self.kept.get(last).cloned()
    }

    pub fn keep(&mut self, last: String, cursors: Vec<Cursor>) {
        if self.kept.insert(last.clone(), cursors).is_none() {
            self.order.push_back(last);
        }
        while self.order.len() > KEPT {
            if let Some(old) = self.order.pop_front() {
                self.kept.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_takes_the_first_items_in_order_and_counts_each_source() {
        let a = vec![9, 7, 3];
        let b = vec![8, 2];
        let c: Vec<i32> = vec![];
        let (out, taken) = merge(vec![a, b, c], 4, |x, y| y.cmp(x));
        assert_eq!(out, [9, 8, 7, 3]);
        assert_eq!(taken, [3, 1, 0]);
        let (out, taken) = merge(vec![vec![1], vec![1]], 5, |x, y| y.cmp(x));
        assert_eq!(out, [1, 1]);
        assert_eq!(taken, [1, 1], "ties go to the first source first");
    }

    #[test]
    fn positions_walk_from_the_nearest_kept_page() {
        let mut p = Positions::default();
        assert_eq!(p.nearest("s", 100, 2), (0, vec![0, 0]));
        p.keep("s", 50, vec![30, 20]);
        p.keep("t", 80, vec![80, 0]);
        assert_eq!(p.nearest("s", 100, 2), (50, vec![30, 20]));
        assert_eq!(p.nearest("s", 50, 2), (50, vec![30, 20]));
        assert_eq!(p.nearest("s", 49, 2), (0, vec![0, 0]));
        for i in 0..(KEPT + 10) {
            p.keep("u", i, vec![i, 0]);
        }
        assert!(p.kept.len() <= KEPT);
    }
}
