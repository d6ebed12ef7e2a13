//! Which sessions a requester's tools may see: `tools.sessions.visibility`
//! (self|tree|agent|all), the sandbox clamp, and agent-to-agent gating, with the exact
//! denial messages users are told (reference §8).

use std::collections::HashSet;

use switchboard_types::config::{Config, SandboxVisibility, Visibility};

use switchboard_types::key::SessionKey;
use switchboard_store::StoreError;
use crate::session::store::SessionStore;

/// What the requester is trying to do; it picks the wording of a denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    List,
    History,
    Send,
    // OpenClaw's `session_status` wording, kept for when that tool lands.
    #[allow(dead_code)]
    Status,
}

impl Action {
    fn prefix(self) -> &'static str {
        match self {
            Action::List => "Session list",
            Action::History => "Session history",
            Action::Send => "Session send",
            Action::Status => "Session status",
        }
    }

    pub(crate) fn agent_to_agent_disabled(self) -> &'static str {
        match self {
            Action::List => {
                "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility."
            }
            Action::History => {
                "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."
            }
            Action::Send => {
                "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."
            }
            Action::Status => {
                "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."
            }
        }
    }

    pub(crate) fn agent_to_agent_denied(self) -> &'static str {
        match self {
            Action::List => "Agent-to-agent listing denied by tools.agentToAgent.allow.",
            Action::History => "Agent-to-agent history denied by tools.agentToAgent.allow.",
            Action::Send => "Agent-to-agent messaging denied by tools.agentToAgent.allow.",
            Action::Status => "Agent-to-agent status denied by tools.agentToAgent.allow.",
        }
    }
}

/// `tools.agentToAgent`: whether two agents may see each other.
#[derive(Debug, Clone, Default)]
pub struct AgentToAgentPolicy {
    pub enabled: bool,
    pub allow: Vec<String>,
}

impl AgentToAgentPolicy {
    pub fn from_config(config: &Config) -> AgentToAgentPolicy {
        AgentToAgentPolicy {
            enabled: config.tools.agent_to_agent.enabled,
            allow: config.tools.agent_to_agent.allow.clone(),
        }
    }

    /// An empty list allows every agent; `*` anywhere in a pattern is a case-insensitive
    /// wildcard; a plain pattern is an exact, case-sensitive id.
    pub fn matches(&self, agent: &str) -> bool {
        let patterns: Vec<&str> = self
            .allow
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .collect();
        if patterns.is_empty() {
            return true;
        }
        patterns.iter().any(|p| pattern_matches(p, agent))
    }

    /// Same-agent pairs are always allowed.
    pub fn allows(&self, requester: &str, target: &str) -> bool {
        requester == target || (self.enabled && self.matches(requester) && self.matches(target))
    }

    /// True when every pair of agents is allowed (nothing cross-agent is hidden).
    pub fn allows_everything(&self) -> bool {
        self.enabled
            && self
                .allow
                .iter()
                .all(|p| p.trim().is_empty() || p.trim() == "*")
    }
}

fn pattern_matches(pattern: &str, agent: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if !pattern.contains('*') {
        return pattern == agent;
    }
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let s: Vec<char> = agent.to_lowercase().chars().collect();
    wildcard(&p, &s)
}

/// Iterative glob match for `*` only (no backtracking blow-up).
fn wildcard(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// A denial: always `status: "forbidden"`, with a message that says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

/// The visibility decision for one tool call, built once per call.
#[derive(Debug, Clone)]
pub struct Guard {
    pub requester: SessionKey,
    pub requester_agent: String,
    /// After the sandbox clamp.
    pub visibility: Visibility,
    /// The configured value, before the clamp (to explain a clamp to the user).
    pub configured: Visibility,
    pub sandboxed: bool,
    /// Sandboxed non-sub-agent requesters see only what they spawned (reference §8.2).
    pub restricted: bool,
    pub agent_to_agent: AgentToAgentPolicy,
    /// The requester's direct children (for `tree`).
    children: HashSet<SessionKey>,
}

impl Guard {
    pub async fn new(
        config: &Config,
        store: &SessionStore,
        requester: &SessionKey,
        sandboxed_flag: bool,
    ) -> Result<Guard, StoreError> {
        let default_agent = store.scheme().default_agent.clone();
        let requester_agent = requester.agent_id(&default_agent).to_string();
        let sandboxed = sandboxed_flag || config.agent_sandboxed(&requester_agent);
        let configured = config.tools.sessions.visibility;
        let clamp = sandboxed
            && config.agents.defaults.sandbox.session_tools_visibility
                == SandboxVisibility::Spawned;
        // The clamp narrows to `tree`; unlike OpenClaw it never widens `self` (a quirk there).
        let visibility = if clamp && matches!(configured, Visibility::Agent | Visibility::All) {
            Visibility::Tree
        } else {
            configured
        };
        let restricted = clamp && requester.subagent_depth() == 0;
        // Children are needed under every mode: a session's own tree stays visible when
        // visibility widens (an indexed lookup of a handful of rows).
        let children = store.children_of(requester).await?.into_iter().collect();
        Ok(Guard {
            requester: requester.clone(),
            requester_agent,
            visibility,
            configured,
            sandboxed,
            restricted,
            agent_to_agent: AgentToAgentPolicy::from_config(config),
            children,
        })
    }

    /// The requester itself or a session it spawned.
    pub fn in_tree(&self, target: &SessionKey) -> bool {
        target == &self.requester || self.children.contains(target)
    }

    /// May the requester do `action` on `target` (owned by `target_agent`)?
    pub fn check(
        &self,
        target: &SessionKey,
        target_agent: &str,
        action: Action,
    ) -> Result<(), Denied> {
        // Under global scope every agent shares the one `global` (shown as `main`) session.
        let target_agent = if target.is_global() {
            self.requester_agent.as_str()
        } else {
            target_agent
        };
        // A session's own tree is always its own business, whichever agent a child runs
        // under (OpenClaw hid cross-agent children under `tree`: its #54878).
        if self.in_tree(target) && self.visibility != Visibility::SelfOnly {
            return Ok(());
        }
        if target == &self.requester {
            return Ok(());
        }
        if self.restricted {
            return Err(Denied(format!(
                "Session not visible from this sandboxed agent session: {target}"
            )));
        }
        if target_agent != self.requester_agent {
            if self.visibility != Visibility::All {
                return Err(Denied(format!(
                    "{} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
                    action.prefix()
                )));
            }
            if !self.agent_to_agent.enabled {
                return Err(Denied(action.agent_to_agent_disabled().to_string()));
            }
            if !self.agent_to_agent.allows(&self.requester_agent, target_agent) {
                return Err(Denied(action.agent_to_agent_denied().to_string()));
            }
            return Ok(());
        }
        match self.visibility {
            Visibility::SelfOnly => Err(Denied(format!(
                "{} visibility is restricted to the current session (tools.sessions.visibility=self).",
                action.prefix()
            ))),
            Visibility::Tree => Err(Denied(format!(
                "{} visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
                action.prefix()
            ))),
            Visibility::Agent | Visibility::All => Ok(()),
        }
    }

    /// True when some sessions may be hidden from this requester's list.
    pub fn is_scoped(&self) -> bool {
        !(self.visibility == Visibility::All && self.agent_to_agent.allows_everything() && !self.restricted)
    }

    /// A sentence for a scoped list, so a short list is not mistaken for "that is all there
    /// is" (OpenClaw users were: its #50646).
    pub fn scope_note(&self) -> String {
        let clamp = if self.sandboxed && self.visibility != self.configured {
            format!(
                " (clamped from {} because this session is sandboxed: agents.defaults.sandbox.sessionToolsVisibility=spawned)",
                self.configured.as_str()
            )
        } else {
            String::new()
        };
        match self.visibility {
            Visibility::SelfOnly => format!(
                "Only the current session is listed (tools.sessions.visibility=self){clamp}. Other sessions may exist; set tools.sessions.visibility to tree, agent or all to see them."
            ),
            Visibility::Tree => format!(
                "Only the current session and the sessions it spawned are listed (tools.sessions.visibility=tree){clamp}. Other sessions may exist; set tools.sessions.visibility=agent or all to see them."
            ),
            Visibility::Agent => format!(
                "Only sessions of agent {} are listed (tools.sessions.visibility=agent). Other agents' sessions need tools.sessions.visibility=all and tools.agentToAgent.enabled=true.",
                self.requester_agent
            ),
            Visibility::All if !self.agent_to_agent.enabled => "Only sessions of this agent are listed: cross-agent listing is disabled. Set tools.agentToAgent.enabled=true to see other agents' sessions.".to_string(),
            Visibility::All => "Sessions of agents not matched by tools.agentToAgent.allow are not listed.".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_patterns() {
        let p = AgentToAgentPolicy {
            enabled: true,
            allow: vec!["ops-*".into(), "Main".into()],
        };
        assert!(p.matches("OPS-1"));
        assert!(p.matches("ops-"));
        assert!(!p.matches("main"), "plain patterns are case-sensitive");
        assert!(p.matches("Main"));
        assert!(p.allows("x", "x"));
        assert!(!p.allows("x", "ops-1"));
        let empty = AgentToAgentPolicy {
            enabled: true,
            allow: vec![],
        };
        assert!(empty.matches("anything"));
        assert!(wildcard(&['a', '*', 'c'], &['a', 'b', 'b', 'c']));
        assert!(!wildcard(&['a', '*', 'c'], &['a', 'b']));
    }
}
