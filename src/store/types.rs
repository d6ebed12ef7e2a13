//! The domain types the `Store` trait takes and returns: sessions as stored, transcript
//! lines to append and as committed. Plain data, no database in them.

use serde_json::{Map, Value};

use crate::engine::entry::SessionEntry;
use crate::engine::key::{SessionKey, SessionKind};

/// A session as stored: its key, owning agent, kind, last activity and entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub key: SessionKey,
    pub agent_id: String,
    pub kind: SessionKind,
    pub entry: SessionEntry,
}

impl StoredSession {
    pub fn updated_at(&self) -> i64 {
        self.entry.updated_at
    }
}

/// A transcript line to append. The writer fills in `id`, `parentId` and `timestamp`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLine {
    /// The line's `type` (`message`, `custom`, …).
    pub kind: String,
    /// Fields after `type/id/parentId/timestamp` (for messages: `{"message": {...}}`).
    pub body: Map<String, Value>,
}

impl NewLine {
    pub fn message(message: Value) -> NewLine {
        let mut body = Map::new();
        body.insert("message".into(), message);
        NewLine {
            kind: "message".into(),
            body,
        }
    }

    /// The message's `role`, for a message line.
    pub fn role(&self) -> Option<&str> {
        self.body.get("message")?.get("role")?.as_str()
    }
}

/// A line as committed.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptRow {
    pub seq: i64,
    pub entry_id: String,
    pub line: Value,
}

/// What the owner's sessions page is narrowed to (every filter SQL can apply from indexes).
#[derive(Debug, Clone, Default)]
pub struct PageFilter {
    pub kind: Option<SessionKind>,
    pub updated_since: Option<i64>,
    pub archived: bool,
    /// `global` is listed (the config's `session.scope` is `global`); `unknown` never is.
    pub show_global: bool,
    /// In the name order (`name_key`, then key) instead of newest first.
    pub by_name: bool,
}
