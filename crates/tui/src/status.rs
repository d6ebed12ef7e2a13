//! The status line's content: the selected session's send policy in plain words (its fixed
//! slot), and the notices log (every owner's answer and background notice, with its time),
//! which the `M` key or `:messages` opens.

use std::collections::VecDeque;

use switchboard_types::api::{PolicySetting, PolicySourceKind, PolicyView};

/// How many notices the log keeps.
pub const NOTICES_MAX: usize = 200;

/// A session's effective send policy in plain words, for the policy slot:
/// `allow · default`, `deny · set here with /send off`,
/// `deny · rule 1: channel=discord, chatType=group`, `allow · no session.sendPolicy configured`.
pub fn policy_words(p: &PolicyView) -> String {
    let why = match p.source {
        PolicySourceKind::Override => format!(
            "set here with /send {}",
            if p.policy == PolicySetting::Deny {
                "off"
            } else {
                "on"
            }
        ),
        PolicySourceKind::Rule => {
            let matched = p
                .matched
                .as_deref()
                .map(|m| m.split_whitespace().collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            match (p.rule, matched.is_empty()) {
                (Some(n), false) => format!("rule {n}: {matched}"),
                (Some(n), true) => format!("rule {n}"),
                (None, _) => format!("a rule: {matched}"),
            }
        }
        PolicySourceKind::Default => "default".to_string(),
        PolicySourceKind::Unconfigured => "no session.sendPolicy configured".to_string(),
        PolicySourceKind::AgentSends => "agent-to-agent sends stopped here".to_string(),
        // A source this console does not know (a newer engine): its own words.
        PolicySourceKind::Unknown => p.detail.clone(),
    };
    format!("{} · {why}", p.policy)
}

/// One entry of the notices log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// When it was shown (ms since the epoch).
    pub at_ms: i64,
    pub text: String,
    pub error: bool,
    /// The answer to something the owner did (not a background notice).
    pub owner: bool,
}

/// The newest [`NOTICES_MAX`] notices, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Notices {
    entries: VecDeque<Notice>,
}

impl Notices {
    pub fn push(&mut self, notice: Notice) {
        if self.entries.len() == NOTICES_MAX {
            self.entries.pop_front();
        }
        self.entries.push_back(notice);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Notice> + ExactSizeIterator {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(policy: &str, source: &str, rule: Option<usize>, matched: Option<&str>) -> PolicyView {
        PolicyView {
            policy: policy.parse().expect("policy"),
            source: source.parse().expect("source"),
            rule,
            matched: matched.map(str::to_string),
            detail: String::new(),
            summary: String::new(),
        }
    }

    #[test]
    fn each_source_in_plain_words() {
        assert_eq!(
            policy_words(&view("allow", "default", None, None)),
            "allow · default"
        );
        assert_eq!(
            policy_words(&view("deny", "override", None, None)),
            "deny · set here with /send off"
        );
        assert_eq!(
            policy_words(&view(
                "deny",
                "rule",
                Some(1),
                Some("channel=discord chatType=group")
            )),
            "deny · rule 1: channel=discord, chatType=group"
        );
        assert_eq!(
            policy_words(&view("allow", "unconfigured", None, None)),
            "allow · no session.sendPolicy configured"
        );
    }

    #[test]
    fn the_log_keeps_the_newest_200() {
        let mut n = Notices::default();
        for i in 0..250 {
            n.push(Notice {
                at_ms: i,
                text: format!("n{i}"),
                error: false,
                owner: false,
            });
        }
        assert_eq!(n.len(), NOTICES_MAX);
        assert_eq!(n.iter().next().map(|e| e.text.as_str()), Some("n50"));
        assert_eq!(n.iter().last().map(|e| e.text.as_str()), Some("n249"));
    }
}
