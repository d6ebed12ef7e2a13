//! `sessions_history`: the tail of one session's transcript in the raw transcript format,
//! sanitised and capped (reference §4).

use serde_json::{Value, json};

use super::params::Params;
use super::resolve::resolve_reference;
use super::context::{ToolContext, ToolError};
use crate::context::Context;
use switchboard_store::notice::shown_message;
use crate::session::openclaw_text::{is_silent_reply, strip_user_envelope};
use crate::session::sanitize::{SanitizedHistory, sanitize_history};
use crate::session::visibility::{Action, Guard};

pub const DEFAULT_LIMIT: i64 = 200;
pub const MAX_LIMIT: i64 = 1000;

pub async fn run(shared: &Context, params: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    let p = Params::new(params)?;
    let input = p.required_string("sessionKey")?;
    let limit = p.clamped("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)? as usize;
    let include_tools = p.boolean("includeTools")?.unwrap_or(false);
    // Ours: OpenClaw always hides silent replies; an agent that needs to see that a target
    // chose silence can ask for them.
    let include_silent = p.boolean("includeSilent")?.unwrap_or(false);

    let store = shared.store();
    let guard = Guard::new(shared.config(), store, &ctx.requester, ctx.sandboxed).await?;
    let resolved = match resolve_reference(shared, ctx, &guard, input).await? {
        Ok(r) => r,
        Err(result) => return Ok(result),
    };
    // The key `main` resolved to (OpenClaw echoes `main`; the key says which session it was).
    let display = store.scheme().display(&resolved.key);
    // A sandboxed caller must not learn whether a session outside its tree exists.
    if guard.restricted && !guard.in_tree(&resolved.key) {
        return Ok(json!({
            "status": "forbidden",
            "error": format!("Session not visible from this sandboxed agent session: {display}"),
            "sessionKey": display,
        }));
    }
    let Some(session) = store.get(&resolved.key).await? else {
        if input.trim() == "main" {
            // OpenClaw answers an agent without a main session with an empty history.
            return Ok(history_result("main", sanitize_history(Vec::new())));
        }
        return Ok(json!({
            "status": "error",
            "error": format!("No session found: {display}"),
            "sessionKey": display,
        }));
    };
    if let Err(denied) = guard.check(&session.key, &session.agent_id, Action::History) {
        return Ok(json!({ "status": "forbidden", "error": denied.0, "sessionKey": display }));
    }
    let messages = visible_tail(shared, &session.entry.session_id, limit, include_tools, include_silent).await?;
    Ok(history_result(&display, sanitize_history(messages)))
}

fn history_result(display: &str, h: SanitizedHistory) -> Value {
    json!({
        "sessionKey": display,
        "messages": h.messages,
        "truncated": h.truncated,
        "droppedMessages": h.dropped_messages,
        "contentTruncated": h.content_truncated,
        "contentRedacted": h.content_redacted,
        "bytes": h.bytes,
    })
}

/// Rows read per step past `limit` grow this far at most: a transcript of silent replies
/// only is read whole, but in bounded steps.
const MAX_WINDOW: usize = 1 << 20;

/// The last `limit` messages an agent sees: user text without its timestamp envelope and,
/// unless `include_silent`, without silent replies, which do not count against `limit`
/// (OpenClaw filters before it keeps the last N).
async fn visible_tail(
    shared: &Context,
    session_id: &str,
    limit: usize,
    include_tools: bool,
    include_silent: bool,
) -> Result<Vec<Value>, ToolError> {
    let mut window = limit;
    loop {
        let rows = shared.store().tail(session_id, window, include_tools).await?;
        let exhausted = rows.len() < window || window >= MAX_WINDOW;
        let mut messages: Vec<Value> = rows
            .into_iter()
            .filter_map(|r| {
                // A message line's message, or an OpenClaw notice as its history shows it.
                let mut m = shown_message(&r.line)?.into_owned();
                if !include_silent && is_silent_reply(&m) {
                    return None;
                }
                strip_user_envelope(&mut m);
                // A message is an object; anything else (stored before import checked
                // shapes) is left out rather than handed to an agent as a bare value.
                m.as_object_mut()?.insert(
                    "__openclaw".into(),
                    json!({ "id": r.entry_id, "seq": r.seq }),
                );
                Some(m)
            })
            .collect();
        if messages.len() >= limit || exhausted {
            let skip = messages.len().saturating_sub(limit);
            messages.drain(..skip);
            return Ok(messages);
        }
        window = window.saturating_mul(2).min(MAX_WINDOW);
    }
}
