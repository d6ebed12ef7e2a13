//! The composer: the owner's draft with its cursor (the terminal's own; the box grows with the draft up to
//! `MAX_ROWS` lines, then scrolls to keep the cursor in view), and under it the completion
//! candidates or an inline error.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{border, fit};
use crate::composer::MAX_ROWS;
use crate::state::{Focus, State};
use switchboard_types::text_safety::safe_line;

/// Rows the composer takes in a terminal `height` rows high: its border, the draft's lines
/// (up to `MAX_ROWS`), and one for candidates or an error; never so many that the panes
/// above lose their minimum (header, six pane rows, status and hints keep theirs).
pub fn height(state: &State, height: u16) -> u16 {
    let c = &state.composer;
    let text_rows = (c.lines().len().min(MAX_ROWS as usize) as u16).max(1);
    let extra = u16::from(c.error.is_some() || !c.candidates.is_empty());
    let room = height.saturating_sub(1 + 6 + 1 + 1);
    (text_rows + extra + 2).min(room).max(3)
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let c = &state.composer;
    let target = match (&c.target, state.sessions.selected_key()) {
        // `/new` named it: written to until another session is picked (the status line said
        // whether it is new).
        (Some(t), _) => safe_line(t).into_owned(),
        (None, Some(k)) => safe_line(k).into_owned(),
        (None, None) => "no session".to_string(),
    };
    let lines = c.lines();
    let (row, col) = c.cursor();
    let position = if lines.len() > 1 {
        format!("· line {}/{} ", row + 1, lines.len())
    } else {
        String::new()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Write to {target} (as owner) {position}"))
        .border_style(border(state, Focus::Composer));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let width = inner.width as usize;
    let below = if let Some(err) = &c.error {
        Some(Line::styled(
            fit(&format!("✗ {err}"), width),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ))
    } else if !c.candidates.is_empty() {
        Some(Line::styled(
            fit(&c.candidates.join("  "), width),
            Style::default().add_modifier(Modifier::DIM),
        ))
    } else {
        None
    };
    let text_rows = (inner.height - u16::from(below.is_some() && inner.height > 1)).max(1);
    if let Some(line) = below
        && inner.height > 1
    {
        let at = Rect::new(inner.x, inner.y + text_rows, inner.width, 1);
        frame.render_widget(Paragraph::new(line), at);
    }
    if c.is_empty() && state.focus != Focus::Composer {
        frame.render_widget(
            Paragraph::new(Line::styled(
                fit(
                    "i or Enter to write · /send on|off|inherit · /spawn <task> · /ask <session> <msg> · /help",
                    width,
                ),
                Style::default().add_modifier(Modifier::DIM),
            )),
            Rect::new(inner.x, inner.y, inner.width, 1),
        );
        return;
    }
    // The cursor stays in view: the draft scrolls by lines, and all lines scroll sideways
    // together when the cursor is past the box's right edge.
    let top = row.saturating_sub(text_rows as usize - 1);
    let cursor_x = lines
        .get(row)
        .map(|l| safe_line(&l.chars().take(col).collect::<String>()).width())
        .unwrap_or(0);
    let left = (cursor_x + 1).saturating_sub(width);
    for (i, line) in lines.iter().skip(top).take(text_rows as usize).enumerate() {
        let shown = columns(&safe_line(line), left, width);
        let at = Rect::new(inner.x, inner.y + i as u16, inner.width, 1);
        frame.render_widget(Paragraph::new(Line::from(shown)), at);
    }
    // The terminal's own cursor, so input methods and screen readers find it, unless an
    // overlay covers the box.
    let covered = state.help
        || state.notices_open
        || state.card.is_some()
        || state.rounds.exchange_view.is_some()
        || state.traffic.open;
    if state.focus == Focus::Composer && !covered {
        let x = inner.x + (cursor_x - left) as u16;
        let y = inner.y + (row - top) as u16;
        frame.set_cursor_position((x, y));
    }
}

/// The part of `text` from display column `left`, `width` columns wide (a wide character cut
/// by either edge becomes a space, so columns stay aligned).
fn columns(text: &str, left: usize, width: usize) -> String {
    let mut out = String::new();
    let mut x = 0;
    for ch in text.chars() {
        let w = ch.width().unwrap_or(0);
        if x + w <= left {
            x += w;
            continue;
        }
        if x < left {
            out.push_str(&" ".repeat(x + w - left));
        } else if x + w > left + width {
            out.push_str(&" ".repeat(left + width - x));
            break;
        } else {
            out.push(ch);
        }
        x += w;
        if x >= left + width {
            break;
        }
    }
    out
}
