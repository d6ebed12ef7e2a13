//! `sessions_send`: resolve the target (key, sessionId, label or agentId) with OpenClaw's
//! messages (reference §5.2), check visibility, send policy and the chain limit, then start
//! the exchange and wait for the primary run as long as the caller asked.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::params::Params;
use super::resolve::resolve_reference;
use super::row::channel_of;
use super::context::{ToolContext, ToolError};
use std::sync::Arc;

use super::Tools;
use crate::context::Context;
use crate::exchange::Send;
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, normalize_agent_id};

use crate::chain::Chain;
use switchboard_types::api::{ExchangeKind, SEND_POLICY_REFUSAL, SendKind};
use switchboard_types::api::RunStatus;
use crate::session::store::SessionInit;
use crate::session::visibility::{Action, Denied, Guard};

/// `timeoutSeconds` when not given (reference §5.1).
const DEFAULT_TIMEOUT_SECONDS: u64 = 30;

/// The longest a waited send may hold its caller. The wait blocks the calling turn (and a
/// `switchboard tool` command); past an hour that is a stuck turn, not a wait. Nothing is lost
/// by the cap: after a timeout the run goes on, and its reply arrives by the reply-back loop
/// and in `sessions_history`, which is what `timeoutSeconds: 0` is for.
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;

/// A result in the tool's shape: `runId` and `status` first, then the rest.
fn result(run_id: &str, status: &str, session_key: Option<&str>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("runId".into(), json!(run_id));
    if let Some(k) = session_key {
        m.insert("sessionKey".into(), json!(k));
    }
    m.insert("status".into(), json!(status));
    m
}

fn failure(
    run_id: &str,
    status: &str,
    error: impl Into<String>,
    session_key: Option<&str>,
) -> Value {
    let mut m = result(run_id, status, session_key);
    m.insert("error".into(), json!(error.into()));
    Value::Object(m)
}

fn pending() -> Value {
    json!({ "status": "pending", "mode": "announce" })
}

/// `sessions_send`: resolve the target, apply the visibility, agent-to-agent, send-policy
/// and chain checks in the order OpenClaw applies them, start the exchange and wait for the
/// primary reply. Long (about 200 lines) on purpose: it reads top to bottom as the tool's
/// contract, each check answering with its own result shape, and split it would pass the
/// half-resolved target and its display key between pieces.
pub async fn run(
    tools: &Arc<Tools>,
    params: &Value,
    ctx: &ToolContext,
) -> Result<Value, ToolError> {
    let shared = &*tools.ctx;
    let p = Params::new(params)?;
    let message = p.required_string("message")?;
    let timeout = p
        .whole_in(
            "timeoutSeconds",
            MAX_TIMEOUT_SECONDS,
            " seconds; 0 sends without waiting, and sessions_history shows the reply later",
        )?
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let key_param = p.string("sessionKey")?.filter(|s| !s.trim().is_empty());
    let label = p.string("label")?.filter(|s| !s.trim().is_empty());
    let agent_param = p.string("agentId")?.filter(|s| !s.trim().is_empty());
    // Pre-run failures still carry a run id, as OpenClaw's do.
    let run_id = uuid::Uuid::new_v4().to_string();
    let scheme = shared.store().scheme().clone();

    if key_param.is_some() && label.is_some() {
        return Ok(failure(
            &run_id,
            "error",
            "Provide either sessionKey or label (not both).",
            None,
        ));
    }
    let guard = Guard::new(
        shared.config(),
        shared.store(),
        &ctx.requester,
        ctx.sandboxed,
    )
    .await?;
    let target: SessionKey = if let Some(label) = label {
        match by_label(shared, &guard, label.trim(), agent_param).await? {
            Ok(k) => k,
            Err((status, error)) => return Ok(failure(&run_id, status, error, None)),
        }
    } else if let Some(raw) = key_param {
        match resolve_reference(shared, ctx, &guard, raw).await? {
            Ok(r) => r.key,
            Err(mut v) => {
                // The resolver's `{status, error}`, with the run id first.
                if let Some(m) = v.as_object_mut() {
                    let mut out = result(&run_id, "", None);
                    out.extend(std::mem::take(m));
                    return Ok(Value::Object(out));
                }
                return Ok(v);
            }
        }
    } else if let Some(agent) = agent_param {
        let agent = normalize_agent_id(agent);
        if shared.config().agent(&agent).is_none() {
            return Ok(failure(
                &run_id,
                "error",
                format!("agent not found: {agent}"),
                None,
            ));
        }
        scheme.main_key_for(&agent)
    } else {
        return Ok(failure(
            &run_id,
            "error",
            "Either sessionKey or label is required",
            None,
        ));
    };
    let display = scheme.display(&target);
    let target_agent = target.agent_id(&scheme.default_agent).to_string();
    if let Err(Denied(message)) = guard.check(&target, &target_agent, Action::Send) {
        return Ok(failure(&run_id, "forbidden", message, Some(&display)));
    }
    let target_session = match shared.store().get(&target).await? {
        Some(s) => s,
        // An agent's main session is created on first use (agentId targets).
        None if key_param.is_none() && label.is_none() => {
            shared
                .store()
                .ensure(&target, SessionInit::default())
                .await?
                .0
        }
        None => {
            return Ok(failure(
                &run_id,
                "error",
                format!("No session found: {display}"),
                Some(&display),
            ));
        }
    };
    let chain = Chain::next(ctx.chain.as_ref());
    // A send that never starts an exchange is still one the owner can find (its own entry).
    if let Some(refusal) = refused_by_policy(
        shared,
        &target,
        &target_session.entry,
        &display,
        &ctx.requester,
    ) {
        tools
            .exchanges
            .record_refused_send(
                ExchangeKind::Refused,
                &ctx.requester,
                target.as_str(),
                message,
                &chain,
                &run_id,
                &refusal,
            )
            .await?;
        return Ok(failure(&run_id, "forbidden", refusal, Some(&display)));
    }
    if let Some(max_hops) = tools.exchanges.chain_limit_passed(&chain) {
        tools
            .exchanges
            .record_refused_send(
                ExchangeKind::Chain,
                &ctx.requester,
                target.as_str(),
                message,
                &chain,
                &run_id,
                &format!(
                    "{} > session.agentToAgent.maxChainHops {max_hops} (chain {})",
                    switchboard_types::words::count(chain.hop, "send"),
                    chain.id
                ),
            )
            .await?;
        tools.exchanges.emit_chain_stopped(&chain, &ctx.requester, target.as_str());
        return Ok(failure(
            &run_id,
            "error",
            format!(
                "Agent-to-agent chain limit reached: this would be send {} of chain {} (session.agentToAgent.maxChainHops={max_hops}). Not sent; reply to the person instead.",
                chain.hop, chain.id
            ),
            Some(&display),
        ));
    }
    // The requester must exist for the reply-back loop to run in it (a CLI caller's
    // `--as` session may be new).
    let (requester_session, _) = shared
        .store()
        .ensure(&ctx.requester, SessionInit::default())
        .await?;
    let wait = Duration::from_secs(timeout);
    let started = tools
        .exchanges
        .start_send(Send {
            requester: ctx.requester.clone(),
            target: target.clone(),
            message: message.to_string(),
            chain,
            wait,
            waiting: ctx.waiting.clone(),
            requester_channel: channel_of(&requester_session),
            target_channel: channel_of(&target_session),
        }, tools.clone())
        .await?;
    let mut run = started.run;
    let run_id = run.run_id.clone();
    if timeout == 0 {
        let mut m = result(&run_id, "accepted", Some(&display));
        m.insert("delivery".into(), pending());
        return Ok(Value::Object(m));
    }
    Ok(match run.wait_for(wait).await {
        None => {
            let mut m = result(&run_id, "timeout", Some(&display));
            m.insert(
                "error".into(),
                json!(format!(
                    "No reply within {timeout}s. The message was delivered and the run goes on; read sessions_history for {display} later (its reply still starts the reply-back loop and the announce)."
                )),
            );
            m.insert("delivery".into(), pending());
            Value::Object(m)
        }
        Some(o) if o.status == RunStatus::Ok => {
            let mut m = result(&run_id, "ok", Some(&display));
            m.insert("delivery".into(), pending());
            if !o.reply.is_empty() {
                m.insert("reply".into(), json!(o.reply));
            }
            Value::Object(m)
        }
        Some(o) => {
            let mut m = result(&run_id, "error", Some(&display));
            m.insert(
                "error".into(),
                json!(o.error.unwrap_or_else(|| "agent error".to_string())),
            );
            // The message reached the target; the failed run means no exchange follows.
            m.insert(
                "delivery".into(),
                json!({ "status": "skipped", "mode": "announce" }),
            );
            Value::Object(m)
        }
    })
}

/// Reference §5.2 step 2: a label, optionally under another agent.
async fn by_label(
    shared: &Context,
    guard: &Guard,
    label: &str,
    agent_param: Option<&str>,
) -> Result<Result<SessionKey, (&'static str, String)>, ToolError> {
    let requested = agent_param.map(normalize_agent_id);
    if let Some(agent) = &requested
        && agent != &guard.requester_agent
    {
        if guard.restricted {
            return Ok(Err((
                "forbidden",
                "Sandboxed sessions_send label lookup is limited to this agent".into(),
            )));
        }
        if !guard.agent_to_agent.enabled {
            return Ok(Err(("forbidden", Action::Send.agent_to_agent_disabled().into())));
        }
        if !guard.agent_to_agent.allows(&guard.requester_agent, agent) {
            return Ok(Err(("forbidden", Action::Send.agent_to_agent_denied().into())));
        }
    }
    let default_agent = shared.store().scheme().default_agent.clone();
    let found = shared
        .store()
        .keys_by_label(label).await?
        .into_iter()
        .filter(|k| {
            requested
                .as_deref()
                .is_none_or(|a| k.agent_id(&default_agent) == a)
        })
        .find(|k| !guard.restricted || guard.in_tree(k));
    Ok(match found {
        Some(k) => Ok(k),
        None if guard.restricted => Err((
            "forbidden",
            "Session not visible from this sandboxed agent session.".into(),
        )),
        None => Err(("error", format!("No session found with label: {label}"))),
    })
}

/// DESIGN §2: a send into a session whose policy denies is refused, saying how to change it.
fn refused_by_policy(
    shared: &Context,
    target: &SessionKey,
    entry: &SessionEntry,
    display: &str,
    requester: &SessionKey,
) -> Option<String> {
    let decision = shared.judge_policy(target, entry, SendKind::Send, Some(requester));
    (!decision.is_allowed()).then(|| {
        format!(
            "{SEND_POLICY_REFUSAL}: {display} does not accept sends: {}. The owner can allow it with \"/send on\" in that session or `switchboard sessions patch {display} --send-policy allow`.",
            decision.source
        )
    })
}
