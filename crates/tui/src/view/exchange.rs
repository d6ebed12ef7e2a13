//! The exchange view (Enter on an exchange in the rounds pane): over the body of the screen,
//! the message, every turn in full (speaker, time, duration, tokens, status), how the
//! exchange ended and why, the announce and its delivery, and the keys to jump to either
//! session. Lines are wrapped here, so scrolling counts what is drawn.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{
    fit,
    rounds::{announce_label, loop_label},
};
use crate::action::Intent;
use crate::exchanges::ExchangeView;
use crate::keymap::Keymap;
use crate::state::State;
use switchboard_types::api::{
    ExchangeKind, ExchangeStatus, ExchangeSummary, OutboxStatus, announce_line,
};

/// The keys the view answers, shown in it: its numbered sessions are reached by the first
/// two panes' keys unless a user file binds the jumps themselves.
fn keys(keymap: &Keymap) -> String {
    let jump = |own: Intent, pane: Intent| {
        if keymap.keys_list(own).is_empty() {
            [pane]
        } else {
            [own]
        }
    };
    keymap.hint_line(&[
        (
            &jump(Intent::JumpRequester, Intent::FocusSessions),
            "requester",
        ),
        (&jump(Intent::JumpTarget, Intent::FocusTranscript), "target"),
        (&[Intent::Down, Intent::Up], "scroll"),
        (&[Intent::Close], "close"),
    ])
}

fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

/// `850 ms`, `1.2 s`, `2m 03s`.
pub(crate) fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

/// Greedy word wrap to `width` columns (a word longer than a line is cut), each line
/// prefixed by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    use unicode_width::UnicodeWidthChar;
    let room = width.saturating_sub(indent.chars().count()).max(1);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut used = 0;
        for word in para.split(' ') {
            let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
            if used > 0 && used + 1 + w > room {
                out.push(format!("{indent}{line}"));
                line.clear();
                used = 0;
            }
            if used > 0 {
                line.push(' ');
                used += 1;
            }
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if used + cw > room && used > 0 {
                    out.push(format!("{indent}{line}"));
                    line.clear();
                    used = 0;
                }
                line.push(c);
                used += cw;
            }
        }
        out.push(format!("{indent}{line}"));
    }
    out
}

/// Where the view goes: the whole body (between the header and the composer).
pub fn area(state: &State, width: u16, height: u16) -> Rect {
    if state.drill.is_some() {
        // Over the drill-down list, which has no composer below it.
        return super::traffic::area(Rect::new(0, 0, width, height));
    }
    // Zoomed, the composer's rows are the body's too (unless it is being written in).
    let r = super::regions_in(state, width, height);
    let top = r.header.bottom();
    Rect::new(0, top, width, r.composer.y.saturating_sub(top))
}

/// How the exchange ended, in words.
fn ending(s: &ExchangeSummary) -> String {
    match s.kind {
        ExchangeKind::Refused => format!("Refused by the target's send policy: {}", s.detail),
        ExchangeKind::Chain => format!("Not sent: chain limit reached: {}", s.detail),
        ExchangeKind::Send => match s.ended_reason {
            Some(r) if s.detail.is_empty() => format!("Ended: {}", loop_label(r)),
            Some(r) => format!("Ended: {} · {}", loop_label(r), s.detail),
            None if s.status == ExchangeStatus::Running => "Still running…".to_string(),
            None => format!("Ended: {}", s.status),
        },
    }
}

/// Every line of the view's content at `width` columns, styled.
fn content(
    v: &ExchangeView,
    names: &crate::names::Names,
    width: usize,
    now: i64,
) -> Vec<Line<'static>> {
    let s = &v.summary;
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().add_modifier(Modifier::DIM);
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut push = |text: String, style: Style| lines.push(Line::styled(fit(&text, width), style));
    if let Some(n) = &v.notice {
        for l in wrap(n, width, "") {
            push(
                l,
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            );
        }
    }
    // Named as the sessions pane names them; the numbered lines below give the keys.
    push(names.pair(&s.requester, &s.target, width), bold);
    let took = s
        .ended_at
        .map(|e| format!(" · took {}", duration(e - s.started_at)))
        .unwrap_or_default();
    push(
        format!(
            "{} · {} · {} · started {}{took}",
            s.kind,
            s.status,
            switchboard_types::words::count(s.rounds, "round"),
            clock(s.started_at)
        ),
        Style::default(),
    );
    push(format!("[1] requester {}", s.requester), dim);
    push(format!("[2] target {}", s.target), dim);
    push("Message:".into(), bold);
    for l in wrap(&s.message, width, "  ") {
        push(l, Style::default());
    }
    match &v.detail {
        None if v.notice.is_none() => push("loading the exchange…".into(), dim),
        None => {}
        Some(d) => {
            for t in &d.turns {
                let took = t
                    .ended_at
                    .map(|e| format!(" · {}", duration(e - t.started_at)))
                    .unwrap_or_default();
                let tokens = match (t.tokens_in, t.tokens_out) {
                    (Some(i), Some(o)) => format!(" · tokens {i}/{o}"),
                    _ => String::new(),
                };
                let head = format!(
                    "Round {} · {} → {} · {}{took}{tokens} · {}",
                    t.round,
                    t.speaker,
                    t.listener,
                    clock(t.started_at),
                    t.status
                );
                // Wrapped, not cut: the duration, tokens and status are at its end.
                for l in wrap(&head, width, "") {
                    push(l, bold);
                }
                let text = match (&t.error, t.text.is_empty()) {
                    (Some(e), true) => format!("({e})"),
                    (_, true) => "(no reply)".to_string(),
                    _ => t.text.clone(),
                };
                for l in wrap(&text, width, "  ") {
                    push(l, Style::default());
                }
            }
        }
    }
    for l in wrap(&ending(s), width, "") {
        push(l, bold);
    }
    if let Some(a) = v.detail.as_ref().and_then(|d| d.announce.as_ref()) {
        let route = match (&a.channel, &a.to) {
            (Some(c), Some(t)) => Some((c.as_str(), t.as_str())),
            _ => None,
        };
        let said = match &a.delivery {
            // Queued: how the delivery stands now, not only that it was handed over.
            Some(row) => row.route_words(now),
            None => announce_line(a.outcome, announce_label(a.outcome), route, &a.detail),
        };
        let style = match a.delivery.as_ref().map(|r| r.status) {
            Some(OutboxStatus::Failed | OutboxStatus::Retrying) => bold.fg(Color::Red),
            _ => bold,
        };
        for l in wrap(&format!("Announce: {said}"), width, "") {
            push(l, style);
        }
        if let Some(text) = a.text.as_deref().filter(|t| !t.is_empty()) {
            for l in wrap(text, width, "  ") {
                push(l, Style::default());
            }
        }
    }
    lines
}

/// The first line of the last screenful, for scrolling.
pub fn max_scroll(state: &State) -> usize {
    let Some(v) = &state.rounds.exchange_view else {
        return 0;
    };
    let a = area(state, state.width, state.height);
    let (w, h) = inner_size(a);
    content(v, &state.names, w, state.now_ms)
        .len()
        .saturating_sub(h)
}

/// Content width and height inside the border, above the keys line.
fn inner_size(a: Rect) -> (usize, usize) {
    (
        a.width.saturating_sub(2) as usize,
        a.height.saturating_sub(3) as usize,
    )
}

pub fn draw(frame: &mut Frame, state: &State, keymap: &Keymap) {
    let Some(v) = &state.rounds.exchange_view else {
        return;
    };
    let full = frame.area();
    let a = area(state, full.width, full.height);
    let (w, h) = inner_size(a);
    let lines = content(v, &state.names, w, state.now_ms);
    let top = v.scroll.min(lines.len().saturating_sub(h));
    let more = if lines.len() > top + h { " ↓" } else { "" };
    let mut shown: Vec<Line> = lines.into_iter().skip(top).take(h).collect();
    while shown.len() < h {
        shown.push(Line::from(""));
    }
    shown.push(Line::styled(
        fit(&format!("{}{more}", keys(keymap)), w),
        Style::default().add_modifier(Modifier::DIM),
    ));
    frame.render_widget(Clear, a);
    frame.render_widget(
        Paragraph::new(shown).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" Exchange ")
                .border_style(
                    Style::default()
                        .add_modifier(Modifier::BOLD)
                        .fg(Color::Cyan),
                ),
        ),
        a,
    );
}
