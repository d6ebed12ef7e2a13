//! OpenClaw `chat` delta events on our gateway, through a real WebSocket client over a real
//! engine: a scripted agent that streams its reply (`streamMs`) gives the sender `chat`
//! frames with `state: "delta"` before the `final`, in order, numbered, each carrying the
//! text accumulated so far in the shape OpenClaw 2026.9.6 sends.

use crate::common;
use crate::gateway_support;

use serde_json::{Value, json};

use gateway_support::*;

const STREAMING: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { reply: "streamed reply for {{text}}", streamMs: 5 },
    ] },
  ] },
}"#;

fn is_final_for(run: &str) -> impl Fn(&Value) -> bool + '_ {
    move |f: &Value| {
        f["event"] == "chat"
            && f["payload"]["runId"] == run
            && ["final", "error"].contains(&f["payload"]["state"].as_str().unwrap_or(""))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_agent_gives_the_sender_chat_deltas_before_the_final() {
    let b = common::bench(json5::from_str(STREAMING).expect("test config"));
    let gw = start(b.engine.start()).await;
    let (mut ws, _hello) = connected(&gw.addr, &[]).await;
    let mut frames = Vec::new();
    let res = call_keeping(
        &mut ws,
        "1",
        "chat.send",
        json!({"sessionKey": "agent:main:main", "message": "you", "idempotencyKey": "k1",
               "deliver": false}),
        &mut frames,
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    let run = res["payload"]["runId"].as_str().expect("runId").to_string();
    if !frames.iter().any(is_final_for(&run)) {
        frames.extend(frames_until(&mut ws, is_final_for(&run)).await);
    }
    assert_seq_increasing(&frames);
    let chat: Vec<&Value> = named(&frames, "chat")
        .into_iter()
        .filter(|f| f["payload"]["runId"] == run.as_str())
        .collect();
    let (last, deltas) = chat.split_last().expect("chat events");
    assert_eq!(last["payload"]["state"], "final", "{last}");
    let reply = "streamed reply for you";
    assert_eq!(last["payload"]["message"]["content"][0]["text"], reply);

    // One delta a word, in order, numbered, each with the text so far.
    let words = ["streamed ", "reply ", "for ", "you"];
    assert_eq!(deltas.len(), words.len(), "{deltas:?}");
    let mut so_far = String::new();
    for (i, (d, word)) in deltas.iter().zip(words).enumerate() {
        let p = &d["payload"];
        so_far.push_str(word);
        assert_eq!(p["state"], "delta", "{d}");
        assert_eq!(p["seq"], i as u64 + 1, "{d}");
        assert_eq!(p["deltaText"], word, "{d}");
        assert_eq!(p["message"]["role"], "assistant");
        assert_eq!(p["message"]["content"][0]["text"], so_far.as_str(), "{d}");
        assert_eq!(p["sessionKey"], "agent:main:main");
        assert_eq!(p["agentId"], "main");
    }
    assert_eq!(so_far, reply);

    // The keys of OpenClaw's own delta frame, and of its message.
    let recorded = recorded_frames();
    let rec = recorded
        .iter()
        .find(|f| f["event"] == "chat" && f["payload"]["state"] == "delta")
        .expect("a recorded chat delta");
    assert_same_keys(&deltas[0]["payload"], &rec["payload"], &[]);
    assert_same_keys(
        &deltas[0]["payload"]["message"],
        &rec["payload"]["message"],
        &[],
    );
    gw.stop().await;
}

/// A client that neither sent into the session nor follows its messages gets no deltas
/// (the same rule as the final), while one following its messages does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_clients_following_the_session_get_its_deltas() {
    let b = common::bench(json5::from_str(STREAMING).expect("test config"));
    let gw = start(b.engine.start()).await;
    let (mut follower, _) = connected(&gw.addr, &[]).await;
    let res = call(
        &mut follower,
        "1",
        "sessions.messages.subscribe",
        json!({"key": "agent:main:main"}),
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    let (mut bystander, _) = connected(&gw.addr, &[]).await;
    let (mut sender, _) = connected(&gw.addr, &[]).await;
    let res = call(
        &mut sender,
        "1",
        "chat.send",
        json!({"sessionKey": "agent:main:main", "message": "all", "idempotencyKey": "k2",
               "deliver": false}),
    )
    .await;
    let run = res["payload"]["runId"].as_str().expect("runId").to_string();
    let seen = frames_until(&mut follower, is_final_for(&run)).await;
    let deltas = named(&seen, "chat")
        .into_iter()
        .filter(|f| f["payload"]["state"] == "delta")
        .count();
    assert_eq!(deltas, 4, "{seen:?}");
    // The bystander: a ping answered after the run ended, with no chat frame before it.
    let _ = frames_until(&mut sender, is_final_for(&run)).await;
    let before = call_frames(&mut bystander).await;
    assert!(
        named(&before, "chat").is_empty(),
        "a bystander got chat events: {before:?}"
    );
    gw.stop().await;
}

/// Frames up to the answer of a `health` request sent now (the events queued before it).
async fn call_frames(ws: &mut Ws) -> Vec<Value> {
    let mut early = Vec::new();
    let _ = call_keeping(ws, "probe", "health", json!({}), &mut early).await;
    early
}
