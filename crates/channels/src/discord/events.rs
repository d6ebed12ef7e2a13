//! The parts of Discord's gateway payloads the channel reads
//! (https://discord.com/developers/docs/events/gateway-events): the envelope (`op`, `d`,
//! `s`, `t`), HELLO, READY and MESSAGE_CREATE. Unknown fields are skipped; a payload that
//! does not fit is logged and dropped, never a panic.

use serde::Deserialize;
use serde_json::Value;

/// Gateway opcodes (https://discord.com/developers/docs/topics/opcodes-and-status-codes).
pub mod op {
    pub const DISPATCH: u8 = 0;
    pub const HEARTBEAT: u8 = 1;
    pub const IDENTIFY: u8 = 2;
    pub const RESUME: u8 = 6;
    pub const RECONNECT: u8 = 7;
    pub const INVALID_SESSION: u8 = 9;
    pub const HELLO: u8 = 10;
    pub const HEARTBEAT_ACK: u8 = 11;
}

/// The intents the channel asks for: guild messages, direct messages, and their content
/// (MESSAGE_CONTENT is privileged: enabled in the Developer Portal, else close 4014).
pub mod intents {
    /// Guilds and their threads (THREAD_CREATE, the threads in GUILD_CREATE): which channel a
    /// thread is in, for its channel's rules.
    pub const GUILDS: u64 = 1;
    pub const GUILD_MESSAGES: u64 = 1 << 9;
    pub const DIRECT_MESSAGES: u64 = 1 << 12;
    pub const MESSAGE_CONTENT: u64 = 1 << 15;
    pub const ASKED: u64 = GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT;
}

/// One gateway payload.
#[derive(Debug, Clone, Deserialize)]
pub struct Payload {
    pub op: u8,
    #[serde(default)]
    pub d: Value,
    #[serde(default)]
    pub s: Option<u64>,
    #[serde(default)]
    pub t: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Hello {
    /// Milliseconds.
    pub heartbeat_interval: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Ready {
    pub session_id: String,
    pub resume_gateway_url: String,
    pub user: User,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

impl User {
    /// The name people see: the global display name, else the username.
    pub fn display_name(&self) -> &str {
        self.global_name
            .as_deref()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(&self.username)
    }
}

/// A guild member (sent with a guild message's author).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Member {
    #[serde(default)]
    pub nick: Option<String>,
}

/// MESSAGE_CREATE's `d`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    /// Absent in a direct message.
    #[serde(default)]
    pub guild_id: Option<String>,
    pub author: User,
    #[serde(default)]
    pub member: Option<Member>,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub mentions: Vec<User>,
    /// Set when a webhook posted it (not a person).
    #[serde(default)]
    pub webhook_id: Option<String>,
}

impl Message {
    /// The sender's name as the channel shows it: the guild nickname, else the global
    /// display name, else the username.
    pub fn display_name(&self) -> String {
        self.member
            .as_ref()
            .and_then(|m| m.nick.as_deref())
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| self.author.display_name())
            .to_string()
    }

    /// Whether the message @mentions user `id`.
    pub fn mentions(&self, id: &str) -> bool {
        self.mentions.iter().any(|u| u.id == id)
            || self.content.contains(&format!("<@{id}>"))
            || self.content.contains(&format!("<@!{id}>"))
    }
}
