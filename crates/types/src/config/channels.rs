//! The `channels` section, in OpenClaw's shape so an imported OpenClaw config keeps working
//! (issue 29): `channels.telegram` and `channels.webhook.<name>` are read here; keys this build does not use, in it and other
//! channels (`discord`, `whatsapp`, …), are kept and reported by `config check`
//! (`warnings.rs`) rather than refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChannelsConfig {
    pub telegram: Option<TelegramConfig>,
    /// Generic webhooks by name: deliveries are POSTed to `url`, messages arrive at the
    /// gateway's `POST /hooks/<name>`.
    pub webhook: BTreeMap<String, super::model::WebhookChannelConfig>,
    pub discord: Option<DiscordConfig>,
    /// Every other channel, as written.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `channels.telegram`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TelegramConfig {
    pub enabled: bool,
    /// BotFather's token; `$TELEGRAM_BOT_TOKEN` when absent.
    pub bot_token: Option<String>,
    pub dm_policy: TelegramDmPolicy,
    /// Who may write to the bot directly: user ids (numbers or strings) or `@usernames`.
    pub allow_from: Vec<Value>,
    pub group_policy: TelegramGroupPolicy,
    /// Per group (`"<chatId>"`, or `"*"` for all): whether a message must mention the bot.
    pub groups: BTreeMap<String, TelegramGroup>,
    /// The Bot API server (Telegram's by default; a self-hosted one, or a test's fake).
    pub api_root: Option<String>,
    /// The agent whose sessions the chats are (the default agent when absent).
    pub agent: Option<String>,
    /// OpenClaw's other keys (`streamMode`, `textChunkLimit`, …), kept as written.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            enabled: true,
            bot_token: None,
            dm_policy: TelegramDmPolicy::default(),
            allow_from: Vec::new(),
            group_policy: TelegramGroupPolicy::default(),
            groups: BTreeMap::new(),
            api_root: None,
            agent: None,
            other: BTreeMap::new(),
        }
    }
}

/// `dmPolicy`: OpenClaw's values; `pairing` (its default) admits `allowFrom` only until
/// pairing codes exist here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramDmPolicy {
    Open,
    Allowlist,
    #[default]
    Pairing,
    Disabled,
}

/// `groupPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramGroupPolicy {
    Open,
    #[default]
    Allowlist,
    Disabled,
}

/// `groups.<chatId|*>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TelegramGroup {
    pub require_mention: Option<bool>,
    pub enabled: Option<bool>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The environment variable the token is read from when the config has none.
pub const TELEGRAM_TOKEN_ENV: &str = "TELEGRAM_BOT_TOKEN";

impl TelegramConfig {
    /// The token: the config's, else the environment's.
    pub fn token(&self) -> Option<String> {
        token_or_env(&self.bot_token, TELEGRAM_TOKEN_ENV)
    }

    /// `allowFrom` as text (ids written as numbers included).
    pub fn allow_from_text(&self) -> Vec<String> {
        self.allow_from
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect()
    }
}

/// `channels.discord` (outbound: deliveries to Discord channels; OpenClaw's other keys kept).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordConfig {
    pub enabled: bool,
    /// The bot's token; `$DISCORD_BOT_TOKEN` when absent.
    pub token: Option<String>,
    /// Discord's API (`https://discord.com/api/v10` by default; a test's fake).
    pub api_root: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        DiscordConfig {
            enabled: true,
            token: None,
            api_root: None,
            other: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for DiscordConfig {
    // Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordConfig")
            .field("enabled", &self.enabled)
            .field("api_root", &self.api_root)
            .finish_non_exhaustive()
    }
}

/// The environment variable Discord's token is read from when the config has none.
pub const DISCORD_TOKEN_ENV: &str = "DISCORD_BOT_TOKEN";

impl DiscordConfig {
    /// The token: the config's, else the environment's.
    pub fn token(&self) -> Option<String> {
        token_or_env(&self.token, DISCORD_TOKEN_ENV)
    }
}

/// A channel's secret: `written` unless blank, else the environment variable `env` unless
/// blank.
fn token_or_env(written: &Option<String>, env: &str) -> Option<String> {
    written
        .clone()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| std::env::var(env).ok())
        .filter(|t| !t.trim().is_empty())
}
