//! OpenClaw's own clients on our gateway (issue 25, item 3), against real `switchboard serve`
//! processes: the request sequence OpenClaw 2026.9.6's TUI sent during a captured session
//! (`tests/fixtures/openclaw-tui-2026.9.6/requests.jsonl`) replayed with no `unknown method`
//! and OpenClaw's shapes, `/send off` from it changing the policy; owner commands only for
//! `operator.admin`; the order of a run's end events against `agent`'s answers; the HTTP
//! probes and the pre-auth budget per address on the gateway's port.

use crate::gateway_process::{self, WAIT, Ws, challenge, recv, send, start_with_config};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = r#"{ agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
        { when: { text: "/^SAY /" }, reply: "{{text}}" }, { reply: "ECHO: {{text}}" } ] },
    { id: "work", model: "scripted", script: [ { reply: "WORK: {{text}}" } ] } ] } }"#;

const FIXTURE: &str = include_str!("../fixtures/openclaw-tui-2026.9.6/requests.jsonl");

/// A WebSocket past `hello-ok` with `params` as the `connect` (the test token put in).
async fn connect_as(addr: &str, mut params: Value) -> Ws {
    let mut ws = gateway_process::open(addr).await;
    challenge(&mut ws).await;
    params["auth"] = json!({"token": gateway_process::TOKEN});
    send(
        &mut ws,
        json!({"type": "req", "id": "connect", "method": "connect", "params": params}),
    )
    .await;
    let hello = recv(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    ws
}

/// Sends one request; its `res`, and the events that came before it.
async fn call(ws: &mut Ws, id: &str, method: &str, params: Value) -> (Value, Vec<Value>) {
    send(
        ws,
        json!({"type": "req", "id": id, "method": method, "params": params}),
    )
    .await;
    let mut events = Vec::new();
    let frame = crate::common::ws::recv_until(
        ws,
        &format!("the answer to {id}"),
        |f| f["type"] == "res" && f["id"] == id,
        |f| events.push(f),
    )
    .await;
    (frame, events)
}

/// Waits for the `chat` event of `run_id` in `state`; the events seen on the way.
async fn chat_event(ws: &mut Ws, run_id: &str, state: &str, seen: &mut Vec<Value>) -> Value {
    if let Some(found) = seen.iter().find(|f| is_chat(f, run_id, state)) {
        return found.clone();
    }
    // Bounded as a whole: the gateway's ticks keep each `recv` within its own wait.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no chat {state} event for {run_id}; seen {seen:?}"
        );
        let frame = recv(ws).await.expect("a chat event");
        if is_chat(&frame, run_id, state) {
            return frame;
        }
        seen.push(frame);
    }
}

fn is_chat(f: &Value, run_id: &str, state: &str) -> bool {
    f["event"] == "chat" && f["payload"]["runId"] == run_id && f["payload"]["state"] == state
}

/// The TUI's calls, in the order it made them, against a gateway whose sessions were
/// made by a send each first (the capture ran on a populated OpenClaw).
#[tokio::test]
async fn openclaw_tui_sequence_is_answered_in_openclaw_shapes() {
    let gw = start_with_config(CONFIG, &[]);
    let requests: Vec<Value> = FIXTURE
        .lines()
        .map(|l| serde_json::from_str(l).expect("fixture line"))
        .collect();
    assert_eq!(requests[0]["method"], "connect");
    let mut ws = connect_as(&gw.addr, requests[0]["params"].clone()).await;
    // Their TUI attaches to a session before anything was said there: an empty history.
    let (empty, _) = call(
        &mut ws,
        "h0",
        "chat.history",
        json!({"sessionKey": "agent:main:main", "limit": 200}),
    )
    .await;
    assert_eq!(empty["payload"]["messages"], json!([]), "{empty}");
    for (i, key) in ["agent:main:s2", "agent:work:s2"].into_iter().enumerate() {
        let (res, _) = call(
            &mut ws,
            &format!("seed{i}"),
            "agent",
            json!({"sessionKey": key, "message": "hello", "idempotencyKey": format!("seed-{i}")}),
        )
        .await;
        assert_eq!(res["ok"], true, "{res}");
        let run_id = res["payload"]["runId"].as_str().expect("run").to_string();
        let (done, _) = call(
            &mut ws,
            &format!("wait{i}"),
            "agent.wait",
            json!({"runId": run_id}),
        )
        .await;
        assert_eq!(done["payload"]["status"], "ok", "{done}");
    }
    for (i, r) in requests.iter().enumerate().skip(1) {
        let method = r["method"].as_str().expect("method");
        let id = format!("r{i}");
        let (res, mut events) = call(&mut ws, &id, method, r["params"].clone()).await;
        let message = res["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.starts_with("unknown method"), "{method}: {res}");
        let p = &res["payload"];
        match method {
            "question.list" => assert_eq!(*p, json!({"questions": []})),
            "plugin.approval.list" => assert_eq!(*p, json!([])),
            "taskSuggestions.list" => assert_eq!(*p, json!({"suggestions": []})),
            "commands.list" => {
                let names: Vec<&str> = p["commands"]
                    .as_array()
                    .expect("commands")
                    .iter()
                    .map(|c| c["name"].as_str().expect("name"))
                    .collect();
                assert!(names.contains(&"send") && names.contains(&"status"), "{p}");
                for field in [
                    "nativeName",
                    "textAliases",
                    "description",
                    "category",
                    "source",
                    "scope",
                    "acceptsArgs",
                ] {
                    assert!(p["commands"][0].get(field).is_some(), "{field} in {p}");
                }
            }
            "sessions.describe" => {
                assert_eq!(p["session"]["key"], "agent:main:s2", "{p}");
                assert_eq!(p["session"]["kind"], "direct", "{p}");
                assert_eq!(p["session"]["model"], "scripted", "{p}");
            }
            "sessions.list" => {
                for field in [
                    "ts",
                    "count",
                    "limitApplied",
                    "hasMore",
                    "nextOffset",
                    "defaults",
                    "sessions",
                ] {
                    assert!(p.get(field).is_some(), "{field} in {p}");
                }
                let rows = p["sessions"].as_array().expect("rows");
                assert!(!rows.is_empty(), "{p}");
                for row in rows {
                    assert_eq!(row["agentId"], "main", "agentId honoured: {p}");
                    assert_eq!(row["kind"], "direct");
                    for field in [
                        "key",
                        "sessionId",
                        "updatedAt",
                        "channel",
                        "model",
                        "sendPolicy",
                        "archived",
                    ] {
                        assert!(row.get(field).is_some(), "{field} in {row}");
                    }
                }
                if r["params"]["includeLastMessage"] == true {
                    assert!(
                        rows.iter()
                            .all(|row| row.get("lastMessagePreview").is_some()),
                        "{p}"
                    );
                    assert!(
                        rows.iter().all(|row| row.get("derivedTitle").is_some()),
                        "{p}"
                    );
                }
            }
            "chat.history" => {
                for field in [
                    "sessionKey",
                    "sessionId",
                    "messages",
                    "hasMore",
                    "totalMessages",
                    "deltaCursor",
                    "sessionInfo",
                ] {
                    assert!(p.get(field).is_some(), "{field} in {p}");
                }
            }
            "sessions.create" => {
                assert_eq!(res["ok"], true, "{res}");
                assert_eq!(
                    p["key"], "agent:work:tui-30a0881b-dff2-440b-910f-e94bbca138c7",
                    "{p}"
                );
                assert_eq!(p["runStarted"], false);
            }
            "chat.send" => {
                let text = r["params"]["message"].as_str().expect("message");
                let run_id = r["params"]["idempotencyKey"].as_str().expect("key");
                if let Some(word) = text.strip_prefix("/send ") {
                    // An owner's command: answered as OpenClaw does, the reply as the
                    // final `chat` event of the client's run id; the policy changed.
                    assert_eq!(p["status"], "started", "{res}");
                    let fin = chat_event(&mut ws, run_id, "final", &mut events).await;
                    let reply = fin["payload"]["message"]["content"][0]["text"].as_str();
                    assert_eq!(
                        reply,
                        Some(format!("⚙️ Send policy set to {word}.").as_str())
                    );
                    let (d, _) = call(
                        &mut ws,
                        &format!("{id}d"),
                        "sessions.describe",
                        json!({"key": "agent:main:s2"}),
                    )
                    .await;
                    let want = if word == "off" {
                        json!("deny")
                    } else {
                        Value::Null
                    };
                    assert_eq!(d["payload"]["session"]["sendPolicy"], want, "{d}");
                }
            }
            _ => assert_eq!(res["ok"], true, "{method}: {res}"),
        }
    }
    // The replayed session created by `/new` is there, empty, named for its parent.
    let (d, _) = call(
        &mut ws,
        "last",
        "sessions.describe",
        json!({"key": "agent:work:tui-30a0881b-dff2-440b-910f-e94bbca138c7"}),
    )
    .await;
    assert_eq!(
        d["payload"]["session"]["parentSessionKey"], "agent:work:s2",
        "{d}"
    );
}

/// Their TUI attaching to a session nothing was said in yet (`agent:main:main` on a fresh
/// gateway) asks `chat.history` and, together, `sessions.describe` and `sessions.list`
/// (`limit: 1`). OpenClaw 2026.9.6 answers the describe `{session: null}` (checked on the
/// live peer) and the history with `defaults`; an error there made their TUI drop the
/// list's `defaults` too, and its footer read "unknown | tokens ?".
#[tokio::test]
async fn a_session_with_no_message_yet_is_described_as_null_with_the_defaults() {
    let gw = start_with_config(
        r#"{ agents: { list: [ { id: "main", default: true, model: "fake/fake-1" } ] },
             models: { providers: { fake: { baseUrl: "http://127.0.0.1:9/v1",
               models: [ { id: "fake-1", contextWindow: 128000 } ] } } } }"#,
        &[],
    );
    let mut ws = gateway_process::connected(&gw.addr).await;
    let (d, _) = call(
        &mut ws,
        "d",
        "sessions.describe",
        json!({"key": "agent:main:main"}),
    )
    .await;
    assert_eq!(d["ok"], true, "{d}");
    assert_eq!(d["payload"], json!({"session": null}));
    let (h, _) = call(
        &mut ws,
        "h",
        "chat.history",
        json!({"sessionKey": "agent:main:main", "limit": 200}),
    )
    .await;
    assert_eq!(h["ok"], true, "{h}");
    assert_eq!(
        h["payload"]["defaults"],
        json!({"modelProvider": "fake", "model": "fake-1", "contextTokens": 128000}),
        "{h}"
    );
}

/// Slash text from a client without `operator.admin` is an ordinary message, as before.
#[tokio::test]
async fn only_an_admin_client_sends_owner_commands() {
    let gw = start_with_config(CONFIG, &[]);
    let writer = json!({
        "minProtocol": 4, "maxProtocol": 4, "role": "operator",
        "client": {"id": "cli", "version": "1", "platform": "linux", "mode": "cli"},
        "scopes": ["operator.read", "operator.write"],
    });
    let mut ws = connect_as(&gw.addr, writer).await;
    // The events that came before the answer count too: a quick run's `final` can.
    let (res, mut seen) = call(
        &mut ws,
        "w1",
        "chat.send",
        json!({"sessionKey": "agent:main:x", "message": "/status", "idempotencyKey": "w-1"}),
    )
    .await;
    assert!(res["payload"].get("reply").is_none(), "{res}");
    let run_id = res["payload"]["runId"]
        .as_str()
        .expect("a run answers it")
        .to_string();
    let fin = chat_event(&mut ws, &run_id, "final", &mut seen).await;
    assert_eq!(
        fin["payload"]["message"]["content"][0]["text"],
        "ECHO: /status"
    );

    let mut admin = gateway_process::connected(&gw.addr).await;
    let (res, _) = call(
        &mut admin,
        "a1",
        "chat.send",
        json!({"sessionKey": "agent:main:x", "message": "/status", "idempotencyKey": "a-1"}),
    )
    .await;
    let reply = res["payload"]["reply"]
        .as_str()
        .expect("the gateway answers /status");
    assert!(
        reply.contains("Model: scripted") && reply.contains("agent:main:x"),
        "{reply}"
    );
}

/// `agent`: `lifecycle start`, then `lifecycle end` and `chat final` before the second
/// answer, and before `agent.wait`'s, as OpenClaw sends them.
#[tokio::test]
async fn a_runs_end_events_come_before_the_answers_that_report_it() {
    let gw = start_with_config(CONFIG, &[]);
    let mut ws = gateway_process::connected(&gw.addr).await;
    for round in 0..5 {
        let id = format!("a{round}");
        send(
            &mut ws,
            json!({"type": "req", "id": id, "method": "agent",
                   "params": {"sessionKey": "agent:main:order", "message": format!("SAY {round}")}}),
        )
        .await;
        let mut frames = Vec::new();
        let mut answers = 0;
        while answers < 2 {
            let frame = recv(&mut ws).await.expect("frame");
            if frame["type"] == "res" && frame["id"] == id.as_str() {
                answers += 1;
            }
            frames.push(frame);
        }
        let at = |pred: &dyn Fn(&Value) -> bool| frames.iter().position(pred);
        let second = frames.len() - 1;
        let start = at(&|f| f["event"] == "agent" && f["payload"]["data"]["phase"] == "start");
        let end = at(&|f| f["event"] == "agent" && f["payload"]["data"]["phase"] == "end");
        let fin = at(&|f| f["event"] == "chat" && f["payload"]["state"] == "final");
        let (Some(start), Some(end), Some(fin)) = (start, end, fin) else {
            panic!("round {round}: start, end and final before the second answer: {frames:#?}");
        };
        assert!(
            start < end && end < second && fin < second,
            "round {round}: {frames:#?}"
        );
    }
}

/// `/healthz` and `/readyz` (and `/health`, `/ready`) on the gateway's port, before any
/// upgrade, answered as OpenClaw 2026.9.6 answers them (seen on the live peer): `GET` with
/// the body, `HEAD` with the headers only, any other method 405 naming `GET, HEAD`.
#[tokio::test]
async fn the_gateway_port_answers_health_and_readiness_probes() {
    let gw = start_with_config("{}", &[]);
    let ask = |request: String| {
        let addr = gw.addr.clone();
        async move {
            let mut tcp = TcpStream::connect(&addr).await.expect("connect");
            tcp.write_all(request.as_bytes()).await.expect("write");
            let mut answer = String::new();
            tokio::time::timeout(WAIT, tcp.read_to_string(&mut answer))
                .await
                .expect("answered and closed")
                .expect("read");
            answer
        }
    };
    for (path, body) in [
        ("/healthz", r#"{"ok":true,"status":"live"}"#),
        ("/health", r#"{"ok":true,"status":"live"}"#),
        ("/readyz", r#"{"ready":true,"failing":[],"uptimeMs":"#),
        ("/ready", r#"{"ready":true,"failing":[],"uptimeMs":"#),
    ] {
        let answer = ask(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        let (_, got) = answer.split_once("\r\n\r\n").expect("a head");
        assert!(got.starts_with(body) && got.ends_with('}'), "{answer}");
        let head = ask(format!("HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n")).await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "no body: {head}");
    }
    let post = ask("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".into()).await;
    assert!(
        post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{post}"
    );
    assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
    // The upgrade on the same port is untouched.
    let _ws = gateway_process::connected(&gw.addr).await;
}

/// One address holding 32 handshakes open gets 503 for its next connection, while
/// another address still connects.
#[tokio::test]
async fn one_address_flooding_handshakes_cannot_keep_another_out() {
    let gw = start_with_config("{}", &[]);
    let mut idle = Vec::new();
    for _ in 0..32 {
        idle.push(TcpStream::connect(&gw.addr).await.expect("connect"));
    }
    let mut over = TcpStream::connect(&gw.addr).await.expect("connect");
    let mut answer = String::new();
    tokio::time::timeout(WAIT, over.read_to_string(&mut answer))
        .await
        .expect("turned away at once")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    // Another address (127.0.0.2, on loopback too) still connects.
    let mut ws = gateway_process::connected_elsewhere(&gw.addr).await;
    let (res, _) = call(&mut ws, "h", "health", json!({})).await;
    assert_eq!(res["ok"], true, "{res}");
    drop(idle);
}
