//! The notices log overlay (`M`): the last notices with their times, newest at the bottom.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::fit;
use crate::state::State;

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let w = area.width.saturating_sub(4).max(1);
    let h = area.height.saturating_sub(2).max(3);
    let rect = Rect::new((area.width - w) / 2, (area.height - h) / 2, w, h);
    let inner_w = w.saturating_sub(2) as usize;
    let room = h.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = Vec::new();
    if state.notices.is_empty() {
        lines.push(Line::from(" No notices yet."));
    }
    let skip = state.notices.len().saturating_sub(room);
    for n in state.notices.iter().skip(skip) {
        let time = chrono::DateTime::from_timestamp_millis(n.at_ms)
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%H:%M:%S")
                    .to_string()
            })
            .unwrap_or_else(|| "--:--:--".into());
        let who = if n.owner { " " } else { "·" };
        let text = fit(&format!("{time} {who} {}", n.text), inner_w);
        lines.push(if n.error {
            Line::styled(text, Style::default().fg(Color::Red))
        } else if n.owner {
            Line::from(text)
        } else {
            Line::styled(text, Style::default().add_modifier(Modifier::DIM))
        });
    }
    let title = format!(
        " Notices ({} of the last {}) · M or esc closes ",
        state.notices.len(),
        crate::status::NOTICES_MAX
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(fit(&title, inner_w)),
        ),
        rect,
    );
}
