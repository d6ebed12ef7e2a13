//! The sessions pane's order: the sort mode (activity, name, unread) and the hold that keeps
//! rows where they are while the owner moves through the list. New activity then only marks
//! its rows; the list re-sorts once the owner pauses (no movement key for [`HOLD_TICKS`]
//! ticks) or picks a sort.

use std::collections::{HashMap, HashSet};

use super::state::SessionRow;

/// Ticks (seconds) without a movement key before held rows re-sort.
pub const HOLD_TICKS: u64 = 2;

/// How the rows are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortMode {
    /// Newest activity first (the engine's order).
    #[default]
    Activity,
    /// By name, A to Z.
    Name,
    /// Most unread first.
    Unread,
}

impl SortMode {
    pub fn next(self) -> SortMode {
        match self {
            SortMode::Activity => SortMode::Name,
            SortMode::Name => SortMode::Unread,
            SortMode::Unread => SortMode::Activity,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortMode::Activity => "activity",
            SortMode::Name => "name",
            SortMode::Unread => "unread",
        }
    }

    /// Sorted by the console over the rows it has loaded, not by the engine over all.
    pub fn console_side(self) -> bool {
        self != SortMode::Activity
    }
}

/// The order state.
#[derive(Debug, Clone, Default)]
pub struct Order {
    pub mode: SortMode,
    /// Sessions with activity since the rows were last sorted.
    pub marked: HashSet<String>,
    /// The tick of the last movement key in the list.
    last_move: Option<u64>,
    /// A page arrived while held: re-sort when the owner pauses.
    pub held: bool,
}

impl Order {
    pub fn moved(&mut self, tick: u64) {
        self.last_move = Some(tick);
    }

    /// Forget the last movement (a sort asked for applies at once).
    pub fn moved_never(&mut self) {
        self.last_move = None;
    }

    /// The owner is moving through the list now: rows keep their places.
    pub fn holding(&self, tick: u64) -> bool {
        self.last_move.is_some_and(|t| tick < t + HOLD_TICKS)
    }

    /// The rows were just put in order: nothing is pending or marked any more.
    pub fn settled(&mut self) {
        self.held = false;
        self.marked.clear();
    }
}

/// `fresh` merged into `shown` without moving anything: each shown row takes its fresh
/// fields, and is marked when it has new activity. Only when `fresh` holds every shown row
/// (the same sessions, reordered): a session gone (deleted, filtered out) must leave the
/// list at once, so then nothing is merged and false is returned.
pub fn merge_held(
    shown: &mut [SessionRow],
    fresh: &[SessionRow],
    marked: &mut HashSet<String>,
) -> bool {
    let by_key: HashMap<&str, &SessionRow> = fresh.iter().map(|r| (r.key.as_str(), r)).collect();
    if shown.len() != fresh.len() || shown.iter().any(|r| !by_key.contains_key(r.key.as_str())) {
        return false;
    }
    for row in shown.iter_mut() {
        if let Some(new) = by_key.get(row.key.as_str()) {
            if new.updated_at > row.updated_at {
                marked.insert(row.key.clone());
            }
            *row = (*new).clone();
        }
    }
    true
}

/// Put a loaded window in the console-side order of `mode` (stable: ties keep the engine's
/// newest-first order).
pub fn sort_window(rows: &mut [SessionRow], mode: SortMode, unread: &HashMap<String, u32>) {
    match mode {
        SortMode::Activity => {}
        SortMode::Name => rows.sort_by_cached_key(|r| r.name.to_lowercase()),
        SortMode::Unread => {
            rows.sort_by_key(|r| std::cmp::Reverse(unread.get(&r.key).copied().unwrap_or(0)))
        }
    }
}
