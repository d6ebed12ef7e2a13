//! Exchanges in the console (issue 14 item 2): the rounds pane lists exchanges paged from
//! the API with a cursor and times, refused and chain-stopped sends as their own entries,
//! the next page loaded as the cursor nears the end, kept current by events; Enter opens the
//! exchange view (every turn, how it ended, the announce), `1`/`2` jump to either session,
//! Esc closes; an exchange that vanished or a session deleted meanwhile says so inline.
//! Driven over the fake API (`tests/common/fake_api.rs`), and once over a real engine.
//!
//! Snapshots live in tests/tui/snapshots/ (`INSTA_UPDATE=always cargo test --test tui tui_exchanges::`,
//! then read every changed `.snap`). Times are fixed (UTC), nothing is timed.

use crate::common;
use crate::common::screen::screen;

use std::collections::HashSet;
use std::sync::Arc;

use crossterm::event::KeyCode;
use serde_json::json;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::state::{Focus, State};
use switchboard_types::api::{
    EngineEvent, ExchangeAnnounce, ExchangeDetail, ExchangeSummary, ExchangeTurn, SessionKind,
    SessionsApi, ToolCall,
};

use common::console_driver::Driver;
use common::fake_api::{self, FakeApi};

/// 2025-06-15 15:06:40 UTC.
const NOW: i64 = 1_750_000_000_000;
const SEC: i64 = 1_000;
const MIN: i64 = 60 * SEC;

const ALICE: &str = "agent:main:telegram:direct:alice";
const OPS: &str = "agent:ops:main";
const RESEARCH: &str = "agent:research:main";

/// An exchange between two sessions (also the navigation tests').
pub(crate) fn summary(
    id: &str,
    kind: &str,
    requester: &str,
    target: &str,
    at: i64,
) -> ExchangeSummary {
    ExchangeSummary {
        id: id.into(),
        kind: kind.parse().unwrap(),
        requester: requester.into(),
        target: target.into(),
        message: String::new(),
        started_at: at,
        ended_at: Some(at + 4 * SEC),
        status: "done".parse().unwrap(),
        rounds: 0,
        ended_reason: None,
        detail: String::new(),
        announce: None,
    }
}

/// Newest first: a send at the cap, a refused send, a chain-stopped send, a REPLY_SKIP one.
fn exchanges() -> Vec<ExchangeSummary> {
    vec![
        ExchangeSummary {
            message: "is INC-4821 under control?".into(),
            rounds: 5,
            ended_reason: Some("cap".parse().unwrap()),
            detail: "maxPingPongTurns reached (4 turns after the first reply)".into(),
            announce: Some("delivered".parse().unwrap()),
            ..summary("x4", "send", ALICE, OPS, NOW - 2 * MIN)
        },
        ExchangeSummary {
            message: "let me in".into(),
            status: "refused".parse().unwrap(),
            ended_reason: Some("policy".parse().unwrap()),
            detail: "send blocked by session policy: agent:research:main does not accept sends: set here with /send off".into(),
            ..summary("x3", "refused", OPS, RESEARCH, NOW - 3 * MIN)
        },
        ExchangeSummary {
            message: "pass it on".into(),
            status: "refused".parse().unwrap(),
            ended_reason: Some("chain".parse().unwrap()),
            detail: "13 sends > session.agentToAgent.maxChainHops 12 (chain c-1)".into(),
            ..summary("x2", "chain", RESEARCH, ALICE, NOW - 4 * MIN)
        },
        ExchangeSummary {
            message: "churn for last week?".into(),
            rounds: 3,
            ended_reason: Some("reply_skip".parse().unwrap()),
            detail: "agent:research:main replied REPLY_SKIP in round 3".into(),
            announce: Some("skipped".parse().unwrap()),
            ..summary("x1", "send", ALICE, RESEARCH, NOW - 9 * MIN)
        },
    ]
}

fn turn(round: u32, speaker: &str, listener: &str, text: &str, at: i64) -> ExchangeTurn {
    ExchangeTurn {
        round,
        speaker: speaker.into(),
        listener: listener.into(),
        run_id: format!("run-{round}"),
        status: "ok".parse().unwrap(),
        text: text.into(),
        error: None,
        started_at: at,
        ended_at: Some(at + 1_200),
        tokens_in: Some(100 * round as u64),
        tokens_out: Some(20 + round as u64),
    }
}

/// `x4` in full: five rounds between Alice and ops, the last one long.
fn detail_x4() -> ExchangeDetail {
    let s = exchanges().remove(0);
    let t0 = s.started_at;
    ExchangeDetail {
        turns: vec![
            turn(
                1,
                OPS,
                ALICE,
                "p95 checkout latency is back to 310 ms.",
                t0 + SEC,
            ),
            turn(2, ALICE, OPS, "Thanks. Is a rollback staged?", t0 + 3 * SEC),
            turn(
                3,
                OPS,
                ALICE,
                "Yes: a rollback to 2025.06.2 is staged.",
                t0 + 5 * SEC,
            ),
            turn(
                4,
                ALICE,
                OPS,
                "Great, I'll tell the customer-facing folks.",
                t0 + 7 * SEC,
            ),
            turn(
                5,
                OPS,
                ALICE,
                "Timeline so far:\n- 14:02 alerts fired on checkout p95\n- 14:05 cache node eu-3 drained\n- 14:09 p95 back under 400 ms\n- 14:20 rollback staged, not applied\nNext: a postmortem on Thursday, owners ops and payments; the dashboard link is in the incident channel. \u{1b}[31mnot red\u{1b}[0m",
                t0 + 9 * SEC,
            ),
        ],
        announce: Some(ExchangeAnnounce {
            outcome: "delivered".parse().unwrap(),
            text: Some("INC-4821 is mitigated; rollback staged.".into()),
            channel: Some("slack".into()),
            to: Some("group:incidents".into()),
            detail: "queued for slack group:incidents".into(),
            delivery: None,
        }),
        summary: s,
    }
}

fn fake() -> FakeApi {
    let mut data = fake_api::Data::default();
    for (i, (key, name)) in [(ALICE, "Alice"), (OPS, "ops"), (RESEARCH, "research")]
        .into_iter()
        .enumerate()
    {
        data.rows.push(fake_api::row(
            key,
            name,
            SessionKind::Main,
            NOW - i as i64 * MIN,
        ));
    }
    data.exchanges = exchanges();
    data.exchange_details.insert("x4".into(), detail_x4());
    FakeApi::new(data)
}

fn state(w: u16, h: u16) -> State {
    let mut s = State::new("/srv/switchboard/state".to_string(), NOW);
    s.width = w;
    s.height = h;
    s
}

/// A console on `api`, everything loaded, the rounds pane showing all exchanges and focused.
async fn console(api: Arc<dyn SessionsApi>, w: u16, h: u16) -> Driver {
    let mut d = Driver::new(api, state(w, h));
    d.settle().await;
    d.intent(Intent::ToggleRoundsScope);
    d.console.state.focus = Focus::Rounds;
    d.settle().await;
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_pane_has_a_cursor_times_and_refused_and_chain_entries() {
    let mut d = console(Arc::new(fake()), 120, 40).await;
    d.intent(Intent::Down);
    d.settle().await;
    let s = &d.console.state;
    assert_eq!(s.rounds.exchanges.entries.len(), 4);
    assert_eq!(s.rounds.exchanges.cursor, 1);
    let shown = screen(s, 120, 40);
    assert!(shown.contains("4 exchanges"), "{shown}");
    assert!(
        // Sessions by the names the sessions pane shows (issue 26), not keys cut from the left.
        shown.contains("15:04 Alice → ops · 5 rounds · cap reached"),
        "{shown}"
    );
    assert!(shown.contains("refused by policy"), "{shown}");
    assert!(shown.contains("chain limit"), "{shown}");
    assert!(
        shown.contains("✗ 13 sends > session.agentToAgent.maxChainHops 12"),
        "{shown}"
    );
    // Every header is directly above its second line: no orphan lines.
    let lines: Vec<&str> = shown.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("“") || l.contains("✗ ") {
            assert!(
                lines[i - 1].contains(" → "),
                "orphan line {i}: {l}\n{shown}"
            );
        }
    }
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_session_shows_only_its_exchanges_and_a_toggles_all() {
    let api = Arc::new(fake());
    let mut d = Driver::new(api, state(120, 40));
    d.settle().await;
    // Alice (newest) is selected: three of the four exchanges involve her.
    assert_eq!(d.console.state.sessions.selected_key(), Some(ALICE));
    let ids: Vec<&str> = d
        .console
        .state
        .rounds
        .exchanges
        .entries
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(ids, ["x4", "x2", "x1"]);
    d.intent(Intent::ToggleRoundsScope);
    d.settle().await;
    assert_eq!(d.console.state.rounds.exchanges.entries.len(), 4);
    assert!(screen(&d.console.state, 120, 40).contains(" Rounds (all) · 4 "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_to_the_end_loads_the_next_page_and_each_exchange_comes_once() {
    let mut data = fake_api::Data::default();
    data.rows
        .push(fake_api::row(ALICE, "Alice", SessionKind::Main, NOW));
    let n = 250;
    data.exchanges = (0..n)
        .map(|i| ExchangeSummary {
            message: format!("message {i}"),
            rounds: 1,
            ended_reason: Some("reply_skip".parse().unwrap()),
            ..summary(
                &format!("e{i:03}"),
                "send",
                ALICE,
                OPS,
                NOW - i as i64 * SEC,
            )
        })
        .collect();
    let mut d = console(Arc::new(FakeApi::new(data)), 120, 40).await;
    assert_eq!(d.console.state.rounds.exchanges.entries.len(), 100);
    assert!(screen(&d.console.state, 120, 40).contains("100+ exchanges"));
    for _ in 0..3 {
        d.intent(Intent::Bottom);
        d.settle().await;
    }
    let s = &d.console.state;
    assert_eq!(s.rounds.exchanges.entries.len(), n);
    assert!(!s.rounds.exchanges.more);
    let ids: Vec<&str> = s
        .rounds
        .exchanges
        .entries
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    let unique: HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), n);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "newest first, in order");
    assert_eq!(s.rounds.exchanges.cursor, n - 1);
    let shown = screen(s, 120, 40);
    assert!(shown.contains("250 exchanges"), "{shown}");
    assert!(shown.contains("“message 249”"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_bring_new_exchanges_in_and_the_cursor_stays_on_its_exchange() {
    let api = Arc::new(fake());
    let mut d = console(api.clone(), 120, 40).await;
    d.intent(Intent::Down); // on x3
    api.data.lock().expect("fake").exchanges.insert(
        0,
        ExchangeSummary {
            message: "new one".into(),
            status: "running".parse().unwrap(),
            ..summary("x5", "send", OPS, ALICE, NOW - SEC)
        },
    );
    api.emit(EngineEvent::ExchangeStarted {
        exchange_id: "x5".into(),
        chain_id: "c".into(),
        hop: 1,
        requester: OPS.into(),
        target: ALICE.into(),
        message: "new one".into(),
        run_id: "r".into(),
        unattributed: false,
    });
    d.until("the new exchange", |s| {
        s.rounds.exchanges.entries.len() == 5
    })
    .await;
    let s = &d.console.state;
    assert_eq!(s.rounds.exchanges.entries[0].id, "x5");
    assert_eq!(
        s.rounds.exchanges.selected().map(|e| e.id.as_str()),
        Some("x3")
    );
    assert!(screen(s, 120, 40).contains("· 0 rounds · running"));
}

/// Enter on x4 opens it; the view at each size.
async fn opened(w: u16, h: u16) -> Driver {
    let mut d = console(Arc::new(fake()), w, h).await;
    d.intent(Intent::Open);
    d.settle().await;
    let v = d
        .console
        .state
        .rounds
        .exchange_view
        .as_ref()
        .expect("the view is open");
    assert_eq!(v.id(), "x4");
    assert!(v.detail.is_some());
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_view_120x40() {
    let d = opened(120, 40).await;
    let shown = screen(&d.console.state, 120, 40);
    for want in [
        "Round 1 · agent:ops:main → agent:main:telegram:direct:alice · 15:04:41 · 1.2 s · tokens 100/21 · ok",
        "Ended: cap reached · maxPingPongTurns reached",
        // The pair named as the sessions pane names it (before: the two keys).
        "│Alice → ops ",
        // One truth: the outbox holds it (no channel has sent it), said once.
        "Announce: queued for slack group:incidents",
        "[1] requester agent:main:telegram:direct:alice",
        "[2] target agent:ops:main",
        "1 requester · 2 target · j/k scroll · esc close",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
    // Agents' escape sequences are shown, not obeyed.
    assert!(!shown.contains('\u{1b}'), "{shown}");
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_view_80x24() {
    let d = opened(80, 24).await;
    insta::assert_snapshot!(screen(&d.console.state, 80, 24));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_view_60x16() {
    let d = opened(60, 16).await;
    let shown = screen(&d.console.state, 60, 16);
    assert!(shown.contains("1 requester · 2 target"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_exchange_scrolls_to_its_end() {
    let mut d = opened(80, 24).await;
    for _ in 0..5 {
        d.intent(Intent::PageDown);
    }
    let shown = screen(&d.console.state, 80, 24);
    assert!(
        shown.contains("Announce: queued for slack group:incidents"),
        "{shown}"
    );
    assert!(!shown.contains("delivered"), "{shown}");
    assert!(
        shown.contains("INC-4821 is mitigated; rollback staged."),
        "{shown}"
    );
    // At the end, down goes no further; up moves back one line at once.
    let at_end = d
        .console
        .state
        .rounds
        .exchange_view
        .as_ref()
        .expect("open")
        .scroll;
    d.intent(Intent::Down);
    assert_eq!(
        d.console
            .state
            .rounds
            .exchange_view
            .as_ref()
            .expect("open")
            .scroll,
        at_end
    );
    d.intent(Intent::Up);
    assert_eq!(
        d.console
            .state
            .rounds
            .exchange_view
            .as_ref()
            .expect("open")
            .scroll,
        at_end - 1
    );
    d.intent(Intent::Down);
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_and_two_jump_to_either_session_and_esc_closes() {
    let mut d = opened(120, 40).await;
    d.press(KeyCode::Char('2'));
    d.settle().await;
    let s = &d.console.state;
    assert!(s.rounds.exchange_view.is_none());
    assert_eq!(s.focus, Focus::Sessions);
    assert_eq!(s.sessions.selected_key(), Some(OPS));
    d.console.state.focus = Focus::Rounds;
    d.intent(Intent::Top);
    d.intent(Intent::Open);
    d.settle().await;
    d.press(KeyCode::Char('1'));
    d.settle().await;
    assert_eq!(d.console.state.sessions.selected_key(), Some(ALICE));
    d.console.state.focus = Focus::Rounds;
    d.intent(Intent::Open);
    d.settle().await;
    assert!(d.console.state.rounds.exchange_view.is_some());
    d.press(KeyCode::Esc);
    assert!(d.console.state.rounds.exchange_view.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_exchange_or_a_deleted_session_is_said_inline() {
    let api = Arc::new(fake());
    let mut d = console(api.clone(), 60, 16).await;
    d.intent(Intent::Open);
    d.settle().await;
    // Its requester is deleted while the view is open.
    api.remove(ALICE);
    d.settle().await;
    let shown = screen(&d.console.state, 60, 16);
    assert!(
        shown.contains("agent:main:telegram:direct:alice was"),
        "{shown}"
    );
    // Jumping to it now: the console says it is gone, nothing breaks.
    d.press(KeyCode::Char('1'));
    d.settle().await;
    assert!(
        d.flashes
            .iter()
            .any(|(t, e)| *e && t.contains("no longer exists"))
            || d.console
                .state
                .flash
                .as_ref()
                .is_some_and(|f| f.text.contains("no longer exists")),
        "{:?}",
        d.flashes
    );
    // The filter set to find it went again: the other sessions are listed.
    assert_eq!(d.console.state.sessions.filter, "");
    assert_eq!(d.console.state.sessions.selected_key(), Some(OPS));
    // The exchange itself vanishes while open.
    d.console.state.focus = Focus::Rounds;
    d.act(Action::Intent(Intent::ToggleRoundsScope));
    d.settle().await;
    d.console.state.focus = Focus::Rounds;
    d.intent(Intent::Top);
    d.intent(Intent::Open);
    d.settle().await;
    api.data.lock().expect("fake").exchange_details.clear();
    api.emit(EngineEvent::ExchangeEnded {
        exchange_id: "x4".into(),
        status: "done".parse().unwrap(),
        reason: "cap".parse().unwrap(),
    });
    d.settle().await;
    let shown = screen(&d.console.state, 60, 16);
    assert!(shown.contains("This exchange no longer exists"), "{shown}");
    insta::assert_snapshot!(shown);
}

/// Over a real engine: a waited send with a reply-back round, then the console lists it,
/// opens it and shows every turn, and a refused send beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_real_engine_the_exchange_opens_in_full() {
    let b = common::bench(json!({
        "session": { "agentToAgent": { "maxPingPongTurns": 1 } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [
                { "when": { "step": "reply" }, "reply": "REPLY_SKIP" },
            ] },
            { "id": "ops", "model": "scripted", "script": [
                { "when": { "step": "message" }, "reply": "ops heard: {{text}}", "tokens": { "in": 12, "out": 4 } },
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
            ] },
        ] },
    }));
    let api: Arc<dyn SessionsApi> = b.engine.start();
    let call = |params: serde_json::Value| ToolCall {
        tool: "sessions_send".into(),
        params,
        requester: "agent:main:main".into(),
        sandboxed: false,
    };
    let r = api
        .call_tool(call(
            json!({ "agentId": "ops", "message": "status?", "timeoutSeconds": 30 }),
        ))
        .await
        .expect("send");
    assert_eq!(r.result["status"], "ok", "{}", r.result);
    b.engine.idle().await;
    api.patch(switchboard_types::api::PatchRequest {
        key: "agent:ops:main".into(),
        send_policy: Some(switchboard_types::api::PolicySetting::Deny),
    })
    .await
    .expect("deny");
    let mut d = console(api.clone(), 120, 40).await;
    let r = api
        .call_tool(call(json!({ "agentId": "ops", "message": "again?" })))
        .await
        .expect("send");
    assert_eq!(r.result["status"], "forbidden", "{}", r.result);
    d.until("the refused send", |s| {
        s.rounds.exchanges.entries.len() == 2
    })
    .await;
    let kinds: Vec<&str> = d
        .console
        .state
        .rounds
        .exchanges
        .entries
        .iter()
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(kinds, ["refused", "send"]);
    d.intent(Intent::Down);
    d.intent(Intent::Open);
    d.until("the exchange in full", |s| {
        s.rounds
            .exchange_view
            .as_ref()
            .is_some_and(|v| v.detail.is_some())
    })
    .await;
    let shown = screen(&d.console.state, 120, 40);
    for want in [
        "agent:main:main → agent:ops:main",
        "Round 1 · agent:ops:main → agent:main:main",
        "tokens 12/4 · ok",
        "ops heard: status?",
        "Round 2 · agent:main:main → agent:ops:main",
        "Ended: REPLY_SKIP",
        "Announce: skipped",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
}

/// A sub-agent `n` spawned by `requester`.
fn spawned(requester: &str, n: usize) -> EngineEvent {
    EngineEvent::Spawned {
        requester: requester.into(),
        child: format!("agent:work:subagent:{n:02}"),
        run_id: format!("run-s{n}"),
        agent_id: "work".into(),
        label: Some(format!("task {n:02}")),
        task: String::new(),
        cleanup: "keep".parse().unwrap(),
    }
}

/// Issue 26 item 3: with more sub-agents than fit, the rounds pane shows the newest (the
/// owner's own `/spawn` from Alice's session among them) and says how many more there are.
/// It showed the oldest two of 17, sorted by parent, with nothing said of the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spawned_block_shows_the_newest_and_how_many_more() {
    let api = Arc::new(fake());
    let mut d = console(api.clone(), 120, 40).await;
    for n in 1..=17 {
        api.emit(spawned(OPS, n));
    }
    // The owner's own /spawn, last.
    api.emit(spawned(ALICE, 18));
    d.until("the sub-agents", |s| s.rounds.spawns.len() == 18)
        .await;
    let shown = screen(&d.console.state, 120, 40);
    assert!(shown.contains("task 18"), "the owner's own spawn:\n{shown}");
    assert!(!shown.contains("task 01"), "the oldest:\n{shown}");
    assert!(shown.contains("+17 more"), "{shown}");
    insta::assert_snapshot!("rounds_spawned_newest_with_more_120x40", shown);
    // Another one: it is the one shown now.
    api.emit(spawned(OPS, 19));
    d.until("the 19th", |s| s.rounds.spawns.len() == 19).await;
    let shown = screen(&d.console.state, 120, 40);
    assert!(shown.contains("task 19"), "{shown}");
    assert!(shown.contains("+18 more"), "{shown}");
}

/// Issue 26 item 3: exchanges that arrive while the cursor sits on an older one further
/// down are never out of sight unsaid: the pane says "N new above" until the cursor goes
/// up to them. Before, they arrived above the visible area with nothing on screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_exchanges_above_the_view_are_said() {
    let api = Arc::new(fake());
    // 80x24: the rounds pane fits two entries of two lines.
    let mut d = console(api.clone(), 80, 24).await;
    d.intent(Intent::Bottom); // on x1, the oldest
    d.settle().await;
    for n in 0..3 {
        let id = format!("n{n}");
        api.data.lock().expect("fake").exchanges.insert(
            0,
            ExchangeSummary {
                message: format!("new {n}"),
                ..summary(&id, "send", OPS, ALICE, NOW - SEC)
            },
        );
        api.emit(EngineEvent::ExchangeStarted {
            exchange_id: id,
            chain_id: "c".into(),
            hop: 1,
            requester: OPS.into(),
            target: ALICE.into(),
            message: format!("new {n}"),
            run_id: "r".into(),
            unattributed: false,
        });
    }
    d.until("the new exchanges", |s| {
        s.rounds.exchanges.entries.len() == 7
    })
    .await;
    let s = &d.console.state;
    assert_eq!(
        s.rounds.exchanges.selected().map(|e| e.id.as_str()),
        Some("x1")
    );
    let shown = screen(s, 80, 24);
    assert!(shown.contains("↑ 3 new above"), "{shown}");
    assert!(
        shown.contains("churn for last week?"),
        "the cursor's exchange:\n{shown}"
    );
    insta::assert_snapshot!("rounds_new_above_80x24", shown);
    // Up to them: seen, the line goes.
    d.intent(Intent::Top);
    d.settle().await;
    let shown = screen(&d.console.state, 80, 24);
    assert!(!shown.contains("new above"), "{shown}");
    assert!(shown.contains("“new 2”"), "{shown}");
}

/// Until the owner moves the rounds pane's cursor it follows the newest exchange: the pane
/// opens on the newest, and new ones arriving keep it there, in view (the demo said
/// "3 new above" on its first screen otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untouched_cursor_stays_on_the_newest() {
    let api = Arc::new(fake());
    let mut d = console(api.clone(), 80, 24).await;
    api.data.lock().expect("fake").exchanges.insert(
        0,
        ExchangeSummary {
            message: "newer".into(),
            ..summary("n0", "send", OPS, ALICE, NOW - SEC)
        },
    );
    api.emit(EngineEvent::ExternalChange);
    d.until("the new exchange", |s| {
        s.rounds.exchanges.entries.len() == 5
    })
    .await;
    let s = &d.console.state;
    assert_eq!(
        s.rounds.exchanges.selected().map(|e| e.id.as_str()),
        Some("n0")
    );
    assert!(!screen(s, 80, 24).contains("new above"));
}

/// Issue 26 item 3: the header's exchange count names its scope when it is one session's;
/// the session count beside it is global. `/Sam` showed "0 exchanges" while there were 12.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_headers_exchange_count_names_its_scope() {
    let mut d = Driver::new(Arc::new(fake()), state(120, 40));
    d.settle().await;
    // This session's (Alice is selected, the newest): x4, x2, x1 touch her.
    let shown = screen(&d.console.state, 120, 40);
    let header = shown.lines().next().unwrap_or_default();
    assert!(header.contains("3 sessions"), "{header}");
    assert!(header.contains("3 exchanges (Alice)"), "{header}");
    d.intent(Intent::ToggleRoundsScope);
    d.settle().await;
    let shown = screen(&d.console.state, 120, 40);
    let header = shown.lines().next().unwrap_or_default();
    assert!(header.contains("4 exchanges"), "{header}");
    assert!(
        !header.contains('('),
        "all exchanges: no scope named\n{header}"
    );
}
