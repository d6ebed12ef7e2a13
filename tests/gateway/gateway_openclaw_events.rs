//! OpenClaw's events on our gateway, in OpenClaw's shapes, driven by a real WebSocket client
//! against the gateway in this process over a real engine: `chat`/`agent` for the runs of a
//! session the client sent into, `sessions.changed` and `session.message` once subscribed
//! (and not after unsubscribing), `a2a` for every client, and `tick`.

use crate::common;
use crate::gateway_support;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_types::api::{SendRequest, Sender};

use gateway_support::*;

const EXCHANGE: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 1 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "message", text: "/^ask (\\S+) (.*)/" },
        tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2" } }],
        reply: "asked $1" },
      { when: { step: "reply" }, reply: "REPLY_SKIP" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
      { reply: "main got: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "message" }, reply: "work: {{text}}" },
      { when: { step: "reply" }, reply: "REPLY_SKIP" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
  ] },
}"#;

fn bench() -> common::Bench {
    common::bench(json5::from_str(EXCHANGE).expect("test config"))
}

fn is_final_for(run: &str) -> impl Fn(&Value) -> bool + '_ {
    move |f: &Value| {
        f["event"] == "chat"
            && f["payload"]["runId"] == run
            && ["final", "error"].contains(&f["payload"]["state"].as_str().unwrap_or(""))
    }
}

/// `chat.send` answers `{runId, status: "started"}`; the sender then gets the run's
/// `agent` lifecycle start and end and a `chat` final carrying the reply, with the keys
/// OpenClaw 2026.9.6's own frames have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_gets_chat_final_and_agent_lifecycle_in_openclaw_shapes() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, hello) = connected(&gw.addr, &[]).await;
    for e in [
        "chat",
        "agent",
        "sessions.changed",
        "session.message",
        "tick",
        "a2a",
    ] {
        assert!(
            hello["features"]["events"]
                .as_array()
                .expect("events")
                .contains(&json!(e)),
            "{e} announced"
        );
    }
    let mut early = Vec::new();
    let res = call_keeping(
        &mut ws,
        "1",
        "chat.send",
        json!({"sessionKey": "agent:main:main", "message": "hello", "idempotencyKey": "k1",
               "deliver": false}),
        &mut early,
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["status"], "started");
    let run = res["payload"]["runId"].as_str().expect("runId").to_string();
    let mut frames = early;
    if !frames.iter().any(is_final_for(&run)) {
        frames.extend(frames_until(&mut ws, is_final_for(&run)).await);
    }
    assert_seq_increasing(&frames);
    let chat = named(&frames, "chat");
    let last = chat.last().expect("a chat event");
    assert_eq!(last["payload"]["state"], "final", "{last}");
    assert_eq!(
        last["payload"]["message"]["content"][0]["text"],
        "main got: hello"
    );
    let agent = named(&frames, "agent");
    let phases: Vec<&str> = agent
        .iter()
        .filter(|f| f["payload"]["runId"] == run.as_str())
        .map(|f| f["payload"]["data"]["phase"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(phases, ["start", "end"], "{agent:?}");

    // The shapes of OpenClaw's own frames (we carry no per-run `seq`, nor the session id
    // on lifecycle events).
    let recorded = recorded_frames();
    let rec_final = recorded
        .iter()
        .find(|f| f["event"] == "chat" && f["payload"]["state"] == "final")
        .expect("a recorded chat final");
    assert_same_keys(&last["payload"], &rec_final["payload"], &["seq"]);
    let rec_start = recorded
        .iter()
        .find(|f| f["event"] == "agent" && f["payload"]["data"]["phase"] == "start")
        .expect("a recorded lifecycle start");
    let start = agent
        .iter()
        .find(|f| f["payload"]["data"]["phase"] == "start")
        .expect("our start");
    assert_same_keys(
        &start["payload"],
        &rec_start["payload"],
        &["seq", "sessionId"],
    );
    gw.stop().await;
}

/// `sessions.subscribe` brings `sessions.changed` (a new session, its messages);
/// `sessions.messages.subscribe {key}` brings `session.message` with the transcript
/// message; after the unsubscribes, neither comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_turn_session_events_on_and_off() {
    let b = bench();
    let api = b.engine.start();
    let gw = start(api.clone()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let key = "agent:work:watched";
    assert_eq!(
        call(&mut ws, "1", "sessions.subscribe", json!({})).await["ok"],
        true
    );
    let r = call(
        &mut ws,
        "2",
        "sessions.messages.subscribe",
        json!({"key": key}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");

    let send = |text: &str| SendRequest {
        key: key.into(),
        text: text.into(),
        from: Sender::default(),
        idempotency_key: None,
    };
    let receipt = api.send(send("first")).await.expect("send");
    let run = receipt.run_id.expect("run");
    // The reply line is the last thing the subscriber needs.
    let frames = frames_until(&mut ws, |f| {
        f["event"] == "session.message" && f["payload"]["message"]["role"] == "assistant"
    })
    .await;
    assert_seq_increasing(&frames);
    let changed = named(&frames, "sessions.changed");
    assert!(
        changed
            .iter()
            .any(|f| f["payload"]["reason"] == "create" && f["payload"]["sessionKey"] == key),
        "{changed:?}"
    );
    let messages = named(&frames, "session.message");
    let roles: Vec<&str> = messages
        .iter()
        .map(|f| f["payload"]["message"]["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert_eq!(messages[0]["payload"]["sessionKey"], key);
    assert_eq!(messages[0]["payload"]["agentId"], "work");
    assert_eq!(messages[0]["payload"]["messageSeq"], 1);
    assert_eq!(
        messages[1]["payload"]["message"]["content"][0]["text"],
        "work: first"
    );
    api.wait_run(&run, WAIT).await.expect("run ends");

    assert_eq!(
        call(&mut ws, "3", "sessions.unsubscribe", json!({})).await["ok"],
        true
    );
    let r = call(
        &mut ws,
        "4",
        "sessions.messages.unsubscribe",
        json!({"key": key}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let run = api
        .send(send("second"))
        .await
        .expect("send")
        .run_id
        .expect("run");
    api.wait_run(&run, WAIT).await.expect("run ends");
    // A send of our own afterwards: its `chat` final goes through the same event task,
    // after every event of the run above, so whatever that run would have sent is here.
    let mut between = Vec::new();
    let r = call_keeping(
        &mut ws,
        "5",
        "chat.send",
        json!({"sessionKey": "agent:main:barrier", "message": "after"}),
        &mut between,
    )
    .await;
    let barrier = r["payload"]["runId"].as_str().expect("runId").to_string();
    if !between.iter().any(is_final_for(&barrier)) {
        between.extend(frames_until(&mut ws, is_final_for(&barrier)).await);
    }
    let session_events: Vec<&Value> = between
        .iter()
        .filter(|f| f["event"] == "sessions.changed" || f["event"] == "session.message")
        .collect();
    assert!(session_events.is_empty(), "{session_events:?}");
    gw.stop().await;
}

/// An agent-to-agent exchange shows as `a2a` events (the engine's own event JSON) to a
/// client that neither subscribed nor sent; it gets no `chat` for runs it did not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_events_reach_every_client() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut sender, _) = connected(&gw.addr, &[]).await;
    let (mut watcher, _) = connected(&gw.addr, &[]).await;
    let res = call(
        &mut sender,
        "1",
        "chat.send",
        json!({"sessionKey": "main", "message": "ask work ping"}),
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    let frames = frames_until(&mut watcher, |f| {
        f["event"] == "a2a" && f["payload"]["type"] == "flowEnded"
    })
    .await;
    assert_seq_increasing(&frames);
    let kinds: Vec<&str> = named(&frames, "a2a")
        .iter()
        .map(|f| f["payload"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds.first(), Some(&"flowStarted"), "{kinds:?}");
    assert!(kinds.contains(&"flowRound"), "{kinds:?}");
    assert!(
        named(&frames, "chat").is_empty(),
        "no chat for others' runs"
    );
    gw.stop().await;
}

/// Every connection gets `tick {ts}` at the configured interval, numbered like any event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_arrive_at_the_interval_numbered() {
    let b = bench();
    let options = switchboard_server::Options {
        tick_interval: Duration::from_millis(50),
        ..options()
    };
    let gw = start_with(b.engine.start(), options).await;
    let (mut ws, hello) = connected(&gw.addr, &[]).await;
    assert_eq!(hello["policy"]["tickIntervalMs"], 50);
    let mut ticks = Vec::new();
    while ticks.len() < 3 {
        let f = recv(&mut ws).await.expect("a frame");
        if f["event"] == "tick" {
            assert!(f["payload"]["ts"].as_i64().is_some(), "{f}");
            ticks.push(f);
        }
    }
    assert_seq_increasing(&ticks);
    gw.stop().await;
}

/// A Switchboard console (`switchboard.subscribe`) already gets the exchange's events as
/// `switchboard.event`; it is not sent them a second time as `a2a`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchboard_subscriber_gets_flow_events_once() {
    use switchboard_protocol::switchboard as sb;
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut sender, _) = connected(&gw.addr, &[]).await;
    let (mut console, _) = connected(&gw.addr, &[sb::CAP]).await;
    let res = call(&mut console, "sub", sb::method::SUBSCRIBE, json!({})).await;
    assert_eq!(res["ok"], true, "{res}");
    let res = call(
        &mut sender,
        "1",
        "chat.send",
        json!({"sessionKey": "main", "message": "ask work ping"}),
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    let frames = frames_until(&mut console, |f| {
        f["event"] == sb::EVENT && f["payload"]["event"]["type"] == "flowEnded"
    })
    .await;
    assert!(
        named(&frames, sb::EVENT)
            .iter()
            .any(|f| f["payload"]["event"]["type"] == "flowRound"),
        "the rounds came as switchboard.event"
    );
    assert!(named(&frames, "a2a").is_empty(), "no a2a copies");
    gw.stop().await;
}
