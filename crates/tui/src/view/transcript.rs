//! The transcript pane: the selected session's messages with sender, provenance and time;
//! tool calls as cards (hidden unless toggled); search hits highlighted; the selected
//! message marked; with wrap off, long lines cut with `…` and scrolled sideways; an indicator
//! line with every toggle's state, or the search box and its counter.
//!
//! Only the messages that can be on screen are built: the view walks from its anchor (or
//! back from the end while following), asking each message's height in rows, the same
//! function `update` moves with (`message_rows`).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use unicode_width::UnicodeWidthChar;

use super::border;
use crate::state::{Focus, State, TranscriptLine};
use crate::tool_cards::{self, Status};
use crate::transcript::{self as nav, Anchor};

/// The most rows an open tool card gives its arguments, and its result.
const CARD_SECTION_ROWS: usize = 10;
/// The spinner's frames: one per tick or delta, only while a reply streams.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

/// The text area of the pane (inside the border, above the indicator line): its width and
/// height in rows, for a terminal of the state's size, laid out as drawn (zoomed, the
/// composer grown); where a zoom hides the pane, as the unzoomed layout has it.
pub(crate) fn body_size(state: &State) -> (u16, usize) {
    let r = match super::regions_for(state).transcript {
        r if r.is_empty() => super::regions(state.width, state.height).transcript,
        r => r,
    };
    (
        r.width.saturating_sub(2),
        (r.height as usize).saturating_sub(3),
    )
}

/// How many rows message `index` takes on screen (0 when hidden).
pub(crate) fn message_rows(state: &State, index: usize, width: u16) -> usize {
    let Some(l) = state.transcript.lines.get(index) else {
        return 0;
    };
    if !nav::shown(state.transcript.tools, l) {
        return 0;
    }
    rows_of(state, message_lines(state, index, width), width)
}

fn rows_of(state: &State, lines: Vec<Line<'static>>, width: u16) -> usize {
    if state.transcript.wrap {
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .line_count(width.max(1))
    } else {
        lines.len()
    }
}

/// Rows the streamed replies take below the messages (when the newest lines are loaded).
fn provisional(state: &State, body_h: usize) -> Vec<Line<'static>> {
    if state.transcript.view.window_end.is_some() {
        return Vec::new();
    }
    provisional_lines(state, body_h)
}

/// Where the view's top is now (following or paused), for a body of `width` × `body_h`.
pub(crate) fn top(state: &State) -> Anchor {
    let (width, body_h) = body_size(state);
    let extra = rows_of(state, provisional(state, body_h), width);
    let rows = |i: usize| message_rows(state, i, width);
    match state.transcript.view.anchor {
        Some(a) if !state.transcript.follow => nav::clamp(state, a, body_h, extra, &rows),
        _ => nav::end_anchor(state, body_h, extra, &rows),
    }
}

/// The last message on screen (its seq).
pub(crate) fn bottom_seq(state: &State) -> Option<i64> {
    let (width, body_h) = body_size(state);
    let a = top(state);
    let mut i = nav::index_at(state, a.seq)?;
    let mut used = message_rows(state, i, width).saturating_sub(a.skip);
    while used < body_h {
        let Some(n) = (i + 1..state.transcript.lines.len())
            .find(|&j| nav::shown(state.transcript.tools, &state.transcript.lines[j]))
        else {
            break;
        };
        i = n;
        used += message_rows(state, i, width);
    }
    Some(state.transcript.lines[i].seq)
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let title = match state.sessions.selected_key() {
        Some(k) => format!(" {} ", switchboard_types::text_safety::safe_line(k)),
        None => " Transcript ".to_string(),
    };
    let focused = if state.focus == Focus::Search {
        Focus::Search
    } else {
        Focus::Transcript
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .border_style(border(state, focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    let body_h = inner.height as usize - 1;
    let body = Rect::new(inner.x, inner.y, inner.width, inner.height - 1);
    let rows = |i: usize| message_rows(state, i, body.width);
    let prov = provisional(state, body_h);
    let extra = rows_of(state, prov.clone(), body.width);
    let anchor = match state.transcript.view.anchor {
        Some(a) if !state.transcript.follow => nav::clamp(state, a, body_h, extra, &rows),
        _ => nav::end_anchor(state, body_h, extra, &rows),
    };
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut reached_end = true;
    if let Some(first) = nav::index_at(state, anchor.seq) {
        let mut used = 0usize;
        for i in first..state.transcript.lines.len() {
            if used >= anchor.skip + body_h {
                reached_end = false;
                break;
            }
            if !nav::shown(state.transcript.tools, &state.transcript.lines[i]) {
                continue;
            }
            let more = message_lines(state, i, body.width);
            used += rows_of(state, more.clone(), body.width);
            lines.extend(more);
        }
    }
    let no_messages = lines.is_empty();
    if reached_end {
        lines.extend(prov);
    }
    if no_messages && lines.is_empty() {
        lines.push(Line::from(if state.sessions.selected_key().is_some() {
            "No messages yet."
        } else {
            "Select a session."
        }));
    }
    let para = if state.transcript.wrap {
        Paragraph::new(lines).wrap(Wrap { trim: false })
    } else {
        let hs = state.transcript.view.hscroll;
        let w = body.width as usize;
        Paragraph::new(lines.into_iter().map(|l| cut(l, hs, w)).collect::<Vec<_>>())
    };
    // Following, the end sits at the bottom (a streamed reply taller than the pane shows
    // its newest rows); paused, the anchor's row is at the top.
    let top = if state.transcript.follow || state.transcript.view.anchor.is_none() {
        para.line_count(body.width).saturating_sub(body_h)
    } else {
        anchor.skip
    };
    let para = para.scroll((top.min(u16::MAX as usize) as u16, 0));
    frame.render_widget(para, body);
    let ind = Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1);
    frame.render_widget(Paragraph::new(indicator(state)), ind);
}

/// The bottom line: the search box and its counter while searching, else the toggles.
fn indicator(state: &State) -> Line<'static> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    let search = &state.transcript.view.search;
    if state.focus == Focus::Search || search.active() {
        let mut spans = vec![Span::styled(
            format!(
                "/{}",
                switchboard_types::text_safety::safe_line(&search.query)
            ),
            Style::default().add_modifier(Modifier::BOLD),
        )];
        if state.focus == Focus::Search {
            spans.push(Span::styled(
                state.theme.glyphs().caret,
                Style::default().fg(Color::Cyan),
            ));
        }
        spans.push(Span::raw(format!("  {}", search.counter())));
        if let Some(note) = &search.note {
            spans.push(Span::styled(
                format!("  {note}"),
                Style::default().fg(Color::Yellow),
            ));
        } else if search.hits.is_empty() && !search.query.is_empty() {
            spans.push(Span::styled("  no match in the loaded lines", dim));
        } else if state.focus != Focus::Search {
            spans.push(Span::styled("  n/N next/prev · / edit", dim));
        }
        return Line::from(spans);
    }
    let on = |b: bool| if b { "on" } else { "off" };
    let v = &state.transcript.view;
    // Lines are in time order: the window's ends are its least and greatest seq.
    let seqs = state.transcript.lines.iter().map(|l| l.seq);
    let window = match (v.window_end, seqs.clone().min(), seqs.max()) {
        (Some(_), Some(first), Some(last)) => {
            format!("  (lines {first}–{last} of {})", state.transcript.total)
        }
        _ if state.transcript.total > state.transcript.lines.len() as i64 => format!(
            "  (newest {} of {})",
            state.transcript.lines.len(),
            switchboard_types::words::count(state.transcript.total, "line")
        ),
        _ => String::new(),
    };
    let sideways = if !state.transcript.wrap && v.hscroll > 0 {
        format!("  →col {}", v.hscroll + 1)
    } else {
        String::new()
    };
    Line::styled(
        format!(
            "tools:{} times:{} wrap:{} follow:{}{window}{sideways}",
            on(state.transcript.tools),
            on(state.transcript.timestamps),
            on(state.transcript.wrap),
            on(state.transcript.follow),
        ),
        dim,
    )
}

/// The lines of message `index` as drawn (before wrapping or cutting).
/// `width`: the pane's, so a collapsed tool card stays one row.
fn message_lines(state: &State, index: usize, width: u16) -> Vec<Line<'static>> {
    let l = &state.transcript.lines[index];
    let selected =
        state.transcript.view.cursor.is_some() && nav::selected_seq(state) == Some(l.seq);
    let mut out = if l.role == "tool" {
        // The cursor's mark takes a column.
        card_lines(
            state,
            index,
            (width as usize).saturating_sub(usize::from(selected)),
        )
    } else {
        let mut out = text_lines(state, l);
        // A reply that did not (yet) reach its chat says so under it.
        if let Some(mark) = state.deliveries.mark(l, state.now_ms) {
            let style = if mark.starts_with('…') {
                Style::default().add_modifier(Modifier::DIM)
            } else {
                Style::default().fg(Color::Red)
            };
            out.push(Line::from(vec![Span::raw("  "), Span::styled(mark, style)]));
        }
        out
    };
    if selected {
        // The selected message is marked in its first column, visible without colour.
        let mark = Style::default()
            .add_modifier(Modifier::BOLD | Modifier::REVERSED)
            .fg(Color::Cyan);
        for line in out.iter_mut() {
            line.spans
                .insert(0, Span::styled(state.theme.glyphs().select, mark));
        }
    }
    out
}

fn time_span(state: &State, ms: i64) -> Option<Span<'static>> {
    state.transcript.timestamps.then(|| {
        Span::styled(
            format!("{} ", clock(ms)),
            Style::default().add_modifier(Modifier::DIM),
        )
    })
}

/// A message's text with its label, the search hits in it highlighted.
fn text_lines(state: &State, l: &TranscriptLine) -> Vec<Line<'static>> {
    let (label, style) = match l.role {
        "user" => (
            format!("{}: ", l.from),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        "assistant" => ("agent: ".to_string(), Style::default().fg(Color::Green)),
        "result" => (
            format!("← {} ", l.from),
            Style::default().add_modifier(Modifier::DIM),
        ),
        "error" => ("✗ error: ".to_string(), Style::default().fg(Color::Red)),
        _ => ("· ".to_string(), Style::default()),
    };
    let hits: Vec<(usize, usize, bool)> = state
        .transcript
        .view
        .search
        .hits_in(l.seq)
        .map(|(h, cur)| (h.start, h.end, cur))
        .collect();
    let mut out = Vec::new();
    let mut offset = 0usize;
    for (n, segment) in l.text.split('\n').enumerate() {
        let mut spans = Vec::new();
        if n == 0 {
            spans.extend(time_span(state, l.timestamp));
            spans.push(Span::styled(label.clone(), style));
        } else {
            spans.push(Span::raw("  "));
        }
        spans.extend(highlighted(segment, offset, &hits));
        offset += segment.len() + 1;
        out.push(Line::from(spans));
    }
    out
}

/// `segment` (starting `offset` bytes into its message) as spans, hits reversed (the
/// current one bold and yellow too), so they show with NO_COLOR.
fn highlighted(segment: &str, offset: usize, hits: &[(usize, usize, bool)]) -> Vec<Span<'static>> {
    let end = offset + segment.len();
    let mut spans = Vec::new();
    let mut at = 0usize;
    for &(s, e, current) in hits {
        if e <= offset || s >= end {
            continue;
        }
        let (s, e) = (s.max(offset) - offset, e.min(end) - offset);
        if !segment.is_char_boundary(s) || !segment.is_char_boundary(e) || s < at {
            continue;
        }
        if s > at {
            spans.push(Span::raw(segment[at..s].to_string()));
        }
        let style = if current {
            Style::default()
                .add_modifier(Modifier::REVERSED | Modifier::BOLD)
                .fg(Color::Yellow)
        } else {
            Style::default().add_modifier(Modifier::REVERSED)
        };
        spans.push(Span::styled(segment[s..e].to_string(), style));
        at = e;
    }
    if at < segment.len() || spans.is_empty() {
        spans.push(Span::raw(segment[at..].to_string()));
    }
    spans
}

/// A tool line as cards: one line per call (name, status, argument summary); an open card
/// adds its arguments pretty-printed and its result, each at most `CARD_SECTION_ROWS` rows.
fn card_lines(state: &State, index: usize, width: usize) -> Vec<Line<'static>> {
    let l = &state.transcript.lines[index];
    let parsed = tool_cards::parse(&l.text);
    let results = tool_cards::results_of(&state.transcript.lines, index);
    let open = state.transcript.view.expanded.contains(&l.seq);
    let hit = state.transcript.view.search.hits_in(l.seq).next();
    let dim = Style::default().add_modifier(Modifier::DIM);
    let mut out = Vec::new();
    if !parsed.said.is_empty() {
        let mut spans: Vec<Span<'static>> = time_span(state, l.timestamp).into_iter().collect();
        spans.push(Span::styled("agent: ", Style::default().fg(Color::Green)));
        spans.push(Span::raw(parsed.said.replace('\n', " ")));
        out.push(Line::from(spans));
    }
    for (k, call) in parsed.calls.iter().enumerate() {
        let result = results.get(k);
        let status = result
            .map(|r| tool_cards::status_of(&r.text))
            .unwrap_or(Status::Pending);
        let mut spans: Vec<Span<'static>> = time_span(state, l.timestamp).into_iter().collect();
        let mut name_style = Style::default().add_modifier(Modifier::BOLD);
        if let Some((_, current)) = hit {
            name_style = name_style.add_modifier(Modifier::REVERSED);
            if current {
                name_style = name_style.fg(Color::Yellow);
            }
        }
        spans.push(Span::styled(if open { "▾ " } else { "▸ " }, dim));
        spans.push(Span::styled(format!("⚙ {}", call.name), name_style));
        let status_style = match status {
            Status::Ok => Style::default().fg(Color::Green),
            Status::Error => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            Status::Pending => dim,
        };
        spans.push(Span::styled(format!(" {}", status.word()), status_style));
        // The summary gets what is left of the row (cut with `…`), so a closed card is one
        // row at any width; an open card shows the arguments in full below.
        let used: usize = spans.iter().map(|s| s.width()).sum();
        let room = width.saturating_sub(used);
        if room > 3 {
            spans.push(Span::styled(
                super::fit(&format!(" · {}", tool_cards::summary(&call.args)), room),
                dim,
            ));
        }
        out.push(Line::from(spans));
        if open {
            out.push(Line::styled("    arguments:", dim));
            section(&mut out, tool_cards::pretty(&call.args));
            match result {
                Some(r) => {
                    out.push(Line::styled(
                        format!("    result ({}):", status.word()),
                        dim,
                    ));
                    section(&mut out, r.text.lines().map(str::to_string).collect());
                }
                None => out.push(Line::styled("    no result yet", dim)),
            }
        }
    }
    out
}

fn section(out: &mut Vec<Line<'static>>, rows: Vec<String>) {
    let n = rows.len();
    for r in rows.into_iter().take(CARD_SECTION_ROWS) {
        out.push(Line::from(format!("      {r}")));
    }
    if n > CARD_SECTION_ROWS {
        out.push(Line::styled(
            format!(
                "      … {} more {}",
                n - CARD_SECTION_ROWS,
                switchboard_types::words::noun(n - CARD_SECTION_ROWS, "line", "lines")
            ),
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
}

/// Wrap off: `line` from column `from`, at most `width` columns, with `…` where text was
/// cut on either side.
fn cut(line: Line<'static>, from: usize, width: usize) -> Line<'static> {
    if width == 0 {
        return Line::default();
    }
    let total: usize = line.spans.iter().map(|s| s.width()).sum();
    let cut_left = from > 0 && total > 0;
    let cut_right = total > from + width;
    // Columns of text kept between the marks.
    let keep_from = from + usize::from(cut_left);
    let keep_to = from + width - usize::from(cut_right);
    let dim = Style::default().add_modifier(Modifier::DIM);
    let mut spans = Vec::new();
    if cut_left {
        spans.push(Span::styled("…", dim));
    }
    let mut col = 0usize;
    for span in line.spans {
        let mut kept = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if col >= keep_from && col + w <= keep_to {
                kept.push(c);
            } else if col < keep_from && col + w > keep_from && col + w <= keep_to {
                // A wide character split by the left edge: a blank keeps the columns.
                kept.push(' ');
            }
            col += w;
        }
        if !kept.is_empty() {
            spans.push(Span::styled(kept, span.style));
        }
    }
    if cut_right {
        spans.push(Span::styled("…", dim));
    }
    Line::from(spans)
}

/// The replies being streamed into the shown session, as lines for the bottom of the pane:
/// the speaker, the text so far and, while the model writes, a cursor, a spinner (one frame
/// per second and per delta, so it moves only while text streams) and "streaming…".
/// Only the last `room` lines of each can be on screen, so only those are built.
fn provisional_lines(state: &State, room: usize) -> Vec<Line<'static>> {
    let Some(key) = state
        .transcript
        .key
        .as_deref()
        .filter(|k| state.sessions.selected_key() == Some(*k))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for reply in state.transcript.streams.of(key) {
        let mut text_lines: Vec<&str> = reply.text.split('\n').collect();
        let skipped = text_lines.len().saturating_sub(room.max(1));
        text_lines.drain(..skipped);
        let n = text_lines.len();
        for (i, text) in text_lines.into_iter().enumerate() {
            let mut spans = Vec::new();
            if i == 0 && skipped == 0 {
                spans.extend(time_span(state, reply.started));
                spans.push(Span::styled(
                    "agent: ".to_string(),
                    Style::default().fg(Color::Green),
                ));
                if reply.cut {
                    spans.push(Span::styled(
                        "…".to_string(),
                        Style::default().add_modifier(Modifier::DIM),
                    ));
                }
            } else {
                spans.push(Span::raw("  "));
            }
            spans.push(Span::raw(text.to_string()));
            if i + 1 == n && reply.live() {
                let frame =
                    (state.ticks.wrapping_add(reply.deltas) % SPINNER.len() as u64) as usize;
                spans.push(Span::styled(
                    state.theme.glyphs().streaming.to_string(),
                    Style::default().fg(Color::Green),
                ));
                spans.push(Span::styled(
                    format!(" streaming… {}", SPINNER[frame]),
                    Style::default().add_modifier(Modifier::DIM | Modifier::ITALIC),
                ));
            }
            out.push(Line::from(spans));
        }
    }
    out
}
