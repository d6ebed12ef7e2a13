//! The sessions pane's state: a window of the sessions matching the filters, the selection
//! (a position in the whole newest-first order), the filters, and the marks (running, unread).

use std::collections::{HashMap, HashSet};

use crate::api::SessionKind;

use super::state::SessionRow;

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct SessionsPane {
    /// A window of the sessions matching the filters, starting at `offset` in that
    /// (newest-first) order; `selected` is a position in the whole order, not the window.
    pub rows: Vec<SessionRow>,
    pub total: u64,
    /// How many sessions match the filters (0 = not known: the window is all there is).
    pub matching: u64,
    pub selected: usize,
    pub offset: usize,
    pub filter: String,
    pub kind_filter: Option<SessionKind>,
    /// Only sessions active within this many minutes.
    pub active_within: Option<i64>,
    pub show_archived: bool,
    pub running: HashSet<String>,
    pub unread: HashMap<String, u32>,
    /// How the pane is ordered, and the rows marked with new activity.
    pub order: crate::tui::sessions_order::Order,
    /// Effective policy of the selected session and where it comes from (status line).
    pub selected_policy: Option<String>,
}

impl SessionsPane {
    pub fn selected_key(&self) -> Option<&str> {
        let i = self.selected.checked_sub(self.offset)?;
        self.rows.get(i).map(|r| r.key.as_str())
    }

    /// How many sessions the pane can scroll through.
    pub fn session_count(&self) -> usize {
        (self.matching as usize).max(self.offset + self.rows.len())
    }
}
