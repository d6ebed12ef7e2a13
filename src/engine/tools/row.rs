//! One `sessions_list` row in the spec's shape, built from a stored session. A field is
//! present only when it is known; nothing is invented.

use serde_json::{Map, Value, json};

use crate::engine::Engine;
use crate::engine::session::key::SessionKind;
use crate::engine::storage::queries::StoredSession;

/// The spec's channel rule: groups report their recorded channel, direct chats their last
/// channel, cron/hook/node `internal`, anything else `unknown`.
pub fn channel_of(s: &StoredSession) -> String {
    let e = &s.entry;
    let found = match s.kind {
        SessionKind::Cron | SessionKind::Hook | SessionKind::Node => Some("internal"),
        SessionKind::Group => e
            .channel
            .as_deref()
            .or_else(|| crate::engine::session::key::group_channel_of(s.key.rest()))
            .or(e.effective_last_channel()),
        _ => e.effective_last_channel().or(e.channel.as_deref()),
    };
    found
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

fn put<T: Into<Value>>(row: &mut Map<String, Value>, name: &str, v: Option<T>) {
    if let Some(v) = v {
        row.insert(name.to_string(), v.into());
    }
}

pub fn build(engine: &Engine, s: &StoredSession) -> Map<String, Value> {
    let scheme = engine.store().scheme();
    let e = &s.entry;
    let mut row = Map::new();
    row.insert("key".into(), Value::String(scheme.display(&s.key)));
    row.insert("agentId".into(), Value::String(s.agent_id.clone()));
    row.insert("kind".into(), Value::String(s.kind.as_str().into()));
    row.insert("channel".into(), Value::String(channel_of(s)));
    put(&mut row, "label", e.label.clone());
    put(&mut row, "displayName", e.display_name.clone());
    put(&mut row, "spawnedBy", e.spawned_by.clone());
    put(&mut row, "parentSessionKey", e.parent_session_key.clone());
    row.insert("updatedAt".into(), json!(e.updated_at));
    row.insert("sessionId".into(), Value::String(e.session_id.clone()));
    put(&mut row, "model", e.model.clone());
    put(&mut row, "contextTokens", e.context_tokens);
    put(&mut row, "totalTokens", e.total_tokens);
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
        Value::String(engine.transcript_path(&e.session_id)),
    );
    row
}
