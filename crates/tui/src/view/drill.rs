//! The drill-down list over the body (a pair's or a session's exchanges, newest first, two
//! lines each as the rounds pane draws them), its key line, and the header's breadcrumb.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{fit, middle_ellipsis, pad};
use crate::action::Intent;
use crate::drill::Drill;
use crate::exchanges::Scope;
use crate::keymap::Keymap;
use crate::state::State;

/// Between the breadcrumb's levels.
const SEP: &str = " › ";

pub fn draw(frame: &mut Frame, area: Rect, state: &State, d: &Drill) {
    let x = &d.list;
    let what = match &x.scope {
        Scope::Pair(p) => state.names.pair(&p.requester, &p.target, 60),
        Scope::Session(k) => state.names.shown(k, 40),
        Scope::All | Scope::Nothing => String::new(),
    };
    let count = if x.loaded {
        format!(" · {}", x.count_label())
    } else {
        String::new()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(fit(
            &format!(" Exchanges · {what}{count} "),
            area.width.saturating_sub(2) as usize,
        ))
        .border_style(
            Style::default()
                .add_modifier(Modifier::BOLD)
                .fg(Color::Cyan),
        );
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    let (width, height) = (inner.width as usize, inner.height as usize);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(e) = &x.error {
        lines.push(Line::from(fit(e, width)));
    } else if x.entries.is_empty() {
        let text = if !x.loaded || x.more {
            "loading exchanges…"
        } else {
            match &x.scope {
                Scope::Pair(_) => {
                    "No exchanges between these two (the record keeps what the engine logged)."
                }
                _ => "No agent-to-agent exchanges for this session.",
            }
        };
        lines.push(Line::styled(
            fit(text, width),
            Style::default().add_modifier(Modifier::DIM),
        ));
    } else {
        // Two lines an entry, scrolled as a unit so the cursor's entry is always shown.
        let fits = (height / 2).max(1);
        let top = (x.cursor + 1).saturating_sub(fits);
        for (i, e) in x.entries.iter().enumerate().skip(top).take(fits) {
            let mut head = Style::default().add_modifier(Modifier::BOLD);
            let mut rest = Style::default().add_modifier(Modifier::DIM);
            if i == x.cursor {
                head = head.add_modifier(Modifier::REVERSED);
                rest = rest.add_modifier(Modifier::REVERSED);
            }
            lines.push(Line::styled(
                pad(&super::rounds::header(e, &state.names, width), width),
                head,
            ));
            lines.push(Line::styled(pad(&super::rounds::second(e), width), rest));
        }
        if x.more && top + fits >= x.entries.len() && lines.len() < height {
            lines.push(Line::styled(
                "  loading older exchanges…",
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The list's keys in the hint bar, or the exchange view's over it.
pub fn hints(frame: &mut Frame, area: Rect, state: &State, keymap: &Keymap) {
    let line = if state.rounds.exchange_view.is_some() {
        keymap.hint_line(&[
            (&[Intent::Close], "back"),
            (&[Intent::Down, Intent::Up], "scroll"),
            (&[Intent::Help], "help"),
        ])
    } else {
        keymap.hint_line(&[
            (&[Intent::Close], "back"),
            (&[Intent::Down, Intent::Up], "move"),
            (&[Intent::Open], "open"),
            (&[Intent::Help], "help"),
        ])
    };
    frame.render_widget(
        Paragraph::new(Line::from(pad(&format!(" {line}"), area.width as usize))),
        area,
    );
}

/// The header while drilled down: where the owner is, `Switchboard · Traffic › main → ops ›
/// 01a2b3c4…`. When it is too long the middle levels give way, cut in the middle, so the
/// first level and the exchange stay.
pub fn header(frame: &mut Frame, area: Rect, state: &State, d: &Drill) {
    use unicode_width::UnicodeWidthStr;
    let width = area.width as usize;
    let lead = " Switchboard · ";
    let mut crumbs = d.breadcrumb(&state.names, state.rounds.exchange_view.as_ref());
    let fixed: usize = lead.width()
        + crumbs.first().map_or(0, |c| c.width())
        + crumbs.iter().skip(2).map(|c| c.width()).sum::<usize>()
        + SEP.width() * crumbs.len().saturating_sub(1);
    if let Some(middle) = crumbs.get_mut(1) {
        let room = width.saturating_sub(fixed).max(1);
        *middle = middle_ellipsis(middle, room);
    }
    let text = format!("{lead}{}", crumbs.join(SEP));
    frame.render_widget(
        Paragraph::new(Line::styled(
            pad(&text, width),
            Style::default().add_modifier(Modifier::REVERSED),
        )),
        area,
    );
}
