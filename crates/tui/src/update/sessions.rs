//! `update` for the sessions pane: its filters and order, the window of rows loaded around
//! the selection (asked for by generation, applied only while still the latest), moving the
//! selection, and jumping to a session by key.

use super::{Console, SESSION_MARGIN, SESSION_WINDOW};
use crate::action::Intent;
use crate::effects::Effect;
use crate::state::{Focus, SessionRow, TRANSCRIPT_WINDOW};
use switchboard_types::api::{ApiError, SessionKind, SessionsPage, SessionsQuery};

impl Console {
    /// The sessions pane's filters and order: `k` kind, `a` activity, archived, sort.
    pub(super) fn sessions_intent(&mut self, intent: Intent) {
        let s = &mut self.state;
        match intent {
            Intent::CycleKind => {
                const ORDER: [Option<SessionKind>; 7] = [
                    None,
                    Some(SessionKind::Main),
                    Some(SessionKind::Group),
                    Some(SessionKind::Cron),
                    Some(SessionKind::Hook),
                    Some(SessionKind::Node),
                    Some(SessionKind::Other),
                ];
                let i = ORDER
                    .iter()
                    .position(|k| *k == s.sessions.kind_filter)
                    .unwrap_or(0);
                s.sessions.kind_filter = ORDER[(i + 1) % ORDER.len()];
                s.sessions.selected = 0;
                self.new_sessions_query();
            }
            Intent::CycleSource => {
                if !s.sources.merged() {
                    s.flash("one source: nothing to filter by", false);
                    return;
                }
                let next = s.sources.next_filter(s.sessions.source_filter.as_deref());
                self.filter_source(next);
            }
            Intent::CycleActive => {
                const ORDER: [Option<i64>; 4] = [None, Some(5), Some(60), Some(24 * 60)];
                let i = ORDER
                    .iter()
                    .position(|m| *m == s.sessions.active_within)
                    .unwrap_or(0);
                s.sessions.active_within = ORDER[(i + 1) % ORDER.len()];
                s.sessions.selected = 0;
                self.new_sessions_query();
            }
            Intent::ToggleArchived => {
                s.sessions.show_archived = !s.sessions.show_archived;
                self.new_sessions_query();
            }
            Intent::CycleSort => {
                let before = s.sessions.order.mode.engine_order();
                s.sessions.order.mode = s.sessions.order.mode.next();
                if s.sessions.order.mode.engine_order() != before {
                    // Another order of every session: its top, not the old position.
                    s.sessions.selected = 0;
                }
                // A sort asked for applies now, held or not.
                s.sessions.order.moved_never();
                self.sessions_load.generation += 1;
                self.sessions_load.dirty = true;
            }
            _ => {}
        }
    }

    /// Show only one source's sessions (`None`: every source's); `:source`, `O`.
    pub(super) fn filter_source(&mut self, source: Option<String>) {
        let s = &mut self.state;
        let text = match &source {
            Some(name) => {
                format!("sessions of source {name} only (O for the next, :source for all)")
            }
            None => "sessions of every source".to_string(),
        };
        s.sessions.source_filter = source;
        s.sessions.selected = 0;
        s.flash(text, false);
        self.new_sessions_query();
    }

    /// `1`/`2` in the exchange view: select the requester/target in the sessions pane. A
    /// session outside the loaded window is found by filtering for its key; the selection
    /// lands once the page shows it.
    pub(super) fn jump_to(&mut self, key: String) {
        self.state.rounds.exchange_view = None;
        // The jump leaves the drill-down and the traffic view under it: the session is shown
        // in the panes.
        self.state.drill = None;
        self.state.traffic.open = false;
        self.state.traffic.confirm = None;
        self.state.focus = Focus::Sessions;
        let s = &self.state;
        if let Some(i) = s.sessions.rows.iter().position(|r| r.key == key) {
            let at = s.sessions.offset + i;
            self.select(at);
            return;
        }
        self.state.flash(
            format!("finding {key} (filter; Esc in the filter clears it)"),
            false,
        );
        self.state.sessions.filter = key.clone();
        self.state.sessions.selected = 0;
        self.state.rounds.exchanges.jump = Some(key);
        self.new_sessions_query();
    }

    pub(super) fn selected_row(&self) -> Option<&SessionRow> {
        let s = &self.state;
        s.sessions
            .rows
            .get(s.sessions.selected.checked_sub(s.sessions.offset)?)
    }

    pub(super) fn sessions_request(&mut self) -> Effect {
        let s = &self.state;
        // The window is centred on the selection, so moving within it needs no reload.
        let start = s.sessions.selected.saturating_sub(SESSION_WINDOW / 2);
        // Counting walks every matching index entry: only when the set may have changed
        // size (sessions created or removed, filters changed), not on every new message.
        let count = std::mem::take(&mut self.sessions_load.recount);
        let query = SessionsQuery {
            kinds: s.sessions.kind_filter.into_iter().collect(),
            text: s.sessions.filter.clone(),
            archived: s.sessions.show_archived,
            active_since: s.sessions.active_within.map(|m| s.now_ms - m * 60_000),
            offset: start,
            limit: SESSION_WINDOW,
            count,
            // The list shows the row's own fields; entries would only weigh on every page.
            entries: false,
            // Only a pane wide enough for the column pays for the last messages.
            previews: crate::view::shows_previews_for(s),
            order: s.sessions.order.mode.engine_order(),
            source: s.sessions.source_filter.clone(),
        };
        self.sessions_load.previews = query.previews;
        self.sessions_load.in_flight = Some(self.sessions_load.generation);
        self.sessions_load.running_since_request.clear();
        Effect::LoadSessions {
            generation: self.sessions_load.generation,
            query,
        }
    }

    /// The sessions query changed: what is under way answers an old question.
    pub(super) fn new_sessions_query(&mut self) {
        self.sessions_load.generation += 1;
        self.sessions_load.dirty = true;
        self.sessions_load.recount = true;
    }

    pub(super) fn sessions_loaded(
        &mut self,
        generation: u64,
        result: Result<SessionsPage, ApiError>,
    ) {
        if self.sessions_load.in_flight == Some(generation) {
            self.sessions_load.in_flight = None;
        }
        if generation != self.sessions_load.generation {
            return;
        }
        let page = match result {
            Ok(page) => page,
            Err(e) => {
                // The count asked for was not given: ask again with the next load (which
                // comes with the next event or key, not in a loop).
                self.sessions_load.recount = true;
                self.state.flash(format!("cannot read sessions: {e}"), true);
                return;
            }
        };
        let s = &mut self.state;
        let keep = s.sessions.selected_key().map(str::to_string);
        let had_rows = !s.sessions.rows.is_empty();
        let fresh: Vec<_> = page.rows.iter().map(SessionRow::from_api).collect();
        s.names.learn(&fresh);
        if had_rows
            && page.offset == s.sessions.offset
            && s.sessions.order.holding(s.ticks)
            && crate::sessions_order::merge_held(
                &mut s.sessions.rows,
                &fresh,
                &mut s.sessions.order.marked,
            )
        {
            // The owner is moving through the list: rows keep their places (marked when
            // active) until a pause re-sorts them.
            s.sessions.order.held = true;
        } else {
            s.sessions.rows = fresh;
            s.sessions.order.page_order(page.order);
            crate::sessions_order::sort_window(
                &mut s.sessions.rows,
                &s.sessions.order,
                &s.sessions.unread,
            );
            s.sessions.order.settled();
        }
        // The page says what runs now, so a console opened while runs go (or one that
        // missed events) shows them; events keep it current between pages.
        for r in &page.rows {
            if self.sessions_load.running_since_request.contains(&r.key) {
                continue;
            }
            if r.running {
                s.sessions.running.insert(r.key.clone());
            } else {
                s.sessions.running.remove(&r.key);
                // Its run ended while the console was not looking (events were missed).
                s.transcript.streams.not_running(&r.key);
            }
        }
        if let Some(m) = page.matching {
            s.sessions.matching = m;
        }
        s.sessions.total = page.total;
        let matching = s.sessions.matching;
        s.sessions.offset = page.offset.min(matching as usize);
        if !had_rows && !s.sessions.rows.is_empty() {
            // The first session to appear becomes the selection: show it.
            s.sessions.selected = s.sessions.offset;
        }
        if let Some(k) = s.rounds.exchanges.jump.take() {
            match s.sessions.rows.iter().position(|r| r.key == k) {
                Some(i) => s.sessions.selected = s.sessions.offset + i,
                None => {
                    // The filter was set to find it: nothing to find, so it goes again.
                    s.flash(format!("{k} no longer exists"), true);
                    s.sessions.filter.clear();
                    self.new_sessions_query();
                }
            }
            return;
        }
        if let Some(k) = keep {
            if let Some(i) = s.sessions.rows.iter().position(|r| r.key == k) {
                s.sessions.selected = s.sessions.offset + i;
            } else {
                // The selected session is gone (deleted, filtered out).
                let last = s.sessions.session_count().saturating_sub(1);
                s.sessions.selected = s.sessions.selected.min(last);
            }
        }
        self.select_pending();
    }

    pub(super) fn select(&mut self, index: usize) {
        let s = &mut self.state;
        let last = s.sessions.session_count().saturating_sub(1);
        let index = index.min(last);
        if index != s.sessions.selected {
            // Picking another session ends writing to the one `/new` named.
            s.composer.target = None;
            s.sessions.selected = index;
            s.transcript.view.reset();
            s.transcript.window = TRANSCRIPT_WINDOW;
            s.transcript.follow = true;
        }
        // Close to either edge of the loaded window (with more beyond): move the window.
        let (lo, hi) = (s.sessions.offset, s.sessions.offset + s.sessions.rows.len());
        let more_above = lo > 0;
        let more_below = (hi as u64) < s.sessions.matching;
        if (more_above && index < lo + SESSION_MARGIN)
            || (more_below && index + SESSION_MARGIN >= hi)
            || index < lo
            || index >= hi
        {
            self.sessions_load.generation += 1;
            self.sessions_load.dirty = true;
        }
    }
}
