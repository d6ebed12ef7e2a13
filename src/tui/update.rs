//! `update`: the one place console state changes. Intents, keys, pastes, engine events,
//! ticks and the results of loads come in as `Action`s; `update` changes `State` and returns
//! `Effect`s (loads, sends, tool calls) for the runner, so nothing here waits or reads storage.
//! `refresh` works out which loads the state needs; a load's result is applied only while it
//! is still the latest asked for the same filters, window and selection.

mod commands;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::HashSet;

use super::action::{Action, Intent};
use super::effects::Effect;
use super::exchanges::{ExchangeView, Scope};
use super::state::{
    ExchangeRounds, Focus, RoundView, SpawnView, State, TRANSCRIPT_MAX, TRANSCRIPT_WINDOW,
};
use super::streams::Delta;

mod transcript_keys;
use crate::api::{
    ApiError, EngineEvent, ExchangeEnd, RunStatus, SendKind, SessionKind, SessionsPage,
    SessionsQuery, TranscriptPage, TranscriptQuery,
};

/// Sessions loaded around the selection, so scrolling rarely waits for a load.
const SESSION_WINDOW: usize = 400;
/// How close to the window's edge the selection may come before the window moves.
const SESSION_MARGIN: usize = 50;

/// The console: its state plus what it has asked for and not yet received.
pub struct Console {
    pub state: State,
    /// Bumped whenever the sessions query changes (filters, window position): a page for an
    /// older generation answers a question nobody asks any more.
    sessions_generation: u64,
    /// What is shown may be out of date: load the page again.
    sessions_dirty: bool,
    /// The number of matching sessions must be counted again on the next load.
    recount: bool,
    /// The generation of the sessions load under way (one at a time per generation).
    sessions_in_flight: Option<u64>,
    /// Sessions whose running state an event changed since the load under way was asked
    /// for: that page was read before the event, so for these keys the event is the newer
    /// word (a page read just before a run started would otherwise hide the run).
    running_since_request: HashSet<String>,
    /// Bumped whenever the transcript wanted changes (another session, a longer window).
    transcript_generation: u64,
    transcript_dirty: bool,
    /// The transcript load under way: its generation and key.
    transcript_in_flight: Option<(u64, String)>,
    /// How many lines that load asked for (fewer back: the window reaches line 1).
    transcript_asked: usize,
    /// Effects decided by `update` that are not loads (sends, tool calls), handed out by the
    /// next call that returns effects.
    queued: Vec<Effect>,
    /// A session to select as soon as a page lists it (one `/new` started).
    select_when_loaded: Option<String>,
    /// The agents were asked for (they are loaded once).
    agents_asked: bool,
}

impl Console {
    /// A console over `state`; the first `refresh` asks for everything it shows.
    pub fn new(state: State) -> Console {
        Console {
            state,
            sessions_generation: 1,
            sessions_dirty: true,
            recount: true,
            sessions_in_flight: None,
            running_since_request: HashSet::new(),
            transcript_generation: 1,
            transcript_dirty: true,
            transcript_in_flight: None,
            transcript_asked: 0,
            queued: Vec::new(),
            select_when_loaded: None,
            agents_asked: false,
        }
    }

    /// Apply one action: state changes only. Returns the sends and tool calls it decided;
    /// loads come from `refresh`, once per batch of actions.
    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Intent(i) => self.intent(i),
            Action::Key(k) => self.key(k),
            Action::Paste(text) => self.paste(&text),
            Action::Resize(w, h) => {
                if super::view::shows_previews(w) != super::view::shows_previews(self.state.width) {
                    // The last-message column comes or goes: rows with or without it.
                    self.sessions_dirty = true;
                }
                self.state.width = w;
                self.state.height = h;
            }
            Action::Click(x, y) => self.click(x, y),
            Action::Engine(e) => {
                self.state.traffic.event(&e, self.state.now_ms);
                self.engine_event(*e)
            }
            Action::Lagged => {
                self.state.traffic.lagged();
                self.state.streams.events_missed();
                self.reload_all()
            }
            Action::Tick => self.tick(),
            // The header reads the link's state when it draws; the action only wakes the loop.
            Action::LinkChanged => {}
            Action::Flash(text, error) => self.state.flash(text, error),
            Action::SessionsLoaded { generation, result } => {
                self.sessions_loaded(generation, *result)
            }
            Action::TranscriptLoaded {
                generation,
                key,
                result,
            } => self.transcript_loaded(generation, key, *result),
            Action::AgentsLoaded(result) => self.agents_loaded(*result),
            Action::StatusLoaded { key, result } => self.status_loaded(key, *result),
            Action::Aborted { key, result } => self.aborted(key, *result),
            Action::NewSession(result) => self.new_session_done(*result),
            Action::ExchangesLoaded {
                generation,
                before,
                result,
            } => self.state.exchanges.loaded(generation, before, *result),
            Action::ExchangeLoaded {
                generation,
                id,
                result,
            } => {
                if let Some(v) = &mut self.state.exchange_view {
                    v.loaded(generation, &id, *result);
                }
            }
            Action::TrafficLoaded { generation, result } => {
                self.state.traffic.loaded(generation, *result)
            }
        }
        std::mem::take(&mut self.queued)
    }

    /// Some loads are under way or wanted: results are still to come before the screen is
    /// settled.
    pub fn pending(&self) -> bool {
        self.sessions_in_flight.is_some()
            || self.transcript_in_flight.is_some()
            || self.sessions_dirty
            || self.transcript_dirty
            || self.state.selected_key() != self.state.transcript_key.as_deref()
            || self.state.exchanges.pending()
            || self
                .state
                .exchange_view
                .as_ref()
                .is_some_and(|v| v.pending())
    }

    /// Everything shown may be stale (events were missed, another process wrote).
    fn reload_all(&mut self) {
        self.sessions_dirty = true;
        self.recount = true;
        self.transcript_dirty = true;
        self.state.exchanges.reload();
    }

    /// The loads the state needs now (plus anything `update` queued). Called once per batch
    /// of actions, before drawing.
    pub fn refresh(&mut self) -> Vec<Effect> {
        let mut effects = std::mem::take(&mut self.queued);
        // A load for this generation already under way is waited for (its result is fresh
        // enough to show; the next one follows it); one for an older generation is not.
        if self.sessions_dirty && self.sessions_in_flight != Some(self.sessions_generation) {
            self.sessions_dirty = false;
            effects.push(self.sessions_request());
        }
        // Whatever moved the selection (a filter edit, a reload, a deletion), the transcript
        // follows it: checked here, once, rather than at every place that can move it.
        let selected = self.state.selected_key().map(str::to_string);
        if selected != self.state.transcript_key {
            if self.state.transcript_key.is_some() {
                // Nothing of another session stays on screen under this one's title.
                let s = &mut self.state;
                s.transcript.clear();
                s.transcript_key = None;
                s.transcript_total = 0;
                s.transcript_view.reset();
                s.transcript_window = TRANSCRIPT_WINDOW;
                s.follow = true;
                self.rescan_search();
            }
            let asked = self.transcript_in_flight.as_ref().map(|(_, k)| k);
            if selected.is_some() && asked != selected.as_ref() {
                self.transcript_generation += 1;
                self.transcript_dirty = true;
            }
        }
        self.state.selected_policy = self.selected_row().map(|r| r.policy_line());
        effects.extend(self.exchanges_refresh());
        if let Some((generation, since)) = self.state.traffic.wanted_load(self.state.now_ms) {
            effects.push(Effect::LoadTraffic { generation, since });
        }
        self.state.traffic.prepare(self.state.height as usize);
        match selected {
            None => {
                self.transcript_dirty = false;
            }
            Some(key) => {
                let in_flight_now = self
                    .transcript_in_flight
                    .as_ref()
                    .is_some_and(|(g, _)| *g == self.transcript_generation);
                if self.transcript_dirty && !in_flight_now {
                    self.transcript_dirty = false;
                    self.transcript_in_flight = Some((self.transcript_generation, key.clone()));
                    let limit = self.state.transcript_window.clamp(1, TRANSCRIPT_MAX);
                    self.transcript_asked = limit;
                    effects.push(Effect::LoadTranscript {
                        generation: self.transcript_generation,
                        query: TranscriptQuery {
                            key,
                            // The newest lines, or the window `g` and scrolling moved to.
                            before: self.state.transcript_view.window_end,
                            limit,
                            // Tool lines are loaded always; the pane hides them unless asked.
                            tools: true,
                            raw: false,
                        },
                    });
                }
            }
        }
        effects
    }

    /// The exchanges the rounds pane and the exchange view need loaded.
    fn exchanges_refresh(&mut self) -> Vec<Effect> {
        let s = &mut self.state;
        // With no session selected, "this session" has nothing to narrow to: all.
        let wanted = match (s.rounds_all, s.selected_key()) {
            (false, Some(k)) => Scope::Session(k.to_string()),
            _ => Scope::All,
        };
        let mut effects: Vec<Effect> = s.exchanges.refresh(wanted).into_iter().collect();
        if let Some(v) = &mut s.exchange_view {
            effects.extend(v.refresh());
        }
        effects
    }

    /// Enter on the rounds pane: open the exchange under the cursor.
    fn open_exchange(&mut self) {
        let s = &mut self.state;
        let Some(summary) = s.exchanges.selected().cloned() else {
            s.flash("No exchange here to open.", false);
            return;
        };
        let generation = s.exchanges.next_view_generation();
        s.exchange_view = Some(ExchangeView::new(summary, generation));
    }

    /// `1`/`2` in the exchange view: select the requester/target in the sessions pane. A
    /// session outside the loaded window is found by filtering for its key; the selection
    /// lands once the page shows it.
    fn jump_to(&mut self, key: String) {
        self.state.exchange_view = None;
        self.state.focus = Focus::Sessions;
        let s = &self.state;
        if let Some(i) = s.sessions.iter().position(|r| r.key == key) {
            let at = s.sessions_offset + i;
            self.select(at);
            return;
        }
        self.state.flash(
            format!("finding {key} (filter; Esc in the filter clears it)"),
            false,
        );
        self.state.filter = key.clone();
        self.state.selected = 0;
        self.state.exchanges.jump = Some(key);
        self.new_sessions_query();
    }

    fn selected_row(&self) -> Option<&super::state::SessionRow> {
        let s = &self.state;
        s.sessions.get(s.selected.checked_sub(s.sessions_offset)?)
    }

    fn sessions_request(&mut self) -> Effect {
        let s = &self.state;
        // The window is centred on the selection, so moving within it needs no reload.
        let start = s.selected.saturating_sub(SESSION_WINDOW / 2);
        // Counting walks every matching index entry: only when the set may have changed
        // size (sessions created or removed, filters changed), not on every new message.
        let count = std::mem::take(&mut self.recount);
        let query = SessionsQuery {
            kinds: s.kind_filter.into_iter().collect(),
            text: s.filter.clone(),
            archived: s.show_archived,
            active_since: s.active_within.map(|m| s.now_ms - m * 60_000),
            offset: start,
            limit: SESSION_WINDOW,
            count,
            // The list shows the row's own fields; entries would only weigh on every page.
            entries: false,
            // Only a pane wide enough for the column pays for the last messages.
            previews: super::view::shows_previews(s.width),
            order: s.order.mode.engine_order(),
        };
        self.sessions_in_flight = Some(self.sessions_generation);
        self.running_since_request.clear();
        Effect::LoadSessions {
            generation: self.sessions_generation,
            query,
        }
    }

    /// The sessions query changed: what is under way answers an old question.
    fn new_sessions_query(&mut self) {
        self.sessions_generation += 1;
        self.sessions_dirty = true;
        self.recount = true;
    }

    fn sessions_loaded(&mut self, generation: u64, result: Result<SessionsPage, ApiError>) {
        if self.sessions_in_flight == Some(generation) {
            self.sessions_in_flight = None;
        }
        if generation != self.sessions_generation {
            return;
        }
        let page = match result {
            Ok(page) => page,
            Err(e) => {
                // The count asked for was not given: ask again with the next load (which
                // comes with the next event or key, not in a loop).
                self.recount = true;
                self.state.flash(format!("cannot read sessions: {e}"), true);
                return;
            }
        };
        let s = &mut self.state;
        let keep = s.selected_key().map(str::to_string);
        let had_rows = !s.sessions.is_empty();
        let fresh: Vec<_> = page
            .rows
            .iter()
            .map(super::state::SessionRow::from_api)
            .collect();
        if had_rows
            && page.offset == s.sessions_offset
            && s.order.holding(s.ticks)
            && super::sessions_order::merge_held(&mut s.sessions, &fresh, &mut s.order.marked)
        {
            // The owner is moving through the list: rows keep their places (marked when
            // active) until a pause re-sorts them.
            s.order.held = true;
        } else {
            s.sessions = fresh;
            s.order.page_order(page.order);
            super::sessions_order::sort_window(&mut s.sessions, &s.order, &s.unread);
            s.order.settled();
        }
        // The page says what runs now, so a console opened while runs go (or one that
        // missed events) shows them; events keep it current between pages.
        for r in &page.rows {
            if self.running_since_request.contains(&r.key) {
                continue;
            }
            if r.running {
                s.running.insert(r.key.clone());
            } else {
                s.running.remove(&r.key);
                // Its run ended while the console was not looking (events were missed).
                s.streams.not_running(&r.key);
            }
        }
        if let Some(m) = page.matching {
            s.matching_sessions = m;
        }
        s.total_sessions = page.total;
        let matching = s.matching_sessions;
        s.sessions_offset = page.offset.min(matching as usize);
        if !had_rows && !s.sessions.is_empty() {
            // The first session to appear becomes the selection: show it.
            s.selected = s.sessions_offset;
        }
        if let Some(k) = s.exchanges.jump.take() {
            match s.sessions.iter().position(|r| r.key == k) {
                Some(i) => s.selected = s.sessions_offset + i,
                None => {
                    // The filter was set to find it: nothing to find, so it goes again.
                    s.flash(format!("{k} no longer exists"), true);
                    s.filter.clear();
                    self.new_sessions_query();
                }
            }
            return;
        }
        if let Some(k) = keep {
            if let Some(i) = s.sessions.iter().position(|r| r.key == k) {
                s.selected = s.sessions_offset + i;
            } else {
                // The selected session is gone (deleted, filtered out).
                let last = s.session_count().saturating_sub(1);
                s.selected = s.selected.min(last);
            }
        }
        self.select_pending();
    }

    fn transcript_loaded(
        &mut self,
        generation: u64,
        key: String,
        result: Result<TranscriptPage, ApiError>,
    ) {
        if self
            .transcript_in_flight
            .as_ref()
            .is_some_and(|(g, k)| *g == generation && *k == key)
        {
            self.transcript_in_flight = None;
        }
        if generation != self.transcript_generation
            || self.state.selected_key() != Some(key.as_str())
        {
            return;
        }
        let s = &mut self.state;
        if s.transcript_key.as_deref() != Some(key.as_str()) {
            // Another session: start at its end, not at the last one's scroll position.
            s.transcript.clear();
            s.transcript_total = 0;
            s.transcript_view.reset();
            s.follow = true;
        }
        match result {
            Ok(page) => {
                let lines: Vec<_> = page
                    .lines
                    .iter()
                    .map(super::state::TranscriptLine::from_api)
                    .collect();
                let total = page.last_seq;
                // A paused view is anchored to a line (`transcript_view.anchor`), so neither
                // new lines below it nor a longer window above it move what is on screen.
                // A gateway may leave older lines out to fit its frame limit: those are
                // still there to page back to.
                s.transcript_view.at_start = (page.left_out == 0
                    && lines.len() < self.transcript_asked)
                    || lines.first().is_some_and(|l| l.seq <= 1);
                // Paused on the newest window: it grows by what arrived, so the line the
                // view is anchored to is not pushed out of it by newer ones.
                if !s.follow && s.transcript_view.window_end.is_none() && s.transcript_total > 0 {
                    let arrived = (total - s.transcript_total).max(0) as usize;
                    s.transcript_window = (s.transcript_window + arrived).min(TRANSCRIPT_MAX);
                }
                s.transcript = lines;
                s.transcript_total = total;
                // The real reply lines are on screen now: their provisional text goes in
                // the same frame, so neither both nor none are ever drawn.
                s.streams.transcript_loaded(&key, total);
                self.rescan_search();
            }
            Err(e) => {
                s.transcript.clear();
                s.transcript_total = 0;
                s.flash(format!("cannot read the transcript: {e}"), true);
                self.rescan_search();
            }
        }
        let s = &mut self.state;
        s.transcript_key = Some(key.clone());
        s.unread.remove(&key);
    }

    fn select(&mut self, index: usize) {
        let s = &mut self.state;
        let last = s.session_count().saturating_sub(1);
        let index = index.min(last);
        if index != s.selected {
            // Picking another session ends writing to the one `/new` named.
            s.composer.target = None;
            s.selected = index;
            s.transcript_view.reset();
            s.transcript_window = TRANSCRIPT_WINDOW;
            s.follow = true;
        }
        // Close to either edge of the loaded window (with more beyond): move the window.
        let (lo, hi) = (s.sessions_offset, s.sessions_offset + s.sessions.len());
        let more_above = lo > 0;
        let more_below = (hi as u64) < s.matching_sessions;
        if (more_above && index < lo + SESSION_MARGIN)
            || (more_below && index + SESSION_MARGIN >= hi)
            || index < lo
            || index >= hi
        {
            self.sessions_generation += 1;
            self.sessions_dirty = true;
        }
    }

    fn page(&self) -> usize {
        (self.state.height as usize).saturating_sub(10).max(1)
    }

    fn intent(&mut self, intent: Intent) {
        let page = self.page();
        let s = &mut self.state;
        match intent {
            Intent::Quit => s.quit = true,
            Intent::Help => {
                s.help = !s.help;
                s.help_scroll = 0;
            }
            Intent::Close => self.close_view(),
            Intent::JumpRequester | Intent::JumpTarget => {
                if let Some(v) = &s.exchange_view {
                    let key = if intent == Intent::JumpRequester {
                        v.summary.requester.clone()
                    } else {
                        v.summary.target.clone()
                    };
                    self.jump_to(key);
                }
            }
            Intent::ToggleRoundsScope if s.traffic.open => s.traffic.toggle_by_agent(),
            Intent::StopPair | Intent::UndoStop => {
                if s.traffic.open {
                    let command = if intent == Intent::StopPair {
                        s.traffic.ask_stop()
                    } else {
                        s.traffic.undo()
                    };
                    self.traffic_command(command);
                } else {
                    s.flash("open the traffic view (v) to stop a pair", false);
                }
            }
            Intent::FocusNext | Intent::FocusPrev => {
                let cycle = Focus::CYCLE;
                let i = cycle.iter().position(|f| *f == s.focus).unwrap_or(0);
                let n = cycle.len();
                let next = if intent == Intent::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                s.focus = cycle[next];
            }
            Intent::Filter | Intent::Open if s.focus == Focus::Transcript => {
                self.transcript_intent(intent)
            }
            Intent::Filter => s.focus = Focus::Filter,
            Intent::Compose => s.focus = Focus::Composer,
            // Enter: what it opens depends on the pane (each pane's own branch).
            Intent::Open if s.exchange_view.is_some() => {}
            Intent::Open if s.focus == Focus::Rounds => self.open_exchange(),
            Intent::Open => s.focus = Focus::Composer,
            Intent::SearchNext
            | Intent::SearchPrev
            | Intent::ScrollLeft
            | Intent::ScrollRight
            | Intent::SelectPrev
            | Intent::SelectNext
            | Intent::Copy => self.transcript_intent(intent),
            Intent::ToggleTools => {
                s.tools = !s.tools;
                let on = if s.tools { "shown" } else { "hidden" };
                s.flash(format!("tool calls {on}"), false);
                self.rescan_search();
            }
            Intent::ToggleTimestamps => s.timestamps = !s.timestamps,
            Intent::ToggleWrap => s.wrap = !s.wrap,
            Intent::ToggleFollow => {
                if s.follow {
                    // Paused where it is now.
                    let top = super::view::transcript::top(s);
                    s.transcript_view.anchor = Some(top);
                    s.follow = false;
                } else {
                    self.transcript_move(Intent::Bottom, page);
                }
            }
            Intent::ToggleRoundsScope => s.rounds_all = !s.rounds_all,
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
                let i = ORDER.iter().position(|k| *k == s.kind_filter).unwrap_or(0);
                s.kind_filter = ORDER[(i + 1) % ORDER.len()];
                s.selected = 0;
                self.new_sessions_query();
            }
            Intent::CycleActive => {
                const ORDER: [Option<i64>; 4] = [None, Some(5), Some(60), Some(24 * 60)];
                let i = ORDER
                    .iter()
                    .position(|m| *m == s.active_within)
                    .unwrap_or(0);
                s.active_within = ORDER[(i + 1) % ORDER.len()];
                s.selected = 0;
                self.new_sessions_query();
            }
            Intent::ToggleArchived => {
                s.show_archived = !s.show_archived;
                self.new_sessions_query();
            }
            Intent::ToggleTraffic => s.traffic.toggle(),
            Intent::ToggleMouse => {
                s.mouse = !s.mouse;
                let on = if s.mouse {
                    "on (click to focus; shift-drag selects text)"
                } else {
                    "off (native selection)"
                };
                s.flash(format!("mouse capture {on}"), false);
            }
            Intent::CycleSort => {
                let before = s.order.mode.engine_order();
                s.order.mode = s.order.mode.next();
                if s.order.mode.engine_order() != before {
                    // Another order of every session: its top, not the old position.
                    s.selected = 0;
                }
                // A sort asked for applies now, held or not.
                s.order.moved_never();
                self.sessions_generation += 1;
                self.sessions_dirty = true;
            }
            Intent::Notices => s.notices_open = !s.notices_open,
            // The loop repaints the terminal itself; nothing in the state changes.
            Intent::Repaint => {}
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom
                if s.traffic.open =>
            {
                let delta = match intent {
                    Intent::Down => 1,
                    Intent::Up => -1,
                    Intent::PageDown => page as isize,
                    Intent::PageUp => -(page as isize),
                    Intent::Top => isize::MIN / 2,
                    _ => isize::MAX / 2,
                };
                s.traffic.move_cursor(delta);
            }
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom
                if s.help =>
            {
                let max = super::view::help_max_scroll(s);
                let at = s.help_scroll.min(max);
                s.help_scroll = match intent {
                    Intent::Down => at + 1,
                    Intent::Up => at.saturating_sub(1),
                    Intent::PageDown => at + page,
                    Intent::PageUp => at.saturating_sub(page),
                    Intent::Top => 0,
                    _ => max,
                }
                .min(max);
            }
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom
                if s.exchange_view.is_some() =>
            {
                let max = super::view::exchange_max_scroll(s);
                if let Some(v) = &mut s.exchange_view {
                    v.scroll_by(intent, page, max);
                }
            }
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom => {
                if matches!(s.focus, Focus::Sessions) {
                    s.order.moved(s.ticks);
                }
                self.move_in_focus(intent, page);
            }
        }
    }

    fn move_in_focus(&mut self, intent: Intent, page: usize) {
        let focus = self.state.focus;
        match focus {
            Focus::Sessions | Focus::Filter | Focus::Composer => {
                let cur = self.state.selected;
                let last = self.state.session_count().saturating_sub(1);
                let to = match intent {
                    Intent::Down => cur + 1,
                    Intent::Up => cur.saturating_sub(1),
                    Intent::PageDown => cur + page,
                    Intent::PageUp => cur.saturating_sub(page),
                    Intent::Top => 0,
                    _ => last,
                };
                self.select(to);
            }
            Focus::Transcript | Focus::Search => self.transcript_move(intent, page),
            Focus::Rounds => self.state.exchanges.move_cursor(intent, page),
        }
    }

    /// A key while typing (filter box or composer).
    fn key(&mut self, k: KeyEvent) {
        if self.state.traffic.open {
            return self.traffic_key(k);
        }
        if self.state.card.is_some() {
            return self.card_key(k);
        }
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match self.state.focus {
            Focus::Search => self.search_key(k),
            Focus::Filter => match k.code {
                KeyCode::Esc => {
                    self.state.filter.clear();
                    self.state.focus = Focus::Sessions;
                    self.new_sessions_query();
                }
                KeyCode::Enter => self.state.focus = Focus::Sessions,
                KeyCode::Backspace => {
                    self.state.filter.pop();
                    self.state.selected = 0;
                    self.new_sessions_query();
                }
                KeyCode::Char(c) if !ctrl => {
                    self.state.filter.push(c);
                    self.state.selected = 0;
                    self.new_sessions_query();
                }
                _ => {}
            },
            Focus::Composer => self.composer_key(k),
            _ => {}
        }
    }

    /// A key in the traffic view: what it asks for becomes the owner's messages.
    /// The key that answers the traffic view's confirmation (`y` stops; anything else cancels).
    fn traffic_key(&mut self, k: KeyEvent) {
        let t = &mut self.state.traffic;
        let command = match k.code {
            KeyCode::Char(c) => t.answer(c),
            _ => t.escape(),
        };
        self.traffic_command(command);
    }

    fn traffic_command(&mut self, command: Option<super::traffic::Command>) {
        match command {
            Some(super::traffic::Command::Send(sends)) => {
                for (key, text) in sends {
                    self.send_message(key, text);
                }
            }
            Some(super::traffic::Command::Close) => self.state.traffic.toggle(),
            None => {}
        }
    }

    /// Esc: the innermost open view closes (the traffic view's confirmation first).
    fn close_view(&mut self) {
        let s = &mut self.state;
        if s.traffic.open {
            let command = s.traffic.escape();
            self.traffic_command(command);
        } else if s.exchange_view.is_some() {
            s.exchange_view = None;
        } else if s.notices_open {
            s.notices_open = false;
        } else if s.help {
            s.help = false;
        }
    }

    fn paste(&mut self, text: &str) {
        if self.state.traffic.open {
            // The view has no input box; a paste is not a key to act on.
            return;
        }
        match self.state.focus {
            Focus::Search => self.search_paste(text),
            Focus::Filter => {
                self.state
                    .filter
                    .push_str(text.lines().next().unwrap_or(""));
                self.new_sessions_query();
            }
            _ => {
                // A pasted block is one message, newlines kept (up to the draft's cap).
                self.state.focus = Focus::Composer;
                self.state.composer.insert(text);
            }
        }
    }

    fn click(&mut self, x: u16, y: u16) {
        let regions = super::view::regions_for(&self.state);
        let inside = |r: ratatui::layout::Rect| {
            x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
        };
        if inside(regions.sessions) {
            self.state.focus = Focus::Sessions;
            // Rows start below the border, the filter line when it shows, and the headers.
            let inner_h = regions.sessions.height.saturating_sub(2) as usize;
            let above = super::view::sessions_rows_above(&self.state, inner_h) as u16;
            let first_row_y = regions.sessions.y + 1 + above;
            if y >= first_row_y {
                let row = (y - first_row_y) as usize
                    + super::view::sessions_top(&self.state, regions.sessions);
                if row < self.state.session_count() {
                    // A click moves through the list as a key does: the rows hold still.
                    self.state.order.moved(self.state.ticks);
                    self.select(row);
                }
            }
        } else if inside(regions.transcript) {
            self.state.focus = Focus::Transcript;
        } else if inside(regions.rounds) {
            self.state.focus = Focus::Rounds;
        } else if inside(regions.composer) {
            self.state.focus = Focus::Composer;
        }
    }

    /// Send `text` into `key` as the owner (the console is the owner's): the runner keeps
    /// the owner's messages in one queue, so they are recorded in the order typed.
    fn send_message(&mut self, key: String, text: String) {
        self.queued.push(Effect::Send { key, text });
    }

    /// Call a session tool as the selected session's agent.
    fn tool_call(&mut self, requester: String, tool: &'static str, params: serde_json::Value) {
        self.queued.push(Effect::CallTool {
            requester,
            tool,
            params,
        });
    }

    fn engine_event(&mut self, e: EngineEvent) {
        self.state.exchanges.event(&e);
        if let Some(v) = &mut self.state.exchange_view {
            v.event(&e);
        }
        let selected = self.state.selected_key().map(str::to_string);
        let now = self.state.now_ms;
        let s = &mut self.state;
        match e {
            EngineEvent::SessionUpdated { .. } => self.sessions_dirty = true,
            EngineEvent::SessionCreated { .. } | EngineEvent::SessionArchived { .. } => {
                self.sessions_dirty = true;
                self.recount = true;
            }
            EngineEvent::SessionDeleted { key } => {
                self.sessions_dirty = true;
                self.recount = true;
                if selected.as_deref() == Some(key.as_str()) {
                    s.flash(format!("{key} was deleted"), false);
                    self.transcript_dirty = true;
                }
            }
            EngineEvent::MessageAppended { key, seq, line, .. } => {
                self.sessions_dirty = true;
                let shown = selected.as_deref() == Some(key.as_str());
                if let Some(run_id) = reply_line_run(&line) {
                    s.streams.reply_appended(run_id, seq, shown);
                }
                if s.order.holding(s.ticks) {
                    // The row will not move while the owner moves: mark it instead.
                    s.order.marked.insert(key.clone());
                }
                if shown {
                    self.transcript_dirty = true;
                } else {
                    *s.unread.entry(key).or_default() += 1;
                }
            }
            // Another process wrote to the state folder: what is not known, so reload.
            EngineEvent::ExternalChange => {
                s.streams.events_missed();
                self.sessions_dirty = true;
                self.recount = true;
                self.transcript_dirty = true;
            }
            EngineEvent::RunStarted { key, .. } => {
                self.running_since_request.insert(key.clone());
                s.running.insert(key);
            }
            EngineEvent::RunEnded {
                key,
                run_id,
                status,
                reply,
                ..
            } => {
                let shown = selected.as_deref() == Some(key.as_str());
                let reply = reply.filter(|r| status == RunStatus::Ok && !r.is_empty());
                s.streams
                    .run_ended(&run_id, shown, reply.as_deref(), s.transcript_total);
                self.running_since_request.insert(key.clone());
                s.running.remove(&key);
            }
            EngineEvent::ReplyDelta {
                run_id,
                key,
                agent_id,
                step,
                offset,
                delta,
            } => {
                s.streams.delta(
                    Delta {
                        run_id: &run_id,
                        key: &key,
                        agent_id: &agent_id,
                        step,
                        offset,
                        text: &delta,
                    },
                    now,
                );
                // A delta proves a run: the sessions list marks it even if RunStarted was
                // missed.
                s.running.insert(key);
            }
            EngineEvent::ExchangeStarted {
                exchange_id,
                requester,
                target,
                message,
                ..
            } => {
                let f = s.exchange_rounds.entry(exchange_id.clone()).or_default();
                f.exchange_id = exchange_id;
                f.requester = requester;
                f.target = target;
                f.message = message;
                f.started = now;
                trim_exchanges(s);
            }
            EngineEvent::ExchangeRound {
                exchange_id,
                round,
                speaker,
                text,
                status,
                ..
            } => {
                let f = s.exchange_rounds.entry(exchange_id).or_default();
                f.rounds.push(RoundView {
                    round,
                    speaker,
                    text: crate::text_safety::safe_text(&text).into_owned(),
                    status,
                });
            }
            EngineEvent::ExchangeLoopEnded {
                exchange_id,
                reason,
                detail,
                ..
            } => {
                s.exchange_rounds.entry(exchange_id).or_default().loop_end = Some((reason, detail));
            }
            EngineEvent::Announce {
                exchange_id,
                outcome,
                detail,
                ..
            } => {
                s.exchange_rounds.entry(exchange_id).or_default().announce =
                    Some((outcome, detail));
            }
            EngineEvent::ExchangeEnded {
                exchange_id,
                reason,
                ..
            } => {
                let f = s.exchange_rounds.entry(exchange_id).or_default();
                f.done = true;
                if f.loop_end.is_none() {
                    f.loop_end = Some((reason, String::new()));
                }
            }
            EngineEvent::Spawned {
                requester,
                child,
                label,
                task,
                ..
            } => {
                s.spawns.insert(
                    child.clone(),
                    SpawnView {
                        requester,
                        child,
                        label: label.unwrap_or(task),
                        status: "running".into(),
                        started: now,
                        ..SpawnView::default()
                    },
                );
            }
            EngineEvent::SpawnEnded {
                child,
                outcome,
                runtime_ms,
                tokens_in,
                tokens_out,
                ..
            } => {
                if let Some(v) = s.spawns.get_mut(&child) {
                    v.status = outcome.to_string();
                    v.runtime_ms = Some(runtime_ms);
                    v.tokens = Some((tokens_in, tokens_out));
                }
            }
            EngineEvent::SpawnAnnounce { child, outcome, .. } => {
                if let Some(v) = s.spawns.get_mut(&child) {
                    v.announce = Some(outcome.to_string());
                }
            }
            EngineEvent::PolicyChanged { key, policy, by } => {
                s.flash(
                    format!("send policy of {key} set to {policy} (by {by})"),
                    false,
                );
                self.sessions_dirty = true;
                self.transcript_dirty = true;
            }
            EngineEvent::PolicyDecision {
                key,
                action,
                allowed: false,
                source,
                ..
            } => {
                // Named as the owner knows it: an agent's `sessions_send`, an announce, a reply.
                let action = match action {
                    SendKind::Send => "sessions_send",
                    SendKind::Announce => "announce",
                    SendKind::Reply => "reply",
                };
                // The remedy first: a long rule description may be cut at the screen's edge.
                s.notice(
                    format!("{key}: {action} refused by its send policy; `/send on` there allows it ({source})"),
                    true,
                );
            }
            EngineEvent::ChainStopped {
                chain_id,
                hops,
                max_hops,
                requester,
                target,
            } => {
                s.notice(
                    format!("agent chain stopped before {target}: {hops} sends > maxChainHops {max_hops}"),
                    true,
                );
                // The refused send shows in the timeline too, with why it never ran.
                let id = format!("chain-{chain_id}-{hops}");
                s.exchange_rounds.insert(
                    id.clone(),
                    ExchangeRounds {
                        exchange_id: id,
                        requester,
                        target,
                        message: String::new(),
                        rounds: Vec::new(),
                        loop_end: Some((
                            ExchangeEnd::Chain,
                            format!("{hops} sends > session.agentToAgent.maxChainHops {max_hops}"),
                        )),
                        announce: None,
                        done: true,
                        started: now,
                    },
                );
                trim_exchanges(s);
            }
            _ => {}
        }
    }

    /// Ticks only move the clock and expire the status line: changes arrive as events.
    fn tick(&mut self) {
        let s = &mut self.state;
        s.ticks += 1;
        s.now_ms = super::now_ms();
        s.traffic.tick(s.now_ms);
        if s.flash.as_ref().is_some_and(|f| f.until_tick <= s.ticks) {
            s.flash = None;
        }
        if s.notice.as_ref().is_some_and(|f| f.until_tick <= s.ticks) {
            s.notice = None;
        }
        if s.order.held && !s.order.holding(s.ticks) {
            // The owner paused: the held rows take their order now.
            self.sessions_dirty = true;
        }
    }
}

/// The run whose reply the transcript line (`{type, id, message}`) is: an assistant message
/// with `__switchboard.runId` that is not a tool call (those come mid-run, before the reply).
fn reply_line_run(line: &serde_json::Value) -> Option<&str> {
    let m = line.get("message")?;
    if m.get("role").and_then(|r| r.as_str()) != Some("assistant")
        || m.get("stopReason").and_then(|r| r.as_str()) == Some("toolUse")
    {
        return None;
    }
    m.get("__switchboard")?.get("runId")?.as_str()
}

/// Keep the timeline bounded: the newest 200 exchanges.
fn trim_exchanges(s: &mut State) {
    while s.exchange_rounds.len() > 200 {
        let oldest = s
            .exchange_rounds
            .iter()
            .min_by_key(|(_, f)| f.started)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                s.exchange_rounds.remove(&k);
            }
            None => break,
        }
    }
}

/// Exchanges touching `key` (or all), newest last (kept here for callers of the old path).
pub use super::state::exchanges_for;
