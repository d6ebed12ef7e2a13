//! When the work one message set off on an OpenClaw gateway is over. OpenClaw says when a
//! run ends, never when the exchanges and sub-agents that run started end, so it is read off
//! the book: the exchanges the run's `sessions_send` calls started (requester = its session,
//! from its start on, or to a session its tool calls name) and the sub-agents it spawned are
//! over when the book records their end; failing that, when none of their sessions has had a
//! run going or any event for a quiet period: then the end is *inferred*, and said so.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::events::Activity;
use super::exchanges::Built;
use switchboard_types::api::ExchangeStatus;

/// No run going and no event in any session of the work for this long: the work is taken
/// as over. OpenClaw starts each reply-back step and the announce as soon as the step
/// before ends (a run going is never quiet, however slow its model), so a few seconds of
/// silence means nothing else is coming. `SWITCHBOARD_OPENCLAW_QUIET_MS` changes it (tests).
pub fn quiet_period() -> Duration {
    std::env::var("SWITCHBOARD_OPENCLAW_QUIET_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(Duration::from_secs(5), Duration::from_millis)
}

/// The longest a work is waited for after its run ended: OpenClaw waits at most 60 s per
/// step, 5 reply-back turns and the announce by default; past this it is taken as over.
pub const WORK_MAX: Duration = Duration::from_secs(10 * 60);

/// Sessions a work's sessions re-read at most when it goes quiet (the rest stay as the
/// book has them).
pub const REREAD_MAX: usize = 16;

/// Tool calls that start work elsewhere.
const SEND: &str = "sessions_send";
const SPAWN: &str = "sessions_spawn";

/// The sessions run `run_id`'s tool calls reached, as its session's lines record them: the
/// `sessionKey` of each `sessions_send` result (the resolved key, where the call may name a
/// label) and the `childSessionKey` of each `sessions_spawn` result; a refused call reached
/// nothing.
pub fn reached(page: &Value, run_id: &str) -> BTreeSet<String> {
    let of_run = |m: &Value| m.pointer("/__openclaw/runId").and_then(Value::as_str) == Some(run_id);
    reached_by(page, of_run)
}

/// The sessions any run's tool calls reached in lines written at or after `since` (the
/// gateway's clock): what a session of a work set off in its turn.
pub fn reached_since(page: &Value, since: i64) -> BTreeSet<String> {
    reached_by(page, |m| {
        m.get("timestamp")
            .and_then(Value::as_i64)
            .is_some_and(|t| t >= since)
    })
}

/// `reached` for the tool results `keep` picks.
fn reached_by(page: &Value, keep: impl Fn(&Value) -> bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let messages = page
        .get("messages")
        .and_then(Value::as_array)
        .map(|a| a.as_slice())
        .unwrap_or_default();
    for m in messages.iter().filter(|m| keep(m)) {
        if m.get("role").and_then(Value::as_str) != Some("toolResult") {
            continue;
        }
        let field = match m.get("toolName").and_then(Value::as_str) {
            Some(SEND) => "sessionKey",
            Some(SPAWN) => "childSessionKey",
            _ => continue,
        };
        let result: Option<Value> = m
            .get("content")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find_map(|b| b.get("text").and_then(Value::as_str)))
            .and_then(|t| serde_json::from_str(t).ok());
        let Some(result) = result else { continue };
        // A refused or failed call started nothing.
        if matches!(
            result.get("status").and_then(Value::as_str),
            Some("error" | "forbidden")
        ) {
            continue;
        }
        if let Some(k) = result.get(field).and_then(Value::as_str) {
            out.insert(k.to_string());
        }
    }
    out.retain(|k| !k.is_empty());
    out
}

/// What the book says of one work now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every session the work touched (its own, targets, requesters, children).
    pub sessions: BTreeSet<String>,
    /// What the book does not record as over yet, in words (an exchange, a sub-agent, a
    /// session reached whose record shows nothing yet).
    pub pending: Vec<String>,
}

/// Sessions one work follows at the most (its own, and those its exchanges and sub-agents
/// reached, nested ones included).
pub const SESSIONS_MAX: usize = 64;

/// The work of the run in `key` that started at `since` (the gateway's clock; `None`: not
/// known, so only what its tool calls name counts) and reached `reached`. Nested work is
/// the work's too, as a chain of hops is on our engine: what a session the work reached
/// started in its turn (since the run started) is followed as well.
pub fn progress(
    built: &Built,
    key: &str,
    since: Option<i64>,
    reached: &BTreeSet<String>,
) -> Progress {
    let mut p = Progress::default();
    p.sessions.insert(key.to_string());
    let ours = |requester: &str, other: &str, at: i64| {
        (requester == key && reached.contains(other)) || since.is_some_and(|s| at >= s)
    };
    let mut found: BTreeSet<&str> = BTreeSet::new();
    let mut queue = vec![key];
    let mut seen_exchanges: BTreeSet<&str> = BTreeSet::new();
    while let Some(from) = queue.pop() {
        for d in &built.exchanges {
            let s = &d.summary;
            if s.requester != from
                || !ours(from, &s.target, s.started_at)
                || !seen_exchanges.insert(s.id.as_str())
            {
                continue;
            }
            found.insert(s.target.as_str());
            if p.sessions.len() < SESSIONS_MAX && p.sessions.insert(s.target.clone()) {
                queue.push(s.target.as_str());
            }
            if s.status != ExchangeStatus::Done {
                p.pending.push(format!(
                    "exchange {} ({} so far)",
                    s.id,
                    switchboard_types::words::count(s.rounds, "round")
                ));
            }
        }
        for c in &built.spawns {
            if c.requester != from || !ours(from, &c.child, c.started_at) {
                continue;
            }
            found.insert(c.child.as_str());
            if p.sessions.len() < SESSIONS_MAX && p.sessions.insert(c.child.clone()) {
                queue.push(c.child.as_str());
            }
            if c.outcome.is_none() {
                p.pending.push(format!("sub-agent {}", c.child));
            }
        }
    }
    for k in reached {
        p.sessions.insert(k.clone());
        if !found.contains(k.as_str()) {
            p.pending.push(format!("{k} (nothing recorded there yet)"));
        }
    }
    p
}

/// When the last sign of life in `sessions` was (`floor`: the run's end, before which the
/// work was surely going), or `None` while a run is going in one of them.
pub fn last_active(
    activity: &Activity,
    sessions: &BTreeSet<String>,
    floor: Instant,
) -> Option<Instant> {
    let mut last = floor;
    for k in sessions {
        if let Some(seen) = activity.of(k) {
            if !seen.running.is_empty() {
                return None;
            }
            last = last.max(seen.last);
        }
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchboard_types::api::{ExchangeDetail, ExchangeKind, ExchangeSummary};

    #[test]
    fn the_sessions_a_run_reached_are_its_send_and_spawn_calls() {
        let page = json!({ "messages": [
            { "role": "toolResult", "toolName": "sessions_send", "__openclaw": { "runId": "r1" },
              "content": [{ "type": "text", "text": "{\"sessionKey\": \"agent:work:main\", \"status\": \"ok\"}" }] },
            { "role": "toolResult", "toolName": "sessions_spawn", "__openclaw": { "runId": "r1" },
              "content": [{ "type": "text", "text": "{\"childSessionKey\": \"agent:main:subagent:1\"}" }] },
            // Another run's call is not this work's; a refused one started nothing.
            { "role": "toolResult", "toolName": "sessions_send", "__openclaw": { "runId": "r0" },
              "content": [{ "type": "text", "text": "{\"sessionKey\": \"old\"}" }] },
            { "role": "toolResult", "toolName": "sessions_send", "__openclaw": { "runId": "r1" },
              "content": [{ "type": "text", "text": "{\"sessionKey\": \"x\", \"status\": \"forbidden\"}" }] },
            // A result that is not JSON is skipped.
            { "role": "toolResult", "toolName": "sessions_send", "__openclaw": { "runId": "r1" },
              "content": [{ "type": "text", "text": "forbidden" }] },
        ]});
        let got: Vec<String> = reached(&page, "r1").into_iter().collect();
        assert_eq!(got, ["agent:main:subagent:1", "agent:work:main"]);
    }

    /// What any run reached from a time on: the calls of a session the work reached.
    #[test]
    fn the_sessions_reached_since_a_time_are_any_runs_calls_from_then() {
        let result = |run: &str, at: i64, to: &str| {
            json!({ "role": "toolResult", "toolName": "sessions_send", "timestamp": at,
                    "__openclaw": { "runId": run },
                    "content": [{ "type": "text", "text": json!({"sessionKey": to}).to_string() }] })
        };
        let page = json!({ "messages": [
            result("old", 90, "agent:work:before"),
            result("r7", 100, "agent:work:c"),
            result("r8", 150, "agent:work:d"),
        ]});
        let got: Vec<String> = reached_since(&page, 100).into_iter().collect();
        assert_eq!(got, ["agent:work:c", "agent:work:d"]);
    }

    fn exchange(
        id: &str,
        requester: &str,
        target: &str,
        at: i64,
        status: ExchangeStatus,
    ) -> ExchangeDetail {
        ExchangeDetail {
            summary: ExchangeSummary {
                id: id.into(),
                kind: ExchangeKind::Send,
                requester: requester.into(),
                target: target.into(),
                message: String::new(),
                started_at: at,
                ended_at: None,
                status,
                rounds: 1,
                ended_reason: None,
                detail: String::new(),
                announce: None,
            },
            turns: Vec::new(),
            announce: None,
        }
    }

    /// The work of a run: exchanges its session requested since the run started or into a
    /// session it reached; what is not over, and sessions reached with nothing recorded yet,
    /// are pending.
    #[test]
    fn a_works_progress_is_what_its_exchanges_and_reached_sessions_show() {
        let (k, b, c) = ("agent:main:k", "agent:work:b", "agent:work:c");
        let (e, x) = ("agent:work:e", "agent:work:x");
        let built = Built {
            exchanges: vec![
                exchange("b#1", k, b, 100, ExchangeStatus::Running),
                exchange("c#1", k, c, 100, ExchangeStatus::Done),
                // Before the run, to a session it did not reach: not its work.
                exchange("c#0", k, c, 10, ExchangeStatus::Running),
                // Nested: what c started in its turn, since the run started, is the
                // work's too (a second hop, as on our engine) ...
                exchange("e#1", c, e, 120, ExchangeStatus::Running),
                // ... but not what c did before it.
                exchange("e#0", c, e, 20, ExchangeStatus::Running),
                // A requester the work never reached.
                exchange("k#1", x, k, 100, ExchangeStatus::Running),
            ],
            ..Built::default()
        };
        let reached: BTreeSet<String> = ["agent:work:d".to_string()].into();
        let p = progress(&built, k, Some(50), &reached);
        assert_eq!(
            p.pending,
            [
                "exchange b#1 (1 round so far)",
                "exchange e#1 (1 round so far)",
                "agent:work:d (nothing recorded there yet)"
            ]
        );
        assert_eq!(
            p.sessions.into_iter().collect::<Vec<_>>(),
            [k, b, c, "agent:work:d", e]
        );
        // Without the run's start, only what its calls reached counts.
        let p = progress(&built, k, None, &BTreeSet::new());
        assert!(p.pending.is_empty(), "{:?}", p.pending);
    }
}
