//! `sessions_list`: sessions visible to the requester, newest first, in the spec's row shape,
//! with a disclosure when visibility scoped the result; archived sessions only on request.

use serde_json::{Map, Value, json};

use super::params::Params;
use super::context::{ToolContext, ToolError};
use super::row;
use switchboard_types::config::Visibility;
use crate::context::Context;
use switchboard_types::key::{SessionKey, SessionKind};
use crate::session::openclaw_text::{is_silent_reply, preview};
use crate::session::sanitize::sanitize_history;
use switchboard_store::StoredSession;
use switchboard_store::notice::shown_message;
use switchboard_store::SessionScan;
use crate::session::store::now_ms;
use crate::session::visibility::{Action, Guard};

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;
pub const MAX_MESSAGE_LIMIT: i64 = 20;

pub async fn run(shared: &Context, params: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
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
    let archived = archived_filter(&p)?;
    let include_last_message = p.boolean("includeLastMessage")?.unwrap_or(false);

    let store = shared.store();
    let scheme = store.scheme();
    let guard = Guard::new(shared.config(), store, &ctx.requester, ctx.sandboxed).await?;
    let updated_since = active_minutes.map(since_minutes_ago);
    let narrow_to_tree =
        guard.restricted || matches!(guard.visibility, Visibility::SelfOnly | Visibility::Tree);
    let agent_only =
        !narrow_to_tree && (guard.visibility == Visibility::Agent || !guard.agent_to_agent.enabled);
    let scan = SessionScan {
        kinds: kinds.clone(),
        agent_id: agent_only.then(|| guard.requester_agent.clone()),
        tree_of: narrow_to_tree.then(|| ctx.requester.clone()),
        updated_since,
        by_name: false,
        // One row past the limit tells whether there are more (`hasMore`).
        wanted: Some(limit.saturating_add(1)),
    };
    // Archived sessions are dropped here, while rows stream, so they never use up the limit
    // and cost no extra query.
    let visible = |s: &StoredSession| {
        archived.keeps(s.entry.archived_at.is_some())
            && !s.key.is_unknown()
            && (!s.key.is_global() || scheme.global_scope)
            && guard.check(&s.key, &s.agent_id, Action::List).is_ok()
    };
    let mut rows: Vec<StoredSession> = Vec::with_capacity(limit.min(64));
    let wanted = limit.saturating_add(1);
    store.scan(&scan, |s| {
        if visible(&s) {
            rows.push(s);
        }
        rows.len() < wanted
    })
    .await?;
    if agent_only {
        // Children spawned under another agent belong to the requester's tree all the same.
        let tree_scan = SessionScan {
            tree_of: Some(ctx.requester.clone()),
            agent_id: None,
            wanted: None,
            ..scan.clone()
        };
        store.scan(&tree_scan, |s| {
            if visible(&s) && !rows.iter().any(|r| r.key == s.key) {
                rows.push(s);
            }
            true
        })
        .await?;
        rows.sort_by(|a, b| {
            b.updated_at()
                .cmp(&a.updated_at())
                .then_with(|| a.key.cmp(&b.key))
        });
    }
    let has_more = rows.len() > limit;
    rows.truncate(limit);

    let mut sessions = Vec::with_capacity(rows.len());
    // Every row's children in one read (a page of rows is one store call, not one per row).
    let keys: Vec<_> = rows.iter().map(|s| s.key.clone()).collect();
    let spawned = shared.store().children_of_each(&keys).await?;
    for (s, spawned) in rows.iter().zip(spawned) {
        let mut r = build_row(shared, s);
        r.insert("archived".into(), Value::Bool(s.entry.archived_at.is_some()));
        r.insert("pinned".into(), Value::Bool(is_pinned(s)));
        let children = child_sessions(shared, s, spawned);
        if !children.is_empty() {
            r.insert("childSessions".into(), json!(children));
        }
        if include_last_message && let Some(p) = last_message_preview(shared, s).await? {
            r.insert("lastMessagePreview".into(), Value::String(p));
        }
        if message_limit > 0 {
            // Tool results are left out of list output; sessions_history has them.
            let tail = store.tail(&s.entry.session_id, message_limit, false).await?;
            let messages = tail
                .into_iter()
                .filter_map(|t| shown_message(&t.line).map(|m| m.into_owned()))
                .collect();
            r.insert(
                "messages".into(),
                Value::Array(sanitize_history(messages).messages),
            );
        }
        sessions.push(Value::Object(r));
    }
    let mut result = json!({
        "count": sessions.len(),
        "hasMore": has_more,
        "limitApplied": limit,
        "sessions": sessions,
    });
    if guard.is_scoped() {
        result["visibility"] = json!({
            "mode": guard.visibility.as_str(),
            "scoped": true,
            "note": guard.scope_note(),
        });
    }
    Ok(result)
}

/// Which sessions the list keeps by their archived state: OpenClaw 2026.9.6's `archived`
/// (`true`: only archived ones, `"all"`: both), or our older `includeArchived: true`.
#[derive(Clone, Copy)]
enum ArchivedFilter {
    Unarchived,
    Only,
    Both,
}

impl ArchivedFilter {
    fn keeps(self, archived: bool) -> bool {
        match self {
            ArchivedFilter::Unarchived => !archived,
            ArchivedFilter::Only => archived,
            ArchivedFilter::Both => true,
        }
    }
}

fn archived_filter(p: &Params) -> Result<ArchivedFilter, ToolError> {
    let include = p.boolean("includeArchived")?.unwrap_or(false);
    let filter = match p.get("archived") {
        None | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(ArchivedFilter::Only),
        Some(Value::String(s)) if s == "all" => Some(ArchivedFilter::Both),
        Some(other) => {
            return Err(super::context::ToolInputError::Invalid(format!(
                "archived must be true, false or \"all\", got {other}"
            ))
            .into());
        }
    };
    Ok(filter.unwrap_or(if include {
        ArchivedFilter::Both
    } else {
        ArchivedFilter::Unarchived
    }))
}

/// OpenClaw's `pinned`: the entry says `pinned: true` or carries a `pinnedAt` time.
fn is_pinned(s: &StoredSession) -> bool {
    let extra = &s.entry.extra;
    extra.get("pinned").and_then(Value::as_bool) == Some(true)
        || extra.get("pinnedAt").is_some_and(|v| !v.is_null())
}

/// The parent's `childSessions` (display keys, sorted): the sessions whose `spawnedBy` is
/// this one, with any the entry itself lists.
fn child_sessions(shared: &Context, s: &StoredSession, spawned: Vec<SessionKey>) -> Vec<String> {
    let scheme = shared.store().scheme();
    let mut children: Vec<String> = spawned.iter().map(|k| scheme.display(k)).collect();
    if let Some(Value::Array(listed)) = s.entry.extra.get("childSessions") {
        children.extend(listed.iter().filter_map(Value::as_str).map(str::to_string));
    }
    children.sort();
    children.dedup();
    children
}

/// How far back the preview looks for a message that is not a silent reply.
const PREVIEW_LOOKBACK: usize = 20;

/// OpenClaw's `lastMessagePreview`: the newest message with text that is not a silent
/// reply, on one line and capped (`openclaw_text::preview`).
async fn last_message_preview(shared: &Context, s: &StoredSession) -> Result<Option<String>, ToolError> {
    let tail = shared
        .store()
        .tail(&s.entry.session_id, PREVIEW_LOOKBACK, false).await?;
    Ok(tail
        .iter()
        .rev()
        .filter_map(|t| shown_message(&t.line))
        .filter(|m| !is_silent_reply(m))
        .find_map(|m| preview(&m)))
}

/// The cutoff `minutes` ago, in ms. Saturating: `activeMinutes: 1e20` reaches back before
/// any session existed, which is what it asks for (OpenClaw sets no upper bound).
fn since_minutes_ago(minutes: i64) -> i64 {
    now_ms().saturating_sub(minutes.saturating_mul(60_000))
}

/// A row in the spec's shape, plus `archived: true` for an archived session (only such rows
/// carry the field, so the usual row is unchanged).
fn build_row(shared: &Context, s: &StoredSession) -> Map<String, Value> {
    let mut r = row::build(shared, s);
    if s.entry.archived_at.is_some() {
        r.insert("archived".into(), Value::Bool(true));
    }
    r
}

/// One session's row in the owner's view, from the session already read: the spec's
/// row plus what the owner's view adds (`row::add_owner_fields`: what the entry records and
/// OpenClaw's gateway rows show, which its clients read); agents' `sessions_list` rows stay
/// as the spec has them.
pub fn owner_entry(shared: &Context, s: &StoredSession) -> Value {
    let mut r = build_row(shared, s);
    row::add_owner_fields(&mut r, &s.entry);
    Value::Object(r)
}
