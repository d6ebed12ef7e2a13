//! The session entry: OpenClaw's SessionEntry shape (camelCase JSON), stored whole in the
//! `sessions` table, with typed access to the fields the engine reads or writes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where replies and announces for a session go: `{channel, to, accountId, threadId}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Value>,
}

impl DeliveryContext {
    pub fn is_empty(&self) -> bool {
        self.channel.is_none()
            && self.to.is_none()
            && self.account_id.is_none()
            && self.thread_id.is_none()
    }
}

/// One session's entry. Fields the engine does not know (from an OpenClaw import, say) are
/// kept in `extra` and written back untouched, so export loses nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    pub session_id: String,
    #[serde(default)]
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Per-session override: `allow` | `deny`; absent = inherit config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_context: Option<DeliveryContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose_level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_sent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_last_run: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionEntry {
    /// The name front ends show for the session: its display name, else its label, else
    /// the label of where it came from (`origin_label`), else `shown_key` (the key as
    /// callers see it). The name order sorts on exactly this.
    pub fn shown_name<'a>(&'a self, shown_key: &'a str) -> &'a str {
        self.name().unwrap_or(shown_key)
    }

    /// The session's own name, when it has one: `shown_name` without the key.
    pub fn name(&self) -> Option<&str> {
        self.display_name
            .as_deref()
            .or(self.label.as_deref())
            .or_else(|| self.origin_label())
    }

    /// Where the session came from: the entry's `origin` block (`{label, provider, surface,
    /// chatType, …}`, 2026.5.28 entries), or in 2026.9.6 entries `delivery.origin`. Kept
    /// whole in `extra`; an import or export never reduces it.
    pub fn origin(&self) -> Option<&Value> {
        self.extra
            .get("origin")
            .or_else(|| self.extra.get("delivery").and_then(|d| d.get("origin")))
    }

    /// `origin.label` when it is non-blank text: the client or chat the session came from,
    /// which OpenClaw shows as the name of a session with neither display name nor label
    /// (2026.5.28 showed `displayName: "pyclient"` for a session its `pyclient` made).
    pub fn origin_label(&self) -> Option<&str> {
        self.origin()?
            .get("label")?
            .as_str()
            .filter(|l| !l.trim().is_empty())
    }

    /// A fresh entry with a new random session id.
    pub fn new(now_ms: i64) -> SessionEntry {
        SessionEntry {
            session_id: uuid::Uuid::new_v4().to_string(),
            updated_at: now_ms,
            created_at: Some(now_ms),
            ..SessionEntry::default()
        }
    }

    /// `deliveryContext.channel ?? lastChannel` (OpenClaw's row rule), else 2026.9.6's
    /// `delivery.context.channel ?? delivery.route.channel` (its entries have neither field).
    pub fn effective_last_channel(&self) -> Option<&str> {
        self.delivery_context
            .as_ref()
            .and_then(|d| d.channel.as_deref())
            .or(self.last_channel.as_deref())
            .filter(|s| !s.is_empty())
            .or_else(|| self.delivery_channel())
    }

    /// The channel of a 2026.9.6 entry's `delivery` block.
    fn delivery_channel(&self) -> Option<&str> {
        let delivery = self.extra.get("delivery")?;
        ["context", "route"]
            .iter()
            .filter_map(|part| delivery.get(part)?.get("channel")?.as_str())
            .find(|c| !c.is_empty())
    }

    /// `deliveryContext.to ?? lastTo`.
    pub fn effective_last_to(&self) -> Option<&str> {
        self.delivery_context
            .as_ref()
            .and_then(|d| d.to.as_deref())
            .or(self.last_to.as_deref())
            .filter(|s| !s.is_empty())
    }
}
