//! The console's screens as text: `insta` snapshots of `view::draw` on ratatui's
//! `TestBackend`, for each pane in its main states, at 80×24 and 120×40, too small, and with
//! NO_COLOR; then `Console::update` driven by hand over the fake API (the composer, slash
//! commands and their inline errors, a policy-denied send, a paste of 1 MB, escape sequences
//! in agent text, a session deleted while selected, a resize to 10×5): the fake holds the
//! rows and lines the engine would answer, and scripts its replies and events.
//! (What the engine itself does, seen through the console, is in tests/tui/tui_console.rs.)
//!
//! Everything is deterministic (fixed clock, fixed keys, fixed timestamps). The driven
//! screens' clock times are blanked by `redact`, as they were when a real engine (wall-clock
//! times) drew them, so those pictures are the same files.
//!
//! Snapshots live in tests/tui/snapshots/; write new ones with
//! `INSTA_UPDATE=always cargo test --test tui tui_snapshots::`, then read every changed `.snap`.

use crate::common;
use crate::common::screen::{render, screen, text};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use serde_json::json;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::exchanges::{Exchanges, Scope};
use switchboard_tui::state::{ExchangeRounds, Focus, RoundView, SessionRow, SpawnView, State};
use switchboard_tui::{strip_colors, view};
use switchboard_types::api::{
    EngineEvent, ExchangeSummary, LineRole, PolicyView, SendRequest, SessionKind,
    SessionRow as ApiRow, ToolCall, TranscriptLine as ApiLine,
};

use common::console_driver::Driver;
use common::fake_api::{self, FakeApi};

// ---------------------------------------------------------------------------------------------
// Rendering helpers
// ---------------------------------------------------------------------------------------------

/// 2025-06-15 15:06:40 UTC: every hand-built time is relative to it.
const NOW: i64 = 1_750_000_000_000;
const SEC: i64 = 1_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;

/// One row of the screen's text.
fn row(screen: &str, y: usize) -> &str {
    screen.lines().nth(y).unwrap_or("")
}

/// Which panes have a bold (focused) border, read from each region's top-left corner.
fn focused_borders(buf: &Buffer) -> String {
    let r = view::regions(buf.area.width, buf.area.height);
    let panes = [
        ("sessions", r.sessions),
        ("transcript", r.transcript),
        ("rounds", r.rounds),
        ("composer", r.composer),
    ];
    let bold: Vec<&str> = panes
        .iter()
        .filter(|(_, rect)| buf[(rect.x, rect.y)].modifier.contains(Modifier::BOLD))
        .map(|(name, _)| *name)
        .collect();
    format!("bold borders: {}", bold.join(", "))
}

/// The transcript pane's text at 120×40 (right of the sessions pane, above the rounds).
fn transcript_pane(screen: &str) -> String {
    let r = view::regions(120, 40);
    screen
        .lines()
        .skip(r.transcript.y as usize + 1)
        .take(r.transcript.height as usize - 3)
        .map(|l| l.chars().skip(r.transcript.x as usize).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Clock times on a screen, blanked (`12:34:56` → `HH:MM:SS`).
fn redact(screen: &str) -> String {
    let clock = regex::Regex::new(r"\b\d{2}:\d{2}:\d{2}\b").expect("regex");
    clock.replace_all(screen, "HH:MM:SS").into_owned()
}

// ---------------------------------------------------------------------------------------------
// Hand-built states
// ---------------------------------------------------------------------------------------------

fn session(
    key: &str,
    kind: SessionKind,
    name: &str,
    channel: &str,
    age: i64,
    policy: &'static str,
    policy_override: bool,
) -> SessionRow {
    SessionRow {
        key: key.to_string(),
        source: None,
        kind,
        name: name.to_string(),
        channel: channel.to_string(),
        updated_at: NOW - age,
        policy: policy.parse().unwrap(),
        policy_override,
        policy_detail: if policy_override {
            "override".to_string()
        } else {
            "default (session.sendPolicy.default)".to_string()
        },
        policy_words: if policy_override {
            format!(
                "{policy} · set here with /send {}",
                if policy == "deny" { "off" } else { "on" }
            )
        } else {
            format!("{policy} · default")
        },
        archived: false,
        named: name != key,
        preview: None,
    }
}

const MAIN: &str = "agent:main:main";
const INCIDENTS: &str = "agent:ops:slack:group:incidents";
const STANDUP: &str = "agent:ops:discord:group:eng-standup";
const RANDOM: &str = "agent:support:discord:group:random";
const JONAS: &str = "agent:main:whatsapp:direct:+4915112345678";
const RESEARCH: &str = "agent:research:main";
const VISITOR: &str = "agent:support:webchat:direct:visitor-8812";
const NIGHTLY: &str = "agent:main:cron:nightly-report";
const CHILD: &str = "agent:research:subagent:7f3e2c1a-0000-4000-8000-000000000001";
const CHILD2: &str = "agent:research:subagent:0b1d9e44-0000-4000-8000-000000000002";
const CHILD3: &str = "agent:ops:subagent:c4a1f00d-0000-4000-8000-000000000003";

/// Every kind, a running session, unread counts, a session denied by a rule, one denied by
/// its own override (`*`), and a CJK + emoji name.
fn sessions() -> Vec<SessionRow> {
    vec![
        session(
            MAIN,
            SessionKind::Main,
            "Alice (Telegram)",
            "telegram",
            4 * SEC,
            "allow",
            false,
        ),
        session(
            INCIDENTS,
            SessionKind::Group,
            "#incidents",
            "slack",
            90 * SEC,
            "allow",
            false,
        ),
        session(
            CHILD,
            SessionKind::Other,
            "investigation",
            "internal",
            5 * MIN,
            "allow",
            false,
        ),
        session(
            VISITOR,
            SessionKind::Other,
            VISITOR,
            "webchat",
            12 * MIN,
            "allow",
            false,
        ),
        session(
            STANDUP,
            SessionKind::Group,
            "#eng-standup",
            "discord",
            40 * MIN,
            "deny",
            true,
        ),
        session(
            RANDOM,
            SessionKind::Group,
            "#random",
            "discord",
            2 * HOUR,
            "deny",
            false,
        ),
        session(
            "agent:research:feishu:group:42",
            SessionKind::Group,
            "研究チーム📚",
            "feishu",
            5 * HOUR,
            "allow",
            false,
        ),
        session(
            NIGHTLY,
            SessionKind::Cron,
            NIGHTLY,
            "internal",
            9 * HOUR,
            "allow",
            false,
        ),
        session(
            "agent:main:hook:3f9c1e52-8a47-4d0b-b6e2-5c71a9d04e18",
            SessionKind::Hook,
            "agent:main:hook:3f9c1e52-8a47-4d0b-b6e2-5c71a9d04e18",
            "internal",
            2 * DAY,
            "allow",
            false,
        ),
        session(
            "agent:main:node:build-runner",
            SessionKind::Node,
            "agent:main:node:build-runner",
            "internal",
            3 * DAY,
            "allow",
            false,
        ),
    ]
}

/// A line as the API answers it (role, who, text), shown by the transcript pane.
fn said(
    seq: i64,
    age: i64,
    role: LineRole,
    from: &str,
    text: &str,
) -> switchboard_tui::state::TranscriptLine {
    switchboard_tui::state::TranscriptLine::from_api(&ApiLine {
        seq,
        role,
        timestamp: NOW - age,
        from: from.into(),
        text: text.into(),
        message: None,
    })
}

/// The owner's DM with main: plain messages, a tool call and its result, an inter-session
/// message from ops (with its source), a multi-line reply and a failed run.
fn main_transcript() -> Vec<switchboard_tui::state::TranscriptLine> {
    use LineRole::*;
    let owner = "alice (owner)";
    vec![
        said(1, 10 * MIN, User, owner, "morning! anything I should know?"),
        said(
            2,
            10 * MIN - 2 * SEC,
            Assistant,
            "agent",
            "Morning! Overnight: INC-4821 mitigated, 3 support tickets open.",
        ),
        said(3, 8 * MIN, User, owner, "@ops is INC-4821 under control?"),
        said(
            4,
            8 * MIN - SEC,
            Tool,
            "agent",
            &format!(
                "sessions_send({{\"sessionKey\":\"{INCIDENTS}\",\"message\":\"is INC-4821 under control?\"}})"
            ),
        ),
        said(
            5,
            8 * MIN - 5 * SEC,
            Result,
            "sessions_send",
            "{\"status\":\"ok\",\"reply\":\"p95 back to 310 ms\"}",
        ),
        said(
            6,
            8 * MIN - 6 * SEC,
            Assistant,
            "agent",
            "Asked ops in #incidents. They said: p95 back to 310 ms.",
        ),
        said(
            7,
            7 * MIN,
            User,
            &format!("from {INCIDENTS} via sessions_send"),
            "Status update: INC-4821 mitigated, rollback staged.",
        ),
        said(
            8,
            7 * MIN - 2 * SEC,
            Assistant,
            "agent",
            "Thanks. Summary for Alice:\n- INC-4821 mitigated\n- rollback staged",
        ),
        said(
            9,
            MIN,
            User,
            owner,
            "post in #random: deploy freeze at 17:00",
        ),
        said(10, MIN - SEC, Error, "agent", "scripted failure"),
    ]
}

fn round(round: u32, speaker: &str, text: &str) -> RoundView {
    RoundView {
        round,
        speaker: speaker.to_string(),
        text: text.to_string(),
        status: "ok".parse().unwrap(),
    }
}

fn pair<T: std::str::FromStr>(a: &str, b: &str) -> Option<(T, String)>
where
    T::Err: std::fmt::Debug,
{
    Some((a.parse().unwrap(), b.to_string()))
}

/// Finished exchanges (cap reached with a delivered announce, REPLY_SKIP with a skipped one,
/// a timeout without a route) and one still running.
fn flows() -> BTreeMap<String, ExchangeRounds> {
    let list = vec![
        ExchangeRounds {
            exchange_id: "flow-1".into(),
            requester: MAIN.into(),
            target: INCIDENTS.into(),
            message: "is INC-4821 under control?".into(),
            rounds: vec![
                round(1, INCIDENTS, "p95 checkout latency is back to 310 ms."),
                round(2, MAIN, "Thanks. Is a rollback staged?"),
                round(3, INCIDENTS, "Yes: a rollback to 2025.06.2 is staged."),
                round(4, MAIN, "Great, I'll let the customer-facing folks know."),
            ],
            loop_end: pair("cap", "maxPingPongTurns 3"),
            announce: pair("delivered", "queued for slack group:incidents"),
            done: true,
            started: NOW - 8 * MIN,
        },
        ExchangeRounds {
            exchange_id: "flow-2".into(),
            requester: JONAS.into(),
            target: RESEARCH.into(),
            message: "what did last week's churn cohort look like?".into(),
            rounds: vec![
                round(1, RESEARCH, "Churn for last week's cohort: 2.1%."),
                round(2, JONAS, "Perfect. Source links later?"),
                round(3, RESEARCH, "REPLY_SKIP"),
            ],
            loop_end: pair("reply_skip", "research said REPLY_SKIP"),
            announce: pair("skipped", "the target chose to stay silent"),
            done: true,
            started: NOW - 6 * MIN,
        },
        ExchangeRounds {
            exchange_id: "flow-3".into(),
            requester: MAIN.into(),
            target: "agent:support:main".into(),
            message: "Payment failed for acme-corp: please reach out.".into(),
            rounds: vec![RoundView {
                round: 1,
                speaker: "agent:support:main".into(),
                text: String::new(),
                status: "timeout".parse().unwrap(),
            }],
            loop_end: pair("timeout", "no reply within 30 s"),
            announce: pair("no_route", "agent:support:main has no channel route"),
            done: true,
            started: NOW - 4 * MIN,
        },
        ExchangeRounds {
            exchange_id: "flow-4".into(),
            requester: VISITOR.into(),
            target: INCIDENTS.into(),
            message: "Checkout failing with 502s. Known issue?".into(),
            rounds: vec![round(
                1,
                INCIDENTS,
                "Known issue: INC-4821, a bad cache node.",
            )],
            loop_end: None,
            announce: None,
            done: false,
            started: NOW - 30 * SEC,
        },
    ];
    list.into_iter()
        .map(|f| (f.exchange_id.clone(), f))
        .collect()
}

/// The exchanges of `flows()` as the engine lists them (newest first), those touching `key`
/// (or all): what the rounds pane shows once loaded.
fn exchanges_of(key: Option<&str>) -> Exchanges {
    let mut list: Vec<ExchangeSummary> = flows()
        .into_values()
        .filter(|f| key.is_none_or(|k| f.requester == k || f.target == k))
        .map(|f| ExchangeSummary {
            id: f.exchange_id,
            kind: "send".parse().unwrap(),
            requester: f.requester,
            target: f.target,
            message: f.message,
            started_at: f.started,
            ended_at: None,
            status: if f.done { "done" } else { "running" }.parse().unwrap(),
            rounds: f.rounds.len() as u32,
            ended_reason: f.loop_end.as_ref().map(|l| l.0),
            detail: f.loop_end.map(|l| l.1).unwrap_or_default(),
            announce: f.announce.map(|a| a.0),
        })
        .collect();
    list.sort_by_key(|e| std::cmp::Reverse(e.started_at));
    let scope = key.map_or(Scope::All, |k| Scope::Session(k.to_string()));
    Exchanges::shown(scope, list, false)
}

/// main spawned two research children (one finished and announced, one still running); the
/// cron session spawned one that failed and whose announce was blocked.
fn spawns() -> BTreeMap<String, SpawnView> {
    let list = vec![
        SpawnView {
            requester: MAIN.into(),
            child: CHILD.into(),
            label: "investigation".into(),
            status: "completed".into(),
            runtime_ms: Some(610),
            tokens: Some((2400, 75)),
            announce: Some("queued".into()),
            started: NOW - 5 * MIN,
            arrival: 1,
        },
        SpawnView {
            requester: MAIN.into(),
            child: CHILD2.into(),
            label: "why EU conversion dipped yesterday".into(),
            status: "running".into(),
            runtime_ms: None,
            tokens: None,
            announce: None,
            started: NOW - 4 * MIN,
            arrival: 2,
        },
        SpawnView {
            requester: NIGHTLY.into(),
            child: CHILD3.into(),
            label: "nightly-report".into(),
            status: "failed".into(),
            runtime_ms: Some(1200),
            tokens: Some((300, 0)),
            announce: Some("blocked".into()),
            started: NOW - 2 * MIN,
            arrival: 3,
        },
    ];
    list.into_iter().map(|s| (s.child.clone(), s)).collect()
}

/// The selected session has no messages (yet).
fn no_transcript(s: &mut State) {
    s.transcript.lines.clear();
    s.transcript.total = 0;
}

/// An empty console attached to a fixed folder.
fn empty() -> State {
    State::new("/srv/switchboard/state".to_string(), NOW)
}

/// A busy console: every kind of session, main's DM selected, exchanges and sub-agents.
fn busy() -> State {
    let mut s = empty();
    s.sessions.rows = sessions();
    // As a load of the sessions pane does: other panes name sessions as it does.
    s.names.learn(&s.sessions.rows);
    s.sessions.total = 10;
    s.sessions.running.insert(MAIN.to_string());
    s.sessions.running.insert(INCIDENTS.to_string());
    s.sessions.unread.insert(INCIDENTS.to_string(), 3);
    s.sessions.unread.insert(RANDOM.to_string(), 12);
    s.sessions.unread.insert(VISITOR.to_string(), 1);
    s.transcript.lines = main_transcript();
    s.transcript.total = 10;
    s.rounds.exchange_rounds = flows();
    s.rounds.exchanges = exchanges_of(s.sessions.selected_key());
    s.rounds.spawns = spawns();
    s.sessions.selected_policy = Some("allow · default".to_string());
    s
}

// ---------------------------------------------------------------------------------------------
// Snapshots of hand-built states
// ---------------------------------------------------------------------------------------------

#[test]
fn empty_console_80x24() {
    insta::assert_snapshot!(screen(&empty(), 80, 24));
}

#[test]
fn empty_console_120x40() {
    insta::assert_snapshot!(screen(&empty(), 120, 40));
}

#[test]
fn busy_console_80x24() {
    insta::assert_snapshot!(screen(&busy(), 80, 24));
}

#[test]
fn busy_console_120x40() {
    let s = busy();
    let shown = screen(&s, 120, 40);
    // Running (●), unread counts, the deny policy and the override marker are on screen.
    assert!(shown.contains("● main"), "{shown}");
    assert!(shown.contains("deny* "), "{shown}");
    assert!(shown.contains(" 12│"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn sessions_with_a_selection_further_down() {
    let mut s = busy();
    s.sessions.selected = 4;
    no_transcript(&mut s);
    s.rounds.exchange_rounds.clear();
    s.rounds.spawns.clear();
    s.sessions.selected_policy = Some("deny · set here with /send off".to_string());
    let buf = render(&s, 120, 40);
    // The selected row (here the denied #eng-standup) is drawn reversed.
    let r = view::regions(120, 40);
    // Below the border and the column headers.
    let y = r.sessions.y + 2 + 4;
    assert!(
        buf[(r.sessions.x + 1, y)]
            .modifier
            .contains(Modifier::REVERSED)
    );
    insta::assert_snapshot!(text(&buf));
}

#[test]
fn sessions_scrolled_to_keep_the_selection_in_view() {
    let mut s = busy();
    s.sessions.selected = 9;
    no_transcript(&mut s);
    // 80×24 leaves 8 rows in the sessions pane: the last session must still be visible.
    let shown = screen(&s, 80, 24);
    assert!(shown.contains("agent:main:node"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn filter_box_in_use() {
    let mut s = busy();
    s.focus = Focus::Filter;
    s.sessions.filter = "inc".to_string();
    s.sessions
        .rows
        .retain(|r| r.key.contains("inc") || r.name.contains("inc"));
    no_transcript(&mut s);
    insta::assert_snapshot!(screen(&s, 120, 40));
}

#[test]
fn filter_kept_after_enter() {
    let mut s = busy();
    s.focus = Focus::Sessions;
    s.sessions.filter = "discord".to_string();
    s.sessions.rows.retain(|r| r.key.contains("discord"));
    s.sessions.selected_policy = Some("deny · set here with /send off".to_string());
    no_transcript(&mut s);
    insta::assert_snapshot!(screen(&s, 80, 24));
}

#[test]
fn filter_without_matches() {
    let mut s = busy();
    s.focus = Focus::Filter;
    s.sessions.filter = "nothing-like-this".to_string();
    s.sessions.rows.clear();
    no_transcript(&mut s);
    s.sessions.selected_policy = None;
    let shown = screen(&s, 80, 24);
    assert!(shown.contains("No session matches the filter"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn kind_filter_groups() {
    let mut s = busy();
    s.sessions.kind_filter = Some(SessionKind::Group);
    s.sessions.rows.retain(|r| r.kind == SessionKind::Group);
    no_transcript(&mut s);
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("[group]"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn archived_sessions_shown_on_request() {
    let mut s = busy();
    s.sessions.show_archived = true;
    let mut old = session(
        "agent:main:telegram:group:old-project",
        SessionKind::Group,
        "Old project",
        "telegram",
        40 * DAY,
        "allow",
        false,
    );
    old.archived = true;
    s.sessions.rows.push(old);
    s.sessions.total = 11;
    no_transcript(&mut s);
    insta::assert_snapshot!(screen(&s, 120, 40));
}

#[test]
fn transcript_tools_hidden() {
    let mut s = busy();
    s.focus = Focus::Transcript;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("tools:off"), "{shown}");
    assert!(!shown.contains("sessions_send({"), "{shown}");
    // The inter-session message says where it came from.
    assert!(
        shown.contains("from agent:ops:slack:group:incidents via"),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
}

#[test]
fn transcript_tools_shown() {
    let mut s = busy();
    s.focus = Focus::Transcript;
    s.transcript.tools = true;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("tools:on"), "{shown}");
    // A tool call is a one-line card (its result folded into it: tests/tui/tui_transcript.rs).
    assert!(
        shown.contains("▸ ⚙ sessions_send ok · sessionKey:"),
        "{shown}"
    );
    assert!(!shown.contains("sessions_send({"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn transcript_without_timestamps_or_wrap() {
    let mut s = busy();
    s.focus = Focus::Transcript;
    s.transcript.timestamps = false;
    s.transcript.wrap = false;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("times:off wrap:off"), "{shown}");
    // (The rounds pane below keeps its exchanges' times.)
    assert!(!transcript_pane(&shown).contains("15:0"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn transcript_scrolled_up_pauses_follow_and_shows_the_window() {
    let mut s = busy();
    s.focus = Focus::Transcript;
    // Only the newest lines are loaded: the indicator says how many of how many.
    s.transcript.total = 1_000_000;
    s.width = 80;
    s.height = 24;
    // Six rows up, as the owner scrolls.
    let mut c = switchboard_tui::update::Console::new(s);
    for _ in 0..6 {
        c.update(Action::Intent(Intent::Up));
    }
    let s = c.state;
    assert!(!s.transcript.follow);
    insta::assert_snapshot!(screen(&s, 80, 24));
}

#[test]
fn transcript_of_a_session_without_messages() {
    let mut s = busy();
    s.sessions.selected = 3;
    no_transcript(&mut s);
    let shown = screen(&s, 80, 24);
    assert!(shown.contains("No messages yet."), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn rounds_of_the_selected_session() {
    let mut s = busy();
    s.focus = Focus::Rounds;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("· 4 rounds · cap reached"), "{shown}");
    assert!(shown.contains("announce queued"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn rounds_of_all_sessions() {
    let mut s = busy();
    s.focus = Focus::Rounds;
    s.rounds.all = true;
    s.rounds.exchanges = exchanges_of(None);
    // Tall enough to show every exchange and sub-agent at once.
    let shown = screen(&s, 120, 80);
    // Sessions by their names in the sessions pane (issue 26); how it ended stays whole.
    assert!(
        shown.contains("Alice (Telegram) → #incidents · 4 rounds · cap reached"),
        "{shown}"
    );
    assert!(shown.contains("· 3 rounds · REPLY_SKIP"), "{shown}");
    assert!(shown.contains("announce skipped"), "{shown}");
    assert!(shown.contains("· 1 round · timed out"), "{shown}");
    assert!(shown.contains("· 1 round · running"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn rounds_pane_without_traffic() {
    let mut s = busy();
    s.rounds.exchange_rounds.clear();
    s.rounds.exchanges = Exchanges::shown(Scope::Session(MAIN.into()), Vec::new(), false);
    s.rounds.spawns.clear();
    s.focus = Focus::Rounds;
    insta::assert_snapshot!(screen(&s, 80, 24));
}

#[test]
fn spawned_tree_under_its_requester() {
    let mut s = busy();
    s.rounds.exchange_rounds.clear();
    s.rounds.exchanges = Exchanges::shown(Scope::All, Vec::new(), false);
    s.rounds.all = true;
    s.focus = Focus::Rounds;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains("agent:main:main spawned:"), "{shown}");
    assert!(
        shown.contains("└ investigation [completed] 610 ms, tokens 2400/75, announce"),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
}

#[test]
fn spawned_tree_groups_children_under_one_header_per_requester() {
    let mut s = busy();
    s.rounds.exchange_rounds.clear();
    s.rounds.exchanges = Exchanges::shown(Scope::All, Vec::new(), false);
    s.rounds.all = true;
    // main's second child starts after the cron session's child.
    let late = s.rounds.spawns.get_mut(CHILD2).expect("child 2");
    late.started = NOW - MIN;
    let shown = screen(&s, 120, 40);
    assert_eq!(
        shown.matches("agent:main:main spawned:").count(),
        1,
        "one header for main's children:\n{shown}"
    );
}

#[test]
fn policy_denied_send_flash() {
    let mut s = busy();
    s.flash(
        "sessions_send: forbidden: Send blocked by the send policy of agent:support:discord:group:random (rule 1); the owner can allow it with /send on there",
        true,
    );
    let buf = render(&s, 120, 40);
    let shown = text(&buf);
    let status = row(&shown, 37);
    assert!(status.contains(" ✗ sessions_send: forbidden"), "{status}");
    // Red and bold (the answer, after the policy slot).
    let x = status
        .find('✗')
        .map(|b| status[..b].chars().count())
        .unwrap_or(0) as u16;
    let cell = &buf[(x, 37)];
    assert_eq!(cell.fg, Color::Red);
    assert!(cell.modifier.contains(Modifier::BOLD));
    insta::assert_snapshot!(shown);
}

#[test]
fn composer_typing() {
    let mut s = busy();
    s.focus = Focus::Composer;
    s.composer
        .set_text("first line\nsecond line of a longer message");
    let shown = screen(&s, 80, 24);
    // The box grows to show both lines.
    assert!(
        shown.contains("│first line") && shown.contains("│second line of a longer message"),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
}

#[test]
fn composer_inline_error() {
    let mut s = busy();
    s.focus = Focus::Composer;
    s.composer.set_text("/send maybe");
    s.composer.error = Some(
        "Usage: /send on|off|inherit (on = allow, off = deny, inherit = follow the config)"
            .to_string(),
    );
    (s.width, s.height) = (120, 40);
    let buf = render(&s, 120, 40);
    // Under the draft, which stays in view.
    let r = view::regions_for(&s);
    assert_eq!(buf[(r.composer.x + 1, r.composer.y + 1)].symbol(), "/");
    let cell = &buf[(r.composer.x + 1, r.composer.y + 2)];
    assert_eq!(cell.symbol(), "✗");
    assert_eq!(cell.fg, Color::Red);
    insta::assert_snapshot!(text(&buf));
}

#[test]
fn help_overlay_120x40() {
    let mut s = busy();
    s.help = true;
    let shown = screen(&s, 120, 40);
    assert!(shown.contains(" Keys "), "{shown}");
    assert!(shown.contains("toggle") || shown.contains("show/hide tool calls"));
    insta::assert_snapshot!(shown);
}

#[test]
fn help_overlay_80x24() {
    let mut s = busy();
    s.help = true;
    insta::assert_snapshot!(screen(&s, 80, 24));
}

#[test]
fn help_overlay_at_the_minimum_size() {
    let mut s = busy();
    s.help = true;
    insta::assert_snapshot!(screen(&s, view::MIN_WIDTH, view::MIN_HEIGHT));
}

#[test]
fn sessions_columns_fit_at_80x24() {
    let shown = screen(&busy(), 80, 24);
    let standup = shown
        .lines()
        .find(|l| l.contains("#eng-st"))
        .expect("the #eng-standup row");
    assert!(
        standup.contains("deny*"),
        "policy and override marker: {standup}"
    );
    let random = shown
        .lines()
        .find(|l| l.contains("#random "))
        .expect("the #random row");
    assert!(random.contains("12│"), "unread count: {random}");
}

#[test]
fn help_overlay_at_80x24_lists_every_key() {
    let mut s = busy();
    s.help = true;
    let shown = screen(&s, 80, 24);
    // The source filter is listed only with several sources (tui_sources).
    for intent in Intent::ALL.iter().filter(|i| **i != Intent::CycleSource) {
        assert!(
            shown.contains(intent.help_text()),
            "{:?} is missing from the help:\n{shown}",
            intent
        );
    }
    assert!(shown.contains("? or esc closes"), "{shown}");
}

#[test]
fn filter_box_hints_are_about_the_filter() {
    let mut s = busy();
    s.focus = Focus::Filter;
    s.sessions.filter = "inc".to_string();
    let shown = screen(&s, 120, 40);
    let hints = row(&shown, 39);
    assert!(!hints.contains("enter send"), "{hints}");
    assert!(!hints.contains("history"), "{hints}");
}

#[test]
fn focus_on_each_pane() {
    let cases = [
        (Focus::Sessions, "sessions"),
        (Focus::Transcript, "transcript"),
        (Focus::Rounds, "rounds"),
        (Focus::Composer, "composer"),
        (Focus::Filter, "filter"),
    ];
    for (focus, name) in cases {
        let mut s = busy();
        s.focus = focus;
        let buf = render(&s, 80, 24);
        let report = format!("{}\n{}", focused_borders(&buf), text(&buf));
        insta::assert_snapshot!(format!("focus_{name}"), report);
    }
}

#[test]
fn the_minimum_size_works() {
    let shown = screen(&busy(), view::MIN_WIDTH, view::MIN_HEIGHT);
    assert!(!shown.contains("too small"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn too_small_40x10() {
    let shown = screen(&busy(), 40, 10);
    assert!(shown.contains("Terminal too small: 40×10"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn too_small_10x5() {
    let shown = screen(&busy(), 10, 5);
    assert!(shown.starts_with("Terminal"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn too_small_one_column_short() {
    for (w, h) in [(view::MIN_WIDTH - 1, 24), (80, view::MIN_HEIGHT - 1)] {
        let shown = screen(&busy(), w, h);
        assert!(
            shown.contains(&format!("Terminal too small: {w}×{h}")),
            "{shown}"
        );
    }
}

#[test]
fn degenerate_sizes_do_not_panic() {
    let s = busy();
    for (w, h) in [(1, 1), (0, 0), (1, 40), (200, 1), (500, 200)] {
        let _ = render(&s, w, h);
    }
}

#[test]
fn no_color_keeps_selection_and_focus_visible() {
    let mut s = busy();
    s.focus = Focus::Sessions;
    s.flash(
        "send policy of agent:support:discord:group:random refused send",
        true,
    );
    let mut buf = render(&s, 120, 40);
    strip_colors(&mut buf);
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let c = &buf[(x, y)];
            assert_eq!((c.fg, c.bg), (Color::Reset, Color::Reset), "cell {x},{y}");
        }
    }
    let r = view::regions(120, 40);
    let describe = |name: &str, x: u16, y: u16| {
        let c = &buf[(x, y)];
        format!(
            "{name:<28} {:?} fg={:?} bg={:?} mod={:?}",
            c.symbol(),
            c.fg,
            c.bg,
            c.modifier
        )
    };
    let selected = &buf[(r.sessions.x + 1, r.sessions.y + 2)];
    assert!(selected.modifier.contains(Modifier::REVERSED));
    assert!(
        buf[(r.sessions.x, r.sessions.y)]
            .modifier
            .contains(Modifier::BOLD)
    );
    assert!(
        !buf[(r.transcript.x, r.transcript.y)]
            .modifier
            .contains(Modifier::BOLD)
    );
    let cells = [
        describe("header", 1, 0),
        describe("sessions border (focused)", r.sessions.x, r.sessions.y),
        describe("transcript border", r.transcript.x, r.transcript.y),
        describe("selected row", r.sessions.x + 1, r.sessions.y + 1),
        describe("denied row (#random)", r.sessions.x + 1, r.sessions.y + 6),
        describe("error flash", r.status.x + 1, r.status.y),
        describe("hint bar", r.hints.x + 1, r.hints.y),
    ];
    insta::assert_snapshot!(format!("{}\n\n{}", cells.join("\n"), text(&buf)));
}

#[test]
fn no_color_focus_elsewhere_keeps_the_selection_reversed() {
    let mut s = busy();
    s.focus = Focus::Transcript;
    let mut buf = render(&s, 80, 24);
    strip_colors(&mut buf);
    let r = view::regions(80, 24);
    assert!(
        buf[(r.sessions.x + 1, r.sessions.y + 2)]
            .modifier
            .contains(Modifier::REVERSED)
    );
    assert!(
        buf[(r.transcript.x, r.transcript.y)]
            .modifier
            .contains(Modifier::BOLD)
    );
    assert!(
        !buf[(r.sessions.x, r.sessions.y)]
            .modifier
            .contains(Modifier::BOLD)
    );
}

// ---------------------------------------------------------------------------------------------
// A console over the fake API, driven through `Console::update`
// ---------------------------------------------------------------------------------------------

/// The policy a row shows, as the engine words it.
fn policy(policy: &str, source: &str, detail: &str) -> PolicyView {
    PolicyView {
        policy: policy.parse().unwrap(),
        source: source.parse().unwrap(),
        rule: None,
        matched: None,
        detail: detail.into(),
        summary: format!("{policy}, from {detail}"),
    }
}

/// A row as the engine lists a session that heard from `channel`.
fn listed(key: &str, name: &str, kind: SessionKind, channel: &str, age: i64) -> ApiRow {
    ApiRow {
        channel: channel.into(),
        ..fake_api::row(key, name, kind, NOW - age)
    }
}

/// The owner's Telegram DM with main.
fn alice() -> ApiRow {
    listed(MAIN, "Alice (Telegram)", SessionKind::Main, "telegram", 0)
}

/// The Discord group `#random`, whose sends a config rule denies.
fn random() -> ApiRow {
    ApiRow {
        policy: PolicyView {
            rule: Some(1),
            ..policy(
                "deny",
                "rule",
                "rule 1 (channel=discord chatType=group keyPrefix=discord:group:random)",
            )
        },
        ..listed(RANDOM, "#random", SessionKind::Group, "discord", 0)
    }
}

fn incidents() -> ApiRow {
    listed(INCIDENTS, "#incidents", SessionKind::Group, "discord", MIN)
}

/// What main's scripted agent does with the owner's message: `/send` sets the session's
/// policy (and says so), anything else is answered `pong: <text>`.
fn main_agent(api: &FakeApi, r: &SendRequest) -> Option<String> {
    let Some(arg) = r.text.strip_prefix("/send ") else {
        api.append(
            &r.key,
            LineRole::Assistant,
            "agent",
            &format!("pong: {}", r.text),
        );
        return None;
    };
    let (view, word) = match arg.trim() {
        "off" => (
            policy("deny", "override", "override (set on this session)"),
            "off",
        ),
        "on" => (
            policy("allow", "override", "override (set on this session)"),
            "on",
        ),
        _ => (
            policy("allow", "default", "default (session.sendPolicy.default)"),
            "inherit",
        ),
    };
    api.set_policy(&r.key, view, "/send");
    let reply = format!("⚙️ Send policy set to {word}.");
    api.append(&r.key, LineRole::Assistant, "agent", &reply);
    Some(reply)
}

/// A fake holding `rows` (newest first) and what was said in them, in order:
/// `(key, from, text)`, `from == "agent"` being the agent's reply.
fn fake(rows: Vec<ApiRow>, said: &[(&str, &str, &str)]) -> FakeApi {
    let mut data = fake_api::Data {
        rows,
        ..fake_api::Data::default()
    };
    for (key, from, text) in said {
        let lines = data.lines.entry(key.to_string()).or_default();
        let seq = lines.len() as i64 + 1;
        lines.push(ApiLine {
            role: if *from == "agent" {
                LineRole::Assistant
            } else {
                LineRole::User
            },
            from: from.to_string(),
            text: text.to_string(),
            ..fake_api::line(key, seq)
        });
    }
    for r in &data.rows {
        data.lines.entry(r.key.clone()).or_default();
    }
    let api = FakeApi::new(data);
    api.on_send(main_agent);
    api
}

/// `hello` from Alice and main's answer.
fn hello() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![(MAIN, "alice", "hello"), (MAIN, "agent", "pong: hello")]
}

/// A console on a fake API, driven the way the app loop drives it.
struct Harness {
    d: Driver,
    api: Arc<FakeApi>,
}

/// Wait for the console to settle from synchronous test code (the harness tests run on a
/// multi-threaded runtime, so this thread may block while the loads run on the others).
fn block_on_settle(d: &mut Driver) {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(d.settle()));
}

fn fresh_state() -> State {
    let mut state = State::new("/srv/switchboard/state".to_string(), NOW);
    state.width = 120;
    state.height = 40;
    state
}

impl Harness {
    /// A console opened on `api`'s sessions, everything it asked for loaded.
    fn new(api: FakeApi) -> Harness {
        let api = Arc::new(api);
        let mut d = Driver::new(api.clone(), fresh_state());
        block_on_settle(&mut d);
        Harness { d, api }
    }

    /// Hand every queued event and background report to the console, and wait for the
    /// loads they call for.
    fn pump(&mut self) {
        block_on_settle(&mut self.d);
    }

    /// Pump until `done` holds (up to 15 s; nothing is timed).
    async fn until(&mut self, what: &str, done: impl Fn(&State) -> bool) {
        for _ in 0..750 {
            self.d.settle().await;
            if done(&self.d.console.state) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for {what}; screen:\n{}", self.screen());
    }

    fn act(&mut self, a: Action) {
        self.d.act(a);
        block_on_settle(&mut self.d);
    }

    fn intent(&mut self, i: Intent) {
        self.act(Action::Intent(i));
    }

    fn key(&mut self, code: KeyCode) {
        self.act(Action::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }

    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.d.act(Action::Key(KeyEvent::new(
                KeyCode::Char(c),
                KeyModifiers::NONE,
            )));
        }
        block_on_settle(&mut self.d);
    }

    fn select(&mut self, key: &str) {
        self.pump();
        let i = self
            .d
            .console
            .state
            .sessions
            .rows
            .iter()
            .position(|r| r.key == key)
            .unwrap_or_else(|| panic!("{key} is not listed"));
        self.intent(Intent::Top);
        for _ in 0..i {
            self.intent(Intent::Down);
        }
        assert_eq!(self.d.console.state.sessions.selected_key(), Some(key));
    }

    fn screen(&self) -> String {
        let s = &self.d.console.state;
        screen(s, s.width, s.height)
    }

    /// The messages the console sent, as `(key, text, as the owner)`.
    fn sent(&self) -> Vec<(String, String, bool)> {
        let data = self.api.data.lock().expect("fake lock");
        data.sent
            .iter()
            .map(|r| (r.key.clone(), r.text.clone(), r.from.owner))
            .collect()
    }

    fn tool_calls(&self) -> Vec<ToolCall> {
        self.api.data.lock().expect("fake lock").tool_calls.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_refusal_says_how_to_change_it_at_120_columns() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    // The event the engine sends when the demo's #random refuses a send.
    h.api.emit(EngineEvent::PolicyDecision {
        key: RANDOM.to_string(),
        action: "send".parse().unwrap(),
        allowed: false,
        source: "rule 1 (channel=discord chatType=group keyPrefix=discord:group:random)"
            .to_string(),
        requester: None,
    });
    h.pump();
    let shown = h.screen();
    let status = row(&shown, 38);
    assert!(status.contains("/send on"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_sends_into_the_selected_session_as_the_owner() {
    let mut h = Harness::new(fake(
        vec![alice()],
        &[
            (MAIN, "alice", "hello there"),
            (MAIN, "agent", "pong: hello there"),
        ],
    ));
    h.select(MAIN);
    h.intent(Intent::Compose);
    assert_eq!(h.d.console.state.focus, Focus::Composer);
    h.type_text("status?");
    h.key(KeyCode::Enter);
    assert_eq!(
        h.d.console.state.composer.text(),
        "",
        "the composer is cleared"
    );
    assert_eq!(h.d.console.state.composer.error, None);
    h.until("the owner's message, the reply and the receipt", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "status?" && l.from == "owner")
            && s.transcript.lines.iter().any(|l| l.text == "pong: status?")
            && s.flash
                .as_ref()
                .is_some_and(|f| f.text.starts_with("sent to"))
    })
    .await;
    // Sent once, into the selected session, as the owner.
    assert_eq!(h.sent(), [(MAIN.to_string(), "status?".to_string(), true)]);
    // History recall brings it back.
    h.key(KeyCode::Up);
    assert_eq!(h.d.console.state.composer.text(), "status?");
    h.pump();
    insta::assert_snapshot!(redact(&h.screen()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_send_off_changes_the_policy_and_the_status_line() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    h.select(MAIN);
    assert!(
        h.d.console
            .state
            .sessions
            .selected_policy
            .as_deref()
            .is_some_and(|p| p.starts_with("allow")),
        "{:?}",
        h.d.console.state.sessions.selected_policy
    );
    h.intent(Intent::Compose);
    h.type_text("/send off");
    h.key(KeyCode::Enter);
    assert_eq!(h.d.console.state.composer.error, None);
    h.until("the override to show", |s| {
        s.sessions
            .rows
            .iter()
            .any(|r| r.key == MAIN && r.policy.as_str() == "deny" && r.policy_override)
    })
    .await;
    h.until("the command's reply in the status line", |s| {
        s.flash
            .as_ref()
            .is_some_and(|f| f.text.contains("Send policy set to off"))
    })
    .await;
    // The command went to the engine as the owner's message.
    assert_eq!(
        h.sent(),
        [(MAIN.to_string(), "/send off".to_string(), true)]
    );
    let policy =
        h.d.console
            .state
            .sessions
            .selected_policy
            .clone()
            .unwrap_or_default();
    assert!(policy.starts_with("deny"), "{policy}");
    let shown = h.screen();
    assert!(shown.contains("deny*"), "{shown}");
    // Once the flash is gone the status line shows the effective policy and its source.
    h.pump();
    h.d.console.state.flash = None;
    let shown = h.screen();
    let status = row(&shown, 37);
    assert!(
        status.contains("send: deny · set here with /send off"),
        "{status}"
    );
    insta::assert_snapshot!(redact(&shown));

    // And `/send inherit` gives the decision back to the config.
    h.type_text("/send inherit");
    h.key(KeyCode::Enter);
    h.until("the override to go", |s| {
        s.sessions
            .rows
            .iter()
            .any(|r| r.key == MAIN && r.policy.as_str() == "allow" && !r.policy_override)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_slash_commands_and_empty_messages_give_inline_errors() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    h.select(MAIN);
    h.intent(Intent::Compose);

    let mut errors = Vec::new();
    for input in [
        "/send maybe",
        "/frobnicate now",
        "",
        "   ",
        "/spawn",
        "/ask",
        "/ask agent:ops:main",
    ] {
        h.d.console.state.composer.set_text("");
        h.d.console.state.composer.error = None;
        h.type_text(input);
        h.key(KeyCode::Enter);
        let err =
            h.d.console
                .state
                .composer
                .error
                .clone()
                .unwrap_or_else(|| panic!("{input:?} gives no inline error"));
        errors.push(format!("{input:?} → {err}"));
        // Nothing was sent and the console is still usable.
        assert_eq!(h.d.console.state.focus, Focus::Composer);
    }
    h.pump();
    // None of these went out, as a message or as a tool call.
    assert_eq!(h.sent(), []);
    assert!(h.tool_calls().is_empty(), "{:?}", h.tool_calls());
    insta::assert_snapshot!("inline_errors", errors.join("\n"));

    // The error is shown in the composer, and typing clears it.
    h.d.console.state.composer.set_text("");
    h.type_text("/send maybe");
    h.key(KeyCode::Enter);
    let shown = h.screen();
    assert!(shown.contains("│✗ Usage: /send on|off|inherit"), "{shown}");
    insta::assert_snapshot!("inline_error_screen", redact(&shown));
    h.key(KeyCode::Backspace);
    assert_eq!(h.d.console.state.composer.error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_without_any_session_says_so() {
    let mut h = Harness::new(fake(Vec::new(), &[]));
    h.intent(Intent::Compose);
    h.type_text("hello?");
    h.key(KeyCode::Enter);
    let err = h.d.console.state.composer.error.clone().unwrap_or_default();
    assert!(err.contains("No session selected"), "{err}");
    // The text is kept so it can be sent once a session is picked.
    assert_eq!(h.d.console.state.composer.text(), "hello?");
    assert_eq!(h.sent(), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_completion_and_help() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    h.select(MAIN);
    h.intent(Intent::Compose);
    h.type_text("/se");
    h.key(KeyCode::Tab);
    assert_eq!(h.d.console.state.composer.text(), "/send ");
    h.d.console.state.composer.set_text("");
    h.type_text("/help");
    h.key(KeyCode::Enter);
    assert!(h.d.console.state.help);
    assert_eq!(h.d.console.state.composer.text(), "");
    assert_eq!(h.sent(), [], "/help is the console's own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_by_policy_says_why_and_the_console_goes_on() {
    let mut said = hello();
    said.push((RANDOM, "dev_kim", "lunch?"));
    let mut h = Harness::new(fake(vec![alice(), random()], &said));
    // What the engine's sessions_send answers for a target its policy closes.
    h.api.set_tool_result(Ok(json!({
        "status": "forbidden",
        "error": format!(
            "send blocked by session policy: {RANDOM} does not accept sends: rule 1 \
             (channel=discord chatType=group keyPrefix=discord:group:random). The owner can \
             allow it with \"/send on\" in that session or `switchboard sessions patch {RANDOM} \
             --send-policy allow`."
        ),
    })));
    h.select(MAIN);
    h.intent(Intent::Compose);
    h.type_text(&format!("/ask {RANDOM} maintenance tonight"));
    h.key(KeyCode::Enter);
    assert_eq!(h.d.console.state.composer.error, None);
    h.until("a red flash", |s| s.flash.as_ref().is_some_and(|f| f.error))
        .await;
    let flash = h.d.console.state.flash.clone().expect("flash");
    assert!(
        flash.text.contains("forbidden") || flash.text.contains("refused"),
        "{flash:?}"
    );
    // It says how to change it (the screen may cut it).
    assert!(flash.text.contains("/send on"), "{flash:?}");
    // Asked as main's agent, through the tool; no message went out.
    let calls = h.tool_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].tool, "sessions_send");
    assert_eq!(calls[0].requester, MAIN);
    assert_eq!(calls[0].params["sessionKey"], RANDOM);
    assert_eq!(calls[0].params["message"], "maintenance tonight");
    assert_eq!(h.sent(), []);
    h.pump();
    let shown = h.screen();
    // The status line (above the notice line): the policy slot, then the answer.
    let status = row(&shown, 37);
    assert!(status.contains(" ✗ "), "{status}");
    insta::assert_snapshot!(redact(&shown));
    // Not stuck: the composer takes the next message.
    assert_eq!(h.d.console.state.focus, Focus::Composer);
    h.type_text("still here");
    h.key(KeyCode::Enter);
    h.until("the next message's reply", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "pong: still here")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composer_newlines_history_and_paste_into_the_filter() {
    let mut said = hello();
    said.push((RANDOM, "dev_kim", "lunch?"));
    let mut h = Harness::new(fake(vec![alice(), random()], &said));
    h.intent(Intent::Compose);
    h.type_text("one");
    h.d.act(Action::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::ALT,
    )));
    h.type_text("two");
    h.d.act(Action::Key(KeyEvent::new(
        KeyCode::Char('j'),
        KeyModifiers::CONTROL,
    )));
    h.type_text("three");
    assert_eq!(h.d.console.state.composer.text(), "one\ntwo\nthree");
    // The box grows: each line on a row of its own.
    let screen = h.screen();
    for l in ["│one", "│two", "│three"] {
        assert!(screen.contains(l), "{l} in\n{screen}");
    }
    h.key(KeyCode::Enter);
    h.until("the three-line message", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "one\ntwo\nthree")
    })
    .await;
    assert_eq!(
        h.sent(),
        [(MAIN.to_string(), "one\ntwo\nthree".to_string(), true)],
        "one message, newlines kept"
    );
    // History: up recalls, down goes back to a fresh message.
    h.type_text("draft");
    h.key(KeyCode::Up);
    assert_eq!(h.d.console.state.composer.text(), "one\ntwo\nthree");
    h.key(KeyCode::Down);
    assert_eq!(h.d.console.state.composer.text(), "");
    // Esc leaves the composer; a paste into the filter box takes its first line only.
    h.key(KeyCode::Esc);
    assert_eq!(h.d.console.state.focus, Focus::Sessions);
    h.intent(Intent::Filter);
    h.d.act(Action::Paste("Alice\nsecond line".to_string()));
    h.pump();
    assert_eq!(h.d.console.state.sessions.filter, "Alice");
    let keys: Vec<&str> =
        h.d.console
            .state
            .sessions
            .rows
            .iter()
            .map(|r| r.key.as_str())
            .collect();
    assert_eq!(keys, [MAIN]);
}

/// Thirty messages from Alice, each answered.
fn thirty_messages() -> FakeApi {
    let texts: Vec<(String, String)> = (0..30)
        .map(|i| (format!("message {i}"), format!("pong: message {i}")))
        .collect();
    let mut said = Vec::new();
    for (m, reply) in &texts {
        said.push((MAIN, "alice", m.as_str()));
        said.push((MAIN, "agent", reply.as_str()));
    }
    fake(vec![alice()], &said)
}

/// A message from Alice arrives, and main answers it.
fn alice_says(api: &FakeApi, text: &str) {
    api.append(MAIN, LineRole::User, "alice", text);
    api.append(MAIN, LineRole::Assistant, "agent", &format!("pong: {text}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_up_pauses_follow_and_the_end_resumes_it() {
    let mut h = Harness::new(thirty_messages());
    h.intent(Intent::FocusNext);
    assert_eq!(h.d.console.state.focus, Focus::Transcript);
    assert!(h.d.console.state.transcript.follow);
    assert!(h.screen().contains("pong: message 29"));
    h.intent(Intent::PageUp);
    assert!(
        !h.d.console.state.transcript.follow,
        "scrolling up pauses follow"
    );
    let shown = h.screen();
    assert!(shown.contains("follow:off"), "{shown}");
    assert!(!shown.contains("pong: message 29"), "{shown}");
    // New messages do not take the paused view to the end.
    alice_says(&h.api, "message 30");
    h.until("the new message loaded", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "pong: message 30")
    })
    .await;
    assert!(!h.d.console.state.transcript.follow);
    assert!(!h.screen().contains("pong: message 30"));
    h.intent(Intent::Bottom);
    assert!(
        h.d.console.state.transcript.follow,
        "the end resumes follow"
    );
    assert!(h.screen().contains("pong: message 30"));
    // Focus cycles through every pane and back (the composer has its own key).
    for expected in [Focus::Rounds, Focus::Sessions] {
        h.intent(Intent::FocusNext);
        assert_eq!(h.d.console.state.focus, expected);
    }
    h.intent(Intent::FocusPrev);
    assert_eq!(h.d.console.state.focus, Focus::Rounds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_transcript_stays_put_when_messages_arrive() {
    let mut h = Harness::new(thirty_messages());
    h.intent(Intent::FocusNext);
    h.intent(Intent::PageUp);
    assert!(!h.d.console.state.transcript.follow);
    let before = transcript_pane(&h.screen());
    alice_says(&h.api, "message 30");
    h.until("the new message loaded", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "pong: message 30")
    })
    .await;
    let after = transcript_pane(&h.screen());
    assert_eq!(
        redact(&before),
        redact(&after),
        "the paused view stays where it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paste_of_one_megabyte_is_one_composer_text() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    h.select(MAIN);
    let line = "0123456789abcdefghijklmnopqrstuvwxyz ".repeat(2); // 74 bytes
    let mut paste = String::new();
    while paste.len() < 1_000_000 {
        paste.push_str(&line);
        paste.push_str("\r\n");
    }
    h.d.act(Action::Paste(paste.clone()));
    h.pump();
    let s = &h.d.console.state;
    assert_eq!(s.focus, Focus::Composer, "a paste goes to the composer");
    let expected = paste.replace("\r\n", "\n");
    assert_eq!(s.composer.text(), expected, "one text, newlines kept");
    let shown = h.screen();
    assert!(
        shown.contains("· line "),
        "the box says where in the draft: {shown}"
    );
    // Sent as one message.
    h.key(KeyCode::Enter);
    h.until("the pasted message in the transcript", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.role == "user" && l.from == "owner" && l.text.len() > 900_000)
    })
    .await;
    // Trailing newlines are trimmed before sending, as for any message.
    assert_eq!(
        h.sent(),
        [(MAIN.to_string(), expected.trim().to_string(), true)]
    );
    let _ = h.screen();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_and_binary_garbage_are_shown_not_executed() {
    let garbage = "red \u{1b}[31mALERT\u{1b}[0m bell\u{7} nul\u{0} csi\u{9b}2J del\u{7f} \u{1b}]0;pwned\u{7} end";
    let reply = format!("pong: {garbage}");
    let mut h = Harness::new(fake(
        vec![alice()],
        &[(MAIN, "mallory\u{1b}[2J", garbage), (MAIN, "agent", &reply)],
    ));
    h.select(MAIN);
    h.pump();
    let buf = render(&h.d.console.state, 120, 40);
    let shown = text(&buf);
    assert!(shown.contains("^[[31mALERT^[[0m bell^G nul^@"), "{shown}");
    assert!(shown.contains("mallory^[[2J"), "{shown}");
    // No cell holds a control character.
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let sym = buf[(x, y)].symbol();
            assert!(
                !sym.chars().any(|c| c.is_control()),
                "control character at {x},{y}: {sym:?}"
            );
        }
    }
    insta::assert_snapshot!(redact(&shown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_overrides_and_invisible_characters_are_shown_not_obeyed() {
    let hostile = "x\u{1b}]0;PWNED\u{7}\u{1b}]52;c;ZWNobyBQV05FRA==\u{7}\u{1b}[2J\r\u{8} \
                   csi\u{9b}2J rlo\u{202e}txt.exe zw\u{200b}sp";
    let reply = format!("pong: {hostile}");
    // Short: the sessions pane's name column is 16 cells wide here.
    let row = listed(MAIN, "\u{202e}\u{200b}", SessionKind::Main, "telegram", 0);
    let mut h = Harness::new(fake(
        vec![row],
        &[
            (MAIN, "mal\u{200b}lory\u{202e}", hostile),
            (MAIN, "agent", &reply),
        ],
    ));
    h.select(MAIN);
    h.pump();
    // Pasted into the composer too: the owner's own text is shown the same way.
    h.intent(Intent::Compose);
    h.d.act(Action::Paste("paste\u{202e}\u{1b}[2J".to_string()));
    h.pump();
    let buf = render(&h.d.console.state, 120, 40);
    let shown = text(&buf);
    assert!(
        shown.contains("rlo\\u{202e}txt.exe zw\\u{200b}sp"),
        "{shown}"
    );
    assert!(shown.contains("main  \\u{202e}\\u{200"), "{shown}");
    assert!(shown.contains("mal\\u{200b}lory\\u{202e}"), "{shown}");
    assert!(shown.contains("paste\\u{202e}^[[2J"), "{shown}");
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let sym = buf[(x, y)].symbol();
            assert!(
                !sym.chars().any(switchboard_types::text_safety::is_unsafe),
                "unsafe character at {x},{y}: {sym:?}"
            );
        }
    }
    insta::assert_snapshot!(redact(&shown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_session_deleted_meanwhile_does_not_panic() {
    let mut said = hello();
    said.push((INCIDENTS, "dev_kim", "disk alert"));
    let mut h = Harness::new(fake(vec![alice(), incidents()], &said));
    h.select(MAIN);
    h.api.remove(MAIN);
    h.until("the deleted session to leave the list", |s| {
        s.sessions.rows.iter().all(|r| r.key != MAIN)
    })
    .await;
    let s = &h.d.console.state;
    assert!(s.sessions.selected < s.sessions.rows.len().max(1));
    assert_ne!(s.sessions.selected_key(), Some(MAIN));
    let shown = h.screen();
    assert!(!shown.contains("pong: hello"), "{shown}");
    // Moving around and sending still work: the message goes to the session now selected.
    h.intent(Intent::Down);
    h.intent(Intent::Up);
    h.intent(Intent::Compose);
    h.type_text("anyone?");
    h.key(KeyCode::Enter);
    h.until("the message in #incidents", |s| {
        s.transcript.lines.iter().any(|l| l.text == "anyone?")
    })
    .await;
    assert_eq!(
        h.sent(),
        [(INCIDENTS.to_string(), "anyone?".to_string(), true)]
    );
    let _ = h.screen();

    // The last session deleted too: an empty console, no panic.
    h.api.remove(INCIDENTS);
    h.until("an empty list", |s| s.sessions.rows.is_empty())
        .await;
    let _ = h.screen();
    h.key(KeyCode::Enter);
    assert_eq!(h.sent().len(), 1, "nothing more was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_change_reloads_the_list() {
    // Another process changed the state folder: the console is told only that something
    // changed (`ExternalChange`), and reloads.
    let mut said = hello();
    said.push((INCIDENTS, "dev_kim", "disk alert"));
    let mut h = Harness::new(fake(vec![alice(), incidents()], &said));
    h.select(INCIDENTS);
    {
        let mut data = h.api.data.lock().expect("fake lock");
        data.rows.retain(|r| r.key != INCIDENTS);
        data.lines.remove(INCIDENTS);
    }
    h.pump();
    assert_eq!(h.d.console.state.sessions.rows.len(), 2, "nothing said yet");
    h.api.emit(EngineEvent::ExternalChange);
    h.until("the deletion noticed", |s| {
        s.sessions.rows.iter().all(|r| r.key != INCIDENTS)
    })
    .await;
    assert_eq!(h.d.console.state.sessions.selected_key(), Some(MAIN));
    assert!(h.screen().contains("pong: hello"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_already_going_when_the_console_opens_show_as_running() {
    // No RunStarted event reaches a console opened after the run began: the page says it.
    let mut busy = incidents();
    busy.running = true;
    let mut h = Harness::new(fake(vec![alice(), busy], &hello()));
    h.pump();
    assert!(h.d.console.state.sessions.running.contains(INCIDENTS));
    assert!(h.screen().contains("1 running"), "{}", h.screen());
    // And a page saying it ended clears it, events or not.
    {
        let mut data = h.api.data.lock().expect("fake lock");
        for r in data.rows.iter_mut() {
            r.running = false;
        }
    }
    h.api.emit(EngineEvent::ExternalChange);
    h.until("the run seen ended", |s| s.sessions.running.is_empty())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_to_10x5_shows_the_too_small_notice() {
    let mut h = Harness::new(fake(vec![alice()], &hello()));
    h.d.act(Action::Resize(10, 5));
    h.pump();
    assert_eq!((h.d.console.state.width, h.d.console.state.height), (10, 5));
    let shown = h.screen();
    assert!(shown.starts_with("Terminal"), "{shown}");
    insta::assert_snapshot!(shown);
    // Clicks and scrolling at that size do not panic either.
    h.d.act(Action::Click(3, 3));
    h.intent(Intent::PageDown);
    h.d.act(Action::Resize(120, 40));
    h.pump();
    assert!(h.screen().contains("Sessions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toggles_and_filters_through_update() {
    let mut said = hello();
    said.push((RANDOM, "dev_kim", "lunch?"));
    let mut h = Harness::new(fake(vec![random(), alice()], &said));
    assert_eq!(h.d.console.state.sessions.rows.len(), 2);

    h.intent(Intent::ToggleTools);
    assert!(h.d.console.state.transcript.tools);
    assert!(h.screen().contains("tools:on"));

    h.intent(Intent::Filter);
    assert_eq!(h.d.console.state.focus, Focus::Filter);
    h.type_text("rand");
    let keys: Vec<&str> =
        h.d.console
            .state
            .sessions
            .rows
            .iter()
            .map(|r| r.key.as_str())
            .collect();
    assert_eq!(keys, [RANDOM]);
    h.key(KeyCode::Esc);
    assert_eq!(h.d.console.state.sessions.filter, "");
    assert_eq!(h.d.console.state.sessions.rows.len(), 2);

    h.intent(Intent::CycleKind); // main
    let kinds: Vec<SessionKind> =
        h.d.console
            .state
            .sessions
            .rows
            .iter()
            .map(|r| r.kind)
            .collect();
    assert_eq!(kinds, [SessionKind::Main]);
    h.intent(Intent::CycleKind); // group
    let kinds: Vec<SessionKind> =
        h.d.console
            .state
            .sessions
            .rows
            .iter()
            .map(|r| r.kind)
            .collect();
    assert_eq!(kinds, [SessionKind::Group]);
    assert!(h.screen().contains("[group]"));
}

/// Every pane's rectangle fits the screen at the sizes the console supports.
#[test]
fn regions_fit_the_screen() {
    for (w, h) in [(60, 16), (80, 24), (120, 40), (300, 100)] {
        let r = view::regions(w, h);
        let screen = Rect::new(0, 0, w, h);
        for rect in [
            r.header,
            r.sessions,
            r.transcript,
            r.rounds,
            r.composer,
            r.status,
            r.hints,
        ] {
            assert_eq!(screen.intersection(rect), rect, "{w}×{h}: {rect:?}");
            assert!(rect.height > 0, "{w}×{h}: {rect:?}");
        }
    }
}
