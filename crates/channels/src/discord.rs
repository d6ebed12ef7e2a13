//! The Discord channel, outbound (REST, https://discord.com/developers/docs/resources/message):
//! a delivery is posted to its channel (a thread is a channel too) as `Bot`-authorised
//! `POST /channels/<id>/messages`, in parts of at most 2,000 characters, with no mention
//! parsed (`allowed_mentions: {parse: []}`: an agent's `@everyone` pings nobody) and a
//! `nonce` per part with `enforce_nonce`, so Discord drops a repeat of the same part sent
//! within minutes (a crash between its accepting and our recording). 429 is waited out for
//! Discord's `retry_after` (JSON seconds, or the header); 401 stops the channel (the token);
//! 403 and 404 fail the message (that channel refuses or is gone), 5xx retries. The inbound
//! side (the gateway WebSocket) is not built yet.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_store::OutboxRow;

use crate::channel::{Channel, Dedup, SendError, Sent, send_parts};
use crate::webhook::{bounded_body, reason_of, retry_after};

/// Discord's API, version 10.
pub const DEFAULT_API_ROOT: &str = "https://discord.com/api/v10";

/// Discord's limit for one message's content, in characters.
pub const MAX_MESSAGE: usize = 2000;

/// The longest wait a 429 is taken at.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// One bot on Discord (`channels.discord`).
pub struct Discord {
    token: String,
    root: String,
    http: reqwest::Client,
    timeout: Duration,
}

impl std::fmt::Debug for Discord {
    // Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discord")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Discord {
    pub fn new(token: &str, api_root: &str, http: reqwest::Client, timeout: Duration) -> Discord {
        Discord {
            token: token.trim().to_string(),
            root: api_root.trim().trim_end_matches('/').to_string(),
            http,
            timeout,
        }
    }

    /// Post one part; the message's id.
    async fn post(&self, channel: &str, content: &str, nonce: &str) -> Result<String, SendError> {
        let body = json!({
            "content": content,
            "allowed_mentions": {"parse": []},
            "nonce": nonce,
            "enforce_nonce": true,
        });
        let response = self
            .http
            .post(format!("{}/channels/{channel}/messages", self.root))
            .timeout(self.timeout)
            .header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.token),
            )
            .json(&body)
            .send()
            .await
            .map_err(|e| SendError::Retry {
                after: None,
                reason: format!("cannot reach Discord: {}", e.without_url()),
            })?;
        let status = response.status();
        let header_wait = retry_after(response.headers());
        let answer = tokio::time::timeout(self.timeout, bounded_body(response))
            .await
            .unwrap_or_default();
        let json: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        if status.is_success() {
            return json
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| SendError::Retry {
                    after: None,
                    reason: "Discord answered without the message's id".into(),
                });
        }
        let reason = reason_of(status, &answer);
        Err(match status.as_u16() {
            429 => SendError::Retry {
                after: json
                    .get("retry_after")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER))
                    .or(header_wait),
                reason,
            },
            401 => SendError::Revoked { reason },
            500..=599 | 408 => SendError::Retry {
                after: header_wait,
                reason,
            },
            // 403 (no permission in that channel), 404 (no such channel), 400: this message.
            _ => SendError::Fatal { reason },
        })
    }
}

/// The channel a route names: `channel:<id>`, `group:<id>` or `<id>` (a snowflake).
fn channel_of(to: &str) -> Option<&str> {
    let id = to
        .strip_prefix("channel:")
        .or_else(|| to.strip_prefix("group:"))
        .unwrap_or(to);
    (!id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

#[async_trait]
impl Channel for Discord {
    fn kind(&self) -> &str {
        "discord"
    }

    fn dedup(&self) -> Dedup {
        Dedup::IdempotencyKey
    }

    async fn send(&self, row: &OutboxRow) -> Result<Sent, SendError> {
        // A thread is a channel of its own.
        let target = row.thread_id.as_deref().unwrap_or(&row.to);
        let Some(channel) = channel_of(target) else {
            return Err(SendError::Fatal {
                reason: format!("{target:?} is not a Discord channel id"),
            });
        };
        let parts = switchboard_types::split::split(&row.text, MAX_MESSAGE, |_| 1);
        send_parts(row, &parts, |i, part| {
            // At most 25 characters; the same on every attempt of this part.
            let nonce = format!("{}-{i}", row.id);
            async move { self.post(channel, &part, &nonce).await }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_discord_channels() {
        assert_eq!(
            channel_of("channel:123456789012345678"),
            Some("123456789012345678")
        );
        assert_eq!(channel_of("group:42"), Some("42"));
        assert_eq!(channel_of("42"), Some("42"));
        assert_eq!(channel_of("channel:../../users/@me"), None);
        assert_eq!(channel_of(""), None);
    }
}
