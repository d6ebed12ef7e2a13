//! What a Bot API call can end in, as the channel acts on it: wait and retry (429 with its
//! `retry_after`, a 5xx, the server away), stop the channel (401: the token was revoked),
//! or give this message up (400 and 403: the chat refused it; a group that became a
//! supergroup is said apart, with its new id). Messages never hold the token: the call's URL
//! carries it, so transport errors are stripped of their URL.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelegramError {
    #[error("Telegram asks to wait {} s before the next call ({description})", after.as_secs())]
    RateLimited {
        after: Duration,
        description: String,
    },
    #[error(
        "Telegram refused the bot token ({code}: {description}); check channels.telegram.botToken \
         (or $TELEGRAM_BOT_TOKEN)"
    )]
    Unauthorized { code: u16, description: String },
    #[error("the group became a supergroup: its chat id is now {to}")]
    Migrated { to: i64 },
    #[error("Telegram refused the call ({code}: {description})")]
    Refused { code: u16, description: String },
    #[error("Telegram answered {code} ({description})")]
    Server { code: u16, description: String },
    #[error("Telegram cannot be reached: {0}")]
    Transport(String),
    #[error("Telegram's answer is not what the Bot API documents: {0}")]
    Malformed(String),
}

impl TelegramError {
    /// Whether the same call may succeed later; with how long Telegram asked to wait.
    pub fn retry(&self) -> Option<Option<Duration>> {
        match self {
            TelegramError::RateLimited { after, .. } => Some(Some(*after)),
            TelegramError::Server { .. }
            | TelegramError::Transport(_)
            | TelegramError::Malformed(_) => Some(None),
            TelegramError::Unauthorized { .. }
            | TelegramError::Migrated { .. }
            | TelegramError::Refused { .. } => None,
        }
    }

    /// Whether the whole channel must stop (the token no longer works).
    pub fn revoked(&self) -> bool {
        matches!(self, TelegramError::Unauthorized { .. })
    }

    /// Telegram's answer to a failed call: `{"ok": false, "error_code": …, "description": …,
    /// "parameters": {"retry_after": …, "migrate_to_chat_id": …}}` (the HTTP status when the
    /// body says nothing).
    pub(crate) fn from_answer(status: u16, body: &serde_json::Value) -> TelegramError {
        let code = body
            .get("error_code")
            .and_then(serde_json::Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(status);
        let description = body
            .get("description")
            .and_then(serde_json::Value::as_str)
            .map(|d| d.chars().take(300).collect::<String>())
            .unwrap_or_else(|| format!("HTTP {status}"));
        let parameters = body.get("parameters");
        if let Some(to) = parameters
            .and_then(|p| p.get("migrate_to_chat_id"))
            .and_then(serde_json::Value::as_i64)
        {
            return TelegramError::Migrated { to };
        }
        match code {
            429 => {
                let secs = parameters
                    .and_then(|p| p.get("retry_after"))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(1)
                    .clamp(1, MAX_RETRY_AFTER_SECS);
                TelegramError::RateLimited {
                    after: Duration::from_secs(secs),
                    description,
                }
            }
            401 => TelegramError::Unauthorized { code, description },
            500..=599 => TelegramError::Server { code, description },
            _ => TelegramError::Refused { code, description },
        }
    }
}

/// The longest wait a 429 is taken at: a hostile or broken server asking for a day is held to
/// an hour.
const MAX_RETRY_AFTER_SECS: u64 = 3600;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn telegrams_error_shapes_become_what_the_channel_does() {
        let limited = TelegramError::from_answer(
            429,
            &json!({"ok": false, "error_code": 429,
                    "description": "Too Many Requests: retry after 7",
                    "parameters": {"retry_after": 7}}),
        );
        assert_eq!(limited.retry(), Some(Some(Duration::from_secs(7))));
        let revoked = TelegramError::from_answer(
            401,
            &json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
        );
        assert!(revoked.revoked());
        assert_eq!(revoked.retry(), None);
        let blocked = TelegramError::from_answer(
            403,
            &json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
        );
        assert!(!blocked.revoked(), "one chat refusing is not the token");
        assert_eq!(blocked.retry(), None);
        let moved = TelegramError::from_answer(
            400,
            &json!({"ok": false, "error_code": 400, "description": "Bad Request: group chat was upgraded to a supergroup chat",
                    "parameters": {"migrate_to_chat_id": -1001234}}),
        );
        assert_eq!(moved, TelegramError::Migrated { to: -1001234 });
        let down = TelegramError::from_answer(502, &json!(null));
        assert_eq!(down.retry(), Some(None));
        assert!(down.to_string().contains("HTTP 502"), "{down}");
        let greedy = TelegramError::from_answer(
            429,
            &json!({"ok": false, "error_code": 429, "parameters": {"retry_after": 999999999}}),
        );
        assert_eq!(greedy.retry(), Some(Some(Duration::from_secs(3600))));
    }
}
