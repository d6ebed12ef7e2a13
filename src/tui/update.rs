//! `update`: the one place console state changes. Intents, keys, pastes, engine events and
//! ticks come in as `Action`s; slow work (sending, spawning) runs as tasks that report back.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

use super::action::{Action, Intent};
use super::load;
use super::state::{FlowView, Focus, RoundView, SpawnView, State};
use crate::engine::Engine;
use crate::engine::events::EngineEvent;
use crate::engine::inbound::Inbound;
use crate::engine::key::{SessionKey, SessionKind};
use crate::engine::policy::{self, SendCommand};
use crate::engine::store::now_ms;
use crate::engine::tools::ToolContext;

/// Sessions loaded around the selection, so scrolling rarely waits for a load.
const SESSION_WINDOW: usize = 400;
/// How close to the window's edge the selection may come before the window moves.
const SESSION_MARGIN: usize = 50;

/// Slash commands, for completion and the "unknown command" message.
const COMMANDS: &[&str] = &["/send ", "/spawn ", "/ask ", "/help"];

/// The console: its state plus what it needs to act.
pub struct Console {
    pub state: State,
    engine: Engine,
    tx: UnboundedSender<Action>,
    sessions_dirty: bool,
    transcript_dirty: bool,
    /// The number of matching sessions must be counted again on the next reload.
    recount: bool,
    /// Sessions count and newest activity last seen, to notice other processes' writes.
    seen: (u64, i64),
    /// The owner's messages, in the order typed, to the one task that sends them (started
    /// with the first). One task per message let them race to the store out of order.
    outbox: Option<UnboundedSender<(SessionKey, String)>>,
}

impl Console {
    pub fn new(engine: Engine, state: State, tx: UnboundedSender<Action>) -> Console {
        let mut c = Console {
            state,
            engine,
            tx,
            sessions_dirty: true,
            transcript_dirty: true,
            recount: true,
            seen: (0, 0),
            outbox: None,
        };
        c.refresh();
        c
    }

    /// Apply one action.
    pub fn update(&mut self, action: Action) {
        match action {
            Action::Intent(i) => self.intent(i),
            Action::Key(k) => self.key(k),
            Action::Paste(text) => self.paste(&text),
            Action::Resize(w, h) => {
                self.state.width = w;
                self.state.height = h;
            }
            Action::Click(x, y) => self.click(x, y),
            Action::Engine(e) => self.engine_event(*e),
            Action::Lagged => {
                self.sessions_dirty = true;
                self.recount = true;
                self.transcript_dirty = true;
            }
            Action::Tick => self.tick(),
            Action::Flash(text, error) => self.state.flash(text, error),
        }
    }

    /// Reload what changed; called once per batch of actions, before drawing.
    pub fn refresh(&mut self) {
        if self.sessions_dirty {
            self.sessions_dirty = false;
            self.reload_sessions();
        }
        // Whatever moved the selection (a filter edit, a reload, a deletion), the transcript
        // follows it: checked here, once, rather than at every place that can move it.
        if self.state.selected_key() != self.state.transcript_key.as_deref() {
            self.transcript_dirty = true;
        }
        if self.transcript_dirty {
            self.transcript_dirty = false;
            self.reload_transcript();
        }
    }

    fn reload_sessions(&mut self) {
        let s = &mut self.state;
        let keep = s.selected_key().map(str::to_string);
        let had_rows = !s.sessions.is_empty();
        // The window is centred on the selection, so moving within it needs no reload.
        let start = s.selected.saturating_sub(SESSION_WINDOW / 2);
        let filter = load::Filter {
            kind: s.kind_filter,
            text: &s.filter,
            archived: s.show_archived,
            active_since: s.active_within.map(|m| s.now_ms - m * 60_000),
        };
        // Counting walks every matching index entry: only when the set may have changed
        // size (sessions created or removed, filters changed), not on every new message.
        let count = std::mem::take(&mut self.recount);
        match load::sessions_window(&self.engine, &filter, start, SESSION_WINDOW, count) {
            Ok((rows, matching)) => {
                s.sessions = rows;
                if let Some(m) = matching {
                    s.matching_sessions = m;
                }
                let matching = s.matching_sessions;
                s.sessions_offset = start.min(matching as usize);
                if !had_rows && !s.sessions.is_empty() {
                    // The first session to appear becomes the selection: show it.
                    s.selected = s.sessions_offset;
                    self.transcript_dirty = true;
                }
                if let Some(k) = keep {
                    if let Some(i) = s.sessions.iter().position(|r| r.key == k) {
                        s.selected = s.sessions_offset + i;
                    } else {
                        // The selected session is gone (deleted, filtered out).
                        let last = s.session_count().saturating_sub(1);
                        s.selected = s.selected.min(last);
                        self.transcript_dirty = true;
                    }
                }
            }
            Err(e) => s.flash(format!("cannot read sessions: {e}"), true),
        }
        s.total_sessions = self.engine.store().count().unwrap_or(s.total_sessions);
        let newest = self.newest_activity();
        self.seen = (self.state.total_sessions, newest);
    }

    /// The newest activity of any session (to notice other processes' writes).
    fn newest_activity(&self) -> i64 {
        let everything = load::Filter {
            archived: true,
            ..load::Filter::default()
        };
        load::sessions(&self.engine, &everything, 1)
            .ok()
            .and_then(|r| r.first().map(|r| r.updated_at))
            .unwrap_or(0)
    }

    fn reload_transcript(&mut self) {
        let s = &mut self.state;
        let Some(key) = s.selected_key().map(str::to_string) else {
            s.transcript.clear();
            s.transcript_key = None;
            s.transcript_total = 0;
            s.selected_policy = None;
            return;
        };
        if s.transcript_key.as_deref() != Some(key.as_str()) {
            // Another session: start at its end, not at the last one's scroll position.
            s.transcript.clear();
            s.transcript_total = 0;
            s.transcript_scroll = 0;
            s.transcript_window = load::TRANSCRIPT_WINDOW;
            s.follow = true;
        }
        match load::transcript(&self.engine, &key, s.transcript_window) {
            Ok((lines, total)) => {
                // Scrolled to the top of what was loaded: stay at the top of the longer window.
                let at_top = !s.follow
                    && !s.transcript.is_empty()
                    && s.transcript_scroll >= s.transcript.len();
                if at_top {
                    s.transcript_scroll = lines.len();
                }
                // A paused (scrolled-up) view stays on the same lines as new ones arrive.
                if !s.follow && s.transcript_scroll > 0 && total > s.transcript_total {
                    s.transcript_scroll += (total - s.transcript_total) as usize;
                }
                s.transcript = lines;
                s.transcript_key = Some(key.clone());
                s.transcript_total = total;
            }
            Err(e) => {
                // Nothing of another session stays on screen under this one's title.
                s.transcript.clear();
                s.transcript_key = Some(key.clone());
                s.flash(format!("cannot read the transcript: {e}"), true);
            }
        }
        s.unread.remove(&key);
        s.selected_policy = self
            .engine
            .store()
            .get(&SessionKey::from_canonical(key.clone()))
            .ok()
            .flatten()
            .map(|st| {
                let d = policy::evaluate(self.engine.config(), &st.key, &st.entry);
                format!("{} ({})", d.policy.as_str(), d.source)
            });
    }

    fn select(&mut self, index: usize) {
        let s = &mut self.state;
        let last = s.session_count().saturating_sub(1);
        let index = index.min(last);
        if index != s.selected {
            s.selected = index;
            s.transcript_scroll = 0;
            s.transcript_window = load::TRANSCRIPT_WINDOW;
            s.follow = true;
            self.transcript_dirty = true;
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
            Intent::Help => s.help = !s.help,
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
            Intent::Filter => s.focus = Focus::Filter,
            Intent::Compose => s.focus = Focus::Composer,
            Intent::ToggleTools => {
                s.tools = !s.tools;
                let on = if s.tools { "shown" } else { "hidden" };
                s.flash(format!("tool calls {on}"), false);
            }
            Intent::ToggleTimestamps => s.timestamps = !s.timestamps,
            Intent::ToggleWrap => s.wrap = !s.wrap,
            Intent::ToggleFollow => {
                s.follow = !s.follow;
                if s.follow {
                    s.transcript_scroll = 0;
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
                self.sessions_dirty = true;
                self.recount = true;
                self.transcript_dirty = true;
            }
            Intent::CycleActive => {
                const ORDER: [Option<i64>; 4] = [None, Some(5), Some(60), Some(24 * 60)];
                let i = ORDER
                    .iter()
                    .position(|m| *m == s.active_within)
                    .unwrap_or(0);
                s.active_within = ORDER[(i + 1) % ORDER.len()];
                s.selected = 0;
                self.sessions_dirty = true;
                self.recount = true;
                self.transcript_dirty = true;
            }
            Intent::ToggleArchived => {
                s.show_archived = !s.show_archived;
                self.sessions_dirty = true;
                self.recount = true;
            }
            Intent::ToggleMouse => {
                s.mouse = !s.mouse;
                let on = if s.mouse {
                    "on (click to focus; shift-drag selects text)"
                } else {
                    "off (native selection)"
                };
                s.flash(format!("mouse capture {on}"), false);
            }
            Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom => {
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
            Focus::Transcript => {
                let s = &mut self.state;
                let max = s.transcript.len();
                s.transcript_scroll = match intent {
                    Intent::Up => (s.transcript_scroll + 1).min(max),
                    Intent::Down => s.transcript_scroll.saturating_sub(1),
                    Intent::PageUp => (s.transcript_scroll + page).min(max),
                    Intent::PageDown => s.transcript_scroll.saturating_sub(page),
                    Intent::Top => max,
                    _ => 0,
                };
                // Scrolling up pauses follow; reaching the end resumes it.
                s.follow = s.transcript_scroll == 0;
                // At the top of what is loaded, with older lines on disk: load more.
                let loaded = s.transcript.len();
                if s.transcript_scroll + page >= loaded
                    && (loaded as i64) < s.transcript_total
                    && s.transcript_window < load::TRANSCRIPT_MAX
                {
                    s.transcript_window = if intent == Intent::Top {
                        load::TRANSCRIPT_MAX
                    } else {
                        s.transcript_window + load::TRANSCRIPT_WINDOW
                    };
                    self.transcript_dirty = true;
                }
            }
            Focus::Rounds => {
                let s = &mut self.state;
                s.rounds_scroll = match intent {
                    Intent::Down => s.rounds_scroll + 1,
                    Intent::Up => s.rounds_scroll.saturating_sub(1),
                    Intent::PageDown => s.rounds_scroll + page,
                    Intent::PageUp => s.rounds_scroll.saturating_sub(page),
                    Intent::Top => 0,
                    _ => usize::MAX / 2,
                };
            }
        }
    }

    /// A key while typing (filter box or composer).
    fn key(&mut self, k: KeyEvent) {
        let alt = k.modifiers.contains(KeyModifiers::ALT);
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match self.state.focus {
            Focus::Filter => match k.code {
                KeyCode::Esc => {
                    self.state.filter.clear();
                    self.state.focus = Focus::Sessions;
                    self.sessions_dirty = true;
                    self.recount = true;
                }
                KeyCode::Enter => self.state.focus = Focus::Sessions,
                KeyCode::Backspace => {
                    self.state.filter.pop();
                    self.state.selected = 0;
                    self.sessions_dirty = true;
                    self.recount = true;
                }
                KeyCode::Char(c) if !ctrl => {
                    self.state.filter.push(c);
                    self.state.selected = 0;
                    self.sessions_dirty = true;
                    self.recount = true;
                }
                _ => {}
            },
            Focus::Composer => {
                let c = &mut self.state.composer;
                match k.code {
                    KeyCode::Esc => self.state.focus = Focus::Sessions,
                    KeyCode::Enter if alt => c.text.push('\n'),
                    KeyCode::Char('j') if ctrl => c.text.push('\n'),
                    KeyCode::Enter => self.submit(),
                    KeyCode::Backspace => {
                        c.text.pop();
                        c.error = None;
                    }
                    // Complete a slash command.
                    KeyCode::Tab if c.text.starts_with('/') && !c.text.contains(' ') => {
                        let matches: Vec<&&str> = COMMANDS
                            .iter()
                            .filter(|m| m.starts_with(c.text.as_str()))
                            .collect();
                        if let [only] = matches.as_slice() {
                            c.text = only.to_string();
                        }
                    }
                    KeyCode::Up if !c.history.is_empty() => {
                        let i = match c.recall {
                            None => c.history.len() - 1,
                            Some(i) => i.saturating_sub(1),
                        };
                        c.recall = Some(i);
                        c.text = c.history[i].clone();
                    }
                    KeyCode::Down => {
                        if let Some(i) = c.recall {
                            if i + 1 < c.history.len() {
                                c.recall = Some(i + 1);
                                c.text = c.history[i + 1].clone();
                            } else {
                                c.recall = None;
                                c.text.clear();
                            }
                        }
                    }
                    KeyCode::Char(ch) if !ctrl => {
                        c.text.push(ch);
                        c.error = None;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn paste(&mut self, text: &str) {
        match self.state.focus {
            Focus::Filter => {
                self.state
                    .filter
                    .push_str(text.lines().next().unwrap_or(""));
                self.sessions_dirty = true;
            }
            _ => {
                // A pasted block is one message, newlines kept.
                self.state.focus = Focus::Composer;
                self.state
                    .composer
                    .text
                    .push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
            }
        }
    }

    fn click(&mut self, x: u16, y: u16) {
        let regions = super::view::regions(self.state.width, self.state.height);
        let inside = |r: ratatui::layout::Rect| {
            x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
        };
        if inside(regions.sessions) {
            self.state.focus = Focus::Sessions;
            // Rows start below the border (and below the filter line when it shows).
            let filter_line = u16::from(!self.state.filter.is_empty());
            let first_row_y = regions.sessions.y + 1 + filter_line;
            if y >= first_row_y {
                let row = (y - first_row_y) as usize
                    + super::view::sessions_top(&self.state, regions.sessions);
                if row < self.state.session_count() {
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

    /// Enter in the composer: a slash command or a message to the selected session.
    fn submit(&mut self) {
        let text = self.state.composer.text.trim().to_string();
        if text.is_empty() {
            self.state.composer.error =
                Some("Nothing to send: type a message, or /help for commands.".into());
            return;
        }
        let Some(key) = self.state.selected_key().map(str::to_string) else {
            self.state.composer.error =
                Some("No session selected: pick one in the sessions pane first.".into());
            return;
        };
        let key = SessionKey::from_canonical(key);
        let c = &mut self.state.composer;
        if c.history.last() != Some(&text) {
            c.history.push(text.clone());
        }
        c.recall = None;
        if let Some(rest) = text.strip_prefix('/') {
            let (cmd, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let arg = arg.trim();
            match cmd {
                "help" => {
                    self.state.help = true;
                    self.state.composer.text.clear();
                }
                "send" => match policy::parse_send_command(&text) {
                    Some(SendCommand::Usage) | None => {
                        self.state.composer.error =
                            Some("Usage: /send on|off|inherit (on = allow, off = deny, inherit = follow the config)".into());
                    }
                    Some(SendCommand::Set(_)) => {
                        self.state.composer.text.clear();
                        self.send_message(key, text);
                    }
                },
                "spawn" if !arg.is_empty() => {
                    self.state.composer.text.clear();
                    self.tool_call(key, "sessions_spawn", json!({ "task": arg }));
                }
                "ask" => match arg.split_once(char::is_whitespace) {
                    Some((target, message)) if !message.trim().is_empty() => {
                        self.state.composer.text.clear();
                        self.tool_call(
                            key,
                            "sessions_send",
                            json!({ "sessionKey": target, "message": message.trim(), "timeoutSeconds": 0 }),
                        );
                    }
                    _ => {
                        self.state.composer.error = Some("Usage: /ask <session> <message>".into());
                    }
                },
                "spawn" => self.state.composer.error = Some("Usage: /spawn <task>".into()),
                other => {
                    self.state.composer.error = Some(format!(
                        "Unknown command /{other}. Commands: /send on|off|inherit, /spawn <task>, /ask <session> <message>, /help"
                    ));
                }
            }
            return;
        }
        self.state.composer.text.clear();
        self.send_message(key, text);
    }

    /// Send `text` into `key` as the owner (the console is the owner's), in the background.
    /// Messages are recorded one after another in the order they were typed; only the
    /// recording is waited for, so a long run does not hold up the next message.
    fn send_message(&mut self, key: SessionKey, text: String) {
        let outbox = self.outbox.get_or_insert_with(|| {
            let (outbox, mut queue) =
                tokio::sync::mpsc::unbounded_channel::<(SessionKey, String)>();
            let (engine, tx) = (self.engine.clone(), self.tx.clone());
            tokio::spawn(async move {
                let from = Inbound {
                    owner: true,
                    ..Inbound::default()
                };
                while let Some((key, text)) = queue.recv().await {
                    let report = match engine.receive(&key, &text, &from).await {
                        Ok(r) => match r.command_reply {
                            Some(reply) => Action::Flash(reply, false),
                            None => Action::Flash(format!("sent to {key}"), false),
                        },
                        Err(e) => Action::Flash(format!("could not send to {key}: {e}"), true),
                    };
                    let _ = tx.send(report);
                }
            });
            outbox
        });
        if let Err(unsent) = outbox.send((key, text)) {
            // The sending task is gone (the runtime is shutting down): say so, lose nothing
            // silently.
            let (key, _) = unsent.0;
            let _ = self.tx.send(Action::Flash(
                format!("could not send to {key}: the console is closing"),
                true,
            ));
        }
    }

    /// Call a session tool as the selected session's agent, in the background.
    fn tool_call(&mut self, requester: SessionKey, tool: &'static str, params: serde_json::Value) {
        let (engine, tx) = (self.engine.clone(), self.tx.clone());
        tokio::spawn(async move {
            let ctx = ToolContext::new(requester.clone(), false);
            let report = match engine.call_tool(tool, &params, &ctx).await {
                Ok(r) => {
                    let status = r["status"].as_str().unwrap_or("?");
                    match r["error"].as_str() {
                        Some(e) if e.starts_with("send blocked by session policy") => {
                            Action::Flash(
                                format!(
                                    "{tool}: refused by the target's send policy; `/send on` in that session allows it. {e}"
                                ),
                                true,
                            )
                        }
                        Some(e) => Action::Flash(format!("{tool}: {status}: {e}"), true),
                        None => {
                            let what = r["childSessionKey"]
                                .as_str()
                                .or(r["sessionKey"].as_str())
                                .unwrap_or("");
                            Action::Flash(format!("{tool}: {status} {what}"), false)
                        }
                    }
                }
                Err(e) => Action::Flash(format!("{tool}: {e}"), true),
            };
            let _ = tx.send(report);
        });
    }

    fn engine_event(&mut self, e: EngineEvent) {
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
            EngineEvent::MessageAppended { key, .. } => {
                self.sessions_dirty = true;
                if selected.as_deref() == Some(key.as_str()) {
                    self.transcript_dirty = true;
                } else {
                    *s.unread.entry(key).or_default() += 1;
                }
            }
            EngineEvent::RunStarted { key, .. } => {
                s.running.insert(key);
            }
            EngineEvent::RunEnded { key, .. } => {
                s.running.remove(&key);
            }
            EngineEvent::FlowStarted {
                flow_id,
                requester,
                target,
                message,
                ..
            } => {
                let f = s.flows.entry(flow_id.clone()).or_default();
                f.flow_id = flow_id;
                f.requester = requester;
                f.target = target;
                f.message = message;
                f.started = now;
                trim_flows(s);
            }
            EngineEvent::FlowRound {
                flow_id,
                round,
                speaker,
                text,
                status,
                ..
            } => {
                let f = s.flows.entry(flow_id).or_default();
                f.rounds.push(RoundView {
                    round,
                    speaker,
                    text: crate::text_safety::safe_text(&text).into_owned(),
                    status,
                });
            }
            EngineEvent::FlowLoopEnded {
                flow_id,
                reason,
                detail,
                ..
            } => {
                s.flows.entry(flow_id).or_default().loop_end = Some((reason, detail));
            }
            EngineEvent::Announce {
                flow_id,
                outcome,
                detail,
                ..
            } => {
                s.flows.entry(flow_id).or_default().announce = Some((outcome, detail));
            }
            EngineEvent::FlowEnded {
                flow_id, reason, ..
            } => {
                let f = s.flows.entry(flow_id).or_default();
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
                    v.status = outcome;
                    v.runtime_ms = Some(runtime_ms);
                    v.tokens = Some((tokens_in, tokens_out));
                }
            }
            EngineEvent::SpawnAnnounce { child, outcome, .. } => {
                if let Some(v) = s.spawns.get_mut(&child) {
                    v.announce = Some(outcome);
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
            } => {
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
                s.flows.insert(
                    id.clone(),
                    FlowView {
                        flow_id: id,
                        requester,
                        target,
                        message: String::new(),
                        rounds: Vec::new(),
                        loop_end: Some((
                            "chain".into(),
                            format!("{hops} sends > session.agentToAgent.maxChainHops {max_hops}"),
                        )),
                        announce: None,
                        done: true,
                        started: now,
                    },
                );
                trim_flows(s);
            }
            _ => {}
        }
    }

    fn tick(&mut self) {
        let s = &mut self.state;
        s.ticks += 1;
        s.now_ms = now_ms();
        if s.flash.as_ref().is_some_and(|f| f.until_tick <= s.ticks) {
            s.flash = None;
        }
        // Another process (e.g. `switchboard inject` in a second shell) writes without
        // events reaching us: notice it by the count or the newest activity.
        let count = self.engine.store().count().unwrap_or(self.seen.0);
        let newest = self.newest_activity();
        if (count, newest) != self.seen {
            self.sessions_dirty = true;
            self.recount = true;
            self.transcript_dirty = true;
        }
    }
}

/// Keep the timeline bounded: the newest 200 exchanges.
fn trim_flows(s: &mut State) {
    while s.flows.len() > 200 {
        let oldest = s
            .flows
            .iter()
            .min_by_key(|(_, f)| f.started)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                s.flows.remove(&k);
            }
            None => break,
        }
    }
}

/// Exchanges touching `key` (or all), newest last.
pub fn flows_for<'a>(s: &'a State, key: Option<&str>) -> Vec<&'a FlowView> {
    let mut v: Vec<&FlowView> = s
        .flows
        .values()
        .filter(|f| s.rounds_all || key.is_none_or(|k| f.requester == k || f.target == k))
        .collect();
    v.sort_by_key(|f| f.started);
    v
}
