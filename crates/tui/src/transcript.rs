//! The transcript pane's place and selection: where a paused view sits (anchored to a line's
//! seq, so lines arriving below, hidden tool lines or wrapping never move it), the message
//! cursor (`[`/`]`), which tool cards are open, the horizontal offset with wrap off, where the
//! loaded window lies in the whole transcript (the newest lines, or lines before a seq, so `g`
//! reaches line 1 of a transcript of any length without holding it), and the search.
//!
//! Moving needs how many screen rows each message takes; that comes from the view as a
//! function (`rows(index)`), so moving and drawing count rows the same way.

use std::collections::BTreeSet;

use super::search::Search;
use super::state::State;
use super::streams::Delta;
use switchboard_types::api;
use switchboard_types::api::EngineEvent;
use switchboard_types::text_safety::{safe_line, safe_text};

/// One transcript line as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLine {
    pub seq: i64,
    /// `user`, `assistant`, `tool`, `result`, `error`, `note`.
    pub role: &'static str,
    pub timestamp: i64,
    /// Who: the sender label, `inter-session from <key> via <tool>`, or the agent.
    pub from: String,
    pub text: String,
}

impl TranscriptLine {
    /// A line as the API returns it (raw agent text), escaped for the screen.
    pub fn from_api(l: &api::TranscriptLine) -> TranscriptLine {
        TranscriptLine {
            seq: l.seq,
            role: l.role.as_str(),
            timestamp: l.timestamp,
            from: safe_line(&l.from).into_owned(),
            text: crate::cells::stable(&safe_text(&l.text)).into_owned(),
        }
    }
}

/// The transcript pane's state: the selected session's loaded lines, where they came from,
/// the view over them (`TranscriptView`), the toggles, and the replies being streamed.
#[derive(Debug, Clone)]
pub struct TranscriptPane {
    pub lines: Vec<TranscriptLine>,
    /// The session `lines` were read from: whenever the selection names another, the
    /// transcript is reloaded before the next frame, so the pane never shows one session's
    /// lines under another's title.
    pub key: Option<String>,
    /// Lines the selected session has in all (the pane holds only the newest window).
    pub total: i64,
    /// Where the paused view sits, its message cursor, open tool cards, horizontal scroll,
    /// the loaded window's place and the search.
    pub view: TranscriptView,
    /// How many of the newest lines are loaded (grows as the user scrolls back).
    pub window: usize,
    pub tools: bool,
    pub timestamps: bool,
    pub wrap: bool,
    pub follow: bool,
    /// Replies being streamed, shown provisionally under their session's transcript.
    pub streams: crate::streams::Streams,
}

impl Default for TranscriptPane {
    fn default() -> TranscriptPane {
        TranscriptPane {
            lines: Vec::new(),
            key: None,
            total: 0,
            view: TranscriptView::default(),
            window: super::state::TRANSCRIPT_WINDOW,
            tools: false,
            timestamps: true,
            wrap: true,
            follow: true,
            streams: Default::default(),
        }
    }
}

impl TranscriptPane {
    /// An engine event, as far as the replies being streamed go: deltas build them, the
    /// reply's line or the run's end settles them, missed events drop them. `selected` is
    /// the session the pane shows.
    pub fn event(&mut self, e: &EngineEvent, selected: Option<&str>, now: i64) {
        let shown = |key: &str| selected == Some(key);
        match e {
            EngineEvent::MessageAppended { key, seq, line, .. } => {
                if let Some(run_id) = reply_line_run(line) {
                    self.streams.reply_appended(run_id, *seq, shown(key));
                }
            }
            EngineEvent::ExternalChange => self.streams.events_missed(),
            EngineEvent::RunEnded {
                key,
                run_id,
                status,
                reply,
                ..
            } => {
                let reply = reply
                    .as_deref()
                    .filter(|r| *status == api::RunStatus::Ok && !r.is_empty());
                self.streams
                    .run_ended(run_id, shown(key), reply, self.total);
            }
            EngineEvent::ReplyDelta {
                run_id,
                key,
                agent_id,
                step,
                offset,
                delta,
            } => self.streams.delta(
                Delta {
                    run_id,
                    key,
                    agent_id,
                    step: *step,
                    offset: *offset,
                    text: delta,
                },
                now,
            ),
            _ => {}
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

/// The top of a paused view: `skip` rows into the first shown line at or after `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    pub skip: usize,
}

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct TranscriptView {
    /// The paused view's top (used while `TranscriptPane::follow` is off).
    pub anchor: Option<Anchor>,
    /// The selected message (its seq): what `y` copies and Enter opens.
    pub cursor: Option<i64>,
    /// Tool cards shown expanded (their tool line's seq).
    pub expanded: BTreeSet<i64>,
    /// Columns scrolled right while wrap is off.
    pub hscroll: usize,
    /// The loaded window is the lines before this seq; `None`: the newest lines.
    pub window_end: Option<i64>,
    /// The loaded window starts at the transcript's first line.
    pub at_start: bool,
    pub search: Search,
}

impl TranscriptView {
    /// Another session is shown: its own place, nothing of the last one's (the search query
    /// stays: the owner may look for the same word in several sessions).
    pub fn reset(&mut self) {
        let search = std::mem::take(&mut self.search);
        *self = TranscriptView {
            search,
            hscroll: self.hscroll,
            ..TranscriptView::default()
        };
    }
}

/// Whether the pane shows `l` as a line of its own: tool calls as cards when tools are on;
/// results only inside their card.
pub fn shown(tools: bool, l: &TranscriptLine) -> bool {
    match l.role {
        "result" => false,
        "tool" => tools,
        _ => true,
    }
}

/// Lines in the order of their times, ties kept in arrival (seq) order: a reply stored after
/// a line that quotes it (its time is when it was made) sat below it. A line without a time
/// keeps its place after the line before it.
pub fn order_by_time(lines: &mut Vec<TranscriptLine>) {
    let mut carried = i64::MIN;
    let keys: Vec<i64> = lines
        .iter()
        .map(|l| {
            if l.timestamp > 0 {
                carried = l.timestamp;
            }
            carried
        })
        .collect();
    if keys.is_sorted() {
        return;
    }
    let mut keyed: Vec<(i64, TranscriptLine)> = keys.into_iter().zip(lines.drain(..)).collect();
    // Stable: equal times stay in seq order.
    keyed.sort_by_key(|(k, _)| *k);
    lines.extend(keyed.into_iter().map(|(_, l)| l));
}

/// Where `seq` is in `lines` (in time order, so nearly always seq order too): the line's
/// index, or when it is not loaded the first line after it in seq, else the end. A binary
/// search finds it while the two orders agree; a scan when they do not.
pub fn seq_index(lines: &[TranscriptLine], seq: i64) -> usize {
    let at = lines.partition_point(|l| l.seq < seq);
    if lines.get(at).is_some_and(|l| l.seq == seq) {
        return at;
    }
    lines
        .iter()
        .position(|l| l.seq == seq)
        .or_else(|| lines.iter().position(|l| l.seq > seq))
        .unwrap_or(lines.len())
}

/// The index of the first shown line at or after `seq`.
pub fn index_at(s: &State, seq: i64) -> Option<usize> {
    let from = seq_index(&s.transcript.lines, seq);
    (from..s.transcript.lines.len()).find(|&i| shown(s.transcript.tools, &s.transcript.lines[i]))
}

fn prev_shown(s: &State, i: usize) -> Option<usize> {
    (0..i)
        .rev()
        .find(|&j| shown(s.transcript.tools, &s.transcript.lines[j]))
}

fn next_shown(s: &State, i: usize) -> Option<usize> {
    (i + 1..s.transcript.lines.len()).find(|&j| shown(s.transcript.tools, &s.transcript.lines[j]))
}

fn last_shown(s: &State) -> Option<usize> {
    prev_shown(s, s.transcript.lines.len())
}

/// The top of the view when it follows the end: the last `body_h` rows of the shown lines
/// (plus `extra` rows drawn below them, the streamed replies).
pub fn end_anchor(s: &State, body_h: usize, extra: usize, rows: &dyn Fn(usize) -> usize) -> Anchor {
    let Some(mut i) = last_shown(s) else {
        return Anchor { seq: 0, skip: 0 };
    };
    let mut need = body_h.saturating_sub(extra);
    loop {
        let r = rows(i);
        if r >= need {
            return Anchor {
                seq: s.transcript.lines[i].seq,
                skip: r - need,
            };
        }
        need -= r;
        match prev_shown(s, i) {
            Some(p) => i = p,
            None => {
                return Anchor {
                    seq: s.transcript.lines[i].seq,
                    skip: 0,
                };
            }
        }
    }
}

/// Rows from `a` to the end of the loaded lines, counted up to `limit + 1`.
pub fn rows_below(s: &State, a: Anchor, limit: usize, rows: &dyn Fn(usize) -> usize) -> usize {
    let Some(mut i) = index_at(s, a.seq) else {
        return 0;
    };
    let mut total = rows(i).saturating_sub(a.skip);
    while total <= limit {
        match next_shown(s, i) {
            Some(n) => {
                i = n;
                total += rows(i);
            }
            None => break,
        }
    }
    total
}

/// `a`, unless the view would run past the end of what is loaded: then the end at the bottom.
pub fn clamp(
    s: &State,
    a: Anchor,
    body_h: usize,
    extra: usize,
    rows: &dyn Fn(usize) -> usize,
) -> Anchor {
    let Some(i) = index_at(s, a.seq) else {
        return end_anchor(s, body_h, extra, rows);
    };
    let a = Anchor {
        seq: s.transcript.lines[i].seq,
        skip: a.skip.min(rows(i).saturating_sub(1)),
    };
    if rows_below(s, a, body_h, rows) + extra < body_h {
        end_anchor(s, body_h, extra, rows)
    } else {
        a
    }
}

/// `a` moved by `delta` rows (negative: up), stopping at the first and last row.
pub fn scroll(s: &State, a: Anchor, delta: isize, rows: &dyn Fn(usize) -> usize) -> Anchor {
    let Some(mut i) = index_at(s, a.seq) else {
        return a;
    };
    let mut skip = a.skip.min(rows(i).saturating_sub(1));
    let mut left = delta.unsigned_abs();
    while left > 0 {
        if delta < 0 {
            if skip > 0 {
                let step = skip.min(left);
                skip -= step;
                left -= step;
                continue;
            }
            match prev_shown(s, i) {
                Some(p) => {
                    i = p;
                    skip = rows(i).saturating_sub(1);
                    left -= 1;
                }
                None => break,
            }
        } else {
            let r = rows(i);
            if skip + 1 < r {
                let step = (r - 1 - skip).min(left);
                skip += step;
                left -= step;
                continue;
            }
            match next_shown(s, i) {
                Some(n) => {
                    i = n;
                    skip = 0;
                    left -= 1;
                }
                None => break,
            }
        }
    }
    Anchor {
        seq: s.transcript.lines[i].seq,
        skip,
    }
}

/// The view moved so line `seq` is on screen: unchanged when it already is, else with that
/// line at the top.
pub fn reveal(
    s: &State,
    a: Anchor,
    seq: i64,
    body_h: usize,
    rows: &dyn Fn(usize) -> usize,
) -> Anchor {
    let (Some(top), Some(target)) = (index_at(s, a.seq), index_at(s, seq)) else {
        return a;
    };
    if target < top || (target == top && a.skip > 0) {
        return Anchor { seq, skip: 0 };
    }
    // Rows from the view's top to the end of the target line.
    let mut used = rows(top).saturating_sub(a.skip);
    let mut i = top;
    while i < target {
        match next_shown(s, i) {
            Some(n) => {
                i = n;
                used += rows(i);
            }
            None => break,
        }
        if used > body_h {
            break;
        }
    }
    if used > body_h {
        Anchor {
            seq: s.transcript.lines[target].seq,
            skip: 0,
        }
    } else {
        a
    }
}

/// The cursor moved one shown message down (`forward`) or up; without a cursor yet, the
/// message at `bottom` (the last one on screen) is selected first.
pub fn step_cursor(s: &State, bottom: Option<i64>, forward: bool) -> Option<i64> {
    let i = match s.transcript.view.cursor {
        None => bottom
            .and_then(|b| index_at(s, b))
            .or_else(|| last_shown(s))?,
        Some(seq) => {
            let at = seq_index(&s.transcript.lines, seq);
            let exact = s.transcript.lines.get(at).is_some_and(|l| l.seq == seq);
            let moved = if forward && exact {
                next_shown(s, at)
            } else if forward {
                index_at(s, seq)
            } else {
                prev_shown(s, at)
            };
            moved
                .or_else(|| index_at(s, seq))
                .or_else(|| last_shown(s))?
        }
    };
    Some(s.transcript.lines.get(i)?.seq)
}

/// The selected message as the pane shows it: the cursor's line, or when that line is
/// hidden (a tool call with tool calls off) the nearest shown line before it, else after it.
/// The pane marks this line and `y` copies it, Enter opens it: what is copied is always
/// what is marked, never a line the owner cannot see. `None` when nothing is selected or
/// the cursor's line is no longer loaded.
pub fn selected_index(s: &State) -> Option<usize> {
    let seq = s.transcript.view.cursor?;
    let at = seq_index(&s.transcript.lines, seq);
    let l = s.transcript.lines.get(at).filter(|l| l.seq == seq)?;
    if shown(s.transcript.tools, l) {
        Some(at)
    } else {
        prev_shown(s, at).or_else(|| next_shown(s, at))
    }
}

/// The seq of [`selected_index`]'s line.
pub fn selected_seq(s: &State) -> Option<i64> {
    selected_index(s).map(|i| s.transcript.lines[i].seq)
}

/// The line with seq `seq`, when loaded.
pub fn line(s: &State, seq: i64) -> Option<&TranscriptLine> {
    let at = seq_index(&s.transcript.lines, seq);
    s.transcript.lines.get(at).filter(|l| l.seq == seq)
}
