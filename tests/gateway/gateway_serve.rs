//! `switchboard serve` as a real process, driven by a real WebSocket client: the handshake,
//! the methods, the refusals, and a clean stop on SIGTERM.

use crate::common::ws::{WAIT, recv, send};
use crate::gateway_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const TOKEN: &str = "test-token-0123456789";
/// Small, so the oversize test sends little.
const MAX_PAYLOAD: usize = 64 * 1024;

type Ws = WebSocketStream<TcpStream>;

/// A running `serve` and the address it printed; killed if a test fails before stopping it.
struct Gateway {
    child: Child,
    addr: String,
    /// What serve printed up to its listening line.
    said: Vec<String>,
    /// Kept so the reader thread drains stderr for the process's whole life.
    _stderr: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(env_token: Option<&str>) -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").expect("config");
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--max-payload"])
        .arg(MAX_PAYLOAD.to_string())
        .env("SWITCHBOARD_STATE_DIR", &state)
        .env("SWITCHBOARD_CONFIG", &config)
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(t) = env_token {
        cmd.env("SWITCHBOARD_GATEWAY_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("spawn serve");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let addr = loop {
        let line = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no listening line; stderr so far: {seen:?}"));
        if let Some(a) = line.split("listening on ws://").nth(1) {
            break a.trim().to_string();
        }
        seen.push(line);
    };
    seen.push(addr.clone());
    Gateway {
        child,
        addr,
        said: seen,
        _stderr: rx,
        _dir: dir,
    }
}

async fn open(addr: &str) -> Ws {
    let tcp = TcpStream::connect(addr).await.expect("tcp connect");
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
        .await
        .expect("ws handshake");
    ws
}

fn connect_req(token: &str) -> Value {
    json!({"type": "req", "id": "c1", "method": "connect", "params": {
        "minProtocol": 3, "maxProtocol": 4,
        "client": {"id": "test", "version": "1", "platform": "linux", "mode": "cli"},
        "role": "operator", "scopes": ["operator.admin"],
        "auth": {"token": token}
    }})
}

/// A connection past `hello-ok`, and that payload.
async fn connected(addr: &str) -> (Ws, Value) {
    let mut ws = open(addr).await;
    let challenge = recv(&mut ws).await.expect("challenge");
    assert_eq!(challenge["event"], "connect.challenge");
    send(&mut ws, connect_req(TOKEN)).await;
    let res = recv(&mut ws).await.expect("hello");
    assert_eq!(res["ok"], true, "{res}");
    (ws, res["payload"].clone())
}

async fn call(ws: &mut Ws, id: &str, method: &str, params: Value) -> Value {
    send(
        ws,
        json!({"type": "req", "id": id, "method": method, "params": params}),
    )
    .await;
    // Events (a sent message's `chat`/`agent`, ticks) may come before the answer.
    let res = loop {
        let f = recv(ws).await.expect("a response");
        if f["type"] != "event" {
            break f;
        }
    };
    assert_eq!(res["type"], "res");
    assert_eq!(res["id"], id);
    res
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_challenge_comes_first_and_the_right_token_gets_hello_ok() {
    let gw = start(Some(TOKEN));
    let mut ws = open(&gw.addr).await;
    let challenge = recv(&mut ws).await.expect("first frame");
    assert_eq!(challenge["type"], "event");
    assert_eq!(challenge["event"], "connect.challenge");
    assert!(
        challenge["payload"]["nonce"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    );
    assert!(challenge["payload"]["ts"].as_u64().is_some_and(|t| t > 0));

    send(&mut ws, connect_req(TOKEN)).await;
    let res = recv(&mut ws).await.expect("hello");
    assert_eq!(res["id"], "c1");
    assert_eq!(res["ok"], true, "{res}");
    let hello = &res["payload"];
    assert_eq!(hello["type"], "hello-ok");
    assert_eq!(hello["protocol"], 4);
    assert!(hello["server"]["connId"].as_str().is_some());
    let methods: Vec<&str> = hello["features"]["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for m in [
        "health",
        "sessions.list",
        "chat.history",
        "chat.send",
        "tools.invoke",
    ] {
        assert!(methods.contains(&m), "{m} missing from {methods:?}");
    }
    assert_eq!(hello["policy"]["maxPayload"], MAX_PAYLOAD);
    assert_eq!(
        call(&mut ws, "h", "health", json!({})).await["payload"]["ok"],
        true
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_gets_an_error_and_the_connection_closes() {
    let gw = start(Some(TOKEN));
    let mut ws = open(&gw.addr).await;
    recv(&mut ws).await.expect("challenge");
    send(&mut ws, connect_req("test-token-0123456788")).await;
    let res = recv(&mut ws).await.expect("an error response");
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert!(
        res["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unauthorized")),
        "{res}"
    );
    // Nothing else is served: the next read is the close.
    assert!(recv(&mut ws).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_before_connect_is_refused() {
    let gw = start(Some(TOKEN));
    let mut ws = open(&gw.addr).await;
    recv(&mut ws).await.expect("challenge");
    let res = call(&mut ws, "x", "sessions.list", json!({})).await;
    assert_eq!(res["ok"], false, "{res}");
    assert!(recv(&mut ws).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_message_is_listed_and_in_the_history() {
    let gw = start(Some(TOKEN));
    let (mut ws, _) = connected(&gw.addr).await;
    let key = "agent:main:webchat:direct:alice";
    let sent = call(
        &mut ws,
        "s1",
        "chat.send",
        // `deliver` and `includeLastMessage`: fields OpenClaw's clients send that this gateway
        // does not use yet must not get the call refused.
        json!({"sessionKey": key, "message": "hello from the gateway test", "idempotencyKey": "k1", "deliver": false}),
    )
    .await;
    assert_eq!(sent["ok"], true, "{sent}");
    assert_eq!(sent["payload"]["status"], "started");
    assert!(sent["payload"]["runId"].as_str().is_some(), "{sent}");

    let list = call(
        &mut ws,
        "l1",
        "sessions.list",
        json!({"limit": 50, "includeLastMessage": true}),
    )
    .await;
    assert_eq!(list["ok"], true, "{list}");
    let sessions = list["payload"]["sessions"].as_array().expect("sessions");
    let row = sessions
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("{key} not listed: {list}"));
    assert_eq!(row["channel"], "webchat");
    assert!(row["sessionId"].as_str().is_some());
    assert_eq!(list["payload"]["count"], sessions.len());
    assert_eq!(list["payload"]["hasMore"], false);

    let history = call(&mut ws, "h1", "chat.history", json!({"sessionKey": key})).await;
    assert_eq!(history["ok"], true, "{history}");
    assert_eq!(history["payload"]["sessionKey"], key);
    assert_eq!(history["payload"]["sessionId"], row["sessionId"]);
    let text = history["payload"]["messages"].to_string();
    assert!(text.contains("hello from the gateway test"), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_bad_params_are_invalid_requests() {
    let gw = start(Some(TOKEN));
    let (mut ws, _) = connected(&gw.addr).await;
    let res = call(&mut ws, "u", "no.such.method", json!({})).await;
    assert_eq!(res["ok"], false);
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert_eq!(res["error"]["message"], "unknown method: no.such.method");

    let res = call(&mut ws, "b", "chat.history", json!({"sessionKey": 42})).await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sessionKey")),
        "{res}"
    );
    // The connection still serves after refusals.
    assert_eq!(call(&mut ws, "h", "health", json!({})).await["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_max_payload_closes_the_connection_with_a_reason() {
    let gw = start(Some(TOKEN));
    let (mut ws, _) = connected(&gw.addr).await;
    let big = json!({"type": "req", "id": "big", "method": "health",
                     "params": {"pad": "x".repeat(MAX_PAYLOAD)}});
    send(&mut ws, big).await;
    match recv(&mut ws).await {
        Err(Some((code, reason))) => {
            assert_eq!(code, CloseCode::Size);
            assert!(reason.contains("exceeds"), "{reason}");
        }
        other => panic!("expected a close with a reason, got {other:?}"),
    }
    // Others are still served.
    let (mut other, _) = connected(&gw.addr).await;
    assert_eq!(call(&mut other, "h", "health", json!({})).await["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_invoke_runs_a_session_tool() {
    let gw = start(Some(TOKEN));
    let (mut ws, _) = connected(&gw.addr).await;
    let res = call(
        &mut ws,
        "t",
        "tools.invoke",
        json!({"name": "sessions_list", "params": {}, "as": "main"}),
    )
    .await;
    assert_eq!(res["ok"], true, "{res}");
    assert!(res["payload"].is_object(), "{res}");
    let res = call(
        &mut ws,
        "t2",
        "tools.invoke",
        json!({"name": "no_such_tool"}),
    )
    .await;
    assert_eq!(res["ok"], false, "{res}");
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_connections_and_exits_zero() {
    let mut gw = start(Some(TOKEN));
    let (mut ws, _) = connected(&gw.addr).await;
    let pid = i32::try_from(gw.child.id()).expect("pid");
    // SAFETY: kill(2) on the child we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    match recv(&mut ws).await {
        Err(Some((code, _))) => assert_eq!(code, CloseCode::Away),
        other => panic!("expected a going-away close, got {other:?}"),
    }
    let status = tokio::task::block_in_place(|| wait_exit(&mut gw.child));
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(&gw.addr).await.is_err(),
        "still listening"
    );
}

#[test]
fn without_a_token_one_is_generated_private_and_never_printed() {
    let gw = start(None);
    let path = gw._dir.path().join("state").join("gateway-token");
    let token = std::fs::read_to_string(&path).expect("token file");
    let token = token.trim();
    assert!(token.len() >= 32);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains(&format!("cat {}", path.display()))),
        "{:?}",
        gw.said
    );
    assert!(!gw.said.iter().any(|l| l.contains(token)), "{:?}", gw.said);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut ws = open(&gw.addr).await;
        recv(&mut ws).await.expect("challenge");
        send(&mut ws, connect_req(token)).await;
        assert_eq!(recv(&mut ws).await.expect("hello")["ok"], true);
    });
}

#[test]
fn a_non_loopback_bind_without_insecure_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").expect("config");
    let out = Command::new(BIN)
        .args(["serve", "--bind", "0.0.0.0:0"])
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", &config)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS") && err.contains("--insecure"), "{err}");
}

/// In-process (the gateway over a real engine on disk) to set a short handshake timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_sends_connect_is_closed() {
    use switchboard::config::Config;
    use switchboard::engine::Engine;
    use switchboard::server::Options;

    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), Config::default()).expect("engine");
    let gateway = gateway_support::start_with(
        engine.start(),
        Options {
            max_payload: MAX_PAYLOAD,
            handshake_timeout: Duration::from_millis(200),
            ..Options::new(TOKEN.into())
        },
    )
    .await;
    let addr = gateway.addr.clone();
    let mut ws = open(&addr).await;
    recv(&mut ws).await.expect("challenge");
    // Send nothing: the gateway gives up on us.
    match recv(&mut ws).await {
        Err(Some((code, reason))) => {
            assert_eq!(code, CloseCode::Policy);
            assert!(reason.contains("connect"), "{reason}");
        }
        other => panic!("expected a close, got {other:?}"),
    }
    // A prompt client on the same gateway is still served.
    let (mut ok, _) = connected(&addr).await;
    assert_eq!(call(&mut ok, "h", "health", json!({})).await["ok"], true);
    gateway.stop().await;
}
