//! The Discord channel, outbound (REST, https://discord.com/developers/docs/resources/message):
//! a delivery is posted to its channel (a thread is a channel too) as `Bot`-authorised
//! `POST /channels/<id>/messages`, in parts of at most 2,000 characters, with no mention
//! parsed (`allowed_mentions: {parse: []}`: an agent's `@everyone` pings nobody) and a
//! `nonce` per part with `enforce_nonce`, so Discord drops a repeat of the same part sent
//! within minutes (a crash between its accepting and our recording). 429 is waited out for
//! Discord's `retry_after` (JSON seconds, or the header); 401 stops the channel (the token);
//! 403 and 404 fail the message (that channel refuses or is gone), 5xx retries. Each
//! answer's rate-limit headers feed the bot's buckets (`buckets.rs`): a send to a spent
//! bucket waits for its reset instead of costing a 429. A direct message's route is the
//! person (`user:<id>`, as the inbound side records it): their DM channel is opened
//! (`POST /users/@me/channels`) and remembered.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_store::OutboxRow;

use super::buckets::{Buckets, Limits};
use crate::channel::{Channel, Dedup, SendError, Sent, send_parts};
use crate::webhook::{bounded_body, reason_of, retry_after};

/// Discord's API, version 10.
pub const DEFAULT_API_ROOT: &str = "https://discord.com/api/v10";

/// Discord's limit for one message's content, in characters.
pub const MAX_MESSAGE: usize = 2000;

/// A spent bucket's reset up to this far off is waited inside the send; a longer one hands
/// the delivery back to the drain to retry then (its state says so).
const MAX_INLINE_WAIT: Duration = Duration::from_secs(10);

/// The most people whose DM channel is remembered.
const MAX_DM_CHANNELS: usize = 10_000;

/// One bot on Discord (`channels.discord`).
pub struct Discord {
    token: String,
    root: String,
    http: reqwest::Client,
    timeout: Duration,
    buckets: Buckets,
    /// User id → their DM channel with the bot.
    dm_channels: Mutex<HashMap<String, String>>,
}

/// Why the gateway's address could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayUrlError {
    /// 401: the token was refused.
    #[error("Discord refused the bot's token: {0}")]
    Revoked(String),
    #[error("cannot ask Discord for its gateway: {0}")]
    Unavailable(String),
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
            buckets: Buckets::default(),
            dm_channels: Mutex::new(HashMap::new()),
        }
    }

    fn authorization(&self) -> String {
        format!("Bot {}", self.token)
    }

    /// `POST <root><path>` with `body`, as the bot; a failure to reach Discord is worth a
    /// retry (the URL, which could say more than needed, is left out of the reason).
    async fn post_json(&self, path: &str, body: &Value) -> Result<reqwest::Response, SendError> {
        self.http
            .post(format!("{}{path}", self.root))
            .timeout(self.timeout)
            .header(reqwest::header::AUTHORIZATION, self.authorization())
            .json(body)
            .send()
            .await
            .map_err(|e| SendError::Retry {
                after: None,
                reason: format!("cannot reach Discord: {}", e.without_url()),
            })
    }

    /// Post `text` (one part, at most 2,000 characters) to `channel` outside the outbox (a
    /// pairing code to an unknown sender); `nonce` makes a repeat within minutes a no-op.
    /// The message's id.
    pub async fn say(&self, channel: &str, text: &str, nonce: &str) -> Result<String, SendError> {
        let Some(channel) = channel_of(channel) else {
            return Err(SendError::Fatal {
                reason: format!("{channel:?} is not a Discord channel id"),
            });
        };
        self.post(channel, text, nonce).await
    }

    /// The gateway's WebSocket URL (`GET /gateway/bot`).
    pub async fn gateway_url(&self) -> Result<String, GatewayUrlError> {
        let response = self
            .http
            .get(format!("{}/gateway/bot", self.root))
            .timeout(self.timeout)
            .header(reqwest::header::AUTHORIZATION, self.authorization())
            .send()
            .await
            .map_err(|e| GatewayUrlError::Unavailable(e.without_url().to_string()))?;
        let status = response.status();
        let answer = tokio::time::timeout(self.timeout, bounded_body(response))
            .await
            .unwrap_or_default();
        if status.as_u16() == 401 {
            return Err(GatewayUrlError::Revoked(reason_of(status, &answer)));
        }
        let json: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        match json.get("url").and_then(Value::as_str) {
            Some(url) if status.is_success() => Ok(url.to_string()),
            _ => Err(GatewayUrlError::Unavailable(reason_of(status, &answer))),
        }
    }

    /// The DM channel with user `user` (opened once, then remembered).
    async fn dm_channel(&self, user: &str) -> Result<String, SendError> {
        if let Some(id) = self.dm_map().get(user) {
            return Ok(id.clone());
        }
        let response = self
            .post_json("/users/@me/channels", &json!({ "recipient_id": user }))
            .await?;
        let status = response.status();
        let header_wait = retry_after(response.headers());
        let answer = tokio::time::timeout(self.timeout, bounded_body(response))
            .await
            .unwrap_or_default();
        let json: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        let id = json.get("id").and_then(Value::as_str).and_then(channel_of);
        match id {
            Some(id) if status.is_success() => {
                let mut map = self.dm_map();
                if map.len() >= MAX_DM_CHANNELS {
                    map.clear();
                }
                map.insert(user.to_string(), id.to_string());
                Ok(id.to_string())
            }
            _ => Err(failure(
                status,
                &json,
                header_wait,
                reason_of(status, &answer),
            )),
        }
    }

    fn dm_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.dm_channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for `route`'s bucket when it is spent (briefly; a long wait goes back to the drain).
    async fn wait_for_bucket(&self, route: &str) -> Result<(), SendError> {
        loop {
            match self.buckets.take(route, tokio::time::Instant::now()) {
                Ok(()) => return Ok(()),
                Err(wait) if wait <= MAX_INLINE_WAIT => tokio::time::sleep(wait).await,
                Err(wait) => {
                    return Err(SendError::Retry {
                        after: Some(wait),
                        reason: "Discord's rate limit for this channel is spent".into(),
                    });
                }
            }
        }
    }

    /// Post one part; the message's id.
    async fn post(&self, channel: &str, content: &str, nonce: &str) -> Result<String, SendError> {
        let route = format!("channel:{channel}");
        self.wait_for_bucket(&route).await?;
        let body = json!({
            "content": content,
            "allowed_mentions": {"parse": []},
            "nonce": nonce,
            "enforce_nonce": true,
        });
        let response = self
            .post_json(&format!("/channels/{channel}/messages"), &body)
            .await?;
        let status = response.status();
        let header_wait = retry_after(response.headers());
        let limits = Limits::of(response.headers());
        self.buckets
            .record(&route, &limits, tokio::time::Instant::now());
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
        let failed = failure(status, &json, header_wait, reason_of(status, &answer));
        if let (
            429,
            SendError::Retry {
                after: Some(wait), ..
            },
        ) = (status.as_u16(), &failed)
        {
            let global = limits.global || json.get("global").and_then(Value::as_bool) == Some(true);
            self.buckets
                .limited(&route, *wait, global, tokio::time::Instant::now());
        }
        Err(failed)
    }
}

/// How a failed answer is classed: 429 waited out for Discord's `retry_after` (JSON seconds,
/// else the header), 401 stops the channel, 5xx retries, any other 4xx fails the message.
fn failure(
    status: reqwest::StatusCode,
    json: &Value,
    header_wait: Option<Duration>,
    reason: String,
) -> SendError {
    match status.as_u16() {
        429 => SendError::Retry {
            after: json
                .get("retry_after")
                .and_then(Value::as_f64)
                .and_then(super::buckets::seconds_of)
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
        // A thread is a channel of its own; a person is reached in their DM channel.
        let target = row.thread_id.as_deref().unwrap_or(&row.to);
        let channel = match (target.strip_prefix("user:"), channel_of(target)) {
            (Some(user), _) if channel_of(user).is_some() => self.dm_channel(user).await?,
            (None, Some(channel)) => channel.to_string(),
            _ => {
                return Err(SendError::Fatal {
                    reason: format!(
                        "{target:?} is not a Discord channel or user id (channel:<id>, user:<id>)"
                    ),
                });
            }
        };
        let channel = channel.as_str();
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
    fn a_huge_retry_after_is_held_to_an_hour_not_a_panic() {
        let status = reqwest::StatusCode::TOO_MANY_REQUESTS;
        let json = json!({"retry_after": 1e300});
        assert_eq!(
            failure(status, &json, None, "429".into()),
            SendError::Retry {
                after: Some(Duration::from_secs(3600)),
                reason: "429".into()
            }
        );
    }

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
