//! The Bot API calls the channel makes (https://core.telegram.org/bots/api#making-requests):
//! `getMe`, `getUpdates` (long polling), `sendMessage`. Every call is a `POST` of JSON to
//! `<apiRoot>/bot<token>/<method>`, answered `{"ok": true, "result": …}` or Telegram's error
//! shape (`error.rs`). `apiRoot` is Telegram's by default; a self-hosted Bot API server or
//! the tests' fake is named in `channels.telegram.apiRoot`. Answers are read up to a bound,
//! and an update this build cannot read is passed over (its id still counts), never a stop.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::TelegramError;
use crate::types::{Update, User};

/// Telegram's own Bot API server.
pub const DEFAULT_API_ROOT: &str = "https://api.telegram.org";

/// How long an answer may take beyond the long poll's own wait.
const MARGIN: Duration = Duration::from_secs(10);

/// How long a call that does not wait (sending) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of one answer read: 100 updates of 4,096-character messages with their
/// entities are well under this.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// Updates asked for per poll (the Bot API's maximum).
const POLL_LIMIT: u32 = 100;

/// A bot: its token, the server it talks to, one HTTP client.
#[derive(Clone)]
pub struct Bot {
    http: reqwest::Client,
    root: String,
    token: String,
}

impl std::fmt::Debug for Bot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Bot").field("root", &self.root).finish()
    }
}

impl Bot {
    /// A bot with `token` on the Bot API server at `api_root` (`http(s)://host[:port][/path]`).
    /// A token that is not one (`<digits>:<letters, digits, - and _>`) is refused here,
    /// without being repeated.
    pub fn new(api_root: &str, token: &str) -> Result<Bot, TelegramError> {
        let token = token.trim();
        let well_formed = token.split_once(':').is_some_and(|(id, secret)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && !secret.is_empty()
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
        if !well_formed {
            return Err(TelegramError::Unauthorized {
                code: 0,
                description:
                    "the token is not a bot token (<digits>:<secret>, as BotFather gives it)".into(),
            });
        }
        let root = api_root.trim().trim_end_matches('/').to_string();
        if !(root.starts_with("https://") || root.starts_with("http://")) {
            return Err(TelegramError::Refused {
                code: 0,
                description: format!("apiRoot {root:?} is not an http(s) URL"),
            });
        }
        let tls =
            switchboard_protocol::tls_client::config(switchboard_protocol::tls_client::web_roots())
                .map_err(|e| TelegramError::Transport(format!("cannot set up TLS: {e}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| TelegramError::Transport(e.without_url().to_string()))?;
        Ok(Bot {
            http,
            root,
            token: token.to_string(),
        })
    }

    /// The bot's own user (its id and username: what a mention names).
    pub async fn get_me(&self) -> Result<User, TelegramError> {
        self.call("getMe", &json!({}), CALL_TIMEOUT).await
    }

    /// The updates after `offset` (confirming every one before it), waiting up to `wait` for
    /// one to come. An update whose message this build cannot read comes back without it.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        wait: Duration,
    ) -> Result<Vec<Update>, TelegramError> {
        let mut params = json!({
            "timeout": wait.as_secs(),
            "limit": POLL_LIMIT,
            "allowed_updates": ["message"],
        });
        if let Some(offset) = offset {
            params["offset"] = json!(offset);
        }
        let raw: Vec<Value> = self.call("getUpdates", &params, wait + MARGIN).await?;
        Ok(raw.into_iter().filter_map(update_of).collect())
    }

    /// Have Telegram push updates to `url` (HTTPS, or anything a self-hosted Bot API server
    /// reaches), each with `secret` in its `X-Telegram-Bot-Api-Secret-Token` header.
    pub async fn set_webhook(&self, url: &str, secret: &str) -> Result<(), TelegramError> {
        let params = json!({
            "url": url,
            "secret_token": secret,
            "allowed_updates": ["message"],
        });
        let _: Value = self.call("setWebhook", &params, CALL_TIMEOUT).await?;
        Ok(())
    }

    /// Stop pushing updates (a webhook set before, by this or another program), so that
    /// `getUpdates` works; updates waiting are kept.
    pub async fn delete_webhook(&self) -> Result<(), TelegramError> {
        let _: Value = self
            .call(
                "deleteWebhook",
                &json!({"drop_pending_updates": false}),
                CALL_TIMEOUT,
            )
            .await?;
        Ok(())
    }

    /// Send `text` (one message's worth: see `split`) to `chat_id`, in forum topic `thread`;
    /// the id Telegram gave the message. Plain text: nothing in it is markup.
    pub async fn send_message(
        &self,
        chat_id: i64,
        text: &str,
        thread: Option<i64>,
    ) -> Result<i64, TelegramError> {
        let mut params = json!({"chat_id": chat_id, "text": text});
        if let Some(thread) = thread {
            params["message_thread_id"] = json!(thread);
        }
        let sent: Value = self.call("sendMessage", &params, CALL_TIMEOUT).await?;
        sent.get("message_id")
            .and_then(Value::as_i64)
            .ok_or_else(|| TelegramError::Malformed("sendMessage answered no message_id".into()))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<T, TelegramError> {
        let url = format!("{}/bot{}/{method}", self.root, self.token);
        let mut answer = self
            .http
            .post(url)
            .json(params)
            .timeout(timeout)
            .send()
            .await
            // The URL holds the token: never in a message.
            .map_err(|e| TelegramError::Transport(e.without_url().to_string()))?;
        let status = answer.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = answer
            .chunk()
            .await
            .map_err(|e| TelegramError::Transport(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(TelegramError::Malformed(format!(
                    "{method} answered more than {MAX_ANSWER} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let parsed: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) if status >= 500 => {
                return Err(TelegramError::Server {
                    code: status,
                    description: format!("HTTP {status}"),
                });
            }
            Err(e) => {
                return Err(TelegramError::Malformed(format!(
                    "{method} answered HTTP {status} with no JSON ({e})"
                )));
            }
        };
        if parsed.get("ok") != Some(&Value::Bool(true)) {
            return Err(TelegramError::from_answer(status, &parsed));
        }
        let result = parsed.get("result").cloned().unwrap_or(Value::Null);
        serde_json::from_value(result)
            .map_err(|e| TelegramError::Malformed(format!("{method}'s result: {e}")))
    }
}

/// One update as Telegram sends it (polled or pushed): `None` without an `update_id`; an
/// update whose message this build cannot read comes back without it.
pub fn update_of(v: Value) -> Option<Update> {
    let update_id = v.get("update_id")?.as_i64()?;
    Some(serde_json::from_value(v).unwrap_or_else(|e| {
        tracing::debug!(update_id, error = %e, "a Telegram update this build cannot read");
        Update {
            update_id,
            message: None,
        }
    }))
}
