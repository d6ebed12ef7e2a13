//! `POST /hooks/<name>` on the gateway's port: a message from a generic webhook
//! (`channels.webhook.<name>`), authenticated by `Authorization: Bearer <the hook's secret>`
//! (anything else 401, compared in constant time), its body bounded (`MAX_BODY`) and JSON
//! (`{"text", "conversation"?, "sender"?, "displayName"?, "idempotencyKey"?}`, else 400).
//! It is recorded in session `hook:<name>:<conversation>` (a new conversation id when none
//! is given, as the spec's key model says for hooks) exactly as `inject` records a message,
//! so the agent answers and its reply is delivered back through the hook's outbound URL.
//!
//! Beside them, the routes of channels whose service pushes updates (`Pushed`: Telegram's
//! webhook at its `webhookPath`), authenticated by a header carrying their shared secret.

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

/// The largest body a pushed route accepts (a Telegram update carries one message of at
/// most 4,096 characters, with its entities and the sender's names).
pub const MAX_PUSHED_BODY: usize = 256 * 1024;

/// Why a pushed body was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The body is not what the service sends: 400, not sent again.
    #[error("{0}")]
    Body(String),
    /// It could not be recorded now: 503, so the service sends it again.
    #[error("{0}")]
    Busy(String),
}

/// A channel whose service pushes its updates to the gateway (Telegram's webhook).
#[async_trait::async_trait]
pub trait Pushed: Send + Sync {
    /// The request header (lower case) whose value must be the secret.
    fn secret_header(&self) -> &str;
    fn secret(&self) -> &str;
    /// Take one body (its secret checked, its size bounded): recorded before `Ok`, so a
    /// failure answers 503 and the service sends it again.
    async fn take(&self, body: &[u8]) -> Result<(), PushError>;
}

/// The hooks the gateway accepts: name → secret, and the pushed routes by path. Debug never
/// shows a secret.
#[derive(Clone, Default)]
pub struct Hooks {
    secrets: Arc<HashMap<String, String>>,
    pushed: Arc<HashMap<String, Arc<dyn Pushed>>>,
    /// Refusals are logged through a gate: anyone who reaches the port can set them off.
    refused: Arc<Quiet>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.secrets.keys())
            .entries(self.pushed.keys())
            .finish()
    }
}

impl Hooks {
    pub fn new(hooks: HashMap<String, String>) -> Hooks {
        Hooks {
            secrets: Arc::new(hooks),
            pushed: Arc::default(),
            refused: Arc::default(),
        }
    }

    /// These hooks, and `routes` (path → channel) for pushed updates.
    pub fn with_pushed(mut self, routes: Vec<(String, Arc<dyn Pushed>)>) -> Hooks {
        let mut pushed = (*self.pushed).clone();
        pushed.extend(routes);
        self.pushed = Arc::new(pushed);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.pushed.is_empty()
    }

    /// Whether `path` is a pushed route's.
    pub fn pushes_to(&self, path: &str) -> bool {
        self.pushed.contains_key(path)
    }

    /// The header carrying the secret of `path`'s pushed route.
    pub fn secret_header_of(&self, path: &str) -> Option<String> {
        self.pushed.get(path).map(|r| r.secret_header().to_string())
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

/// A `POST /hooks/<name>` (or pushed route's) request whose head was read.
#[derive(Debug)]
pub struct HookRequest {
    /// The path, without its query.
    pub path: String,
    pub authorization: Option<String>,
    /// A pushed route's secret header, when the route names one and the request has it.
    pub secret: Option<String>,
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

/// The body of `request`, read up to its `Content-Length` of at most `max` bytes; else the
/// answer saying why not.
async fn body<S: AsyncRead + Unpin>(
    stream: &mut S,
    request: HookRequest,
    max: usize,
) -> std::io::Result<Result<Vec<u8>, String>> {
    let Some(length) = request.content_length else {
        return Ok(Err(error(
            "411 Length Required",
            "a Content-Length is needed",
        )));
    };
    if length > max {
        return Ok(Err(error(
            "413 Content Too Large",
            &format!("the body is {length} bytes; at most {max}"),
        )));
    }
    let mut body = request.body_start;
    body.truncate(length);
    if body.len() < length {
        let mut rest = vec![0u8; length - body.len()];
        stream.read_exact(&mut rest).await?;
        body.extend_from_slice(&rest);
    }
    Ok(Ok(body))
}

/// A pushed route's request: its secret, then its body, taken by the channel.
async fn push<S: AsyncRead + Unpin>(
    stream: &mut S,
    request: HookRequest,
    route: &Arc<dyn Pushed>,
    hooks: &Hooks,
) -> std::io::Result<String> {
    let offered = request.secret.as_deref().unwrap_or_default();
    if offered.is_empty() || !same_token(offered, route.secret()) {
        if let Some(skipped) = hooks.refused.admit() {
            tracing::info!(
                path = %excerpt(&request.path, 64),
                skipped,
                "pushed update refused: wrong or missing secret"
            );
        }
        return Ok(error("401 Unauthorized", "wrong or missing secret"));
    }
    let body = match body(stream, request, MAX_PUSHED_BODY).await? {
        Ok(body) => body,
        Err(answer) => return Ok(answer),
    };
    Ok(match route.take(&body).await {
        Ok(()) => json_answer("200 OK", &serde_json::json!({ "ok": true })),
        Err(PushError::Body(m)) => error("400 Bad Request", &m),
        Err(PushError::Busy(m)) => error("503 Service Unavailable", &m),
    })
}

async fn handle<S: AsyncRead + Unpin>(
    stream: &mut S,
    request: HookRequest,
    hooks: &Hooks,
    api: &Arc<dyn SessionsApi>,
) -> std::io::Result<String> {
    if let Some(route) = hooks.pushed.get(&request.path).cloned() {
        return push(stream, request, &route, hooks).await;
    }
    let Some(name) = request.path.strip_prefix("/hooks/").map(str::to_string) else {
        return Ok(error("404 Not Found", "no such path"));
    };
    // Authentication first: nothing of an unauthenticated body is read or parsed.
    if !hooks.allows(&name, request.authorization.as_deref()) {
        if let Some(skipped) = hooks.refused.admit() {
            tracing::info!(
                hook = %excerpt(&name, 64),
                skipped,
                "webhook request refused: wrong or missing secret, or no such hook"
            );
        }
        return Ok(error(
            "401 Unauthorized",
            "send the hook's secret as \"Authorization: Bearer <secret>\"",
        ));
    }
    let body = match body(stream, request, MAX_BODY).await? {
        Ok(body) => body,
        Err(answer) => return Ok(answer),
    };
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
    let key = format!("hook:{name}:{conversation}");
    let sent = api
        .send(SendRequest {
            key: key.clone(),
            text: message.text,
            from: Sender {
                channel: Some("webhook".to_string()),
                chat_type: Some("direct".to_string()),
                display_name: message.display_name.or(message.sender),
                // Where replies go: the hook itself (its outbound URL), by name.
                sender: Some(name.clone()),
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
            tracing::warn!(hook = %name, error = %e, "webhook message not recorded");
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
