//! The overlays slash commands open: the `/status` card and the `/agents` picker, centred
//! and sized to fit down to the 60×16 minimum.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{fit, pad};
use crate::cards::Card;
use crate::state::State;

pub fn draw(frame: &mut Frame, area: Rect, state: &State, card: &Card) {
    let (title, lines, footer) = match card {
        Card::Status { key, rows } => {
            let lines = match rows {
                None => vec![Line::from(" loading…")],
                Some(rows) => {
                    let label_w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
                    rows.iter()
                        .map(|(l, v)| Line::from(format!(" {} {v}", pad(l, label_w))))
                        .collect()
                }
            };
            (format!(" Status · {key} "), lines, " esc closes")
        }
        Card::Agents { selected } => (
            " Agents ".to_string(),
            agent_lines(state, *selected),
            " ↑↓ choose · enter /spawn --agent <id> · esc closes",
        ),
    };
    let w = area.width.saturating_sub(4).min(90);
    let h = (lines.len() as u16 + 4).min(area.height.saturating_sub(2));
    let rect = Rect::new((area.width - w) / 2, (area.height - h) / 2, w, h);
    let inner_w = w.saturating_sub(2) as usize;
    let inner_h = h.saturating_sub(2) as usize;
    // The selected agent stays in view when the list is longer than the box.
    let room = inner_h.saturating_sub(2);
    let skip = match card {
        Card::Agents { selected } => (selected + 1).saturating_sub(room),
        Card::Status { .. } => 0,
    };
    let mut shown: Vec<Line> = lines
        .into_iter()
        .skip(skip)
        .take(room)
        .map(|l| {
            let style = l.style;
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            Line::styled(fit(&text, inner_w), style)
        })
        .collect();
    shown.push(Line::from(""));
    shown.push(Line::styled(
        fit(footer, inner_w),
        Style::default().add_modifier(Modifier::DIM),
    ));
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(shown).block(
            Block::default()
                .borders(Borders::ALL)
                .title(fit(&title, inner_w)),
        ),
        rect,
    );
}

/// One line per agent: id, model, the default marker, and what it may spawn.
fn agent_lines(state: &State, selected: usize) -> Vec<Line<'static>> {
    let Some(agents) = &state.agents else {
        return vec![Line::from(" loading…")];
    };
    if agents.is_empty() {
        return vec![Line::from(
            " no agents configured (or the connection lists none)",
        )];
    }
    let id_w = agents.iter().map(|a| a.id.len()).max().unwrap_or(0).min(20);
    let model_w = agents
        .iter()
        .map(|a| a.model.len())
        .max()
        .unwrap_or(0)
        .min(24);
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let spawns = match a.may_spawn.as_slice() {
                [] => "itself".to_string(),
                [any] if any == "*" => "any agent".to_string(),
                list => format!("itself, {}", list.join(", ")),
            };
            let text = format!(
                "{}{} {} {} spawns: {spawns}",
                if i == selected { "›" } else { " " },
                pad(&a.id, id_w),
                pad(&a.model, model_w),
                if a.is_default { "default" } else { "       " },
            );
            if i == selected {
                Line::styled(text, Style::default().add_modifier(Modifier::REVERSED))
            } else {
                Line::from(text)
            }
        })
        .collect()
}
