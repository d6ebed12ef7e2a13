//! One `sessions_list` row in the spec's shape, built from a stored session. A field is
//! present only when it is known; nothing is invented.

use serde_json::{Map, Value, json};

use crate::context::Context;
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::SessionKind;
use switchboard_store::StoredSession;

/// The spec's channel rule: groups report their recorded channel, direct chats their last
/// channel, cron/hook/node `internal`, anything else `unknown`.
pub fn channel_of(s: &StoredSession) -> String {
    let e = &s.entry;
    let found = match s.kind {
        SessionKind::Cron | SessionKind::Hook | SessionKind::Node => Some("internal"),
        SessionKind::Group => e
            .channel
            .as_deref()
            .or_else(|| switchboard_types::key::group_channel_of(s.key.rest()))
            .or(e.effective_last_channel()),
        _ => e.effective_last_channel().or(e.channel.as_deref()),
    };
    found
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// The run states OpenClaw passes through to a row; anything else is left out.
const LIFECYCLE_STATUSES: [&str; 5] = ["running", "done", "failed", "killed", "timeout"];

/// A JSON number that is a finite value (a lifecycle time or cost).
fn finite(v: Option<&Value>) -> Option<Value> {
    v.filter(|n| n.as_f64().is_some_and(f64::is_finite)).cloned()
}

/// `{provider, accountId}` from the entry's `origin` (2026.5.28) or, in 2026.9.6 entries,
/// `delivery.origin`, when either is a string: the spec's row. The owner's row has the
/// whole block (`add_owner_fields`).
fn origin_of(e: &SessionEntry) -> Option<Value> {
    let origin = e.origin()?;
    let mut out = Map::new();
    for name in ["provider", "accountId"] {
        if let Some(Value::String(v)) = origin.get(name) {
            out.insert(name.into(), Value::String(v.clone()));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The name OpenClaw shows for a session: the entry's display name, else its label, else
/// the label of where it came from (`origin.label`), else for a group or channel key
/// `<channel>:<id>` (`discord:group:g-42` -> `discord:g-42`), else for an entry with a
/// recorded channel `<channel>:g-<key with ':' as '-'>` (what
/// 2026.5.28 showed for `telegram` sessions: `telegram:g-agent-main-s2`).
pub fn display_name(s: &StoredSession) -> Option<String> {
    let e = &s.entry;
    let named = |v: &Option<String>| v.as_deref().map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
    if let Some(n) = named(&e.display_name)
        .or_else(|| named(&e.label))
        .or_else(|| e.origin_label().map(|l| l.trim().to_string()))
    {
        return Some(n);
    }
    let rest = s.key.rest();
    if let Some(channel) = switchboard_types::key::group_channel_of(rest) {
        let id = rest.splitn(3, ':').nth(2).unwrap_or_default();
        return Some(format!("{channel}:{id}"));
    }
    let channel = e.channel.as_deref().map(str::trim).filter(|c| !c.is_empty())?;
    Some(format!("{channel}:g-{}", s.key.as_str().replace(':', "-")))
}

fn put<T: Into<Value>>(row: &mut Map<String, Value>, name: &str, v: Option<T>) {
    if let Some(v) = v {
        row.insert(name.to_string(), v.into());
    }
}

pub fn build(shared: &Context, s: &StoredSession) -> Map<String, Value> {
    let scheme = shared.store().scheme();
    let e = &s.entry;
    // Not pre-sized: sized for OpenClaw's ~40 fields, the rows of our own small entries
    // (about 12 fields) were 14 % slower to list (`cargo bench --bench gateway`).
    let mut row = Map::new();
    row.insert("key".into(), Value::String(scheme.display(&s.key)));
    row.insert("agentId".into(), Value::String(s.agent_id.clone()));
    row.insert("kind".into(), Value::String(s.kind.as_str().into()));
    row.insert("channel".into(), Value::String(channel_of(s)));
    if let Some(origin) = origin_of(e) {
        row.insert("origin".into(), origin);
    }
    put(&mut row, "label", e.label.clone());
    put(&mut row, "displayName", display_name(s));
    put(&mut row, "spawnedBy", e.spawned_by.clone());
    // A spawned child names its parent in `spawnedBy` only (older entries): OpenClaw shows
    // that as `parentSessionKey` too.
    put(
        &mut row,
        "parentSessionKey",
        e.parent_session_key.clone().or_else(|| e.spawned_by.clone()),
    );
    row.insert("updatedAt".into(), json!(e.updated_at));
    row.insert("sessionId".into(), Value::String(e.session_id.clone()));
    put(&mut row, "model", e.model.clone());
    put(&mut row, "contextTokens", e.context_tokens);
    put(&mut row, "totalTokens", e.total_tokens);
    put(&mut row, "estimatedCostUsd", finite(e.extra.get("estimatedCostUsd")));
    if let Some(Value::String(status)) = e.extra.get("status")
        && LIFECYCLE_STATUSES.contains(&status.as_str())
    {
        row.insert("status".into(), Value::String(status.clone()));
    }
    for name in ["startedAt", "endedAt", "runtimeMs"] {
        put(&mut row, name, finite(e.extra.get(name)));
    }
    put(&mut row, "thinkingLevel", e.thinking_level.clone());
    put(&mut row, "verboseLevel", e.verbose_level.clone());
    put(&mut row, "systemSent", e.system_sent);
    put(&mut row, "abortedLastRun", e.aborted_last_run);
    put(&mut row, "sendPolicy", e.send_policy.clone());
    put(
        &mut row,
        "lastChannel",
        e.effective_last_channel().map(str::to_string),
    );
    put(
        &mut row,
        "lastTo",
        e.effective_last_to().map(str::to_string),
    );
    if let Some(dc) = &e.delivery_context
        && !dc.is_empty()
        && let Ok(v) = serde_json::to_value(dc)
    {
        row.insert("deliveryContext".into(), v);
    }
    row.insert(
        "transcriptPath".into(),
        Value::String(shared.transcript_path(&e.session_id)),
    );
    row
}

/// What the owner's view adds to the spec's row: what the entry records of where the session
/// came from and what its runs used, in OpenClaw's names, so nothing an import kept is hidden
/// from the owner: `origin` whole (the spec's row has only `{provider, accountId}`),
/// `createdAt`, `createdVia`, `chatType`, `spawnDepth`, `modelProvider`, `inputTokens`,
/// `outputTokens`, `lastRunId`. A field is present only when the entry has it.
pub fn add_owner_fields(row: &mut Map<String, Value>, e: &SessionEntry) {
    if let Some(origin) = e.origin() {
        row.insert("origin".into(), origin.clone());
    }
    put(row, "createdAt", e.created_at);
    put(row, "chatType", e.chat_type.clone());
    put(row, "spawnDepth", e.spawn_depth);
    put(row, "modelProvider", e.model_provider.clone());
    put(row, "inputTokens", e.input_tokens);
    put(row, "outputTokens", e.output_tokens);
    // The owner's narrower stop (`agentSendPolicy: deny`): the owner's rows show it.
    put(row, "agentSendPolicy", e.agent_send_policy.clone());
    // Kept in `extra` (the engine does not act on them), read as OpenClaw writes them.
    for name in ["createdVia", "lastRunId"] {
        if let Some(v @ Value::String(_)) = e.extra.get(name) {
            row.insert(name.into(), v.clone());
        }
    }
}
