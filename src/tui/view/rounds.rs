//! The rounds pane: agent-to-agent exchanges touching the selected session (or all), round by
//! round, how each ended and what the announce did; then spawned children under their parent.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{border, fit};
use crate::tui::state::{Focus, State, flows_for};

fn loop_label(reason: &str) -> &str {
    match reason {
        "cap" => "cap reached",
        "reply_skip" => "REPLY_SKIP",
        "empty" => "empty reply",
        "self" => "no loop (same session)",
        "disabled" => "ping-pong off",
        "policy" => "blocked by send policy",
        "no_reply" => "no reply",
        "chain" => "not sent: chain limit reached",
        "timeout" => "timed out",
        "error" => "a run failed",
        "aborted" => "aborted by the owner",
        other => other,
    }
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let scope = if state.rounds_all {
        "all"
    } else {
        "this session"
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Rounds ({scope}) "))
        .border_style(border(state, Focus::Rounds));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let selected = state.selected_key();
    let mut lines: Vec<Line> = Vec::new();
    for f in flows_for(state, selected) {
        lines.push(Line::styled(
            fit(
                &format!("{} → {}: {}", f.requester, f.target, f.message),
                width,
            ),
            Style::default().add_modifier(Modifier::BOLD),
        ));
        for r in &f.rounds {
            let text = if r.status == "ok" {
                r.text.replace('\n', " ")
            } else {
                format!("({})", r.status)
            };
            lines.push(Line::from(fit(
                &format!("  {}. {}: {text}", r.round, r.speaker),
                width,
            )));
        }
        if let Some((reason, detail)) = &f.loop_end {
            let detail = if reason == "chain" {
                format!(" ({detail})")
            } else {
                String::new()
            };
            lines.push(Line::styled(
                fit(&format!("  ended: {}{detail}", loop_label(reason)), width),
                Style::default().add_modifier(Modifier::DIM),
            ));
        } else if !f.done {
            lines.push(Line::styled(
                "  …",
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
        if let Some((outcome, detail)) = &f.announce {
            lines.push(Line::styled(
                fit(&format!("  announce: {outcome} ({detail})"), width),
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
    }
    let mut spawns: Vec<_> = state
        .spawns
        .values()
        .filter(|s| state.rounds_all || selected.is_none_or(|k| s.requester == k || s.child == k))
        .collect();
    // Grouped under their parent, each group in spawn order.
    spawns
        .sort_by(|a, b| (a.requester.as_str(), a.started).cmp(&(b.requester.as_str(), b.started)));
    let mut parent: Option<&str> = None;
    for s in spawns {
        if parent != Some(s.requester.as_str()) {
            lines.push(Line::styled(
                fit(&format!("{} spawned:", s.requester), width),
                Style::default().add_modifier(Modifier::BOLD),
            ));
            parent = Some(s.requester.as_str());
        }
        let stats = match (s.runtime_ms, s.tokens) {
            (Some(ms), Some((i, o))) => format!(" {ms} ms, tokens {i}/{o}"),
            _ => String::new(),
        };
        let announce = s
            .announce
            .as_deref()
            .map(|a| format!(", announce {a}"))
            .unwrap_or_default();
        lines.push(Line::from(fit(
            &format!("  └ {} [{}]{stats}{announce}", s.label, s.status),
            width,
        )));
    }
    if let Some(why) = state.link.as_ref().and_then(|l| l.unavailable.as_deref()) {
        lines.clear();
        lines.extend(why.lines().map(|l| Line::from(fit(l, width))));
    } else if lines.is_empty() {
        lines.push(Line::from(if state.rounds_all {
            "No agent-to-agent traffic yet."
        } else {
            "No exchanges or sub-agents for this session (a: show all)."
        }));
    }
    // Newest at the bottom; scrolled views stay where the user put them.
    let h = inner.height as usize;
    let max_scroll = lines.len().saturating_sub(h);
    let from_end = state.rounds_scroll.min(max_scroll);
    let start = max_scroll - from_end;
    frame.render_widget(Paragraph::new(lines[start..].to_vec()), inner);
}
