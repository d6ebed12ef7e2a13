//! The send policy as every layer speaks it: `SendPolicy` (allow or deny) and
//! `PolicySetting` (a session's override: allow, deny, or inherit the config), each with one
//! text parser (`FromStr`) and one serde form, used alike by the config, the engine, the API
//! and the `/send` and `--send-policy` commands; `PolicyDecision` (a policy and where it came
//! from) and `PolicyView`, the decision as it crosses the API.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Value, json};

use super::wire::UnknownWord;

/// How a `sessions_send` refused by the target's send policy starts its `error` (the tool
/// result is OpenClaw's shape, `status: "forbidden"` with a message, and has no field of
/// its own for the reason): the engine writes it and front ends recognise it here, so the
/// wording lives in one place.
pub const SEND_POLICY_REFUSAL: &str = "send blocked by session policy";

/// Whether a tool result's `error` is a send-policy refusal (see `SEND_POLICY_REFUSAL`).
pub fn is_send_policy_refusal(error: &str) -> bool {
    error.starts_with(SEND_POLICY_REFUSAL)
}

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

    /// The word the `/send` command uses for this policy (`on`/`off`).
    pub fn command_word(self) -> &'static str {
        match self {
            SendPolicy::Allow => "on",
            SendPolicy::Deny => "off",
        }
    }
}

impl FromStr for SendPolicy {
    type Err = UnknownWord;

    /// OpenClaw's `normalizeSendPolicy`: trimmed, case-insensitive `allow`/`deny`. A stored
    /// override that is neither (an empty string included) is no override: callers treat
    /// the error as "inherit".
    fn from_str(raw: &str) -> Result<SendPolicy, UnknownWord> {
        let s = raw.trim();
        if s.eq_ignore_ascii_case("allow") {
            Ok(SendPolicy::Allow)
        } else if s.eq_ignore_ascii_case("deny") {
            Ok(SendPolicy::Deny)
        } else {
            Err(UnknownWord {
                what: "send policy",
                word: raw.to_string(),
                expected: "allow, deny".to_string(),
            })
        }
    }
}

impl fmt::Display for SendPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session's send-policy setting: its own override, or none so the config decides
/// (`Inherit`). Also what a view shows when it cannot tell the effective policy (an
/// OpenClaw gateway reports only the override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicySetting {
    Allow,
    Deny,
    Inherit,
}

impl PolicySetting {
    /// The override it stands for (`None`: no override).
    pub fn policy(self) -> Option<SendPolicy> {
        match self {
            PolicySetting::Allow => Some(SendPolicy::Allow),
            PolicySetting::Deny => Some(SendPolicy::Deny),
            PolicySetting::Inherit => None,
        }
    }

    pub fn from_policy(p: Option<SendPolicy>) -> PolicySetting {
        match p {
            Some(SendPolicy::Allow) => PolicySetting::Allow,
            Some(SendPolicy::Deny) => PolicySetting::Deny,
            None => PolicySetting::Inherit,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.policy().map_or("inherit", SendPolicy::as_str)
    }

    /// The override as stored in the session entry (`None`: no override).
    pub fn stored(self) -> Option<&'static str> {
        self.policy().map(SendPolicy::as_str)
    }
}

impl FromStr for PolicySetting {
    type Err = String;

    /// The one parser of what people type, in `/send …`, `--send-policy …` and the console:
    /// `allow`/`on`, `deny`/`off`, `inherit`/`default`/`reset`, any case, trimmed.
    fn from_str(raw: &str) -> Result<PolicySetting, String> {
        if let Ok(p) = raw.parse::<SendPolicy>() {
            return Ok(PolicySetting::from_policy(Some(p)));
        }
        match raw.trim().to_ascii_lowercase().as_str() {
            "on" => Ok(PolicySetting::Allow),
            "off" => Ok(PolicySetting::Deny),
            "inherit" | "default" | "reset" => Ok(PolicySetting::Inherit),
            _ => Err(format!(
                "invalid send policy {raw:?}: use allow, deny or inherit (on and off also work)"
            )),
        }
    }
}

impl fmt::Display for PolicySetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::wire_enum! {
    /// What decided a send policy, as a word (`PolicySource` without its rule).
    "policy source"
    pub enum PolicySourceKind {
        Override = "override",
        Rule = "rule",
        Default = "default",
        Unconfigured = "unconfigured",
        /// The session's own stop of agent-to-agent sends (`agentSendPolicy: deny`).
        AgentSends = "agentSends",
        /// A source this build does not know (from a newer engine).
        #[serde(other)]
        Unknown = "unknown",
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
    /// The session stops agent-to-agent sends into it (`agentSendPolicy: deny`), whatever
    /// its send policy says; its channel replies and announces are not affected.
    AgentSends,
}

impl PolicySource {
    /// The machine word used in JSON.
    pub fn kind(&self) -> PolicySourceKind {
        match self {
            PolicySource::Override => PolicySourceKind::Override,
            PolicySource::Rule { .. } => PolicySourceKind::Rule,
            PolicySource::Default => PolicySourceKind::Default,
            PolicySource::Unconfigured => PolicySourceKind::Unconfigured,
            PolicySource::AgentSends => PolicySourceKind::AgentSends,
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
            PolicySource::AgentSends => {
                f.write_str("agent-to-agent sends into it are stopped (its agentSendPolicy)")
            }
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

    pub fn is_override(&self) -> bool {
        self.source == PolicySource::Override
    }

    /// The JSON shape documented on the type (built directly, so it cannot fail).
    pub fn to_json(&self) -> Value {
        PolicyView::from(self).to_json()
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

/// An effective send policy and why, as the API carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    /// `allow` | `deny`; `inherit` only from a gateway that does not report the effective
    /// policy (OpenClaw's).
    pub policy: PolicySetting,
    pub source: PolicySourceKind,
    /// The 1-based rule number, for `source: "rule"`.
    pub rule: Option<usize>,
    /// The rule's match, for `source: "rule"`.
    #[serde(rename = "match")]
    pub matched: Option<String>,
    /// Where it comes from, in words (`rule 1 (channel=discord chatType=group)`).
    pub detail: String,
    /// The whole decision in words (`deny, from rule 1 (…)`).
    pub summary: String,
}

impl From<&PolicyDecision> for PolicyView {
    fn from(d: &PolicyDecision) -> PolicyView {
        let (rule, matched) = match &d.source {
            PolicySource::Rule { index, description } => (Some(*index), Some(description.clone())),
            _ => (None, None),
        };
        PolicyView {
            policy: PolicySetting::from_policy(Some(d.policy)),
            source: d.source.kind(),
            rule,
            matched,
            detail: d.source.to_string(),
            summary: d.to_string(),
        }
    }
}

impl PolicyView {
    /// The session's own override decides.
    pub fn is_override(&self) -> bool {
        self.source == PolicySourceKind::Override
    }

    /// The documented `sendPolicyEffective` JSON (`{policy, source, rule?, match?, detail}`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "policy": self.policy, "source": self.source });
        if let Some(rule) = self.rule {
            v["rule"] = rule.into();
        }
        if let Some(m) = &self.matched {
            v["match"] = m.clone().into();
        }
        v["detail"] = self.detail.clone().into();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_word_parses_to_one_setting() {
        let cases = [
            ("allow", PolicySetting::Allow),
            ("On", PolicySetting::Allow),
            (" deny ", PolicySetting::Deny),
            ("OFF", PolicySetting::Deny),
            ("inherit", PolicySetting::Inherit),
            ("default", PolicySetting::Inherit),
            ("reset", PolicySetting::Inherit),
        ];
        for (word, want) in cases {
            assert_eq!(word.parse::<PolicySetting>(), Ok(want), "{word:?}");
        }
        assert!("maybe".parse::<PolicySetting>().is_err());
    }

    #[test]
    fn settings_round_trip_through_their_wire_word() {
        for s in [
            PolicySetting::Allow,
            PolicySetting::Deny,
            PolicySetting::Inherit,
        ] {
            let json = serde_json::to_string(&s).expect("serialise");
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(
                serde_json::from_str::<PolicySetting>(&json).expect("back"),
                s
            );
            assert_eq!(s.as_str().parse::<PolicySetting>(), Ok(s));
        }
        for p in [SendPolicy::Allow, SendPolicy::Deny] {
            let json = serde_json::to_string(&p).expect("serialise");
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(p.as_str().parse::<SendPolicy>().ok(), Some(p));
        }
    }

    /// A stored override is only `allow` or `deny` (OpenClaw's `normalizeSendPolicy`):
    /// the command words are not overrides.
    #[test]
    fn a_stored_override_is_allow_or_deny_only() {
        assert_eq!(
            " ALLOW ".parse::<SendPolicy>().ok(),
            Some(SendPolicy::Allow)
        );
        assert!("on".parse::<SendPolicy>().is_err());
        assert!("".parse::<SendPolicy>().is_err());
    }
}
