//! The sessions pane's order: the sort mode (activity, name, unread) and the hold that keeps
//! rows where they are while the owner moves through the list. New activity then only marks
//! its rows; the list re-sorts once the owner pauses (no movement key for [`HOLD_TICKS`]
//! ticks) or picks a sort. Activity and name are the engine's orders over every session;
//! unread counts live only in the console, so unread sorts the loaded window (sessions with
//! unread messages are the recently active ones the activity window holds), and so does
//! name on an engine that predates the name order.

use std::collections::{HashMap, HashSet};

use super::state::SessionRow;
use switchboard_types::api::SessionsOrder;

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

    /// The order the engine is asked for: unread sorts the newest-first window.
    pub fn engine_order(self) -> SessionsOrder {
        match self {
            SortMode::Activity | SortMode::Unread => SessionsOrder::Activity,
            SortMode::Name => SessionsOrder::Name,
        }
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
    /// The last page came in another order than the one asked for (an engine or gateway
    /// that predates the name order answers newest first): the console sorts what it has.
    pub engine_ignored: bool,
}

impl Order {
    /// The console sorts the loaded rows itself (not the engine over every session).
    pub fn sorts_loaded(&self) -> bool {
        self.mode == SortMode::Unread || (self.mode != SortMode::Activity && self.engine_ignored)
    }

    /// A page in `order` arrived for a query in this mode.
    pub fn page_order(&mut self, order: SessionsOrder) {
        self.engine_ignored = order != self.mode.engine_order();
    }

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

/// Put a loaded window in the order of `order`'s mode when the console sorts it
/// ([`Order::sorts_loaded`]); otherwise the engine's order stands. Names sort as the engine
/// sorts them (lower-cased, ties by key); unread is stable, so ties keep newest first.
pub fn sort_window(rows: &mut [SessionRow], order: &Order, unread: &HashMap<String, u32>) {
    if !order.sorts_loaded() {
        return;
    }
    match order.mode {
        SortMode::Activity => {}
        SortMode::Name => rows.sort_by_cached_key(|r| (r.name.to_lowercase(), r.key.clone())),
        SortMode::Unread => {
            rows.sort_by_key(|r| std::cmp::Reverse(unread.get(&r.key).copied().unwrap_or(0)))
        }
    }
}
