//! `update` for the drill-down: Enter on a traffic pair or the exchanges key on a session
//! opens that list, Enter on an exchange opens the exchange view over it, Esc walks back
//! one level (view → list → the traffic view or the panes).

use super::Console;
use crate::drill::{Drill, Origin};
use crate::effects::Effect;
use crate::exchanges::{ExchangeView, PairEnds, Scope};

impl Console {
    /// Enter in the traffic view: the selected pair's exchanges.
    pub(super) fn drill_pair(&mut self) {
        let s = &mut self.state;
        let Some((requester, target)) = s.traffic.selected.clone() else {
            s.traffic.note = Some("no pair selected: nothing to open".into());
            return;
        };
        let by_agent = s.traffic.by_agent;
        self.open_drill(
            Origin::Traffic,
            Scope::Pair(PairEnds {
                requester,
                target,
                by_agent,
            }),
        );
    }

    /// The exchanges key: the selected session's exchanges.
    pub(super) fn drill_session(&mut self) {
        let Some(key) = self.state.sessions.selected_key().map(str::to_string) else {
            self.state.flash("No session selected: no exchanges to list.", false);
            return;
        };
        self.open_drill(Origin::Sessions, Scope::Session(key));
    }

    fn open_drill(&mut self, origin: Origin, scope: Scope) {
        let s = &mut self.state;
        // An exchange view open from the rounds pane would otherwise read as this list's.
        s.rounds.exchange_view = None;
        s.drill = Some(Drill::new(origin, scope));
    }

    /// Enter on the list: the exchange under the cursor in the exchange view.
    pub(super) fn drill_open_exchange(&mut self) {
        let s = &mut self.state;
        let Some(summary) = s
            .drill
            .as_ref()
            .and_then(|d| d.list.selected())
            .cloned()
        else {
            s.flash("No exchange here to open.", false);
            return;
        };
        // The rounds pane's counter: one exchange view at a time, whichever list opened it.
        let generation = s.rounds.exchanges.next_view_generation();
        s.rounds.exchange_view = Some(ExchangeView::new(summary, generation));
    }

    /// Esc while drilled down: the exchange view closes to the list, the list to where it
    /// was opened from (the traffic view stays open under a list opened from it).
    pub(super) fn drill_back(&mut self) {
        let s = &mut self.state;
        if s.rounds.exchange_view.is_some() {
            s.rounds.exchange_view = None;
        } else {
            s.drill = None;
        }
    }

    /// The drill-down list's load, if it needs one.
    pub(super) fn drill_refresh(&mut self) -> Option<Effect> {
        let d = self.state.drill.as_mut()?;
        let scope = d.list.scope.clone();
        d.list.refresh(scope)
    }
}
