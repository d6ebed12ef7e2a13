//! `sessions_list`: sessions visible to the requester, newest first, in the spec's row shape,
//! with a disclosure when visibility scoped the result; archived sessions only on request.

use serde_json::{Map, Value, json};

use super::params::Params;
use super::context::{ToolContext, ToolError};
use super::row;
use crate::config::Visibility;
use crate::engine::Engine;
use crate::engine::session::key::SessionKind;
use crate::engine::session::sanitize::sanitize_history;
use crate::engine::storage::queries::{SessionScan, StoredSession};
use crate::engine::session::store::now_ms;
use crate::engine::session::visibility::{Action, Guard};

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;
pub const MAX_MESSAGE_LIMIT: i64 = 20;

pub fn run(engine: &Engine, params: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    let p = Params::new(params)?;
    let kinds: Option<Vec<SessionKind>> = p.strings("kinds")?.and_then(|names| {
        let mut kinds: Vec<SessionKind> =
            names.iter().filter_map(|n| SessionKind::parse(n)).collect();
        kinds.sort_by_key(|k| k.as_str());
        kinds.dedup();
        // Only unknown names: no filter, as OpenClaw does.
        (!kinds.is_empty()).then_some(kinds)
    });
    let limit = p.clamped("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)? as usize;
    let active_minutes = p
        .number("activeMinutes")?
        .map(|m| m.floor().max(1.0) as i64);
    let message_limit = p.clamped("messageLimit", 0, 0, MAX_MESSAGE_LIMIT)? as usize;
    let include_archived = p.boolean("includeArchived")?.unwrap_or(false);

    let store = engine.store();
    let scheme = store.scheme();
    let guard = Guard::new(engine.config(), store, &ctx.requester, ctx.sandboxed)?;
    let updated_since = active_minutes.map(since_minutes_ago);
    let narrow_to_tree =
        guard.restricted || matches!(guard.visibility, Visibility::SelfOnly | Visibility::Tree);
    let agent_only =
        !narrow_to_tree && (guard.visibility == Visibility::Agent || !guard.a2a.enabled);
    let scan = SessionScan {
        kinds: kinds.clone(),
        agent_id: agent_only.then(|| guard.requester_agent.clone()),
        tree_of: narrow_to_tree.then(|| ctx.requester.clone()),
        updated_since,
        by_name: false,
    };
    // Archived sessions are dropped here, while rows stream, so they never use up the limit
    // and cost no extra query.
    let visible = |s: &StoredSession| {
        (include_archived || s.entry.archived_at.is_none())
            && !s.key.is_unknown()
            && (!s.key.is_global() || scheme.global_scope)
            && guard.check(&s.key, &s.agent_id, Action::List).is_ok()
    };
    let mut rows: Vec<StoredSession> = Vec::with_capacity(limit.min(64));
    store.scan(&scan, |s| {
        if visible(&s) {
            rows.push(s);
        }
        rows.len() < limit
    })?;
    if agent_only {
        // Children spawned under another agent belong to the requester's tree all the same.
        let tree_scan = SessionScan {
            tree_of: Some(ctx.requester.clone()),
            agent_id: None,
            ..scan.clone()
        };
        store.scan(&tree_scan, |s| {
            if visible(&s) && !rows.iter().any(|r| r.key == s.key) {
                rows.push(s);
            }
            true
        })?;
        rows.sort_by(|a, b| {
            b.updated_at()
                .cmp(&a.updated_at())
                .then_with(|| a.key.cmp(&b.key))
        });
        rows.truncate(limit);
    }

    let mut sessions = Vec::with_capacity(rows.len());
    for s in &rows {
        let mut r = build_row(engine, s);
        if message_limit > 0 {
            // Tool results are left out of list output; sessions_history has them.
            let tail = store.tail(&s.entry.session_id, message_limit, false)?;
            let messages = tail
                .into_iter()
                .filter_map(|t| t.line.get("message").cloned())
                .collect();
            r.insert(
                "messages".into(),
                Value::Array(sanitize_history(messages).messages),
            );
        }
        sessions.push(Value::Object(r));
    }
    let mut result = json!({ "count": sessions.len(), "sessions": sessions });
    if guard.is_scoped() {
        result["visibility"] = json!({
            "mode": guard.visibility.as_str(),
            "scoped": true,
            "note": guard.scope_note(),
        });
    }
    Ok(result)
}

/// The cutoff `minutes` ago, in ms. Saturating: `activeMinutes: 1e20` reaches back before
/// any session existed, which is what it asks for (OpenClaw sets no upper bound).
fn since_minutes_ago(minutes: i64) -> i64 {
    now_ms().saturating_sub(minutes.saturating_mul(60_000))
}

/// A row in the spec's shape, plus `archived: true` for an archived session (only such rows
/// carry the field, so the usual row is unchanged).
fn build_row(engine: &Engine, s: &StoredSession) -> Map<String, Value> {
    let mut r = row::build(engine, s);
    if s.entry.archived_at.is_some() {
        r.insert("archived".into(), Value::Bool(true));
    }
    r
}

/// One session's row in the owner's view.
pub fn owner_row(
    engine: &Engine,
    key: &crate::engine::session::key::SessionKey,
) -> Result<Option<Value>, crate::engine::storage::StorageError> {
    Ok(engine.store().get(key)?.map(|s| owner_entry(engine, &s)))
}

/// `owner_row` of a session already read (a page's rows: no second read each).
pub fn owner_entry(engine: &Engine, s: &StoredSession) -> Value {
    Value::Object(build_row(engine, s))
}
