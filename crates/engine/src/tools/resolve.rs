//! Turning what a caller wrote for a session (`main`, `current`, a key, a sessionId) into a
//! canonical key, with OpenClaw's error wording when it cannot (reference §2.3).

use serde_json::Value;

use super::context::{ToolContext, failure};
use crate::context::Context;
use switchboard_types::key::{KeyError, KeyInput, SessionKey, classify_input, looks_like_session_id};
use switchboard_store::StoreError;
use crate::session::visibility::Guard;

/// A resolved session reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub key: SessionKey,
    /// The caller gave a sessionId, not a key.
    pub via_session_id: bool,
}

/// Resolve `input`. The outer error is a storage failure; the inner `Err` is the tool result
/// to hand back (`status: "error"` or `"forbidden"`).
pub async fn resolve_reference(
    shared: &Context,
    ctx: &ToolContext,
    guard: &Guard,
    input: &str,
) -> Result<Result<Resolved, Value>, StoreError> {
    let scheme = shared.store().scheme();
    let requester_agent = guard.requester_agent.as_str();
    let not_found = || {
        if guard.restricted {
            failure(
                "forbidden",
                format!(
                    "Session not visible from this sandboxed agent session: {}",
                    input.trim()
                ),
            )
        } else {
            failure(
                "error",
                format!(
                    "Session not found: {} (use the full sessionKey from sessions_list)",
                    input.trim()
                ),
            )
        }
    };
    match classify_input(input) {
        KeyInput::Key(s) if s == "current" => Ok(Ok(Resolved {
            key: ctx.requester.clone(),
            via_session_id: false,
        })),
        KeyInput::Key(s) => match scheme.canonicalize(&s, requester_agent) {
            Ok(key) => Ok(Ok(Resolved {
                key,
                via_session_id: false,
            })),
            Err(e @ KeyError::Forbidden { .. }) => Ok(Err(failure("error", e.to_string()))),
            Err(_) => Ok(Err(failure(
                "error",
                format!(
                    "Invalid session key: {} (use the full sessionKey from sessions_list)",
                    input.trim()
                ),
            ))),
        },
        KeyInput::Candidate(s) => {
            // A look-alike key is refused with the reason, not reported as merely missing.
            if let Err(e @ KeyError::Forbidden { .. }) = scheme.canonicalize(&s, requester_agent) {
                return Ok(Err(failure("error", e.to_string())));
            }
            // First as a key (a bare name such as `s2` is a key of the default agent) …
            if let Ok(key) = scheme.canonicalize(&s, requester_agent)
                && shared.store().get(&key).await?.is_some()
            {
                return Ok(Ok(Resolved {
                    key,
                    via_session_id: false,
                }));
            }
            // … then as a sessionId; only full UUIDs can be ids (short prefixes are refused).
            if looks_like_session_id(&s) {
                let keys = shared.store().keys_by_session_id(&s).await?;
                if let Some(key) = keys.into_iter().next() {
                    if guard.restricted && !guard.in_tree(&key) {
                        return Ok(Err(not_found()));
                    }
                    return Ok(Ok(Resolved {
                        key,
                        via_session_id: true,
                    }));
                }
            }
            Ok(Err(not_found()))
        }
    }
}
