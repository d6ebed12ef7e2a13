//! The gateway under load and misbehaving clients, with a real WebSocket client against the
//! gateway in this process: 10,000 pipelined requests on one connection are all answered
//! under their ids, and sends into one session keep their arrival order; a client that
//! never reads is disconnected as lagged while another is still served; a client that
//! vanishes mid-run does not stop the run or lose its transcript.

use crate::common;
use crate::gateway_support;

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_protocol::switchboard as sb;
use switchboard_server::Options;
use switchboard_types::api::{EngineEvent, LineRole, SessionsApi, TranscriptQuery};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use gateway_support::*;

fn bench(delay_ms: u64) -> common::Bench {
    common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "delayMs": delay_ms, "reply": "re: {{text}}" } ] },
        ] },
    }))
}

/// 10,000 requests written back to back without waiting for answers (300 of them sends
/// into one session, the rest reads): every id is answered exactly once, each correctly,
/// and the session's transcript holds the sends in the order they were written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_pipelined_requests_are_all_answered_under_their_ids() {
    let b = bench(0);
    let gw = start(b.engine.start()).await;
    let (ws, _) = connected(&gw.addr, &[]).await;
    let (mut tx, mut rx) = ws.split();
    const TOTAL: usize = 10_000;
    const SENDS: usize = 300;
    let writer = tokio::spawn(async move {
        for i in 0..TOTAL {
            let frame = if i % (TOTAL / SENDS) == 0 && i / (TOTAL / SENDS) < SENDS {
                let n = i / (TOTAL / SENDS);
                json!({"type": "req", "id": format!("r{i}"), "method": "chat.send",
                       "params": {"sessionKey": "agent:main:order", "message": format!("m{n:03}")}})
            } else if i % 2 == 0 {
                json!({"type": "req", "id": format!("r{i}"), "method": "health"})
            } else {
                json!({"type": "req", "id": format!("r{i}"), "method": "sessions.list",
                       "params": {"limit": 1}})
            };
            // `feed` without flushing each frame: the client really pipelines.
            tx.feed(Message::text(frame.to_string()))
                .await
                .expect("write");
        }
        tx.flush().await.expect("flush");
        tx
    });
    let mut answers: HashMap<String, Value> = HashMap::new();
    while answers.len() < TOTAL {
        let msg = tokio::time::timeout(WAIT, rx.next())
            .await
            .expect("answers keep coming")
            .expect("the connection stays open")
            .expect("a frame");
        let Message::Text(t) = msg else { continue };
        let f: Value = serde_json::from_str(t.as_str()).expect("JSON");
        if f["type"] != "res" {
            continue;
        }
        let id = f["id"].as_str().expect("id").to_string();
        assert!(
            answers.insert(id.clone(), f).is_none(),
            "{id} answered twice"
        );
    }
    let _tx = writer.await.expect("writer");
    for i in 0..TOTAL {
        let a = &answers[&format!("r{i}")];
        assert_eq!(a["ok"], true, "{a}");
        let p = &a["payload"];
        let right = p["runId"].is_string() || p["ok"] == true || p["sessions"].is_array();
        assert!(right, "r{i}: {a}");
    }
    let api = b.engine.start();
    let page = api
        .transcript(TranscriptQuery {
            key: "agent:main:order".into(),
            limit: 10_000,
            ..TranscriptQuery::default()
        })
        .await
        .expect("transcript");
    let sent: Vec<String> = page
        .lines
        .iter()
        .filter(|l| l.role == LineRole::User)
        .map(|l| l.text.clone())
        .collect();
    let want: Vec<String> = (0..SENDS).map(|n| format!("m{n:03}")).collect();
    assert_eq!(sent, want, "sends recorded in arrival order");
    gw.stop().await;
}

/// A subscriber that never reads while events flood: once it is `maxBufferedBytes`
/// behind, it is disconnected ("lagged", or dropped if even the close cannot be sent);
/// another client is served meanwhile and afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_disconnected_and_others_are_served() {
    let fake = Arc::new(common::fake_api::FakeApi::new(Default::default()));
    let options = Options {
        max_buffered_bytes: 64 * 1024,
        ..options()
    };
    let gw = start_with(fake.clone() as Arc<dyn SessionsApi>, options).await;
    let (mut slow, hello) = connected(&gw.addr, &[sb::CAP]).await;
    assert_eq!(hello["policy"]["maxBufferedBytes"], 64 * 1024);
    ok_res(&call(&mut slow, "s", sb::method::SUBSCRIBE, json!({})).await);
    let (mut healthy, _) = connected(&gw.addr, &[]).await;

    // About 40 MB of events: more than the kernel's socket buffers can hide.
    let padding = "x".repeat(1000);
    for i in 0..40_000u32 {
        fake.emit(EngineEvent::SessionUpdated {
            key: format!("agent:main:{i}-{padding}"),
        });
        if i % 64 == 0 {
            // Let the connection's event task keep up with the engine's channel.
            tokio::task::yield_now().await;
        }
        if i == 20_000 {
            ok_res(&call(&mut healthy, "mid", "health", json!({})).await);
        }
    }
    ok_res(&call(&mut healthy, "after", "health", json!({})).await);

    // The slow client now reads: what was already on the wire, then the end.
    let mut frames = 0u64;
    // Bounded as a whole: a server that never closed it would otherwise keep this reading.
    let end = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        loop {
            match recv(&mut slow).await {
                Ok(_) => frames += 1,
                Err(e) => break e,
            }
        }
    })
    .await
    .expect("the slow client's connection ends");
    // `None`: dropped, the close frame could not be sent.
    if let Some((code, reason)) = &end {
        assert_eq!(*code, CloseCode::Policy, "{reason}");
        assert!(reason.starts_with("lagged"), "{reason}");
    }
    assert!(
        frames < 40_000,
        "it was cut off, not served everything ({frames} frames)"
    );
    let (mut later, _) = connected(&gw.addr, &[]).await;
    ok_res(&call(&mut later, "h", "health", json!({})).await);
    gw.stop().await;
}

fn ok_res(res: &Value) {
    assert_eq!(res["ok"], true, "{res}");
}

/// A client that sends a message (and an `agent` call whose final answer is still to
/// come) and then vanishes without a close: both runs complete and their transcript
/// lines are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_mid_run_does_not_stop_the_run() {
    let b = bench(300);
    let api = b.engine.start();
    let gw = start(api.clone()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let sent = call(
        &mut ws,
        "1",
        "chat.send",
        json!({"sessionKey": "agent:main:gone", "message": "are you there"}),
    )
    .await;
    let chat_run = sent["payload"]["runId"]
        .as_str()
        .expect("runId")
        .to_string();
    send(
        &mut ws,
        json!({"type": "req", "id": "2", "method": "agent",
               "params": {"sessionKey": "agent:main:gone2", "message": "still there"}}),
    )
    .await;
    let accepted = frames_until(&mut ws, |f| f["type"] == "res" && f["id"] == "2").await;
    let agent_run = accepted
        .last()
        .and_then(|f| f["payload"]["runId"].as_str())
        .expect("accepted with a runId")
        .to_string();
    // Gone: the socket dropped mid-run, no close frame.
    drop(ws);
    for (run, key, reply) in [
        (&chat_run, "agent:main:gone", "re: are you there"),
        (&agent_run, "agent:main:gone2", "re: still there"),
    ] {
        let r = api.wait_run(run, WAIT).await.expect("wait");
        assert_eq!(r.status.as_str(), "ok", "{r:?}");
        let page = api
            .transcript(TranscriptQuery {
                key: key.into(),
                limit: 100,
                ..TranscriptQuery::default()
            })
            .await
            .expect("transcript");
        let texts: Vec<&str> = page.lines.iter().map(|l| l.text.as_str()).collect();
        assert!(texts.contains(&reply), "{texts:?}");
    }
    // The gateway still serves.
    let (mut again, _) = connected(&gw.addr, &[]).await;
    ok_res(&call(&mut again, "h", "health", json!({})).await);
    gw.stop().await;
}
