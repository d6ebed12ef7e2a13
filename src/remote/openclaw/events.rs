//! OpenClaw's gateway events as engine events, numbered here: `sessions.changed` as a
//! session created / updated / deleted, `session.message` as a committed line, the
//! `agent` lifecycle start as a run starting, a `chat` final / error / aborted as its end.
//! A reconnect (or a lagging link) becomes a gap, so the subscriber reloads.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::map;
use crate::api::{EngineEvent, Sequenced};
use crate::remote::rpc::{Rpc, WireEvent};

/// Runs whose start was seen, for the duration their end reports (bounded: a run whose
/// end never came is forgotten once this many others started).
const RUNS_REMEMBERED: usize = 1024;

/// What the mapping remembers between events.
#[derive(Default)]
pub struct Mapper {
    started: HashMap<String, i64>,
}

fn text_of<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

impl Mapper {
    /// The engine events one gateway event stands for (none for the many it has no
    /// counterpart for: ticks, health, deltas, tool streams …).
    pub fn map(&mut self, event: &str, p: &Value) -> Vec<EngineEvent> {
        let key = text_of(p, "sessionKey").map(str::to_string);
        match (event, key) {
            ("sessions.changed", Some(key)) => {
                let session_id = text_of(p, "sessionId").unwrap_or("").to_string();
                vec![match text_of(p, "reason") {
                    Some("create") => EngineEvent::SessionCreated { key, session_id },
                    Some("delete") => EngineEvent::SessionDeleted { key },
                    _ => EngineEvent::SessionUpdated { key },
                }]
            }
            ("session.message", Some(key)) => {
                let Some(message) = p.get("message") else {
                    return Vec::new();
                };
                let session_id = text_of(p, "sessionId")
                    .or_else(|| p.get("session").and_then(|s| text_of(s, "sessionId")))
                    .unwrap_or("")
                    .to_string();
                let seq = p
                    .get("messageSeq")
                    .and_then(Value::as_i64)
                    .or_else(|| map::message_seq(message))
                    .unwrap_or(0);
                // The transcript line form (`{type, id, message}`) the engine's own
                // events carry, so a consumer reads both alike.
                let mut line = json!({ "type": "message", "message": message });
                if let Some(id) = text_of(p, "messageId") {
                    line["id"] = id.into();
                }
                vec![EngineEvent::MessageAppended {
                    key,
                    session_id,
                    seq,
                    line,
                }]
            }
            ("agent", Some(key)) => {
                let data = p.get("data").cloned().unwrap_or(Value::Null);
                let is_start = text_of(p, "stream") == Some("lifecycle")
                    && text_of(&data, "phase") == Some("start");
                let Some(run_id) = text_of(p, "runId").filter(|_| is_start) else {
                    return Vec::new();
                };
                if self.started.len() >= RUNS_REMEMBERED {
                    self.started.clear();
                }
                let at = data
                    .get("startedAt")
                    .or_else(|| p.get("ts"))
                    .and_then(Value::as_i64);
                if let Some(at) = at {
                    self.started.insert(run_id.to_string(), at);
                }
                vec![EngineEvent::RunStarted {
                    run_id: run_id.to_string(),
                    key,
                    agent_id: text_of(p, "agentId").unwrap_or("").to_string(),
                    // OpenClaw does not say why a run started (a message, a reply step, an
                    // announce): every run is shown as answering a message.
                    step: "message".into(),
                    round: 0,
                    flow_id: None,
                }]
            }
            ("chat", Some(key)) => {
                let status = match text_of(p, "state") {
                    Some("final") => "ok",
                    Some("error") => "error",
                    Some("aborted") => "aborted",
                    _ => return Vec::new(),
                };
                let Some(run_id) = text_of(p, "runId") else {
                    return Vec::new();
                };
                let message = p.get("message");
                let reply = message.map(map::message_text).filter(|t| !t.is_empty());
                let ended = message
                    .and_then(|m| m.get("timestamp"))
                    .and_then(Value::as_i64);
                let duration_ms = match (self.started.remove(run_id), ended) {
                    (Some(start), Some(end)) if end >= start => end - start,
                    _ => 0,
                };
                let error = (status == "error").then(|| {
                    text_of(p, "errorMessage")
                        .or_else(|| text_of(p, "error"))
                        .unwrap_or("the run failed")
                        .to_string()
                });
                vec![EngineEvent::RunEnded {
                    run_id: run_id.to_string(),
                    key,
                    step: "message".into(),
                    round: 0,
                    status: status.into(),
                    reply,
                    error,
                    duration_ms,
                    tokens_in: None,
                    tokens_out: None,
                    flow_id: None,
                }]
            }
            _ => Vec::new(),
        }
    }
}

/// Numbers mapped events onto the API's channel.
pub struct Numbering {
    tx: broadcast::Sender<Sequenced>,
    seq: u64,
}

impl Numbering {
    pub fn new(tx: broadcast::Sender<Sequenced>) -> Numbering {
        Numbering { tx, seq: 0 }
    }

    pub fn emit(&mut self, event: EngineEvent) {
        self.seq += 1;
        // No subscriber is not an error: events are for whoever listens now.
        let _ = self.tx.send(Sequenced {
            seq: self.seq,
            event,
        });
    }

    /// Events were lost (the link dropped or lagged): one number is skipped, so every
    /// subscriber's stream reports a gap, and the next event (a reload request) shows it
    /// at once rather than whenever the gateway next speaks.
    pub fn gap(&mut self) {
        self.seq += 1;
        self.emit(EngineEvent::ExternalChange);
    }
}

/// `sessions.subscribe`, then `sessions.messages.subscribe` for every key being read.
async fn subscribe_all(rpc: &dyn Rpc, keys: &Mutex<HashSet<String>>) {
    if let Err(e) = rpc.request("sessions.subscribe", json!({})).await {
        tracing::warn!("openclaw: sessions.subscribe failed: {e}");
    }
    let keys: Vec<String> = match keys.lock() {
        Ok(k) => k.iter().cloned().collect(),
        Err(poisoned) => poisoned.into_inner().iter().cloned().collect(),
    };
    for key in keys {
        if let Err(e) = rpc
            .request("sessions.messages.subscribe", json!({ "key": key }))
            .await
        {
            tracing::warn!("openclaw: sessions.messages.subscribe {key} failed: {e}");
        }
    }
}

/// Runs until the link's event channel closes: subscribes, then maps every event; after a
/// reconnect it reports a gap and subscribes again (the gateway forgot the old connection).
pub async fn pump(
    rpc: Arc<dyn Rpc>,
    mut rx: broadcast::Receiver<WireEvent>,
    mut out: Numbering,
    keys: Arc<Mutex<HashSet<String>>>,
) {
    subscribe_all(rpc.as_ref(), &keys).await;
    let mut mapper = Mapper::default();
    loop {
        match rx.recv().await {
            Ok(WireEvent::Event { event, payload }) => {
                for e in mapper.map(&event, &payload) {
                    out.emit(e);
                }
            }
            Ok(WireEvent::Reconnected) => {
                out.gap();
                subscribe_all(rpc.as_ref(), &keys).await;
            }
            Err(broadcast::error::RecvError::Lagged(_)) => out.gap(),
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
