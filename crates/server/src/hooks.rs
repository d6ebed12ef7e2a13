//! `POST /hooks/<name>` on the gateway's port: a message from a generic webhook
//! (`channels.webhook.<name>`), authenticated by `Authorization: Bearer <the hook's secret>`
//! (anything else 401, compared in constant time), its body bounded (`MAX_BODY`) and JSON
//! (`{"text", "conversation"?, "sender"?, "displayName"?, "idempotencyKey"?}`, else 400).
//! It is recorded in session `hook:<name>:<conversation>` (a new conversation id when none
//! is given, as the spec's key model says for hooks) exactly as `inject` records a message,
//! so the agent answers and its reply is delivered back through the hook's outbound URL.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use switchboard_protocol::token::same_token;

use crate::quiet::{Quiet, excerpt};
use switchboard_types::api::{ApiError, SendRequest, Sender, SessionsApi};

/// The largest body accepted (a chat message with room to spare).
pub const MAX_BODY: usize = 64 * 1024;

/// The longest conversation id: it becomes part of a session key.
const MAX_CONVERSATION: usize = 128;

/// The hooks the gateway accepts: name → secret. Debug never shows a secret.
#[derive(Clone, Default)]
pub struct Hooks {
    secrets: Arc<HashMap<String, String>>,
    /// Refusals are logged through a gate: anyone who reaches the port can set them off.
    refused: Arc<Quiet>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.secrets.keys()).finish()
    }
}

impl Hooks {
    pub fn new(hooks: HashMap<String, String>) -> Hooks {
        Hooks {
            secrets: Arc::new(hooks),
            refused: Arc::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Whether `authorization` is `Bearer <secret of name>`. An unknown name is refused the
    /// same way (which names exist is not told), after the same comparison.
    fn allows(&self, name: &str, authorization: Option<&str>) -> bool {
        let offered = authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or_default();
        match self.secrets.get(name) {
            Some(secret) => !offered.is_empty() && same_token(offered, secret),
            None => {
                let _ = same_token(offered, "no such hook, compared anyway");
                false
            }
        }
    }
}

/// A `POST /hooks/<name>` request whose head was read.
#[derive(Debug)]
pub struct HookRequest {
    pub name: String,
    pub authorization: Option<String>,
    pub content_length: Option<usize>,
    /// Body bytes read with the head.
    pub body_start: Vec<u8>,
}

/// What a hook's body holds.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HookMessage {
    text: String,
    #[serde(default)]
    conversation: Option<String>,
    #[serde(default)]
    sender: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

fn json_answer(status: &str, body: &serde_json::Value) -> String {
    let body = body.to_string();
    let mut extra = "";
    if status.starts_with("401") {
        extra = "WWW-Authenticate: Bearer\r\n";
    }
    format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Type: application/json; charset=utf-8\r\n\
Cache-Control: no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn error(status: &str, message: &str) -> String {
    json_answer(
        status,
        &serde_json::json!({ "ok": false, "error": message }),
    )
}

/// Whether `id` can be a conversation id (it goes into a session key).
fn conversation_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_CONVERSATION
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Answer one hook request (its body read here, bounded) and close the write side.
pub async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: HookRequest,
    hooks: &Hooks,
    api: &Arc<dyn SessionsApi>,
) -> std::io::Result<()> {
    let reply = handle(stream, request, hooks, api).await?;
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

async fn handle<S: AsyncRead + Unpin>(
    stream: &mut S,
    request: HookRequest,
    hooks: &Hooks,
    api: &Arc<dyn SessionsApi>,
) -> std::io::Result<String> {
    // Authentication first: nothing of an unauthenticated body is read or parsed.
    if !hooks.allows(&request.name, request.authorization.as_deref()) {
        if let Some(skipped) = hooks.refused.admit() {
            tracing::info!(
                hook = %excerpt(&request.name, 64),
                skipped,
                "webhook request refused: wrong or missing secret, or no such hook"
            );
        }
        return Ok(error(
            "401 Unauthorized",
            "send the hook's secret as \"Authorization: Bearer <secret>\"",
        ));
    }
    let Some(length) = request.content_length else {
        return Ok(error("411 Length Required", "a Content-Length is needed"));
    };
    if length > MAX_BODY {
        return Ok(error(
            "413 Content Too Large",
            &format!("the body is {length} bytes; at most {MAX_BODY}"),
        ));
    }
    let mut body = request.body_start;
    body.truncate(length);
    if body.len() < length {
        let mut rest = vec![0u8; length - body.len()];
        stream.read_exact(&mut rest).await?;
        body.extend_from_slice(&rest);
    }
    let message: HookMessage = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => {
            return Ok(error(
                "400 Bad Request",
                &format!(
                    "the body must be JSON {{\"text\": \"…\", \"conversation\"?, \"sender\"?, \
                     \"displayName\"?, \"idempotencyKey\"?}}: {e}"
                ),
            ));
        }
    };
    if message.text.trim().is_empty() {
        return Ok(error("400 Bad Request", "\"text\" is empty"));
    }
    let conversation = match message.conversation {
        Some(c) if conversation_ok(&c) => c,
        Some(_) => {
            return Ok(error(
                "400 Bad Request",
                &format!(
                    "\"conversation\" must be 1 to {MAX_CONVERSATION} of a-z, A-Z, 0-9, '-', \
                     '_', '.'"
                ),
            ));
        }
        None => uuid::Uuid::new_v4().to_string(),
    };
    let key = format!("hook:{}:{conversation}", request.name);
    let sent = api
        .send(SendRequest {
            key: key.clone(),
            text: message.text,
            from: Sender {
                channel: Some("webhook".to_string()),
                chat_type: Some("direct".to_string()),
                display_name: message.display_name.or(message.sender),
                // Where replies go: the hook itself (its outbound URL), by name.
                sender: Some(request.name.clone()),
                owner: false,
            },
            idempotency_key: message.idempotency_key,
        })
        .await;
    Ok(match sent {
        Ok(receipt) => json_answer(
            "202 Accepted",
            &serde_json::json!({
                "ok": true,
                "key": receipt.key,
                "conversation": conversation,
                "runId": receipt.run_id,
            }),
        ),
        Err(ApiError::BadInput(m)) => error("400 Bad Request", &m),
        Err(e) => {
            tracing::warn!(hook = %request.name, error = %e, "webhook message not recorded");
            error("503 Service Unavailable", &e.to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hooks_own_secret_as_a_bearer_token_is_allowed() {
        let hooks = Hooks::new(HashMap::from([(
            "ops".to_string(),
            "0123456789abcdef".to_string(),
        )]));
        assert!(hooks.allows("ops", Some("Bearer 0123456789abcdef")));
        assert!(!hooks.allows("ops", Some("Bearer 0123456789abcdeX")));
        assert!(!hooks.allows("ops", Some("0123456789abcdef")));
        assert!(!hooks.allows("ops", Some("Bearer ")));
        assert!(!hooks.allows("ops", None));
        assert!(!hooks.allows("other", Some("Bearer 0123456789abcdef")));
        assert_eq!(format!("{hooks:?}"), "[\"ops\"]", "no secret in Debug");
    }

    #[test]
    fn conversation_ids_are_bounded_and_plain() {
        assert!(conversation_ok("c-1_x.y"));
        assert!(!conversation_ok(""));
        assert!(!conversation_ok("a:b"));
        assert!(!conversation_ok(&"a".repeat(129)));
    }
}
