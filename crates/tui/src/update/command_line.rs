//! `update` for the `:` command line: its keys (typing, Tab completion, Enter, Esc) and
//! what its commands do. Session commands run through the composer's code
//! (`session_command`) without touching the draft; what is wrong goes to the status line.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::Console;
use crate::command_line::{self, CommandLine, LineCommand};
use crate::complete::{Sigil, complete};
use crate::state::Pane;

impl Console {
    /// `:` pressed: the line opens, empty (the agents are asked for once, for completing
    /// `:spawn --agent`).
    pub(super) fn open_command_line(&mut self) {
        self.state.command = Some(CommandLine::default());
        self.want_agents();
    }

    /// A key while the command line is open: it takes them all.
    pub(super) fn command_line_key(&mut self, k: KeyEvent) {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let Some(line) = self.state.command.as_mut() else {
            return;
        };
        match k.code {
            KeyCode::Esc => self.state.command = None,
            KeyCode::Char('c') if ctrl => self.state.command = None,
            // Backspace on an empty line closes it, as in vim.
            KeyCode::Backspace if line.text.is_empty() => self.state.command = None,
            KeyCode::Backspace => {
                line.text.pop();
                line.candidates.clear();
            }
            KeyCode::Char('u') if ctrl => {
                line.text.clear();
                line.candidates.clear();
            }
            KeyCode::Tab => self.complete_line(),
            KeyCode::Enter => {
                let text = line.text.clone();
                self.state.command = None;
                self.run_line(&text);
            }
            KeyCode::Char(c) if !ctrl => line.push_str(c.encode_utf8(&mut [0; 4])),
            _ => {}
        }
    }

    /// Text pasted while the line is open: its first line.
    pub(super) fn command_line_paste(&mut self, text: &str) {
        if let Some(line) = self.state.command.as_mut() {
            line.push_str(text.lines().next().unwrap_or(""));
        }
    }

    /// Tab: the composer's completion over the line's commands and their arguments.
    fn complete_line(&mut self) {
        let s = &mut self.state;
        let Some(line) = s.command.as_mut() else {
            return;
        };
        let before = format!(":{}", line.text);
        let keys: Vec<&str> = s.sessions.rows.iter().map(|r| r.key.as_str()).collect();
        let agents: Vec<&str> = s.agents.iter().flatten().map(|a| a.id.as_str()).collect();
        match complete(Sigil::Colon, &before, &keys, &agents) {
            None => line.candidates.clear(),
            Some(found) => {
                if let Some(with) = &found.replace {
                    let keep = before.chars().count() - found.word_chars;
                    let kept: String = before.chars().take(keep).collect();
                    let text = format!("{kept}{with}");
                    line.text = text.strip_prefix(':').unwrap_or(&text).to_string();
                }
                line.candidates = found.candidates;
            }
        }
    }

    /// Enter: run the line's command, or say in the status line why not.
    fn run_line(&mut self, text: &str) {
        let command = match command_line::parse(text) {
            Ok(c) => c,
            Err(e) => return self.state.flash(e.to_string(), true),
        };
        let s = &mut self.state;
        match command {
            LineCommand::Traffic => {
                s.rounds.exchange_view = None;
                // The traffic view itself, not a list drilled down from it.
                s.drill = None;
                if !s.traffic.open {
                    s.traffic.toggle();
                }
            }
            LineCommand::Exchanges => {
                self.close_views();
                let s = &mut self.state;
                s.rounds.all = true;
                self.focus_pane(Pane::Rounds);
            }
            LineCommand::Sessions => {
                self.close_views();
                self.focus_pane(Pane::Sessions);
            }
            LineCommand::Transcript => {
                self.close_views();
                self.focus_pane(Pane::Transcript);
            }
            LineCommand::Messages => s.notices_open = true,
            LineCommand::Source(name) => {
                if !s.sources.merged() {
                    return s.flash("one source: nothing to filter by", true);
                }
                if let Some(n) = &name
                    && !s.sources.list.iter().any(|x| &x.name == n)
                {
                    let names: Vec<&str> = s.sources.list.iter().map(|x| x.name.as_str()).collect();
                    return s.flash(
                        format!("no source named {n} (sources: {})", names.join(", ")),
                        true,
                    );
                }
                self.close_views();
                self.focus_pane(Pane::Sessions);
                self.filter_source(name);
            }
            LineCommand::Help => {
                s.help = true;
                s.help_scroll = 0;
            }
            LineCommand::Quit => s.quit = true,
            LineCommand::Session { name, arg } => {
                let text = if arg.is_empty() {
                    format!("/{name}")
                } else {
                    format!("/{name} {arg}")
                };
                if let Err(e) = self.session_command(Sigil::Colon, name, &arg, text) {
                    self.state.flash(e, true);
                }
            }
        }
    }

    /// A pane named on the command line is shown as it is: the views over the panes close.
    /// (The line opens in the traffic view only when no stop waits for its answer.)
    fn close_views(&mut self) {
        let s = &mut self.state;
        if s.traffic.open {
            s.traffic.toggle();
        }
        s.rounds.exchange_view = None;
        s.drill = None;
    }
}
