//! A fake OpenClaw gateway that holds a record (session rows, newest first, and each
//! session's `chat.history` messages) and answers `sessions.list`, `sessions.describe`,
//! `chat.history` and `sessions.patch` the way 2026.9.6 does (paged, `totalCount`,
//! `totalMessages`, the newest `limit` messages): for the exchanges' backfill tests and
//! benchmark. It can be told to go away after some requests (a gateway restarting
//! mid-backfill), and pushes events like the real one. `serve` puts any such `Rpc` on a
//! real socket, speaking 2026.9.6's handshake and passing its events on as frames.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_protocol::HelloOk;
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_types::api::LinkState;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio_tungstenite::tungstenite::Message;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6"
);

pub struct RecordGateway {
    /// Newest first, as `sessions.list` orders them.
    pub rows: Mutex<Vec<Value>>,
    /// Per session: its `chat.history` messages (oldest first) and `totalMessages`.
    pub histories: Mutex<HashMap<String, (Vec<Value>, i64)>>,
    pub requests: AtomicUsize,
    /// Requests answered before every later one fails as a dropped link would.
    pub fail_after: AtomicUsize,
    /// Every `sessions.patch` params, in order.
    pub patches: Mutex<Vec<Value>>,
    /// Every `chat.abort`'s session, in order (each answered as if one run stopped there).
    pub aborts: Mutex<Vec<String>>,
    pub events: broadcast::Sender<WireEvent>,
    state: watch::Sender<LinkState>,
}

impl Default for RecordGateway {
    fn default() -> RecordGateway {
        RecordGateway {
            rows: Mutex::new(Vec::new()),
            histories: Mutex::new(HashMap::new()),
            requests: AtomicUsize::new(0),
            fail_after: AtomicUsize::new(usize::MAX),
            patches: Mutex::new(Vec::new()),
            aborts: Mutex::new(Vec::new()),
            events: broadcast::channel(1024).0,
            state: watch::channel(LinkState::Connecting { attempt: 1 }).0,
        }
    }
}

impl RecordGateway {
    /// A session: its row and its `chat.history` answer (`messages`, `totalMessages`).
    pub fn add(&self, row: Value, history: &Value) {
        let key = row["key"].as_str().unwrap_or_default().to_string();
        let messages = history["messages"].as_array().cloned().unwrap_or_default();
        let total = history["totalMessages"]
            .as_i64()
            .unwrap_or(messages.len() as i64);
        self.rows.lock().unwrap().push(row);
        self.histories
            .lock()
            .unwrap()
            .insert(key, (messages, total));
    }

    /// Sort the rows newest first (by `updatedAt`).
    pub fn sort(&self) {
        self.rows.lock().unwrap().sort_by(|a, b| {
            b["updatedAt"]
                .as_i64()
                .unwrap_or(0)
                .cmp(&a["updatedAt"].as_i64().unwrap_or(0))
        });
    }

    /// A gateway event, as the link delivers it.
    pub fn push(&self, event: &str, payload: Value) {
        let _ = self.events.send(WireEvent::Event {
            event: event.to_string(),
            payload,
        });
    }
}

#[async_trait]
impl Rpc for RecordGateway {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        if n >= self.fail_after.load(Ordering::SeqCst) {
            return Err(RpcError::Unavailable(
                "the gateway closed the connection".into(),
            ));
        }
        let key = params["sessionKey"]
            .as_str()
            .or_else(|| params["key"].as_str())
            .unwrap_or_default()
            .to_string();
        match method {
            "sessions.list" => {
                let rows = self.rows.lock().unwrap();
                let offset = params["offset"].as_u64().unwrap_or(0) as usize;
                let limit = params["limit"].as_u64().unwrap_or(50) as usize;
                let page: Vec<Value> = rows.iter().skip(offset).take(limit).cloned().collect();
                Ok(json!({ "sessions": page, "totalCount": rows.len() }))
            }
            "sessions.describe" => {
                let rows = self.rows.lock().unwrap();
                let row = rows.iter().find(|r| r["key"] == key.as_str()).cloned();
                Ok(json!({ "session": row }))
            }
            "chat.history" => {
                let histories = self.histories.lock().unwrap();
                let limit = params["limit"].as_u64().unwrap_or(200) as usize;
                match histories.get(&key) {
                    Some((messages, total)) => {
                        let from = messages.len().saturating_sub(limit);
                        Ok(json!({
                            "sessionKey": key,
                            "sessionId": format!("id-{key}"),
                            "messages": &messages[from..],
                            "totalMessages": total,
                        }))
                    }
                    None => Ok(json!({ "sessionKey": key, "messages": [] })),
                }
            }
            "sessions.patch" => {
                self.patches.lock().unwrap().push(params.clone());
                let mut rows = self.rows.lock().unwrap();
                let row = rows.iter_mut().find(|r| r["key"] == key.as_str());
                let entry = match row {
                    Some(r) => {
                        r["sendPolicy"] = params["sendPolicy"].clone();
                        r.clone()
                    }
                    None => json!({ "key": key, "sendPolicy": params["sendPolicy"] }),
                };
                Ok(json!({ "ok": true, "key": key, "entry": entry }))
            }
            "chat.abort" => {
                self.aborts.lock().unwrap().push(key.clone());
                Ok(json!({ "ok": true, "aborted": true, "runIds": [format!("run-{key}")] }))
            }
            "agents.list" => Ok(json!({ "defaultId": "main", "mainKey": "main", "agents": [] })),
            _ => Ok(json!({ "ok": true })),
        }
    }

    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request(method, params).await
    }

    fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.events.subscribe()
    }

    fn hello(&self) -> Option<HelloOk> {
        None
    }

    fn state(&self) -> watch::Receiver<LinkState> {
        self.state.subscribe()
    }

    fn target(&self) -> String {
        "ws://127.0.0.1:18789".into()
    }
}

/// A `chat.history` line forwarded into a session by `sessions_send` from `from` (`None`:
/// the label only, no provenance), numbered `seq`, sent at `at`.
pub fn forwarded(seq: i64, at: i64, from: Option<&str>, text: &str) -> Value {
    let mut m = json!({ "role": "assistant", "content": text, "timestamp": at,
                        "senderLabel": "Forwarded from main",
                        "__openclaw": { "seq": seq, "recordTimestampMs": at + 1 } });
    if let Some(f) = from {
        m["provenance"] = json!({ "kind": "inter_session", "sourceSessionKey": f,
                                  "sourceChannel": "unknown", "sourceTool": "sessions_send" });
    }
    m
}

/// A `chat.history` reply of run `run`, numbered `seq`, written at `at`.
pub fn reply(seq: i64, at: i64, run: &str, text: &str) -> Value {
    json!({ "role": "assistant", "content": [{ "type": "text", "text": text }],
            "timestamp": at, "stopReason": "stop", "usage": { "input": 30, "output": 5 },
            "__openclaw": { "seq": seq, "runId": run, "recordTimestampMs": at } })
}

/// A `sessions.list` row.
pub fn row(key: &str, at: i64) -> Value {
    json!({ "key": key, "updatedAt": at, "sessionId": format!("id-{key}") })
}

/// A fixture scenario captured from 2026.9.6 (`entry-*.json` rows, `history-*.json`
/// answers) loaded into a gateway.
pub fn scenario(dir: &str) -> RecordGateway {
    let gw = RecordGateway::default();
    let mut rows: HashMap<String, Value> = HashMap::new();
    let mut histories: HashMap<String, Value> = HashMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if name.starts_with("entry-") {
            rows.insert(v["key"].as_str().unwrap().to_string(), v);
        } else if name.starts_with("history-") {
            histories.insert(v["sessionKey"].as_str().unwrap().to_string(), v);
        }
    }
    for (key, row) in rows {
        let history = histories.remove(&key).unwrap_or(json!({ "messages": [] }));
        gw.add(row, &history);
    }
    gw.sort();
    gw
}

/// The `hello-ok` a real 2026.9.6 gateway answered `connect` with.
fn hello_ok() -> Value {
    std::fs::read_to_string(format!("{FIXTURES}/protocol-frames.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["frame"]["payload"]["type"] == "hello-ok")
        .expect("a captured hello-ok")["frame"]["payload"]
        .clone()
}

/// A request frame's answer from `gw` (`connect` gets the captured `hello-ok`).
async fn answer(gw: &dyn Rpc, hello: &Value, frame: &Value) -> Value {
    let id = frame["id"].clone();
    let method = frame["method"].as_str().unwrap_or_default().to_string();
    let answer = if method == "connect" {
        Ok(hello.clone())
    } else {
        gw.request(&method, frame["params"].clone()).await
    };
    match answer {
        Ok(payload) => json!({ "type": "res", "id": id, "ok": true, "payload": payload }),
        Err(RpcError::Refused(e)) => json!({ "type": "res", "id": id, "ok": false,
                                             "error": { "code": e.code, "message": e.message } }),
        Err(e) => json!({ "type": "res", "id": id, "ok": false,
                          "error": { "code": "UNAVAILABLE", "message": e.to_string() } }),
    }
}

/// Serve `gw` as an OpenClaw gateway on a free loopback port; its `ws://` address. Each
/// request is answered in a task of its own (a long `agent.wait` holds up nothing else);
/// `gw`'s events go to every connection as event frames, numbered per connection.
pub async fn serve(gw: Arc<dyn Rpc>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let hello = hello_ok();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (gw, hello) = (gw.clone(), hello.clone());
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let (mut sink, mut stream) = ws.split();
                let (out, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Value>();
                let mut events = gw.events();
                let challenge = json!({ "type": "event", "event": "connect.challenge",
                                        "payload": { "nonce": "nonce-1", "ts": 1795353000000i64 } });
                let _ = out.send(challenge);
                let (mut seq, mut open) = (0u64, true);
                loop {
                    tokio::select! {
                        msg = stream.next() => {
                            let Some(Ok(Message::Text(t))) = msg else {
                                if matches!(msg, None | Some(Err(_))) { return; }
                                continue;
                            };
                            let Ok(frame) = serde_json::from_str::<Value>(t.as_str()) else {
                                continue;
                            };
                            if frame["type"] != "req" {
                                continue;
                            }
                            let (gw, hello, out) = (gw.clone(), hello.clone(), out.clone());
                            tokio::spawn(async move {
                                let _ = out.send(answer(gw.as_ref(), &hello, &frame).await);
                            });
                        }
                        Some(frame) = outgoing.recv() => {
                            if sink.send(Message::text(frame.to_string())).await.is_err() {
                                return;
                            }
                        }
                        event = events.recv(), if open => match event {
                            Ok(WireEvent::Event { event, payload }) => {
                                seq += 1;
                                let _ = out.send(json!({ "type": "event", "event": event,
                                                         "payload": payload, "seq": seq }));
                            }
                            Ok(WireEvent::Reconnected) => {}
                            Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(broadcast::error::RecvError::Closed) => open = false,
                        },
                    }
                }
            });
        }
    });
    url
}
