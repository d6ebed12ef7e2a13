//! `agents_list`: the agent ids the requester may spawn sub-agents under, with their models,
//! and the allowlist rule (reference §7.2 step 6) that `sessions_spawn` enforces.

use serde_json::{Map, Value, json};

use super::params::Params;
use super::context::{ToolContext, ToolError};
use switchboard_types::config::Config;
use crate::context::Context;
use switchboard_types::key::normalize_agent_id;

/// The model shown for an agent whose config names none: agents run on the scripted backend
/// unless told otherwise (DESIGN §3.3).
const DEFAULT_MODEL: &str = "scripted";

/// The cross-agent spawn allowlist of `requester_agent`: whether `*` allows any agent, and
/// the other normalised ids it names (deduplicated, in config order).
///
/// The list is `agents.list[<requester>].subagents.allowAgents`, else
/// `agents.defaults.subagents.allowAgents`, else empty. A per-agent `[]` is a decision (no
/// other agent), not an absence, so it does not fall back to the defaults, as in OpenClaw.
/// Same-agent spawns never consult this list.
pub(crate) fn spawn_allowlist(config: &Config, requester_agent: &str) -> (bool, Vec<String>) {
    let entries = config
        .agent(requester_agent)
        .and_then(|a| a.subagents.allow_agents.as_ref())
        .or(config.agents.defaults.subagents.allow_agents.as_ref());
    let mut any = false;
    let mut ids: Vec<String> = Vec::new();
    for raw in entries.into_iter().flatten() {
        let raw = raw.trim();
        if raw == "*" {
            any = true;
        } else if !raw.is_empty() {
            // Blank entries are skipped before normalising: normalising "" yields `main`,
            // which would silently allow the default agent.
            let id = normalize_agent_id(raw);
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    (any, ids)
}

/// The configured agent ids, normalised, in config order; with no `agents.list`, the one
/// agent that exists anyway (the default, `main`).
fn configured_agents(config: &Config) -> Vec<String> {
    let mut ids: Vec<String> = Vec::with_capacity(config.agents.list.len().max(1));
    for a in &config.agents.list {
        let id = normalize_agent_id(&a.id);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        ids.push(config.default_agent_id());
    }
    ids
}

pub fn run(shared: &Context, params: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    // The tool takes no parameters, but a non-object is still unusable input.
    // Sub-agents are refused by the tool gate in `call_tool` unless
    // `tools.subagents.tools` grants them this tool (reference §7.3: an explicit allow
    // lifts the built-in deny).
    Params::new(params)?;
    let config = shared.config();
    let requester = ctx
        .requester
        .agent_id(&shared.store().scheme().default_agent)
        .to_string();
    let (allow_any, allowed) = spawn_allowlist(config, &requester);
    let configured = configured_agents(config);
    let mut others: Vec<&String> = configured
        .iter()
        .filter(|id| **id != requester && (allow_any || allowed.contains(id)))
        .collect();
    // OpenClaw sorts the other agents by id; config order would make the answer depend on
    // how the file happens to be arranged.
    others.sort();

    let default_agent = config.default_agent_id();
    let agents: Vec<Value> = std::iter::once(&requester)
        .chain(others)
        .map(|id| agent_row(config, id, &default_agent))
        .collect();
    Ok(json!({ "requester": requester, "allowAny": allow_any, "agents": agents }))
}

/// Every configured agent with its model, for front ends (`SessionsApi::agents`).
pub(crate) fn configured(config: &Config) -> Vec<switchboard_types::api::AgentInfo> {
    let default_agent = config.default_agent_id();
    configured_agents(config)
        .into_iter()
        .map(|id| {
            let (any, allowed) = spawn_allowlist(config, &id);
            let model = config
                .agent(&id)
                .and_then(|a| a.model.clone())
                .unwrap_or_else(|| DEFAULT_MODEL.to_string());
            switchboard_types::api::AgentInfo {
                context_tokens: config.context_window(&model),
                model,
                is_default: id == default_agent,
                may_spawn: if any { vec!["*".to_string()] } else { allowed },
                id,
            }
        })
        .collect()
}

/// `{id, name?, model, thinkingLevel?, default?}`; the requester's own agent may be unconfigured, and then
/// has neither name nor model of its own.
fn agent_row(config: &Config, id: &str, default_agent: &str) -> Value {
    let agent = config.agent(id);
    let mut row = Map::new();
    row.insert("id".into(), Value::String(id.to_string()));
    if let Some(name) = agent.and_then(|a| a.name.as_ref()) {
        row.insert("name".into(), Value::String(name.clone()));
    }
    let model = agent
        .and_then(|a| a.model.as_deref())
        .unwrap_or(DEFAULT_MODEL);
    row.insert("model".into(), Value::String(model.to_string()));
    // The prompt itself stays private: it is the agent's configuration, not the caller's.
    if let Some(level) = config.thinking_level(id) {
        row.insert("thinkingLevel".into(), Value::String(level.as_str().into()));
    }
    if id == default_agent {
        row.insert("default".into(), Value::Bool(true));
    }
    Value::Object(row)
}
