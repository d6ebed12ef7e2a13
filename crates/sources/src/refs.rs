//! Session references in and out: everything a source answers gets its keys, exchange ids,
//! chain ids and run ids written as `source/…` on the way out, and everything asked of a
//! source gets them back bare on the way in. One function per type, each listing every
//! field that names something on the source, so a field added to a type is a field seen
//! here (the tests walk every answer's JSON for a bare key).

use serde_json::Value;
use switchboard_types::api::source::{SEPARATOR, SessionRef};
use switchboard_types::api::{
    AbortOutcome, AgentSendsResult, EngineEvent, ExchangeDetail, ExchangeSummary, PatchResult,
    ResolvedKey, RunResult, SendReceipt, SessionDetail, SessionRow, ToolResult, TrafficCount,
    TranscriptLine, TranscriptPage,
};

/// Fields of a JSON answer (entries, transcript lines, tool results) whose string value
/// names a session or a run: they are qualified as the typed fields are.
const KEY_FIELDS: &[&str] = &[
    "runId",
    "key",
    "sessionKey",
    "childSessionKey",
    "parentSessionKey",
    "requesterSessionKey",
    "targetSessionKey",
    "spawnedBy",
];

/// How deep a JSON answer is walked for key fields (deeper values are left as they are;
/// answers are bounded in depth where they are parsed).
const WALK_DEPTH: usize = 32;

/// Writes references of one source.
#[derive(Debug, Clone, Copy)]
pub struct Qualify<'a> {
    pub source: &'a str,
}

impl Qualify<'_> {
    pub fn id(&self, id: &mut String) {
        // Empty ids (an exchange turn with no run yet) stay empty: there is nothing to name.
        if !id.is_empty() {
            let mut s = String::with_capacity(self.source.len() + 1 + id.len());
            s.push_str(self.source);
            s.push(SEPARATOR);
            s.push_str(id);
            *id = s;
        }
    }

    fn opt(&self, id: &mut Option<String>) {
        if let Some(id) = id {
            self.id(id);
        }
    }

    /// Key fields anywhere in a JSON answer.
    pub fn json(&self, value: &mut Value) {
        self.walk(value, 0);
    }

    fn walk(&self, value: &mut Value, depth: usize) {
        if depth > WALK_DEPTH {
            return;
        }
        match value {
            Value::Object(map) => {
                for (name, v) in map.iter_mut() {
                    match v {
                        Value::String(s) if KEY_FIELDS.contains(&name.as_str()) => self.id(s),
                        Value::Object(_) | Value::Array(_) => self.walk(v, depth + 1),
                        _ => {}
                    }
                }
            }
            Value::Array(items) => {
                for v in items {
                    self.walk(v, depth + 1);
                }
            }
            _ => {}
        }
    }

    pub fn row(&self, row: &mut SessionRow) {
        self.id(&mut row.key);
        if let Some(entry) = &mut row.entry {
            self.json(entry);
        }
    }

    pub fn detail(&self, d: &mut SessionDetail) {
        self.row(&mut d.row);
        self.json(&mut d.entry);
    }

    pub fn line(&self, line: &mut TranscriptLine) {
        if let Some(m) = &mut line.message {
            self.json(m);
        }
    }

    pub fn transcript(&self, page: &mut TranscriptPage) {
        self.id(&mut page.key);
        for line in &mut page.lines {
            self.line(line);
        }
    }

    pub fn resolved(&self, r: &mut ResolvedKey) {
        self.id(&mut r.key);
    }

    pub fn receipt(&self, r: &mut SendReceipt) {
        self.id(&mut r.key);
        self.opt(&mut r.run_id);
    }

    pub fn run(&self, r: &mut RunResult) {
        self.id(&mut r.run_id);
    }

    pub fn abort(&self, a: &mut AbortOutcome) {
        for id in &mut a.run_ids {
            self.id(id);
        }
    }

    pub fn tool(&self, t: &mut ToolResult) {
        self.json(&mut t.result);
    }

    pub fn patch(&self, p: &mut PatchResult) {
        self.id(&mut p.key);
    }

    pub fn agent_sends(&self, a: &mut AgentSendsResult) {
        self.id(&mut a.key);
    }

    pub fn summary(&self, e: &mut ExchangeSummary) {
        self.id(&mut e.id);
        self.id(&mut e.requester);
        self.id(&mut e.target);
    }

    pub fn exchange(&self, e: &mut ExchangeDetail) {
        self.summary(&mut e.summary);
        for t in &mut e.turns {
            self.id(&mut t.speaker);
            self.id(&mut t.listener);
            self.id(&mut t.run_id);
        }
    }

    pub fn traffic(&self, t: &mut TrafficCount) {
        self.id(&mut t.requester);
        self.id(&mut t.target);
    }

    /// Every reference an event carries.
    pub fn event(&self, event: &mut EngineEvent) {
        use EngineEvent as E;
        match event {
            E::SessionCreated { key, .. }
            | E::SessionUpdated { key }
            | E::SessionDeleted { key }
            | E::SessionArchived { key }
            | E::PolicyChanged { key, .. }
            | E::AgentSendsChanged { key, .. }
            | E::Delivery { key, .. } => self.id(key),
            E::MessageAppended { key, line, .. } => {
                self.id(key);
                self.json(line);
            }
            E::RunStarted {
                run_id,
                key,
                exchange_id,
                ..
            }
            | E::RunEnded {
                run_id,
                key,
                exchange_id,
                ..
            } => {
                self.id(run_id);
                self.id(key);
                self.opt(exchange_id);
            }
            E::ReplyDelta { run_id, key, .. } => {
                self.id(run_id);
                self.id(key);
            }
            E::ExchangeStarted {
                exchange_id,
                chain_id,
                requester,
                target,
                run_id,
                ..
            } => {
                self.id(exchange_id);
                self.id(chain_id);
                self.id(requester);
                self.id(target);
                self.id(run_id);
            }
            E::ExchangeRound {
                exchange_id,
                speaker,
                listener,
                run_id,
                ..
            } => {
                self.id(exchange_id);
                self.id(speaker);
                self.id(listener);
                self.id(run_id);
            }
            E::ExchangeLoopEnded { exchange_id, .. } | E::ExchangeEnded { exchange_id, .. } => {
                self.id(exchange_id)
            }
            E::Announce {
                exchange_id,
                target,
                ..
            } => {
                self.id(exchange_id);
                self.id(target);
            }
            // No session key: an outbox id, which a source's own `deliveries` names.
            E::DeliveryUpdated { .. } => {}
            E::PolicyDecision { key, requester, .. } => {
                self.id(key);
                self.opt(requester);
            }
            E::ChainStopped {
                chain_id,
                requester,
                target,
                ..
            } => {
                self.id(chain_id);
                self.id(requester);
                self.id(target);
            }
            E::Spawned {
                requester,
                child,
                run_id,
                ..
            } => {
                self.id(requester);
                self.id(child);
                self.id(run_id);
            }
            E::SpawnEnded {
                requester, child, ..
            }
            | E::SpawnAnnounce {
                requester, child, ..
            } => {
                self.id(requester);
                self.id(child);
            }
            E::ExternalChange => {}
            E::Recovered { runs, exchanges } => {
                for id in runs.iter_mut().chain(exchanges.iter_mut()) {
                    self.id(id);
                }
            }
        }
    }
}

/// A reference split into its source and what it names there. A bare reference (no source)
/// is `None` here: the caller decides (ask every source, or refuse).
pub fn split(reference: &str) -> Option<(&str, &str)> {
    let r = SessionRef::parse(reference);
    r.source.map(|s| (s, r.key))
}

/// Key fields of a JSON request (a tool's parameters) that name a session on `source`,
/// written bare; a reference to another source is refused (a tool runs on one engine).
pub fn bare_json(source: &str, value: &mut Value) -> Result<(), String> {
    fn walk(source: &str, value: &mut Value, depth: usize) -> Result<(), String> {
        if depth > WALK_DEPTH {
            return Ok(());
        }
        match value {
            Value::Object(map) => {
                for (name, v) in map.iter_mut() {
                    match v {
                        Value::String(s) if KEY_FIELDS.contains(&name.as_str()) => {
                            if let Some((other, key)) = split(s) {
                                if other != source {
                                    return Err(format!(
                                        "{name} {s:?} is on source {other:?}, not {source:?}: a \
                                         tool runs on one source"
                                    ));
                                }
                                *s = key.to_string();
                            }
                        }
                        Value::Object(_) | Value::Array(_) => walk(source, v, depth + 1)?,
                        _ => {}
                    }
                }
            }
            Value::Array(items) => {
                for v in items {
                    walk(source, v, depth + 1)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
    walk(source, value, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_answers_get_their_key_fields_qualified_and_nothing_else() {
        let q = Qualify { source: "home" };
        let mut v = json!({
            "sessions": [{"key": "agent:main:main", "displayName": "agent:main:main",
                          "entry": {"spawnedBy": "agent:main:x"}}],
            "childSessionKey": "agent:research:subagent:1",
            "text": "from agent:ops:main via sessions_send",
            "key": 7
        });
        q.json(&mut v);
        assert_eq!(v["sessions"][0]["key"], "home/agent:main:main");
        assert_eq!(v["sessions"][0]["displayName"], "agent:main:main");
        assert_eq!(v["sessions"][0]["entry"]["spawnedBy"], "home/agent:main:x");
        assert_eq!(v["childSessionKey"], "home/agent:research:subagent:1");
        assert_eq!(v["text"], "from agent:ops:main via sessions_send");
        assert_eq!(v["key"], 7);
    }

    #[test]
    fn a_request_names_its_own_source_or_is_refused() {
        let mut v = json!({"sessionKey": "home/agent:ops:main", "message": "hi"});
        bare_json("home", &mut v).unwrap();
        assert_eq!(v["sessionKey"], "agent:ops:main");
        let mut v = json!({"sessionKey": "team/agent:ops:main"});
        let e = bare_json("home", &mut v).unwrap_err();
        assert!(e.contains("on source \"team\""), "{e}");
        // A bare key is taken as the requester's own source's.
        let mut v = json!({"sessionKey": "agent:ops:main"});
        bare_json("home", &mut v).unwrap();
        assert_eq!(v["sessionKey"], "agent:ops:main");
    }
}
