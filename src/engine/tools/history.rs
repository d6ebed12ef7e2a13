//! `sessions_history`: the tail of one session's transcript in the raw transcript format,
//! sanitised and capped (reference §4).

use serde_json::{Value, json};

use super::params::Params;
use super::resolve::resolve_reference;
use super::context::{ToolContext, ToolError};
use crate::engine::Engine;
use crate::engine::session::sanitize::sanitize_history;
use crate::engine::session::visibility::{Action, Guard};

pub const DEFAULT_LIMIT: i64 = 200;
pub const MAX_LIMIT: i64 = 1000;

pub fn run(engine: &Engine, params: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    let p = Params::new(params)?;
    let input = p.required_string("sessionKey")?;
    let limit = p.clamped("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)? as usize;
    let include_tools = p.boolean("includeTools")?.unwrap_or(false);

    let store = engine.store();
    let guard = Guard::new(engine.config(), store, &ctx.requester, ctx.sandboxed)?;
    let resolved = match resolve_reference(engine, ctx, &guard, input)? {
        Ok(r) => r,
        Err(result) => return Ok(result),
    };
    let display = store.scheme().display(&resolved.key);
    // A sandboxed caller must not learn whether a session outside its tree exists.
    if guard.restricted && !guard.in_tree(&resolved.key) {
        return Ok(json!({
            "status": "forbidden",
            "error": format!("Session not visible from this sandboxed agent session: {display}"),
            "sessionKey": display,
        }));
    }
    let Some(session) = store.get(&resolved.key)? else {
        return Ok(json!({
            "status": "error",
            "error": format!("No session found: {display}"),
            "sessionKey": display,
        }));
    };
    if let Err(denied) = guard.check(&session.key, &session.agent_id, Action::History) {
        return Ok(json!({ "status": "forbidden", "error": denied.0, "sessionKey": display }));
    }
    let rows = store.tail(&session.entry.session_id, limit, include_tools)?;
    let messages = rows
        .into_iter()
        .filter_map(|r| {
            let mut m = r.line.get("message")?.clone();
            // A message is an object; anything else (stored before import checked shapes)
            // is left out rather than handed to an agent as a bare value.
            m.as_object_mut()?.insert(
                "__openclaw".into(),
                json!({ "id": r.entry_id, "seq": r.seq }),
            );
            Some(m)
        })
        .collect();
    let h = sanitize_history(messages);
    Ok(json!({
        "sessionKey": display,
        "messages": h.messages,
        "truncated": h.truncated,
        "droppedMessages": h.dropped_messages,
        "contentTruncated": h.content_truncated,
        "contentRedacted": h.content_redacted,
        "bytes": h.bytes,
    }))
}
