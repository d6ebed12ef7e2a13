//! The composer: what the owner is writing to the selected session, or an inline error.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{border, fit};
use crate::tui::state::{Focus, State};

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let target = crate::text_safety::safe_line(state.selected_key().unwrap_or("no session"));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Write to {target} (as owner) "))
        .border_style(border(state, Focus::Composer));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let c = &state.composer;
    let line = if let Some(err) = &c.error {
        Line::styled(
            fit(&format!("✗ {err}"), width),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        )
    } else if c.text.is_empty() && state.focus != Focus::Composer {
        Line::styled(
            fit(
                "i or Enter to write · /send on|off|inherit · /spawn <task> · /ask <session> <msg> · /help",
                width,
            ),
            Style::default().add_modifier(Modifier::DIM),
        )
    } else {
        // Multi-line text shows its last line, with a count of the others.
        let lines: Vec<&str> = c.text.split('\n').collect();
        let more = if lines.len() > 1 {
            format!("[+{} lines] ", lines.len() - 1)
        } else {
            String::new()
        };
        let last = lines.last().copied().unwrap_or("");
        let cursor = if state.focus == Focus::Composer {
            "▏"
        } else {
            ""
        };
        // Keep the end (where typing happens) in view.
        let text = format!("{more}{}{cursor}", crate::text_safety::safe_line(last));
        let chars: Vec<char> = text.chars().collect();
        let shown: String = chars[chars.len().saturating_sub(width)..].iter().collect();
        Line::from(shown)
    };
    frame.render_widget(Paragraph::new(line), inner);
}
