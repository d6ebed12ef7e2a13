//! The traffic view (`v`): who sends to whom, per pair of sessions and of agents, over the
//! last hour. Over a scripted fake: the history seed merged with live events, a loop marked
//! in words and colour, by agent, the stop confirmation, stop and undo as the owner's
//! `/send off` / `/send inherit` into the target, 60×16 and NO_COLOR (insta snapshots). Over a
//! real engine: a ping-pong loop stopped from the view mid-exchange sends nothing more into
//! its target.

use crate::common;
use crate::common::screen::text;

use std::sync::Arc;

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use serde_json::json;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::state::State;
use switchboard_tui::strip_colors;
use switchboard_types::api::{
    EngineEvent, SessionKind, SessionsApi, TrafficCount, TranscriptQuery,
};

use common::console_driver::Driver;
use common::fake_api::{self, FakeApi};

/// The console's clock in the fake tests: 12:34:56 on a fixed day (never ticked).
const NOW: i64 = 1_795_353_296_000;
const MIN: i64 = 60_000;
const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:slack:group:incidents";
const OPS_STANDUP: &str = "agent:ops:discord:group:eng-standup";
const RESEARCH: &str = "agent:research:main";
const RANDOM: &str = "agent:support:discord:group:random";
const VISITOR: &str = "agent:support:webchat:direct:visitor-8812";

fn minute(ago: i64) -> i64 {
    (NOW / MIN - ago) * MIN
}

fn count(requester: &str, target: &str, ago: i64, exchanges: u32, messages: u32) -> TrafficCount {
    TrafficCount {
        requester: requester.into(),
        target: target.into(),
        minute: minute(ago),
        exchanges,
        messages,
        ..TrafficCount::default()
    }
}

/// The engine's history of the last hour: main asks research now and then, a visitor's
/// support session escalates to ops, main writes into #eng-standup, and #random refuses.
fn history() -> Vec<TrafficCount> {
    let mut h = vec![
        count(MAIN, RESEARCH, 42, 1, 3),
        count(MAIN, RESEARCH, 3, 1, 3),
        count(VISITOR, OPS, 20, 1, 2),
        count(VISITOR, OPS, 0, 1, 2),
        count(MAIN, OPS_STANDUP, 7, 2, 4),
        TrafficCount {
            refused: 2,
            ..count(MAIN, RANDOM, 1, 2, 2)
        },
        // Older than the hour: not asked for, not shown.
        count(MAIN, VISITOR, 61, 9, 90),
    ];
    // main → ops all hour long, busier lately.
    for ago in (0..60).step_by(4) {
        h.push(count(MAIN, OPS, ago, 1, if ago < 10 { 8 } else { 5 }));
    }
    h
}

fn fake() -> Arc<FakeApi> {
    let mut data = fake_api::Data {
        traffic: Some(history()),
        ..fake_api::Data::default()
    };
    for (i, k) in [MAIN, OPS, OPS_STANDUP, RESEARCH, RANDOM, VISITOR]
        .iter()
        .enumerate()
    {
        data.rows
            .push(fake_api::row(k, k, SessionKind::Main, NOW - i as i64 * MIN));
    }
    Arc::new(FakeApi::new(data))
}

fn state(w: u16, h: u16) -> State {
    let mut s = State::new("test".into(), NOW);
    s.width = w;
    s.height = h;
    s
}

/// A live ping-pong exchange main → ops that hits the cap: the message, five replies.
fn live_loop(api: &FakeApi, flow: &str) {
    api.emit(EngineEvent::ExchangeStarted {
        exchange_id: flow.into(),
        chain_id: "chain-1".into(),
        hop: 1,
        requester: MAIN.into(),
        target: OPS.into(),
        message: "is INC-4821 under control?".into(),
        run_id: "run-1".into(),
        unattributed: false,
    });
    for round in 1..=5u32 {
        let (speaker, listener) = if round % 2 == 1 {
            (OPS, MAIN)
        } else {
            (MAIN, OPS)
        };
        api.emit(EngineEvent::ExchangeRound {
            exchange_id: flow.into(),
            round,
            speaker: speaker.into(),
            listener: listener.into(),
            run_id: format!("run-{}", round + 1),
            text: "ack".into(),
            status: "ok".parse().unwrap(),
        });
    }
    api.emit(EngineEvent::ExchangeLoopEnded {
        exchange_id: flow.into(),
        reason: "cap".parse().unwrap(),
        rounds: 5,
        detail: "maxPingPongTurns reached".into(),
    });
    api.emit(EngineEvent::ExchangeEnded {
        exchange_id: flow.into(),
        status: "done".parse().unwrap(),
        reason: "cap".parse().unwrap(),
    });
}

/// A console on `api`, the traffic view open and its history loaded, after one live loop.
async fn opened(api: Arc<FakeApi>, w: u16, h: u16) -> Driver {
    let mut d = Driver::new(api.clone(), state(w, h));
    d.settle().await;
    live_loop(&api, "flow-live");
    // As the engine does: it records a round before it sends its event, so the history
    // asked for after the loop holds it.
    if let Some(h) = api.data.lock().expect("fake lock").traffic.as_mut() {
        h.push(TrafficCount {
            capped: 1,
            ..count(MAIN, OPS, 0, 1, 6)
        });
    }
    d.settle().await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;
    assert!(d.console.state.traffic.open);
    d
}

fn render(state: &State) -> Buffer {
    crate::common::screen::render(state, state.width, state.height)
}

fn screen(state: &State) -> String {
    text(&render(state))
}

/// The screen row holding `needle`.
fn row_of(buf: &Buffer, needle: &str) -> Option<u16> {
    text(buf)
        .lines()
        .position(|l| l.contains(needle))
        .map(|y| y as u16)
}

fn press(d: &mut Driver, c: char) {
    d.press(KeyCode::Char(c));
}

fn press_code(d: &mut Driver, code: KeyCode) {
    d.press(code);
}

/// What the owner sent, as `(key, text)`.
fn sent(api: &FakeApi) -> Vec<(String, String)> {
    api.data
        .lock()
        .expect("fake lock")
        .sent
        .iter()
        .map(|r| (r.key.clone(), r.text.clone()))
        .collect()
}

#[tokio::test]
async fn by_session_the_busiest_pair_comes_first_and_the_loop_is_marked() {
    let api = fake();
    let d = opened(api, 120, 30).await;
    let s = &d.console.state;
    let t = &s.traffic;
    let top = &t.sessions.pairs[t.sessions.order[0]];
    assert_eq!((top.requester.as_str(), top.target.as_str()), (MAIN, OPS));
    // The history (8 + 8 in minutes 0 and 4, and the live exchange's 6 this minute, as the
    // engine recorded it) replaces what was counted live before it was asked for: this minute
    // has 8 + 6 = 14, not 20.
    assert_eq!(top.messages_1m, 14);
    assert_eq!(top.messages_5m, 22);
    assert!(top.looping(), "the live exchange hit the cap");
    // Older than an hour: never asked for.
    assert!(t.sessions.get(MAIN, VISITOR).is_none());

    let buf = render(s);
    let y = row_of(&buf, "LOOP").expect("a LOOP row");
    let line = text(&buf).lines().nth(y as usize).unwrap_or("").to_string();
    assert!(
        line.contains("agent:main:main → agent:ops:slack:group:incidents"),
        "{line}"
    );
    assert!(line.contains("LOOP"), "the mark is a word: {line}");
    // The mark is in colour too.
    assert!((0..buf.area.width).any(|x| buf[(x, y)].fg == Color::Red));
    insta::assert_snapshot!("traffic_by_session_loop", screen(s));
}

#[tokio::test]
async fn by_agent_pairs_add_up_their_sessions() {
    let api = fake();
    let mut d = opened(api.clone(), 80, 24).await;
    press(&mut d, 'a');
    d.settle().await;
    let t = &d.console.state.traffic;
    assert!(t.by_agent);
    let p = t.agents.get("agent:main", "agent:ops").expect("main → ops");
    let sessions = t.sessions.get(MAIN, OPS).expect("pair").hour.messages
        + t.sessions
            .get(MAIN, OPS_STANDUP)
            .expect("pair")
            .hour
            .messages;
    assert_eq!(p.hour.messages, sessions);
    assert_eq!(p.targets.len(), 2);
    insta::assert_snapshot!("traffic_by_agent", screen(&d.console.state));

    // Stopping an agent pair stops each of its target sessions shown, and says how many.
    press(&mut d, 'S');
    let prompt = d
        .console
        .state
        .traffic
        .confirm
        .clone()
        .expect("a prompt")
        .prompt();
    assert!(
        prompt.contains("/send off on 2 sessions of agent:ops shown"),
        "{prompt}"
    );
    press(&mut d, 'y');
    d.settle().await;
    let mut got = sent(&api);
    got.sort();
    assert_eq!(
        got,
        vec![
            (OPS_STANDUP.to_string(), "/send off".to_string()),
            (OPS.to_string(), "/send off".to_string())
        ]
    );
}

#[tokio::test]
async fn stop_asks_first_then_sends_send_off_into_the_target_and_u_undoes_it() {
    let api = fake();
    let mut d = opened(api.clone(), 100, 30).await;
    // The cursor starts on the busiest pair: main → ops.
    press(&mut d, 'S');
    insta::assert_snapshot!("traffic_confirm", screen(&d.console.state));
    assert!(
        sent(&api).is_empty(),
        "nothing is stopped before the answer"
    );

    // n cancels.
    press(&mut d, 'n');
    d.settle().await;
    assert!(sent(&api).is_empty());
    assert!(d.console.state.traffic.confirm.is_none());

    press(&mut d, 'S');
    press(&mut d, 'y');
    d.settle().await;
    assert_eq!(sent(&api), vec![(OPS.to_string(), "/send off".to_string())]);
    let note = d.console.state.traffic.note.clone().unwrap_or_default();
    assert_eq!(
        note,
        format!("stopped: /send off on {OPS}; undo: /send inherit there (or u here)")
    );
    // The engine's answer: the policy changed.
    api.set_policy(
        OPS,
        switchboard_types::api::PolicyView {
            policy: "deny".parse().unwrap(),
            ..fake_api::row(OPS, OPS, SessionKind::Main, NOW).policy
        },
        "owner",
    );
    d.settle().await;
    let buf = render(&d.console.state);
    let y = row_of(&buf, "STOPPED").expect("a STOPPED row");
    let line = text(&buf).lines().nth(y as usize).unwrap_or("").to_string();
    assert!(
        // Keys without a name, cut in the middle as the sessions pane cuts them (issue 26).
        line.contains("agent:main:main → agent:…group:incidents"),
        "{line}"
    );
    insta::assert_snapshot!("traffic_stopped_undo_hint", text(&buf));

    press(&mut d, 'u');
    d.settle().await;
    assert_eq!(
        sent(&api),
        vec![
            (OPS.to_string(), "/send off".to_string()),
            (OPS.to_string(), "/send inherit".to_string())
        ]
    );
    assert!(!d.console.state.traffic.stopped.contains(OPS));
    assert!(row_of(&render(&d.console.state), "STOPPED").is_none());

    // Esc closes the view; v opens it again.
    press_code(&mut d, KeyCode::Esc);
    assert!(!d.console.state.traffic.open);
    press(&mut d, 'v');
    assert!(d.console.state.traffic.open);
}

/// The stop says everything `y` affects (the other pair sending into ops, and ops' replies
/// to its chat, which `/send off` holds back too: before, it said only "sets /send off on 1
/// session") and offers the narrower `a`: agent-to-agent sends into ops stop, nothing is
/// sent as `/send`, and `u` lets them again. Keys: S a … u.
#[tokio::test]
async fn the_stop_lists_what_it_affects_and_a_stops_only_agent_sends() {
    let api = fake();
    let mut d = opened(api.clone(), 120, 30).await;
    press(&mut d, 'S');
    let plan = d.console.state.traffic.confirm.clone().expect("asked");
    assert_eq!(plan.others, vec![format!("{VISITOR} → {OPS}")]);
    let prompt = plan.prompt();
    for want in [
        "y: /send off · a: agent sends only · n: cancel.",
        &format!("/send off on {OPS}, also stops {VISITOR} → {OPS}"),
        "holds its replies to its chat",
        "a stops only agent sends into it, and its replies to its chat go on",
    ] {
        assert!(prompt.contains(want), "missing {want:?} in {prompt}");
    }
    insta::assert_snapshot!(
        "traffic_confirm_lists_what_it_affects",
        screen(&d.console.state)
    );
    press(&mut d, 'a');
    d.settle().await;
    assert!(
        sent(&api).is_empty(),
        "no /send: the narrower stop is not the policy"
    );
    assert_eq!(
        api.data.lock().expect("fake").agent_sends,
        vec![(OPS.to_string(), true)]
    );
    assert!(d.console.state.traffic.stopped.contains(OPS));
    let note = d.console.state.traffic.note.clone().unwrap_or_default();
    assert!(note.contains("their replies go on"), "{note}");
    // The sessions pane's row of ops says so in its policy slot (once the engine's event
    // has reloaded the rows).
    d.until("ops' policy slot names the stop", |s| {
        s.sessions
            .rows
            .iter()
            .find(|r| r.key == OPS)
            .is_some_and(|r| r.policy_line().ends_with(" · agent sends stopped"))
    })
    .await;
    press(&mut d, 'u');
    d.settle().await;
    assert_eq!(
        api.data.lock().expect("fake").agent_sends,
        vec![(OPS.to_string(), true), (OPS.to_string(), false)]
    );
    assert!(!d.console.state.traffic.stopped.contains(OPS));
    assert!(sent(&api).is_empty());
}

#[tokio::test]
async fn j_and_k_move_over_pairs_and_the_cursor_stays_on_its_pair_as_counts_change() {
    let api = fake();
    let mut d = opened(api.clone(), 100, 30).await;
    press(&mut d, 'j');
    d.settle().await;
    let chosen = d.console.state.traffic.selected.clone().expect("a pair");
    assert_ne!(chosen, (MAIN.to_string(), OPS.to_string()));
    // A burst on another pair re-sorts the table; the cursor follows its pair.
    for i in 0..30 {
        api.emit(EngineEvent::ExchangeStarted {
            exchange_id: format!("burst-{i}"),
            chain_id: "c".into(),
            hop: 1,
            requester: RESEARCH.into(),
            target: MAIN.into(),
            message: "m".into(),
            run_id: "r".into(),
            unattributed: false,
        });
    }
    d.settle().await;
    let t = &d.console.state.traffic;
    assert_eq!(t.selected.as_ref(), Some(&chosen));
    let at = &t.sessions.pairs[t.sessions.order[t.cursor]];
    assert_eq!((at.requester.clone(), at.target.clone()), chosen);
    press(&mut d, 'k');
    press(&mut d, 'k');
    d.settle().await;
    assert_eq!(d.console.state.traffic.cursor, 0);
}

#[tokio::test]
async fn lays_out_at_60x16_and_80x24() {
    let api = fake();
    let mut d = opened(api, 60, 16).await;
    press(&mut d, 'S');
    let small = screen(&d.console.state);
    assert!(small.contains("LOOP"), "{small}");
    assert!(small.contains("n: cancel"), "{small}");
    insta::assert_snapshot!("traffic_60x16_confirm", small);
    d.act(Action::Resize(80, 24));
    press(&mut d, 'n');
    d.settle().await;
    let medium = screen(&d.console.state);
    assert!(medium.contains("messages/min"), "{medium}");
    insta::assert_snapshot!("traffic_80x24", medium);
}

#[tokio::test]
async fn no_color_keeps_the_loop_and_stop_marks_in_words() {
    let api = fake();
    let mut d = opened(api, 100, 24).await;
    press(&mut d, 'S');
    press(&mut d, 'y');
    d.settle().await;
    let mut buf = render(&d.console.state);
    strip_colors(&mut buf);
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            assert_eq!(buf[(x, y)].fg, Color::Reset);
        }
    }
    let t = text(&buf);
    assert!(t.contains("STOPPED") && t.contains("refused"), "{t}");
    insta::assert_snapshot!("traffic_no_color", t);
}

#[tokio::test]
async fn without_history_from_the_engine_live_events_are_counted_and_it_says_so() {
    let api = Arc::new(FakeApi::new(fake_api::Data::default()));
    let d = opened(api, 100, 20).await;
    let t = &d.console.state.traffic;
    let p = t.sessions.get(MAIN, OPS).expect("the live pair");
    assert_eq!((p.messages_1m, p.hour.exchanges, p.hour.capped), (6, 1, 1));
    let s = screen(&d.console.state);
    assert!(s.contains("history unavailable"), "{s}");
    assert!(s.contains("counting since the console started"), "{s}");
}

// --- over a real engine -------------------------------------------------------------------

const PING: &str = "agent:ping:main";
const PONG: &str = "agent:pong:main";

/// ping sends to pong on "start" without waiting; they then talk back and forth until the
/// ping-pong cap, a second per turn (so a stop lands mid-exchange).
fn loop_config() -> serde_json::Value {
    json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "session": { "agentToAgent": { "maxPingPongTurns": 5 } },
        "agents": { "list": [
            { "id": "ping", "default": true, "model": "scripted", "script": [
                { "when": { "step": "reply" }, "reply": "ping again", "delayMs": 1000 },
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
                { "when": { "step": "message", "text": "start" },
                  "tools": [{ "name": "sessions_send", "args": { "sessionKey": PONG, "message": "ping", "timeoutSeconds": 0 } }],
                  "reply": "sent: {{result.status}} {{result.error}}" },
                { "reply": "ok" },
            ] },
            { "id": "pong", "model": "scripted", "script": [
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
                { "when": { "step": "reply" }, "reply": "pong again", "delayMs": 1000 },
                { "when": { "step": "message", "from": "*" }, "reply": "pong", "delayMs": 1000 },
                { "reply": "hi" },
            ] },
        ] },
    })
}

/// Messages from ping recorded in pong's transcript (each inter-session message into pong).
async fn into_pong(api: &dyn SessionsApi) -> usize {
    let page = api
        .transcript(TranscriptQuery {
            key: PONG.into(),
            before: None,
            limit: 1000,
            tools: true,
            raw: false,
            bare: false,
        })
        .await
        .expect("pong's transcript");
    page.lines
        .iter()
        .filter(|l| l.from.starts_with(&format!("from {PING}")))
        .count()
}

async fn owner_says(b: &common::Bench, key: &str, text: &str) {
    use switchboard_engine::inbound::Inbound;
    use switchboard_types::key::SessionKey;
    let from = Inbound {
        sender: Some("owner".into()),
        ..Inbound::default()
    };
    let received = b
        .engine
        .receive(&SessionKey::from_canonical(key), text, &from)
        .await
        .expect("receive");
    drop(received);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_stopped_from_the_view_mid_exchange_sends_nothing_more_into_its_target() {
    let b = common::bench(loop_config());
    let api = b.engine.start();
    // pong must exist for ping's send to reach it.
    owner_says(&b, PONG, "hello").await;
    b.engine.idle().await;
    let mut d = Driver::new(api.clone(), state(120, 30));
    d.settle().await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;

    owner_says(&b, PING, "start").await;
    d.until("the pair to show in the view", |s| {
        s.traffic
            .sessions
            .get(PING, PONG)
            .is_some_and(|p| p.hour.messages >= 1)
    })
    .await;
    let flow = d
        .console
        .state
        .rounds
        .exchange_rounds
        .values()
        .find(|f| f.requester == PING && f.target == PONG)
        .map(|f| f.exchange_id.clone())
        .expect("the exchange in the console");
    assert!(
        !d.console.state.rounds.exchange_rounds[&flow].done,
        "stopped mid-exchange"
    );

    // The cursor is on the only pair: S, then y.
    press(&mut d, 'S');
    press(&mut d, 'y');
    d.until("the engine to store the stop", |s| {
        s.sessions
            .rows
            .iter()
            .any(|r| r.key == PONG && r.policy.as_str() == "deny" && r.policy_override)
    })
    .await;
    let at_stop = into_pong(api.as_ref()).await;

    // The exchange under way ends at the next turn into pong: refused by its policy.
    d.until("the exchange to end", |s| {
        s.rounds.exchange_rounds.get(&flow).is_some_and(|f| f.done)
    })
    .await;
    let end = d.console.state.rounds.exchange_rounds[&flow]
        .loop_end
        .clone()
        .expect("an end");
    assert_eq!(end.0.as_str(), "policy", "{end:?}");

    // A new attempt is refused too.
    owner_says(&b, PING, "start").await;
    b.engine.idle().await;
    d.settle().await;
    assert_eq!(
        into_pong(api.as_ref()).await,
        at_stop,
        "nothing more from ping arrived in pong after the stop"
    );
    let t = &d.console.state.traffic;
    let p = t.sessions.get(PING, PONG).expect("the pair");
    assert!(t.is_stopped(p));
    assert!(p.hour.refused >= 1, "the refusals count on the pair");
    let s = screen(&d.console.state);
    assert!(s.contains("STOPPED"), "{s}");
}

/// The numbers after the pair on the row that names `pair`: 1m, 5m, 60m, exchanges.
fn numbers_of(buf: &Buffer, pair: &str) -> Vec<u32> {
    let screen = text(buf);
    let line = screen
        .lines()
        .find(|l| l.contains(pair))
        .unwrap_or_else(|| panic!("no row for {pair}:\n{screen}"));
    let after = &line[line.find(pair).unwrap() + pair.len()..];
    after
        .split_whitespace()
        .map_while(|w| w.parse().ok())
        .collect()
}

#[tokio::test]
async fn the_last_minute_slides_instead_of_emptying_when_the_minute_turns() {
    let api = fake();
    let mut d = opened(api, 120, 30).await;
    let pair = "agent:main:main → agent:ops:slack:group:incidents";
    let before = numbers_of(&render(&d.console.state), pair);
    assert_eq!(before[0], 14, "{before:?}");
    // Five seconds into the next minute: 55 of the last 60 seconds lie in the busy minute.
    // A per-minute count said 0 here for every pair, however busy.
    let next = (NOW / MIN + 1) * MIN;
    d.console.state.traffic.tick(next + 5_000);
    let after = numbers_of(&render(&d.console.state), pair);
    assert_eq!(after[0], 13, "14 × 55/60, rounded: {after:?}");
    // The 5-minute window: this minute's 14 whole, the seeded 8 of four minutes ago by 55/60.
    assert_eq!((before[1], after[1]), (22, 21), "{after:?}");
    // A minute later the busy minute has left the last minute entirely.
    d.console.state.traffic.tick(next + MIN + 5_000);
    let later = numbers_of(&render(&d.console.state), pair);
    assert_eq!(later[0], 0, "{later:?}");
}
