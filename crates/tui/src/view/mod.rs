//! Drawing: the layout and one function per pane, from `State` only (no I/O, no waiting).

mod cards;
mod chrome;
mod composer;
mod drill;
mod exchange;
mod notices;
mod rounds;
mod sessions;
pub mod traffic;
pub(crate) mod transcript;

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};

use super::keymap::Keymap;
use super::state::{Focus, Pane, State};

/// The smallest terminal the layout works in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// The first session row shown in the sessions pane (for mapping clicks to rows).
pub fn sessions_top(state: &State, area: Rect) -> usize {
    sessions::top_for(state, area)
}

/// The sessions pane at a terminal `width` wide has room for the last-message column.
pub fn shows_previews(width: u16) -> bool {
    sessions::shows_preview(
        regions(width.max(MIN_WIDTH), MIN_HEIGHT)
            .sessions
            .width
            .saturating_sub(2) as usize,
    )
}

/// The sessions pane as `state` lays it out (zoomed, it is as wide as the screen) has room
/// for the last-message column.
pub fn shows_previews_for(state: &State) -> bool {
    match state.zoomed() {
        Some(Pane::Sessions) => sessions::shows_preview(state.width.saturating_sub(2) as usize),
        _ => shows_previews(state.width),
    }
}

/// Lines of the sessions pane above its first row (filter box, column headers).
pub fn sessions_rows_above(state: &State, inner_h: usize) -> usize {
    sessions::rows_above(state, inner_h)
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
    /// Background notices, in a line of their own (never over the status line).
    pub notice: Rect,
    pub hints: Rect,
}

/// The layout with a one-line composer (what `regions_for` gives for an empty draft), no
/// pane zoomed.
pub fn regions(width: u16, height: u16) -> Regions {
    layout(width, height, 3, None)
}

/// The layout for `state`: the composer grows with its draft and the panes give it room; a
/// zoomed pane takes the whole body, and the composer's rows too unless it is being written
/// in. Panes not shown get an empty rectangle (nothing is drawn there, no click lands).
pub fn regions_for(state: &State) -> Regions {
    regions_in(state, state.width, state.height)
}

/// [`regions_for`] on a screen of `width` × `height` (what is being drawn on).
pub(crate) fn regions_in(state: &State, width: u16, height: u16) -> Regions {
    let zoom = state.zoomed().map(|p| (p, state.focus == Focus::Composer));
    layout(width, height, composer::height(state, height), zoom)
}

/// `zoom`: the pane over the body, and whether the composer still shows below it.
fn layout(width: u16, height: u16, composer_height: u16, zoom: Option<(Pane, bool)>) -> Regions {
    let composer_height = match zoom {
        Some((_, false)) => 0,
        _ => composer_height,
    };
    let area = Rect::new(0, 0, width, height);
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(6),
            Constraint::Length(composer_height),
            Constraint::Length(1),
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
    let (sessions, transcript, rounds) = match zoom {
        None => (body[0], right[0], right[1]),
        Some((Pane::Sessions, _)) => (rows[1], Rect::default(), Rect::default()),
        Some((Pane::Transcript, _)) => (Rect::default(), rows[1], Rect::default()),
        Some((Pane::Rounds, _)) => (Rect::default(), Rect::default(), rows[1]),
    };
    Regions {
        header: rows[0],
        sessions,
        transcript,
        rounds,
        composer: rows[2],
        status: rows[3],
        notice: rows[4],
        hints: rows[5],
    }
}

/// Draw the whole console.
pub fn draw(frame: &mut Frame, state: &State, keymap: &Keymap) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        chrome::too_small(frame, area);
        return;
    }
    let r = regions_in(state, area.width, area.height);
    chrome::header(frame, r.header, state);
    chrome::status(frame, r.status, state);
    chrome::notice(frame, r.notice, state, keymap);
    if let Some(d) = &state.drill {
        // The drill-down covers the panes (and the traffic view it may come from); the
        // exchange view opens over it.
        drill::draw(frame, traffic::area(area), state, d);
        drill::hints(frame, r.hints, state, keymap);
        if state.rounds.exchange_view.is_some() {
            exchange::draw(frame, state, keymap);
        }
    } else if state.traffic.open {
        // The view covers the panes: they are not drawn at all (its frame cost is its own).
        traffic::draw(frame, traffic::area(area), state);
        traffic::hints(frame, r.hints, keymap);
    } else {
        // A zoomed layout leaves the other panes (and the composer) an empty rectangle.
        if !r.sessions.is_empty() {
            sessions::draw(frame, r.sessions, state);
        }
        if !r.transcript.is_empty() {
            transcript::draw(frame, r.transcript, state);
        }
        if !r.rounds.is_empty() {
            rounds::draw(frame, r.rounds, state);
        }
        if !r.composer.is_empty() {
            composer::draw(frame, r.composer, state);
        }
        chrome::hints(frame, r.hints, state, keymap);
        if state.rounds.exchange_view.is_some() {
            exchange::draw(frame, state, keymap);
        }
        if let Some(card) = &state.card {
            cards::draw(frame, area, state, card);
        }
    }
    if state.notices_open {
        notices::draw(frame, area, state);
    }
    if let Some(line) = &state.command {
        chrome::command_line(frame, &r, line);
    }
    if state.help {
        chrome::help(frame, area, state, keymap);
    }
    state.theme.adapt(frame.buffer_mut());
}

pub use chrome::help_max_scroll;

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

/// Truncate to `width` columns (display width, so CJK and emoji keep columns aligned). One
/// line of text, escaped on the way (`text_safety::safe_line`): most of what the panes show
/// (names, channels, rounds, announces, flashes) passes here, so nothing a terminal would act
/// on, and no BiDi or invisible character, reaches a cell; text escaped earlier is unchanged.
pub(crate) fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let safe = switchboard_types::text_safety::safe_line(text);
    let text = crate::cells::stable(&safe);
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

/// The end of `text` in `width` columns, `…` in front when cut: the end of a key is what
/// tells it from its neighbours (`…telegram:direct:1234`). Escaped like [`fit`].
pub(crate) fn keep_end(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let text = switchboard_types::text_safety::safe_line(text);
    if text.width() <= width || width == 0 {
        return fit(&text, width);
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 1;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        used += w;
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// Shorten to `width` columns by cutting the middle, so both ends stay: a session key's end
/// is the part that tells it from its neighbours (`agent:main:telegram:direct:1234` at 20
/// columns is `agent:…direct:1234`). Whole `:`-separated parts are kept where that costs
/// little (`/`-separated parts in a path); widths are display widths (CJK takes two columns). Escaped like [`fit`].
pub(crate) fn middle_ellipsis(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let safe = switchboard_types::text_safety::safe_line(text);
    let text = crate::cells::stable(&safe);
    if text.width() <= width {
        return text.into_owned();
    }
    if width <= 1 {
        return "…".repeat(width);
    }
    let budget = width - 1;
    let w = |c: char| c.width().unwrap_or(0);
    // Parts are `:`-separated in a key, `/`-separated in a path.
    let sep = if text.contains(':') { ':' } else { '/' };
    // The head: the first part (`agent:`) when it takes at most a third.
    let head: String = match text.find(sep) {
        Some(i) if text[..=i].width() * 3 <= budget => text[..=i].to_string(),
        _ => String::new(),
    };
    let room = budget - head.width();
    // The tail: as much of the end as fits…
    let chars: Vec<char> = text.chars().collect();
    let mut start = chars.len();
    let mut used = 0;
    while start > 0 && used + w(chars[start - 1]) <= room {
        start -= 1;
        used += w(chars[start]);
    }
    // …starting at a part's beginning when that drops at most a third of it, and never on a
    // combining mark (it belongs to the character cut off).
    let tail: String = chars[start..].iter().collect();
    let tail = match tail.find(sep) {
        Some(i) if start > 0 && chars[start - 1] != sep && tail[..=i].width() * 3 <= room => {
            tail[i + 1..].to_string()
        }
        _ => tail,
    };
    let tail = tail.trim_start_matches(|c: char| w(c) == 0);
    format!("{head}…{tail}")
}

/// Pad to exactly `width` columns.
pub(crate) fn pad(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let t = fit(text, width);
    let w = t.width();
    format!("{t}{}", " ".repeat(width.saturating_sub(w)))
}

#[cfg(test)]
mod tests {
    use super::middle_ellipsis;
    use unicode_width::UnicodeWidthStr;

    #[test]
    fn middle_ellipsis_keeps_both_ends_within_the_width() {
        let key = "agent:main:telegram:direct:1234";
        assert_eq!(middle_ellipsis(key, 40), key);
        assert_eq!(middle_ellipsis(key, 20), "agent:…direct:1234");
        assert_eq!(middle_ellipsis(key, 9), "…ect:1234");
        assert_eq!(middle_ellipsis(key, 1), "…");
        assert_eq!(middle_ellipsis(key, 0), "");
        // CJK takes two columns each: the result never passes the width.
        let cjk = "agent:support:feishu:group:研究チーム研究チーム";
        for w in 1..40 {
            let cut = middle_ellipsis(cjk, w);
            assert!(cut.width() <= w, "{w}: {cut:?}");
        }
        assert!(middle_ellipsis(cjk, 16).ends_with("チーム"));
        // Text a terminal would act on is escaped on the way.
        assert!(!middle_ellipsis("agent:main:\u{1b}[2J:x", 12).contains('\u{1b}'));
    }
}
