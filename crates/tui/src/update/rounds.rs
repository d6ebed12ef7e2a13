//! `update` for the rounds pane: the exchanges it needs loaded, and opening one.

use super::Console;
use crate::effects::Effect;
use crate::exchanges::{ExchangeView, Scope};

impl Console {
    /// The exchanges the rounds pane and the exchange view need loaded.
    pub(super) fn exchanges_refresh(&mut self) -> Vec<Effect> {
        let s = &mut self.state;
        // With no session selected, "this session" has nothing to narrow to: all.
        let wanted = match (s.rounds.all, s.sessions.selected_key()) {
            (false, Some(k)) => Scope::Session(k.to_string()),
            _ => Scope::All,
        };
        let mut effects: Vec<Effect> = s.rounds.exchanges.refresh(wanted).into_iter().collect();
        if let Some(v) = &mut s.rounds.exchange_view {
            effects.extend(v.refresh());
        }
        effects
    }

    /// Enter on the rounds pane: open the exchange under the cursor.
    pub(super) fn open_exchange(&mut self) {
        let s = &mut self.state;
        let Some(summary) = s.rounds.exchanges.selected().cloned() else {
            s.flash("No exchange here to open.", false);
            return;
        };
        let generation = s.rounds.exchanges.next_view_generation();
        s.rounds.exchange_view = Some(ExchangeView::new(summary, generation));
    }
}
