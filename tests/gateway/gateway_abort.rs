//! Aborting a run through the gateway, against the fake model server (`fake_model`) whose
//! answer never comes in time: OpenClaw's `chat.abort` over a real WebSocket (`{ok, aborted,
//! runIds}`, `runId` limiting it, nothing running is not an error, write scope needed), and
//! `RemoteApi::abort` (`switchboard.abort`) and `OpenClawApi::abort` (OpenClaw's own
//! `chat.abort`) over the in-process gateway.

use crate::common;
use crate::fake_model;
use crate::gateway_support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_protocol::switchboard as sb;
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::{SendRequest, Sender, SessionsApi};

use fake_model::{Answer, Fake, text_reply};
use gateway_support::*;

/// The model answers the first request after two minutes (never, for a test), then at once.
async fn slow_then_quick() -> Fake {
    let slow = Answer {
        delay: Duration::from_secs(120),
        ..text_reply("never seen", 1, 1)
    };
    Fake::start(vec![slow, text_reply("Quick now.", 1, 1)]).await
}

fn bench(fake: &Fake) -> common::Bench {
    common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/test-model" },
        ] },
        "models": { "providers": { "fake": {
            "baseUrl": fake.base_url, "api": "openai-completions", "maxRetries": 0,
        } } },
    }))
}

fn ok(res: &Value) -> &Value {
    assert_eq!(res["ok"], true, "{res}");
    &res["payload"]
}

/// Polls `what` every 10 ms until it holds; fails the test after `WAIT`.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(WAIT, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_abort_stops_the_running_run_over_a_websocket() {
    let fake = slow_then_quick().await;
    let b = bench(&fake);
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let sent = call(
        &mut ws,
        "1",
        "chat.send",
        json!({"sessionKey": "main", "message": "think hard", "idempotencyKey": "run-a"}),
    )
    .await;
    let run = ok(&sent)["runId"].as_str().expect("runId").to_string();
    until("the model request", || fake.seen().len() == 1).await;

    // Another run id, or a session with nothing running: nothing is aborted, no error.
    let other = call(
        &mut ws,
        "2",
        "chat.abort",
        json!({"sessionKey": "main", "runId": "not-this-one"}),
    )
    .await;
    assert_eq!(
        ok(&other),
        &json!({"ok": true, "aborted": false, "runIds": []})
    );
    let nobody = call(
        &mut ws,
        "3",
        "chat.abort",
        json!({"sessionKey": "agent:main:nobody"}),
    )
    .await;
    assert_eq!(
        ok(&nobody),
        &json!({"ok": true, "aborted": false, "runIds": []})
    );

    let aborted = call(&mut ws, "4", "chat.abort", json!({"sessionKey": "main"})).await;
    assert_eq!(
        ok(&aborted),
        &json!({"ok": true, "aborted": true, "runIds": [run]})
    );
    until("the fake sees the request dropped", || fake.dropped() == 1).await;
    // As OpenClaw's agent.wait reports an aborted run.
    let waited = call(
        &mut ws,
        "5",
        "agent.wait",
        json!({"runId": run, "timeoutMs": 30_000}),
    )
    .await;
    assert_eq!(ok(&waited)["status"], "timeout", "{waited}");
    assert_eq!(ok(&waited)["error"], "aborted by the owner");

    // The session goes on.
    let (_, waited) = send_and_wait(&mut ws, "main", "and now?", "run-b").await;
    assert_eq!(ok(&waited)["status"], "ok", "{waited}");
    assert_eq!(ok(&waited)["terminalReply"]["text"], "Quick now.");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_needs_the_write_scope() {
    let fake = slow_then_quick().await;
    let b = bench(&fake);
    let gw = start(b.engine.start()).await;
    let (mut reader, _) = connected_with(
        &gw.addr,
        connect_params(TOKEN, &[sb::CAP], &["operator.read"]),
    )
    .await;
    for (method, params) in [
        ("chat.abort", json!({"sessionKey": "main"})),
        (sb::method::ABORT, json!({"key": "agent:main:main"})),
    ] {
        let res = call(&mut reader, "w", method, params).await;
        assert_eq!(res["ok"], false, "{res}");
        assert_eq!(res["error"]["code"], "FORBIDDEN", "{method}");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_api_aborts_over_the_gateway() {
    let fake = slow_then_quick().await;
    let b = bench(&fake);
    let gw = start(b.engine.start()).await;
    let mut options = LinkOptions::new(format!("ws://{}", gw.addr), Some(TOKEN.into()));
    options.connect_timeout = Duration::from_secs(5);
    let link = Link::connect(options)
        .await
        .expect("the gateway accepts the token");
    let remote: Arc<dyn SessionsApi> = RemoteApi::new(Arc::new(link));
    let key = "agent:main:main";
    let receipt = remote
        .send(SendRequest {
            key: key.into(),
            text: "think hard".into(),
            from: Sender::owner(),
            idempotency_key: None,
        })
        .await
        .expect("send");
    let run = receipt.run_id.expect("a run");
    until("the model request", || fake.seen().len() == 1).await;
    let done = remote.abort(key, None).await.expect("abort");
    assert_eq!(done.run_ids, vec![run.clone()]);
    let waited = remote.wait_run(&run, WAIT).await.expect("wait");
    assert_eq!(waited.status.as_str(), "aborted");
    assert_eq!(waited.error.as_deref(), Some("aborted by the owner"));
    until("the fake sees the request dropped", || fake.dropped() == 1).await;
    let again = remote.abort(key, None).await.expect("abort again");
    assert!(again.run_ids.is_empty());
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openclaw_api_aborts_with_chat_abort() {
    let fake = slow_then_quick().await;
    let b = bench(&fake);
    let local = b.engine.start();
    let gw = start(local.clone()).await;
    let mut options = LinkOptions::new(format!("ws://{}", gw.addr), Some(TOKEN.into()));
    options.connect_timeout = Duration::from_secs(5);
    let link = Link::connect(options)
        .await
        .expect("the gateway accepts the token");
    let openclaw: Arc<dyn SessionsApi> = Arc::new(OpenClawApi::new(Arc::new(link)));
    let key = "agent:main:main";
    let receipt = local
        .send(SendRequest {
            key: key.into(),
            text: "think hard".into(),
            from: Sender::owner(),
            idempotency_key: None,
        })
        .await
        .expect("send");
    let run = receipt.run_id.expect("a run");
    until("the model request", || fake.seen().len() == 1).await;
    let wrong = openclaw
        .abort(key, Some("another-run"))
        .await
        .expect("abort");
    assert!(wrong.run_ids.is_empty());
    let done = openclaw.abort(key, Some(&run)).await.expect("abort");
    assert_eq!(done.run_ids, vec![run.clone()]);
    let waited = local.wait_run(&run, WAIT).await.expect("wait");
    assert_eq!(waited.status.as_str(), "aborted");
    until("the fake sees the request dropped", || fake.dropped() == 1).await;
    gw.stop().await;
}
