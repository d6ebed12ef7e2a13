//! What a connection subscribed to, and the tasks that turn engine events into its event
//! frames: `switchboard.event` (after `switchboard.subscribe`, every engine event), and
//! OpenClaw's own events in OpenClaw's shapes (`sessions.changed`, `session.message`,
//! `chat`, `agent`), plus `a2a` for every client and a `tick` every `tickIntervalMs`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_types::api::time::now_ms;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::outbox::Outbox;
use switchboard_protocol::switchboard::{self, GapPayload, SubscribeResult};
use switchboard_types::api::{EngineEvent, EventStream, RunStatus, SessionsApi, StreamItem};

/// OpenClaw's event names, as `hello-ok` lists them.
pub const SESSIONS_CHANGED: &str = "sessions.changed";
pub const SESSION_MESSAGE: &str = "session.message";
pub const CHAT: &str = "chat";
pub const AGENT: &str = "agent";
pub const TICK: &str = "tick";
/// Our agent-to-agent events (rounds, endings, announces, spawns) for our console;
/// OpenClaw's clients ignore an event they do not know.
pub const A2A: &str = "a2a";

/// Keys a connection follows are capped, so a client cannot grow the server's memory by
/// subscribing to (or sending into) endless distinct keys.
const MAX_KEYS: usize = 10_000;

/// Run ends remembered after their events were queued, for an answer that asks just after.
const RECENT_ENDS: usize = 256;

/// Which OpenClaw events a connection asked for.
#[derive(Default)]
pub struct Interest {
    /// `sessions.subscribe`: `sessions.changed` for every session.
    sessions: bool,
    /// `sessions.messages.subscribe {key}`: `session.message` for these (canonical) keys.
    messages: HashSet<String>,
    /// Sessions this connection sent into: `chat`/`agent` events of their runs.
    sent: HashSet<String>,
    /// `switchboard.subscribe`: the exchange events already reach it as `switchboard.event`, so
    /// `a2a` would only send them twice.
    switchboard: bool,
    /// The order of a run's end (`lifecycle end`, `chat final`) against the answers that
    /// report it (`agent`'s second, `agent.wait`): `RunEnds`.
    ends: RunEnds,
}

/// Which runs' end events this connection has queued, so an answer about a run's end can
/// wait for them and go after them, as OpenClaw orders them.
#[derive(Default)]
struct RunEnds {
    /// Runs whose `lifecycle start` went out and whose end has not yet.
    open: HashSet<String>,
    /// Runs whose end events were queued lately (oldest first).
    recent: VecDeque<String>,
    /// Answers waiting for a run's end events to be queued.
    waiting: HashMap<String, Vec<oneshot::Sender<()>>>,
}

impl Interest {
    pub fn set_sessions(&mut self, on: bool) {
        self.sessions = on;
    }

    /// False when the connection already follows `MAX_KEYS` sessions.
    pub fn follow_messages(&mut self, key: &str) -> bool {
        insert_capped(&mut self.messages, key)
    }

    pub fn unfollow_messages(&mut self, key: &str) {
        self.messages.remove(key);
    }

    pub fn sent_into(&mut self, key: &str) {
        insert_capped(&mut self.sent, key);
    }

    fn runs_of(&self, key: &str) -> bool {
        self.messages.contains(key) || self.sent.contains(key)
    }

    /// Resolves once run `run_id`'s end events are queued; `None` when there is nothing to
    /// wait for: they already are, or (unless `expected`, for a run this connection just
    /// started) its start never went out here, so no end will either.
    pub fn end_of(&mut self, run_id: &str, expected: bool) -> Option<oneshot::Receiver<()>> {
        let ends = &mut self.ends;
        if ends.recent.iter().any(|r| r == run_id)
            || (!expected && !ends.open.contains(run_id))
            || ends.waiting.len() >= MAX_KEYS
        {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        ends.waiting.entry(run_id.to_string()).or_default().push(tx);
        Some(rx)
    }

    /// The event task saw a run start (for a session this connection follows).
    fn started(&mut self, run_id: &str) {
        insert_capped(&mut self.ends.open, run_id);
    }

    /// The event task queued a run's end events: its waiters go on.
    fn ended(&mut self, run_id: &str) {
        let ends = &mut self.ends;
        ends.open.remove(run_id);
        if ends.recent.len() >= RECENT_ENDS {
            ends.recent.pop_front();
        }
        ends.recent.push_back(run_id.to_string());
        for waiter in ends.waiting.remove(run_id).unwrap_or_default() {
            let _ = waiter.send(());
        }
    }

    /// Events were lost: nobody waits for an end that may never come.
    fn lost_events(&mut self) {
        self.ends.open.clear();
        self.ends.waiting.clear();
    }
}

fn insert_capped(set: &mut HashSet<String>, key: &str) -> bool {
    if set.contains(key) {
        return true;
    }
    if set.len() >= MAX_KEYS {
        return false;
    }
    set.insert(key.to_string());
    true
}

/// A connection's event tasks; they end with it (dropped → aborted).
pub struct Subscriptions {
    openclaw: JoinHandle<()>,
    switchboard: Option<JoinHandle<()>>,
    pub interest: Arc<Mutex<Interest>>,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.openclaw.abort();
        if let Some(task) = self.switchboard.take() {
            task.abort();
        }
    }
}

impl Subscriptions {
    /// Starts the OpenClaw events (`a2a` and `tick` go to every connection; the others
    /// once asked for).
    pub fn start(api: &Arc<dyn SessionsApi>, outbox: &Arc<Outbox>, tick: Duration) -> Self {
        let interest = Arc::new(Mutex::new(Interest::default()));
        let openclaw = tokio::spawn(openclaw(
            api.subscribe(),
            outbox.clone(),
            interest.clone(),
            tick,
        ));
        Subscriptions {
            openclaw,
            switchboard: None,
            interest,
        }
    }

    /// `switchboard.subscribe`: the stream is opened before the answer is queued and
    /// forwarded only after it, so no event is lost and none overtakes the answer. A
    /// second call keeps the one stream.
    pub fn subscribe_switchboard(
        &mut self,
        api: &Arc<dyn SessionsApi>,
        outbox: &Arc<Outbox>,
        id: String,
    ) {
        if self.switchboard.is_some() {
            let _ = outbox.response(id, Ok(answer()));
            return;
        }
        let stream = api.subscribe();
        self.interest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .switchboard = true;
        if outbox.response(id, Ok(answer())).is_err() {
            return;
        }
        self.switchboard = Some(tokio::spawn(forward(stream, outbox.clone())));
    }
}

fn answer() -> Value {
    // The engine's current number is not part of `SessionsApi`; the first event's `seq`
    // tells the client where the stream starts.
    serde_json::to_value(SubscribeResult { seq: None }).unwrap_or(Value::Null)
}

/// Every engine event as a `switchboard.event`, and word of any gap, until the engine's
/// stream or the connection ends.
async fn forward(mut stream: EventStream, outbox: Arc<Outbox>) {
    loop {
        let queued = match stream.next().await {
            StreamItem::Event(e) => match serde_json::to_value(&e) {
                Ok(v) => outbox.event(switchboard::EVENT, v),
                Err(err) => {
                    tracing::error!(error = %err, "an engine event could not be encoded");
                    continue;
                }
            },
            StreamItem::Missed(missed) => {
                tracing::warn!(missed, "a subscriber's engine stream lost events");
                match serde_json::to_value(GapPayload { missed }) {
                    Ok(v) => outbox.event(switchboard::GAP, v),
                    Err(_) => continue,
                }
            }
            StreamItem::Closed => return,
        };
        if queued.is_err() {
            return;
        }
    }
}

/// OpenClaw's events for one connection, and its ticks, until it ends.
async fn openclaw(
    mut stream: EventStream,
    outbox: Arc<Outbox>,
    interest: Arc<Mutex<Interest>>,
    tick: Duration,
) {
    let tick = tick.max(Duration::from_millis(10));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut engine_open = true;
    let mut deltas = super::chat_deltas::ChatDeltas::default();
    loop {
        // A run whose end events are among `frames`: its waiters go on once they are queued.
        let mut ended = None;
        let frames = tokio::select! {
            _ = ticker.tick() => vec![(TICK, json!({"ts": now_ms()}))],
            item = stream.next(), if engine_open => match item {
                StreamItem::Event(e) => {
                    let mut interest = interest.lock().unwrap_or_else(|p| p.into_inner());
                    let mut frames = translate(&e.event, &interest);
                    if let Some(v) = deltas.translate(&e.event, |k| interest.runs_of(k), now_ms()) {
                        frames.push((CHAT, v));
                    }
                    match &e.event {
                        EngineEvent::RunStarted { run_id, key, .. } if interest.runs_of(key) => {
                            interest.started(run_id);
                        }
                        EngineEvent::RunEnded { run_id, .. } => ended = Some(run_id.clone()),
                        _ => {}
                    }
                    frames
                }
                StreamItem::Missed(missed) => {
                    tracing::warn!(missed, "a connection's engine stream lost events");
                    deltas.missed();
                    // What was lost is unknown: a session list is told to reload.
                    let mut interest = interest.lock().unwrap_or_else(|p| p.into_inner());
                    interest.lost_events();
                    if interest.sessions {
                        vec![(SESSIONS_CHANGED, json!({"reason": "update", "ts": now_ms()}))]
                    } else {
                        Vec::new()
                    }
                }
                StreamItem::Closed => {
                    engine_open = false;
                    Vec::new()
                }
            },
        };
        for (name, payload) in frames {
            if outbox.event(name, payload).is_err() {
                return;
            }
        }
        if let Some(run_id) = ended {
            interest
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .ended(&run_id);
        }
    }
}

/// The agent id in a key `agent:<id>:…`.
pub fn agent_of(key: &str) -> Option<&str> {
    let mut parts = key.splitn(3, ':');
    match (parts.next(), parts.next()) {
        (Some("agent"), Some(id)) if !id.is_empty() => Some(id),
        _ => None,
    }
}

fn with_agent(mut v: Value, key: &str) -> Value {
    if let Some(id) = agent_of(key) {
        v["agentId"] = json!(id);
    }
    v
}

/// One engine event as the OpenClaw events this connection asked for (often none).
pub fn translate(event: &EngineEvent, interest: &Interest) -> Vec<(&'static str, Value)> {
    let ts = now_ms();
    let changed = |key: Option<&str>, reason: &str| {
        let mut v = json!({"reason": reason, "ts": ts});
        if let Some(k) = key {
            v["sessionKey"] = json!(k);
            v = with_agent(v, k);
        }
        (SESSIONS_CHANGED, v)
    };
    let mut out = Vec::new();
    match event {
        EngineEvent::ExchangeStarted { .. }
        | EngineEvent::ExchangeRound { .. }
        | EngineEvent::ExchangeLoopEnded { .. }
        | EngineEvent::ExchangeEnded { .. }
        | EngineEvent::Announce { .. }
        | EngineEvent::ChainStopped { .. }
        | EngineEvent::Spawned { .. }
        | EngineEvent::SpawnEnded { .. }
        | EngineEvent::SpawnAnnounce { .. } => {
            if !interest.switchboard
                && let Ok(v) = serde_json::to_value(event)
            {
                out.push((A2A, v));
            }
        }
        EngineEvent::SessionCreated { key, session_id } => {
            if interest.sessions {
                let (name, mut v) = changed(Some(key), "create");
                v["sessionId"] = json!(session_id);
                out.push((name, v));
            }
        }
        EngineEvent::SessionUpdated { key }
        | EngineEvent::SessionArchived { key }
        | EngineEvent::PolicyChanged { key, .. }
        | EngineEvent::AgentSendsChanged { key, .. } => {
            if interest.sessions {
                out.push(changed(Some(key), "update"));
            }
        }
        EngineEvent::SessionDeleted { key } => {
            if interest.sessions {
                out.push(changed(Some(key), "delete"));
            }
        }
        EngineEvent::ExternalChange | EngineEvent::Recovered { .. } => {
            if interest.sessions {
                out.push(changed(None, "update"));
            }
        }
        EngineEvent::MessageAppended {
            key,
            session_id,
            seq,
            line,
        } => {
            if interest.sessions {
                let v = json!({
                    "sessionKey": key, "sessionId": session_id, "phase": "message",
                    "messageSeq": seq, "ts": ts,
                });
                out.push((SESSIONS_CHANGED, with_agent(v, key)));
            }
            if interest.messages.contains(key)
                && let Some(message) = line.get("message")
            {
                // As `chat.history` shows it, with OpenClaw's `__openclaw` position.
                let mut message = message.clone();
                let id = line.get("id").cloned().unwrap_or(Value::Null);
                if message.is_object() {
                    message["__openclaw"] = json!({"id": id, "seq": seq});
                }
                let mut v = json!({"sessionKey": key});
                // Moved in: `json!` would copy the message once more.
                v["message"] = message;
                v["messageId"] = id;
                v["messageSeq"] = json!(seq);
                out.push((SESSION_MESSAGE, with_agent(v, key)));
            }
        }
        // OpenClaw's `chat` deltas carry the accumulated text: made by the connection's
        // `ChatDeltas`, which keeps it (switchboard-dialect clients get `switchboard.event`).
        EngineEvent::ReplyDelta { .. } => {}
        EngineEvent::RunStarted {
            run_id,
            key,
            agent_id,
            ..
        } => {
            if interest.runs_of(key) {
                out.push((
                    AGENT,
                    json!({
                        "runId": run_id, "sessionKey": key, "agentId": agent_id,
                        "stream": "lifecycle", "data": {"phase": "start", "startedAt": ts},
                        "ts": ts,
                    }),
                ));
            }
        }
        EngineEvent::RunEnded {
            run_id,
            key,
            status,
            reply,
            error,
            ..
        } => {
            if interest.runs_of(key) {
                let ok = *status == RunStatus::Ok;
                let data = if ok {
                    json!({"phase": "end", "endedAt": ts, "stopReason": "stop"})
                } else {
                    json!({"phase": "error", "endedAt": ts, "status": status,
                           "error": error.clone().unwrap_or_else(|| status.to_string())})
                };
                let v = json!({"runId": run_id, "sessionKey": key, "stream": "lifecycle",
                               "data": data, "ts": ts});
                out.push((AGENT, with_agent(v, key)));
                let chat = match status {
                    RunStatus::Ok => json!({
                        "runId": run_id, "sessionKey": key, "state": "final",
                        "stopReason": "stop",
                        "message": {"role": "assistant",
                                    "content": [{"type": "text",
                                                 "text": reply.clone().unwrap_or_default()}],
                                    "timestamp": ts},
                    }),
                    RunStatus::Aborted => {
                        json!({"runId": run_id, "sessionKey": key, "state": "aborted"})
                    }
                    _ => json!({
                        "runId": run_id, "sessionKey": key, "state": "error",
                        "errorMessage": error.clone().unwrap_or_else(|| status.to_string()),
                    }),
                };
                out.push((CHAT, with_agent(chat, key)));
            }
        }
        EngineEvent::Delivery { .. }
        | EngineEvent::DeliveryUpdated { .. }
        | EngineEvent::PolicyDecision { .. } => {}
    }
    out
}
