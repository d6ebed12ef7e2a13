//! Send policy: which sessions may be sent to (config rules, `session.sendPolicy.default`, the
//! per-session override) and the owner's `/send on|off|inherit` chat command. This module only
//! decides; the callers that deliver or start runs enforce (DESIGN §2 "send policy enforcement").
//!
//! Evaluation follows OpenClaw's `resolveSendPolicy` (reference §6.2) step for step, and every
//! decision says where it came from, so the owner can see *why* a session is blocked.

pub use switchboard_types::api::{PolicyDecision, PolicySetting, PolicySource, SendPolicy};
use switchboard_types::config::{Config, PolicyMatch};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, chat_type_of, group_channel_of};

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
    if let Some(policy) = entry.send_policy.as_deref().and_then(|p| p.parse::<SendPolicy>().ok()) {
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
            SendPolicy::Deny => {
                return PolicyDecision {
                    policy: SendPolicy::Deny,
                    source: source(),
                };
            }
            SendPolicy::Allow => {
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
            .unwrap_or(SendPolicy::Allow),
        source: PolicySource::Default,
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
    // The word is parsed as `--send-policy` parses it; anything else shows the usage.
    Some(match word.parse::<PolicySetting>() {
        Ok(setting) => SendCommand::Set(setting.policy()),
        Err(_) => SendCommand::Usage,
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
        let parse = |w: &str| w.parse::<PolicySetting>().map(PolicySetting::policy);
        assert_eq!(parse("allow"), Ok(Some(SendPolicy::Allow)));
        assert_eq!(parse("ON"), Ok(Some(SendPolicy::Allow)));
        assert_eq!(parse("Deny"), Ok(Some(SendPolicy::Deny)));
        assert_eq!(parse("off"), Ok(Some(SendPolicy::Deny)));
        assert_eq!(parse("inherit"), Ok(None));
        let err = parse("maybe").unwrap_err();
        assert!(err.contains("allow, deny or inherit"), "{err}");
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
