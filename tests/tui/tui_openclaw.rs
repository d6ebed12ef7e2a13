//! The rounds pane, the exchange view, the traffic view (loop mark, stop and undo) and the
//! sub-agent tree on an OpenClaw source (issue 25 item 1): the console driven over
//! `OpenClawApi` on a fake gateway holding the record captured from a real 2026.9.6
//! (tests/fixtures/openclaw-2026.9.6/exchanges/: the ping-pong ended by REPLY_SKIP, the
//! REPLY_SKIP at once, the spawn with its announce), plus one pair whose loop ran until
//! something OpenClaw does not record stopped it.
//!
//! Snapshots live in tests/tui/snapshots/ (`INSTA_UPDATE=always cargo test --test tui
//! tui_openclaw::`, then read every changed `.snap`). Times are fixed (UTC), nothing is timed.

use std::sync::Arc;

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_tui::action::Intent;
use switchboard_tui::state::{Focus, State};
use switchboard_types::api::SessionsApi;

use crate::common::console_driver::Driver;
use crate::common::screen::screen;
use crate::openclaw_record::{RecordGateway, forwarded, reply, scenario};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6/exchanges"
);
/// Five minutes after the captured ping-pong ended (2026-11-22 13:21 UTC).
const NOW: i64 = 1_795_353_670_000;
const LOOPER: &str = "agent:main:looper";
const LOOPED: &str = "agent:work:looped";

/// The captured scenarios in one gateway, and a pair that looped to OpenClaw's cap.
fn gateway() -> Arc<RecordGateway> {
    let gw = RecordGateway::default();
    for name in [
        "s2-telegram-pingpong",
        "s3-telegram-skip",
        "s6-sessions-spawn",
    ] {
        let one = scenario(&format!("{FIXTURES}/{name}"));
        let rows = one.rows.lock().unwrap().clone();
        let histories = one.histories.lock().unwrap().clone();
        for row in rows {
            let (messages, total) = histories[row["key"].as_str().unwrap()].clone();
            gw.add(
                row,
                &json!({ "messages": messages, "totalMessages": total }),
            );
        }
    }
    let t0 = NOW - 10 * 60_000;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    b.push(forwarded(1, t0, Some(LOOPER), "are we done?"));
    b.push(reply(2, t0 + 1_000, "b1", "not yet"));
    for turn in 0..2i64 {
        let at = t0 + 2_000 + turn * 4_000;
        let said = if turn == 0 { "not yet" } else { "still no" };
        a.push(forwarded(2 * turn + 1, at, Some(LOOPED), said));
        a.push(reply(
            2 * turn + 2,
            at + 1_000,
            &format!("a{turn}"),
            "are we done now?",
        ));
        b.push(forwarded(
            2 * turn + 3,
            at + 2_000,
            Some(LOOPER),
            "are we done now?",
        ));
        b.push(reply(
            2 * turn + 4,
            at + 3_000,
            &format!("b{turn}"),
            "still no",
        ));
    }
    gw.add(
        json!({ "key": LOOPER, "updatedAt": t0 + 12_000 }),
        &json!({ "messages": a }),
    );
    gw.add(
        json!({ "key": LOOPED, "updatedAt": t0 + 12_000, "sendPolicy": "allow" }),
        &json!({ "messages": b }),
    );
    gw.sort();
    Arc::new(gw)
}

async fn console(w: u16, h: u16) -> (Arc<RecordGateway>, Driver) {
    let gw = gateway();
    let api: Arc<dyn SessionsApi> = Arc::new(OpenClawApi::new(gw.clone()));
    let mut state = State::new("ws://127.0.0.1:18789".into(), NOW);
    state.width = w;
    state.height = h;
    state.link = api.link();
    let mut d = Driver::new(api, state);
    d.settle().await;
    d.intent(Intent::ToggleRoundsScope);
    d.console.state.focus = Focus::Rounds;
    d.settle().await;
    (gw, d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rounds_pane_lists_openclaws_exchanges_and_sub_agents() {
    let (_gw, d) = console(120, 40).await;
    let s = &d.console.state;
    assert_eq!(
        s.rounds.exchanges.entries.len(),
        3,
        "{:#?}",
        s.rounds.exchanges
    );
    let shown = screen(s, 120, 40);
    for want in [
        // The sessions by their display names (issue 26); names give way, never how it ended.
        "s2-telegram-ping… → s2-telegram-pingp… · 5 rounds · REPLY_SKIP",
        "s3-telegram-skip… → s3-telegram-skip-… · 2 rounds · REPLY_SKIP",
        "…looper → …work:looped · 5 rounds · not recorded by OpenClaw",
        "announce not recorded by OpenClaw",
        "agent:main:s6 spawned:",
        "child-s6 [completed] 218 ms, tokens 30/5",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
    assert!(!shown.contains("not available"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_view_shows_every_round_and_what_openclaw_does_not_record() {
    let (_gw, mut d) = console(120, 40).await;
    // The ping-pong (the second newest).
    d.intent(Intent::Down);
    d.settle().await;
    d.intent(Intent::Open);
    d.settle().await;
    let v = d.console.state.rounds.exchange_view.as_ref().expect("open");
    assert_eq!(v.id(), "agent:work:s2#1");
    let shown = screen(&d.console.state, 120, 40);
    for want in [
        "Round 1 · agent:work:s2 → agent:main:s2 · 13:16:06 · 40 ms · tokens 30/5 · ok",
        "Round 5 · agent:work:s2 → agent:main:s2",
        "Ended: REPLY_SKIP · agent:work:s2 replied REPLY_SKIP in round 5",
        "Announce: no_route",
        "ANNOUNCE from work: exchange finished",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_traffic_view_marks_the_loop_stops_it_with_deny_and_undo_puts_allow_back() {
    // OpenClaw 2026.9.6 checks the send policy only where a send starts, not on its own
    // ping-pong steps (seen live: a loop went on after deny), so the stop also aborts what
    // runs in both sessions of the pair, and says so.
    let (gw, mut d) = console(120, 30).await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;
    let t = &d.console.state.traffic;
    assert!(t.open);
    let looping = t
        .sessions
        .pairs
        .iter()
        .find(|p| p.requester == LOOPER && p.target == LOOPED)
        .expect("the looping pair is shown");
    assert!(looping.looping(), "the loop ran to OpenClaw's cap");
    let calm = t
        .sessions
        .pairs
        .iter()
        .find(|p| p.requester == "agent:main:s2")
        .expect("the ping-pong pair is shown");
    assert!(!calm.looping(), "REPLY_SKIP ended it");
    insta::assert_snapshot!(screen(&d.console.state, 120, 30));
    // Select the looping pair, stop it, confirm, then undo.
    for _ in 0..10 {
        let on_it = d
            .console
            .state
            .traffic
            .selected
            .as_ref()
            .is_some_and(|(r, _)| r == LOOPER);
        if on_it {
            break;
        }
        d.press(KeyCode::Char('j'));
        d.settle().await;
    }
    d.press(KeyCode::Char('S'));
    d.press(KeyCode::Char('y'));
    d.settle().await;
    assert_eq!(*gw.aborts.lock().unwrap(), [LOOPED, LOOPER]);
    let note = d.console.state.traffic.note.clone().unwrap_or_default();
    assert!(
        note.contains("checks /send only when a send starts")
            && note.contains(&format!("aborted the running step in {LOOPED}, {LOOPER}")),
        "{note}"
    );
    d.press(KeyCode::Char('u'));
    d.settle().await;
    let patches = gw.patches.lock().unwrap().clone();
    assert_eq!(
        patches,
        [
            json!({ "key": LOOPED, "sendPolicy": "deny" }),
            // What was there before: its own `allow`.
            json!({ "key": LOOPED, "sendPolicy": "allow" }),
        ]
    );
}

/// A line of `key`'s record as 2026.9.6 delivers it live (`session.message`); `chat.history`
/// answers it from now on too.
fn live(gw: &RecordGateway, key: &str, line: Value) {
    let seq = line["__openclaw"]["seq"].as_i64().unwrap();
    {
        let mut histories = gw.histories.lock().unwrap();
        let (lines, total) = histories.entry(key.to_string()).or_default();
        lines.push(line.clone());
        *total = lines.len() as i64;
    }
    gw.push(
        "session.message",
        json!({ "sessionKey": key, "messageSeq": seq, "message": line }),
    );
}

/// Every pair of the traffic view by session: (requester, target, exchanges, messages).
fn counted(s: &State) -> Vec<(String, String, u32, u32)> {
    let mut all: Vec<_> = s
        .traffic
        .sessions
        .pairs
        .iter()
        .map(|p| {
            (
                p.requester.clone(),
                p.target.clone(),
                p.hour.exchanges,
                p.hour.messages,
            )
        })
        .collect();
    all.sort();
    all
}

/// A console with the traffic view open on `gw`, its clock at `now`, the backfill read.
async fn traffic_console(gw: &Arc<RecordGateway>, now: i64) -> Driver {
    let api: Arc<dyn SessionsApi> = Arc::new(OpenClawApi::new(gw.clone()));
    let mut state = State::new("ws://127.0.0.1:18789".into(), now);
    state.link = api.link();
    let mut d = Driver::new(api, state);
    d.settle().await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;
    d
}

/// A gateway with these sessions and nothing in them yet, and `t0`: half a second into the
/// minute that was ten seconds ago, so the lines a test writes from it on are recent.
fn empty_sessions(keys: &[&str]) -> (Arc<RecordGateway>, i64) {
    let real = switchboard_types::api::time::now_ms();
    let t0 = (real - 10_000) - (real - 10_000).rem_euclid(60_000) + 500;
    let gw = Arc::new(RecordGateway::default());
    for key in keys {
        gw.add(
            json!({ "key": key, "updatedAt": t0 }),
            &json!({ "messages": [] }),
        );
    }
    (gw, t0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_loop_rounds_and_a_reconnect_count_what_a_fresh_console_counts() {
    // Seen live on 2026.9.6: a ping-pong's lines reach the console per session (events for
    // one, a re-read after a run's end for the other), so the reply-back line into one
    // session can come before the reply it forwards is read from the other. Times are near
    // the real clock (the book settles an exchange 90 s after its last turn), inside one
    // minute of the console's clock.
    const MAIN: &str = "agent:main:loop1";
    const WORK: &str = "agent:work:loop1";
    let (gw, t0) = empty_sessions(&[MAIN, WORK]);
    let mut d = traffic_console(&gw, t0 + 9_000).await;
    let turn = |n: i64| format!("LOOP turn {n}");
    live(&gw, WORK, forwarded(1, t0, Some(MAIN), "PING from main"));
    live(&gw, WORK, reply(2, t0 + 1_000, "w1", &turn(1)));
    live(&gw, MAIN, forwarded(1, t0 + 2_000, Some(WORK), &turn(1)));
    // Each reply-back line arrives before the reply it forwards.
    for n in 2..=5i64 {
        let at = t0 + n * 1_000 + 1_000;
        let (from, into) = if n % 2 == 0 {
            (MAIN, WORK)
        } else {
            (WORK, MAIN)
        };
        // Turn n is main's line n (n even) or work's line n + 1 (n odd); it is forwarded
        // as the other's line n + 1 (into work) or n (into main).
        let said = turn(n);
        let reply_seq = if from == MAIN { n } else { n + 1 };
        let fwd_seq = if into == WORK { n + 1 } else { n };
        live(&gw, into, forwarded(fwd_seq, at, Some(from), &said));
        live(
            &gw,
            from,
            reply(reply_seq, at - 500, &format!("r{n}"), &said),
        );
    }
    d.settle().await;
    // A reconnect: the book is read again and the view asks for its history again.
    let _ = gw
        .events
        .send(switchboard_remote::rpc::WireEvent::Reconnected);
    d.settle().await;
    let fresh = traffic_console(&gw, t0 + 9_000).await;
    let want = counted(&fresh.console.state);
    assert_eq!(
        want,
        [(MAIN.to_string(), WORK.to_string(), 1, 6)],
        "the record: one exchange, its message and five rounds"
    );
    assert_eq!(counted(&d.console.state), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchange_whose_sender_is_unknown_draws_no_edge_live_or_seeded() {
    // A forwarded line without provenance (only the label), and one whose provenance names a
    // session the gateway does not show: listed in the rounds pane as partial, but the
    // traffic view has no edge to count them on (it drew one from the placeholder
    // requester while they arrived live).
    const A: &str = "agent:work:a";
    const B: &str = "agent:main:b";
    let (gw, t0) = empty_sessions(&[A, B]);
    let mut d = traffic_console(&gw, t0 + 9_000).await;
    live(&gw, A, forwarded(1, t0, None, "who sent this?"));
    live(&gw, A, reply(2, t0 + 1_000, "r1", "no idea"));
    live(
        &gw,
        A,
        forwarded(3, t0 + 2_000, Some("agent:ghost:x"), "boo"),
    );
    live(&gw, A, reply(4, t0 + 3_000, "r2", "eek"));
    live(&gw, B, forwarded(1, t0 + 4_000, Some(A), "hello b"));
    live(&gw, B, reply(2, t0 + 5_000, "r3", "hi a"));
    d.settle().await;
    let only = [(A.to_string(), B.to_string(), 1, 2)];
    assert_eq!(counted(&d.console.state), only, "live");
    let fresh = traffic_console(&gw, t0 + 9_000).await;
    assert_eq!(counted(&fresh.console.state), only, "seeded");
}
