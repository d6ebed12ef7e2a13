//! Sub-agents (spec "sessions_spawn", reference §7): the child session and its run, the
//! completion announce (decided and persisted before delivery, delivered exactly once, and
//! resumed after a restart), cleanup, the archive timer, and which tools a sub-agent may use.

use switchboard_types::api::{AnnounceOutcome, RunStatus, SpawnOutcome, Step};
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use switchboard_store::{OutboxRow, OutboxStatus};
use switchboard_store::SpawnRow;
use std::sync::Arc;

use crate::context::Context;
use crate::delivery::{Route, route_for};
use crate::events::EngineEvent;
use switchboard_types::key::SessionKey;
use crate::session::policy::{self, SendPolicy};
use crate::chain::Chain;
use crate::runs::{Lane, RunRequest, Runs};
use crate::tools::context::ToolHost;
use switchboard_store::{
    Appended, NewLine, NewSpawn, SpawnAnnounce, SpawnAnnounced, SpawnEnding, SpawnState, StoreError,
};
use crate::session::store::{SessionInit, now_ms, transcript_header};
use switchboard_types::config::Config;

/// Exact child reply that keeps the completion silent.
pub const ANNOUNCE_SKIP: &str = "ANNOUNCE_SKIP";

/// The session tools a sub-agent can be given (`tools.subagents.tools`).
const SESSION_TOOLS: &[&str] = &[
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "agents_list",
];

/// Why a sub-agent may not call `tool`, if it may not (reference §7.3, spec "sub-agents
/// default to the full tool set minus session tools").
pub(crate) fn subagent_refusal(
    config: &Config,
    requester: &SessionKey,
    tool: &str,
) -> Option<String> {
    let depth = requester.subagent_depth() as u32;
    if depth == 0 {
        return None;
    }
    let max = config.agents.defaults.subagents.max_spawn_depth.max(1);
    if tool == "sessions_spawn" && depth >= max {
        return Some(format!(
            "sessions_spawn is not allowed at this depth (current depth: {depth}, max: {max})"
        ));
    }
    let policy = &config.tools.subagents.tools;
    // Orchestrators (allowed to spawn further) keep the tools they need to manage children.
    let mut allowed: BTreeSet<&str> = if depth < max {
        ["sessions_spawn", "sessions_list", "sessions_history"].into()
    } else {
        BTreeSet::new()
    };
    if !policy.allow.is_empty() {
        allowed = policy.allow.iter().map(String::as_str).collect();
    }
    allowed.extend(policy.also_allow.iter().map(String::as_str));
    for d in &policy.deny {
        allowed.remove(d.as_str());
    }
    if allowed.contains(tool) || !SESSION_TOOLS.contains(&tool) {
        return None;
    }
    Some(format!(
        "{tool} is not available to sub-agents (they get no session tools by default). Allow it with tools.subagents.tools.alsoAllow."
    ))
}

pub use switchboard_types::api::Cleanup;

/// A spawn the tool has validated.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub requester: SessionKey,
    pub agent_id: String,
    pub task: String,
    pub label: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub run_timeout: Option<Duration>,
    pub mode: String,
    pub cleanup: Cleanup,
    pub sandboxed: bool,
    /// The child's depth (requester depth + 1) and the configured maximum.
    pub depth: u32,
    pub max_depth: u32,
    /// The chain the spawn continues (DESIGN §2 "loops across 3+ agents"): the child's run,
    /// its announce and the requester's turn on that announce all carry it.
    pub chain: Chain,
}

/// A started child.
#[derive(Debug, Clone)]
pub struct Spawned {
    pub child: SessionKey,
    pub run_id: String,
}

/// The spawns service: sub-agent sessions, their runs, the completion announce delivered
/// exactly once (and resumed after a restart), and the archive timer.
pub struct Spawns {
    ctx: Arc<Context>,
    runs: Arc<Runs>,
}

impl Spawns {
    pub(crate) fn new(ctx: Arc<Context>, runs: Arc<Runs>) -> Spawns {
        Spawns { ctx, runs }
    }

    internal_fn! {
        /// Create the child session, record the spawn, and start the child's run; the
        /// announce follows when the run ends (a tracked task, so `idle` waits for it).
        async fn spawn_child(
            self: &Arc<Self>,
            req: SpawnRequest,
            tools: Arc<dyn ToolHost>,
        ) -> Result<Spawned, StoreError> {
            let child = SessionKey::from_canonical(format!(
                "agent:{}:subagent:{}",
                req.agent_id,
                uuid::Uuid::new_v4()
            ));
            let run_id = uuid::Uuid::now_v7().to_string();
            let now = now_ms();
            let init = SessionInit {
                label: req.label.clone(),
                spawned_by: Some(req.requester.clone()),
                ..SessionInit::default()
            };
            let mut fresh = self.ctx.store().fresh(&child, &init, now);
            fresh.entry.spawn_depth = Some(req.depth);
            fresh.entry.model = req.model.clone();
            fresh.entry.thinking_level = req.thinking.clone();
            let row = spawn_row(&req, &child, &run_id, now);
            let cwd = self.ctx.store().cwd();
            let message = format!(
                "[Subagent Context] You are running as a subagent (depth {}/{}). Results auto-announce to your requester; do not busy-poll for status.\n\n[Subagent Task]: {}",
                req.depth, req.max_depth, req.task
            );
            let inbound = NewLine::message(json!({
                "role": "user",
                "content": [{ "type": "text", "text": message }],
                "timestamp": now,
                "provenance": {
                    "kind": "inter_session",
                    "sourceSessionKey": req.requester.as_str(),
                    "sourceTool": "sessions_spawn",
                    "chainId": req.chain.id,
                    "hop": req.chain.hop,
                },
            }));
            let header = transcript_header(&fresh.entry.session_id, &cwd, now);
            // The child session, its task, its run and the spawn record commit together: no
            // child without a record of who spawned it, and no record without a run to finish
            // (a restart then finds the run and closes it as aborted).
            let (session_id, rows) = self
                .ctx
                .store()
                .backend()
                .start_spawn(NewSpawn {
                    session: fresh.clone(),
                    header,
                    task: inbound,
                    spawn: row.clone(),
                    owner: self.ctx.instance_id().to_string(),
                    now,
                })
                .await?;
            let events = self.ctx.events();
            events.emit(EngineEvent::SessionCreated {
                key: child.to_string(),
                session_id: fresh.entry.session_id.clone(),
            });
            events.emit(EngineEvent::Spawned {
                requester: req.requester.to_string(),
                child: child.to_string(),
                run_id: run_id.clone(),
                agent_id: req.agent_id.clone(),
                label: req.label.clone(),
                task: req.task.clone(),
                cleanup: req.cleanup,
            });
            for row in rows {
                events.emit(EngineEvent::MessageAppended {
                    key: child.to_string(),
                    session_id: session_id.clone(),
                    seq: row.seq,
                    line: row.line,
                });
            }
            let context = subagent_context(&req, &child);
            let run = RunRequest {
                key: child.clone(),
                step: Step::Subagent,
                round: 0,
                from: Some(req.requester.clone()),
                text: req.task.clone(),
                context: Some(context),
                inbound: None,
                exchange_id: None,
                chain: Some(req.chain.clone()),
                lane: Lane::Own,
                deliver: false,
                waiting: Vec::new(),
                sandboxed: req.sandboxed,
                exchange_start: None,
                exchange_end: None,
                timeout: req.run_timeout,
                start_recorded: true,
            };
            let mut handle = self.runs.start_with_id(run_id.clone(), run, &tools);
            let spawns = self.clone();
            let key = child.clone();
            let what = format!("sub-agent {child} and its announce");
            self.ctx.tracker().spawn(what, async move {
                handle.wait().await;
                if let Err(e) = spawns.finish_spawn(&key, &tools).await {
                    tracing::warn!(child = %key, error = %e, "sub-agent announce failed; it is retried on the next start");
                }
            });
            Ok(Spawned { child, run_id })
        }
    }

    /// The child's run is over: decide its announce and persist it (once), then deliver it.
    async fn finish_spawn(self: &Arc<Self>, child: &SessionKey, tools: &Arc<dyn ToolHost>) -> Result<(), StoreError> {
        let key = child.to_string();
        let Some(spawn) = self.spawn_record(child).await? else {
            return Ok(());
        };
        if spawn.status == SpawnState::Running {
            let Some(run) = self.ctx.store().backend().get_run(&spawn.run_id).await? else {
                return Ok(());
            };
            if run.status == RunStatus::Running {
                // Still executing (in this or another live process): its own end comes later.
                return Ok(());
            }
            let (outcome, status_line) = match run.status {
                RunStatus::Ok => (SpawnOutcome::Completed, "completed".to_string()),
                RunStatus::Timeout => (SpawnOutcome::TimedOut, "timed out".to_string()),
                RunStatus::Error | RunStatus::Aborted | RunStatus::Running => (
                    SpawnOutcome::Failed,
                    format!(
                        "failed: {}",
                        run.error.clone().unwrap_or_else(|| "unknown error".into())
                    ),
                ),
            };
            let reply = run.reply.clone().unwrap_or_default();
            let silent = reply.trim() == ANNOUNCE_SKIP && run.status == RunStatus::Ok;
            let result = if reply.trim().is_empty() {
                self.last_tool_result(child).await?
                    .map(|t| (t, true))
                    .unwrap_or_else(|| ("(no output)".to_string(), false))
            } else {
                (reply.trim().to_string(), false)
            };
            let session = self.ctx.store().get(child).await?;
            let session_id = session
                .as_ref()
                .map(|s| s.entry.session_id.clone())
                .unwrap_or_else(|| "unknown".into());
            let ended = run.ended_at.unwrap_or_else(now_ms);
            let runtime = ended - spawn.started_at;
            let (tin, tout) = (run.tokens_in.unwrap_or(0), run.tokens_out.unwrap_or(0));
            let announce = (!silent).then(|| {
                announce_text(&AnnounceFacts {
                    name: spawn.label.as_deref().unwrap_or(&spawn.task),
                    status: &status_line,
                    result: &result.0,
                    from_tool: result.1,
                    notes: &self.cleanup_note(&spawn),
                    runtime_ms: runtime,
                    tokens: (tin, tout),
                    child: &key,
                    session_id: &session_id,
                    transcript: &self.ctx.transcript_path(&session_id),
                })
            });
            let state = if silent { "skipped" } else { "pending" };
            // Only the first to decide records it (another process may be resuming).
            let decided = self
                .ctx
                .store()
                .backend()
                .end_spawn(
                    &key,
                    SpawnEnding {
                        outcome: outcome.to_string(),
                        error: run.error.clone(),
                        ended_at: ended,
                        announce: announce.clone(),
                        announce_state: state.to_string(),
                    },
                )
                .await?;
            if decided {
                self.ctx.events().emit(EngineEvent::SpawnEnded {
                    requester: spawn.requester.clone(),
                    child: key.clone(),
                    outcome,
                    error: run.error.clone(),
                    runtime_ms: runtime,
                    tokens_in: tin,
                    tokens_out: tout,
                });
            }
        }
        crate::failpoint::hit("spawn-before-announce");
        self.deliver_spawn_announce(child, tools).await
    }

    /// Deliver a decided announce. One transaction records it in the requester's transcript,
    /// queues it for the requester's channel, marks it delivered, and applies the cleanup, so
    /// it happens exactly once however often it is retried.
    async fn deliver_spawn_announce(
        self: &Arc<Self>,
        child: &SessionKey,
        tools: &Arc<dyn ToolHost>,
    ) -> Result<(), StoreError> {
        let key = child.to_string();
        let Some(spawn) = self.spawn_record(child).await? else {
            return Ok(());
        };
        if spawn.status != SpawnState::Ended {
            return Ok(());
        }
        let requester = SessionKey::from_canonical(spawn.requester.clone());
        let requester_session = self.ctx.store().get(&requester).await?;
        // Decide the route and policy outside, check again inside the transaction.
        let route = requester_session
            .as_ref()
            .and_then(|s| route_for(&requester, &s.entry));
        let allowed = requester_session.as_ref().is_none_or(|s| {
            policy::evaluate(self.ctx.config(), &requester, &s.entry).policy == SendPolicy::Allow
        });
        let archive_minutes = self
            .ctx
            .config()
            .agents
            .defaults
            .subagents
            .archive_after_minutes;
        let now = now_ms();
        let delete = spawn.cleanup == Cleanup::Delete;
        let archive_at = (!delete && archive_minutes > 0).then(|| {
            let minutes = i64::try_from(archive_minutes).unwrap_or(i64::MAX);
            now.saturating_add(minutes.saturating_mul(60_000))
        });
        let text = spawn.announce.clone();
        // Read from the child's task message, so an announce resumed by another process
        // continues the chain too.
        let chain = self.spawn_chain(child).await?;
        let line = text.as_ref().map(|t| {
            let mut provenance = json!({
                "kind": "inter_session",
                "sourceSessionKey": key,
                "sourceTool": "subagent_announce",
            });
            if let Some(c) = &chain {
                provenance["chainId"] = json!(c.id);
                provenance["hop"] = json!(c.hop);
            }
            NewLine::message(json!({
                "role": "user",
                "content": [{ "type": "text", "text": t }],
                "timestamp": now,
                "provenance": provenance,
            }))
        });
        let outcome = match (&text, &route, allowed) {
            (None, _, _) => AnnounceOutcome::Skipped,
            (Some(_), _, false) => AnnounceOutcome::Blocked,
            (Some(_), None, true) => AnnounceOutcome::NoRoute,
            (Some(_), Some(_), true) => AnnounceOutcome::Delivered,
        };
        let outbox = match (&text, &route, outcome) {
            (Some(t), Some(route), AnnounceOutcome::Delivered) => Some(OutboxRow {
                id: 0,
                created_at: now,
                session_key: requester.to_string(),
                kind: "subagent_announce".into(),
                channel: route.channel.clone(),
                to: route.to.clone(),
                account_id: route.account_id.clone(),
                thread_id: route.thread_id.clone(),
                text: t.clone(),
                status: OutboxStatus::Queued,
                run_id: Some(spawn.run_id.clone()),
                flow_id: None,
                ..OutboxRow::default()
            }),
            _ => None,
        };
        // Only the first to record it does (another process may be resuming the same one).
        let done = self
            .ctx
            .store()
            .backend()
            .record_spawn_announce(SpawnAnnounce {
                child_key: child.clone(),
                requester: requester.clone(),
                line,
                outbox,
                outcome: outcome.to_string(),
                delete_child: delete,
                archive_at,
                now,
            })
            .await?;
        let Some(SpawnAnnounced {
            appended, deleted, ..
        }) = done
        else {
            return Ok(()); // someone else delivered it
        };
        self.emit_spawn_announced(
            &requester,
            &key,
            appended,
            deleted,
            outcome,
            route.as_ref(),
            text.clone(),
        );
        if let Some(at) = archive_at {
            self.schedule_archive(at);
        }
        // The requester's agent sees the completion (step `subagent-announce`) and may react;
        // its reply stays in its transcript.
        if let (Some(text), true) = (text, requester_session.is_some()) {
            let mut req = RunRequest::reply_to(requester.clone(), text);
            req.step = Step::SubagentAnnounce;
            req.from = Some(child.clone());
            req.deliver = false;
            // The announce is not a hop of its own; whatever the requester sets off in
            // reply continues the spawn's chain.
            req.chain = chain;
            self.runs.start(req, tools);
        }
        Ok(())
    }

    /// Tell what recording a sub-agent's announce did: the lines appended to the requester,
    /// the announce's outcome, and the child's removal (cleanup `delete`).
    #[allow(clippy::too_many_arguments)]
    fn emit_spawn_announced(
        &self,
        requester: &SessionKey,
        key: &str,
        appended: Option<Appended>,
        deleted: bool,
        outcome: AnnounceOutcome,
        route: Option<&Route>,
        text: Option<String>,
    ) {
        let events = self.ctx.events();
        if let Some(Appended { session_id, rows }) = appended {
            for row in rows {
                events.emit(EngineEvent::MessageAppended {
                    key: requester.to_string(),
                    session_id: session_id.clone(),
                    seq: row.seq,
                    line: row.line,
                });
            }
        }
        let detail = match outcome {
            AnnounceOutcome::Delivered => route
                .map(|r| format!("queued for {} {}", r.channel, r.to))
                .unwrap_or_default(),
            AnnounceOutcome::Blocked => {
                format!("the send policy of {requester} denies outbound messages")
            }
            AnnounceOutcome::NoRoute => format!("recorded in {requester}; it has no channel route"),
            _ => "the sub-agent replied ANNOUNCE_SKIP".to_string(),
        };
        events.emit(EngineEvent::SpawnAnnounce {
            requester: requester.to_string(),
            child: key.to_string(),
            outcome,
            text,
            channel: route
                .filter(|_| outcome == AnnounceOutcome::Delivered)
                .map(|r| r.channel.clone()),
            to: route
                .filter(|_| outcome == AnnounceOutcome::Delivered)
                .map(|r| r.to.clone()),
            detail,
        });
        if deleted {
            events.emit(EngineEvent::SessionDeleted {
                key: key.to_string(),
            });
        }
    }

    /// The chain a spawn continues, as its task message (the child's first) records it.
    async fn spawn_chain(&self, child: &SessionKey) -> Result<Option<Chain>, StoreError> {
        let Some(s) = self.ctx.store().get(child).await? else {
            return Ok(None);
        };
        let first = self
            .ctx
            .store()
            .backend()
            .first_message_line(&s.entry.session_id)
            .await?;
        Ok(first
            .and_then(|line| serde_json::from_str::<Value>(&line).ok())
            .and_then(|v| v.get("message").and_then(Chain::from_provenance)))
    }

    /// The text of the child's latest tool result, for a child that gave no final reply.
    async fn last_tool_result(&self, child: &SessionKey) -> Result<Option<String>, StoreError> {
        let Some(s) = self.ctx.store().get(child).await? else {
            return Ok(None);
        };
        let rows = self.ctx.store().tail(&s.entry.session_id, 50, true).await?;
        Ok(rows.iter().rev().find_map(|r| {
            let m = r.line.get("message")?;
            (m.get("role")? == "toolResult").then(|| crate::session::transcript_text::message_text(m))
        }))
    }

    fn cleanup_note(&self, spawn: &SpawnRow) -> String {
        let minutes = self
            .ctx
            .config()
            .agents
            .defaults
            .subagents
            .archive_after_minutes;
        match (spawn.cleanup.as_str(), minutes) {
            ("delete", _) => {
                "cleanup: delete; the sub-agent session is removed after this announce.".into()
            }
            (_, 0) => "cleanup: keep; the sub-agent session stays (archiving is off).".into(),
            (_, m) => {
                format!("cleanup: keep; the sub-agent session is archived after {m} minutes.")
            }
        }
    }

    internal_fn! {
        /// Archive every sub-agent session whose timer is due at `now` (ms). Idempotent; returns
        /// the sessions archived by this call.
        async fn archive_due(&self, now: i64) -> Result<Vec<SessionKey>, StoreError> {
            let due: Vec<String> = self
                .ctx
                .store()
                .backend()
                .archive_timers()
                .await?
                .into_iter()
                .filter(|(_, at)| *at <= now)
                .map(|(k, _)| k)
                .collect();
            let mut archived = Vec::new();
            for key in due {
                let done = self
                    .ctx
                    .store()
                    .backend()
                    .archive_child(&SessionKey::from_canonical(key.clone()), now)
                    .await?;
                if done {
                    self.ctx.events()
                        .emit(EngineEvent::SessionArchived { key: key.clone() });
                    archived.push(SessionKey::from_canonical(key));
                }
            }
            Ok(archived)
        }
    }

    /// Fire `archive_due` at `at` (ms). Not tracked: a command does not wait an hour for it;
    /// the timer is in the database, and `resume` sets it again on the next start.
    fn schedule_archive(self: &Arc<Self>, at: i64) {
        let spawns = self.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            let wait = at.saturating_sub(now_ms()).max(0) as u64;
            tokio::time::sleep(Duration::from_millis(wait)).await;
            if let Err(e) = spawns.archive_due(now_ms()).await {
                tracing::warn!(error = %e, "archiving sub-agent sessions failed");
                return;
            }
            // Chain to the next pending timer, so a long-running process keeps archiving.
            let next = spawns
                .ctx
                .store()
                .backend()
                .archive_timers()
                .await
                .ok()
                .and_then(|t| t.into_iter().map(|(_, at)| at).min());
            if let Some(next) = next {
                spawns.schedule_archive(next);
            }
        });
    }

    internal_fn! {
        /// Pick up what a stopped engine left: announces decided but not delivered, children
        /// whose run ended (or was aborted) without an announce, and archive timers. Call once
        /// after `open`, inside the runtime; safe to call from several processes at once.
        async fn resume(
            self: &Arc<Self>,
            tools: &Arc<dyn ToolHost>,
        ) -> Result<(), StoreError> {
            for spawn in self.ctx.store().backend().open_spawns().await? {
                let child = SessionKey::from_canonical(spawn.child_key.clone());
                // A live engine (a console, another command) that ran the child finishes its
                // announce itself; taking it over would run the requester's announce turn in
                // the wrong process, and make that process wait for it.
                if let Some(run) = self.ctx.store().backend().get_run(&spawn.run_id).await?
                    && run.owner != self.ctx.instance_id()
                    && self.ctx.owner_alive(&run.owner).await
                {
                    tracing::debug!(child = %child, owner = %run.owner, "sub-agent left to its live engine");
                    continue;
                }
                let (spawns, tools) = (self.clone(), tools.clone());
                let what = format!("the resumed announce of sub-agent {child}");
                self.ctx.tracker().spawn(what, async move {
                    if let Err(e) = spawns.finish_spawn(&child, &tools).await {
                        tracing::warn!(child = %child, error = %e, "resuming a sub-agent announce failed");
                    }
                });
            }
            let timers = self.ctx.store().backend().archive_timers().await?;
            if let Some(soonest) = timers.iter().map(|t| t.1).min() {
                // One timer at the soonest; it archives everything due, then chains to the next.
                self.schedule_archive(soonest);
            }
            Ok(())
        }
    }

    internal_fn! {
        /// A requester's sub-agents, newest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn spawns_of(&self, requester: &SessionKey) -> Result<Vec<SpawnRow>, StoreError> {
            self.ctx.store().backend().spawns_of(requester.as_str()).await
        }
    }

    internal_fn! {
        /// One sub-agent's record.
        async fn spawn_record(&self, child: &SessionKey) -> Result<Option<SpawnRow>, StoreError> {
            self.ctx.store().backend().get_spawn(child.as_str()).await
        }
    }
}

/// A new spawn's record: running, nothing announced yet.
fn spawn_row(req: &SpawnRequest, child: &SessionKey, run_id: &str, now: i64) -> SpawnRow {
    SpawnRow {
        child_key: child.to_string(),
        requester: req.requester.to_string(),
        run_id: run_id.to_string(),
        agent_id: req.agent_id.clone(),
        task: req.task.clone(),
        label: req.label.clone(),
        cleanup: req.cleanup,
        mode: req.mode.clone(),
        status: SpawnState::Running,
        outcome: None,
        error: None,
        started_at: now,
        ended_at: None,
        announce: None,
        announce_state: None,
        announced_at: None,
        archive_at: None,
        archived_at: None,
    }
}

/// The sub-agent's injected context: who it is, who asked, and the rules it runs under.
fn subagent_context(req: &SpawnRequest, child: &SessionKey) -> String {
    let mut lines = vec![
        "# Subagent".to_string(),
        format!(
            "You are a sub-agent (depth {}/{}) spawned for one task.",
            req.depth, req.max_depth
        ),
        "Your final reply is your result; it is announced to the requester automatically."
            .to_string(),
        format!("Reply exactly \"{ANNOUNCE_SKIP}\" to finish without an announce."),
        "## Session Context".to_string(),
        format!("Requester session: {}.", req.requester),
        format!("Your session: {child}."),
    ];
    if let Some(label) = &req.label {
        lines.push(format!("Label: {label}."));
    }
    lines.join("\n")
}

/// What the announce text is made of.
pub(crate) struct AnnounceFacts<'a> {
    pub name: &'a str,
    pub status: &'a str,
    pub result: &'a str,
    pub from_tool: bool,
    pub notes: &'a str,
    pub runtime_ms: i64,
    pub tokens: (u64, u64),
    pub child: &'a str,
    pub session_id: &'a str,
    pub transcript: &'a str,
}

/// The spec's normalised announce: `Status:`, `Result:`, `Notes:` and a stats line.
pub(crate) fn announce_text(f: &AnnounceFacts<'_>) -> String {
    let name: String = f.name.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = if name.chars().count() > 80 {
        format!("{}…", name.chars().take(79).collect::<String>())
    } else {
        name
    };
    let mut notes = f.notes.to_string();
    if f.from_tool {
        notes = format!(
            "The sub-agent gave no final reply; the result is its last tool result. {notes}"
        );
    }
    let (tin, tout) = f.tokens;
    format!(
        "Sub-agent \"{name}\" finished.\nStatus: {}\nResult: {}\nNotes: {}\nStats: runtime {} • tokens {} (in {} / out {}) • sessionKey {} • sessionId {} • transcript {}",
        f.status,
        f.result,
        notes,
        format_duration(f.runtime_ms),
        format_tokens(tin + tout),
        format_tokens(tin),
        format_tokens(tout),
        f.child,
        f.session_id,
        f.transcript,
    )
}

/// Reference §7.4: `n/a` for nothing, else `<h>h<m>m`, `<m>m<s>s` or `<s>s` (rounded).
pub(crate) fn format_duration(ms: i64) -> String {
    if ms <= 0 {
        return "n/a".into();
    }
    let secs = (ms + 500) / 1000;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// Reference §7.4: `1.2m`, `3.4k`, or the plain count.
pub(crate) fn format_tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}m", n as f64 / 1_000_000.0)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_token_counts_follow_the_reference() {
        assert_eq!(format_duration(0), "n/a");
        assert_eq!(format_duration(188), "0s");
        assert_eq!(format_duration(1_499), "1s");
        assert_eq!(format_duration(61_000), "1m1s");
        assert_eq!(format_duration(3_725_000), "1h2m");
        assert_eq!(format_tokens(999), "999");
        assert_eq!(format_tokens(1_260), "1.3k");
        assert_eq!(format_tokens(2_000_000), "2.0m");
    }

    #[test]
    fn the_announce_has_status_result_notes_and_stats() {
        let text = announce_text(&AnnounceFacts {
            name: "child-s6",
            status: "completed",
            result: "CHILD_RESULT 42",
            from_tool: false,
            notes: "cleanup: keep",
            runtime_ms: 2_000,
            tokens: (30, 12),
            child: "agent:main:subagent:x",
            session_id: "sid",
            transcript: "/db#sid",
        });
        assert_eq!(
            text,
            "Sub-agent \"child-s6\" finished.\nStatus: completed\nResult: CHILD_RESULT 42\nNotes: cleanup: keep\nStats: runtime 2s • tokens 42 (in 30 / out 12) • sessionKey agent:main:subagent:x • sessionId sid • transcript /db#sid"
        );
    }
}
