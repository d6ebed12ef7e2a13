//! `update` for the transcript pane: scrolling (a paused view anchored to a line), `g`/`G`
//! moving the loaded window to the transcript's start or end, the message cursor, tool cards,
//! sideways scrolling, the search box and `n`/`N`, and copying a message.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::Console;
use crate::action::Intent;
use crate::clipboard;
use crate::effects::Effect;
use crate::state::{Focus, TRANSCRIPT_MAX, TRANSCRIPT_WINDOW};
use crate::transcript::{self as nav, Anchor};
use crate::view::transcript as pane;
use switchboard_types::api::{ApiError, TranscriptPage};

/// Columns `h`/`l` move with wrap off.
const SIDEWAYS_STEP: usize = 8;

impl Console {
    /// The transcript pane's toggles: tool lines, timestamps, wrapping, following the end.
    pub(super) fn transcript_toggle(&mut self, intent: Intent, page: usize) {
        let s = &mut self.state;
        match intent {
            Intent::ToggleTools => {
                s.transcript.tools = !s.transcript.tools;
                let on = if s.transcript.tools {
                    "shown"
                } else {
                    "hidden"
                };
                s.flash(format!("tool calls {on}"), false);
                // A selected tool call just hidden: the selection is the line marked now.
                s.transcript.view.cursor = nav::selected_seq(s).or(s.transcript.view.cursor);
                self.rescan_search();
            }
            Intent::ToggleTimestamps => s.transcript.timestamps = !s.transcript.timestamps,
            Intent::ToggleWrap => s.transcript.wrap = !s.transcript.wrap,
            Intent::ToggleFollow => {
                if s.transcript.follow {
                    // Paused where it is now.
                    let top = pane::top(s);
                    s.transcript.view.anchor = Some(top);
                    s.transcript.follow = false;
                } else {
                    self.transcript_move(Intent::Bottom, page);
                }
            }
            _ => {}
        }
    }

    pub(super) fn transcript_loaded(
        &mut self,
        generation: u64,
        key: String,
        result: Result<TranscriptPage, ApiError>,
    ) {
        if self
            .transcript_load
            .in_flight
            .as_ref()
            .is_some_and(|(g, k)| *g == generation && *k == key)
        {
            self.transcript_load.in_flight = None;
        }
        if generation != self.transcript_load.generation
            || self.state.sessions.selected_key() != Some(key.as_str())
        {
            return;
        }
        let s = &mut self.state;
        if s.transcript.key.as_deref() != Some(key.as_str()) {
            // Another session: start at its end, not at the last one's scroll position.
            s.transcript.lines.clear();
            s.transcript.total = 0;
            s.transcript.view.reset();
            s.transcript.follow = true;
        }
        match result {
            Ok(page) => {
                let mut lines: Vec<_> = page
                    .lines
                    .iter()
                    .map(crate::state::TranscriptLine::from_api)
                    .collect();
                let total = page.last_seq;
                // A paused view is anchored to a line (`transcript_view.anchor`), so neither
                // new lines below it nor a longer window above it move what is on screen.
                // A gateway may leave older lines out to fit its frame limit: those are
                // still there to page back to.
                s.transcript.view.at_start = (page.left_out == 0
                    && lines.len() < self.transcript_load.asked)
                    || lines.iter().any(|l| l.seq <= 1);
                nav::order_by_time(&mut lines);
                // Paused on the newest window: it grows by what arrived, so the line the
                // view is anchored to is not pushed out of it by newer ones.
                if !s.transcript.follow
                    && s.transcript.view.window_end.is_none()
                    && s.transcript.total > 0
                {
                    let arrived = (total - s.transcript.total).max(0) as usize;
                    s.transcript.window = (s.transcript.window + arrived).min(TRANSCRIPT_MAX);
                }
                s.transcript.lines = lines;
                s.transcript.total = total;
                // The real reply lines are on screen now: their provisional text goes in
                // the same frame, so neither both nor none are ever drawn.
                s.transcript.streams.transcript_loaded(&key, total);
                self.rescan_search();
            }
            Err(e) => {
                s.transcript.lines.clear();
                s.transcript.total = 0;
                s.flash(format!("cannot read the transcript: {e}"), true);
                self.rescan_search();
            }
        }
        let s = &mut self.state;
        s.transcript.key = Some(key.clone());
        s.sessions.unread.remove(&key);
    }

    /// Rows of message `i` as the pane draws it now.
    fn rows_fn(&self) -> impl Fn(usize) -> usize + '_ {
        let (width, _) = pane::body_size(&self.state);
        move |i| pane::message_rows(&self.state, i, width)
    }

    /// Up/down/page/top/bottom with the transcript focused.
    pub(super) fn transcript_move(&mut self, intent: Intent, page: usize) {
        match intent {
            Intent::Top => return self.transcript_to_start(),
            Intent::Bottom => return self.transcript_to_end(),
            _ => {}
        }
        let (_, body_h) = pane::body_size(&self.state);
        let delta: isize = match intent {
            Intent::Up => -1,
            Intent::Down => 1,
            Intent::PageUp => -(page as isize),
            _ => page as isize,
        };
        let from = pane::top(&self.state);
        let (to, at_end) = {
            let rows = self.rows_fn();
            let to = nav::scroll(&self.state, from, delta, &rows);
            let to = nav::clamp(&self.state, to, body_h, 0, &rows);
            (
                to,
                nav::rows_below(&self.state, to, body_h, &rows) <= body_h,
            )
        };
        let s = &mut self.state;
        let newest = s.transcript.view.window_end.is_none();
        if delta > 0 && at_end && newest {
            // Reaching the end resumes following.
            s.transcript.follow = true;
            s.transcript.view.anchor = None;
        } else if delta < 0 || to != from || !s.transcript.follow {
            s.transcript.follow = false;
            s.transcript.view.anchor = Some(to);
        }
        self.transcript_load_around(to, body_h, page);
    }

    /// Near either edge of the loaded window, with more beyond it: move or grow the window.
    /// The view is anchored to a seq, so what is on screen stays put when the page lands.
    fn transcript_load_around(&mut self, a: Anchor, body_h: usize, page: usize) {
        let s = &self.state;
        // The lines are in time order: the window's ends are its least and greatest seq.
        let seqs = s.transcript.lines.iter().map(|l| l.seq);
        let (Some(lo), Some(hi)) = (seqs.clone().min(), seqs.max()) else {
            return;
        };
        let i = nav::seq_index(&s.transcript.lines, a.seq);
        let margin = body_h + page;
        let v = &s.transcript.view;
        if i <= margin && !v.at_start {
            let s = &mut self.state;
            if s.transcript.window < TRANSCRIPT_MAX {
                s.transcript.window = (s.transcript.window + TRANSCRIPT_WINDOW).min(TRANSCRIPT_MAX);
            } else {
                // At the most the pane holds: the window moves back instead of growing.
                s.transcript.view.window_end =
                    Some(lo + (TRANSCRIPT_MAX - TRANSCRIPT_WINDOW) as i64);
            }
            self.transcript_load.dirty = true;
        } else if v.window_end.is_some()
            && s.transcript.lines.len().saturating_sub(i) <= margin + body_h
        {
            let s = &mut self.state;
            let next = hi + 1 + TRANSCRIPT_WINDOW as i64;
            s.transcript.view.window_end = (next <= s.transcript.total).then_some(next);
            s.transcript.window =
                (s.transcript.lines.len() + TRANSCRIPT_WINDOW).min(TRANSCRIPT_MAX);
            self.transcript_load.dirty = true;
        }
    }

    /// `g`: the transcript's first line, however long it is: the oldest page is loaded
    /// (one load), and the view waits at its top.
    fn transcript_to_start(&mut self) {
        let s = &mut self.state;
        s.transcript.follow = false;
        s.transcript.view.anchor = Some(Anchor {
            seq: i64::MIN,
            skip: 0,
        });
        if !s.transcript.view.at_start {
            s.transcript.view.window_end = Some(TRANSCRIPT_WINDOW as i64 + 1);
            s.transcript.window = TRANSCRIPT_WINDOW;
            // What is under way asks for another window: its answer is not this one.
            self.transcript_load.generation += 1;
            self.transcript_load.dirty = true;
        }
    }

    /// `G`: the newest lines, following again.
    fn transcript_to_end(&mut self) {
        let s = &mut self.state;
        s.transcript.follow = true;
        s.transcript.view.anchor = None;
        if s.transcript.view.window_end.take().is_some() {
            s.transcript.window = TRANSCRIPT_WINDOW;
            s.transcript.view.at_start = false;
            self.transcript_load.generation += 1;
            self.transcript_load.dirty = true;
        }
    }

    /// The pane's own intents (they do nothing in other panes).
    pub(super) fn transcript_intent(&mut self, intent: Intent) {
        if self.state.focus != Focus::Transcript {
            return;
        }
        match intent {
            Intent::Filter => {
                self.state.focus = Focus::Search;
            }
            Intent::SearchNext | Intent::SearchPrev => {
                let search = &mut self.state.transcript.view.search;
                if !search.active() {
                    self.state
                        .flash("no search: press / to search the transcript", false);
                    return;
                }
                if let Some(hit) = search.step(intent == Intent::SearchNext) {
                    self.select_hit(hit.seq);
                }
            }
            Intent::ScrollLeft | Intent::ScrollRight => {
                let s = &mut self.state;
                if s.transcript.wrap {
                    s.flash("wrap is on: w turns it off to scroll sideways", false);
                    return;
                }
                let v = &mut s.transcript.view;
                v.hscroll = if intent == Intent::ScrollLeft {
                    v.hscroll.saturating_sub(SIDEWAYS_STEP)
                } else {
                    // Far enough for any line the pane holds; past the longest shows `…`.
                    (v.hscroll + SIDEWAYS_STEP).min(1 << 20)
                };
            }
            Intent::SelectPrev | Intent::SelectNext => {
                let bottom = pane::bottom_seq(&self.state);
                let to = nav::step_cursor(&self.state, bottom, intent == Intent::SelectNext);
                self.state.transcript.view.cursor = to;
                if let Some(seq) = to {
                    self.show_line(seq);
                }
            }
            Intent::Open => self.toggle_card(),
            Intent::Copy => self.copy_selected(),
            _ => {}
        }
    }

    /// Move the view so line `seq` is on screen (pausing follow when it must move).
    fn show_line(&mut self, seq: i64) {
        let (_, body_h) = pane::body_size(&self.state);
        let from = pane::top(&self.state);
        let to = {
            let rows = self.rows_fn();
            let to = nav::reveal(&self.state, from, seq, body_h, &rows);
            nav::clamp(&self.state, to, body_h, 0, &rows)
        };
        if to != from {
            self.state.transcript.follow = false;
            self.state.transcript.view.anchor = Some(to);
        }
    }

    fn toggle_card(&mut self) {
        let s = &mut self.state;
        let Some(seq) = nav::selected_seq(s) else {
            s.flash("select a message with [ or ] first", false);
            return;
        };
        if nav::line(s, seq).is_none_or(|l| l.role != "tool") {
            s.flash("the selected message is not a tool call", false);
            return;
        }
        let v = &mut s.transcript.view;
        if !v.expanded.remove(&seq) {
            v.expanded.insert(seq);
        }
    }

    fn copy_selected(&mut self) {
        let s = &mut self.state;
        // What the pane marks, not a hidden line the cursor may still name.
        let Some(line) = nav::selected_index(s).map(|i| &s.transcript.lines[i]) else {
            s.flash(
                "select a message with [ or ] first, then y copies it",
                false,
            );
            return;
        };
        let (text, was_cut) = clipboard::capped(&line.text);
        let n = text.chars().count();
        let text = text.to_string();
        s.flash(
            if was_cut {
                format!(
                    "copied the first {n} characters (at most {} KB go to the clipboard)",
                    clipboard::COPY_MAX_BYTES / 1024
                )
            } else {
                format!("copied {}", switchboard_types::words::count(n, "character"))
            },
            false,
        );
        self.queued.push(Effect::Copy { text });
    }

    /// A key while the search box has focus.
    pub(super) fn search_key(&mut self, k: KeyEvent) {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let mut query = self.state.transcript.view.search.query.clone();
        match k.code {
            KeyCode::Esc => {
                query.clear();
                self.state.focus = Focus::Transcript;
            }
            KeyCode::Enter => {
                self.state.focus = Focus::Transcript;
                return;
            }
            KeyCode::Backspace => {
                query.pop();
            }
            KeyCode::Char('u') if ctrl => query.clear(),
            KeyCode::Char(c) if !ctrl => query.push(c),
            _ => return,
        }
        self.set_search(&query);
    }

    /// Text pasted into the search box: its first line.
    pub(super) fn search_paste(&mut self, text: &str) {
        let mut query = self.state.transcript.view.search.query.clone();
        query.push_str(text.lines().next().unwrap_or(""));
        self.set_search(&query);
    }

    /// A new query: its hits found once, the newest made current and shown.
    fn set_search(&mut self, query: &str) {
        let s = &mut self.state;
        let tools = s.transcript.tools;
        let search = &mut s.transcript.view.search;
        search.set_query(query);
        search.current = None;
        search.rescan(&s.transcript.lines, |l| nav::shown(tools, l));
        if let Some(hit) = search.to_last() {
            self.select_hit(hit.seq);
        }
    }

    /// A search hit becomes the selected message (so `y` copies it at once), on screen.
    fn select_hit(&mut self, seq: i64) {
        self.state.transcript.view.cursor = Some(seq);
        self.show_line(seq);
    }

    /// The lines or what is shown of them changed: find the hits again.
    pub(super) fn rescan_search(&mut self) {
        let s = &mut self.state;
        if s.transcript.view.search.active() {
            let tools = s.transcript.tools;
            s.transcript
                .view
                .search
                .rescan(&s.transcript.lines, |l| nav::shown(tools, l));
        }
    }
}
