//! Acknowledgements that never lie (issue 23 items 5 and 6), against real `switchboard serve`
//! processes on one state folder: a send acknowledged before a `kill -9` has a run that the
//! restarted gateway reports as ended (never NOT_FOUND) and that history shows; its
//! `idempotencyKey` survives the restart, and a key reused for another session or message is
//! refused; a run whose end cannot be written (a failing disk) still ends for its waiters.

use crate::gateway_process;

use std::path::Path;
use std::process::Child;
use std::sync::mpsc;

use gateway_process::{WAIT, Ws, connected, launch, recv, send, serve_command};
use serde_json::{Value, json};

/// `slow …` never answers within a test (the turn sleeps 10 min); anything else at once.
const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
    script: [ { when: { text: "/^slow/" }, delayMs: 600000, reply: "too late" },
              { reply: "got: {{text}}" } ] } ] } }"#;

/// A `serve` on `root/state`; killed (SIGKILL) when dropped.
struct Serve {
    child: Child,
    addr: String,
    _stderr: mpsc::Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(root: &Path, failpoint: Option<&str>) -> Serve {
    let config = root.join("config.json5");
    std::fs::write(&config, CONFIG).expect("config");
    let mut cmd = serve_command(root, &config);
    if let Some(f) = failpoint {
        cmd.env("SWITCHBOARD_FAILPOINT", f);
    }
    let launched = launch(cmd);
    Serve {
        child: launched.child,
        addr: launched.addr,
        _stderr: launched.stderr,
    }
}

impl Serve {
    /// `kill -9`: no chance to record anything more.
    fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
    }
}

/// The `res` to a request (events on the way kept in `events`).
async fn call_keeping(
    ws: &mut Ws,
    id: &str,
    method: &str,
    params: Value,
    events: &mut Vec<Value>,
) -> Value {
    send(
        ws,
        json!({"type": "req", "id": id, "method": method, "params": params}),
    )
    .await;
    next_res(ws, id, events).await
}

async fn next_res(ws: &mut Ws, id: &str, events: &mut Vec<Value>) -> Value {
    crate::common::ws::recv_until(
        ws,
        &format!("the answer to {id}"),
        |f| f["type"] == "res" && f["id"] == id,
        |f| events.push(f),
    )
    .await
}

async fn call(ws: &mut Ws, id: &str, method: &str, params: Value) -> Value {
    call_keeping(ws, id, method, params, &mut Vec::new()).await
}

/// `agent.wait` on `run_id`, up to 5 s.
async fn agent_wait(ws: &mut Ws, id: &str, run_id: &str) -> Value {
    let params = json!({"runId": run_id, "timeoutMs": 5000});
    call(ws, id, "agent.wait", params).await
}

fn user_texts(history: &Value) -> Vec<String> {
    history["payload"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            m["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_send_survives_a_kill_and_its_key_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = serve(dir.path(), None);
    let mut ws = connected(&first.addr).await;
    let params = json!({"sessionKey": "main", "message": "slow work", "idempotencyKey": "key-1"});
    let ack = call(&mut ws, "s1", "chat.send", params.clone()).await;
    assert_eq!(ack["ok"], true, "{ack}");
    let run_id = ack["payload"]["runId"].as_str().expect("runId").to_string();
    // The run is under way (its reply is ten minutes off) when the process dies.
    drop(ws);
    first.kill();

    let second = serve(dir.path(), None);
    let mut ws = connected(&second.addr).await;
    let waited = agent_wait(&mut ws, "w1", &run_id).await;
    assert_eq!(waited["ok"], true, "never NOT_FOUND: {waited}");
    assert_eq!(waited["payload"]["status"], "error", "{waited}");
    let error = waited["payload"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("engine stopped"), "{waited}");

    let history = call(&mut ws, "h1", "chat.history", json!({"sessionKey": "main"})).await;
    let messages = history["payload"]["messages"].as_array().expect("messages");
    let last = messages.last().expect("a last message");
    assert_eq!(last["role"], "assistant", "{history}");
    assert_eq!(last["stopReason"], "error", "{history}");
    assert!(
        last["errorMessage"]
            .as_str()
            .is_some_and(|e| e.contains("engine stopped")),
        "{history}"
    );

    // The client retries with its key: the first run, and no second message.
    let retry = call(&mut ws, "s2", "chat.send", params).await;
    assert_eq!(retry["ok"], true, "{retry}");
    assert_eq!(retry["payload"]["runId"], run_id.as_str(), "{retry}");
    let history = call(&mut ws, "h2", "chat.history", json!({"sessionKey": "main"})).await;
    assert_eq!(user_texts(&history), ["slow work"], "{history}");

    // The key names that message to that session, and nothing else.
    let other_session = json!({"sessionKey": "agent:main:other", "message": "slow work",
                               "idempotencyKey": "key-1"});
    let refused = call(&mut ws, "s3", "chat.send", other_session).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("key-1") && why.contains("agent:main:main"),
        "{why}"
    );
    let other_text = json!({"sessionKey": "main", "message": "something else",
                            "idempotencyKey": "key-1"});
    let refused = call(&mut ws, "s4", "agent", other_text).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("key-1") && why.contains("different message"),
        "{why}"
    );
    let history = call(&mut ws, "h3", "chat.history", json!({"sessionKey": "main"})).await;
    assert_eq!(user_texts(&history), ["slow work"], "{history}");
    let other = call(
        &mut ws,
        "h4",
        "chat.history",
        json!({"sessionKey": "agent:main:other"}),
    )
    .await;
    // A session nothing reached has an empty history (as OpenClaw's TUI expects of one).
    assert_eq!(
        other["payload"]["messages"],
        json!([]),
        "no message reached the other session: {other}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_end_cannot_be_recorded_ends_in_error_for_its_waiters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = serve(dir.path(), Some("run-end-storage-error"));
    let mut ws = connected(&failing.addr).await;
    let mut events = Vec::new();
    let params = json!({"sessionKey": "main", "message": "hello", "idempotencyKey": "a-1"});
    let accepted = call_keeping(&mut ws, "a1", "agent", params, &mut events).await;
    assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
    let run_id = accepted["payload"]["runId"]
        .as_str()
        .expect("runId")
        .to_string();
    // `agent`'s second answer: the run failed, and says why.
    let done = next_res(&mut ws, "a1", &mut events).await;
    assert_eq!(done["payload"]["status"], "error", "{done}");
    let summary = done["payload"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("storage error"), "{done}");
    // The `chat` event a streaming client waits for: state error, not silence (ticks come
    // every 30 s, so the wait is bounded on its own).
    let chat_for_run = |events: &[Value]| {
        events
            .iter()
            .any(|e| e["event"] == "chat" && e["payload"]["runId"] == run_id.as_str())
    };
    tokio::time::timeout(WAIT, async {
        while !chat_for_run(&events) {
            events.push(recv(&mut ws).await.expect("a frame"));
        }
    })
    .await
    .expect("a chat event for the run within the wait");
    let chat = events
        .iter()
        .find(|e| e["event"] == "chat" && e["payload"]["runId"] == run_id.as_str())
        .expect("chat event");
    assert_eq!(chat["payload"]["state"], "error", "{chat}");
    // Asked later (the run's task is over; its row still says running): the failure.
    let waited = agent_wait(&mut ws, "w1", &run_id).await;
    assert_eq!(waited["payload"]["status"], "error", "{waited}");
    drop(ws);
    failing.kill();

    // The next start records the end the failing disk refused.
    let healthy = serve(dir.path(), None);
    let mut ws = connected(&healthy.addr).await;
    let waited = agent_wait(&mut ws, "w2", &run_id).await;
    assert_eq!(waited["payload"]["status"], "error", "{waited}");
}

/// Repeats sent back to back, before the first is answered, wait for it: one message, one
/// run, the same `runId` in every answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_repeats_of_a_key_get_the_first_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = serve(dir.path(), None);
    let mut ws = connected(&gateway.addr).await;
    let params = json!({"sessionKey": "main", "message": "once", "idempotencyKey": "p-1"});
    for id in ["p1", "p2", "p3"] {
        send(
            &mut ws,
            json!({"type": "req", "id": id, "method": "chat.send", "params": params}),
        )
        .await;
    }
    let mut events = Vec::new();
    let mut run_ids = Vec::new();
    for id in ["p1", "p2", "p3"] {
        let res = next_res(&mut ws, id, &mut events).await;
        assert_eq!(res["ok"], true, "{res}");
        run_ids.push(res["payload"]["runId"].as_str().expect("runId").to_string());
    }
    assert!(run_ids.iter().all(|r| *r == run_ids[0]), "{run_ids:?}");
    let history = call(&mut ws, "h", "chat.history", json!({"sessionKey": "main"})).await;
    assert_eq!(user_texts(&history), ["once"], "{history}");
}
