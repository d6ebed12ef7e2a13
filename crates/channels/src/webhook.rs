//! The generic webhook channel, outbound: each delivery is `POST`ed to the hook's URL as JSON,
//! signed `X-Switchboard-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`,
//! with an `Idempotency-Key` the receiver can drop repeats by. The inbound side
//! (`POST /hooks/<name>` on the gateway) is the server crate's.

use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::Sha256;
use switchboard_store::OutboxRow;

use crate::channel::{Channel, Dedup, SendError, Sent, class_of_status};

/// The header carrying the body's signature.
pub const SIGNATURE_HEADER: &str = "X-Switchboard-Signature";

/// The most of a receiver's answer read (its message id); the rest is ignored.
const MAX_ANSWER: usize = 64 * 1024;

/// The default time a receiver has to answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One configured webhook (`channels.webhook.<name>`).
pub struct Webhook {
    name: String,
    url: String,
    secret: String,
    http: reqwest::Client,
    timeout: Duration,
}

impl std::fmt::Debug for Webhook {
    // Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What a receiver is sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload<'a> {
    /// The delivery's id in the outbox (`switchboard deliveries`).
    pub id: i64,
    /// The same on every attempt of this delivery: drop repeats by it.
    pub idempotency_key: String,
    /// The hook's name.
    pub hook: &'a str,
    pub session_key: &'a str,
    /// `reply` | `announce` | `subagent_announce`.
    pub kind: &'a str,
    pub text: &'a str,
    pub thread_id: Option<&'a str>,
    pub run_id: Option<&'a str>,
    pub created_at: i64,
    pub attempt: u32,
}

/// The key a delivery is sent under, on every attempt.
pub fn idempotency_key(row: &OutboxRow) -> String {
    format!("switchboard-outbox-{}", row.id)
}

/// `sha256=<hex>` of `body` with `secret`: the signature header's value.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `header` is `body`'s signature with `secret` (constant time).
pub fn verify(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

impl Webhook {
    /// `http`: the client (the binary's, with its TLS set-up); each request is bounded by
    /// `timeout`.
    pub fn new(
        name: &str,
        url: &str,
        secret: &str,
        http: reqwest::Client,
        timeout: Duration,
    ) -> Webhook {
        Webhook {
            name: name.to_string(),
            url: url.to_string(),
            secret: secret.to_string(),
            http,
            timeout,
        }
    }

    pub fn body(&self, row: &OutboxRow) -> Vec<u8> {
        let payload = Payload {
            id: row.id,
            idempotency_key: idempotency_key(row),
            hook: &self.name,
            session_key: &row.session_key,
            kind: &row.kind,
            text: &row.text,
            thread_id: row.thread_id.as_deref(),
            run_id: row.run_id.as_deref(),
            created_at: row.created_at,
            attempt: row.attempt,
        };
        // Strings and numbers always serialise.
        serde_json::to_vec(&payload).unwrap_or_default()
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: backoff then decides).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    wait_of(value, std::time::SystemTime::now())
}

/// A `Retry-After` value (RFC 9110): seconds, or an HTTP date (the wait until then; none
/// once it has passed) as of `now`.
fn wait_of(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    match value.parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .ok(),
    }
}

/// The receiver's id for the message: `messageId` (string or number) of a JSON answer.
fn message_id_of(answer: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(answer).ok()?;
    match value.get("messageId")? {
        serde_json::Value::String(s) if !s.is_empty() && s.len() <= 256 => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Up to `MAX_ANSWER` bytes of a response's body.
pub(crate) async fn bounded_body(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ANSWER.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ANSWER {
            break;
        }
    }
    body
}

/// A short, printable reason from a receiver's answer.
pub(crate) fn reason_of(status: reqwest::StatusCode, body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    match text.trim() {
        "" => format!("HTTP {status}"),
        t => format!("HTTP {status}: {t}"),
    }
}

#[async_trait]
impl Channel for Webhook {
    fn kind(&self) -> &str {
        "webhook"
    }

    fn instance(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn dedup(&self) -> Dedup {
        Dedup::IdempotencyKey
    }

    async fn send(&self, row: &OutboxRow) -> Result<Sent, SendError> {
        let body = self.body(row);
        let key = idempotency_key(row);
        let request = self
            .http
            .post(&self.url)
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(&self.secret, &body))
            .header("Idempotency-Key", &key)
            .body(body);
        let response = request.send().await.map_err(|e| SendError::Retry {
            after: None,
            // Without the URL's query, which may hold a token.
            reason: format!("cannot reach the webhook: {}", e.without_url()),
        })?;
        let status = response.status();
        let wait = retry_after(response.headers());
        let answer = tokio::time::timeout(self.timeout, bounded_body(response))
            .await
            .unwrap_or_default();
        if status.is_success() {
            return Ok(Sent {
                message_id: message_id_of(&answer).unwrap_or(key),
            });
        }
        Err(class_of_status(
            status.as_u16(),
            wait,
            reason_of(status, &answer),
        ))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(wait_of("120", now), Some(Duration::from_secs(120)));
        // 2015-10-21 07:28:00 + 90 s.
        assert_eq!(
            wait_of("Wed, 21 Oct 2015 07:29:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            wait_of("Wed, 21 Oct 2015 07:27:00 GMT", now),
            None,
            "passed"
        );
        assert_eq!(wait_of("soon", now), None);
        assert_eq!(wait_of("-5", now), None);
    }

    use super::*;

    #[test]
    fn a_signature_verifies_and_a_changed_body_or_secret_does_not() {
        let sig = signature("s3cret", b"{\"a\":1}");
        assert!(sig.starts_with("sha256="));
        assert_eq!(sig.len(), "sha256=".len() + 64);
        assert!(verify("s3cret", b"{\"a\":1}", &sig));
        assert!(!verify("s3cret", b"{\"a\":2}", &sig));
        assert!(!verify("other", b"{\"a\":1}", &sig));
        assert!(!verify("s3cret", b"{\"a\":1}", "sha256=zz"));
    }

    #[test]
    fn a_known_vector() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_receivers_message_id_is_read_when_given() {
        assert_eq!(message_id_of(br#"{"messageId":"abc"}"#), Some("abc".into()));
        assert_eq!(message_id_of(br#"{"messageId":42}"#), Some("42".into()));
        assert_eq!(message_id_of(b"ok"), None);
    }

    #[test]
    fn statuses_are_classed() {
        let r = |s| class_of_status(s, None, String::new());
        assert!(matches!(r(429), SendError::Retry { .. }));
        assert!(matches!(r(503), SendError::Retry { .. }));
        assert!(matches!(r(401), SendError::Revoked { .. }));
        assert!(matches!(r(403), SendError::Revoked { .. }));
        assert!(matches!(r(400), SendError::Fatal { .. }));
    }
}
