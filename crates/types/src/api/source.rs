//! Sources: the engines one console or command is attached to at once (the local state
//! folder, `switchboard serve` gateways, OpenClaw gateways), their names, and the session
//! reference that carries its source (`home/agent:main:main`), so two sources holding the
//! same key are never confused.

use std::fmt;

use super::types::LinkState;

/// Between a source's name and a session key in a session reference.
pub const SEPARATOR: char = '/';

/// The link state's message for a source taken out while running (`Sources::remove`).
pub const REMOVED: &str = "removed from the config";

/// The longest source name: short enough for the sessions pane's source column.
pub const NAME_MAX: usize = 16;

/// Why a source name is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSourceName {
    #[error("a source name cannot be empty")]
    Empty,
    #[error("source name {0:?} is longer than {NAME_MAX} characters")]
    TooLong(String),
    #[error(
        "source name {0:?} may use only a-z, 0-9, '-' and '_', and must start with a letter or digit"
    )]
    Characters(String),
}

/// Check a source's name: 1 to 16 of `a-z 0-9 - _`, starting with a letter or digit. Never a
/// `:` (so a name is never mistaken for a key's first part) nor the separator.
pub fn check_name(name: &str) -> Result<(), BadSourceName> {
    if name.is_empty() {
        return Err(BadSourceName::Empty);
    }
    if name.chars().count() > NAME_MAX {
        return Err(BadSourceName::TooLong(name.to_string()));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(BadSourceName::Characters(name.to_string()))
    }
}

/// A session (or exchange, or run) on one source: `source/key`. With one source the key is
/// used alone and `source` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionRef<'a> {
    pub source: Option<&'a str>,
    pub key: &'a str,
}

impl<'a> SessionRef<'a> {
    /// Split a reference as shown and typed: the part before the first `/` is a source when
    /// it is a valid source name (keys always have a `:` before any `/`, names never have
    /// one); otherwise the whole text is a bare key.
    pub fn parse(text: &'a str) -> SessionRef<'a> {
        match text.split_once(SEPARATOR) {
            Some((source, key)) if check_name(source).is_ok() => SessionRef {
                source: Some(source),
                key,
            },
            _ => SessionRef {
                source: None,
                key: text,
            },
        }
    }

    /// `source/key`.
    pub fn join(source: &str, key: &str) -> String {
        let mut s = String::with_capacity(source.len() + 1 + key.len());
        s.push_str(source);
        s.push(SEPARATOR);
        s.push_str(key);
        s
    }
}

impl fmt::Display for SessionRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Some(s) => write!(f, "{s}{SEPARATOR}{}", self.key),
            None => f.write_str(self.key),
        }
    }
}

/// What kind of engine a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A state folder, the engine in this process.
    Local,
    /// A gateway, ours or OpenClaw's (which one is known once attached: `LinkState`).
    Gateway,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Local => "local",
            SourceKind::Gateway => "gateway",
        }
    }
}

/// One source as a front end shows it (`SessionsApi::sources`).
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub name: String,
    pub kind: SourceKind,
    /// The state folder or the gateway's address, as given.
    pub target: String,
    /// The link's state (`None` for a local source, which has no link).
    pub state: Option<tokio::sync::watch::Receiver<LinkState>>,
    /// What this source's engine does not expose (rounds, announces and sub-agents on an
    /// OpenClaw gateway); `None`: everything, or not known yet.
    pub unavailable: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_lowercase_words_without_a_colon_or_slash() {
        for ok in ["home", "team-2", "oc", "a", "0day", "prod_eu"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_name(""), Err(BadSourceName::Empty));
        for bad in ["Home", "-x", "_x", "a:b", "a/b", "a b", "é", "agent:main"] {
            assert!(
                matches!(check_name(bad), Err(BadSourceName::Characters(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            check_name("abcdefghijklmnopq"),
            Err(BadSourceName::TooLong(_))
        ));
    }

    #[test]
    fn a_reference_splits_at_a_source_name_only() {
        let r = SessionRef::parse("home/agent:main:main");
        assert_eq!((r.source, r.key), (Some("home"), "agent:main:main"));
        assert_eq!(r.to_string(), "home/agent:main:main");
        // A key with a slash after its first colon stays whole.
        let r = SessionRef::parse("agent:main:hook:a/b");
        assert_eq!((r.source, r.key), (None, "agent:main:hook:a/b"));
        let r = SessionRef::parse("agent:main:main");
        assert_eq!((r.source, r.key), (None, "agent:main:main"));
        // The key after a source may hold slashes of its own.
        let r = SessionRef::parse("team/agent:x:hook:a/b");
        assert_eq!((r.source, r.key), (Some("team"), "agent:x:hook:a/b"));
        assert_eq!(
            SessionRef::join("oc", "agent:main:main"),
            "oc/agent:main:main"
        );
    }
}
