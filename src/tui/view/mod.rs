//! Drawing: the layout and one function per pane, from `State` only (no I/O, no waiting).

mod cards;
mod chrome;
mod composer;
mod exchange;
mod rounds;
mod sessions;
pub mod traffic;
pub(crate) mod transcript;

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};

use super::keymap::Keymap;
use super::state::{Focus, State};

/// The smallest terminal the layout works in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// The first session row shown in the sessions pane (for mapping clicks to rows).
pub fn sessions_top(state: &State, area: Rect) -> usize {
    sessions::top_for(state, area)
}

/// Where each pane goes for a terminal of `width` × `height`.
#[derive(Debug, Clone, Copy)]
pub struct Regions {
    pub header: Rect,
    pub sessions: Rect,
    pub transcript: Rect,
    pub rounds: Rect,
    pub composer: Rect,
    pub status: Rect,
    pub hints: Rect,
}

/// The layout with a one-line composer (what `regions_for` gives for an empty draft).
pub fn regions(width: u16, height: u16) -> Regions {
    layout(width, height, 3)
}

/// The layout for `state`: the composer grows with its draft and the panes give it room.
pub fn regions_for(state: &State) -> Regions {
    layout(
        state.width,
        state.height,
        composer::height(state, state.height),
    )
}

fn layout(width: u16, height: u16, composer_height: u16) -> Regions {
    let area = Rect::new(0, 0, width, height);
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(6),
            Constraint::Length(composer_height),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .split(area);
    let body = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(42), Constraint::Percentage(58)])
        .split(rows[1]);
    let right = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(62), Constraint::Percentage(38)])
        .split(body[1]);
    Regions {
        header: rows[0],
        sessions: body[0],
        transcript: right[0],
        rounds: right[1],
        composer: rows[2],
        status: rows[3],
        hints: rows[4],
    }
}

/// Draw the whole console.
pub fn draw(frame: &mut Frame, state: &State, keymap: &Keymap) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        chrome::too_small(frame, area);
        return;
    }
    let r = layout(
        area.width,
        area.height,
        composer::height(state, area.height),
    );
    chrome::header(frame, r.header, state);
    chrome::status(frame, r.status, state);
    if state.traffic.open {
        // The view covers the panes: they are not drawn at all (its frame cost is its own).
        traffic::draw(frame, traffic::area(area), state);
        traffic::hints(frame, r.hints);
    } else {
        sessions::draw(frame, r.sessions, state);
        transcript::draw(frame, r.transcript, state);
        rounds::draw(frame, r.rounds, state);
        composer::draw(frame, r.composer, state);
        chrome::hints(frame, r.hints, state, keymap);
        if state.exchange_view.is_some() {
            exchange::draw(frame, state);
        }
        if let Some(card) = &state.card {
            cards::draw(frame, area, state, card);
        }
    }
    if state.help {
        chrome::help(frame, area, keymap);
    }
}

/// How far the exchange view can scroll (its last screenful), for `update`.
pub fn exchange_max_scroll(state: &State) -> usize {
    exchange::max_scroll(state)
}

/// A pane's border style: the focused pane stands out in colour and in weight, so focus
/// stays visible with NO_COLOR too.
fn border(state: &State, pane: Focus) -> Style {
    if state.focus == pane {
        Style::default()
            .add_modifier(Modifier::BOLD)
            .fg(ratatui::style::Color::Cyan)
    } else {
        Style::default()
    }
}

/// `now`, `5m`, `3h`, `2d` ago. Minute granularity on purpose: a second counter would
/// redraw an idle console every second (an idle console writes nothing).
pub(crate) fn ago(now: i64, then: i64) -> String {
    let s = ((now - then).max(0) / 1000) as u64;
    match s {
        0..60 => "now".to_string(),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Truncate to `width` columns (display width, so CJK and emoji keep columns aligned). One
/// line of text, escaped on the way (`text_safety::safe_line`): most of what the panes show
/// (names, channels, rounds, announces, flashes) passes here, so nothing a terminal would act
/// on, and no BiDi or invisible character, reaches a cell; text escaped earlier is unchanged.
pub(crate) fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let text = crate::text_safety::safe_line(text);
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            if width > 0 && used < width {
                out.push('…');
            } else if width > 0 {
                out.pop();
                out.push('…');
            }
            return out;
        }
        used += w;
        out.push(c);
    }
    out
}

/// Pad to exactly `width` columns.
pub(crate) fn pad(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let t = fit(text, width);
    let w = t.width();
    format!("{t}{}", " ".repeat(width.saturating_sub(w)))
}
