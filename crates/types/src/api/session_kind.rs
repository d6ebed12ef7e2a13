//! `SessionKind` and the one rule that gives a session its kind from its key (and the
//! entry's `chatType`), shared by the engine and the remote client's view of an OpenClaw
//! gateway, so a session is the same kind whichever of them lists it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of a session, as `sessions_list` reports and filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    Main,
    Group,
    Cron,
    Hook,
    Node,
    Other,
}

impl SessionKind {
    pub const ALL: [SessionKind; 6] = [
        SessionKind::Main,
        SessionKind::Group,
        SessionKind::Cron,
        SessionKind::Hook,
        SessionKind::Node,
        SessionKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Main => "main",
            SessionKind::Group => "group",
            SessionKind::Cron => "cron",
            SessionKind::Hook => "hook",
            SessionKind::Node => "node",
            SessionKind::Other => "other",
        }
    }

    /// Case-insensitive parse; unknown names give `None` (callers drop them, as OpenClaw does).
    pub fn parse(raw: &str) -> Option<SessionKind> {
        let lower = raw.trim().to_ascii_lowercase();
        SessionKind::ALL
            .into_iter()
            .find(|k| k.as_str() == lower.as_str())
    }

    /// The kind by the key's shape, as `sessions_list` classifies: `rest` is the key
    /// without `agent:<id>:`, `is_main` says it is its agent's main session (or the global
    /// one), and the entry's `chat_type` marks groups whose key does not say so.
    pub fn of_key(rest: &str, is_main: bool, chat_type: Option<&str>) -> SessionKind {
        if is_main {
            return SessionKind::Main;
        }
        if rest.starts_with("cron:") {
            return SessionKind::Cron;
        }
        if rest.starts_with("hook:") {
            return SessionKind::Hook;
        }
        if rest.starts_with("node-") || rest.starts_with("node:") {
            return SessionKind::Node;
        }
        if matches!(chat_type, Some("group" | "channel")) || group_channel_of(rest).is_some() {
            return SessionKind::Group;
        }
        SessionKind::Other
    }
}

impl fmt::Display for SessionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// For a group/channel rest `<channel>:group:<id>` or `<channel>:channel:<id>`, the channel.
pub fn group_channel_of(rest: &str) -> Option<&str> {
    let mut parts = rest.splitn(3, ':');
    let channel = parts.next()?;
    let marker = parts.next()?;
    let id = parts.next()?;
    if (marker == "group" || marker == "channel") && !channel.is_empty() && !id.is_empty() {
        Some(channel)
    } else {
        None
    }
}
