//! `sessions_spawn`: validate in OpenClaw's order with its messages (reference §7.2), then
//! start the child and answer `accepted` at once; the child's result arrives later as an
//! announce in the requester's session.

use std::time::Duration;

use serde_json::{Value, json};

use super::params::Params;
use super::context::{ToolContext, ToolError, ToolInputError, failure};
use switchboard_types::config::limits;
use std::sync::Arc;

use super::Tools;
use crate::context::Context;
use switchboard_types::key::{is_valid_agent_id, normalize_agent_id};
use crate::chain::Chain;
use crate::spawn::{Cleanup, SpawnRequest};

/// Parameters that would route output to a channel, which a spawn never does.
const DELIVERY_PARAMS: &[&str] = &[
    "target",
    "transport",
    "channel",
    "to",
    "threadId",
    "thread_id",
    "replyTo",
    "reply_to",
];

const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// What the requester is told to do while children run (OpenClaw 2026.9.6's note).
const NOTE: &str = "The final reply returns to the requester as a completion event. Continue any independent work. Wait for completion events for ALL required children before your final answer; never busy-poll. If a completion arrives after your final answer, reply ONLY with NO_REPLY.";

/// `sessions_spawn`: validate the parameters, then the depth, fan-out, agent allowlist,
/// sandbox, model and chain checks in the order OpenClaw applies them, and start the child.
/// Long (about 220 lines) on purpose: it reads top to bottom as the tool's contract, each
/// check answering with its own refusal, and split it would pass a dozen validated values
/// between pieces.
pub async fn run(
    tools: &Arc<Tools>,
    params: &Value,
    ctx: &ToolContext,
) -> Result<Value, ToolError> {
    let shared = &*tools.ctx;
    let p = Params::new(params)?;
    if let Some(bad) = DELIVERY_PARAMS.iter().find(|name| p.has(name)) {
        return Err(ToolInputError::Invalid(format!(
            "sessions_spawn does not support \"{bad}\". Use \"message\" or \"sessions_send\" for channel delivery."
        ))
        .into());
    }
    let task = p.required_string("task")?;
    let label = p.string("label")?.map(str::trim).filter(|s| !s.is_empty());
    let agent_param = p
        .string("agentId")?
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let model = p.string("model")?.map(str::trim).filter(|s| !s.is_empty());
    let thinking = p
        .string("thinking")?
        .map(str::trim)
        .filter(|s| !s.is_empty());
    // `timeoutSeconds` is the older name; the message names whichever was written.
    let timeout_name = if p.has("runTimeoutSeconds") {
        "runTimeoutSeconds"
    } else {
        "timeoutSeconds"
    };
    let timeout = match p.whole_in(
        timeout_name,
        limits::RUN_TIMEOUT_SECONDS,
        " seconds; 0 means no limit",
    )? {
        Some(t) => t,
        None => {
            shared
                .config()
                .agents
                .defaults
                .subagents
                .run_timeout_seconds
        }
    };
    let thread = p.boolean("thread")?.unwrap_or(false);
    let mode = match p.string("mode")? {
        None => {
            if thread {
                "session"
            } else {
                "run"
            }
        }
        Some("run") => "run",
        Some("session") => "session",
        Some(other) => {
            return Err(ToolInputError::Invalid(format!(
                "mode must be \"run\" or \"session\", got {other:?}"
            ))
            .into());
        }
    };
    let cleanup = match p.string("cleanup")? {
        None | Some("keep") => Cleanup::Keep,
        Some("delete") => Cleanup::Delete,
        Some(other) => {
            return Err(ToolInputError::Invalid(format!(
                "cleanup must be \"delete\" or \"keep\", got {other:?}"
            ))
            .into());
        }
    };

    let config = shared.config();
    let scheme = shared.store().scheme();
    let requester_agent = ctx.requester.agent_id(&scheme.default_agent).to_string();
    // 1. A malformed agentId.
    if let Some(raw) = agent_param
        && !is_valid_agent_id(raw)
    {
        return Ok(failure(
            "error",
            format!(
                "Invalid agentId \"{raw}\". Agent IDs must match [a-z0-9][a-z0-9_-]{{0,63}}. Use agents_list to discover valid targets."
            ),
        ));
    }
    let agent_id = agent_param
        .map(normalize_agent_id)
        .unwrap_or_else(|| requester_agent.clone());
    // 2. Session mode needs a thread.
    if mode == "session" && !thread {
        return Ok(failure(
            "error",
            "mode=\"session\" requires thread=true so the subagent can stay bound to a thread.",
        ));
    }
    // 3. Depth (a sub-agent calling at all is refused earlier, by the tool policy).
    let requester_depth = ctx.requester.subagent_depth() as u32;
    let max_depth = config.agents.defaults.subagents.max_spawn_depth.max(1);
    if requester_depth >= max_depth {
        return Ok(failure(
            "forbidden",
            format!(
                "sessions_spawn is not allowed at this depth (current depth: {requester_depth}, max: {max_depth})"
            ),
        ));
    }
    // 4. Fan-out.
    let max_children = config.agents.defaults.subagents.max_children_per_agent;
    let requester_key = ctx.requester.to_string();
    let running = shared
        .store()
        .backend()
        .running_children(&requester_key)
        .await?;
    if running >= max_children {
        return Ok(failure(
            "forbidden",
            format!(
                "sessions_spawn has reached max active children for this session ({running}/{max_children})"
            ),
        ));
    }
    // 6. The cross-agent allowlist.
    if agent_id != requester_agent {
        let (any, allowed) = super::agents::spawn_allowlist(config, &requester_agent);
        if !any && !allowed.contains(&agent_id) {
            let list = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            return Ok(failure(
                "forbidden",
                format!("agentId is not allowed for sessions_spawn (allowed: {list})"),
            ));
        }
        if config.agent(&agent_id).is_none() {
            return Ok(failure(
                "error",
                format!(
                    "Unknown agentId \"{agent_id}\": no such agent is configured. Use agents_list to discover valid targets."
                ),
            ));
        }
    }
    // 8. A sandboxed requester keeps its children sandboxed.
    let requester_sandboxed = ctx.sandboxed || config.agent_sandboxed(&requester_agent);
    let child_sandboxed = config.agent_sandboxed(&agent_id);
    if requester_sandboxed && !child_sandboxed {
        return Ok(failure(
            "forbidden",
            "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.",
        ));
    }
    // 9. Model and thinking.
    if let Some(m) = model
        && let Some(problem) = model_problem(shared, m)
    {
        return Ok(failure("error", problem));
    }
    if let Some(t) = thinking
        && !THINKING_LEVELS.contains(&t)
    {
        return Ok(failure(
            "error",
            format!(
                "Invalid thinking level \"{t}\". Use one of: {}.",
                THINKING_LEVELS.join(", ")
            ),
        ));
    }
    // 11. Threads need a channel that can bind one; none in this build can.
    if thread {
        return Ok(failure(
            "error",
            "thread=true is unavailable because no channel plugin registered subagent_spawning hooks (this build has no channel adapters with thread support). Spawn without thread (mode \"run\").",
        ));
    }
    // 12. A spawn made by a run continues that run's chain, so a re-spawn on every
    // `subagent-announce` stops at the chain limit like a loop of sends.
    let chain = Chain::next(ctx.chain.as_ref());
    let target = format!("agent:{agent_id}:subagent");
    if let Some(max_hops) = tools.exchanges.chain_exceeded(&chain, &ctx.requester, &target) {
        return Ok(failure(
            "error",
            format!(
                "Agent-to-agent chain limit reached: this spawn would be hop {} of chain {} (session.agentToAgent.maxChainHops={max_hops}). Not spawned; reply to the person instead.",
                chain.hop, chain.id
            ),
        ));
    }
    let spawned = tools
        .spawns
        .spawn_child(SpawnRequest {
            requester: ctx.requester.clone(),
            agent_id,
            task: task.to_string(),
            label: label.map(str::to_string),
            model: model.map(str::to_string),
            thinking: thinking.map(str::to_string),
            run_timeout: (timeout > 0).then(|| Duration::from_secs(timeout)),
            mode: mode.to_string(),
            cleanup,
            sandboxed: child_sandboxed,
            depth: requester_depth + 1,
            max_depth,
            chain,
        }, tools.clone())
        .await?;
    let mut result = json!({
        "status": "accepted",
        "childSessionKey": spawned.child.as_str(),
        "runId": spawned.run_id,
        "mode": mode,
        "note": NOTE,
    });
    if model.is_some() {
        result["modelApplied"] = json!(true);
    }
    Ok(result)
}

/// Why `model` cannot run a sub-agent, if it cannot: `scripted`, or `<provider>/<model>`
/// with the provider configured.
fn model_problem(shared: &Context, model: &str) -> Option<String> {
    if model == "scripted" {
        return None;
    }
    match model.split_once('/') {
        Some((provider, name)) if !name.trim().is_empty() => {
            if shared.config().models.providers.contains_key(provider) {
                None
            } else {
                Some(format!(
                    "Invalid model \"{model}\": provider \"{provider}\" is not configured under models.providers."
                ))
            }
        }
        _ => Some(format!(
            "Invalid model \"{model}\": use \"scripted\" or \"<provider>/<model>\" with the provider configured under models.providers."
        )),
    }
}
