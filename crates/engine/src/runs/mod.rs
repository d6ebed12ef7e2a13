//! Runs: one agent turn on one session, executed on that session's serial lane, recorded in
//! the `runs` table and the transcript, announced as events, and awaitable with a timeout
//! while it goes on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{oneshot, watch};

use crate::context::Context;
use crate::delivery::{Delivered, Delivery};
use crate::events::EngineEvent;
use switchboard_types::key::SessionKey;
use crate::session::store::PendingAppend;
use switchboard_store::{
    NewExchange, NewLine, NewRunRecord, PendingWrite, RunEnding, RunStart, RunWrite, StoreError,
    StoreErrorKind,
};
use crate::session::store::now_ms;
use crate::tools::context::{ToolContext, ToolError, ToolHost};
// Kept at its old path: callers name `runs::Chain`.
pub use crate::chain::Chain;

// A session's lanes and its history windows: parts of executing runs.
internal! {
    mod history_cache;
    mod lane;
}
use crate::agent::{
    self, Agent, AgentError, BoxFuture, ModelRef, Provenance, Reply, Step, ToolRunner, Turn,
};
use switchboard_types::config::ThinkingLevel;
pub use switchboard_types::api::RunStatus;
use switchboard_types::api::{ApiError, ExchangeEnd, RunResult, SendKind};

/// A finished run: its status, the reply text (empty when none) and, on failure, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub reply: String,
    pub error: Option<String>,
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
    pub exchange_id: Option<String>,
    /// The chain this run's incoming message belongs to; tool calls made in the run
    /// continue it.
    pub chain: Option<Chain>,
    pub lane: Lane,
    /// Deliver a non-empty reply to the session's channel (replies to external messages).
    pub deliver: bool,
    /// Sessions blocked waiting on this run (so a send back to them runs nested).
    pub waiting: Vec<SessionKey>,
    pub sandboxed: bool,
    /// For the primary run of a send: the exchange, recorded with the run's start.
    pub exchange_start: Option<ExchangeStart>,
    /// For an exchange's last run (the announce): why the exchange ended, recorded with
    /// the run's end.
    pub exchange_end: Option<ExchangeEnd>,
    /// Stop the turn (outcome `timeout`) when it runs longer than this.
    pub timeout: Option<Duration>,
    /// The caller already committed the run row (`running`, this instance) and the inbound
    /// message, with whatever else must be atomic with them (a spawn and its child).
    pub start_recorded: bool,
}

/// An exchange as its primary run records it.
#[derive(Debug, Clone)]
pub struct ExchangeStart {
    pub exchange_id: String,
    pub chain_id: String,
    pub hop: u32,
    pub requester: String,
    pub message: String,
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
            exchange_id: None,
            chain: None,
            lane: Lane::Own,
            deliver: true,
            waiting: Vec::new(),
            sandboxed: false,
            exchange_start: None,
            exchange_end: None,
            timeout: None,
            start_recorded: false,
        }
    }
}

/// A started run: its id, and a way to wait for it.
#[derive(Debug, Clone)]
pub struct RunHandle {
    pub run_id: String,
    /// The outcome once its record has committed.
    rx: watch::Receiver<Option<RunOutcome>>,
    /// The outcome as soon as its record is submitted to the writer (see `wait_known`).
    known: watch::Receiver<Option<RunOutcome>>,
}

impl RunHandle {
    /// Wait until the run ends and its outcome is committed. A run whose task vanished
    /// reads as aborted.
    pub async fn wait(&mut self) -> RunOutcome {
        wait_on(&mut self.rx).await
    }

    /// Wait at most `limit`; `None` means the run is still going (and goes on).
    pub async fn wait_for(&mut self, limit: Duration) -> Option<RunOutcome> {
        tokio::time::timeout(limit, self.wait()).await.ok()
    }

    /// Like `wait_for`, but resolves as soon as the outcome is queued for commit. For the
    /// engine's own next step (the next ping-pong round), never for an answer to a caller:
    /// the writer commits in order, so whatever the next step writes cannot outlive this.
    pub(crate) async fn wait_known(&mut self, limit: Duration) -> Option<RunOutcome> {
        tokio::time::timeout(limit, wait_on(&mut self.known))
            .await
            .ok()
    }
}

async fn wait_on(rx: &mut watch::Receiver<Option<RunOutcome>>) -> RunOutcome {
    match rx.wait_for(Option::is_some).await {
        Ok(v) => v.clone().unwrap_or_else(vanished),
        Err(_) => vanished(),
    }
}

fn vanished() -> RunOutcome {
    RunOutcome {
        status: RunStatus::Aborted,
        reply: String::new(),
        error: Some("the run was cut off before it finished".into()),
    }
}

/// The runs service: starts runs on their sessions' lanes, executes their turns, records
/// them, and answers for the ones still going. Owns the run machinery (`Runner`) and the
/// live handles; reaches the rest of the engine only through the shared context, the
/// delivery service (a reply to a channel message) and the `ToolHost` a run is started
/// with (the session tools, which in turn start exchanges and spawns).
pub struct Runs {
    ctx: Arc<Context>,
    delivery: Delivery,
    runner: Runner,
    /// Runs this engine is executing, by id, for `SessionsApi::wait_run`.
    live: LiveRuns,
}

/// The runs this engine is executing, by id (removed as each ends).
#[derive(Default)]
pub(crate) struct LiveRuns(std::sync::Mutex<HashMap<String, RunHandle>>);

impl LiveRuns {
    pub(crate) fn get(&self, run_id: &str) -> Option<RunHandle> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    fn insert(&self, handle: &RunHandle) {
        let mut runs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        runs.insert(handle.run_id.clone(), handle.clone());
    }

    fn remove(&self, run_id: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
    }
}

/// Runs that ended but whose end could not be recorded (a full or failing disk), newest
/// last: their handles stay in `LiveRuns`, so `wait_run` answers with the failure instead of
/// reading a row that still says `running`. The next start records them (crash recovery
/// closes a dead owner's runs). Bounded: past `MAX_UNRECORDED` the oldest are forgotten.
#[derive(Default)]
pub(crate) struct Unrecorded(std::sync::Mutex<std::collections::VecDeque<String>>);

/// The most unrecorded run ends kept answerable at once.
const MAX_UNRECORDED: usize = 10_000;

impl Unrecorded {
    /// Keep `run_id` answerable; returns the run it pushed out, if any.
    fn keep(&self, run_id: &str) -> Option<String> {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.push_back(run_id.to_string());
        (q.len() > MAX_UNRECORDED).then(|| q.pop_front()).flatten()
    }
}

/// Per-engine run machinery: lanes, agent backends, and which sessions have a run going.
#[derive(Default)]
pub(crate) struct Runner {
    lanes: crate::runs::lane::Lanes,
    agents: std::sync::Mutex<HashMap<String, Arc<dyn Agent>>>,
    /// One HTTP client and request limiter per model provider, shared by every agent and
    /// model override on it (`models.providers.<id>.maxConcurrent`).
    providers: agent::openai::Providers,
    running: std::sync::Mutex<HashMap<String, usize>>,
    /// Runs whose turn is under way, by run id: their session and the way to abort them.
    turns: std::sync::Mutex<HashMap<String, (String, oneshot::Sender<()>)>>,
    /// Model turns' history windows, read incrementally.
    history: crate::runs::history_cache::HistoryCache,
    /// Ended runs whose end is not recorded yet, kept answerable.
    unrecorded: Unrecorded,
}

/// A run's turn registered as abortable until dropped or `finish`ed.
struct Abortable<'a> {
    runner: &'a Runner,
    run_id: String,
}

impl Abortable<'_> {
    /// The turn is over: false when an abort claimed the run first (it then ends aborted,
    /// whatever the turn produced, so the abort's answer is never wrong).
    fn finish(self) -> bool {
        let mut turns = self.runner.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.remove(&self.run_id).is_some()
    }
}

impl Drop for Abortable<'_> {
    fn drop(&mut self) {
        let mut turns = self.runner.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.remove(&self.run_id);
    }
}

/// Counts a run as going on its session until dropped.
struct Going<'a> {
    runner: &'a Runner,
    key: String,
}

impl Drop for Going<'_> {
    fn drop(&mut self) {
        let mut running = self
            .runner
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.key);
            }
        }
    }
}

impl Runner {
    fn going(&self, key: &SessionKey) -> Going<'_> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        *running.entry(key.to_string()).or_default() += 1;
        Going {
            runner: self,
            key: key.to_string(),
        }
    }

    fn abortable(&self, run_id: &str, key: &SessionKey) -> (Abortable<'_>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.insert(run_id.to_string(), (key.to_string(), tx));
        let guard = Abortable {
            runner: self,
            run_id: run_id.to_string(),
        };
        (guard, rx)
    }

    /// Abort the turns under way on session `key` (only `run_id`, when given): each is
    /// stopped where it is, as a run timeout stops it. Runs still queued on the session's
    /// lane are left alone (as OpenClaw's `chat.abort`): they start once the lane is free.
    /// Returns the aborted run ids, oldest first.
    pub(crate) fn abort(&self, key: &str, run_id: Option<&str>) -> Vec<String> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ids: Vec<String> = turns
            .iter()
            .filter(|(id, (k, _))| k == key && run_id.is_none_or(|r| r == id.as_str()))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        for id in &ids {
            if let Some((_, tx)) = turns.remove(id) {
                // The turn may be ending this very moment; its `finish` then sees the claim.
                let _ = tx.send(());
            }
        }
        ids
    }

    /// Whether a run of `key`'s agent is executing in this engine now.
    pub(crate) fn is_running(&self, key: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.contains_key(key)
    }

    fn agent(&self, config: &switchboard_types::config::Config, agent_id: &str) -> Arc<dyn Agent> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        agents
            .entry(agent_id.to_string())
            .or_insert_with(|| Arc::from(agent::backend_for(config, &self.providers, agent_id)))
            .clone()
    }
}

impl Runs {
    pub(crate) fn new(ctx: Arc<Context>, delivery: Delivery) -> Runs {
        Runs {
            ctx,
            delivery,
            runner: Runner::default(),
            live: LiveRuns::default(),
        }
    }

    pub(crate) fn runner(&self) -> &Runner {
        &self.runner
    }

    /// A run this engine is executing (or whose end is not recorded yet).
    pub(crate) fn live(&self, run_id: &str) -> Option<RunHandle> {
        self.live.get(run_id)
    }

    /// How run `run_id` ended, waiting at most `limit` for one this engine is executing
    /// (`SessionsApi::wait_run`).
    pub(crate) async fn result(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        let handle = self.live.get(run_id);
        if let Some(mut h) = handle {
            return Ok(match h.wait_for(limit).await {
                Some(o) => RunResult {
                    run_id: run_id.to_string(),
                    status: o.status,
                    reply: o.reply,
                    error: o.error,
                },
                None => still_running(run_id),
            });
        }
        // Not a run of this engine (or long finished): the record says how it ended.
        let Some(row) = self.ctx.store().backend().get_run(run_id).await? else {
            return Err(ApiError::NotFound(format!("no run {run_id}")));
        };
        if row.status == RunStatus::Running {
            return Ok(still_running(run_id));
        }
        Ok(RunResult {
            run_id: run_id.to_string(),
            status: row.status,
            reply: row.reply.clone().unwrap_or_default(),
            error: row.error.clone(),
        })
    }

    /// Start a run; it proceeds in the background (tracked: `Engine::idle` waits for it),
    /// calling session tools through `tools`.
    pub(crate) fn start(self: &Arc<Self>, req: RunRequest, tools: &Arc<dyn ToolHost>) -> RunHandle {
        // Time-ordered (v7): a burst of new runs lands on the same last B-tree page.
        self.start_with_id(uuid::Uuid::now_v7().to_string(), req, tools)
    }

    /// `start` with an id chosen by the caller (recorded elsewhere before the run).
    pub(crate) fn start_with_id(
        self: &Arc<Self>,
        run_id: String,
        req: RunRequest,
        tools: &Arc<dyn ToolHost>,
    ) -> RunHandle {
        let tools = tools.clone();
        let (tx, rx) = watch::channel(None);
        let (known_tx, known) = watch::channel(None);
        let runs = self.clone();
        let id = run_id.clone();
        let what = format!("run {run_id} on {} ({})", req.key, req.step.as_str());
        // The place in the session's line is taken now, so runs started one after another
        // run in that order whatever order their tasks get going in.
        let place = match req.lane {
            Lane::Own => Some(self.runner.lanes.enter(req.key.as_str())),
            Lane::Nested => None,
        };
        let handle = RunHandle { run_id, rx, known };
        self.live.insert(&handle);
        self.ctx.tracker().spawn(what, async move {
            let (outcome, recorded) = runs.execute(&id, req, place, &known_tx, tools).await;
            // Normally sent already; a failure on the way may have skipped it.
            known_tx.send_if_modified(|k| {
                if k.is_none() {
                    *k = Some(outcome.clone());
                    true
                } else {
                    false
                }
            });
            let _ = tx.send(Some(outcome));
            if recorded {
                runs.live.remove(&id);
            } else if let Some(old) = runs.runner.unrecorded.keep(&id) {
                runs.live.remove(&old);
            }
        });
        handle
    }

    async fn execute(
        self: &Arc<Self>,
        run_id: &str,
        req: RunRequest,
        place: Option<crate::runs::lane::Place>,
        known: &watch::Sender<Option<RunOutcome>>,
        tools: Arc<dyn ToolHost>,
    ) -> (RunOutcome, bool) {
        let turn = match place {
            Some(p) => p.turn().await,
            None => None,
        };
        let going = self.runner.going(&req.key);
        // Across nodes too, one run at a time in a session (a store without nodes: at once).
        let across = match &turn {
            Some(_) => self.claim_node_lane(&req.key).await.map(Some),
            None => Ok(None),
        };
        let executed = match &across {
            Ok(_) => self.execute_in_lane(run_id, &req, known, tools).await,
            Err(e) => Err(e.clone()),
        };
        if let Ok(Some(key)) = &across {
            self.ctx
                .store()
                .backend()
                .release_lane(key, self.ctx.instance_id())
                .await;
        }
        let ended = match executed {
            Ok(o) => (o, true),
            Err(e) => {
                tracing::error!(run_id, key = %req.key, error = %e, "run failed in storage");
                let message = format!("storage error: {e}");
                let recorded = self.close_run_failed(run_id, &req, &message).await;
                let outcome = RunOutcome {
                    status: RunStatus::Error,
                    reply: String::new(),
                    error: Some(message),
                };
                (outcome, recorded)
            }
        };
        drop(going);
        drop(turn);
        ended
    }

    /// Take `key`'s lane across nodes, waiting while another live node runs in it; the key
    /// to release afterwards.
    async fn claim_node_lane(&self, key: &SessionKey) -> Result<String, StoreError> {
        let mut pause = NODE_LANE_POLL;
        loop {
            match self
                .ctx
                .store()
                .backend()
                .claim_lane(key.as_str(), self.ctx.instance_id())
                .await?
            {
                switchboard_store::nodes::LaneClaim::Held => return Ok(key.as_str().to_string()),
                switchboard_store::nodes::LaneClaim::Busy { owner } => {
                    tracing::debug!(key = %key, owner, "waiting for another node's run in this session");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(NODE_LANE_POLL_MAX);
                }
            }
        }
    }

    async fn execute_in_lane(
        self: &Arc<Self>,
        run_id: &str,
        req: &RunRequest,
        known: &watch::Sender<Option<RunOutcome>>,
        host: Arc<dyn ToolHost>,
    ) -> Result<RunOutcome, StoreError> {
        let default_agent = self.ctx.store().scheme().default_agent.clone();
        let agent_id = req.key.agent_id(&default_agent).to_string();
        let started = now_ms();
        let step = req.step.as_str();
        let record = Arc::new(StartRecord::new(
            self.clone(),
            run_id,
            req.clone(),
            agent_id.clone(),
            started,
        ));
        if req.start_recorded {
            record.emit_started();
        }
        let turn = turn_of(req, &agent_id);
        let backend = self.backend(req, &agent_id).await?;
        let model = backend.model_ref(&agent_id);
        let tools = RunTools {
            runs: self.clone(),
            host,
            ctx: ToolContext {
                requester: req.key.clone(),
                sandboxed: req.sandboxed,
                chain: req.chain.clone(),
                waiting: req.waiting.clone(),
                run_id: Some(run_id.to_string()),
            },
            record: record.clone(),
            agent_id: agent_id.clone(),
            model: model.clone(),
            text: req.text.clone(),
            inbound: req.inbound.clone(),
            unrecorded: req.step == Step::Announce,
        };
        let ended = self
            .run_turn(run_id, req, backend.as_ref(), &turn, &tools, &record)
            .await?;
        let meta = json!({
            "runId": run_id,
            "step": step,
            "round": req.round,
            "flowId": req.exchange_id,
        });
        let TurnResult {
            status,
            reply,
            error,
            usage,
            message,
        } = turn_result(ended, &model, meta, req.timeout);
        let tokens = usage.map(|u| (u.input, u.output));
        let ended = now_ms();
        let end = OwnedEnd {
            status,
            ended_at: ended,
            error: error.clone(),
            reply: (!reply.is_empty()).then(|| reply.clone()),
            tokens,
        };
        let outcome = RunOutcome {
            status,
            reply: reply.clone(),
            error: error.clone(),
        };
        let exchange_end = req.exchange_id.clone().zip(req.exchange_end);
        // The turn is over, so nothing else writes the start now; one still on its way
        // (queued by a tool call the run timeout cut off) is waited for first.
        let first_write = record.claim_for_end().await;
        // With the start not written yet: one commit for the whole run, start and end
        // together. Otherwise one commit for the end: the reply, the token totals, the outcome.
        let (start, mut lines): (_, Vec<NewLine>) = if first_write {
            let inbound = req.inbound.iter().cloned().map(NewLine::message).collect();
            (Some(record.start()), inbound)
        } else {
            (None, Vec::new())
        };
        lines.extend(message.map(NewLine::message));
        let write = RunWrite {
            key: req.key.clone(),
            run_id: run_id.to_string(),
            lines,
            start,
            end: Some(end.ending()),
            exchange_end,
            now: now_ms(),
        };
        let pending = self.submit_run_end(write);
        // Queued: the exchange may go on while the commit is under way.
        let _ = known.send(Some(outcome.clone()));
        let (_, closed) = pending.committed().await?;
        if first_write {
            record.emit_started();
        }
        if tokens.is_some_and(|t| t.0 > 0 || t.1 > 0) {
            self.ctx.events().emit(EngineEvent::SessionUpdated {
                key: req.key.to_string(),
            });
        }
        if closed {
            self.emit_run_ended(
                run_id,
                req,
                status,
                &reply,
                error.as_deref(),
                tokens,
                ended - started,
            );
        }
        if req.deliver && status == RunStatus::Ok {
            self.deliver_reply(run_id, req, &reply).await;
        }
        Ok(outcome)
    }

    /// Deliver a run's non-empty reply to its session's channel (a reply to a channel
    /// message); a failure is logged, the run has ended all the same.
    async fn deliver_reply(&self, run_id: &str, req: &RunRequest, reply: &str) {
        let reply = reply.trim();
        if reply.is_empty() {
            return;
        }
        match self
            .delivery
            .deliver(&req.key, SendKind::Reply, reply, Some(run_id), None)
            .await
        {
            // The reply stands in the transcript as if it reached the chat: a notice beside
            // it says it did not (the owner sees it; the model's context leaves notices out).
            Ok(Delivered::Blocked { reason }) => {
                let notice = not_delivered_notice(run_id, &reason);
                if let Err(e) = self.ctx.store().append(&req.key, vec![notice]).await {
                    tracing::warn!(run_id, error = %e, "cannot record the undelivered reply");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(run_id, error = %e, "reply delivery failed"),
        }
    }

    /// The agent backend a run of `agent_id` on `req.key` uses.
    async fn backend(
        &self,
        req: &RunRequest,
        agent_id: &str,
    ) -> Result<Arc<dyn Agent>, StoreError> {
    // A sub-agent's session may run on a model and thinking level of its own
    // (sessions_spawn's `model` and `thinking`), for every run in it.
    let overrides = if req.key.subagent_depth() > 0 {
        self.ctx.store()
            .get(&req.key)
            .await?
            .map(|s| (s.entry.model, s.entry.thinking_level))
            .unwrap_or_default()
    } else {
        (None, None)
    };
    Ok(match overrides {
        (None, None) => self.runner.agent(self.ctx.config(), agent_id),
        (model, thinking) => Arc::from(agent::backend_with_overrides(
            self.ctx.config(),
            &self.runner.providers,
            agent_id,
            model.as_deref(),
            thinking.as_deref().and_then(ThinkingLevel::parse),
        )),
    })
    }

    /// Run the turn, bounded by the run's timeout and the owner's abort; its start record
    /// is written once the turn outlasts `START_GRACE`.
    async fn run_turn(
        &self,
        run_id: &str,
        req: &RunRequest,
        backend: &dyn Agent,
        turn: &Turn,
        tools: &RunTools,
        record: &Arc<StartRecord>,
    ) -> Result<TurnEnd, StoreError> {
    let turn_ran = async {
        let turn_done = backend.run(turn, tools);
        tokio::pin!(turn_done);
        // A quick turn is recorded with one commit (start and end together); a turn
        // that takes longer gets its start recorded (and shown) after START_GRACE.
        let r = tokio::select! {
            r = &mut turn_done => r,
            () = tokio::time::sleep(START_GRACE) => {
                // The turn keeps running while its start commits: it may be waiting
                // for that very record itself (a tool call writes it first).
                let (r, written) = tokio::join!(&mut turn_done, record.write());
                written?;
                r
            }
        };
        Ok::<_, StoreError>(r)
    };
    // A run timeout (sessions_spawn's runTimeoutSeconds) or the owner's abort abandons
    // the turn where it is: dropping it drops a model request in flight.
    let (abortable, aborted) = self.runner.abortable(run_id, &req.key);
    let limited = async {
        match req.timeout {
            None => Ok(TurnEnd::Done(turn_ran.await?)),
            Some(limit) => match tokio::time::timeout(limit, turn_ran).await {
                Ok(r) => Ok(TurnEnd::Done(r?)),
                Err(_) => Ok::<_, StoreError>(TurnEnd::TimedOut),
            },
        }
    };
    let ended = tokio::select! {
        r = limited => r?,
        Ok(()) = aborted => TurnEnd::Aborted,
    };
    Ok(if abortable.finish() {
        ended
    } else {
        TurnEnd::Aborted
    })
    }

    /// Submit a write that ends a run. `SWITCHBOARD_FAILPOINT=run-end-storage-error` makes
    /// every one fail as a full disk would, with nothing written (tests of what a client
    /// waiting on such a run is told).
    fn submit_run_end(&self, write: RunWrite) -> PendingAppend<bool> {
        if crate::failpoint::active("run-end-storage-error") {
            let key = write.key.clone();
            let failed: PendingWrite<_> = Box::pin(async {
                Err(StoreError::new(
                    StoreErrorKind::Full,
                    "the disk holding the state folder is full (failpoint run-end-storage-error); the change was not saved. Free some space, then try again",
                ))
            });
            return self.ctx.store().pending(&key, failed);
        }
        self.ctx.store().submit_run(write)
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_run_ended(
        &self,
        run_id: &str,
        req: &RunRequest,
        status: RunStatus,
        reply: &str,
        error: Option<&str>,
        tokens: Option<(u64, u64)>,
        duration_ms: i64,
    ) {
        self.ctx.events().emit(EngineEvent::RunEnded {
            run_id: run_id.to_string(),
            key: req.key.to_string(),
            step: req.step,
            round: req.round,
            status,
            reply: (!reply.is_empty()).then(|| reply.to_string()),
            error: error.map(str::to_string),
            duration_ms,
            tokens_in: tokens.map(|t| t.0),
            tokens_out: tokens.map(|t| t.1),
            exchange_id: req.exchange_id.clone(),
        });
    }

    /// Record a run's failure when its normal end could not be written: its row and an
    /// error line in the transcript. When that cannot be written either (the disk is still
    /// full), the failure is announced all the same, so nobody waits on a run that has
    /// stopped; returns whether it was recorded (see `Unrecorded`).
    async fn close_run_failed(&self, run_id: &str, req: &RunRequest, message: &str) -> bool {
        let ended = now_ms();
        let (run, error) = (run_id.to_string(), message.to_string());
        let meta = json!({
            "runId": run_id, "step": req.step.as_str(), "round": req.round, "flowId": req.exchange_id,
        });
        let line = json!({
            "role": "assistant", "content": [], "stopReason": "error", "errorMessage": message,
            "timestamp": ended, "__switchboard": meta,
        });
        let closed = self
            .submit_run_end(RunWrite {
                key: req.key.clone(),
                run_id: run,
                lines: vec![NewLine::message(line)],
                start: None,
                end: Some(RunEnding {
                    status: RunStatus::Error,
                    ended_at: ended,
                    error: Some(error),
                    reply: None,
                    tokens: None,
                }),
                exchange_end: None,
                now: ended,
            })
            .committed()
            .await;
        let announce = match &closed {
            Ok((_, closed)) => *closed,
            Err(e) => {
                tracing::error!(run_id, error = %e,
                    "could not record a failed run's end either; it is answered as failed, and the next start records it");
                true
            }
        };
        if announce {
            self.emit_run_ended(run_id, req, RunStatus::Error, "", Some(message), None, 0);
        }
        closed.is_ok()
    }
}

/// What a run's start waiter is told when the committing task vanished.
const WRITER_GONE: &str = "the database writer has stopped";



/// What a turn's end comes to.
struct TurnResult {
    status: RunStatus,
    /// The reply text (empty when none).
    reply: String,
    error: Option<String>,
    usage: Option<agent::Usage>,
    /// The assistant line to record (none for an empty successful turn).
    message: Option<Value>,
}

/// The run's result from how its turn ended.
fn turn_result(
    ended: TurnEnd,
    model: &ModelRef,
    meta: Value,
    timeout: Option<Duration>,
) -> TurnResult {
    let failed = |status: RunStatus, text: String| TurnResult {
        status,
        reply: String::new(),
        message: Some(assistant_message(model, "", None, meta.clone(), Some(&text))),
        error: Some(text),
        usage: None,
    };
    match ended {
        TurnEnd::Aborted => failed(RunStatus::Aborted, ABORTED.to_string()),
        TurnEnd::TimedOut => {
            let secs = timeout.map(|d| d.as_secs()).unwrap_or_default();
            failed(
                RunStatus::Timeout,
                format!("the run timed out after {secs}s (runTimeoutSeconds) and was stopped"),
            )
        }
        TurnEnd::Done(Ok(Reply { text, usage })) => TurnResult {
            status: RunStatus::Ok,
            message: (!text.is_empty() || usage.is_some())
                .then(|| assistant_message(model, &text, usage, meta.clone(), None)),
            reply: text,
            error: None,
            usage,
        },
        TurnEnd::Done(Err(e)) => {
            let text = match &e {
                AgentError::Failed(m) => m.clone(),
                other => other.to_string(),
            };
            failed(RunStatus::Error, text)
        }
    }
}

/// The turn a run's agent is given.
fn turn_of(req: &RunRequest, agent_id: &str) -> Turn {
    Turn {
        session_key: req.key.to_string(),
        agent_id: agent_id.to_string(),
        step: req.step,
        round: req.round,
        from: req.from.as_ref().map(|k| k.to_string()),
        text: req.text.clone(),
        context: req.context.clone(),
        provenance: provenance(req),
    }
}

/// The origin of a run's incoming text when another session sent it: the provenance its
/// recorded message carries, or, for the steps whose message the run does not record
/// itself, the other party.
fn provenance(req: &RunRequest) -> Option<Provenance> {
    if let Some(p) = req.inbound.as_ref().and_then(Provenance::of_message) {
        return Some(p);
    }
    match (req.step, &req.from) {
        (Step::Announce, Some(from)) => Some(Provenance {
            source_session: from.to_string(),
            source_channel: None,
            source_tool: "sessions_send".into(),
        }),
        // The spawn exchange recorded the completion message; OpenClaw's channel and tool for it.
        (Step::SubagentAnnounce, Some(from)) => Some(Provenance {
            source_session: from.to_string(),
            source_channel: Some("internal".into()),
            source_tool: "subagent_announce".into(),
        }),
        _ => None,
    }
}

/// An assistant message in OpenClaw's shape; `error` makes it a failed turn.
fn assistant_message(
    model: &ModelRef,
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
    m.insert("api".into(), json!(model.api));
    m.insert("provider".into(), json!(model.provider));
    m.insert("model".into(), json!(model.model));
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

/// How a turn stopped.
enum TurnEnd {
    Done(Result<Reply, AgentError>),
    TimedOut,
    Aborted,
}

/// How soon a run waiting for another node's run in its session asks again, at first and
/// at most (a node's run holds the lane for as long as a model turn takes).
const NODE_LANE_POLL: std::time::Duration = std::time::Duration::from_millis(25);
const NODE_LANE_POLL_MAX: std::time::Duration = std::time::Duration::from_millis(400);

/// The error of a run the owner aborted (`SessionsApi::abort`), in its outcome and transcript.
pub(crate) const ABORTED: &str = "aborted by the owner";

/// How long a turn may take before its start is recorded on its own. Quicker turns are
/// recorded with a single commit; nothing acknowledged to anyone is lost if the process dies
/// inside the grace (an external message is recorded on arrival, a sent one lives in its
/// sender's transcript or the exchange row, and the waiting sender has not been answered yet).
const START_GRACE: Duration = Duration::from_millis(20);

/// Numbers the attempts to write a start record (see `StartState::Queued`).
static QUEUE_ATTEMPTS: AtomicU64 = AtomicU64::new(0);

/// A run's outcome, owned so a writer job can carry it.
#[derive(Debug, Clone)]
struct OwnedEnd {
    status: RunStatus,
    ended_at: i64,
    error: Option<String>,
    reply: Option<String>,
    tokens: Option<(u64, u64)>,
}

impl OwnedEnd {
    fn ending(&self) -> RunEnding {
        RunEnding {
            status: self.status,
            ended_at: self.ended_at,
            error: self.error.clone(),
            reply: self.reply.clone(),
            tokens: self.tokens,
        }
    }
}

/// The record of a run's start (exchange row, run row, inbound message), written at most once:
/// when the turn outlasts `START_GRACE`, before its first tool call, or with its end.
///
/// Several places may want it written at once (the grace timer and a tool call inside the
/// turn), and any of them may be dropped midway (a run timeout cuts the turn off). So no
/// lock is held while the record commits: the first caller queues it, a tracked task owns
/// the commit and publishes its outcome, and every caller waits on that outcome. A caller
/// that is never polled again can then block nobody.
struct StartRecord {
    runs: Arc<Runs>,
    run_id: String,
    req: RunRequest,
    agent_id: String,
    started_at: i64,
    state: std::sync::Mutex<StartState>,
    /// `RunStarted` (and `ExchangeStarted`) were emitted; they are emitted once.
    announced: AtomicBool,
}

/// Where the start record is.
enum StartState {
    /// Not queued: the end writes it (with one commit for both) unless something else
    /// queues it first.
    Unwritten,
    /// Queued; the receiver yields the commit's outcome. `attempt` tells a failed attempt
    /// from a later retry.
    Queued {
        attempt: u64,
        outcome: watch::Receiver<Option<Result<(), StoreError>>>,
    },
    /// Committed (or claimed by the run's end, which writes it with the end).
    Written,
}

impl StartRecord {
    fn new(
        runs: Arc<Runs>,
        run_id: &str,
        req: RunRequest,
        agent_id: String,
        started_at: i64,
    ) -> StartRecord {
        let state = if req.start_recorded {
            StartState::Written
        } else {
            StartState::Unwritten
        };
        StartRecord {
            runs,
            run_id: run_id.to_string(),
            req,
            agent_id,
            started_at,
            state: std::sync::Mutex::new(state),
            announced: AtomicBool::new(false),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, StartState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The rows of the start: the run and the exchange it opens, if any.
    fn start(&self) -> RunStart {
        let owner = self.runs.ctx.instance_id().to_string();
        let key = self.req.key.to_string();
        RunStart {
            run: NewRunRecord {
                run_id: self.run_id.clone(),
                session_key: key.clone(),
                agent_id: self.agent_id.clone(),
                step: self.req.step,
                round: self.req.round,
                exchange_id: self.req.exchange_id.clone(),
                owner: owner.clone(),
                started_at: self.started_at,
            },
            exchange: self.req.exchange_start.as_ref().map(|f| NewExchange {
                exchange_id: f.exchange_id.clone(),
                chain_id: f.chain_id.clone(),
                requester: f.requester.clone(),
                target: key,
                message: f.message.clone(),
                run_id: self.run_id.clone(),
                owner,
                started_at: self.started_at,
            }),
        }
    }

    /// Write the start now unless it already is; resolves once it has committed. Safe to
    /// call from several places at once and to drop midway (see the type's comment).
    async fn write(self: &Arc<Self>) -> Result<(), StoreError> {
        let mut outcome = {
            let mut state = self.state();
            match &*state {
                StartState::Written => return Ok(()),
                StartState::Queued { outcome, .. } => outcome.clone(),
                StartState::Unwritten => self.queue(&mut state),
            }
        };
        match outcome.wait_for(Option::is_some).await {
            Ok(done) => match &*done {
                Some(Ok(())) => Ok(()),
                Some(Err(e)) => Err(e.clone()),
                None => Err(StoreError::unavailable(WRITER_GONE)),
            },
            // The committing task is gone without a word: only a runtime shutting down.
            Err(_) => Err(StoreError::unavailable(WRITER_GONE)),
        }
    }

    /// Queue the start with the writer; a tracked task owns the commit: it records the
    /// outcome in `state` (and announces the run) before it publishes it to the waiters.
    fn queue(
        self: &Arc<Self>,
        state: &mut StartState,
    ) -> watch::Receiver<Option<Result<(), StoreError>>> {
        let inbound: Vec<NewLine> = self
            .req
            .inbound
            .iter()
            .cloned()
            .map(NewLine::message)
            .collect();
        let pending = self.runs.ctx.store().submit_run(RunWrite {
            key: self.req.key.clone(),
            run_id: self.run_id.clone(),
            lines: inbound,
            start: Some(self.start()),
            end: None,
            exchange_end: None,
            now: now_ms(),
        });
        let attempt = QUEUE_ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        *state = StartState::Queued {
            attempt,
            outcome: rx.clone(),
        };
        let record = self.clone();
        let what = format!("the start record of run {}", self.run_id);
        self.runs.ctx.tracker().spawn(what, async move {
            let result = pending.committed().await.map(|_| ());
            {
                let mut state = record.state();
                if matches!(&*state, StartState::Queued { attempt: a, .. } if *a == attempt) {
                    // A failed start wrote nothing (its job was rolled back): the next
                    // caller, or the end, writes it again.
                    *state = if result.is_ok() {
                        StartState::Written
                    } else {
                        StartState::Unwritten
                    };
                }
            }
            if let Err(e) = &result {
                tracing::warn!(run_id = %record.run_id, error = %e, "could not record a run's start");
            } else {
                record.emit_started();
            }
            let _ = tx.send(Some(result));
        });
        rx
    }

    /// For the run's end, once the turn is over: whether the end must write the start too
    /// (it was never written). A start still queued is waited for first.
    async fn claim_for_end(&self) -> bool {
        loop {
            let mut outcome = {
                let mut state = self.state();
                match &*state {
                    StartState::Written => return false,
                    StartState::Unwritten => {
                        *state = StartState::Written;
                        return true;
                    }
                    StartState::Queued { outcome, .. } => outcome.clone(),
                }
            };
            // Whatever the outcome, `state` has moved on once it is published.
            let _ = outcome.wait_for(Option::is_some).await;
        }
    }

    fn emit_started(&self) {
        if self.announced.swap(true, Ordering::AcqRel) {
            return;
        }
        let events = self.runs.ctx.events();
        if let Some(f) = &self.req.exchange_start {
            events.emit(EngineEvent::ExchangeStarted {
                exchange_id: f.exchange_id.clone(),
                chain_id: f.chain_id.clone(),
                hop: f.hop,
                requester: f.requester.clone(),
                target: self.req.key.to_string(),
                message: f.message.clone(),
                run_id: self.run_id.clone(),
                unattributed: false,
            });
        }
        events.emit(EngineEvent::RunStarted {
            run_id: self.run_id.clone(),
            key: self.req.key.to_string(),
            agent_id: self.agent_id.clone(),
            step: self.req.step,
            round: self.req.round,
            exchange_id: self.req.exchange_id.clone(),
        });
    }
}

/// Session tools as a run's session calls them: each call is recorded as an assistant
/// `toolCall` plus a `toolResult`, as OpenClaw records them.
struct RunTools {
    runs: Arc<Runs>,
    /// The session tools (the engine's composition).
    host: Arc<dyn ToolHost>,
    ctx: ToolContext,
    /// Written before the first call, so the transcript keeps its order.
    record: Arc<StartRecord>,
    /// The agent running the turn, named in its reply deltas.
    agent_id: String,
    /// The backend, named on the tool call lines.
    model: ModelRef,
    /// The turn's incoming text, which the history leaves out (the backend sends it itself).
    text: String,
    /// The incoming message as this run records it, if the run records it itself.
    inbound: Option<Value>,
    /// The incoming message is recorded by nobody (an announce step's prompt).
    unrecorded: bool,
}

/// Transcript lines a history read skips past at most, looking for the turn's own message
/// (messages queued behind it may follow it in the transcript).
const HISTORY_SCAN_EXTRA: usize = 8;

impl ToolRunner for RunTools {
    fn reply_delta(&self, step: u32, offset: usize, delta: &str) {
        let events = self.runs.ctx.events();
        // Nobody watching (a CLI command): nothing to build.
        if delta.is_empty() || !events.listening() {
            return;
        }
        events.emit(EngineEvent::ReplyDelta {
            run_id: self.ctx.run_id.clone().unwrap_or_default(),
            key: self.ctx.requester.to_string(),
            agent_id: self.agent_id.clone(),
            step,
            offset,
            delta: delta.to_string(),
        });
    }

    fn call<'a>(&'a self, name: &'a str, args: &'a Value) -> BoxFuture<'a, Value> {
        self.call_with_id(None, name, args)
    }

    fn allowed_tools(&self) -> Vec<&'static str> {
        self.host.allowed_tools(&self.ctx)
    }

    fn history(&self, limit: usize) -> BoxFuture<'_, Vec<Arc<Value>>> {
        Box::pin(async move {
            let key = &self.ctx.requester;
            let store = self.runs.ctx.store();
            let read = match store.get(key).await {
                Ok(Some(s)) => {
                    self.runs
                        .runner
                        .history
                        .tail(store, &s.entry.session_id, limit + HISTORY_SCAN_EXTRA)
                        .await
                }
                Ok(None) => Ok(Vec::new()),
                Err(e) => Err(e),
            };
            let lines = match read {
                Ok(rows) => rows,
                Err(e) => {
                    // The turn still runs, without its history.
                    tracing::warn!(key = %key, error = %e, "could not read a session's history");
                    return Vec::new();
                }
            };
            let mut messages: Vec<Arc<Value>> =
                lines.into_iter().filter(|m| !m.is_null()).collect();
            // The turn's own message, when already recorded, is where the history ends: the
            // backend sends it itself, and what was queued behind it comes later. One this run
            // records is found as recorded (its start may not be written yet: then it is not
            // there, and an older message with the same words must not cut the history short);
            // one recorded before the run (an external message, a sub-agent's completion) by
            // its text, the newest first.
            let own = match &self.inbound {
                Some(inbound) => messages.iter().rposition(|m| **m == *inbound),
                None if self.unrecorded => None,
                None => messages.iter().rposition(|m| is_user_text(m, &self.text)),
            };
            if let Some(at) = own {
                messages.truncate(at);
            }
            let skip = messages.len().saturating_sub(limit);
            messages.drain(..skip);
            messages
        })
    }

    fn call_with_id<'a>(
        &'a self,
        id: Option<&'a str>,
        name: &'a str,
        args: &'a Value,
    ) -> BoxFuture<'a, Value> {
        Box::pin(async move {
            if let Err(e) = self.record.write().await {
                return json!({ "status": "error", "error": format!("storage error: {e}") });
            }
            let call_id = match id {
                Some(id) => id.to_string(),
                None => format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]),
            };
            let key = &self.ctx.requester;
            let call = json!({
                "role": "assistant",
                "content": [{ "type": "toolCall", "id": call_id, "name": name, "arguments": args }],
                "api": self.model.api,
                "provider": self.model.provider,
                "model": self.model.model,
                "stopReason": "toolUse",
                "timestamp": now_ms(),
                "__switchboard": { "runId": self.ctx.run_id },
            });
            if let Err(e) = self.runs.ctx.store().append_message(key, call).await {
                tracing::warn!(error = %e, "could not record a tool call");
            }
            let (result, is_error) = match self.host.clone().call_tool(name, args, &self.ctx).await {
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
            if let Err(e) = self.runs.ctx.store().append_message(key, record).await {
                tracing::warn!(error = %e, "could not record a tool result");
            }
            result
        })
    }
}

/// Whether `m` is a user message whose text is `text`.
fn is_user_text(m: &Value, text: &str) -> bool {
    if m.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    match m.get("content") {
        Some(Value::String(s)) => s == text,
        Some(Value::Array(parts)) => {
            let mut texts = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str));
            texts.next() == Some(text) && texts.next().is_none()
        }
        _ => false,
    }
}

fn still_running(run_id: &str) -> RunResult {
    RunResult {
        run_id: run_id.to_string(),
        status: RunStatus::Running,
        reply: String::new(),
        error: None,
    }
}

/// The `customType` of the notice that a reply was not delivered to its chat.
pub const REPLY_NOT_DELIVERED: &str = "switchboard.reply-not-delivered";

/// A shown notice (OpenClaw's `custom_message` with `display: true`) saying the run's reply
/// did not reach the chat, and why.
fn not_delivered_notice(run_id: &str, reason: &str) -> NewLine {
    let mut body = serde_json::Map::new();
    body.insert("customType".into(), REPLY_NOT_DELIVERED.into());
    body.insert(
        "content".into(),
        format!("This reply was not delivered to the chat: {reason}.").into(),
    );
    body.insert("display".into(), true.into());
    body.insert("details".into(), serde_json::json!({ "runId": run_id }));
    NewLine {
        kind: switchboard_store::notice::NOTICE_TYPE.into(),
        body,
    }
}
