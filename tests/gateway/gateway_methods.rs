//! The gateway's remaining OpenClaw methods, its scopes and its failed-connect limit,
//! driven by a real WebSocket client against the gateway in this process over a real
//! engine on disk.

use crate::common;
use crate::gateway_support;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_protocol::switchboard as sb;
use switchboard_server::{AuthLimit, Options};
use tokio::net::TcpSocket;

use gateway_support::*;

fn bench() -> common::Bench {
    common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "reply": "re: {{text}}" } ] },
            { "id": "work", "model": "scripted", "script": [ { "reply": "work: {{text}}" } ],
              "subagents": { "allowAgents": ["main"] } },
        ] },
    }))
}

fn ok(res: &Value) -> &Value {
    assert_eq!(res["ok"], true, "{res}");
    &res["payload"]
}

fn err(res: &Value) -> (String, String) {
    assert_eq!(res["ok"], false, "{res}");
    (
        res["error"]["code"].as_str().expect("code").to_string(),
        res["error"]["message"]
            .as_str()
            .expect("message")
            .to_string(),
    )
}

async fn user_lines(ws: &mut Ws, key: &str) -> Vec<String> {
    let h = call(
        ws,
        "hist",
        "chat.history",
        json!({"sessionKey": key, "limit": 1000}),
    )
    .await;
    ok(&h)["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `status`, `agents.list`, `sessions.create`, `sessions.resolve` (key, session id,
/// unknown), `sessions.patch` (deny, null, refusals), `sessions.delete`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_methods_answer_in_openclaw_shapes() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;

    let agents = call(&mut ws, "a", "agents.list", json!({})).await;
    assert_eq!(ok(&agents)["defaultId"], "main");
    let ids: Vec<&str> = ok(&agents)["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, ["main", "work"]);
    // What each may spawn under besides itself (the console's agent picker shows it).
    assert_eq!(
        ok(&agents)["agents"][1]["maySpawn"],
        json!(["main"]),
        "{agents}"
    );

    // A new key without a message is created empty (OpenClaw's TUI's `/new`); a message
    // then starts a run in it.
    let empty = call(
        &mut ws,
        "c0",
        "sessions.create",
        json!({"key": "agent:work:new"}),
    )
    .await;
    assert_eq!(ok(&empty)["runStarted"], false);
    let created = call(
        &mut ws,
        "c1",
        "sessions.create",
        json!({"key": "agent:work:new", "message": "hi", "label": "ignored"}),
    )
    .await;
    let created = ok(&created).clone();
    assert_eq!(created["key"], "agent:work:new");
    assert_eq!(created["runStarted"], true);
    let session_id = created["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();

    let status = call(&mut ws, "s", "status", json!({})).await;
    assert_eq!(ok(&status)["sessions"]["count"], 1);

    let by_id = call(
        &mut ws,
        "r1",
        "sessions.resolve",
        json!({"sessionId": session_id}),
    )
    .await;
    assert_eq!(ok(&by_id)["key"], "agent:work:new");
    let by_key = call(
        &mut ws,
        "r2",
        "sessions.resolve",
        json!({"key": "agent:work:new"}),
    )
    .await;
    assert_eq!(ok(&by_key)["key"], "agent:work:new");
    let (code, _) = err(&call(
        &mut ws,
        "r3",
        "sessions.resolve",
        json!({"key": "agent:work:nope"}),
    )
    .await);
    assert_eq!(code, "NOT_FOUND");

    let denied = call(
        &mut ws,
        "p1",
        "sessions.patch",
        json!({"key": "agent:work:new", "sendPolicy": "deny"}),
    )
    .await;
    assert_eq!(ok(&denied)["resolved"]["sendPolicy"], "deny");
    let list = call(&mut ws, "l", "sessions.list", json!({})).await;
    assert_eq!(ok(&list)["sessions"][0]["sendPolicy"], "deny");
    let back = call(
        &mut ws,
        "p2",
        "sessions.patch",
        json!({"key": "agent:work:new", "sendPolicy": null}),
    )
    .await;
    assert_eq!(ok(&back)["resolved"]["sendPolicy"], "allow");
    let (code, message) = err(&call(
        &mut ws,
        "p3",
        "sessions.patch",
        json!({"key": "agent:work:new", "sendPolicy": "sometimes"}),
    )
    .await);
    assert_eq!(code, "INVALID_REQUEST");
    assert!(message.contains("sendPolicy"), "{message}");
    let (code, message) = err(&call(
        &mut ws,
        "p4",
        "sessions.patch",
        json!({"key": "agent:work:new", "label": "x"}),
    )
    .await);
    assert_eq!(code, "INVALID_REQUEST");
    assert!(message.contains("label"), "{message}");

    let deleted = call(
        &mut ws,
        "d1",
        "sessions.delete",
        json!({"key": "agent:work:new"}),
    )
    .await;
    assert_eq!(ok(&deleted)["deleted"], true);
    let (code, _) = err(&call(
        &mut ws,
        "r4",
        "sessions.resolve",
        json!({"key": "agent:work:new"}),
    )
    .await);
    assert_eq!(code, "NOT_FOUND");
    gw.stop().await;
}

/// `agent` answers twice with the request's id: `accepted` at once, then the run's outcome
/// with the reply; `agent.wait` on the run says `ok` with the same reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_answers_accepted_then_the_result_under_one_id() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    send(
        &mut ws,
        json!({"type": "req", "id": "ag", "method": "agent", "params": {
            "message": "do it", "agentId": "work", "idempotencyKey": "agent-1", "deliver": false}}),
    )
    .await;
    let answers: Vec<Value> = frames_until(&mut ws, |f| {
        f["type"] == "res" && f["payload"]["status"] != "accepted"
    })
    .await
    .into_iter()
    .filter(|f| f["type"] == "res")
    .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    for a in &answers {
        assert_eq!(a["id"], "ag");
    }
    let first = ok(&answers[0]);
    assert_eq!(first["status"], "accepted");
    assert_eq!(first["sessionKey"], "agent:work:main");
    assert_eq!(first["agentId"], "work");
    assert!(first["acceptedAt"].as_i64().is_some());
    let run = first["runId"].as_str().expect("runId").to_string();
    let second = ok(&answers[1]);
    assert_eq!(second["runId"], run.as_str());
    assert_eq!(second["status"], "ok");
    assert_eq!(second["summary"], "completed");
    assert_eq!(second["result"]["payloads"][0]["text"], "work: do it");

    let waited = call(
        &mut ws,
        "w",
        "agent.wait",
        json!({"runId": run, "timeoutMs": 20_000}),
    )
    .await;
    assert_eq!(ok(&waited)["status"], "ok");
    assert_eq!(ok(&waited)["terminalReply"]["text"], "work: do it");
    gw.stop().await;
}

/// A `chat.send` repeated with its idempotency key (even from another connection) gets
/// the first call's run and records the message once; `chat.abort` says honestly that
/// nothing was aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_idempotency_key_sends_once() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let (mut other, _) = connected(&gw.addr, &[]).await;
    let params = json!({"sessionKey": "main", "message": "only once", "idempotencyKey": "same"});
    let a = call(&mut ws, "1", "chat.send", params.clone()).await;
    let b2 = call(&mut ws, "2", "chat.send", params.clone()).await;
    let c = call(&mut other, "3", "chat.send", params).await;
    let run = ok(&a)["runId"].as_str().expect("runId").to_string();
    assert_eq!(ok(&b2)["runId"], run.as_str());
    assert_eq!(ok(&c)["runId"], run.as_str());
    let fresh = call(
        &mut ws,
        "4",
        "chat.send",
        json!({"sessionKey": "main", "message": "only once", "idempotencyKey": "new"}),
    )
    .await;
    assert_ne!(ok(&fresh)["runId"], run.as_str());
    assert_eq!(
        user_lines(&mut ws, "agent:main:main").await,
        ["only once", "only once"],
        "one per distinct key"
    );

    let abort = call(
        &mut ws,
        "5",
        "chat.abort",
        json!({"sessionKey": "main", "runId": run}),
    )
    .await;
    assert_eq!(ok(&abort)["ok"], true);
    assert_eq!(ok(&abort)["aborted"], false);
    gw.stop().await;
}

/// `operator.read` may list and read but not send, patch, invoke tools or use the
/// Switchboard write methods (`FORBIDDEN`, "missing scope: operator.write"); hello-ok
/// says what was granted. The read-only token gets read scope whatever it asks for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_scope_and_the_read_only_token_cannot_write() {
    let b = bench();
    let options = Options {
        read_only_token: Some("read-only-token-0123456789".into()),
        ..options()
    };
    let gw = start_with(b.engine.start(), options).await;
    let (mut admin, hello) = connected(&gw.addr, &[]).await;
    assert_eq!(hello["auth"]["scopes"], json!(["operator.admin"]));
    ok(&call(
        &mut admin,
        "0",
        "chat.send",
        json!({"sessionKey": "main", "message": "seed"}),
    )
    .await);

    let (mut reader, hello) = connected_with(
        &gw.addr,
        connect_params(TOKEN, &[sb::CAP], &["operator.read"]),
    )
    .await;
    assert_eq!(hello["auth"]["role"], "operator");
    assert_eq!(hello["auth"]["scopes"], json!(["operator.read"]));
    let (mut ro, hello) = connected_with(
        &gw.addr,
        connect_params(
            "read-only-token-0123456789",
            &[sb::CAP],
            &["operator.admin"],
        ),
    )
    .await;
    assert_eq!(hello["auth"]["scopes"], json!(["operator.read"]));

    for ws in [&mut reader, &mut ro] {
        ok(&call(ws, "l", "sessions.list", json!({})).await);
        ok(&call(ws, "h", "chat.history", json!({"sessionKey": "main"})).await);
        ok(&call(ws, "s", sb::method::SUBSCRIBE, json!({})).await);
        for (method, params) in [
            ("chat.send", json!({"sessionKey": "main", "message": "no"})),
            ("agent", json!({"message": "no"})),
            (
                "sessions.patch",
                json!({"key": "main", "sendPolicy": "deny"}),
            ),
            ("sessions.delete", json!({"key": "main"})),
            ("tools.invoke", json!({"name": "sessions_list"})),
            (sb::method::SEND, json!({"key": "main", "text": "no"})),
        ] {
            let res = call(ws, "w", method, params).await;
            let (code, message) = err(&res);
            assert_eq!(code, "FORBIDDEN", "{method}");
            assert_eq!(message, "missing scope: operator.write", "{method}");
        }
    }
    assert_eq!(user_lines(&mut admin, "agent:main:main").await, ["seed"]);
    gw.stop().await;
}

async fn open_from(ip: &str, addr: &str) -> Ws {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{ip}:0").parse().expect("addr"))
        .expect("bind the client address");
    let tcp = socket
        .connect(addr.parse().expect("server addr"))
        .await
        .expect("tcp connect");
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
        .await
        .expect("ws handshake");
    ws
}

/// Connect with `token` from `ip`: the `connect` answer, and whether the server then closed.
async fn try_connect(ip: &str, addr: &str, token: &str) -> Value {
    let mut ws = open_from(ip, addr).await;
    recv(&mut ws).await.expect("challenge");
    send(
        &mut ws,
        json!({"type": "req", "id": "c", "method": "connect",
               "params": connect_params(token, &[], &["operator.admin"])}),
    )
    .await;
    recv(&mut ws).await.expect("an answer")
}

/// After `max_failures` refused connects from one address, a wrong token from there is
/// answered "too many failed attempts; retry in N s" (held back for the tarpit), while the
/// right token is still admitted from the same address: a stranger cannot lock the owner
/// out (before, the lockout was looked at first and refused the right token too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_connects_meet_the_limit_but_never_lock_out_the_right_token() {
    let b = bench();
    let options = Options {
        auth_limit: AuthLimit {
            max_failures: 3,
            max_failures_global: 100,
            window: Duration::from_secs(3600),
        },
        ..options()
    };
    let gw = start_with(b.engine.start(), options).await;
    for _ in 0..3 {
        let res = try_connect("127.0.0.1", &gw.addr, "wrong").await;
        let (_, message) = err(&res);
        assert!(message.contains("unauthorized"), "{message}");
    }
    let res = try_connect("127.0.0.1", &gw.addr, "wrong").await;
    let (code, message) = err(&res);
    assert_eq!(code, "INVALID_REQUEST");
    assert!(
        message.starts_with("too many failed attempts; retry in "),
        "{message}"
    );
    let res = try_connect("127.0.0.1", &gw.addr, TOKEN).await;
    assert_eq!(res["ok"], true, "the right token is admitted: {res}");
    let res = try_connect("127.0.0.2", &gw.addr, "wrong").await;
    let (_, message) = err(&res);
    assert!(
        message.contains("unauthorized"),
        "another address has its own count: {message}"
    );
    gw.stop().await;
}

/// Wrong tokens sprayed from many addresses meet the global limit: the per-address count
/// alone let 200 addresses in 127/8 try 1,000 tokens in 0.7 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_connects_from_many_addresses_meet_the_global_limit() {
    let b = bench();
    let options = Options {
        auth_limit: AuthLimit {
            max_failures: 5,
            max_failures_global: 10,
            window: Duration::from_secs(3600),
        },
        ..options()
    };
    let gw = start_with(b.engine.start(), options).await;
    for i in 0..10 {
        let res = try_connect(&format!("127.0.9.{i}"), &gw.addr, "wrong").await;
        let (_, message) = err(&res);
        assert!(message.contains("unauthorized"), "{message}");
    }
    let res = try_connect("127.0.9.200", &gw.addr, "wrong").await;
    let (_, message) = err(&res);
    assert!(
        message.starts_with("too many failed attempts; retry in "),
        "a fresh address past the global limit: {message}"
    );
    let res = try_connect("127.0.9.201", &gw.addr, TOKEN).await;
    assert_eq!(res["ok"], true, "the right token is admitted: {res}");
    gw.stop().await;
}

/// `gateway.auth.readOnlyToken` is a config setting (what `serve` passes as
/// `Options::read_only_token`).
#[test]
fn the_read_only_token_is_read_from_the_config() {
    let config: switchboard_config::Config = serde_json::from_value(json!({
        "gateway": { "auth": { "token": "full-token", "readOnlyToken": "reader-token" } }
    }))
    .expect("config with readOnlyToken");
    assert_eq!(
        config.gateway.auth.read_only_token.as_deref(),
        Some("reader-token")
    );
}

/// The narrower stop over the gateway: `sessions.patch` takes `agentSendPolicy` ("deny" or
/// null) beside `sendPolicy`, says what it left, and refuses any other value; our own
/// remote API sets it through `switchboard.agentSends`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sends_are_stopped_and_let_again_over_the_gateway() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let key = "agent:main:room";
    ok(&call(&mut ws, "c", "sessions.create", json!({"key": key})).await);
    let stopped = call(
        &mut ws,
        "p",
        "sessions.patch",
        json!({"key": key, "agentSendPolicy": "deny"}),
    )
    .await;
    assert_eq!(
        ok(&stopped)["resolved"]["agentSendPolicy"],
        "deny",
        "{stopped}"
    );
    assert_eq!(
        ok(&stopped)["entry"]["agentSendPolicy"],
        "deny",
        "{stopped}"
    );
    let (code, message) = err(&call(
        &mut ws,
        "b",
        "sessions.patch",
        json!({"key": key, "agentSendPolicy": "allow"}),
    )
    .await);
    assert_eq!(code, "INVALID_REQUEST");
    assert!(message.contains("agentSendPolicy"), "{message}");
    let lifted = call(
        &mut ws,
        "l",
        "sessions.patch",
        json!({"key": key, "agentSendPolicy": null}),
    )
    .await;
    assert_eq!(
        ok(&lifted)["resolved"]["agentSendPolicy"],
        Value::Null,
        "{lifted}"
    );

    let mut options =
        switchboard_remote::LinkOptions::new(format!("ws://{}", gw.addr), Some(TOKEN.into()));
    options.connect_timeout = Duration::from_secs(5);
    let link = switchboard_remote::Link::connect(options)
        .await
        .expect("the gateway accepts the token");
    let remote: std::sync::Arc<dyn switchboard_types::api::SessionsApi> =
        switchboard_remote::RemoteApi::new(std::sync::Arc::new(link));
    let done = remote
        .set_agent_sends(key, true)
        .await
        .expect("over the link");
    assert!(done.stopped);
    let row = b
        .engine
        .start()
        .session(key)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(row.entry["agentSendPolicy"], "deny");
}
