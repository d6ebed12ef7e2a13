//! Runs: one agent turn on one session, executed on that session's serial lane, recorded in
//! the `runs` table and the transcript, announced as events, and awaitable with a timeout
//! while it goes on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::Engine;
use super::events::EngineEvent;
use super::key::SessionKey;
use super::storage::StorageError;
use super::storage::runlog::{self, NewRun, RunEnd};
use super::store::now_ms;
use super::tools::{ToolContext, ToolError};
use crate::agent::{self, Agent, AgentError, BoxFuture, Reply, Step, ToolRunner, Turn};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Ok,
    Error,
    Timeout,
    Aborted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Aborted => "aborted",
        }
    }
}

/// A finished run: its status, the reply text (empty when none) and, on failure, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub reply: String,
    pub error: Option<String>,
}

/// The chain of agent-to-agent sends a message belongs to: its id and how many sends deep
/// it is. Carried in provenance so loops across three or more agents can be cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub id: String,
    pub hop: u32,
}

/// Whether a run takes its session's lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Wait for the session's lane: runs on one session never overlap.
    Own,
    /// Run inside a caller that already holds this session's lane (a session sending to
    /// itself, or to a session waiting on it): waiting would deadlock.
    Nested,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub key: SessionKey,
    pub step: Step,
    pub round: u32,
    /// The other party of an agent-to-agent exchange.
    pub from: Option<SessionKey>,
    /// What the agent sees as the incoming message.
    pub text: String,
    /// Context injected for the agent (the spec's agent-to-agent lines).
    pub context: Option<String>,
    /// A user message to record once the run holds its lane (inter-session messages); an
    /// external message is recorded on arrival instead, so this is `None` for those.
    pub inbound: Option<Value>,
    pub flow_id: Option<String>,
    /// The chain this run's incoming message belongs to; tool calls made in the run
    /// continue it.
    pub chain: Option<Chain>,
    pub lane: Lane,
    /// Deliver a non-empty reply to the session's channel (replies to external messages).
    pub deliver: bool,
    /// Sessions blocked waiting on this run (so a send back to them runs nested).
    pub waiting: Vec<SessionKey>,
    pub sandboxed: bool,
}

impl RunRequest {
    /// A run answering a message that already sits in the transcript.
    pub fn reply_to(key: SessionKey, text: impl Into<String>) -> RunRequest {
        RunRequest {
            key,
            step: Step::Message,
            round: 0,
            from: None,
            text: text.into(),
            context: None,
            inbound: None,
            flow_id: None,
            chain: None,
            lane: Lane::Own,
            deliver: true,
            waiting: Vec::new(),
            sandboxed: false,
        }
    }
}

/// A started run: its id, and a way to wait for it.
#[derive(Debug, Clone)]
pub struct RunHandle {
    pub run_id: String,
    rx: watch::Receiver<Option<RunOutcome>>,
}

impl RunHandle {
    /// Wait until the run ends. A run whose task vanished reads as aborted.
    pub async fn wait(&mut self) -> RunOutcome {
        match self.rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_else(vanished),
            Err(_) => vanished(),
        }
    }

    /// Wait at most `limit`; `None` means the run is still going (and goes on).
    pub async fn wait_for(&mut self, limit: Duration) -> Option<RunOutcome> {
        tokio::time::timeout(limit, self.wait()).await.ok()
    }
}

fn vanished() -> RunOutcome {
    RunOutcome {
        status: RunStatus::Aborted,
        reply: String::new(),
        error: Some("the run was cut off before it finished".into()),
    }
}

/// Per-engine run machinery: lanes and agent backends.
#[derive(Default)]
pub(crate) struct Runner {
    lanes: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    agents: std::sync::Mutex<HashMap<String, Arc<dyn Agent>>>,
}

impl Runner {
    fn lane(&self, key: &SessionKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes.entry(key.to_string()).or_default().clone()
    }

    /// Forget a lane nobody holds or waits for, so the map stays as small as the activity.
    fn release_lane(&self, key: &SessionKey, lane: Arc<tokio::sync::Mutex<()>>) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        // Two references: the map's and `lane`. Checked under the map lock, so nobody can
        // pick it up in between.
        if Arc::strong_count(&lane) == 2 {
            lanes.remove(key.as_str());
        }
    }

    fn agent(&self, config: &crate::config::Config, agent_id: &str) -> Arc<dyn Agent> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        agents
            .entry(agent_id.to_string())
            .or_insert_with(|| Arc::from(agent::backend_for(config, agent_id)))
            .clone()
    }
}

impl Engine {
    /// Start a run; it proceeds in the background (tracked: `Engine::idle` waits for it).
    pub fn start_run(&self, req: RunRequest) -> RunHandle {
        self.start_run_with_id(uuid::Uuid::new_v4().to_string(), req)
    }

    /// `start_run` with an id chosen by the caller (recorded elsewhere before the run).
    pub fn start_run_with_id(&self, run_id: String, req: RunRequest) -> RunHandle {
        let (tx, rx) = watch::channel(None);
        let engine = self.clone();
        let id = run_id.clone();
        self.tracker().spawn(async move {
            let outcome = engine.execute(&id, req).await;
            let _ = tx.send(Some(outcome));
        });
        RunHandle { run_id, rx }
    }

    async fn execute(&self, run_id: &str, req: RunRequest) -> RunOutcome {
        let lane = match req.lane {
            Lane::Own => Some(self.runner().lane(&req.key)),
            Lane::Nested => None,
        };
        let guard = match &lane {
            Some(l) => Some(l.clone().lock_owned().await),
            None => None,
        };
        let outcome = match self.execute_in_lane(run_id, &req).await {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(run_id, key = %req.key, error = %e, "run failed in storage");
                let message = format!("storage error: {e}");
                let _ = self
                    .close_run(run_id, &req, RunStatus::Error, "", Some(&message), None, 0)
                    .await;
                RunOutcome {
                    status: RunStatus::Error,
                    reply: String::new(),
                    error: Some(message),
                }
            }
        };
        drop(guard);
        if let Some(lane) = lane {
            self.runner().release_lane(&req.key, lane);
        }
        outcome
    }

    async fn execute_in_lane(
        &self,
        run_id: &str,
        req: &RunRequest,
    ) -> Result<RunOutcome, StorageError> {
        let default_agent = self.store().scheme().default_agent.clone();
        let agent_id = req.key.agent_id(&default_agent).to_string();
        let started = now_ms();
        let step = step_name(req.step);
        {
            let (run, key, agent, flow) = (
                run_id.to_string(),
                req.key.to_string(),
                agent_id.clone(),
                req.flow_id.clone(),
            );
            let owner = self.instance_id().to_string();
            let round = req.round;
            self.store()
                .storage()
                .write(move |c| {
                    runlog::insert_run(
                        c,
                        &NewRun {
                            run_id: &run,
                            session_key: &key,
                            agent_id: &agent,
                            step,
                            round,
                            flow_id: flow.as_deref(),
                            owner: &owner,
                            started_at: started,
                        },
                    )
                })
                .await?;
        }
        self.events().emit(EngineEvent::RunStarted {
            run_id: run_id.to_string(),
            key: req.key.to_string(),
            agent_id: agent_id.clone(),
            step: step.to_string(),
            round: req.round,
            flow_id: req.flow_id.clone(),
        });
        if let Some(inbound) = &req.inbound {
            self.store()
                .append_message(&req.key, inbound.clone())
                .await?;
        }
        let turn = Turn {
            session_key: req.key.to_string(),
            agent_id: agent_id.clone(),
            step: req.step,
            round: req.round,
            from: req.from.as_ref().map(|k| k.to_string()),
            text: req.text.clone(),
            context: req.context.clone(),
        };
        let tools = RunTools {
            engine: self.clone(),
            ctx: ToolContext {
                requester: req.key.clone(),
                sandboxed: req.sandboxed,
                chain: req.chain.clone(),
                waiting: req.waiting.clone(),
                run_id: Some(run_id.to_string()),
            },
        };
        let backend = self.runner().agent(self.config(), &agent_id);
        let result = backend.run(&turn, &tools).await;
        let meta = json!({
            "runId": run_id,
            "step": step,
            "round": req.round,
            "flowId": req.flow_id,
        });
        let (status, reply, error, usage) = match result {
            Ok(Reply { text, usage }) => {
                if !text.is_empty() || usage.is_some() {
                    let message = assistant_message(&agent_id, &text, usage, meta, None);
                    self.store().append_message(&req.key, message).await?;
                }
                (RunStatus::Ok, text, None, usage)
            }
            Err(e) => {
                let text = match &e {
                    AgentError::Failed(m) => m.clone(),
                    other => other.to_string(),
                };
                let message = assistant_message(&agent_id, "", None, meta, Some(&text));
                self.store().append_message(&req.key, message).await?;
                (RunStatus::Error, String::new(), Some(text), None)
            }
        };
        if let Some(u) = usage
            && (u.input > 0 || u.output > 0)
        {
            self.store()
                .patch(&req.key, move |e| {
                    let input = e.input_tokens.unwrap_or(0) + u.input;
                    let output = e.output_tokens.unwrap_or(0) + u.output;
                    e.input_tokens = Some(input);
                    e.output_tokens = Some(output);
                    e.total_tokens = Some(input + output);
                    Ok(())
                })
                .await?;
        }
        let tokens = usage.map(|u| (u.input, u.output));
        self.close_run(
            run_id,
            req,
            status,
            &reply,
            error.as_deref(),
            tokens,
            started,
        )
        .await?;
        if req.deliver
            && status == RunStatus::Ok
            && !reply.trim().is_empty()
            && let Err(e) = self
                .deliver(&req.key, "reply", reply.trim(), Some(run_id), None)
                .await
        {
            tracing::warn!(run_id, error = %e, "reply delivery failed");
        }
        Ok(RunOutcome {
            status,
            reply,
            error,
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn close_run(
        &self,
        run_id: &str,
        req: &RunRequest,
        status: RunStatus,
        reply: &str,
        error: Option<&str>,
        tokens: Option<(u64, u64)>,
        started: i64,
    ) -> Result<(), StorageError> {
        let ended = now_ms();
        let (run, reply_s, error_s) = (
            run_id.to_string(),
            (!reply.is_empty()).then(|| reply.to_string()),
            error.map(str::to_string),
        );
        let closed = self
            .store()
            .storage()
            .write(move |c| {
                runlog::finish_run(
                    c,
                    &run,
                    &RunEnd {
                        status: status.as_str(),
                        ended_at: ended,
                        error: error_s.as_deref(),
                        reply: reply_s.as_deref(),
                        tokens_in: tokens.map(|t| t.0),
                        tokens_out: tokens.map(|t| t.1),
                    },
                )
            })
            .await?;
        if closed {
            self.events().emit(EngineEvent::RunEnded {
                run_id: run_id.to_string(),
                key: req.key.to_string(),
                status: status.as_str().to_string(),
                reply: (!reply.is_empty()).then(|| reply.to_string()),
                error: error.map(str::to_string),
                duration_ms: if started > 0 { ended - started } else { 0 },
                tokens_in: tokens.map(|t| t.0),
                tokens_out: tokens.map(|t| t.1),
                flow_id: req.flow_id.clone(),
            });
        }
        Ok(())
    }
}

pub(crate) fn step_name(step: Step) -> &'static str {
    match step {
        Step::Message => "message",
        Step::Reply => "reply",
        Step::Announce => "announce",
        Step::Subagent => "subagent",
        Step::SubagentAnnounce => "subagent-announce",
    }
}

/// An assistant message in OpenClaw's shape; `error` makes it a failed turn.
fn assistant_message(
    agent_id: &str,
    text: &str,
    usage: Option<agent::Usage>,
    meta: Value,
    error: Option<&str>,
) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let content = if text.is_empty() {
        json!([])
    } else {
        json!([{ "type": "text", "text": text }])
    };
    m.insert("content".into(), content);
    m.insert("api".into(), json!("scripted"));
    m.insert("provider".into(), json!("switchboard"));
    m.insert("model".into(), json!(format!("scripted/{agent_id}")));
    if let Some(u) = usage {
        m.insert(
            "usage".into(),
            json!({
                "input": u.input,
                "output": u.output,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": u.input + u.output,
                "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 },
            }),
        );
    }
    match error {
        Some(e) => {
            m.insert("stopReason".into(), json!("error"));
            m.insert("errorMessage".into(), json!(e));
        }
        None => {
            m.insert("stopReason".into(), json!("stop"));
        }
    }
    m.insert("timestamp".into(), json!(now_ms()));
    m.insert("__switchboard".into(), meta);
    Value::Object(m)
}

/// Session tools as a run's session calls them: each call is recorded as an assistant
/// `toolCall` plus a `toolResult`, as OpenClaw records them.
struct RunTools {
    engine: Engine,
    ctx: ToolContext,
}

impl ToolRunner for RunTools {
    fn call<'a>(&'a self, name: &'a str, args: &'a Value) -> BoxFuture<'a, Value> {
        Box::pin(async move {
            let call_id = format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
            let key = &self.ctx.requester;
            let call = json!({
                "role": "assistant",
                "content": [{ "type": "toolCall", "id": call_id, "name": name, "arguments": args }],
                "api": "scripted",
                "provider": "switchboard",
                "stopReason": "toolUse",
                "timestamp": now_ms(),
                "__switchboard": { "runId": self.ctx.run_id },
            });
            if let Err(e) = self.engine.store().append_message(key, call).await {
                tracing::warn!(error = %e, "could not record a tool call");
            }
            let (result, is_error) = match self.engine.call_tool(name, args, &self.ctx).await {
                Ok(v) => (v, false),
                Err(ToolError::Input(e)) => {
                    (json!({ "status": "error", "error": e.to_string() }), true)
                }
                Err(ToolError::Storage(e)) => (
                    json!({ "status": "error", "error": format!("storage error: {e}") }),
                    true,
                ),
            };
            let text = serde_json::to_string_pretty(&result).unwrap_or_default();
            let record = json!({
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{ "type": "text", "text": text }],
                "details": result,
                "isError": is_error,
                "timestamp": now_ms(),
            });
            if let Err(e) = self.engine.store().append_message(key, record).await {
                tracing::warn!(error = %e, "could not record a tool result");
            }
            result
        })
    }
}
