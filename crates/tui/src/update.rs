//! `update`: the one place console state changes. Intents, keys, pastes, engine events,
//! ticks and the results of loads come in as `Action`s; `update` changes `State` and returns
//! `Effect`s (loads, sends, tool calls) for the runner, so nothing here waits or reads storage.
//! `refresh` works out which loads the state needs; a load's result is applied only while it
//! is still the latest asked for the same filters, window and selection.

mod command_line;
mod commands;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::HashSet;

use super::action::{Action, Intent};
use super::effects::Effect;
use super::state::{Focus, Pane, State, TRANSCRIPT_MAX, TRANSCRIPT_WINDOW};

mod drill;
mod rounds;
mod sessions;
mod transcript;
use switchboard_types::api::{EngineEvent, OutboxStatus, SendKind, TranscriptQuery};

/// The notice of a failed delivery: which, why, and the command that sends it again.
fn delivery_failed(outbox_id: i64, channel: &str, error: Option<&str>) -> String {
    format!(
        "delivery {outbox_id} to {channel} failed: {}; `switchboard deliveries retry {outbox_id}` sends it again",
        error.unwrap_or("no reason recorded")
    )
}

/// Sessions loaded around the selection, so scrolling rarely waits for a load.
const SESSION_WINDOW: usize = 400;
/// How close to the window's edge the selection may come before the window moves.
const SESSION_MARGIN: usize = 50;

/// The console: its state plus what it has asked for and not yet received.
pub struct Console {
    pub state: State,
    /// The sessions pane's loads.
    sessions_load: SessionsLoad,
    /// The transcript pane's loads.
    transcript_load: TranscriptLoad,
    /// Effects decided by `update` that are not loads (sends, tool calls), handed out by the
    /// next call that returns effects.
    queued: Vec<Effect>,
    /// A session to select as soon as a page lists it (one `/new` started).
    select_when_loaded: Option<String>,
    /// The session to open on (`Options::open_on`), until the owner's first key.
    opening: Option<String>,
    /// The agents were asked for (they are loaded once).
    agents_asked: bool,
}

/// What the sessions pane asked for and whether it must ask again.
struct SessionsLoad {
    /// Bumped whenever the sessions query changes (filters, window position): a page for an
    /// older generation answers a question nobody asks any more.
    generation: u64,
    /// What is shown may be out of date: load the page again.
    dirty: bool,
    /// The number of matching sessions must be counted again on the next load.
    recount: bool,
    /// The generation of the sessions load under way (one at a time per generation).
    in_flight: Option<u64>,
    /// The rows loaded (or being loaded) carry the last message for the preview column.
    previews: bool,
    /// Sessions whose running state an event changed since the load under way was asked
    /// for: that page was read before the event, so for these keys the event is the newer
    /// word (a page read just before a run started would otherwise hide the run).
    running_since_request: HashSet<String>,
}

/// What the transcript pane asked for and whether it must ask again.
struct TranscriptLoad {
    /// Bumped whenever the transcript wanted changes (another session, a longer window).
    generation: u64,
    dirty: bool,
    /// The transcript load under way: its generation and key.
    in_flight: Option<(u64, String)>,
    /// How many lines that load asked for (fewer back: the window reaches line 1).
    asked: usize,
}

impl Console {
    /// A console over `state`; the first `refresh` asks for everything it shows.
    pub fn new(state: State) -> Console {
        Console {
            state,
            sessions_load: SessionsLoad {
                generation: 1,
                dirty: true,
                recount: true,
                in_flight: None,
                previews: false,
                running_since_request: HashSet::new(),
            },
            transcript_load: TranscriptLoad {
                generation: 1,
                dirty: true,
                in_flight: None,
                asked: 0,
            },
            queued: Vec::new(),
            select_when_loaded: None,
            opening: None,
            agents_asked: false,
        }
    }

    /// Apply one action: state changes only. Returns the sends and tool calls it decided;
    /// loads come from `refresh`, once per batch of actions.
    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        if matches!(
            action,
            Action::Intent(_) | Action::Key(_) | Action::Paste(_) | Action::Click(..)
        ) {
            // The owner has started: where the console opens no longer moves the selection
            // (a draft begun on one session must not follow it to another).
            self.opening = None;
        }
        match action {
            Action::Intent(i) => self.intent(i),
            Action::Key(k) => self.key(k),
            Action::Paste(text) => self.paste(&text),
            Action::Resize(w, h) => {
                self.state.width = w;
                self.state.height = h;
            }
            Action::Click(x, y) => self.click(x, y),
            Action::Engine(e) => {
                self.state.traffic.event(&e, self.state.now_ms);
                self.state.deliveries.event(&e);
                self.engine_event(*e)
            }
            Action::Lagged => {
                self.state.traffic.lagged();
                self.state.deliveries.missed();
                self.state.transcript.streams.events_missed();
                self.reload_all()
            }
            Action::Tick => self.tick(),
            // The header reads the link's state when it draws; the action only wakes the loop.
            Action::LinkChanged => {
                // A source's link that changed kind gets a notice of its own.
                for (text, error) in self.state.sources.news() {
                    self.state.notice(text, error);
                }
            }
            Action::Flash(text, error) => self.state.flash(text, error),
            Action::Unsent { key, text, error } => self.unsent(key, text, error),
            Action::SessionsLoaded { generation, result } => {
                self.sessions_loaded(generation, *result)
            }
            Action::TranscriptLoaded {
                generation,
                key,
                result,
            } => self.transcript_loaded(generation, key, *result),
            Action::AgentsLoaded(result) => self.agents_loaded(*result),
            Action::DeliveriesLoaded { key, result } => self.state.deliveries.loaded(&key, *result),
            Action::DeliveryCountsLoaded(result) => self.state.deliveries.counted(*result),
            Action::StatusLoaded { key, result } => self.status_loaded(key, *result),
            Action::Aborted { key, result } => self.aborted(key, *result),
            Action::Halted(results) => self.halted(results),
            Action::NewSession(result) => self.new_session_done(*result),
            Action::ExchangesLoaded {
                list,
                generation,
                before,
                result,
            } => {
                let s = &mut self.state;
                let target = match list {
                    crate::exchanges::ListId::Rounds => Some(&mut s.rounds.exchanges),
                    crate::exchanges::ListId::Drill => s.drill.as_mut().map(|d| &mut d.list),
                };
                if let Some(x) = target {
                    x.loaded(generation, before, *result);
                }
            }
            Action::ExchangeLoaded {
                generation,
                id,
                result,
            } => {
                if let Some(v) = &mut self.state.rounds.exchange_view {
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
        self.sessions_load.in_flight.is_some()
            || self.transcript_load.in_flight.is_some()
            || self.sessions_load.dirty
            || self.transcript_load.dirty
            || self.state.sessions.selected_key() != self.state.transcript.key.as_deref()
            || self.state.rounds.exchanges.pending()
            || self.state.drill.as_ref().is_some_and(|d| d.list.pending())
            || self
                .state
                .rounds
                .exchange_view
                .as_ref()
                .is_some_and(|v| v.pending())
    }

    /// Everything shown may be stale (events were missed, another process wrote).
    fn reload_all(&mut self) {
        self.sessions_load.dirty = true;
        self.sessions_load.recount = true;
        self.transcript_load.dirty = true;
        self.state.rounds.exchanges.reload();
        if let Some(d) = &mut self.state.drill {
            d.list.reload();
        }
    }

    /// The loads the state needs now (plus anything `update` queued). Called once per batch
    /// of actions, before drawing.
    pub fn refresh(&mut self) -> Vec<Effect> {
        let mut effects = std::mem::take(&mut self.queued);
        // The sessions pane grew wide enough for the last-message column (a resize, a zoom,
        // whatever moved the focus): rows with it are loaded.
        if super::view::shows_previews_for(&self.state) && !self.sessions_load.previews {
            self.sessions_load.dirty = true;
        }
        // A load for this generation already under way is waited for (its result is fresh
        // enough to show; the next one follows it); one for an older generation is not.
        if self.sessions_load.dirty
            && self.sessions_load.in_flight != Some(self.sessions_load.generation)
        {
            self.sessions_load.dirty = false;
            effects.push(self.sessions_request());
        }
        // Whatever moved the selection (a filter edit, a reload, a deletion), the transcript
        // follows it: checked here, once, rather than at every place that can move it.
        let selected = self.state.sessions.selected_key().map(str::to_string);
        if selected != self.state.transcript.key {
            if self.state.transcript.key.is_some() {
                // Nothing of another session stays on screen under this one's title.
                let s = &mut self.state;
                s.transcript.lines.clear();
                s.transcript.key = None;
                s.transcript.total = 0;
                s.transcript.view.reset();
                s.transcript.window = TRANSCRIPT_WINDOW;
                s.transcript.follow = true;
                self.rescan_search();
            }
            let asked = self.transcript_load.in_flight.as_ref().map(|(_, k)| k);
            if selected.is_some() && asked != selected.as_ref() {
                self.transcript_load.generation += 1;
                self.transcript_load.dirty = true;
            }
        }
        self.state.sessions.selected_policy = self.selected_row().map(|r| r.policy_line());
        if self.state.deliveries.select(selected.as_deref())
            && let Some(key) = &selected
        {
            effects.push(Effect::LoadDeliveries { key: key.clone() });
        }
        if self.state.deliveries.take_count() {
            effects.push(Effect::LoadDeliveryCounts);
        }
        effects.extend(self.exchanges_refresh());
        effects.extend(self.drill_refresh());
        if let Some((generation, since)) = self.state.traffic.wanted_load(self.state.now_ms) {
            effects.push(Effect::LoadTraffic { generation, since });
        }
        self.state.traffic.prepare(self.state.height as usize);
        match selected {
            None => {
                self.transcript_load.dirty = false;
            }
            Some(key) => {
                let in_flight_now = self
                    .transcript_load
                    .in_flight
                    .as_ref()
                    .is_some_and(|(g, _)| *g == self.transcript_load.generation);
                if self.transcript_load.dirty && !in_flight_now {
                    self.transcript_load.dirty = false;
                    self.transcript_load.in_flight =
                        Some((self.transcript_load.generation, key.clone()));
                    let limit = self.state.transcript.window.clamp(1, TRANSCRIPT_MAX);
                    self.transcript_load.asked = limit;
                    effects.push(Effect::LoadTranscript {
                        generation: self.transcript_load.generation,
                        query: TranscriptQuery {
                            key,
                            // The newest lines, or the window `g` and scrolling moved to.
                            before: self.state.transcript.view.window_end,
                            limit,
                            // Tool lines are loaded always; the pane hides them unless asked.
                            tools: true,
                            raw: false,
                            bare: false,
                        },
                    });
                }
            }
        }
        effects
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
            Intent::SessionExchanges => self.drill_session(),
            Intent::JumpRequester | Intent::JumpTarget => {
                if let Some(v) = &s.rounds.exchange_view {
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
                let panes = Pane::ALL;
                let n = panes.len();
                let forward = intent == Intent::FocusNext;
                let next = match s
                    .focus
                    .pane()
                    .and_then(|p| panes.iter().position(|q| *q == p))
                {
                    Some(i) if forward => (i + 1) % n,
                    Some(i) => (i + n - 1) % n,
                    // From the composer: the first pane, or the last going back.
                    None if forward => 0,
                    None => n - 1,
                };
                self.focus_pane(panes[next]);
            }
            Intent::FocusSessions => self.focus_pane(Pane::Sessions),
            Intent::FocusTranscript => self.focus_pane(Pane::Transcript),
            Intent::FocusRounds => self.focus_pane(Pane::Rounds),
            Intent::Zoom => self.toggle_zoom(),
            Intent::Command => self.open_command_line(),
            Intent::Filter | Intent::Open if s.focus == Focus::Transcript => {
                self.transcript_intent(intent)
            }
            Intent::Filter => s.focus = Focus::Filter,
            Intent::Compose => s.focus = Focus::Composer,
            // Enter: what it opens depends on the view or pane (each one's own branch).
            Intent::Open if s.rounds.exchange_view.is_some() => {}
            Intent::Open if s.drill.is_some() => self.drill_open_exchange(),
            Intent::Open if s.traffic.open => self.drill_pair(),
            Intent::Open if s.focus == Focus::Rounds => self.open_exchange(),
            Intent::Open => s.focus = Focus::Composer,
            Intent::SearchNext
            | Intent::SearchPrev
            | Intent::ScrollLeft
            | Intent::ScrollRight
            | Intent::SelectPrev
            | Intent::SelectNext
            | Intent::Copy => self.transcript_intent(intent),
            Intent::ToggleTools
            | Intent::ToggleTimestamps
            | Intent::ToggleWrap
            | Intent::ToggleFollow => self.transcript_toggle(intent, page),
            Intent::ToggleRoundsScope => s.rounds.all = !s.rounds.all,
            Intent::CycleKind
            | Intent::CycleSource
            | Intent::CycleActive
            | Intent::ToggleArchived
            | Intent::CycleSort => self.sessions_intent(intent),
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
            Intent::Notices => s.notices_open = !s.notices_open,
            // The loop repaints the terminal itself; nothing in the state changes.
            Intent::Repaint => {}
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom => self.scroll(intent, page),
        }
    }

    /// Focus `pane` (a number key, Tab, a click, the command line). A zoomed screen shows
    /// the pane focused, so the zoom follows.
    fn focus_pane(&mut self, pane: Pane) {
        let s = &mut self.state;
        s.focus = pane.focus();
        if s.zoom.is_some() {
            s.zoom = Some(pane);
        }
    }

    /// `z`: the focused pane over the whole body of the screen, or the layout back.
    fn toggle_zoom(&mut self) {
        let Some(pane) = self.state.focus.pane() else {
            return;
        };
        let zoom = match self.state.zoom {
            Some(_) => None,
            None => Some(pane),
        };
        self.state.zoom = zoom;
        match zoom {
            Some(p) => self.state.flash(
                format!("{} zoomed: the same key restores the layout", p.name()),
                false,
            ),
            None => self.state.flash("layout restored", false),
        }
    }

    /// A move: in the overlay that is open (traffic, help, exchange), else in the focused pane.
    fn scroll(&mut self, intent: Intent, page: usize) {
        let s = &mut self.state;
        if let Some(d) = &mut s.drill
            && s.rounds.exchange_view.is_none()
            && !s.help
        {
            d.list.move_cursor(intent, page);
        } else if s.traffic.open && s.drill.is_none() {
            let delta = match intent {
                Intent::Down => 1,
                Intent::Up => -1,
                Intent::PageDown => page as isize,
                Intent::PageUp => -(page as isize),
                Intent::Top => isize::MIN / 2,
                _ => isize::MAX / 2,
            };
            s.traffic.move_cursor(delta);
        } else if s.help {
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
        } else if s.rounds.exchange_view.is_some() {
            let max = super::view::exchange_max_scroll(s);
            if let Some(v) = &mut s.rounds.exchange_view {
                v.scroll_by(intent, page, max);
            }
        } else {
            if matches!(s.focus, Focus::Sessions) {
                s.sessions.order.moved(s.ticks);
            }
            self.move_in_focus(intent, page);
        }
    }

    fn move_in_focus(&mut self, intent: Intent, page: usize) {
        let focus = self.state.focus;
        match focus {
            Focus::Sessions | Focus::Filter | Focus::Composer => {
                let cur = self.state.sessions.selected;
                let last = self.state.sessions.session_count().saturating_sub(1);
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
            Focus::Rounds => self.state.rounds.exchanges.move_cursor(intent, page),
        }
    }

    /// A key while typing (command line, filter box, search box or composer).
    fn key(&mut self, k: KeyEvent) {
        if self.state.command.is_some() {
            return self.command_line_key(k);
        }
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
                    self.state.sessions.filter.clear();
                    self.state.focus = Focus::Sessions;
                    self.new_sessions_query();
                }
                KeyCode::Enter => self.state.focus = Focus::Sessions,
                KeyCode::Backspace => {
                    self.state.sessions.filter.pop();
                    self.state.sessions.selected = 0;
                    self.new_sessions_query();
                }
                KeyCode::Char(c) if !ctrl => {
                    self.state.sessions.filter.push(c);
                    self.state.sessions.selected = 0;
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
        let (t, rows) = (&mut self.state.traffic, &self.state.sessions.rows);
        // Each session's own override now, as its row says, so undo can put it back.
        let previous = |key: &str| {
            rows.iter().find(|r| r.key == key).map(|r| {
                if r.policy_override {
                    r.policy
                } else {
                    switchboard_types::api::PolicySetting::Inherit
                }
            })
        };
        let command = match k.code {
            KeyCode::Char(c) => t.answer(c, &previous),
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
            Some(super::traffic::Command::Stop { sends, halt }) => {
                for (key, text) in sends {
                    self.send_message(key, text);
                }
                self.queued.push(Effect::Halt { keys: halt });
            }
            // No halt: the engine checks each reply round (the stop ends a running
            // exchange at its next round), and a gateway without the narrower stop
            // (OpenClaw's) refuses it, which must not abort anything either.
            Some(super::traffic::Command::StopAgents { keys }) => {
                self.queued.push(Effect::AgentSends {
                    keys,
                    stopped: true,
                });
            }
            Some(super::traffic::Command::ResumeAgents { keys }) => {
                self.queued.push(Effect::AgentSends {
                    keys,
                    stopped: false,
                });
            }
            Some(super::traffic::Command::Close) => self.state.traffic.toggle(),
            None => {}
        }
    }

    /// Esc: the innermost open view closes (the traffic view's confirmation first).
    fn close_view(&mut self) {
        let s = &mut self.state;
        if s.drill.is_some() {
            self.drill_back();
        } else if s.traffic.open {
            let command = s.traffic.escape();
            self.traffic_command(command);
        } else if s.rounds.exchange_view.is_some() {
            s.rounds.exchange_view = None;
        } else if s.notices_open {
            s.notices_open = false;
        } else if s.help {
            s.help = false;
        }
    }

    fn paste(&mut self, text: &str) {
        if self.state.command.is_some() {
            return self.command_line_paste(text);
        }
        if self.state.traffic.open {
            // The view has no input box; a paste is not a key to act on.
            return;
        }
        match self.state.focus {
            Focus::Search => self.search_paste(text),
            Focus::Filter => {
                self.state
                    .sessions
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
                if row < self.state.sessions.session_count() {
                    // A click moves through the list as a key does: the rows hold still.
                    self.state.sessions.order.moved(self.state.ticks);
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

    /// A message that was not sent comes back to the draft, with why beside it, unless
    /// the owner has started another one: then it stays in the draft history (↑ recalls it)
    /// and the status line says so. Nothing typed is lost either way.
    fn unsent(&mut self, key: String, text: String, error: String) {
        let shown = key;
        let c = &mut self.state.composer;
        if c.text().is_empty() {
            c.set_text(&text);
            c.error = Some(format!(
                "Not sent to {shown}: {error}. Enter sends it again."
            ));
            self.state
                .flash(format!("could not send to {shown}: {error}"), true);
        } else {
            if c.history.last() != Some(&text) {
                c.history.push(text);
            }
            self.state.flash(
                format!(
                    "could not send to {shown}: {error}; the message is in the draft history (↑)"
                ),
                true,
            );
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
        let selected = self.state.sessions.selected_key().map(str::to_string);
        let now = self.state.now_ms;
        // Each pane's own state first (the rounds pane's exchanges and spawns, the replies
        // being streamed), then what the console decides: loads, marks, the status line.
        self.state.rounds.event(&e, now);
        if let Some(d) = &mut self.state.drill {
            d.list.event(&e);
        }
        self.state.transcript.event(&e, selected.as_deref(), now);
        let s = &mut self.state;
        match e {
            EngineEvent::SessionUpdated { .. } => self.sessions_load.dirty = true,
            EngineEvent::SessionCreated { .. } | EngineEvent::SessionArchived { .. } => {
                self.sessions_load.dirty = true;
                self.sessions_load.recount = true;
            }
            EngineEvent::SessionDeleted { key } => {
                self.sessions_load.dirty = true;
                self.sessions_load.recount = true;
                if selected.as_deref() == Some(key.as_str()) {
                    s.flash(format!("{key} was deleted"), false);
                    self.transcript_load.dirty = true;
                }
            }
            EngineEvent::MessageAppended { key, .. } => {
                self.sessions_load.dirty = true;
                if s.sessions.order.holding(s.ticks) {
                    // The row will not move while the owner moves: mark it instead.
                    s.sessions.order.marked.insert(key.clone());
                }
                if selected.as_deref() == Some(key.as_str()) {
                    self.transcript_load.dirty = true;
                } else {
                    *s.sessions.unread.entry(key).or_default() += 1;
                }
            }
            // Another process wrote to the state folder: what is not known, so reload.
            EngineEvent::ExternalChange => {
                self.sessions_load.dirty = true;
                self.sessions_load.recount = true;
                self.transcript_load.dirty = true;
            }
            EngineEvent::RunStarted { key, .. } => {
                self.sessions_load.running_since_request.insert(key.clone());
                s.sessions.running.insert(key);
            }
            EngineEvent::RunEnded { key, .. } => {
                self.sessions_load.running_since_request.insert(key.clone());
                s.sessions.running.remove(&key);
            }
            // A delta proves a run: the sessions list marks it even if RunStarted was missed.
            EngineEvent::ReplyDelta { key, .. } => {
                s.sessions.running.insert(key);
            }
            EngineEvent::PolicyChanged { key, policy, by } => {
                // A background notice, in its own line: when the owner's own `/send` made the
                // change, its answer ("Send policy set to off") stays in the status line
                // whichever of the two arrives first (the event's flash replaced it when it
                // came second).
                s.notice(
                    format!("send policy of {key} set to {policy} (by {by})"),
                    false,
                );
                self.sessions_load.dirty = true;
                self.transcript_load.dirty = true;
            }
            // The narrower stop: the rows' policy slot says it; the flash comes from the
            // effect that set it (or, set elsewhere, from this).
            EngineEvent::AgentSendsChanged { .. } => self.sessions_load.dirty = true,
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
            // A delivery given up on (its other states are for `switchboard deliveries`).
            EngineEvent::DeliveryUpdated {
                outbox_id,
                channel,
                status: OutboxStatus::Failed,
                error,
                ..
            } => s.notice(delivery_failed(outbox_id, &channel, error.as_deref()), true),
            EngineEvent::ChainStopped {
                hops,
                max_hops,
                target,
                ..
            } => {
                s.notice(
                    format!(
                        "agent chain stopped before {target}: {} > maxChainHops {max_hops}",
                        switchboard_types::words::count(hops, "send")
                    ),
                    true,
                );
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
        if s.sessions.order.held && !s.sessions.order.holding(s.ticks) {
            // The owner paused: the held rows take their order now.
            self.sessions_load.dirty = true;
        }
    }
}
