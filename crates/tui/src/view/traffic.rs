//! The traffic view: pairs of sessions (or agents) by messages in the last 5 minutes, with
//! 1/5/60-minute counts, exchanges, a per-minute sparkline, likely loops and stopped pairs
//! marked in words as well as colour, the stop confirmation and the undo hint.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use unicode_width::UnicodeWidthStr;

use super::{fit, pad};
use crate::action::Intent;
use crate::keymap::Keymap;
use crate::state::State;
use crate::traffic::{MINUTES, Pair, Seed, Traffic};

/// The sparkline's glyphs, from nothing to the row's busiest minute (one place, so an ASCII
/// set can replace it).
pub const SPARK: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Columns of the mark, and of each count.
const MARK: usize = 8;
const NUMBERS: [(&str, usize); 4] = [("1m", 5), ("5m", 5), ("60m", 6), ("exch", 6)];

/// Where the view goes: everything between the header and the status line.
pub fn area(full: Rect) -> Rect {
    Rect::new(
        full.x,
        full.y + 1,
        full.width,
        full.height.saturating_sub(3),
    )
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let t = &state.traffic;
    let table = t.table();
    let scope = if t.by_agent { "by agent" } else { "by session" };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(
            " Traffic · {scope} · {} · last hour ",
            switchboard_types::words::count(table.pairs.len(), "pair")
        ))
        .border_style(
            Style::default()
                .add_modifier(Modifier::BOLD)
                .fg(Color::Cyan),
        );
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let (pair_w, spark_w) = columns(width);

    let mut bottom: Vec<Line> = Vec::new();
    if let Some(info) = info(t) {
        bottom.push(Line::styled(
            fit(&info, width),
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    // The prompt and the note wrap (up to three lines): at 60 columns neither the keys to
    // answer with nor the undo hint may be cut off.
    if let Some(plan) = &t.confirm {
        let style = Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::REVERSED | Modifier::BOLD);
        for l in wrap(&plan.prompt(), width, 3) {
            bottom.push(Line::styled(pad(&l, width), style));
        }
    } else if let Some(note) = &t.note {
        let style = Style::default().add_modifier(Modifier::BOLD);
        for l in wrap(note, width, 3) {
            bottom.push(Line::styled(l, style));
        }
    }

    let mut lines: Vec<Line> = Vec::new();
    let mut head = format!("{}{}", pad("mark", MARK), pad("requester → target", pair_w));
    for (name, w) in NUMBERS {
        head.push_str(&format!("{name:>w$}"));
    }
    if spark_w > 0 {
        head.push_str(&format!(
            " {}",
            fit(&format!("messages/min, last {spark_w} min"), spark_w)
        ));
    }
    lines.push(Line::styled(
        fit(&head, width),
        Style::default().add_modifier(Modifier::UNDERLINED),
    ));
    let rows = (inner.height as usize)
        .saturating_sub(1 + bottom.len())
        .max(1);
    if table.order.is_empty() {
        lines.push(Line::from(fit(
            " no agent-to-agent traffic in the last hour",
            width,
        )));
    }
    let top = t.cursor.saturating_sub(rows - 1);
    for (n, &i) in table.order.iter().enumerate().skip(top).take(rows) {
        let p = &table.pairs[i];
        let (mark, style) = mark(t, p);
        let mut text = format!(
            "{}{}",
            pad(mark, MARK),
            pad(&state.names.pair(&p.requester, &p.target, pair_w), pair_w)
        );
        let numbers = [
            p.recent(1, t.now_ms),
            p.recent(5, t.now_ms),
            p.hour.messages,
            p.hour.exchanges,
        ];
        for ((_, w), v) in NUMBERS.iter().zip(numbers) {
            text.push_str(&format!("{v:>w$}"));
        }
        if spark_w > 0 {
            text.push(' ');
            text.push_str(&spark(p, t.now, spark_w));
        }
        let style = if n == t.cursor {
            style.add_modifier(Modifier::REVERSED)
        } else {
            style
        };
        lines.push(Line::styled(pad(&text, width), style));
    }
    let body_h = inner.height.saturating_sub(bottom.len() as u16);
    frame.render_widget(
        Paragraph::new(lines),
        Rect::new(inner.x, inner.y, inner.width, body_h),
    );
    frame.render_widget(
        Paragraph::new(bottom),
        Rect::new(
            inner.x,
            inner.y + body_h,
            inner.width,
            inner.height - body_h,
        ),
    );
}

/// The view's keys, drawn in the hint bar while it is open.
pub fn hints(frame: &mut Frame, area: Rect, keymap: &Keymap) {
    let line = keymap.hint_line(&[
        // Help early: a narrow screen cuts the end of the line.
        (&[Intent::Close], "close"),
        (&[Intent::Help], "help"),
        (&[Intent::Down, Intent::Up], "move"),
        (&[Intent::Open], "open"),
        (&[Intent::StopPair], "stop"),
        (&[Intent::UndoStop], "undo"),
        (&[Intent::ToggleRoundsScope], "agents/sessions"),
    ]);
    frame.render_widget(
        Paragraph::new(Line::from(pad(&format!(" {line}"), area.width as usize))),
        area,
    );
}

/// `text` in lines of at most `width` columns, broken at spaces, at most `max` lines (the
/// last one cut with `…` if more is left).
fn wrap(text: &str, width: usize, max: usize) -> Vec<String> {
    let text = switchboard_types::text_safety::safe_line(text);
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if candidate.width() <= width || cur.is_empty() {
            cur = candidate;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        }
    }
    lines.push(cur);
    if lines.len() > max {
        let rest = lines.split_off(max - 1).join(" ");
        lines.push(rest);
    }
    lines.into_iter().map(|l| fit(&l, width)).collect()
}

/// The pair column's and the sparkline's widths for `width` columns.
fn columns(width: usize) -> (usize, usize) {
    let numbers: usize = NUMBERS.iter().map(|(_, w)| w).sum();
    let rest = width.saturating_sub(MARK + numbers);
    let pair = (rest * 60 / 100).clamp(20, 60).min(rest);
    let spark = rest.saturating_sub(pair + 1).min(MINUTES);
    if spark < 8 { (rest, 0) } else { (pair, spark) }
}

/// The marker word and the row's style: a stopped pair, a likely loop (cap or chain), or
/// refused sends; NO_COLOR keeps the word.
fn mark(t: &Traffic, p: &Pair) -> (&'static str, Style) {
    if t.is_stopped(p) {
        ("STOPPED", Style::default().fg(Color::Yellow))
    } else if p.hour.capped > 0 {
        (
            "LOOP",
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        )
    } else if p.hour.chain > 0 {
        (
            "CHAIN",
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        )
    } else if p.hour.refused > 0 {
        ("refused", Style::default().fg(Color::Magenta))
    } else {
        ("", Style::default())
    }
}

/// The last `width` minutes of messages, one glyph each, scaled to the row's busiest minute.
fn spark(p: &Pair, now: i64, width: usize) -> String {
    let values: Vec<u32> = p.per_minute(now).collect();
    let shown = &values[values.len().saturating_sub(width)..];
    let max = shown.iter().copied().max().unwrap_or(0).max(1);
    shown
        .iter()
        .map(|&v| {
            let level = if v == 0 {
                0
            } else {
                (v as usize * (SPARK.len() - 1)).div_ceil(max as usize)
            };
            SPARK[level.min(SPARK.len() - 1)]
        })
        .collect()
}

/// What the owner should know about the numbers themselves.
fn info(t: &Traffic) -> Option<String> {
    let mut parts = Vec::new();
    match &t.seed {
        Seed::Unavailable(e) => parts.push(format!(
            "history unavailable ({e}): counting since the console started"
        )),
        Seed::Asked(_) | Seed::Wanted => parts.push("loading the last hour…".to_string()),
        Seed::Done => {}
    }
    let dropped = t.table().dropped;
    if dropped > 0 {
        parts.push(format!(
            "only the {} busiest pairs kept: {dropped} quieter ones dropped",
            crate::traffic::MAX_PAIRS
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}
