//! Events on the gateway, driven by a real WebSocket client against the gateway running in
//! this process: `switchboard.subscribe` carries every engine event, numbered per
//! connection, in order; a lost stretch of events is announced as a gap, never skipped
//! silently; the subscription is only for clients that asked for the capability.

use crate::common;
use crate::gateway_support;

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_protocol::switchboard::{self as sb, GapPayload};
use switchboard_types::api::{EngineEvent, SendRequest, Sender, Sequenced, SessionsApi};

use gateway_support::{WAIT, call, call_keeping, connected, recv};

const KEY: &str = "agent:main:main";

fn scripted() -> common::Bench {
    common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "reply": "re: {{text}}" } ] },
        ] },
    }))
}

/// The frame `seq`s of `events` are 1, 2, 3 … with no hole.
fn assert_numbered_from_one(events: &[Value]) {
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().expect("every event frame has a seq"))
        .collect();
    let want: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, want, "frame seqs");
}

fn sequenced(frame: &Value) -> Sequenced {
    assert_eq!(frame["event"], sb::EVENT, "{frame}");
    serde_json::from_value(frame["payload"].clone()).expect("payload is an api::Sequenced")
}

/// A message sent into a scripted agent's session: the subscriber sees the message line,
/// the reply line and the run's end, in that order (and the run's start), each frame numbered
/// one more than the last, and the engine's own numbers increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribed_events_arrive_in_order_with_increasing_frame_seq() {
    let b = scripted();
    let api = b.engine.start();
    let gw = gateway_support::start(api.clone()).await;
    let (mut ws, hello) = connected(&gw.addr, &[sb::CAP]).await;
    let events: Vec<String> =
        serde_json::from_value(hello["features"]["events"].clone()).expect("events list");
    assert!(events.iter().any(|e| e == sb::EVENT), "{events:?}");
    assert!(events.iter().any(|e| e == sb::GAP), "{events:?}");

    let res = call(&mut ws, "s1", sb::method::SUBSCRIBE, json!({})).await;
    assert_eq!(res["ok"], true, "{res}");

    let receipt = api
        .send(SendRequest {
            key: KEY.into(),
            text: "hello there".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .expect("send");
    let run_id = receipt.run_id.expect("a run answers the message");

    let mut frames = Vec::new();
    let last = crate::common::ws::recv_until(
        &mut ws,
        "the run's end",
        |f| {
            f["type"] == "event"
                && matches!(&sequenced(f).event, EngineEvent::RunEnded { run_id: r, .. } if *r == run_id)
        },
        |f| frames.push(f),
    )
    .await;
    frames.push(last);
    let kinds: Vec<_> = frames
        .iter()
        .map(|f| {
            assert_eq!(f["type"], "event", "{f}");
            sequenced(f)
        })
        .collect();
    assert_numbered_from_one(&frames);
    let engine_seqs: Vec<u64> = kinds.iter().map(|s| s.seq).collect();
    assert!(
        engine_seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "engine seqs consecutive: {engine_seqs:?}"
    );
    // What a console draws from: the message, the run, the reply, the end — in that order.
    let pos = |pred: &dyn Fn(&EngineEvent) -> bool| {
        kinds
            .iter()
            .position(|s| pred(&s.event))
            .unwrap_or_else(|| panic!("missing event in {kinds:#?}"))
    };
    let user_line = pos(&|e| {
        matches!(e, EngineEvent::MessageAppended { line, .. }
            if line.to_string().contains("hello there") && !line.to_string().contains("re: hello"))
    });
    let started = pos(&|e| matches!(e, EngineEvent::RunStarted { run_id: r, .. } if *r == run_id));
    let reply_line = pos(&|e| {
        matches!(e, EngineEvent::MessageAppended { line, .. }
            if line.to_string().contains("re: hello there"))
    });
    let ended = pos(
        &|e| matches!(e, EngineEvent::RunEnded { run_id: r, status, .. } if *r == run_id && status.as_str() == "ok"),
    );
    // (The engine announces a scripted run's start after its reply line: both are
    // committed together; the gateway keeps the engine's order, checked above.)
    assert!(
        user_line < reply_line && reply_line < ended && started < ended,
        "order: message {user_line}, start {started}, reply {reply_line}, end {ended}: {kinds:#?}"
    );

    // Answers to later requests still come, between or after the events.
    let mut more = Vec::new();
    let res = call_keeping(&mut ws, "h1", "health", json!({}), &mut more).await;
    assert_eq!(res["ok"], true);
    gw.stop().await;
}

/// Without `switchboard.v1` in `connect.caps`, `switchboard.subscribe` is refused and the
/// client gets no engine events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_without_the_capability_is_an_invalid_request() {
    let b = scripted();
    let api = b.engine.start();
    let gw = gateway_support::start(api.clone()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let res = call(&mut ws, "s1", sb::method::SUBSCRIBE, json!({})).await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(sb::CAP),
        "{res}"
    );
    let receipt = api
        .send(SendRequest {
            key: KEY.into(),
            text: "unseen".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .expect("send");
    let run = receipt.run_id.expect("run");
    api.wait_run(&run, WAIT).await.expect("run ends");
    // Everything the engine emitted is out by now; the next frame is the answer, not an event.
    gateway_support::send(
        &mut ws,
        json!({"type": "req", "id": "h1", "method": "health"}),
    )
    .await;
    let f = recv(&mut ws).await.expect("health answer");
    assert_eq!(f["type"], "res", "no event expected: {f}");
    gw.stop().await;
}

/// More engine events than the engine's channel holds arrive while the connection's
/// forwarder cannot run (one thread, the test does not yield): the subscriber gets one
/// `switchboard.gap` with how many were lost, then the rest, frame seqs still 1, 2, 3 ….
#[tokio::test(flavor = "current_thread")]
async fn a_lost_stretch_of_engine_events_is_announced_as_a_gap() {
    let fake = Arc::new(common::fake_api::FakeApi::new(Default::default()));
    let gw = gateway_support::start(fake.clone() as Arc<dyn SessionsApi>).await;
    let (mut ws, _) = connected(&gw.addr, &[sb::CAP]).await;
    let res = call(&mut ws, "s1", sb::method::SUBSCRIBE, json!({})).await;
    assert_eq!(res["ok"], true, "{res}");
    // FakeApi's channel holds 1024 events.
    let total = 5000u64;
    for i in 0..total {
        fake.emit(EngineEvent::SessionUpdated {
            key: format!("agent:main:s{i}"),
        });
    }
    let first = recv(&mut ws).await.expect("the gap");
    assert_eq!(first["event"], sb::GAP, "{first}");
    let gap: GapPayload = serde_json::from_value(first["payload"].clone()).expect("gap payload");
    let kept = total - gap.missed;
    assert!(gap.missed > 0 && kept > 0, "{gap:?}");
    let mut frames = vec![first];
    for _ in 0..kept {
        let f = recv(&mut ws).await.expect("an event");
        frames.push(f);
    }
    assert_numbered_from_one(&frames);
    // The events after the gap are the newest ones, in order, ending with the last emitted.
    let seqs: Vec<u64> = frames[1..].iter().map(|f| sequenced(f).seq).collect();
    let want: Vec<u64> = (gap.missed + 1..=total).collect();
    assert_eq!(seqs, want);
    gw.stop().await;
}
