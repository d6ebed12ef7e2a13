//! Header, status line, hint bar, help overlay, and the too-small notice.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::{MIN_HEIGHT, MIN_WIDTH, fit, pad};
use crate::api::LinkState;
use crate::tui::action::Intent;
use crate::tui::keymap::Keymap;
use crate::tui::state::{Focus, State};

/// How the gateway connection is, for the header: `connected v4 · 3 ms`, `reconnecting in
/// 2s (attempt 3): <reason>`, `refused: <reason>`.
pub fn link_text(link: &LinkState) -> String {
    /// A reason is the server's or the OS's words: kept short so the counts stay in view.
    fn short(reason: &str) -> String {
        let one: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        if one.chars().count() > 60 {
            format!("{}…", one.chars().take(59).collect::<String>())
        } else {
            one
        }
    }
    match link {
        LinkState::Connecting { attempt } if *attempt <= 1 => "connecting".into(),
        LinkState::Connecting { attempt } => format!("connecting (attempt {attempt})"),
        LinkState::Connected {
            protocol,
            rtt_ms,
            resynced,
            ..
        } => {
            let mut t = format!("connected v{protocol}");
            if let Some(ms) = rtt_ms {
                t.push_str(&format!(" · {ms} ms"));
            }
            if *resynced {
                t.push_str(" · resynced");
            }
            t
        }
        LinkState::Reconnecting {
            attempt,
            retry_in_ms,
            reason,
        } => format!(
            "reconnecting in {}s (attempt {attempt}): {}",
            retry_in_ms.div_ceil(1000),
            short(reason)
        ),
        LinkState::Failed { reason } => format!("refused: {}", short(reason)),
    }
}

pub fn header(frame: &mut Frame, area: Rect, state: &State) {
    // A remote console names the gateway and how the link is (read now, never waited on).
    let attached = match &state.link {
        Some(link) => format!("{} · {}", link.target, link_text(&link.state.borrow())),
        None => state.attached.clone(),
    };
    let rounds = if state.link.as_ref().is_some_and(|l| l.unavailable.is_some()) {
        // Counting what the engine does not report would show a reassuring, wrong zero.
        "exchanges n/a".to_string()
    } else {
        format!(
            "{} · {} sub-agents",
            state.exchanges.count_label(),
            state.spawns.len()
        )
    };
    let text = format!(
        " Switchboard · {} · {} sessions · {} running · {rounds}",
        attached,
        state.total_sessions,
        state.running.len(),
    );
    frame.render_widget(
        Paragraph::new(Line::styled(
            pad(&text, area.width as usize),
            Style::default().add_modifier(Modifier::REVERSED),
        )),
        area,
    );
}

pub fn status(frame: &mut Frame, area: Rect, state: &State) {
    let width = area.width as usize;
    let line = match &state.flash {
        Some(f) if f.error => Line::styled(
            fit(&format!(" ✗ {}", f.text), width),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        Some(f) => Line::styled(
            fit(&format!(" {}", f.text), width),
            Style::default().fg(Color::Green),
        ),
        None => Line::from(fit(
            &format!(
                " send policy: {}",
                state
                    .selected_policy
                    .as_deref()
                    .unwrap_or("(no session selected)")
            ),
            width,
        )),
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The hint bar: the most useful keys for the focused pane, from the keymap table.
pub fn hints(frame: &mut Frame, area: Rect, state: &State, keymap: &Keymap) {
    // Help and quit first: they must survive a narrow terminal's truncation.
    let wanted: &[Intent] = match state.focus {
        Focus::Composer | Focus::Filter | Focus::Search => &[],
        Focus::Rounds => &[
            Intent::Help,
            Intent::Quit,
            Intent::Open,
            Intent::Down,
            Intent::ToggleRoundsScope,
            Intent::FocusNext,
        ],
        Focus::Transcript => &[
            Intent::Help,
            Intent::Quit,
            Intent::ToggleTools,
            Intent::ToggleTimestamps,
            Intent::ToggleWrap,
            Intent::ToggleFollow,
            Intent::FocusNext,
        ],
        _ => &[
            Intent::Help,
            Intent::Quit,
            Intent::Filter,
            Intent::Compose,
            Intent::CycleKind,
            Intent::ToggleTools,
            Intent::ToggleRoundsScope,
            Intent::FocusNext,
        ],
    };
    let text = if state.focus == Focus::Search {
        " type a regex (or plain text) · enter keep the search · esc clear it · n/N next/prev after enter"
            .to_string()
    } else if state.focus == Focus::Filter {
        " type to filter by key or name · enter keep the filter · esc clear it".to_string()
    } else if wanted.is_empty() {
        " enter send · alt+enter newline · tab complete · ctrl+c clear · esc leave · ↑↓ history"
            .to_string()
    } else {
        let parts: Vec<String> = wanted
            .iter()
            .filter_map(|i| {
                let keys = keymap.keys_for(*i);
                (!keys.is_empty()).then(|| format!("{} {}", keys, i.description()))
            })
            .collect();
        format!(" {}", parts.join(" · "))
    };
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit(&text, area.width as usize),
            Style::default().add_modifier(Modifier::DIM),
        )),
        area,
    );
}

pub fn help(frame: &mut Frame, area: Rect, keymap: &Keymap) {
    let entries: Vec<String> = Intent::ALL
        .iter()
        .map(|i| format!("{:<10} {}", keymap.keys_for(*i), i.description()))
        .collect();
    let footer = [
        "Composer: /send /spawn /ask /status /abort /agents /new /help",
        "? or esc closes this help.",
    ];
    // One column when it fits, two when the terminal is short (80×24 must show every key).
    let room = area.height.saturating_sub(2 + 2 + footer.len() as u16) as usize;
    let columns = if entries.len() <= room { 1 } else { 2 };
    let per_column = entries.len().div_ceil(columns);
    let col_w = 37usize;
    let mut lines: Vec<Line> = (0..per_column)
        .map(|r| {
            let mut row = String::new();
            for c in 0..columns {
                if let Some(e) = entries.get(c * per_column + r) {
                    row.push_str(&pad(e, col_w));
                }
            }
            Line::from(row.trim_end().to_string())
        })
        .collect();
    lines.push(Line::from(""));
    lines.extend(footer.iter().map(|f| Line::from(*f)));
    let widest_footer = footer.iter().map(|f| f.chars().count()).max().unwrap_or(0);
    let w = (col_w * columns + 4)
        .max(widest_footer + 2)
        .min(area.width.saturating_sub(2) as usize) as u16;
    let h = (lines.len() as u16 + 2).min(area.height);
    let rect = Rect::new((area.width - w) / 2, (area.height - h) / 2, w, h);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" Keys ")),
        rect,
    );
}

pub fn too_small(frame: &mut Frame, area: Rect) {
    let text = format!(
        "Terminal too small: {}×{}. Switchboard needs at least {MIN_WIDTH}×{MIN_HEIGHT}.",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}
