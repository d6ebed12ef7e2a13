//! The gateway in this process on a free loopback port, and a real WebSocket client for it.

#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_server as server;
use switchboard_types::api::SessionsApi;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;

// One client side for both harnesses (it was copied in each).
#[allow(unused_imports)] // each binary uses a part
pub use crate::common::ws::{WAIT, recv, send};

pub const TOKEN: &str = "gateway-test-token-0123456789";

pub type Ws = WebSocketStream<TcpStream>;

/// A running in-process gateway; stopped (and waited for) when `stop` is called, or just
/// abandoned with the test's runtime.
pub struct Gateway {
    pub addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Gateway {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("gateway stops")
            .expect("gateway task");
    }
}

pub fn options() -> server::Options {
    server::Options::new(TOKEN.to_string())
}

pub async fn start(api: Arc<dyn SessionsApi>) -> Gateway {
    start_with(api, options()).await
}

pub async fn start_with(api: Arc<dyn SessionsApi>, options: server::Options) -> Gateway {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr").to_string();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server::run(listener, api, options, async {
        let _ = rx.await;
    }));
    Gateway {
        addr,
        stop: Some(tx),
        task,
    }
}

pub async fn open(addr: &str) -> Ws {
    let tcp = TcpStream::connect(addr).await.expect("tcp connect");
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
        .await
        .expect("ws handshake");
    ws
}

pub fn connect_params(token: &str, caps: &[&str], scopes: &[&str]) -> Value {
    json!({
        "minProtocol": 3, "maxProtocol": 4,
        "client": {"id": "test", "version": "1", "platform": "linux", "mode": "cli"},
        "role": "operator", "scopes": scopes, "caps": caps,
        "auth": {"token": token}
    })
}

/// A connection past `hello-ok` (with `caps`, admin scope), and that payload.
pub async fn connected(addr: &str, caps: &[&str]) -> (Ws, Value) {
    connected_with(addr, connect_params(TOKEN, caps, &["operator.admin"])).await
}

pub async fn connected_with(addr: &str, params: Value) -> (Ws, Value) {
    let mut ws = open(addr).await;
    let challenge = recv(&mut ws).await.expect("challenge");
    assert_eq!(challenge["event"], "connect.challenge");
    send(
        &mut ws,
        json!({"type": "req", "id": "c1", "method": "connect", "params": params}),
    )
    .await;
    let res = recv(&mut ws).await.expect("hello");
    assert_eq!(res["ok"], true, "{res}");
    (ws, res["payload"].clone())
}

/// Sends a request and returns its `res`, keeping any events that arrive first in `events`.
pub async fn call_keeping(
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
    let f = crate::common::ws::recv_until(
        ws,
        &format!("the answer to {id}"),
        |f| f["type"] != "event",
        |f| events.push(f),
    )
    .await;
    assert_eq!(f["type"], "res", "{f}");
    assert_eq!(f["id"], id, "{f}");
    f
}

/// Sends a request and returns its `res`; events arriving first are dropped.
pub async fn call(ws: &mut Ws, id: &str, method: &str, params: Value) -> Value {
    call_keeping(ws, id, method, params, &mut Vec::new()).await
}

/// `chat.send` of `message` into `session`, then `agent.wait` for its run (ids `<idem>-send`
/// and `<idem>-wait`): the run's id and the wait's `res`.
pub async fn send_and_wait(
    ws: &mut Ws,
    session: &str,
    message: &str,
    idem: &str,
) -> (String, Value) {
    let params = json!({"sessionKey": session, "message": message, "idempotencyKey": idem});
    let sent = call(ws, &format!("{idem}-send"), "chat.send", params).await;
    assert_eq!(sent["ok"], true, "{sent}");
    let run = sent["payload"]["runId"]
        .as_str()
        .expect("runId")
        .to_string();
    let params = json!({"runId": run, "timeoutMs": 30_000});
    let waited = call(ws, &format!("{idem}-wait"), "agent.wait", params).await;
    (run, waited)
}

/// Frames (events and answers) until one satisfies `done` (included).
pub async fn frames_until(ws: &mut Ws, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    let last =
        crate::common::ws::recv_until(ws, "the frame waited for", done, |f| out.push(f)).await;
    out.push(last);
    out
}

/// The event frames among `frames` named `name`.
pub fn named<'a>(frames: &'a [Value], name: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["event"] == name).collect()
}

/// Event frames' `seq`s strictly increase.
pub fn assert_seq_increasing(frames: &[Value]) {
    let seqs: Vec<u64> = frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| {
            f["seq"]
                .as_u64()
                .expect("every event after hello has a seq")
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seqs: {seqs:?}");
}

/// The recorded OpenClaw 2026.9.6 frames (`tests/fixtures/openclaw-2026.9.6/`).
pub fn recorded_frames() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openclaw-2026.9.6/protocol-frames.jsonl"
    );
    std::fs::read_to_string(path)
        .expect("recorded frames")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a recorded line is JSON");
            v.get("frame").cloned().unwrap_or(v)
        })
        .collect()
}

/// `ours` has every top-level key of `recorded`'s payload, except those in `except`.
pub fn assert_same_keys(ours: &Value, recorded: &Value, except: &[&str]) {
    let ours = ours.as_object().expect("our payload is an object");
    let recorded = recorded.as_object().expect("recorded payload is an object");
    let missing: Vec<&String> = recorded
        .keys()
        .filter(|k| !ours.contains_key(*k) && !except.contains(&k.as_str()))
        .collect();
    assert!(missing.is_empty(), "missing {missing:?} in {ours:?}");
}
