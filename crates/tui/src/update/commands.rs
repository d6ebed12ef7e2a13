//! The composer's keys (editing goes to the editor; Enter, Tab, Esc, Ctrl+C and history are
//! decided here), the slash commands, the overlays they open, and what their results do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

use super::Console;
use crate::action::Intent;
use crate::cards::{Card, NewSession, StatusInfo, status_rows};
use crate::complete::{Sigil, complete, usage_list};
use crate::composer::Edited;
use crate::effects::Effect;
use crate::state::Focus;
use switchboard_types::api::{AbortOutcome, AgentInfo, ApiError, PolicySetting};

impl Console {
    /// A key while the composer has focus.
    pub(super) fn composer_key(&mut self, k: KeyEvent) {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let alt = k.modifiers.contains(KeyModifiers::ALT);
        let c = &mut self.state.composer;
        match k.code {
            KeyCode::Esc => {
                c.candidates.clear();
                self.state.focus = Focus::Sessions;
            }
            KeyCode::Char('c') if ctrl => {
                if c.is_empty() {
                    self.state.quit = true;
                } else {
                    c.kill_all();
                    self.state.flash(
                        "draft cleared (ctrl+y puts it back); ctrl+c again quits",
                        false,
                    );
                }
            }
            KeyCode::Enter if !alt && !ctrl => self.submit(),
            KeyCode::Tab => self.tab(),
            KeyCode::BackTab => self.intent(Intent::FocusPrev),
            // History only from the draft's first (last) line: elsewhere the arrows move.
            KeyCode::Up if !ctrl && !alt && c.cursor().0 == 0 && !c.history.is_empty() => {
                let i = match c.recall {
                    None => c.history.len() - 1,
                    Some(i) => i.saturating_sub(1),
                };
                c.recall = Some(i);
                let text = c.history[i].clone();
                c.set_text(&text);
            }
            KeyCode::Down
                if !ctrl && !alt && c.recall.is_some() && c.cursor().0 + 1 >= c.lines().len() =>
            {
                match c.recall {
                    Some(i) if i + 1 < c.history.len() => {
                        c.recall = Some(i + 1);
                        let text = c.history[i + 1].clone();
                        c.set_text(&text);
                    }
                    _ => {
                        c.recall = None;
                        c.set_text("");
                    }
                }
            }
            _ => {
                if c.edit(k) == Edited::Text
                    && c.lines().first().is_some_and(|l| l.starts_with('/'))
                {
                    // Completion of `--agent` needs the ids: ask as soon as a command starts.
                    self.want_agents();
                }
            }
        }
    }

    /// Tab: complete the word at the cursor when there is something to complete, else go to
    /// the next pane (the composer is never a trap).
    fn tab(&mut self) {
        let s = &mut self.state;
        let before = s.composer.before_cursor();
        let keys: Vec<&str> = s.sessions.rows.iter().map(|r| r.key.as_str()).collect();
        let agents: Vec<&str> = s.agents.iter().flatten().map(|a| a.id.as_str()).collect();
        match complete(Sigil::Slash, &before, &keys, &agents) {
            None => {
                s.composer.candidates.clear();
                self.intent(Intent::FocusNext);
            }
            Some(found) => {
                let c = &mut s.composer;
                if let Some(with) = &found.replace {
                    c.delete_before(found.word_chars);
                    c.insert(with);
                }
                c.candidates = found.candidates;
            }
        }
    }

    /// Load the configured agents once.
    pub(super) fn want_agents(&mut self) {
        if !self.agents_asked {
            self.agents_asked = true;
            self.queued.push(Effect::LoadAgents);
        }
    }

    /// The session a message or command goes to: the one `/new` named, else the selection.
    fn target_key(&self) -> Option<String> {
        let s = &self.state;
        s.composer
            .target
            .clone()
            .or_else(|| s.sessions.selected_key().map(str::to_string))
    }

    /// Enter in the composer: a slash command, or a message to the session.
    pub(super) fn submit(&mut self) {
        let draft = self.state.composer.text();
        let text = draft.trim().to_string();
        if text.is_empty() {
            self.state.composer.error =
                Some("Nothing to send: type a message, or /help for commands.".into());
            return;
        }
        // `:messages` (vim's word for it) opens the notices log, with or without a session.
        if text == ":messages" {
            self.state.composer.clear_sent();
            self.state.notices_open = true;
            return;
        }
        if let Some(rest) = text.strip_prefix('/') {
            let c = &mut self.state.composer;
            if c.history.last() != Some(&text) {
                c.history.push(text.clone());
            }
            c.recall = None;
            let (cmd, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let (cmd, arg) = (cmd.to_string(), arg.trim().to_string());
            match self.session_command(Sigil::Slash, &cmd, &arg, text) {
                Ok(()) => self.state.composer.clear_sent(),
                Err(e) => self.state.composer.error = Some(e),
            }
            return;
        }
        let Some(key) = self.target_key() else {
            self.state.composer.error = Some(
                "No session selected: pick one in the sessions pane, or start one with /new <session> <message>."
                    .into(),
            );
            return;
        };
        let c = &mut self.state.composer;
        if c.history.last() != Some(&text) {
            c.history.push(text.clone());
        }
        c.recall = None;
        c.clear_sent();
        if let Some(new) = c.target.take() {
            // The message starts the session: show it once a page lists it.
            self.select_when_loaded = Some(new);
            self.sessions_load.dirty = true;
            self.sessions_load.recount = true;
        }
        self.send_message(key, text);
    }

    /// A session command (`/send off` in the composer, `:send off` on the command line):
    /// `cmd` its name, `arg` the rest, `text` the owner's message for the commands the
    /// engine carries out (`/send …`). What is wrong is returned in words naming the command
    /// as typed; the caller shows it (the composer under the draft, the command line in the
    /// status line) and, when it ran, clears what was typed.
    pub(super) fn session_command(
        &mut self,
        sigil: Sigil,
        cmd: &str,
        arg: &str,
        text: String,
    ) -> Result<(), String> {
        let sigil = sigil.char();
        // Commands that act on a session take the one written to, or the one named.
        let session = |me: &Self| -> Option<String> {
            match arg.split_whitespace().next() {
                Some(k) if matches!(cmd, "status" | "abort") => Some(k.to_string()),
                _ => me.target_key(),
            }
        };
        let needs_session = matches!(
            cmd,
            "send" | "spawn" | "ask" | "forward" | "status" | "abort"
        );
        let key = session(self);
        if needs_session && key.is_none() {
            return Err(format!(
                "{sigil}{cmd} needs a session: pick one in the sessions pane first (or {sigil}new <session>)."
            ));
        }
        let key = key.unwrap_or_default();
        match cmd {
            "help" => {
                self.state.help = true;
                self.state.help_scroll = 0;
            }
            // The engine carries the command out (it is the owner's message); only its form
            // is checked here, so a typo gets its usage line at once.
            "send" => match arg.parse::<PolicySetting>() {
                Err(_) => {
                    return Err(format!(
                        "Usage: {sigil}send on|off|inherit (on = allow, off = deny, inherit = follow the config)"
                    ));
                }
                Ok(_) => self.send_message(key, text),
            },
            "spawn" => match spawn_params(arg) {
                Some(params) => self.tool_call(key, "sessions_spawn", params),
                None => return Err(format!("Usage: {sigil}spawn [--agent <id>] <task>")),
            },
            "ask" => match arg.split_once(char::is_whitespace) {
                Some((target, message)) if !message.trim().is_empty() => {
                    self.tool_call(
                        key,
                        "sessions_send",
                        json!({ "sessionKey": target, "message": message.trim(), "timeoutSeconds": 0 }),
                    );
                }
                _ => return Err(format!("Usage: {sigil}ask <session> <message>")),
            },
            "forward" => {
                let usage = || {
                    format!(
                        "Usage: {sigil}forward <session> [lines] (the selected message, or the last lines)"
                    )
                };
                let mut words = arg.split_whitespace();
                let Some(target) = words.next() else {
                    return Err(usage());
                };
                let lines = match words.next() {
                    None => 1,
                    Some(n) => match n.parse::<usize>() {
                        Ok(n) if (1..=FORWARD_MAX).contains(&n) => n,
                        _ => return Err(format!("{} (lines: 1 to {FORWARD_MAX})", usage())),
                    },
                };
                if words.next().is_some() {
                    return Err(usage());
                }
                let text = forwarded(&self.state, &key, lines).ok_or_else(|| {
                    format!("{sigil}forward: this session has no message to forward yet")
                })?;
                self.state.flash(format!("forwarding to {target}"), false);
                self.send_message(target.to_string(), text);
            }
            "status" => {
                self.state.card = Some(Card::Status {
                    key: key.clone(),
                    rows: None,
                });
                self.want_agents();
                self.queued.push(Effect::LoadStatus { key });
            }
            "abort" => self.queued.push(Effect::Abort { key }),
            "agents" => {
                self.state.card = Some(Card::Agents { selected: 0 });
                self.want_agents();
            }
            "new" => {
                let (raw, message) = match arg.split_once(char::is_whitespace) {
                    Some((raw, m)) => (raw, Some(m.trim()).filter(|m| !m.is_empty())),
                    None => (arg, None),
                };
                if raw.is_empty() {
                    return Err(format!("Usage: {sigil}new <session> [first message]"));
                }
                self.queued.push(Effect::NewSession {
                    raw: raw.to_string(),
                    text: message.map(str::to_string),
                });
            }
            other => {
                return Err(format!(
                    "Unknown command {sigil}{other}. Commands: {}",
                    usage_list(Sigil::Slash)
                ));
            }
        }
        Ok(())
    }

    /// A key while an overlay is open.
    pub(super) fn card_key(&mut self, k: KeyEvent) {
        let s = &mut self.state;
        let count = s.agents.as_ref().map_or(0, Vec::len);
        match (&mut s.card, k.code) {
            (Some(Card::Agents { selected }), KeyCode::Down | KeyCode::Char('j')) => {
                *selected = (*selected + 1).min(count.saturating_sub(1));
            }
            (Some(Card::Agents { selected }), KeyCode::Up | KeyCode::Char('k')) => {
                *selected = selected.saturating_sub(1);
            }
            (Some(Card::Agents { selected }), KeyCode::Enter) => {
                let picked = s
                    .agents
                    .as_ref()
                    .and_then(|a| a.get(*selected))
                    .map(|a| a.id.clone());
                s.card = None;
                if let Some(id) = picked {
                    // The picker's use: spawn a sub-agent under that agent; the task is
                    // still to write.
                    s.composer.set_text(&format!("/spawn --agent {id} "));
                    s.composer.error = None;
                    s.focus = Focus::Composer;
                }
            }
            (_, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q' | 'c')) => s.card = None,
            _ => {}
        }
    }

    pub(super) fn agents_loaded(&mut self, result: Result<Vec<AgentInfo>, ApiError>) {
        match result {
            Ok(list) => self.state.agents = Some(list),
            Err(e) => {
                self.state.agents = Some(Vec::new());
                // Loaded ahead for completion: only the picker's owner asked to be told.
                if matches!(self.state.card, Some(Card::Agents { .. })) {
                    self.state.flash(format!("cannot list agents: {e}"), true);
                }
            }
        }
    }

    pub(super) fn status_loaded(&mut self, key: String, result: Result<StatusInfo, ApiError>) {
        let s = &mut self.state;
        let running = s.sessions.running.contains(&key);
        let new_rows = match &result {
            Ok(info) => status_rows(info, running, s.now_ms, s.agents.as_deref()),
            Err(e) => vec![("error".into(), format!("cannot read {key}: {e}"))],
        };
        if let Some(Card::Status { key: shown, rows }) = &mut s.card
            && *shown == key
        {
            *rows = Some(new_rows);
        }
    }

    pub(super) fn aborted(&mut self, key: String, result: Result<AbortOutcome, ApiError>) {
        match result {
            Ok(o) if o.run_ids.is_empty() => self
                .state
                .flash(format!("/abort: nothing running in {key}"), false),
            Ok(o) => self.state.flash(
                format!(
                    "/abort: stopped {} in {key}: {}",
                    switchboard_types::words::count(o.run_ids.len(), "run"),
                    o.run_ids.join(", ")
                ),
                false,
            ),
            Err(e) => self.state.flash(format!("/abort {key}: {e}"), true),
        }
    }

    /// After a stop on a gateway whose policy leaves a running exchange going (OpenClaw):
    /// what the aborts ended, said in the traffic view's note.
    pub(super) fn halted(&mut self, results: Vec<(String, Result<AbortOutcome, ApiError>)>) {
        let mut ended = Vec::new();
        for (key, result) in results {
            match result {
                Ok(o) if !o.run_ids.is_empty() => ended.push(key),
                Ok(_) => {}
                Err(e) => self
                    .state
                    .flash(format!("stop: cannot abort in {key}: {e}"), true),
            }
        }
        let said = if ended.is_empty() {
            "nothing of the pair was running".to_string()
        } else {
            format!("aborted the running step in {}", ended.join(", "))
        };
        let note = format!(
            "this gateway checks /send only when a send starts: {said}{}",
            self.state
                .traffic
                .note
                .as_deref()
                .map(|n| format!(" · {n}"))
                .unwrap_or_default()
        );
        self.state.traffic.note = Some(note);
    }

    pub(super) fn new_session_done(&mut self, result: Result<NewSession, ApiError>) {
        let n = match result {
            Ok(n) => n,
            Err(e) => {
                self.state.composer.error = Some(format!("/new: {e}"));
                return;
            }
        };
        self.select_when_loaded = Some(n.key.clone());
        self.sessions_load.dirty = true;
        self.sessions_load.recount = true;
        let s = &mut self.state;
        s.focus = Focus::Composer;
        if n.sent {
            let how = if n.exists { "sent to" } else { "started" };
            s.flash(format!("{how} {} with your message", n.key), false);
        } else {
            // Written to until another session is picked.
            s.composer.target = Some(n.key.clone());
            if n.exists {
                s.flash(format!("{} exists: writing to it", n.key), false);
            } else {
                s.flash(
                    format!("{} is new: the first message you send starts it", n.key),
                    false,
                );
            }
        }
        self.select_pending();
    }

    /// Select `key` once the loaded window has it (where the console opens), unless the
    /// owner presses a key first.
    pub fn open_on(&mut self, key: String) {
        self.opening = Some(key);
    }

    /// Select the session `/new` named, or the one to open on, once the loaded window has it.
    pub(super) fn select_pending(&mut self) {
        if let Some(key) = &self.opening {
            let s = &self.state;
            if let Some(i) = s.sessions.rows.iter().position(|r| &r.key == key) {
                let index = s.sessions.offset + i;
                self.opening = None;
                self.select(index);
            }
        }
        let Some(key) = &self.select_when_loaded else {
            return;
        };
        let s = &self.state;
        if let Some(i) = s.sessions.rows.iter().position(|r| &r.key == key) {
            let index = s.sessions.offset + i;
            if s.composer.target.as_ref() == Some(key) {
                self.state.composer.target = None;
            }
            self.select_when_loaded = None;
            self.select(index);
        }
    }
}

/// `/spawn`'s arguments as `sessions_spawn` parameters: `[--agent <id>] <task>`.
fn spawn_params(arg: &str) -> Option<serde_json::Value> {
    let (agent, task) = match arg.strip_prefix("--agent") {
        Some(rest) if rest.starts_with(char::is_whitespace) => {
            let rest = rest.trim_start();
            let (id, task) = rest.split_once(char::is_whitespace)?;
            (Some(id), task.trim())
        }
        _ => (None, arg),
    };
    if task.is_empty() {
        return None;
    }
    let mut params = json!({ "task": task });
    if let Some(id) = agent {
        params["agentId"] = json!(id);
    }
    Some(params)
}

/// The most transcript lines one `/forward` carries.
const FORWARD_MAX: usize = 50;

/// The owner's message `/forward` sends: where it comes from (the session's reference and
/// name), then the selected message, or the last `lines` loaded, each with its time and
/// sender. `None` when the transcript shown is not `key`'s or has no line.
fn forwarded(s: &crate::state::State, key: &str, lines: usize) -> Option<String> {
    let t = &s.transcript;
    if t.key.as_deref() != Some(key) || t.lines.is_empty() {
        return None;
    }
    let picked: Vec<&crate::transcript::TranscriptLine> = match crate::transcript::selected_index(s)
    {
        Some(i) if lines == 1 => vec![&t.lines[i]],
        // The last lines the pane shows (a hidden tool call is not forwarded).
        _ => {
            let mut shown: Vec<_> = t
                .lines
                .iter()
                .rev()
                .filter(|l| crate::transcript::shown(t.tools, l))
                .take(lines)
                .collect();
            shown.reverse();
            shown
        }
    };
    if picked.is_empty() {
        return None;
    }
    let name = s.names.full(key);
    let mut text = if name == key {
        format!("Forwarded from {key}:")
    } else {
        format!("Forwarded from {key} ({name}):")
    };
    for l in picked {
        let at = chrono::DateTime::from_timestamp_millis(l.timestamp)
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        text.push_str(&format!("\n[{at}] {}: {}", l.from, l.text));
    }
    Some(cut_to(text, FORWARD_BYTES))
}

/// The most one `/forward` carries, in bytes: a long transcript excerpt is cut, and says so.
const FORWARD_BYTES: usize = 32 << 10;

/// `text` within `max` bytes (at a character boundary), with how much was left out.
fn cut_to(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}\n[… {} bytes more, cut]", &text[..at], text.len() - at)
}

#[cfg(test)]
mod forward_tests {
    use super::cut_to;

    #[test]
    fn a_long_excerpt_is_cut_at_a_character_and_says_so() {
        assert_eq!(cut_to("short".into(), 10), "short");
        let long = "é".repeat(20);
        let cut = cut_to(long, 9);
        assert!(cut.starts_with("éééé\n[… 32 bytes more, cut]"), "{cut}");
    }
}
