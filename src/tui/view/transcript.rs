//! The transcript pane: the selected session's newest messages with sender, provenance and
//! time; tool calls hidden unless toggled; an indicator line with every toggle's state.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::border;
use crate::tui::state::{Focus, State};

fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let title = match state.selected_key() {
        Some(k) => format!(" {} ", crate::text_safety::safe_line(k)),
        None => " Transcript ".to_string(),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .border_style(border(state, Focus::Transcript));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    let on = |b: bool| if b { "on" } else { "off" };
    let indicator = format!(
        "tools:{} times:{} wrap:{} follow:{}{}",
        on(state.tools),
        on(state.timestamps),
        on(state.wrap),
        on(state.follow),
        if state.transcript_total > state.transcript.len() as i64 {
            format!(
                "  (newest {} of {} lines)",
                state.transcript.len(),
                state.transcript_total
            )
        } else {
            String::new()
        }
    );
    let mut lines: Vec<Line<'static>> = Vec::new();
    for l in state
        .transcript
        .iter()
        .filter(|l| state.tools || !matches!(l.role, "tool" | "result"))
    {
        let mut head = Vec::new();
        if state.timestamps {
            head.push(Span::styled(
                format!("{} ", clock(l.timestamp)),
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
        let (label, style) = match l.role {
            "user" => (
                format!("{}: ", l.from),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            "assistant" => (
                "agent: ".to_string(),
                Style::default().fg(ratatui::style::Color::Green),
            ),
            "tool" => (
                "→ tool ".to_string(),
                Style::default().add_modifier(Modifier::DIM),
            ),
            "result" => (
                format!("← {} ", l.from),
                Style::default().add_modifier(Modifier::DIM),
            ),
            "error" => (
                "✗ error: ".to_string(),
                Style::default().fg(ratatui::style::Color::Red),
            ),
            _ => ("· ".to_string(), Style::default()),
        };
        head.push(Span::styled(label, style));
        let mut text_lines = l.text.lines();
        head.push(Span::raw(text_lines.next().unwrap_or("").to_string()));
        lines.push(Line::from(head));
        for more in text_lines {
            lines.push(Line::from(format!("  {more}")));
        }
    }
    let base_len = lines.len();
    let provisional = provisional_lines(state, inner.height as usize);
    if lines.is_empty() && provisional.is_empty() {
        lines.push(Line::from(if state.selected_key().is_some() {
            "No messages yet."
        } else {
            "Select a session."
        }));
    }
    let body_h = inner.height as usize - 1;
    let body = Rect::new(inner.x, inner.y, inner.width, inner.height - 1);
    // Only the newest lines can be on screen: build the paragraph from a tail big enough to
    // fill the pane even when every line wraps, then scroll it so its end (minus how far the
    // user scrolled up) sits at the bottom.
    let keep = (body_h + state.transcript_scroll).max(1);
    let start = lines.len().saturating_sub(keep);
    let paragraph = |lines: Vec<Line<'static>>| {
        let para = Paragraph::new(lines);
        if state.wrap {
            para.wrap(Wrap { trim: false })
        } else {
            para
        }
    };
    let mut shown = lines[start..].to_vec();
    // Scrolled up, the view stays on the same rows while a reply grows below it.
    let paused_top = (state.transcript_scroll > 0 && base_len > 0).then(|| {
        paragraph(shown.clone())
            .line_count(body.width)
            .saturating_sub(body_h + state.transcript_scroll)
    });
    shown.extend(provisional);
    let para = paragraph(shown);
    let rows = para.line_count(body.width);
    let top = paused_top.unwrap_or_else(|| rows.saturating_sub(body_h + state.transcript_scroll));
    let para = para.scroll((top.min(u16::MAX as usize) as u16, 0));
    frame.render_widget(para, body);
    let ind = Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1);
    frame.render_widget(
        Paragraph::new(Line::styled(
            indicator,
            Style::default().add_modifier(Modifier::DIM),
        )),
        ind,
    );
}

/// The replies being streamed into the shown session, as lines for the bottom of the pane:
/// the speaker, the text so far and, while the model writes, a cursor and "streaming…".
/// Only the last `room` lines of each can be on screen, so only those are built.
fn provisional_lines(state: &State, room: usize) -> Vec<Line<'static>> {
    let Some(key) = state
        .transcript_key
        .as_deref()
        .filter(|k| state.selected_key() == Some(*k))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for reply in state.streams.of(key) {
        let mut text_lines: Vec<&str> = reply.text.split('\n').collect();
        let skipped = text_lines.len().saturating_sub(room.max(1));
        text_lines.drain(..skipped);
        let n = text_lines.len();
        for (i, text) in text_lines.into_iter().enumerate() {
            let mut spans = Vec::new();
            if i == 0 && skipped == 0 {
                if state.timestamps {
                    spans.push(Span::styled(
                        format!("{} ", clock(reply.started)),
                        Style::default().add_modifier(Modifier::DIM),
                    ));
                }
                spans.push(Span::styled(
                    "agent: ".to_string(),
                    Style::default().fg(ratatui::style::Color::Green),
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
                spans.push(Span::styled(
                    "▍".to_string(),
                    Style::default().fg(ratatui::style::Color::Green),
                ));
                spans.push(Span::styled(
                    " streaming…".to_string(),
                    Style::default().add_modifier(Modifier::DIM | Modifier::ITALIC),
                ));
            }
            out.push(Line::from(spans));
        }
    }
    out
}
