//! The `openai` backend running like a service, through the real engine against the fake
//! OpenAI-compatible server (`fake_model`): the owner aborts a run (its HTTP request is
//! dropped, the run ends `aborted`, the session stays usable, an exchange it belongs to ends
//! with reason `aborted`), a run timeout drops the request too, and
//! `models.providers.<id>.maxConcurrent` caps requests in flight across sessions and a
//! spawn's model override.
//!
//! Real time (the engine's writer thread does not mix with a paused clock); every wait is
//! bounded and nothing asserts on elapsed time.

use crate::common;
use crate::fake_model;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_engine::events::EngineEvent;
use switchboard_engine::store::SessionInit;
use switchboard_types::api::{
    LineRole, SendRequest, Sender, SessionsApi, ToolCall, TranscriptQuery,
};
use switchboard_types::key::SessionKey;

use fake_model::{Answer, Fake, text_reply};

const HANG: Duration = Duration::from_secs(60);
const KEY: &str = "agent:main:main";

/// A config whose `main` agent runs `fake/test-model`; `provider_extra` is merged into the
/// provider, `extra` into the top level.
fn config(base_url: &str, provider_extra: Value, extra: Value) -> Value {
    let mut provider = json!({ "baseUrl": base_url, "api": "openai-completions", "maxRetries": 0 });
    if let (Value::Object(p), Value::Object(e)) = (&mut provider, provider_extra) {
        p.extend(e);
    }
    let mut c = json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/test-model",
              "subagents": { "allowAgents": ["*"] } },
        ] },
        "models": { "providers": { "fake": provider } },
    });
    if let (Value::Object(c), Value::Object(e)) = (&mut c, extra) {
        c.extend(e);
    }
    c
}

/// A reply that takes far longer than any test waits (the client gives up first).
fn slow(text: &str) -> Answer {
    Answer {
        delay: Duration::from_secs(120),
        ..text_reply(text, 3, 2)
    }
}

/// A reply after `d` (so requests overlap).
fn after(d: Duration, text: &str) -> Answer {
    Answer {
        delay: d,
        ..text_reply(text, 3, 2)
    }
}

/// Polls `what` every 10 ms until it holds; fails the test after `HANG`.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(HANG, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting for {what}");
}

async fn send(api: &Arc<dyn SessionsApi>, key: &str, text: &str) -> String {
    tokio::time::timeout(
        HANG,
        api.send(SendRequest {
            key: key.to_string(),
            text: text.to_string(),
            from: Sender::default(),
            idempotency_key: None,
        }),
    )
    .await
    .expect("the send ends")
    .expect("the send is recorded")
    .run_id
    .expect("a run answers it")
}

async fn settle(b: &common::Bench) {
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("the engine settles");
}

/// The transcript's assistant replies and error lines, in order.
async fn assistant_lines(api: &Arc<dyn SessionsApi>, key: &str) -> Vec<String> {
    api.transcript(TranscriptQuery {
        key: key.to_string(),
        limit: 1000,
        ..TranscriptQuery::default()
    })
    .await
    .expect("transcript")
    .lines
    .into_iter()
    .filter(|l| matches!(l.role, LineRole::Assistant | LineRole::Error))
    .map(|l| l.text)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_aborts_a_slow_run_its_request_is_dropped_and_the_session_goes_on() {
    let fake = Fake::start(vec![slow("never seen"), text_reply("Second answer.", 5, 3)]).await;
    let b = common::bench(config(&fake.base_url, json!({}), json!({})));
    let api = b.engine.start();
    let run_id = send(&api, KEY, "take your time").await;
    until("the model request", || fake.seen().len() == 1).await;

    let done = tokio::time::timeout(HANG, api.abort(KEY, None))
        .await
        .expect("abort ends")
        .expect("abort works");
    assert_eq!(done.run_ids, vec![run_id.clone()]);
    // `abort` resolves once the end is recorded.
    let run = b
        .engine
        .run(&run_id)
        .await
        .unwrap()
        .expect("the run is recorded");
    assert_eq!(run.status.as_str(), "aborted", "{run:?}");
    assert_eq!(run.error.as_deref(), Some("aborted by the owner"));
    until("the fake sees the request dropped", || fake.dropped() == 1).await;
    let waited = api.wait_run(&run_id, HANG).await.unwrap();
    assert_eq!(waited.status.as_str(), "aborted");

    // The session stays usable: the next message gets the model's answer.
    let next = send(&api, KEY, "now quickly").await;
    settle(&b).await;
    let run = b.engine.run(&next).await.unwrap().unwrap();
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("Second answer."));
    assert_eq!(fake.seen().len(), 2);
    let lines = assistant_lines(&api, KEY).await;
    assert!(
        lines.iter().any(|l| l.contains("aborted by the owner")),
        "{lines:?}"
    );
    assert_eq!(lines.last().map(String::as_str), Some("Second answer."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_with_nothing_running_aborts_nothing() {
    let fake = Fake::start(vec![text_reply("Done.", 1, 1)]).await;
    let b = common::bench(config(&fake.base_url, json!({}), json!({})));
    let api = b.engine.start();
    // A session that never ran, then one whose run is over.
    assert!(api.abort(KEY, None).await.unwrap().run_ids.is_empty());
    let run_id = send(&api, KEY, "hi").await;
    settle(&b).await;
    assert!(api.abort(KEY, None).await.unwrap().run_ids.is_empty());
    assert_eq!(
        b.engine
            .run(&run_id)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_with_a_run_id_stops_only_that_run() {
    let fake = Fake::start(vec![slow("never seen")]).await;
    let b = common::bench(config(&fake.base_url, json!({}), json!({})));
    let api = b.engine.start();
    let run_id = send(&api, KEY, "slow").await;
    until("the model request", || fake.seen().len() == 1).await;
    let other = api.abort(KEY, Some("not-this-run")).await.unwrap();
    assert!(other.run_ids.is_empty());
    let elsewhere = api.abort("agent:main:elsewhere", None).await.unwrap();
    assert!(elsewhere.run_ids.is_empty());
    let done = api.abort(KEY, Some(&run_id)).await.unwrap();
    assert_eq!(done.run_ids, vec![run_id.clone()]);
    assert_eq!(
        b.engine
            .run(&run_id)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "aborted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_the_target_of_a_send_ends_the_exchange_as_aborted() {
    let fake = Fake::start(vec![slow("never seen")]).await;
    let extra = json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
    });
    let mut c = config(&fake.base_url, json!({}), extra);
    c["agents"]["list"][0]["model"] = json!("scripted");
    c["agents"]["list"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "id": "work", "model": "fake/test-model" }));
    let b = common::bench(c);
    let mut events = b.engine.events().subscribe();
    let api = b.engine.start();
    let target = "agent:work:main";
    for k in [KEY, target] {
        b.engine
            .store()
            .ensure(&SessionKey::from_canonical(k), SessionInit::default())
            .await
            .unwrap();
    }
    let sent = api
        .call_tool(ToolCall {
            tool: "sessions_send".into(),
            params: json!({ "sessionKey": target, "message": "PING", "timeoutSeconds": 0 }),
            requester: KEY.into(),
            sandboxed: false,
        })
        .await
        .unwrap();
    assert_eq!(sent.result["status"], "accepted", "{:?}", sent.result);
    until("the target's model request", || fake.seen().len() == 1).await;
    let done = api.abort(target, None).await.unwrap();
    assert_eq!(done.run_ids.len(), 1);
    settle(&b).await;
    let mut ended = None;
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::ExchangeEnded { reason, .. } = e {
            ended = Some(reason);
        }
    }
    assert_eq!(ended.map(|e| e.as_str()), Some("aborted"));
    assert_eq!(
        fake.seen().len(),
        1,
        "no announce or reply-back after the abort"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_caps_requests_in_flight_across_sessions() {
    let fake = Fake::start(vec![after(Duration::from_millis(150), "Pong.")]).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "maxConcurrent": 2 }),
        json!({}),
    ));
    let api = b.engine.start();
    let keys: Vec<String> = (1..=8).map(|i| format!("agent:main:s{i}")).collect();
    let sends = keys.iter().map(|k| send(&api, k, "ping"));
    let runs = futures_join(sends).await;
    settle(&b).await;
    assert_eq!(fake.seen().len(), 8);
    assert_eq!(fake.max_in_flight(), 2);
    for id in &runs {
        let run = b.engine.run(id).await.unwrap().unwrap();
        assert_eq!(run.status.as_str(), "ok", "{run:?}");
        assert_eq!(run.reply.as_deref(), Some("Pong."));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_model_override_shares_the_providers_cap() {
    let fake = Fake::start(vec![after(Duration::from_millis(150), "Done.")]).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "maxConcurrent": 1 }),
        json!({}),
    ));
    let api = b.engine.start();
    // Three sessions on the agent's model and three children on another model of the same
    // provider, all at once.
    let sends = (1..=3).map(|i| {
        let api = api.clone();
        async move { send(&api, &format!("agent:main:s{i}"), "ping").await }
    });
    b.engine
        .store()
        .ensure(&SessionKey::from_canonical(KEY), SessionInit::default())
        .await
        .unwrap();
    let spawns = (1..=3).map(|i| {
        let api = api.clone();
        async move {
            let r = api
                .call_tool(ToolCall {
                    tool: "sessions_spawn".into(),
                    params: json!({ "task": format!("task {i}"), "model": "fake/other-model" }),
                    requester: KEY.into(),
                    sandboxed: false,
                })
                .await
                .unwrap()
                .result;
            assert_eq!(r["status"], "accepted", "{r:?}");
            r["runId"].as_str().unwrap().to_string()
        }
    });
    let (mut runs, children) = tokio::join!(futures_join(sends), futures_join(spawns));
    settle(&b).await;
    runs.extend(children);
    let models: Vec<String> = fake
        .seen()
        .iter()
        .map(|s| s.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        models.iter().filter(|m| *m == "other-model").count(),
        3,
        "{models:?}"
    );
    assert_eq!(fake.max_in_flight(), 1, "{models:?}");
    for id in &runs {
        assert_eq!(
            b.engine.run(id).await.unwrap().unwrap().status.as_str(),
            "ok"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_timeout_drops_the_model_request() {
    // The child's request hangs; the parent's turn on the announce is answered at once.
    let fake = Fake::start(vec![slow("never seen"), text_reply("Noted.", 1, 1)]).await;
    let b = common::bench(config(&fake.base_url, json!({}), json!({})));
    let api = b.engine.start();
    b.engine
        .store()
        .ensure(&SessionKey::from_canonical(KEY), SessionInit::default())
        .await
        .unwrap();
    let r = api
        .call_tool(ToolCall {
            tool: "sessions_spawn".into(),
            params: json!({ "task": "think long", "runTimeoutSeconds": 1 }),
            requester: KEY.into(),
            sandboxed: false,
        })
        .await
        .unwrap()
        .result;
    assert_eq!(r["status"], "accepted", "{r:?}");
    let run_id = r["runId"].as_str().unwrap().to_string();
    settle(&b).await;
    let run = b.engine.run(&run_id).await.unwrap().unwrap();
    assert_eq!(run.status.as_str(), "timeout", "{run:?}");
    until("the fake sees the request dropped", || fake.dropped() == 1).await;
}

#[test]
fn config_check_explains_a_bad_max_concurrent() {
    let bench = common::CliBench::new(
        r#"{
  agents: { list: [ { id: "main", default: true, model: "local/llama" } ] },
  models: { providers: {
    local: { baseUrl: "http://127.0.0.1:1/v1", maxConcurrent: 0 },
    big: { baseUrl: "http://127.0.0.1:2/v1", maxConcurrent: 257 },
  } },
}"#,
    );
    let out = bench.command(&["config", "check"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("models.providers.local.maxConcurrent"),
        "{err}"
    );
    assert!(err.contains("models.providers.big.maxConcurrent"), "{err}");
    assert!(
        err.contains("expected a whole number from 1 to 256 (model requests to provider \"big\""),
        "{err}"
    );
    assert!(err.contains("got 257"), "{err}");
    assert!(err.contains("got 0"), "{err}");
}

/// Runs the futures concurrently, results in order.
async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    futures_util::future::join_all(fs).await
}

/// Waiting for a slot is part of the run: a child whose run timeout passes while the only
/// slot is taken times out without ever reaching the model; aborting the run holding the slot
/// frees it for the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_slot_counts_against_the_run_timeout_and_an_abort_frees_the_slot() {
    let fake = Fake::start(vec![slow("never seen"), text_reply("Noted.", 1, 1)]).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "maxConcurrent": 1 }),
        json!({}),
    ));
    let api = b.engine.start();
    let holder = send(&api, "agent:main:holder", "slow").await;
    until("the model request", || fake.seen().len() == 1).await;
    b.engine
        .store()
        .ensure(&SessionKey::from_canonical(KEY), SessionInit::default())
        .await
        .unwrap();
    let r = api
        .call_tool(ToolCall {
            tool: "sessions_spawn".into(),
            params: json!({ "task": "quick one", "runTimeoutSeconds": 1 }),
            requester: KEY.into(),
            sandboxed: false,
        })
        .await
        .unwrap()
        .result;
    let child = r["runId"].as_str().expect("a child run").to_string();
    let waited = api.wait_run(&child, HANG).await.unwrap();
    assert_eq!(waited.status.as_str(), "timeout", "{waited:?}");
    assert_eq!(fake.seen().len(), 1, "the child never got a slot");

    let done = api.abort("agent:main:holder", None).await.unwrap();
    assert_eq!(done.run_ids, vec![holder]);
    // The parent's turn on the child's announce now gets the slot.
    settle(&b).await;
    assert_eq!(fake.seen().len(), 2);
    let parent = b
        .engine
        .runs_of(&SessionKey::from_canonical(KEY), 10)
        .await
        .unwrap();
    assert!(
        parent
            .iter()
            .any(|r| r.status.as_str() == "ok" && r.reply.as_deref() == Some("Noted.")),
        "{parent:?}"
    );
}
