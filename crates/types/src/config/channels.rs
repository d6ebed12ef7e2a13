//! The `channels` section, in OpenClaw's shape so an imported OpenClaw config keeps working
//! (issue 29): `channels.telegram`, `channels.discord` and `channels.webhook.<name>` are read
//! here; keys this build does not use, in them and other channels (`whatsapp`, …), are kept and reported by `config check`
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

/// `channels.telegram`. Debug never shows the token or the webhook's secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TelegramConfig {
    pub enabled: bool,
    /// BotFather's token; `$TELEGRAM_BOT_TOKEN` when absent.
    pub bot_token: Option<String>,
    pub dm_policy: DmPolicy,
    /// Who may write to the bot directly: user ids (numbers or strings) or `@usernames`.
    pub allow_from: Vec<Value>,
    pub group_policy: GroupPolicy,
    /// Per group (`"<chatId>"`, or `"*"` for all): whether a message must mention the bot.
    pub groups: BTreeMap<String, TelegramGroup>,
    /// The Bot API server (Telegram's by default; a self-hosted one, or a test's fake).
    pub api_root: Option<String>,
    /// The agent whose sessions the chats are (the default agent when absent).
    pub agent: Option<String>,
    /// Telegram pushes updates to this public URL (it must reach this gateway's
    /// `webhookPath`) instead of being polled.
    pub webhook_url: Option<String>,
    /// What Telegram sends in `X-Telegram-Bot-Api-Secret-Token` with each pushed update.
    pub webhook_secret: Option<String>,
    /// The gateway's path the updates are posted to (`/telegram-webhook` by default).
    pub webhook_path: Option<String>,
    /// OpenClaw's other keys (`streamMode`, `textChunkLimit`, …), kept as written.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            enabled: true,
            bot_token: None,
            dm_policy: DmPolicy::default(),
            allow_from: Vec::new(),
            group_policy: GroupPolicy::default(),
            groups: BTreeMap::new(),
            api_root: None,
            agent: None,
            webhook_url: None,
            webhook_secret: None,
            webhook_path: None,
            other: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("enabled", &self.enabled)
            .field("dm_policy", &self.dm_policy)
            .field("allow_from", &self.allow_from)
            .field("group_policy", &self.group_policy)
            .field("groups", &self.groups)
            .field("api_root", &self.api_root)
            .field("agent", &self.agent)
            .field("webhook_url", &self.webhook_url)
            .field("webhook_path", &self.webhook_path)
            .finish_non_exhaustive()
    }
}

/// The gateway's path for Telegram's pushed updates when `webhookPath` is not set.
pub const TELEGRAM_WEBHOOK_PATH: &str = "/telegram-webhook";

/// Whether `secret` is what Telegram accepts as a webhook's `secret_token`.
pub fn webhook_secret_ok(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `dmPolicy` (Telegram's and Discord's): OpenClaw's values; under `pairing` (its default) a
/// sender not in `allowFrom` is told a code the owner approves (`switchboard pairing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmPolicy {
    Open,
    Allowlist,
    #[default]
    Pairing,
    Disabled,
}

/// `groupPolicy` (Telegram's groups, Discord's guild channels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
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
        ids_as_text(&self.allow_from)
    }
}

/// `channels.discord`, in OpenClaw's shape: the bot's token, who may write to it directly
/// (`dmPolicy` + `allowFrom`, or OpenClaw's older `dm.policy` + `dm.allowFrom`), which guild
/// channels it serves (`groupPolicy`, `guilds.<guildId>.channels.<channelId>.allow`) and
/// where a mention is required (`requireMention`, per guild or channel).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordConfig {
    pub enabled: bool,
    /// The bot's token; `$DISCORD_BOT_TOKEN` when absent.
    pub token: Option<String>,
    /// Discord's API (`https://discord.com/api/v10` by default; a test's fake).
    pub api_root: Option<String>,
    /// The gateway's WebSocket URL; asked of the API (`GET /gateway/bot`) when absent.
    pub gateway_url: Option<String>,
    /// Direct messages (OpenClaw's current key; `dm.policy` is its older one).
    pub dm_policy: Option<DmPolicy>,
    /// Who may write to the bot directly: user ids (numbers or strings) or usernames.
    pub allow_from: Vec<Value>,
    /// OpenClaw's older `dm: {enabled, policy, allowFrom}`.
    pub dm: Option<DiscordDm>,
    pub group_policy: GroupPolicy,
    /// Per guild (`"<guildId>"`, or `"*"` for all).
    pub guilds: BTreeMap<String, DiscordGuild>,
    /// The agent whose sessions the channels are (the default agent when absent).
    pub agent: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        DiscordConfig {
            enabled: true,
            token: None,
            api_root: None,
            gateway_url: None,
            dm_policy: None,
            allow_from: Vec::new(),
            dm: None,
            group_policy: GroupPolicy::default(),
            guilds: BTreeMap::new(),
            agent: None,
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
            .field("gateway_url", &self.gateway_url)
            .field("dm_policy", &self.dm_policy())
            .field("group_policy", &self.group_policy)
            .finish_non_exhaustive()
    }
}

/// `channels.discord.dm` (OpenClaw's older place for the direct-message settings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordDm {
    /// `false`: no direct messages (as `policy: "disabled"`).
    pub enabled: Option<bool>,
    pub policy: Option<DmPolicy>,
    pub allow_from: Vec<Value>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `channels.discord.guilds.<guildId|*>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordGuild {
    /// Only messages that @mention the bot are taken (OpenClaw's default: true).
    pub require_mention: Option<bool>,
    /// Only these members are heard in the guild (empty: all).
    pub users: Vec<Value>,
    /// Per channel (`"<channelId>"` or `"*"`); when any is listed, only those are served.
    pub channels: BTreeMap<String, DiscordGuildChannel>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `channels.discord.guilds.<guildId>.channels.<channelId|*>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordGuildChannel {
    /// `false` leaves the channel out.
    pub allow: Option<bool>,
    pub require_mention: Option<bool>,
    /// `false` leaves the channel out (as `allow: false`).
    pub enabled: Option<bool>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The environment variable Discord's token is read from when the config has none.
pub const DISCORD_TOKEN_ENV: &str = "DISCORD_BOT_TOKEN";

impl DiscordConfig {
    /// The token: the config's, else the environment's.
    pub fn token(&self) -> Option<String> {
        token_or_env(&self.token, DISCORD_TOKEN_ENV)
    }

    /// The direct-message policy: `dmPolicy`, else `dm.policy`, else `disabled` when
    /// `dm.enabled` is false, else OpenClaw's default (`pairing`).
    pub fn dm_policy(&self) -> DmPolicy {
        let dm = self.dm.as_ref();
        if dm.and_then(|d| d.enabled) == Some(false) {
            return DmPolicy::Disabled;
        }
        self.dm_policy
            .or_else(|| dm.and_then(|d| d.policy))
            .unwrap_or_default()
    }

    /// Who may write directly, as text: `allowFrom`, else `dm.allowFrom`.
    pub fn allow_from_text(&self) -> Vec<String> {
        match (&self.allow_from, &self.dm) {
            (from, Some(dm)) if from.is_empty() => ids_as_text(&dm.allow_from),
            (from, _) => ids_as_text(from),
        }
    }

    /// Whether every `allowFrom` (either place) and `users` entry is an id or a name.
    pub fn ids_are_text(&self) -> bool {
        let lists = std::iter::once(&self.allow_from)
            .chain(self.dm.iter().map(|d| &d.allow_from))
            .chain(self.guilds.values().map(|g| &g.users));
        lists.into_iter().all(|l| ids_as_text(l).len() == l.len())
    }
}

/// A list of ids written as numbers or strings, as text (anything else left out).
pub fn ids_as_text(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect()
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
