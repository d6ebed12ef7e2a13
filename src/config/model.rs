//! The configuration's shape: serde types with OpenClaw's key names (camelCase), defaults,
//! and the derived values the engine asks for (key scheme, default agent, clamps).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::key::{self, KeyScheme};

/// The whole config file. Every section is optional; a missing file means `Config::default()`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    pub session: SessionConfig,
    pub tools: ToolsConfig,
    pub agents: AgentsConfig,
    pub models: ModelsConfig,
    pub gateway: GatewayConfig,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionScope {
    #[default]
    PerSender,
    Global,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SessionConfig {
    pub scope: SessionScope,
    pub main_key: String,
    pub agent_to_agent: SessionAgentToAgent,
    pub send_policy: Option<SendPolicyConfig>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            scope: SessionScope::PerSender,
            main_key: key::DEFAULT_MAIN_KEY.to_string(),
            agent_to_agent: SessionAgentToAgent::default(),
            send_policy: None,
        }
    }
}

/// `session.agentToAgent`: the ping-pong cap and the chain-hop cap (DESIGN §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SessionAgentToAgent {
    /// Spec range 0..5; values outside are clamped when used (`max_ping_pong_turns()`).
    pub max_ping_pong_turns: f64,
    pub max_chain_hops: u32,
}

impl Default for SessionAgentToAgent {
    fn default() -> Self {
        SessionAgentToAgent {
            max_ping_pong_turns: 5.0,
            max_chain_hops: 12,
        }
    }
}

impl SessionAgentToAgent {
    /// floor, then clamp to 0..=5 (spec); non-finite means the default 5.
    pub fn max_ping_pong_turns(&self) -> u32 {
        let v = self.max_ping_pong_turns;
        if !v.is_finite() {
            return 5;
        }
        v.floor().clamp(0.0, 5.0) as u32
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyAction {
    Allow,
    Deny,
}

impl PolicyAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyAction::Allow => "allow",
            PolicyAction::Deny => "deny",
        }
    }
}

/// `session.sendPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SendPolicyConfig {
    pub rules: Vec<SendPolicyRule>,
    pub default: Option<PolicyAction>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendPolicyRule {
    pub action: PolicyAction,
    #[serde(default, rename = "match")]
    pub match_: PolicyMatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Direct,
    Group,
    Channel,
    /// Deprecated spelling of `direct`.
    Dm,
}

impl ChatType {
    /// `dm` is `direct`.
    pub fn normalized(self) -> &'static str {
        match self {
            ChatType::Direct | ChatType::Dm => "direct",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyMatch {
    /// `surface` is the spec's older name for the same field.
    #[serde(default, alias = "surface")]
    pub channel: Option<String>,
    #[serde(default)]
    pub chat_type: Option<ChatType>,
    #[serde(default)]
    pub key_prefix: Option<String>,
    #[serde(default)]
    pub raw_key_prefix: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsConfig {
    pub sessions: ToolsSessions,
    pub agent_to_agent: ToolsAgentToAgent,
    pub subagents: ToolsSubagents,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    #[serde(rename = "self")]
    SelfOnly,
    #[default]
    Tree,
    Agent,
    All,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::SelfOnly => "self",
            Visibility::Tree => "tree",
            Visibility::Agent => "agent",
            Visibility::All => "all",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsSessions {
    pub visibility: Visibility,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsAgentToAgent {
    pub enabled: bool,
    pub allow: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsSubagents {
    pub tools: ToolAllowDeny,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolAllowDeny {
    pub allow: Vec<String>,
    pub also_allow: Vec<String>,
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentsConfig {
    pub defaults: AgentDefaults,
    pub list: Vec<AgentConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentDefaults {
    pub sandbox: SandboxDefaults,
    pub subagents: SubagentDefaults,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxVisibility {
    #[default]
    Spawned,
    All,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SandboxDefaults {
    pub session_tools_visibility: SandboxVisibility,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SubagentDefaults {
    pub archive_after_minutes: u64,
    pub run_timeout_seconds: u64,
    pub max_children_per_agent: u32,
    pub max_spawn_depth: u32,
    pub allow_agents: Option<Vec<String>>,
}

impl Default for SubagentDefaults {
    fn default() -> Self {
        SubagentDefaults {
            archive_after_minutes: 60,
            run_timeout_seconds: 0,
            max_children_per_agent: 5,
            max_spawn_depth: 1,
            allow_agents: None,
        }
    }
}

/// One entry of `agents.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentConfig {
    pub id: String,
    pub default: bool,
    pub name: Option<String>,
    /// `scripted` or `<provider>/<model>`.
    pub model: Option<String>,
    pub script: Vec<ScriptRule>,
    pub subagents: AgentSubagents,
    pub sandboxed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentSubagents {
    pub allow_agents: Option<Vec<String>>,
}

/// One scripted-agent rule (DESIGN §3.3): the first whose `when` matches decides the reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScriptRule {
    pub when: ScriptWhen,
    pub reply: Option<String>,
    pub tools: Vec<ScriptToolCall>,
    pub delay_ms: u64,
    pub error: Option<String>,
    pub tokens: Option<ScriptTokens>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptStep {
    Message,
    Reply,
    Announce,
    Subagent,
    SubagentAnnounce,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScriptWhen {
    pub text: Option<String>,
    pub step: Option<ScriptStep>,
    pub round: Option<u32>,
    pub from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptToolCall {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptTokens {
    #[serde(rename = "in")]
    pub input: u64,
    #[serde(rename = "out")]
    pub output: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelsConfig {
    pub providers: BTreeMap<String, ModelProvider>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelProvider {
    pub base_url: String,
    pub api: Option<String>,
    pub api_key: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayBind {
    #[default]
    Loopback,
    Lan,
    Auto,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewayConfig {
    pub port: u16,
    pub bind: GatewayBind,
    pub auth: GatewayAuth,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            port: 18789,
            bind: GatewayBind::Loopback,
            auth: GatewayAuth::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayAuthMode {
    #[default]
    Token,
    Password,
    None,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewayAuth {
    pub mode: GatewayAuthMode,
    pub token: Option<String>,
    pub password: Option<String>,
}

impl Config {
    /// The default agent: the `default: true` entry, else the first entry, else `main`.
    pub fn default_agent_id(&self) -> String {
        self.agents
            .list
            .iter()
            .find(|a| a.default)
            .or_else(|| self.agents.list.first())
            .map(|a| key::normalize_agent_id(&a.id))
            .unwrap_or_else(|| key::DEFAULT_AGENT_ID.to_string())
    }

    pub fn key_scheme(&self) -> KeyScheme {
        let main_key = self.session.main_key.trim().to_ascii_lowercase();
        KeyScheme {
            main_key: if main_key.is_empty() {
                key::DEFAULT_MAIN_KEY.to_string()
            } else {
                main_key
            },
            global_scope: self.session.scope == SessionScope::Global,
            default_agent: self.default_agent_id(),
        }
    }

    /// The config entry for `agent_id`, if the agent is configured.
    pub fn agent(&self, agent_id: &str) -> Option<&AgentConfig> {
        self.agents
            .list
            .iter()
            .find(|a| key::normalize_agent_id(&a.id) == agent_id)
    }

    /// Whether sessions of `agent_id` run sandboxed (`agents.list[].sandboxed`).
    pub fn agent_sandboxed(&self, agent_id: &str) -> bool {
        self.agent(agent_id).is_some_and(|a| a.sandboxed)
    }
}
