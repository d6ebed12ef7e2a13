//! The configuration's shape: serde types with OpenClaw's key names (camelCase), defaults,
//! and the derived values the engine asks for (key scheme, default agent, clamps).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::{SendPolicy, Step};

use crate::key::{self, KeyScheme};

/// The range of every numeric setting, in one table: `config check` reports a value outside
/// its range with its key path and line, and the engine relies on these bounds (a chain of
/// 4e9 hops, or a timer 1e15 minutes away, is a mistake, not a wish).
pub mod limits {
    /// One numeric setting's accepted range and why it ends there.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Range {
        /// Dotted key path; `[]` stands for any index (`agents.list[].script[].delayMs`).
        pub path: &'static str,
        pub min: u64,
        pub max: u64,
        /// Said after the range in a problem, so the author knows what the bounds mean.
        pub note: &'static str,
    }

    /// `session.agentToAgent.maxChainHops`: sends in one agent-to-agent chain. A real chain
    /// is a handful of hops (default 12); 100 stops a runaway loop within a second.
    pub const MAX_CHAIN_HOPS: u64 = 100;
    /// `runTimeoutSeconds` (config default and `sessions_spawn`): 0 already means "no limit",
    /// so a cap costs nothing; a day covers any real run and keeps deadlines far from overflow.
    pub const RUN_TIMEOUT_SECONDS: u64 = 86_400;
    /// `archiveAfterMinutes`: 0 means never; a year is beyond any useful delay.
    pub const ARCHIVE_AFTER_MINUTES: u64 = 525_600;
    /// `delayMs` of a scripted rule: it stands in for a model's thinking time; ten minutes is
    /// longer than any model turn worth simulating.
    pub const DELAY_MS: u64 = 600_000;
    /// `streamMs` of a scripted rule: the pause after each streamed word; ten seconds is
    /// slower than any model worth simulating.
    pub const STREAM_MS: u64 = 10_000;
    /// `tokens.in` / `tokens.out` of a scripted rule: one turn's usage; the largest context
    /// windows hold a few million tokens.
    pub const TURN_TOKENS: u64 = 10_000_000;

    pub const RANGES: &[Range] = &[
        Range {
            path: "session.agentToAgent.maxChainHops",
            min: 1,
            max: MAX_CHAIN_HOPS,
            note: "sends in one agent-to-agent chain; the default is 12",
        },
        Range {
            path: "agents.defaults.subagents.archiveAfterMinutes",
            min: 0,
            max: ARCHIVE_AFTER_MINUTES,
            note: "minutes; 0 never archives, at most a year",
        },
        Range {
            path: "agents.defaults.subagents.runTimeoutSeconds",
            min: 0,
            max: RUN_TIMEOUT_SECONDS,
            note: "seconds; 0 means no limit, at most a day",
        },
        Range {
            path: "agents.defaults.subagents.maxChildrenPerAgent",
            min: 1,
            max: 20,
            note: "active children per session, as in OpenClaw; the default is 5",
        },
        Range {
            path: "agents.defaults.subagents.maxSpawnDepth",
            min: 1,
            max: 5,
            note: "1 means sub-agents cannot spawn, as in OpenClaw",
        },
        Range {
            path: "agents.list[].script[].delayMs",
            min: 0,
            max: DELAY_MS,
            note: "milliseconds, at most ten minutes",
        },
        Range {
            path: "agents.list[].script[].streamMs",
            min: 0,
            max: STREAM_MS,
            note: "milliseconds after each streamed word, at most ten seconds",
        },
        Range {
            path: "agents.list[].script[].when.round",
            min: 0,
            max: 5,
            note: "a ping-pong round; there are at most 5",
        },
        Range {
            path: "agents.list[].script[].tokens.in",
            min: 0,
            max: TURN_TOKENS,
            note: "tokens in one turn",
        },
        Range {
            path: "agents.list[].script[].tokens.out",
            min: 0,
            max: TURN_TOKENS,
            note: "tokens in one turn",
        },
    ];

    /// The range of the setting at `path` (indices written as `[3]`), if it has one.
    pub fn range_of(path: &str) -> Option<&'static Range> {
        let pattern = strip_indices(path);
        RANGES.iter().find(|r| r.path == pattern)
    }

    /// `agents.list[2].script[0].delayMs` → `agents.list[].script[].delayMs`.
    fn strip_indices(path: &str) -> String {
        let mut out = String::with_capacity(path.len());
        let mut in_index = false;
        for c in path.chars() {
            match c {
                '[' => {
                    in_index = true;
                    out.push('[');
                }
                ']' => {
                    in_index = false;
                    out.push(']');
                }
                c if in_index && c.is_ascii_digit() => {}
                c => out.push(c),
            }
        }
        out
    }

    impl Range {
        /// "expected a whole number from 1 to 100 (…), got 4294967295".
        pub fn problem(&self, got: &str) -> String {
            format!(
                "expected a whole number from {} to {} ({}), got {got}",
                self.min, self.max, self.note
            )
        }

        pub fn contains(&self, v: u64) -> bool {
            (self.min..=self.max).contains(&v)
        }
    }
}

/// The whole config file. Every section is optional; a missing file means `Config::default()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    pub session: SessionConfig,
    pub tools: ToolsConfig,
    pub agents: AgentsConfig,
    pub models: ModelsConfig,
    pub gateway: GatewayConfig,
    /// Gateways the console and the read commands attach to beside the local state folder
    /// (issue 27, "Sources"), each named: its sessions are `name/key`.
    pub gateways: Vec<GatewaySource>,
    /// The local state folder's name among several sources (default `local`).
    pub local_source: String,
    /// Where the engine keeps its state (issue 28): the state folder's SQLite database
    /// unless `storage.url` names a PostgreSQL database.
    pub storage: StorageConfig,
    /// The chat channels the engine answers on (issue 29, "Channels"), in OpenClaw's shape:
    /// `channels.<kind>…`.
    pub channels: super::channels::ChannelsConfig,
}

/// One `channels.webhook.<name>`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookChannelConfig {
    /// Off: neither sent to nor accepted (default on).
    pub enabled: Option<bool>,
    /// Where deliveries are POSTed (`http://` or `https://`).
    pub url: String,
    /// Signs outbound bodies (HMAC-SHA256) and is the inbound `Authorization: Bearer`.
    pub secret: String,
    /// How long the receiver has to answer (default 10 s).
    pub timeout_seconds: Option<u64>,
    pub retry: ChannelRetryConfig,
}

impl WebhookChannelConfig {
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

impl std::fmt::Debug for WebhookChannelConfig {
    // Never the secret (a config is logged at debug level in places).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookChannelConfig")
            .field("enabled", &self.enabled)
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .field("timeout_seconds", &self.timeout_seconds)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A channel's `retry`: sends in all and the backoff between them (OpenClaw's names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChannelRetryConfig {
    /// Sends in all, the first included (default 8).
    pub attempts: Option<u32>,
    /// The first retry's delay (default 1000).
    pub min_delay_ms: Option<u64>,
    /// The longest delay between two sends (default 300000).
    pub max_delay_ms: Option<u64>,
    /// Randomise delays so many failed deliveries do not retry together (default true).
    pub jitter: Option<bool>,
}

/// The `storage` section: `url`, a `postgres://` URL, puts the engine's state in that
/// database (the `--store` flag and `$SWITCHBOARD_STORE` override it); absent, the state
/// folder's SQLite database holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StorageConfig {
    pub url: Option<String>,
}

/// Whether `url` names a PostgreSQL database (its scheme), the only store a URL selects.
pub fn is_postgres_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

impl Default for Config {
    fn default() -> Self {
        Config {
            session: SessionConfig::default(),
            tools: ToolsConfig::default(),
            agents: AgentsConfig::default(),
            models: ModelsConfig::default(),
            gateway: GatewayConfig::default(),
            gateways: Vec::new(),
            local_source: DEFAULT_LOCAL_SOURCE.to_string(),
            storage: StorageConfig::default(),
            channels: super::channels::ChannelsConfig::default(),
        }
    }
}

/// The local state folder's name among several sources when the config names none.
pub const DEFAULT_LOCAL_SOURCE: &str = "local";

/// One entry of `gateways`: a `switchboard serve` or OpenClaw gateway to attach to, by name.
/// The token is `tokenFile` or `tokenEnv` (one of them; neither: `--token NAME=…` or
/// `$SWITCHBOARD_TOKEN_<NAME>`). Relative paths are read from the config file's folder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewaySource {
    /// The source's name (`team`): 1 to 16 of a-z, 0-9, `-`, `_`.
    pub name: String,
    /// `ws://host:port` or `wss://host:port`.
    pub url: String,
    /// A file holding the token (private to this user, as `<state>/gateway-token` is).
    pub token_file: Option<std::path::PathBuf>,
    /// An environment variable holding the token.
    pub token_env: Option<String>,
    /// A CA certificate (PEM) to trust for a `wss://` address.
    pub tls_ca: Option<std::path::PathBuf>,
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

/// `session.sendPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SendPolicyConfig {
    pub rules: Vec<SendPolicyRule>,
    pub default: Option<SendPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendPolicyRule {
    pub action: SendPolicy,
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
    /// The thinking level of agents that set none.
    pub thinking_level: Option<ThinkingLevel>,
}

/// How hard a model-backed agent thinks, with OpenClaw's levels. Chat completions know only
/// `reasoning_effort` low/medium/high, so `off` and `minimal` send nothing (see
/// [`ThinkingLevel::reasoning_effort`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
}

impl ThinkingLevel {
    pub const NAMES: [&'static str; 5] = ["off", "minimal", "low", "medium", "high"];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
        }
    }

    /// A level by its name (case-insensitive), as `sessions_spawn`'s `thinking` gives it;
    /// OpenClaw's `xhigh` is `high` here, the most chat completions can ask for.
    pub fn parse(name: &str) -> Option<ThinkingLevel> {
        let name = name.trim().to_ascii_lowercase();
        if name == "xhigh" {
            return Some(ThinkingLevel::High);
        }
        [
            ThinkingLevel::Off,
            ThinkingLevel::Minimal,
            ThinkingLevel::Low,
            ThinkingLevel::Medium,
            ThinkingLevel::High,
        ]
        .into_iter()
        .find(|l| l.as_str() == name)
    }

    /// The request's `reasoning_effort`; `None` for `off` and `minimal`, which the
    /// chat-completions API has no value for (servers reject unknown efforts).
    pub fn reasoning_effort(self) -> Option<&'static str> {
        match self {
            ThinkingLevel::Off | ThinkingLevel::Minimal => None,
            ThinkingLevel::Low => Some("low"),
            ThinkingLevel::Medium => Some("medium"),
            ThinkingLevel::High => Some("high"),
        }
    }
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
    /// The system message a model-backed agent's turns start with.
    pub system_prompt: Option<String>,
    /// A file holding the system prompt instead, relative to the config file's folder;
    /// read when the config is loaded (an unreadable file is a config problem).
    pub system_prompt_file: Option<String>,
    /// The text read from `system_prompt_file` (never written back out).
    #[serde(skip)]
    pub system_prompt_from_file: Option<String>,
    /// Overrides `agents.defaults.thinkingLevel`.
    pub thinking_level: Option<ThinkingLevel>,
    pub script: Vec<ScriptRule>,
    pub subagents: AgentSubagents,
    pub sandboxed: bool,
}

impl AgentConfig {
    /// The system prompt, given inline or read from `systemPromptFile`.
    pub fn system_prompt_text(&self) -> Option<&str> {
        self.system_prompt
            .as_deref()
            .or(self.system_prompt_from_file.as_deref())
    }
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
    /// Our extension: stream the reply word by word (as a streaming model would, through
    /// `ToolRunner::reply_delta`) with this pause after each word; 0 replies at once.
    pub stream_ms: u64,
    pub error: Option<String>,
    pub tokens: Option<ScriptTokens>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScriptWhen {
    pub text: Option<String>,
    pub step: Option<Step>,
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

/// `Debug` is written by hand (below) so that printing a provider never shows its secrets.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelProvider {
    pub base_url: String,
    /// Only `openai-completions` has a backend (`POST {baseUrl}/chat/completions`).
    pub api: Option<String>,
    pub api_key: Option<String>,
    /// The environment variable holding the key, read when a request is made, so the key
    /// never sits in the config file.
    pub api_key_env: Option<String>,
    /// Extra request headers (an organisation id, a proxy's token …).
    pub headers: BTreeMap<String, String>,
    /// Per request; `None` means [`ModelProvider::DEFAULT_TIMEOUT_SECONDS`].
    pub timeout_seconds: Option<u64>,
    /// Retries after a 429, a 5xx or a connection error; `None` means
    /// [`ModelProvider::DEFAULT_MAX_RETRIES`].
    pub max_retries: Option<u32>,
    /// Model calls in one turn (each answered tool round is one more); `None` means
    /// [`ModelProvider::DEFAULT_MAX_STEPS`].
    pub max_steps: Option<u32>,
    /// Ask for streamed replies (server-sent events), so text shows as it is generated;
    /// `None` means [`ModelProvider::DEFAULT_STREAM`].
    pub stream: Option<bool>,
    /// Model requests to this provider in flight at once, across every agent and model
    /// override on it; `None` means [`ModelProvider::DEFAULT_MAX_CONCURRENT`].
    pub max_concurrent: Option<u32>,
    /// The provider's models as OpenClaw's config lists them. Only `contextWindow` is used:
    /// it is the `contextTokens` a session on that model reports (their TUI's footer reads
    /// "tokens 130/128k"); a model not listed has no known window.
    pub models: Vec<ProviderModel>,
}

/// One entry of `models.providers.<id>.models`, in OpenClaw's shape: every field OpenClaw
/// documents is accepted so its provider block can be copied as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProviderModel {
    pub id: String,
    pub name: Option<String>,
    /// Tokens the model takes in at most: the sessions' `contextTokens`.
    pub context_window: Option<u64>,
    pub max_tokens: Option<u64>,
    pub reasoning: Option<bool>,
    pub input: Option<Vec<String>>,
    pub cost: Option<serde_json::Value>,
}

impl std::fmt::Debug for ModelProvider {
    /// As derived, except `apiKey` and every `headers` value, which show as `<redacted>`:
    /// a provider printed into a log or an error never carries its credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .keys()
            .map(|k| (k.as_str(), "<redacted>"))
            .collect();
        f.debug_struct("ModelProvider")
            .field("base_url", &self.base_url)
            .field("api", &self.api)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("headers", &headers)
            .field("timeout_seconds", &self.timeout_seconds)
            .field("max_retries", &self.max_retries)
            .field("max_steps", &self.max_steps)
            .field("stream", &self.stream)
            .field("max_concurrent", &self.max_concurrent)
            .field("models", &self.models)
            .finish()
    }
}

impl ModelProvider {
    /// The one `api` this build can speak.
    pub const OPENAI_COMPLETIONS: &'static str = "openai-completions";
    pub const DEFAULT_TIMEOUT_SECONDS: u64 = 120;
    pub const DEFAULT_MAX_RETRIES: u32 = 2;
    pub const DEFAULT_MAX_STEPS: u32 = 8;
    /// On, as OpenClaw streams.
    pub const DEFAULT_STREAM: bool = true;
    /// Caps applied when used, so a typo cannot make a run retry or loop for hours.
    pub const MAX_RETRIES: u32 = 10;
    pub const MAX_STEPS: u32 = 100;
    pub const MAX_TIMEOUT_SECONDS: u64 = 3_600;
    pub const DEFAULT_MAX_CONCURRENT: u32 = 4;
    /// `maxConcurrent` range: at least one request, at most 256 (`config check` refuses
    /// more): a hosted API may take hundreds at once; past that it is a typo.
    pub const MAX_CONCURRENT: u32 = 256;
}

/// OpenClaw's `gateway.bind` values, all accepted by the shape check so an OpenClaw config
/// gets a precise message: `switchboard serve` supports only `loopback` here (`config
/// check` and `serve` refuse the others, naming `serve --bind`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayBind {
    #[default]
    Loopback,
    Lan,
    Auto,
    Tailnet,
    Custom,
}

impl GatewayBind {
    /// The values `switchboard serve` honours.
    pub const SUPPORTED: &'static [&'static str] = &["loopback"];

    pub fn as_str(self) -> &'static str {
        match self {
            GatewayBind::Loopback => "loopback",
            GatewayBind::Lan => "lan",
            GatewayBind::Auto => "auto",
            GatewayBind::Tailnet => "tailnet",
            GatewayBind::Custom => "custom",
        }
    }
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

/// OpenClaw's `gateway.auth.mode` values, all accepted by the shape check so an OpenClaw
/// config gets a precise message: `switchboard serve` supports only `token` (`config check`
/// and `serve` refuse the others).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayAuthMode {
    #[default]
    Token,
    Password,
    None,
    #[serde(rename = "trusted-proxy")]
    TrustedProxy,
}

impl GatewayAuthMode {
    /// The values `switchboard serve` honours.
    pub const SUPPORTED: &'static [&'static str] = &["token"];

    pub fn as_str(self) -> &'static str {
        match self {
            GatewayAuthMode::Token => "token",
            GatewayAuthMode::Password => "password",
            GatewayAuthMode::None => "none",
            GatewayAuthMode::TrustedProxy => "trusted-proxy",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewayAuth {
    pub mode: GatewayAuthMode,
    pub token: Option<String>,
    pub password: Option<String>,
    /// A second gateway token that only ever gets read access (list and read, no send).
    pub read_only_token: Option<String>,
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

    /// The context window configured for `model` (`provider/model`, as agents name it):
    /// `models.providers.<provider>.models[].contextWindow`; `None` when not listed (or 0).
    pub fn context_window(&self, model: &str) -> Option<u64> {
        let (provider, id) = model.split_once('/')?;
        self.models
            .providers
            .get(provider)?
            .models
            .iter()
            .find(|m| m.id == id)?
            .context_window
            .filter(|w| *w > 0)
    }

    /// The thinking level of `agent_id`: its own, else `agents.defaults.thinkingLevel`.
    pub fn thinking_level(&self, agent_id: &str) -> Option<ThinkingLevel> {
        self.agent(agent_id)
            .and_then(|a| a.thinking_level)
            .or(self.agents.defaults.thinking_level)
    }

    /// Whether sessions of `agent_id` run sandboxed (`agents.list[].sandboxed`).
    pub fn agent_sandboxed(&self, agent_id: &str) -> bool {
        self.agent(agent_id).is_some_and(|a| a.sandboxed)
    }
}

/// The pattern of a `/…/` script text; any other text is a plain substring.
pub fn regex_body(text: &str) -> Option<&str> {
    if text.len() >= 2 && text.starts_with('/') && text.ends_with('/') {
        Some(&text[1..text.len() - 1])
    } else {
        None
    }
}
