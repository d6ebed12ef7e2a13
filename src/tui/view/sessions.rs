//! The sessions pane: a window onto the newest sessions, one row each with kind, name,
//! channel, activity, effective policy (`*` = this session's override), running and unread.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{ago, border, pad};
use crate::tui::state::{Focus, State};

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let mut title = format!(
        " Sessions {}/{} ",
        state.session_count(),
        state.total_sessions
    );
    if let Some(k) = state.kind_filter {
        title.push_str(&format!("[{}] ", k.as_str()));
    }
    if let Some(m) = state.active_within {
        title.push_str(&if m >= 60 {
            format!("[<{}h] ", m / 60)
        } else {
            format!("[<{m}m] ")
        });
    }
    if state.show_archived {
        title.push_str("[+archived] ");
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .border_style(border(state, Focus::Sessions));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 {
        return;
    }
    let width = inner.width as usize;
    let mut lines: Vec<Line> = Vec::new();
    // The filter box takes the first line while it is in use.
    let filter_active = state.focus == Focus::Filter || !state.filter.is_empty();
    if filter_active {
        let cursor = if state.focus == Focus::Filter {
            "▏"
        } else {
            ""
        };
        lines.push(Line::from(vec![
            Span::styled("/", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "{}{cursor}",
                crate::text_safety::safe_line(&state.filter)
            )),
        ]));
    }
    let rows_room = inner.height as usize - lines.len();
    if state.sessions.is_empty() {
        let msg = if state.filter.is_empty()
            && state.kind_filter.is_none()
            && state.active_within.is_none()
        {
            "No sessions yet. They appear as messages arrive."
        } else {
            "No session matches the filter (Esc clears it)."
        };
        lines.push(Line::from(msg));
    }
    let top = top_row(state, rows_room);
    // Columns give way as the pane narrows: channel first, then unread counts; the name
    // takes whatever is left.
    let show_channel = width >= 48;
    let show_unread = width >= 30;
    let fixed = 1 + 6 + 5 + 7 + if show_channel { 9 } else { 0 } + if show_unread { 4 } else { 0 };
    let name_w = width.saturating_sub(fixed).max(6);
    let first = top.saturating_sub(state.sessions_offset);
    for (j, row) in state
        .sessions
        .iter()
        .enumerate()
        .skip(first)
        .take(rows_room)
    {
        let i = state.sessions_offset + j;
        let running = if state.streams.streaming_in(&row.key) {
            "▍"
        } else if state.running.contains(&row.key) {
            "●"
        } else {
            " "
        };
        let unread = state
            .unread
            .get(&row.key)
            .filter(|n| **n > 0)
            .map(|n| {
                if *n > 999 {
                    "999+".to_string()
                } else {
                    format!("{n:>3}")
                }
            })
            .unwrap_or_else(|| "   ".into());
        let policy = format!(
            "{}{}",
            row.policy,
            if row.policy_override { "*" } else { " " }
        );
        let name = if row.archived {
            format!("[a] {}", row.name)
        } else {
            row.name.clone()
        };
        let mut text = format!(
            "{running}{} {} ",
            pad(row.kind.as_str(), 5),
            pad(&name, name_w)
        );
        if show_channel {
            text.push_str(&pad(&row.channel, 8));
            text.push(' ');
        }
        text.push_str(&format!(
            "{:>4} {}",
            ago(state.now_ms, row.updated_at),
            pad(&policy, 6)
        ));
        if show_unread {
            text.push(' ');
            text.push_str(&unread);
        }
        let mut style = Style::default();
        if row.policy == "deny" {
            style = style.add_modifier(Modifier::DIM);
        }
        if i == state.selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        lines.push(Line::styled(pad(&text, width), style));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The first session (position in the whole order) shown in a pane with `rows_room` rows:
/// the selection stays in view, with the newest at the top while it fits.
fn top_row(state: &State, rows_room: usize) -> usize {
    if rows_room == 0 || state.selected < rows_room {
        0
    } else {
        state.selected + 1 - rows_room
    }
}

/// The first session shown in the sessions pane at `area` (for mouse clicks).
pub fn top_for(state: &State, area: Rect) -> usize {
    let inner_h = area.height.saturating_sub(2) as usize;
    let filter_line = usize::from(state.focus == Focus::Filter || !state.filter.is_empty());
    top_row(state, inner_h.saturating_sub(filter_line))
}
