//! The session entry: OpenClaw's SessionEntry shape (camelCase JSON), stored whole in the
//! `sessions` table, with typed access to the fields the engine reads or writes.

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
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

/// `agentSendPolicy`'s one value: agent-to-agent sends into the session are stopped.
pub const AGENT_SENDS_STOPPED: &str = "deny";

/// One session's entry. Fields the engine does not know (from an OpenClaw import, say) are
/// kept in `extra` and written back untouched, so export loses nothing. Read by hand
/// (`Deserialize` below), not derived: see there why.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// Switchboard's narrower override: `deny` stops agent-to-agent sends into the session
    /// (`sessions_send` and reply rounds) while its replies and announces to its channel go
    /// on; absent = sends follow `send_policy`. OpenClaw has no such field (it keeps it as
    /// any other unknown field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_send_policy: Option<String>,
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

/// A derived `Deserialize` with `#[serde(flatten)]` buffers every field as serde's private
/// `Content` and parses it a second time; on OpenClaw's entries (1.5–30 KB of fields the
/// engine does not know) that was most of a `sessions.list` (perf, issue 25). Here each field
/// is read once, straight into its typed place or into `extra`, in the order it came.
impl<'de> Deserialize<'de> for SessionEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor { keep: None })
    }
}

/// The fields outside the typed ones that rows and names read (`origin`, `delivery`, the
/// run's `status` and times, …): all a view of the session needs from `extra`.
pub const VIEW_FIELDS: &[&str] = &[
    "origin",
    "delivery",
    "status",
    "startedAt",
    "endedAt",
    "runtimeMs",
    "estimatedCostUsd",
    "createdVia",
    "lastRunId",
    "pinned",
    "pinnedAt",
    "childSessions",
];

impl SessionEntry {
    /// An entry read for a view (a page of rows): the typed fields, and of the others only
    /// `VIEW_FIELDS`; the rest (OpenClaw's skills snapshot, prompt reports: most of its
    /// 1.5–30 KB) is skipped unparsed. Never written back: it is not the whole entry.
    pub fn view_from_str(text: &str) -> serde_json::Result<SessionEntry> {
        let mut d = serde_json::Deserializer::from_str(text);
        let e = d.deserialize_map(EntryVisitor {
            keep: Some(VIEW_FIELDS),
        })?;
        d.end()?;
        Ok(e)
    }
}

/// Reads an entry; `keep`, when given, names the only untyped fields kept.
struct EntryVisitor {
    keep: Option<&'static [&'static str]>,
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = SessionEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a session entry (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SessionEntry, A::Error> {
        /// A known field's value, typed; `null` reads as absent, as the derive read it.
        fn typed<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
            map: &mut A,
            name: &str,
        ) -> Result<Option<T>, A::Error> {
            map.next_value::<Option<T>>()
                .map_err(|e| A::Error::custom(format!("field `{name}`: {e}")))
        }
        let mut e = SessionEntry {
            // OpenClaw's entries carry 30–60 fields: no regrowing the map on the way.
            extra: Map::with_capacity(match self.keep {
                Some(keep) => keep.len(),
                None => map.size_hint().unwrap_or(48),
            }),
            ..SessionEntry::default()
        };
        let mut session_id = None;
        while let Some(name) = map.next_key::<Name<'de>>()? {
            let m = &mut map;
            let name = name.as_str();
            match name {
                "sessionId" => session_id = typed(m, name)?,
                "updatedAt" => e.updated_at = typed(m, name)?.unwrap_or_default(),
                "createdAt" => e.created_at = typed(m, name)?,
                "chatType" => e.chat_type = typed(m, name)?,
                "channel" => e.channel = typed(m, name)?,
                "displayName" => e.display_name = typed(m, name)?,
                "label" => e.label = typed(m, name)?,
                "sendPolicy" => e.send_policy = typed(m, name)?,
                "agentSendPolicy" => e.agent_send_policy = typed(m, name)?,
                "spawnedBy" => e.spawned_by = typed(m, name)?,
                "parentSessionKey" => e.parent_session_key = typed(m, name)?,
                "spawnDepth" => e.spawn_depth = typed(m, name)?,
                "deliveryContext" => e.delivery_context = typed(m, name)?,
                "lastChannel" => e.last_channel = typed(m, name)?,
                "lastTo" => e.last_to = typed(m, name)?,
                "lastAccountId" => e.last_account_id = typed(m, name)?,
                "model" => e.model = typed(m, name)?,
                "modelProvider" => e.model_provider = typed(m, name)?,
                "contextTokens" => e.context_tokens = typed(m, name)?,
                "inputTokens" => e.input_tokens = typed(m, name)?,
                "outputTokens" => e.output_tokens = typed(m, name)?,
                "totalTokens" => e.total_tokens = typed(m, name)?,
                "thinkingLevel" => e.thinking_level = typed(m, name)?,
                "verboseLevel" => e.verbose_level = typed(m, name)?,
                "systemSent" => e.system_sent = typed(m, name)?,
                "abortedLastRun" => e.aborted_last_run = typed(m, name)?,
                "archivedAt" => e.archived_at = typed(m, name)?,
                _ if self.keep.is_some_and(|keep| !keep.contains(&name)) => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    let v = map.next_value::<Value>()?;
                    e.extra.insert(name.to_string(), v);
                }
            }
        }
        e.session_id = session_id.ok_or_else(|| A::Error::missing_field("sessionId"))?;
        Ok(e)
    }
}

/// A field's name, borrowed from the text when it has no escapes: a `String` per name was
/// an allocation and a free for each of an OpenClaw entry's 30–60 fields, most of them
/// skipped unread in a view (4 % of a 50-row `sessions.list`, perf).
enum Name<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Name<'_> {
    fn as_str(&self) -> &str {
        match self {
            Name::Borrowed(s) => s,
            Name::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Name<'de>, E> {
                Ok(Name::Borrowed(s))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Name<'de>, E> {
                Ok(Name::Owned(s.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Name<'de>, E> {
                Ok(Name::Owned(s))
            }
        }
        d.deserialize_str(NameVisitor)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_keep_their_order_and_known_ones_their_types() {
        let text = r#"{"zeta":1,"sessionId":"s-1","origin":{"label":"x"},"updatedAt":7,
            "alpha":[1,2],"spawnDepth":2,"deliveryContext":{"channel":"telegram","to":"42"},
            "model":null,"mid":"m"}"#;
        let e: SessionEntry = serde_json::from_str(text).unwrap();
        assert_eq!(e.session_id, "s-1");
        assert_eq!(e.updated_at, 7);
        assert_eq!(e.spawn_depth, Some(2));
        assert_eq!(e.model, None);
        assert_eq!(
            e.delivery_context.as_ref().and_then(|d| d.to.as_deref()),
            Some("42")
        );
        let extra: Vec<&str> = e.extra.keys().map(String::as_str).collect();
        assert_eq!(extra, ["zeta", "origin", "alpha", "mid"]);
        assert_eq!(e.origin_label(), Some("x"));
    }

    #[test]
    fn a_bad_known_field_is_named_and_a_missing_id_refused() {
        let err = serde_json::from_str::<SessionEntry>(r#"{"sessionId":"s","spawnDepth":"two"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("spawnDepth"), "{err}");
        let err = serde_json::from_str::<SessionEntry>(r#"{"updatedAt":1}"#).unwrap_err();
        assert!(err.to_string().contains("sessionId"), "{err}");
        assert!(serde_json::from_str::<SessionEntry>("[1]").is_err());
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z:é ]{0,8}")
    }

    proptest! {
        /// What is written reads back equal: every known field and every unknown one.
        #[test]
        fn an_entry_reads_back_as_written(
            id in "[a-z0-9-]{1,12}",
            at in any::<i64>(),
            created in proptest::option::of(any::<i64>()),
            names in (text(), text(), text(), text()),
            numbers in (proptest::option::of(any::<u32>()), proptest::option::of(any::<u64>())),
            flags in (proptest::option::of(any::<bool>()), proptest::option::of(any::<bool>())),
            extra in proptest::collection::vec(("[a-z]{1,6}x", any::<i32>()), 0..6),
        ) {
            let mut e = SessionEntry {
                session_id: id,
                updated_at: at,
                created_at: created,
                chat_type: names.0,
                display_name: names.1.clone(),
                label: names.2,
                send_policy: names.3,
                spawn_depth: numbers.0,
                total_tokens: numbers.1,
                system_sent: flags.0,
                aborted_last_run: flags.1,
                delivery_context: names.1.map(|to| DeliveryContext {
                    to: Some(to),
                    thread_id: Some(json!(3)),
                    ..DeliveryContext::default()
                }),
                ..SessionEntry::default()
            };
            for (k, v) in extra {
                e.extra.insert(k, json!({"n": v}));
            }
            let back: SessionEntry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
            prop_assert_eq!(back, e);
        }
    }
}
