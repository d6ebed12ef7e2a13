//! Session keys: parsing, normalisation, the `main`/`current`/`global`/`unknown` aliases,
//! display form, kind classification and the channel a row reports (spec "Key Model").

use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

/// The agent id used when nothing else names one.
pub const DEFAULT_AGENT_ID: &str = "main";
/// The default `session.mainKey`.
pub const DEFAULT_MAIN_KEY: &str = "main";
/// Reserved key used for the shared bucket when `session.scope = "global"`.
pub const GLOBAL_KEY: &str = "global";
/// Reserved key for sessions whose origin could not be determined.
pub const UNKNOWN_KEY: &str = "unknown";

/// Normalise an agent id as OpenClaw does: lowercase, characters outside `[a-z0-9_-]`
/// collapse to `-`, dashes trimmed from both ends, at most 64 characters, empty → `main`.
pub fn normalize_agent_id(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut last_dash = false;
    for ch in raw.trim().chars() {
        let c = ch.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            last_dash = false;
        } else if !last_dash {
            out.push('-');
            last_dash = true;
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(64).collect();
    let trimmed = trimmed.trim_end_matches('-').to_string();
    if trimmed.is_empty() {
        DEFAULT_AGENT_ID.to_string()
    } else {
        trimmed
    }
}

/// True when `raw` is already a well-formed agent id (`^[a-z0-9][a-z0-9_-]{0,63}$`, any case).
pub fn is_valid_agent_id(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    if bytes.is_empty() || bytes.len() > 64 {
        return false;
    }
    if !bytes[0].is_ascii_alphanumeric() {
        return false;
    }
    bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// True when `raw` has the UUID shape OpenClaw uses for session ids.
pub fn looks_like_session_id(raw: &str) -> bool {
    let s = raw.trim();
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

pub use crate::api::{SessionKind, group_channel_of};

/// A canonical (internal) session key: lowercase, agent-scoped (`agent:<id>:<rest>`) or one
/// of the reserved literals `global` / `unknown`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionKey(String);

impl SessionKey {
    /// Wrap a string already known to be canonical (e.g. read back from the store).
    pub fn from_canonical(s: impl Into<String>) -> SessionKey {
        SessionKey(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `(agentId, rest)` for agent-scoped keys.
    pub fn agent_parts(&self) -> Option<(&str, &str)> {
        split_agent_key(&self.0)
    }

    /// The agent that owns this session. Reserved keys belong to the default agent.
    pub fn agent_id<'a>(&'a self, default_agent: &'a str) -> &'a str {
        self.agent_parts().map(|(a, _)| a).unwrap_or(default_agent)
    }

    /// The part after `agent:<id>:`, or the whole key for reserved keys.
    pub fn rest(&self) -> &str {
        self.agent_parts().map(|(_, r)| r).unwrap_or(&self.0)
    }

    pub fn is_global(&self) -> bool {
        self.0 == GLOBAL_KEY
    }

    /// The key as callers see it: `global` is shown as `main` (callers never see `global`).
    pub fn shown(&self) -> &str {
        if self.is_global() { "main" } else { &self.0 }
    }

    pub fn is_unknown(&self) -> bool {
        self.0 == UNKNOWN_KEY
    }

    /// Sub-agent sessions: `agent:<id>:subagent:<uuid>` (depth = number of `subagent:` parts).
    pub fn subagent_depth(&self) -> usize {
        self.rest()
            .split(':')
            .filter(|seg| *seg == "subagent")
            .count()
    }
}

/// The canonical form, so calls that take a key as text (the export) take a `SessionKey` too.
impl AsRef<str> for SessionKey {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Split `agent:<id>:<rest>` (case already folded). Empty segments are dropped as OpenClaw does.
fn split_agent_key(key: &str) -> Option<(&str, &str)> {
    let tail = key.strip_prefix("agent:")?;
    let tail = tail.trim_start_matches(':');
    let (agent, rest) = tail.split_once(':')?;
    let rest = rest.trim_start_matches(':');
    if agent.is_empty() || rest.is_empty() {
        return None;
    }
    Some((agent, rest))
}

/// Why a string given as a session key names no session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the session key is empty")]
    Empty,
    #[error("{0} is not a session key: an agent key needs agent:<agentId>:<rest>")]
    TooFewParts(String),
    /// `key` is already in its visible form (safe to print).
    #[error(
        "session key {key} contains {what} ({code}) at character {at}; session keys may not \
         contain control, BiDi or invisible characters"
    )]
    Forbidden {
        key: String,
        code: String,
        what: &'static str,
        at: usize,
    },
}

/// How a session-key string given by a caller should be treated before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyInput {
    /// A key shape we recognise (agent key, cron/hook/node, group/channel, reserved literal).
    Key(String),
    /// Could be a session id (UUID-shaped, or not recognisably a key): try as a key, then as
    /// a session id.
    Candidate(String),
}

/// Classify caller input (after trimming). Empty input is the caller's problem to report.
pub fn classify_input(raw: &str) -> KeyInput {
    let s = raw.trim().to_ascii_lowercase();
    if looks_like_session_id(&s) {
        return KeyInput::Candidate(s);
    }
    let is_key = matches!(s.as_str(), "main" | "global" | "unknown" | "current")
        || s.starts_with("agent:")
        || s.starts_with("cron:")
        || s.starts_with("hook:")
        || s.starts_with("node-")
        || s.starts_with("node:")
        || s.starts_with("acp:")
        || s.contains(":group:")
        || s.contains(":channel:");
    if is_key {
        KeyInput::Key(s)
    } else {
        KeyInput::Candidate(s)
    }
}

/// The parts of config that decide how keys resolve and display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyScheme {
    /// `session.mainKey`, lowercased.
    pub main_key: String,
    /// `session.scope = "global"`.
    pub global_scope: bool,
    /// The default agent (the `default: true` entry of `agents.list`, else the first, else `main`).
    pub default_agent: String,
}

impl Default for KeyScheme {
    fn default() -> Self {
        KeyScheme {
            main_key: DEFAULT_MAIN_KEY.to_string(),
            global_scope: false,
            default_agent: DEFAULT_AGENT_ID.to_string(),
        }
    }
}

impl KeyScheme {
    /// The main session key of `agent` (or `global` under global scope).
    pub fn main_key_for(&self, agent: &str) -> SessionKey {
        if self.global_scope {
            SessionKey(GLOBAL_KEY.to_string())
        } else {
            SessionKey(format!(
                "agent:{}:{}",
                normalize_agent_id(agent),
                self.main_key
            ))
        }
    }

    /// Canonicalise a key string: the one door through which a key written by anyone (the
    /// command line, an agent's tool call, an import) becomes a `SessionKey`. `main` (or the
    /// configured mainKey) means `current_agent`'s main session; other bare keys (`cron:x`,
    /// `hook:x`, `node-x`, …) belong to the default agent; `current` is handled by the caller
    /// (it needs the requester). Refuses input that cannot name a session (empty, an `agent:`
    /// key with too few parts) and input holding a control, BiDi or invisible character, so
    /// two different sessions can never look alike.
    pub fn canonicalize(&self, raw: &str, current_agent: &str) -> Result<SessionKey, KeyError> {
        let trimmed = raw.trim();
        if let Some((at, c)) = crate::text_safety::forbidden_in_key(trimmed) {
            return Err(KeyError::Forbidden {
                key: crate::text_safety::safe_line(trimmed).into_owned(),
                code: crate::text_safety::code_point(c),
                what: crate::text_safety::describe(c),
                at: at + 1,
            });
        }
        // NFC first: `é` typed as one character or as `e` + a combining accent looks the same,
        // so it must be the same key. Then empty segments are dropped, as OpenClaw does, so
        // `:notes` and `notes` are one key.
        let composed: String = trimmed.nfc().collect();
        let s = collapse_segments(&composed);
        if s.is_empty() {
            return Err(KeyError::Empty);
        }
        if s == GLOBAL_KEY || s == UNKNOWN_KEY {
            return Ok(SessionKey(s));
        }
        if s == "main" || s == self.main_key {
            return Ok(self.main_key_for(current_agent));
        }
        if s.starts_with("agent:") {
            let (agent, rest) =
                split_agent_key(&s).ok_or_else(|| KeyError::TooFewParts(s.clone()))?;
            let agent = normalize_agent_id(agent);
            if rest == self.main_key || rest == "main" {
                return Ok(self.main_key_for(&agent));
            }
            return Ok(SessionKey(format!("agent:{agent}:{rest}")));
        }
        Ok(SessionKey(format!(
            "agent:{}:{}",
            normalize_agent_id(&self.default_agent),
            s
        )))
    }

    /// The key a caller sees: `global` is shown as `main` (callers never see `global`).
    pub fn display(&self, key: &SessionKey) -> String {
        key.shown().to_string()
    }

    /// Kind by the key's rest (so canonical `agent:main:cron:x` is `cron`, not `other`);
    /// `chat_type` from the entry marks groups whose key does not say so.
    pub fn kind(&self, key: &SessionKey, chat_type: Option<&str>) -> SessionKind {
        let is_main =
            key.is_global() || (key.agent_parts().is_some() && key.rest() == self.main_key);
        SessionKind::of_key(key.rest(), is_main, chat_type)
    }
}

/// The chat type a key implies (`group`, `channel`, `direct`), when it implies one.
pub fn chat_type_of(rest: &str) -> Option<&'static str> {
    let tokens: Vec<&str> = rest.split(':').collect();
    if tokens.contains(&"group") {
        Some("group")
    } else if tokens.contains(&"channel") {
        Some("channel")
    } else if tokens.contains(&"direct") || tokens.contains(&"dm") {
        Some("direct")
    } else {
        None
    }
}

/// A key that does not parse is the caller's mistake.
impl From<KeyError> for crate::api::ApiError {
    fn from(e: KeyError) -> crate::api::ApiError {
        crate::api::ApiError::BadInput(e.to_string())
    }
}

/// A key's text as both OpenClaw and we compare it: ASCII lowercased, each `:`-separated
/// segment trimmed, empty segments dropped (`:Notes:` and `notes` are one key).
pub fn collapse_segments(raw: &str) -> String {
    raw.to_ascii_lowercase()
        .split(':')
        .map(str::trim)
        .filter(|seg| !seg.is_empty())
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheme() -> KeyScheme {
        KeyScheme::default()
    }

    #[test]
    fn agent_ids_normalise() {
        assert_eq!(normalize_agent_id(""), "main");
        assert_eq!(normalize_agent_id("  Ops Team!! "), "ops-team");
        assert_eq!(normalize_agent_id("--x--"), "x");
        assert_eq!(normalize_agent_id(&"a".repeat(100)).len(), 64);
        assert!(is_valid_agent_id("ops_1-a"));
        assert!(!is_valid_agent_id("-ops"));
        assert!(!is_valid_agent_id("o p"));
    }

    #[test]
    fn main_alias_resolves_to_current_agent() {
        let s = scheme();
        assert_eq!(
            s.canonicalize("main", "ops").unwrap().as_str(),
            "agent:ops:main"
        );
        assert_eq!(
            s.canonicalize("Agent:Ops:Main", "x").unwrap().as_str(),
            "agent:ops:main"
        );
        let g = KeyScheme {
            global_scope: true,
            ..KeyScheme::default()
        };
        assert_eq!(g.canonicalize("main", "ops").unwrap().as_str(), "global");
        assert_eq!(g.display(&g.canonicalize("main", "ops").unwrap()), "main");
    }

    #[test]
    fn custom_main_key_is_honoured() {
        let s = KeyScheme {
            main_key: "home".into(),
            ..KeyScheme::default()
        };
        assert_eq!(
            s.canonicalize("main", "main").unwrap().as_str(),
            "agent:main:home"
        );
        assert_eq!(
            s.canonicalize("home", "ops").unwrap().as_str(),
            "agent:ops:home"
        );
        let k = s.canonicalize("agent:ops:home", "main").unwrap();
        assert_eq!(s.kind(&k, None), SessionKind::Main);
    }

    #[test]
    fn bare_keys_belong_to_the_default_agent() {
        let s = scheme();
        assert_eq!(
            s.canonicalize("cron:nightly", "ops").unwrap().as_str(),
            "agent:main:cron:nightly"
        );
        assert_eq!(
            s.canonicalize("agent:x", "main"),
            Err(KeyError::TooFewParts("agent:x".into()))
        );
        assert_eq!(s.canonicalize("  ", "main"), Err(KeyError::Empty));
    }

    #[test]
    fn keys_with_hidden_characters_are_refused_with_the_reason() {
        let s = scheme();
        let err = s
            .canonicalize("agent:main:ma\u{200b}in", "main")
            .expect_err("zero-width space");
        assert_eq!(
            err.to_string(),
            "session key agent:main:ma\\u{200b}in contains an invisible character (U+200B) at \
             character 14; session keys may not contain control, BiDi or invisible characters"
        );
        for raw in ["\u{202e}main", "main\u{1b}", "cron:\u{9b}x", "a\u{3000}b"] {
            assert!(
                matches!(s.canonicalize(raw, "main"), Err(KeyError::Forbidden { .. })),
                "{raw:?}"
            );
        }
        // Surrounding whitespace is trimmed as before, and ordinary Unicode stays allowed.
        assert_eq!(
            s.canonicalize(" agent:main:main\n", "main")
                .map(|k| k.to_string()),
            Ok("agent:main:main".to_string())
        );
        assert!(
            s.canonicalize("agent:main:telegram:group:Grüße", "main")
                .is_ok()
        );
    }

    #[test]
    fn kinds_of_canonical_keys() {
        let s = scheme();
        let k = |raw: &str| s.kind(&s.canonicalize(raw, "main").unwrap(), None);
        assert_eq!(k("agent:main:main"), SessionKind::Main);
        assert_eq!(k("agent:main:cron:x"), SessionKind::Cron);
        assert_eq!(k("hook:abc"), SessionKind::Hook);
        assert_eq!(k("node-7"), SessionKind::Node);
        assert_eq!(k("agent:main:node:7"), SessionKind::Node);
        assert_eq!(k("agent:main:discord:group:1"), SessionKind::Group);
        assert_eq!(k("agent:main:slack:channel:c1"), SessionKind::Group);
        assert_eq!(k("agent:main:subagent:1"), SessionKind::Other);
        assert_eq!(
            s.kind(
                &SessionKey::from_canonical("agent:main:dm-7"),
                Some("group")
            ),
            SessionKind::Group
        );
    }

    #[test]
    fn input_classification() {
        assert!(matches!(classify_input("cron:x"), KeyInput::Key(_)));
        assert!(matches!(classify_input("s2"), KeyInput::Candidate(_)));
        assert!(matches!(
            classify_input("4CF38B27-4311-4E06-85F3-E787B8FD5769"),
            KeyInput::Candidate(_)
        ));
        assert!(matches!(classify_input("agent:main:s2"), KeyInput::Key(_)));
    }

    #[test]
    fn composed_and_decomposed_accents_are_one_key() {
        let s = scheme();
        let composed = s
            .canonicalize("agent:main:caf\u{e9}", "main")
            .expect("composed");
        let decomposed = s
            .canonicalize("agent:main:cafe\u{301}", "main")
            .expect("decomposed");
        assert_eq!(composed, decomposed);
        assert_eq!(composed.as_str(), "agent:main:caf\u{e9}");
    }
}
