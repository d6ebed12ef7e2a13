//! The rounds pane: the agent-to-agent exchanges touching the selected session (or all),
//! newest first, one entry of one or two lines each (time, who to whom, rounds, how it
//! ended; then the message or why it was refused) with a cursor; then spawned children
//! under their parent.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{border, fit};
use crate::exchanges::Scope;
use crate::rounds::SpawnView;
use crate::state::{Focus, State};
use switchboard_types::api::{
    AnnounceOutcome, ExchangeEnd, ExchangeKind, ExchangeStatus, ExchangeSummary,
};

/// What a gateway's record cannot say (an exchange rebuilt from OpenClaw's transcripts).
pub(crate) const NOT_RECORDED: &str = "not recorded by OpenClaw";

/// An announce's outcome in words (its wire word, except where the record does not say).
pub(crate) fn announce_label(outcome: AnnounceOutcome) -> &'static str {
    match outcome {
        AnnounceOutcome::NotRecorded => NOT_RECORDED,
        other => other.shown(),
    }
}

pub(crate) fn loop_label(reason: ExchangeEnd) -> &'static str {
    match reason {
        ExchangeEnd::Cap => "cap reached",
        ExchangeEnd::ReplySkip => "REPLY_SKIP",
        ExchangeEnd::Empty => "empty reply",
        ExchangeEnd::SameSession => "no loop (same session)",
        ExchangeEnd::Disabled => "ping-pong off",
        ExchangeEnd::Policy => "blocked by send policy",
        ExchangeEnd::NoReply => "no reply",
        ExchangeEnd::Chain => "not sent: chain limit reached",
        ExchangeEnd::Timeout => "timed out",
        ExchangeEnd::Error => "a run failed",
        ExchangeEnd::Aborted => "aborted by the owner",
        ExchangeEnd::NotRecorded => NOT_RECORDED,
        other @ (ExchangeEnd::EngineStopped | ExchangeEnd::Unknown) => other.as_str(),
    }
}

fn hhmm(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_else(|| "--:--".into())
}

/// An entry's header: `12:03 alice → bob · 5 rounds · cap reached`, the sessions by the
/// names the sessions pane shows; when it does not fit, the names give way (a key cut in
/// the middle), never how the exchange ended.
pub(super) fn header(e: &ExchangeSummary, names: &crate::names::Names, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let how = match e.kind {
        ExchangeKind::Refused => "refused by policy".to_string(),
        ExchangeKind::Chain => "chain limit".to_string(),
        ExchangeKind::Send => {
            let rounds = switchboard_types::words::count(e.rounds, "round");
            match (e.ended_reason, e.status) {
                (_, ExchangeStatus::Running) => format!("{rounds} · running"),
                (Some(r), _) => format!("{rounds} · {}", loop_label(r)),
                (None, s) => format!("{rounds} · {s}"),
            }
        }
    };
    let time = hhmm(e.started_at);
    let fixed = time.width() + 1 + 3 + how.width();
    let room = width.saturating_sub(fixed).max(11);
    format!(
        "{time} {} · {how}",
        names.pair(&e.requester, &e.target, room)
    )
}

/// An entry's second line: the message, with the announce, or why it never ran.
pub(super) fn second(e: &ExchangeSummary) -> String {
    match e.kind {
        ExchangeKind::Refused | ExchangeKind::Chain => format!("  ✗ {}", e.detail),
        ExchangeKind::Send => {
            let announce = e
                .announce
                .map(|a| format!(" · announce {}", announce_label(a)))
                .unwrap_or_default();
            format!("  “{}”{announce}", e.message.replace('\n', " "))
        }
    }
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let x = &state.rounds.exchanges;
    let scope = if state.rounds.all {
        "all"
    } else {
        "this session"
    };
    let count = if x.entries.is_empty() {
        String::new()
    } else {
        format!("· {}{} ", x.entries.len(), if x.more { "+" } else { "" })
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Rounds ({scope}) {count}"))
        .border_style(border(state, Focus::Rounds));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let height = inner.height as usize;
    if height == 0 {
        return;
    }
    if let Some(why) = state.link.as_ref().and_then(|l| l.unavailable.as_deref()) {
        let lines: Vec<Line> = why.lines().map(|l| Line::from(fit(l, width))).collect();
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    let spawns = spawns_shown(state);
    let spawn_need = spawn_line_count(&spawns);
    // Sub-agents go below the exchanges, in what the exchanges leave, and at least a third
    // of the pane when there are more exchanges than fit.
    let per_guess = if height >= 4 { 2 } else { 1 };
    let wanted = if x.error.is_some() {
        1
    } else if x.entries.is_empty() {
        usize::from(spawn_need == 0)
    } else {
        x.entries.len() * per_guess + usize::from(x.more)
    };
    let spawn_room = spawn_need.min((height / 3).max(height.saturating_sub(wanted)));
    let spawn_lines = spawn_lines(&spawns, width, spawn_room);
    let room = height - spawn_room;
    let mut lines: Vec<Line> = Vec::new();
    if let Some(e) = &x.error {
        lines.push(Line::from(fit(e, width)));
    } else if x.entries.is_empty() && spawn_room > 0 {
        // The sub-agents below are what there is.
    } else if x.entries.is_empty() {
        let text = match &x.scope {
            Scope::All => "No agent-to-agent traffic yet.",
            _ => "No exchanges or sub-agents for this session (a: show all).",
        };
        lines.push(Line::from(fit(text, width)));
    } else {
        // Each entry scrolls as a unit: two lines when there is room for a few, else one.
        let per = if room >= 4 { 2 } else { 1 };
        let fits = (room / per).max(1);
        let mut top = x.cursor.saturating_sub(fits - 1);
        // Exchanges that arrived at the head while the cursor kept its own further down are
        // never out of sight unsaid: a line above says how many (it takes an entry's room).
        let unseen = x.new_above.min(top);
        if unseen > 0 {
            lines.push(Line::styled(
                fit(&format!("  ↑ {unseen} new above"), width),
                Style::default().add_modifier(Modifier::BOLD),
            ));
        }
        let fits = if unseen > 0 {
            (room.saturating_sub(1) / per).max(1)
        } else {
            fits
        };
        top = top.max(x.cursor.saturating_sub(fits - 1));
        let focused = state.focus == Focus::Rounds;
        for (i, e) in x.entries.iter().enumerate().skip(top).take(fits) {
            let mut head = Style::default().add_modifier(Modifier::BOLD);
            let mut rest = Style::default().add_modifier(Modifier::DIM);
            if i == x.cursor {
                let mark = if focused {
                    Modifier::REVERSED
                } else {
                    Modifier::UNDERLINED
                };
                head = head.add_modifier(mark);
                rest = rest.add_modifier(mark);
            }
            lines.push(Line::styled(
                fit(&header(e, &state.names, width), width),
                head,
            ));
            if per == 2 {
                lines.push(Line::styled(fit(&second(e), width), rest));
            }
        }
        if x.more && top + fits >= x.entries.len() && lines.len() < room {
            lines.push(Line::styled(
                "  loading older exchanges…",
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
    }
    lines.truncate(room);
    // Sub-agents sit below the exchanges' part of the pane (at the top when there are none).
    while !lines.is_empty() && lines.len() < room {
        lines.push(Line::from(""));
    }
    lines.extend(spawn_lines.into_iter().take(spawn_room));
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The sub-agents the pane is about (the selected session's, as parent or child, or all),
/// newest first.
fn spawns_shown(state: &State) -> Vec<&SpawnView> {
    let selected = state.sessions.selected_key();
    let mut spawns: Vec<&SpawnView> = state
        .rounds
        .spawns
        .values()
        .filter(|s| state.rounds.all || selected.is_none_or(|k| s.requester == k || s.child == k))
        .collect();
    spawns.sort_by_key(|s| std::cmp::Reverse(s.arrival));
    spawns
}

/// Lines every one of `spawns` takes: one per parent and one per sub-agent.
fn spawn_line_count(spawns: &[&SpawnView]) -> usize {
    let parents: std::collections::HashSet<&str> =
        spawns.iter().map(|s| s.requester.as_str()).collect();
    parents.len() + spawns.len()
}

/// Spawned sub-agents (`spawns`, newest first) in at most `room` lines: grouped under their
/// parent, the parent with the newest spawn first, each group newest first. When not all
/// fit, the newest do and the last line says how many more there are (the pane showed the
/// oldest few of 17 before, the same ones whatever happened since).
fn spawn_lines(spawns: &[&SpawnView], width: usize, room: usize) -> Vec<Line<'static>> {
    if room == 0 || spawns.is_empty() {
        return Vec::new();
    }
    let all_fit = spawn_line_count(spawns) <= room;
    let budget = if all_fit { room } else { room - 1 };
    // Parents in order of their newest spawn, each with the spawns that fit.
    let mut groups: Vec<(&str, Vec<&SpawnView>)> = Vec::new();
    let mut used = 0;
    let mut shown = 0;
    for s in spawns {
        let group = groups.iter().position(|(p, _)| *p == s.requester);
        let cost = if group.is_some() { 1 } else { 2 };
        if used + cost > budget {
            continue;
        }
        used += cost;
        shown += 1;
        match group {
            Some(g) => groups[g].1.push(s),
            None => groups.push((s.requester.as_str(), vec![s])),
        }
    }
    let mut lines = Vec::new();
    for (parent, children) in groups {
        lines.push(Line::styled(
            fit(&format!("{parent} spawned:"), width),
            Style::default().add_modifier(Modifier::BOLD),
        ));
        for s in children {
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
    }
    let more = spawns.len() - shown;
    if more > 0 {
        let text = if shown == 0 {
            switchboard_types::words::count(more, "sub-agent")
        } else {
            format!("+{more} more")
        };
        lines.push(Line::styled(
            fit(&format!("  {text}"), width),
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    lines
}
