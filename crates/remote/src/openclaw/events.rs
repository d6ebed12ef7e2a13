//! OpenClaw's gateway events as engine events, numbered here: `sessions.changed` as a
//! session created / updated / deleted, `session.message` as a committed line, the
//! `agent` lifecycle start as a run starting, a `chat` delta as a reply delta (the delta
//! computed from the accumulated text), a `chat` final / error / aborted as its end.
//! A reconnect (or a lagging link) becomes a gap, so the subscriber reloads. The same events
//! keep the book of exchanges current (`Ledger`): a forwarded line or a run's end in a
//! session re-reads that session's newest lines, and what changed in the rebuilt exchanges
//! and sub-agents goes out as our engine's exchange and spawn events.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::exchanges::Book;
use super::map;
use super::recheck::{self, Rechecks, Reread};
use crate::rpc::{Rpc, WireEvent};
use switchboard_types::api::time::now_ms;
use switchboard_types::api::{EngineEvent, RunStatus, Sequenced, Step};

/// Newest lines re-read from a session whose run ended (the book keeps what it read).
const TAIL_LINES: usize = super::backfill::HISTORY_LINES;

/// The book of exchanges, shared by the API (backfill, reads) and the pump (live updates).
#[derive(Default)]
pub struct Ledger {
    pub book: Mutex<Book>,
    /// The backfill ran: live events update the book from now on.
    pub ready: AtomicBool,
    /// Events were missed since (a reconnect, a lag): the next read backfills again.
    pub stale: AtomicBool,
    /// One backfill at a time; readers wait for it.
    pub fill: tokio::sync::Mutex<()>,
    /// Sessions a wait follows (the work of a message sent): their events go into the book
    /// before any backfill, which a wait does not need.
    pub focus: Mutex<HashSet<String>>,
    /// Per session, when the gateway last said anything about it and which runs it said
    /// started there without an end yet: how a wait tells a quiet exchange (OpenClaw sends
    /// no "exchange ended").
    pub activity: Mutex<Activity>,
}

/// Sessions followed before a backfill at most (past it they are forgotten: the wait re-reads
/// its sessions before it decides anyway).
const MAX_FOLLOWED: usize = 1024;

/// Sessions remembered at most; beyond, the least recently active is forgotten
/// (a forgotten session reads as quiet since it was forgotten, never as running forever).
const ACTIVITY_SESSIONS: usize = 4096;
/// Runs remembered as going per session (a run whose end was lost must not grow it).
const ACTIVE_RUNS: usize = 64;

/// What the events said of one session lately.
#[derive(Debug, Clone)]
pub struct Seen {
    pub last: Instant,
    /// Runs started there whose end has not come.
    pub running: HashSet<String>,
}

/// Recent activity per session, from the gateway's events.
#[derive(Debug, Default)]
pub struct Activity {
    sessions: HashMap<String, Seen>,
}

impl Activity {
    /// A gateway event about `p`'s session: it was active now; an `agent` lifecycle
    /// start/end or a `chat` end adds or removes its run.
    pub fn note(&mut self, event: &str, p: &Value) {
        let Some(key) = text_of(p, "sessionKey") else {
            return;
        };
        if !self.sessions.contains_key(key) && self.sessions.len() >= ACTIVITY_SESSIONS {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.sessions.remove(&k);
            }
        }
        let seen = self
            .sessions
            .entry(key.to_string())
            .or_insert_with(|| Seen {
                last: Instant::now(),
                running: HashSet::new(),
            });
        seen.last = Instant::now();
        let Some(run) = text_of(p, "runId") else {
            return;
        };
        let phase = p.get("data").and_then(|d| text_of(d, "phase"));
        let lifecycle = text_of(p, "stream") == Some("lifecycle");
        match (event, phase) {
            ("agent", Some("start")) if lifecycle => {
                if seen.running.len() >= ACTIVE_RUNS {
                    seen.running.clear();
                }
                seen.running.insert(run.to_string());
            }
            ("agent", Some("end" | "error")) if lifecycle => {
                seen.running.remove(run);
            }
            ("chat", _) if matches!(text_of(p, "state"), Some("final" | "error" | "aborted")) => {
                seen.running.remove(run);
            }
            _ => {}
        }
    }

    pub fn of(&self, key: &str) -> Option<&Seen> {
        self.sessions.get(key)
    }
}

impl Ledger {
    pub fn lock(&self) -> MutexGuard<'_, Book> {
        // The book is consistent between calls: a panic elsewhere leaves nothing half-done.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follow `key` from now on, backfilled or not (bounded: a wait follows a few).
    pub fn follow(&self, key: &str) {
        let mut focus = self.focus.lock().unwrap_or_else(|p| p.into_inner());
        if focus.len() >= MAX_FOLLOWED {
            focus.clear();
        }
        focus.insert(key.to_string());
    }

    /// Whether `key` is followed (its events go into the book).
    pub fn follows(&self, key: &str) -> bool {
        self.focused(key)
    }

    fn focused(&self, key: &str) -> bool {
        let focus = self.focus.lock().unwrap_or_else(|p| p.into_inner());
        focus.contains(key)
    }

    pub fn activity(&self) -> MutexGuard<'_, Activity> {
        // Plain timestamps and sets: nothing is half-written by a panic.
        self.activity.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A session's newest lines, re-read (by a wait checking an exchange's end): into the
    /// book, and the changes they make.
    pub fn reread(&self, key: &str, page: &Value) -> Vec<EngineEvent> {
        self.tail(key, page)
    }

    /// A gateway event as far as exchanges go: the engine events it makes (a forwarded line
    /// that arrived, a sub-agent row), and the session whose newest lines to re-read (a run
    /// ended there; its lines may not come as events).
    fn event(&self, event: &str, p: &Value) -> (Vec<EngineEvent>, Option<String>) {
        let Some(key) = text_of(p, "sessionKey").map(str::to_string) else {
            return (Vec::new(), None);
        };
        if !self.ready.load(Ordering::SeqCst) && !self.focused(&key) {
            // The backfill reads it all.
            return (Vec::new(), None);
        }
        match event {
            "session.message" => {
                let Some(message) = p.get("message") else {
                    return (Vec::new(), None);
                };
                let seq = p
                    .get("messageSeq")
                    .and_then(Value::as_i64)
                    .or_else(|| map::message_seq(message))
                    .unwrap_or(0);
                if seq <= 0 {
                    return (Vec::new(), Some(key));
                }
                let mut book = self.lock();
                book.message(&key, seq, message);
                (book.rebuild(now_ms()), None)
            }
            "sessions.changed" => {
                let mut book = self.lock();
                if text_of(p, "reason") == Some("delete") {
                    book.forget(&key);
                    return (book.rebuild(now_ms()), None);
                }
                let refetch = (text_of(p, "phase") == Some("end")).then(|| key.clone());
                match p.get("session").filter(|s| s.is_object()) {
                    Some(row) if row.get("spawnedBy").is_some() => {
                        book.row(row);
                        (book.rebuild(now_ms()), refetch)
                    }
                    Some(row) => {
                        book.row(row);
                        (Vec::new(), refetch)
                    }
                    None => (Vec::new(), refetch),
                }
            }
            "agent" => {
                let data = p.get("data").cloned().unwrap_or(Value::Null);
                let ended = text_of(p, "stream") == Some("lifecycle")
                    && matches!(text_of(&data, "phase"), Some("end" | "error"));
                (Vec::new(), ended.then_some(key))
            }
            _ => (Vec::new(), None),
        }
    }

    /// A session's newest lines, re-read: the changes they make.
    fn tail(&self, key: &str, page: &Value) -> Vec<EngineEvent> {
        let mut book = self.lock();
        book.history(key, page);
        book.rebuild(now_ms())
    }

    /// A session read again (its row too when re-checked): the changes it makes. A session
    /// the gateway no longer has is forgotten.
    fn reread_in(&self, r: Reread) -> Vec<EngineEvent> {
        let mut book = self.lock();
        match r.row {
            Some(Some(row)) => book.row(&row),
            Some(None) => book.forget(&r.key),
            None => {}
        }
        if let Some(page) = &r.page {
            book.history(&r.key, page);
        }
        book.rebuild(now_ms())
    }
}

/// Runs whose start was seen, for the duration their end reports (bounded: a run whose
/// end never came is forgotten once this many others started).
const RUNS_REMEMBERED: usize = 1024;

/// The most reply text remembered per streaming run (OpenClaw's deltas carry the whole
/// text so far; the delta is what it adds to the last one). Beyond it the run's deltas are
/// no longer mapped: its final still ends it with the whole reply.
const STREAM_TEXT_MAX: usize = 256 * 1024;

/// A run whose reply OpenClaw is streaming.
struct Streaming {
    key: String,
    /// The accumulated text of the last delta.
    text: String,
    /// Our model-call number: bumped when OpenClaw's text stops extending the last one.
    step: u32,
    /// Its reply line has been mapped (OpenClaw sends it before the last delta and the final).
    line_seen: bool,
}

/// What the mapping remembers between events.
#[derive(Default)]
pub struct Mapper {
    started: HashMap<String, i64>,
    streaming: HashMap<String, Streaming>,
    /// Per session, the streamed run that ended before its reply line came, for a gateway
    /// whose lines carry no `__openclaw.runId`: the next assistant line there is its reply.
    awaiting_line: HashMap<String, String>,
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
                let mut message = message.clone();
                let is_reply = message.get("role").and_then(Value::as_str) == Some("assistant")
                    && message.get("stopReason").and_then(Value::as_str) != Some("toolUse");
                // Tagged as our engine tags its lines (`__switchboard.runId`), so the console
                // replaces that run's provisional text with this line.
                if is_reply
                    && message.is_object()
                    && let Some(run_id) = self.reply_run(&key, &message)
                {
                    message["__switchboard"] = json!({ "runId": run_id });
                }
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
                    step: Step::Message,
                    round: 0,
                    exchange_id: None,
                }]
            }
            ("chat", Some(key)) if text_of(p, "state") == Some("delta") => {
                self.delta(key, p).into_iter().collect()
            }
            ("chat", Some(key)) => {
                let status = match text_of(p, "state") {
                    Some("final") => RunStatus::Ok,
                    Some("error") => RunStatus::Error,
                    Some("aborted") => RunStatus::Aborted,
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
                if self.streaming.remove(run_id).is_some_and(|r| !r.line_seen) {
                    remember(&mut self.awaiting_line, key.clone(), run_id.to_string());
                }
                let duration_ms = match (self.started.remove(run_id), ended) {
                    (Some(start), Some(end)) if end >= start => end - start,
                    _ => 0,
                };
                let error = (status == RunStatus::Error).then(|| {
                    text_of(p, "errorMessage")
                        .or_else(|| text_of(p, "error"))
                        .unwrap_or("the run failed")
                        .to_string()
                });
                vec![EngineEvent::RunEnded {
                    run_id: run_id.to_string(),
                    key,
                    step: Step::Message,
                    round: 0,
                    status,
                    reply,
                    error,
                    duration_ms,
                    tokens_in: None,
                    tokens_out: None,
                    exchange_id: None,
                }]
            }
            _ => Vec::new(),
        }
    }
}

impl Mapper {
    /// A `chat` delta as a `ReplyDelta`: OpenClaw sends the whole text so far, so the delta
    /// is what it adds to the last one. Text that does not extend the last one (a new model
    /// call after tool calls, or a rewrite) starts a new step from offset 0, so the console
    /// shows exactly OpenClaw's text, never a wrong join.
    fn delta(&mut self, key: String, p: &Value) -> Option<EngineEvent> {
        let run_id = text_of(p, "runId")?;
        let text = p.get("message").map(map::message_text).unwrap_or_default();
        if text.is_empty() {
            return None;
        }
        if !self.streaming.contains_key(run_id) && self.streaming.len() >= RUNS_REMEMBERED {
            self.streaming.clear();
        }
        let run = self
            .streaming
            .entry(run_id.to_string())
            .or_insert_with(|| Streaming {
                key: key.clone(),
                text: String::new(),
                step: 1,
                line_seen: false,
            });
        if run.text.len() > STREAM_TEXT_MAX {
            return None;
        }
        let (offset, delta) = match text.strip_prefix(run.text.as_str()) {
            Some("") => return None,
            Some(added) => (run.text.len(), added.to_string()),
            None => {
                if !run.text.is_empty() {
                    run.step += 1;
                }
                (0, text.clone())
            }
        };
        let step = run.step;
        run.text = text;
        Some(EngineEvent::ReplyDelta {
            run_id: run_id.to_string(),
            key: run.key.clone(),
            agent_id: text_of(p, "agentId")
                .map(str::to_string)
                .or_else(|| key.split(':').nth(1).map(str::to_string))
                .unwrap_or_default(),
            step,
            offset,
            delta,
        })
    }
}

impl Mapper {
    /// The run an assistant reply line in `key` belongs to: OpenClaw 2026.9 names it
    /// (`__openclaw.runId`); otherwise the run streaming there now, or the streamed run that
    /// ended there before its line came.
    fn reply_run(&mut self, key: &str, message: &Value) -> Option<String> {
        let named = message
            .get("__openclaw")
            .and_then(|o| text_of(o, "runId"))
            .map(str::to_string);
        let streaming = self
            .streaming
            .iter_mut()
            .find(|(id, r)| {
                r.key == key && !r.line_seen && named.as_deref().is_none_or(|n| n == id.as_str())
            })
            .map(|(id, r)| {
                r.line_seen = true;
                id.clone()
            });
        let awaited = self.awaiting_line.remove(key);
        named.or(streaming).or(awaited)
    }
}

/// Insert into a map that forgets everything once it holds `RUNS_REMEMBERED` entries.
fn remember(map: &mut HashMap<String, String>, key: String, value: String) {
    if map.len() >= RUNS_REMEMBERED && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
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

fn numbered(out: &Mutex<Numbering>) -> MutexGuard<'_, Numbering> {
    out.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs until the link's event channel closes: subscribes, then maps every event; after a
/// reconnect it reports a gap and subscribes again (the gateway forgot the old connection).
/// Re-reads a session's newest lines in a task of their own, one per session at a time, so
/// events keep flowing meanwhile.
/// Sessions read again at once at most (a run's end, a re-check).
const READING_MAX: usize = 256;

/// Read `key` again in a task of its own (one at a time per session), its result sent to
/// the pump.
fn read_again(
    rpc: &Arc<dyn Rpc>,
    tx: &mpsc::Sender<Reread>,
    reading: &mut HashSet<String>,
    key: String,
    with_row: bool,
) {
    if reading.len() >= READING_MAX || !reading.insert(key.clone()) {
        return;
    }
    let (rpc, tx) = (rpc.clone(), tx.clone());
    tokio::spawn(async move {
        let _ = tx
            .send(recheck::read(rpc.as_ref(), key, TAIL_LINES, with_row).await)
            .await;
    });
}

/// Runs until the link's event channel closes: subscribes, then maps every event; after a
/// reconnect it reports a gap and subscribes again (the gateway forgot the old connection).
/// Re-reads a session's newest lines in a task of their own, one per session at a time, so
/// events keep flowing meanwhile; every `recheck_after / 3` the sessions shown running and
/// silent for `recheck_after` are read again, row and lines (`recheck`).
pub async fn pump(
    rpc: Arc<dyn Rpc>,
    mut rx: broadcast::Receiver<WireEvent>,
    out: Arc<Mutex<Numbering>>,
    keys: Arc<Mutex<HashSet<String>>>,
    ledger: Arc<Ledger>,
    recheck_after: Duration,
) {
    subscribe_all(rpc.as_ref(), &keys).await;
    let mut mapper = Mapper::default();
    let (tails_tx, mut tails) = mpsc::channel::<Reread>(64);
    let mut reading: HashSet<String> = HashSet::new();
    let mut rechecks = Rechecks::default();
    let mut tick = tokio::time::interval((recheck_after / 3).max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            wire = rx.recv() => match wire {
                Ok(WireEvent::Event { event, payload }) => {
                    ledger.activity().note(&event, &payload);
                    let (more, reread) = ledger.event(&event, &payload);
                    {
                        let mut out = numbered(&out);
                        for e in mapper.map(&event, &payload) {
                            out.emit(e);
                        }
                        for e in more {
                            out.emit(e);
                        }
                    }
                    if let Some(key) = reread {
                        read_again(&rpc, &tails_tx, &mut reading, key, false);
                    }
                }
                Ok(WireEvent::Reconnected) => {
                    ledger.stale.store(true, Ordering::SeqCst);
                    numbered(&out).gap();
                    subscribe_all(rpc.as_ref(), &keys).await;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    ledger.stale.store(true, Ordering::SeqCst);
                    numbered(&out).gap();
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            Some(r) = tails.recv() => {
                reading.remove(&r.key);
                let events = ledger.reread_in(r);
                let mut out = numbered(&out);
                for e in events {
                    out.emit(e);
                }
            }
            _ = tick.tick() => {
                if !ledger.ready.load(Ordering::SeqCst) {
                    continue;
                }
                let running = ledger.lock().running();
                let due = rechecks.due(&running, &ledger.activity(), recheck_after);
                for key in due {
                    read_again(&rpc, &tails_tx, &mut reading, key, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames OpenClaw 2026.9.6 sent in one captured run (`chat.send` → "proto reply").
    fn recorded_events() -> Vec<(String, Value)> {
        include_str!("../../../../tests/fixtures/openclaw-2026.9.6/protocol-frames.jsonl")
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| {
                let f = v.get("frame")?;
                (f["type"] == "event").then(|| {
                    (
                        f["event"].as_str().unwrap_or("").to_string(),
                        f["payload"].clone(),
                    )
                })
            })
            .collect()
    }

    fn chat_delta(text: &str) -> Value {
        let (_, mut p) = recorded_events()
            .into_iter()
            .find(|(e, p)| e == "chat" && p["state"] == "delta")
            .expect("a recorded chat delta");
        p["message"]["content"][0]["text"] = json!(text);
        p["deltaText"] = json!("(ignored: the delta comes from the accumulated text)");
        p
    }

    fn deltas(events: &[EngineEvent]) -> Vec<(u32, usize, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                EngineEvent::ReplyDelta {
                    step,
                    offset,
                    delta,
                    ..
                } => Some((*step, *offset, delta.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_recorded_run_streams_then_ends_with_the_whole_reply() {
        let mut m = Mapper::default();
        let mut out = Vec::new();
        for (event, payload) in recorded_events() {
            out.extend(m.map(&event, &payload));
        }
        let run = "1e4d89d6-4e25-4f7d-aba7-959157086cca";
        let at = |pred: &dyn Fn(&EngineEvent) -> bool| out.iter().position(pred);
        let delta = at(&|e| matches!(e, EngineEvent::ReplyDelta { .. })).expect("a delta");
        let ended = at(&|e| matches!(e, EngineEvent::RunEnded { .. })).expect("an end");
        assert!(delta < ended);
        match &out[delta] {
            EngineEvent::ReplyDelta {
                run_id,
                key,
                agent_id,
                step,
                offset,
                delta,
            } => {
                assert_eq!(
                    (run_id.as_str(), key.as_str(), agent_id.as_str()),
                    (run, "agent:main:proto", "main")
                );
                assert_eq!((*step, *offset, delta.as_str()), (1, 0, "pro"));
            }
            other => panic!("{other:?}"),
        }
        match &out[ended] {
            EngineEvent::RunEnded { reply, status, .. } => {
                assert_eq!(
                    (status.as_str(), reply.as_deref()),
                    ("ok", Some("proto reply"))
                );
            }
            other => panic!("{other:?}"),
        }
        // The run's text is freed with its end; its reply line is awaited.
        assert!(m.streaming.is_empty());
        assert_eq!(
            m.awaiting_line.get("agent:main:proto").map(String::as_str),
            Some(run)
        );
    }

    #[test]
    fn deltas_are_what_the_accumulated_text_adds_and_a_rewrite_starts_a_new_step() {
        let mut m = Mapper::default();
        let mut out = Vec::new();
        for text in ["pro", "proto", "proto", "proto rep", "Let me", "Let me see"] {
            out.extend(m.map("chat", &chat_delta(text)));
        }
        assert_eq!(
            deltas(&out),
            vec![
                (1, 0, "pro".to_string()),
                (1, 3, "to".to_string()),
                (1, 5, " rep".to_string()),
                (2, 0, "Let me".to_string()),
                (2, 6, " see".to_string()),
            ]
        );
    }

    /// OpenClaw 2026.9.6 as captured against a live gateway: a delta, the reply line (naming
    /// its run in `__openclaw.runId`), the last delta, the final.
    #[test]
    fn the_captured_console_events_tag_the_reply_line_with_its_run() {
        let frames: Vec<Value> =
            include_str!("../../../../tests/fixtures/openclaw-2026.9.6/console/events.jsonl")
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
        let mut m = Mapper::default();
        let mut out = Vec::new();
        for f in &frames {
            out.extend(m.map(f["event"].as_str().unwrap_or(""), &f["payload"]));
        }
        let run = "5ee9708e-432e-494b-9168-36437b1a94eb";
        assert_eq!(
            deltas(&out),
            vec![(1, 0, "liv".to_string()), (1, 3, "e reply".to_string())]
        );
        let tagged: Vec<(&str, Option<&str>)> = out
            .iter()
            .filter_map(|e| match e {
                EngineEvent::MessageAppended { line, .. } => Some((
                    line["message"]["role"].as_str().unwrap_or(""),
                    line["message"]["__switchboard"]["runId"].as_str(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(tagged, vec![("user", None), ("assistant", Some(run))]);
        // Nothing is left waiting for a line, nor any text held.
        assert!(m.awaiting_line.is_empty() && m.streaming.is_empty());
    }

    #[test]
    fn the_reply_line_after_a_streamed_run_carries_its_run_id() {
        let mut m = Mapper::default();
        m.map("chat", &chat_delta("pro"));
        let (_, fin) = recorded_events()
            .into_iter()
            .find(|(e, p)| e == "chat" && p["state"] == "final")
            .expect("a recorded final");
        m.map("chat", &fin);
        let line = |role: &str, stop: &str| {
            json!({"sessionKey": "agent:main:proto", "messageSeq": 2,
                   "message": {"role": role, "stopReason": stop,
                               "content": [{"type": "text", "text": "proto reply"}]}})
        };
        // A user line is not the reply; the assistant line is, once.
        let user = m.map("session.message", &line("user", "stop"));
        let reply = m.map("session.message", &line("assistant", "stop"));
        let again = m.map("session.message", &line("assistant", "stop"));
        let run_of = |events: &[EngineEvent]| match events.first() {
            Some(EngineEvent::MessageAppended { line, .. }) => {
                line["message"]["__switchboard"]["runId"]
                    .as_str()
                    .map(str::to_string)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(run_of(&user), None);
        assert_eq!(
            run_of(&reply).as_deref(),
            Some("1e4d89d6-4e25-4f7d-aba7-959157086cca")
        );
        assert_eq!(run_of(&again), None);
    }
}
