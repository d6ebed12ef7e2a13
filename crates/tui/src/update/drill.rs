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
            self.state
                .flash("No session selected: no exchanges to list.", false);
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
        let Some(summary) = s.drill.as_ref().and_then(|d| d.list.selected()).cloned() else {
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

#[cfg(test)]
mod tests {
    use crate::action::{Action, Intent};
    use crate::effects::Effect;
    use crate::exchanges::{ListId, Scope};
    use crate::state::State;
    use crate::update::Console;
    use switchboard_types::api::{ExchangeSummary, ExchangesPage};

    fn summary(id: &str, requester: &str, target: &str) -> ExchangeSummary {
        ExchangeSummary {
            id: id.into(),
            kind: "send".parse().unwrap(),
            requester: requester.into(),
            target: target.into(),
            message: String::new(),
            started_at: 0,
            ended_at: None,
            status: "done".parse().unwrap(),
            rounds: 1,
            ended_reason: None,
            detail: String::new(),
            announce: None,
        }
    }

    /// A console with the traffic view open on the pair a → b.
    fn on_traffic() -> Console {
        let mut state = State::new("here".into(), 0);
        state.traffic.open = true;
        state.traffic.selected = Some(("a".into(), "b".into()));
        Console::new(state)
    }

    /// The drill-down list's load among `effects`, answered with `page`.
    fn answer(c: &mut Console, effects: Vec<Effect>, page: Vec<ExchangeSummary>, more: bool) {
        for e in effects {
            if let Effect::LoadExchanges {
                list: ListId::Drill,
                generation,
                query,
            } = e
            {
                // The API is asked for the requester's exchanges; the target is kept here.
                assert_eq!(query.key.as_deref(), Some("a"));
                c.update(Action::ExchangesLoaded {
                    list: ListId::Drill,
                    generation,
                    before: query.before,
                    result: Box::new(Ok(ExchangesPage {
                        exchanges: page.clone(),
                        more,
                    })),
                });
            }
        }
    }

    #[test]
    fn enter_goes_down_a_level_and_esc_comes_back_one_at_a_time() {
        let mut c = on_traffic();
        c.update(Action::Intent(Intent::Open));
        let d = c.state.drill.as_ref().expect("the pair's list");
        assert!(matches!(&d.list.scope, Scope::Pair(p) if p.requester == "a" && p.target == "b"));
        let effects = c.refresh();
        answer(
            &mut c,
            effects,
            vec![
                summary("3", "a", "b"),
                summary("2", "a", "c"),
                summary("1", "a", "b"),
            ],
            false,
        );
        let ids: Vec<&str> = c.state.drill.as_ref().map_or(vec![], |d| {
            d.list.entries.iter().map(|e| e.id.as_str()).collect()
        });
        assert_eq!(ids, ["3", "1"], "only a → b, newest first");
        c.update(Action::Intent(Intent::Down));
        c.update(Action::Intent(Intent::Open));
        assert_eq!(
            c.state.rounds.exchange_view.as_ref().map(|v| v.id()),
            Some("1")
        );
        // Esc: the view, then the list, then the traffic view.
        c.update(Action::Intent(Intent::Close));
        assert!(c.state.rounds.exchange_view.is_none() && c.state.drill.is_some());
        c.update(Action::Intent(Intent::Close));
        assert!(c.state.drill.is_none() && c.state.traffic.open);
        c.update(Action::Intent(Intent::Close));
        assert!(!c.state.traffic.open);
    }

    #[test]
    fn a_page_with_none_of_the_pairs_exchanges_asks_for_the_next_from_where_it_ended() {
        let mut c = on_traffic();
        c.update(Action::Intent(Intent::Open));
        let effects = c.refresh();
        answer(
            &mut c,
            effects,
            vec![summary("9", "a", "c"), summary("8", "a", "c")],
            true,
        );
        // Nothing kept, more to read: the next page is asked for before the last one read.
        let next = c.refresh();
        let before = next.iter().find_map(|e| match e {
            Effect::LoadExchanges {
                list: ListId::Drill,
                query,
                ..
            } => Some(query.before.clone()),
            _ => None,
        });
        assert_eq!(before, Some(Some("8".to_string())));
        answer(&mut c, next, vec![summary("7", "a", "b")], false);
        let d = c.state.drill.as_ref().expect("list");
        assert_eq!(d.list.entries.len(), 1);
        assert!(!d.list.more);
    }

    #[test]
    fn the_exchanges_key_lists_the_selected_sessions_and_esc_returns_to_the_panes() {
        let mut c = Console::new(State::new("here".into(), 0));
        c.update(Action::Intent(Intent::SessionExchanges));
        assert!(
            c.state.drill.is_none(),
            "no session selected: nothing to list"
        );
        c.state.sessions.rows = vec![crate::sessions::SessionRow {
            key: "k".into(),
            source: None,
            kind: switchboard_types::api::SessionKind::Main,
            name: "k".into(),
            channel: String::new(),
            updated_at: 0,
            policy: switchboard_types::api::PolicySetting::Allow,
            policy_override: false,
            policy_detail: String::new(),
            policy_words: String::new(),
            archived: false,
            named: false,
            preview: None,
        }];
        c.update(Action::Intent(Intent::SessionExchanges));
        let d = c.state.drill.as_ref().expect("the session's list");
        assert_eq!(d.list.scope, Scope::Session("k".into()));
        assert_eq!(d.origin, crate::drill::Origin::Sessions);
        c.update(Action::Intent(Intent::Close));
        assert!(c.state.drill.is_none() && !c.state.traffic.open);
    }

    /// A head reload (an event) whose page holds none of the pair's exchanges but overlaps
    /// what was read keeps the older ones (and where the next page starts); one that does
    /// not overlap starts the list over from it.
    #[test]
    fn a_head_page_without_the_pairs_exchanges_keeps_the_older_ones_when_it_overlaps() {
        use crate::exchanges::{Exchanges, PairEnds};
        let pair = Scope::Pair(PairEnds {
            requester: "a".into(),
            target: "b".into(),
            by_agent: false,
        });
        let page = |ids: &[(&str, &str)], more: bool| {
            Ok(ExchangesPage {
                exchanges: ids.iter().map(|(id, t)| summary(id, "a", t)).collect(),
                more,
            })
        };
        let mut x = Exchanges::new(ListId::Drill, pair);
        let Some(Effect::LoadExchanges { generation, .. }) = x.refresh(x.scope.clone()) else {
            panic!("a first load");
        };
        x.loaded(
            generation,
            None,
            page(&[("5", "c"), ("4", "b"), ("3", "c")], true),
        );
        assert_eq!(x.entries.len(), 1);
        // Two new exchanges to c: the head page (3 at a time) is 7 6 5, overlapping at 5.
        x.reload();
        let Some(Effect::LoadExchanges { query, .. }) = x.refresh(x.scope.clone()) else {
            panic!("a head load");
        };
        assert_eq!(query.before, None);
        x.loaded(
            generation,
            None,
            page(&[("7", "c"), ("6", "c"), ("5", "c")], true),
        );
        let ids: Vec<&str> = x.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["4"], "the older exchange of the pair is kept");
        // The next page still starts after 3, where the scan ended (not after 4).
        x.move_cursor(crate::action::Intent::Bottom, 10);
        let Some(Effect::LoadExchanges { query, .. }) = x.refresh(x.scope.clone()) else {
            panic!("a next page");
        };
        assert_eq!(query.before.as_deref(), Some("3"));
        // A head page with no overlap (many new ones): the list is that page.
        x.loaded(generation, Some("3".into()), page(&[], false));
        x.reload();
        let _ = x.refresh(x.scope.clone());
        x.loaded(
            generation,
            None,
            page(&[("12", "b"), ("11", "c"), ("10", "c")], true),
        );
        let ids: Vec<&str> = x.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["12"]);
        assert!(x.more);
    }
}
