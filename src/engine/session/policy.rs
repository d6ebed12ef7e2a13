//! Send policy: which sessions may be sent to (config rules, `session.sendPolicy.default`, the
//! per-session override) and the owner's `/send on|off|inherit` chat command. This module only
//! decides; the callers that deliver or start runs enforce (DESIGN §2 "send policy enforcement").
//!
//! Evaluation follows OpenClaw's `resolveSendPolicy` (reference §6.2) step for step, and every
//! decision says where it came from, so the owner can see *why* a session is blocked.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Value, json};

use crate::config::{Config, PolicyAction, PolicyMatch};
use crate::engine::session::entry::SessionEntry;
use crate::engine::session::key::{SessionKey, chat_type_of, group_channel_of};

/// Whether sends to a session are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SendPolicy {
    Allow,
    Deny,
}

impl SendPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            SendPolicy::Allow => "allow",
            SendPolicy::Deny => "deny",
        }
    }

    /// OpenClaw's `normalizeSendPolicy`: trimmed, case-insensitive `allow`/`deny`; anything
    /// else (including an empty string) is no policy at all, i.e. "inherit".
    pub fn parse(raw: &str) -> Option<SendPolicy> {
        let s = raw.trim();
        if s.eq_ignore_ascii_case("allow") {
            Some(SendPolicy::Allow)
        } else if s.eq_ignore_ascii_case("deny") {
            Some(SendPolicy::Deny)
        } else {
            None
        }
    }

    /// The word the `/send` command uses for this policy (`on`/`off`).
    pub fn command_word(self) -> &'static str {
        match self {
            SendPolicy::Allow => "on",
            SendPolicy::Deny => "off",
        }
    }
}

impl From<PolicyAction> for SendPolicy {
    fn from(a: PolicyAction) -> SendPolicy {
        match a {
            PolicyAction::Allow => SendPolicy::Allow,
            PolicyAction::Deny => SendPolicy::Deny,
        }
    }
}

impl fmt::Display for SendPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySource {
    /// The session entry's own `sendPolicy`.
    Override,
    /// `session.sendPolicy.rules[index - 1]`; `index` is 1-based because people count rules
    /// that way, and `description` is the rule's match (e.g. `channel=discord chatType=group`).
    Rule { index: usize, description: String },
    /// No rule decided: `session.sendPolicy.default` (allow when that is unset).
    Default,
    /// There is no `session.sendPolicy` at all: everything is allowed.
    Unconfigured,
}

impl PolicySource {
    /// The machine name used in JSON: `override` | `rule` | `default` | `unconfigured`.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicySource::Override => "override",
            PolicySource::Rule { .. } => "rule",
            PolicySource::Default => "default",
            PolicySource::Unconfigured => "unconfigured",
        }
    }
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySource::Override => f.write_str("override (set on this session)"),
            PolicySource::Rule { index, description } => {
                write!(f, "rule {index} ({description})")
            }
            PolicySource::Default => f.write_str("default (session.sendPolicy.default)"),
            PolicySource::Unconfigured => f.write_str("no session.sendPolicy configured"),
        }
    }
}

/// A send-policy decision and its reason.
///
/// JSON (camelCase; `rule` and `match` only for `source: "rule"`):
/// ```json
/// {"policy": "deny", "source": "rule", "rule": 1, "match": "channel=discord chatType=group",
///  "detail": "rule 1 (channel=discord chatType=group)"}
/// ```
/// `source` is `override` | `rule` | `default` | `unconfigured`; `detail` is the one-line
/// human explanation (the `Display` of the source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    pub policy: SendPolicy,
    pub source: PolicySource,
}

impl PolicyDecision {
    pub fn is_allowed(&self) -> bool {
        self.policy == SendPolicy::Allow
    }

    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn is_override(&self) -> bool {
        self.source == PolicySource::Override
    }

    /// The JSON shape documented on the type (built directly, so it cannot fail).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "policy": self.policy.as_str(),
            "source": self.source.kind(),
        });
        if let PolicySource::Rule { index, description } = &self.source {
            v["rule"] = json!(index);
            v["match"] = json!(description);
        }
        v["detail"] = json!(self.source.to_string());
        v
    }
}

impl Serialize for PolicyDecision {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl fmt::Display for PolicyDecision {
    /// `deny, from rule 1 (channel=discord chatType=group)`; `allow, no session.sendPolicy
    /// configured` (that source is not something a decision comes "from").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            PolicySource::Unconfigured => write!(f, "{}, {}", self.policy, self.source),
            _ => write!(f, "{}, from {}", self.policy, self.source),
        }
    }
}

/// OpenClaw's `normalizeMatchValue`: trimmed and lowercased; empty means "not given".
fn norm(raw: Option<&str>) -> Option<String> {
    raw.map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
}

/// `direct` | `group` | `channel` from an entry's free-form `chatType` (`dm` is `direct`);
/// anything else is unknown, so the key gets a say instead.
fn norm_chat_type(raw: &str) -> Option<&'static str> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "direct" | "dm" => Some("direct"),
        "group" => Some("group"),
        "channel" => Some("channel"),
        _ => None,
    }
}

/// Legacy key shapes OpenClaw still recognises (reference §6.2): WhatsApp group JIDs
/// (`123-456@g.us`, `whatsapp:…@g.us`) are groups, Discord `discord:[acct:]guild-…:channel-…`
/// keys are channels. `rest` is the key without `agent:<id>:`.
fn legacy_chat_type(rest: &str) -> Option<&'static str> {
    if let Some(jid) = rest.strip_suffix("@g.us") {
        let numeric = !jid.is_empty()
            && jid
                .split('-')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let whatsapp = jid.strip_prefix("whatsapp:").is_some_and(|j| !j.is_empty());
        if numeric || whatsapp {
            return Some("group");
        }
    }
    if let Some(tail) = rest.strip_prefix("discord:") {
        let parts: Vec<&str> = tail.split(':').collect();
        let last_two = match parts.len() {
            2 => Some((parts[0], parts[1])),
            3 if !parts[0].is_empty() => Some((parts[1], parts[2])),
            _ => None,
        };
        if let Some((guild, channel)) = last_two
            && guild.strip_prefix("guild-").is_some_and(|g| !g.is_empty())
            && channel
                .strip_prefix("channel-")
                .is_some_and(|c| !c.is_empty())
        {
            return Some("channel");
        }
    }
    None
}

/// The facts rules are matched against (reference §6.2 step 3).
struct Facts {
    channel: Option<String>,
    chat_type: Option<&'static str>,
    raw_key: String,
    stripped_key: String,
}

impl Facts {
    fn of(key: &SessionKey, entry: &SessionEntry) -> Facts {
        // Stored keys are already lowercase; folding again keeps every comparison and
        // derivation case-insensitive even for keys read back from an import.
        let raw_key = key.as_str().to_lowercase();
        let stripped_key = key.rest().to_lowercase();
        let channel = norm(entry.channel.as_deref())
            .or_else(|| norm(entry.last_channel.as_deref()))
            .or_else(|| norm(group_channel_of(&stripped_key)));
        // An entry chatType that is not one of the known words falls through to the key, as
        // OpenClaw's `normalizeChatType(entry) ?? normalizeChatType(fromKey)` does.
        let chat_type = entry
            .chat_type
            .as_deref()
            .and_then(norm_chat_type)
            .or_else(|| chat_type_of(&stripped_key))
            .or_else(|| legacy_chat_type(&stripped_key));
        Facts {
            channel,
            chat_type,
            raw_key,
            stripped_key,
        }
    }

    /// Every provided field must match; an empty match matches every session.
    fn matches(&self, m: &PolicyMatch) -> bool {
        if let Some(c) = norm(m.channel.as_deref())
            && self.channel.as_deref() != Some(c.as_str())
        {
            return false;
        }
        if let Some(t) = m.chat_type.map(|t| t.normalized())
            && self.chat_type != Some(t)
        {
            return false;
        }
        if let Some(p) = norm(m.raw_key_prefix.as_deref())
            && !self.raw_key.starts_with(&p)
        {
            return false;
        }
        if let Some(p) = norm(m.key_prefix.as_deref())
            && !self.raw_key.starts_with(&p)
            && !self.stripped_key.starts_with(&p)
        {
            return false;
        }
        true
    }
}

/// A rule's match as short human text: `channel=discord chatType=group`, or `any session`.
pub fn describe_match(m: &PolicyMatch) -> String {
    let mut parts = Vec::new();
    if let Some(c) = norm(m.channel.as_deref()) {
        parts.push(format!("channel={c}"));
    }
    if let Some(t) = m.chat_type {
        parts.push(format!("chatType={}", t.normalized()));
    }
    if let Some(p) = norm(m.key_prefix.as_deref()) {
        parts.push(format!("keyPrefix={p}"));
    }
    if let Some(p) = norm(m.raw_key_prefix.as_deref()) {
        parts.push(format!("rawKeyPrefix={p}"));
    }
    if parts.is_empty() {
        "any session".to_string()
    } else {
        parts.join(" ")
    }
}

/// The send policy of session `key` (reference §6.2):
/// 1. the entry's override (`allow`/`deny`, any case) wins;
/// 2. without `session.sendPolicy`, allow;
/// 3. rules in order: the first matching `deny` decides at once, a matching `allow` is
///    remembered (the first one is reported);
/// 4. a remembered allow, else `session.sendPolicy.default`, else allow.
pub fn evaluate(config: &Config, key: &SessionKey, entry: &SessionEntry) -> PolicyDecision {
    if let Some(policy) = entry.send_policy.as_deref().and_then(SendPolicy::parse) {
        return PolicyDecision {
            policy,
            source: PolicySource::Override,
        };
    }
    let Some(cfg) = &config.session.send_policy else {
        return PolicyDecision {
            policy: SendPolicy::Allow,
            source: PolicySource::Unconfigured,
        };
    };
    let facts = Facts::of(key, entry);
    let mut first_allow: Option<PolicySource> = None;
    for (i, rule) in cfg.rules.iter().enumerate() {
        if !facts.matches(&rule.match_) {
            continue;
        }
        let source = || PolicySource::Rule {
            index: i + 1,
            description: describe_match(&rule.match_),
        };
        match rule.action {
            // Deny wins regardless of any allow before or after it.
            PolicyAction::Deny => {
                return PolicyDecision {
                    policy: SendPolicy::Deny,
                    source: source(),
                };
            }
            PolicyAction::Allow => {
                if first_allow.is_none() {
                    first_allow = Some(source());
                }
            }
        }
    }
    if let Some(source) = first_allow {
        return PolicyDecision {
            policy: SendPolicy::Allow,
            source,
        };
    }
    PolicyDecision {
        policy: cfg
            .default
            .map(SendPolicy::from)
            .unwrap_or(SendPolicy::Allow),
        source: PolicySource::Default,
    }
}

impl crate::engine::Engine {
    /// Evaluate `key`'s send policy for `action` (`send`, `announce`, `reply`, …) and
    /// announce the decision as an event, so every enforcement point is visible the same way.
    /// `requester` is the session sending into `key`, when there is one.
    pub(crate) fn judge_policy(
        &self,
        key: &SessionKey,
        entry: &SessionEntry,
        action: &str,
        requester: Option<&SessionKey>,
    ) -> PolicyDecision {
        let decision = evaluate(self.config(), key, entry);
        self.events()
            .emit(crate::engine::events::EngineEvent::PolicyDecision {
                key: key.to_string(),
                action: action.to_string(),
                allowed: decision.is_allowed(),
                source: decision.source.to_string(),
                requester: requester.map(|r| r.to_string()),
            });
        decision
    }
}

/// The owner's `/send` chat command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendCommand {
    /// Set the override; `None` removes it (inherit the config).
    Set(Option<SendPolicy>),
    /// `/send` with no word or an unknown word: answer with the usage line.
    Usage,
}

/// Parse a whole message as a `/send` command (reference §6.3): `/send`, optionally followed by
/// whitespace and ONE alphabetic word, case-insensitive, nothing else. Anything else (`/send on
/// please`, `/sendoff`, ordinary text) is not a command and gives `None`, so it is treated as
/// a normal message.
pub fn parse_send_command(text: &str) -> Option<SendCommand> {
    let s = text.trim();
    // `get` rather than slicing: the 5th byte may sit inside a multi-byte character.
    if !s.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("/send")) {
        return None;
    }
    let after = &s[5..];
    if after.is_empty() {
        return Some(SendCommand::Usage);
    }
    // The word must be separated by whitespace: `/sendoff` is not `/send off`.
    if !after.starts_with(char::is_whitespace) {
        return None;
    }
    let word = after.trim();
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    Some(match word.to_ascii_lowercase().as_str() {
        "on" | "allow" => SendCommand::Set(Some(SendPolicy::Allow)),
        "off" | "deny" => SendCommand::Set(Some(SendPolicy::Deny)),
        "inherit" | "default" | "reset" => SendCommand::Set(None),
        _ => SendCommand::Usage,
    })
}

/// OpenClaw's reply to a `/send` command, word for word.
pub fn send_command_reply(cmd: &SendCommand) -> String {
    match cmd {
        SendCommand::Set(p) => format!(
            "⚙️ Send policy set to {}.",
            p.map(SendPolicy::command_word).unwrap_or("inherit")
        ),
        SendCommand::Usage => "⚙️ Usage: /send on|off|inherit".to_string(),
    }
}

/// A command-line override value: `allow`|`on`, `deny`|`off`, `inherit` (also `default`,
/// `reset`, the `/send` synonyms). `Ok(None)` means "remove the override".
pub fn parse_override_arg(s: &str) -> Result<Option<SendPolicy>, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "allow" | "on" => Ok(Some(SendPolicy::Allow)),
        "deny" | "off" => Ok(Some(SendPolicy::Deny)),
        "inherit" | "default" | "reset" => Ok(None),
        _ => Err(format!(
            "invalid send policy {s:?}: use allow, deny or inherit (on and off also work)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: Option<SendPolicy>) -> Option<SendCommand> {
        Some(SendCommand::Set(p))
    }

    #[test]
    fn every_send_token() {
        use SendPolicy::*;
        let cases = [
            ("/send on", set(Some(Allow))),
            ("/send allow", set(Some(Allow))),
            ("/send off", set(Some(Deny))),
            ("/send deny", set(Some(Deny))),
            ("/send inherit", set(None)),
            ("/send default", set(None)),
            ("/send reset", set(None)),
            ("/send maybe", Some(SendCommand::Usage)),
            ("/send", Some(SendCommand::Usage)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_send_command(text), want, "{text:?}");
        }
    }

    #[test]
    fn send_is_case_insensitive_and_trimmed() {
        assert_eq!(parse_send_command("/SEND On"), set(Some(SendPolicy::Allow)));
        assert_eq!(
            parse_send_command("/send  OFF "),
            set(Some(SendPolicy::Deny))
        );
        assert_eq!(parse_send_command("  /Send\tInherit\n"), set(None));
        assert_eq!(parse_send_command(" /send "), Some(SendCommand::Usage));
    }

    #[test]
    fn not_a_send_command() {
        for text in [
            "/send on please",
            "/sendoff",
            "/sendx",
            "/send on!",
            "/send 1",
            "/send ön",
            "please /send on",
            "send on",
            "/sen",
            "/s€nd on",
            "",
        ] {
            assert_eq!(parse_send_command(text), None, "{text:?}");
        }
    }

    #[test]
    fn replies_word_for_word() {
        assert_eq!(
            send_command_reply(&SendCommand::Set(Some(SendPolicy::Allow))),
            "⚙️ Send policy set to on."
        );
        assert_eq!(
            send_command_reply(&SendCommand::Set(Some(SendPolicy::Deny))),
            "⚙️ Send policy set to off."
        );
        assert_eq!(
            send_command_reply(&SendCommand::Set(None)),
            "⚙️ Send policy set to inherit."
        );
        assert_eq!(
            send_command_reply(&SendCommand::Usage),
            "⚙️ Usage: /send on|off|inherit"
        );
    }

    #[test]
    fn override_arguments() {
        assert_eq!(parse_override_arg("allow"), Ok(Some(SendPolicy::Allow)));
        assert_eq!(parse_override_arg("ON"), Ok(Some(SendPolicy::Allow)));
        assert_eq!(parse_override_arg("Deny"), Ok(Some(SendPolicy::Deny)));
        assert_eq!(parse_override_arg("off"), Ok(Some(SendPolicy::Deny)));
        assert_eq!(parse_override_arg("inherit"), Ok(None));
        let err = parse_override_arg("maybe").unwrap_err();
        assert!(err.contains("allow, deny or inherit"), "{err}");
    }

    #[test]
    fn stored_override_is_normalised() {
        assert_eq!(SendPolicy::parse(" DENY "), Some(SendPolicy::Deny));
        assert_eq!(SendPolicy::parse("Allow"), Some(SendPolicy::Allow));
        assert_eq!(SendPolicy::parse("off"), None);
        assert_eq!(SendPolicy::parse(""), None);
    }

    #[test]
    fn legacy_key_shapes() {
        assert_eq!(legacy_chat_type("12036-3025@g.us"), Some("group"));
        assert_eq!(legacy_chat_type("whatsapp:12036@g.us"), Some("group"));
        assert_eq!(legacy_chat_type("abc@g.us"), None);
        assert_eq!(
            legacy_chat_type("discord:guild-1:channel-2"),
            Some("channel")
        );
        assert_eq!(
            legacy_chat_type("discord:acct:guild-1:channel-2"),
            Some("channel")
        );
        assert_eq!(legacy_chat_type("discord:guild-:channel-2"), None);
    }
}
