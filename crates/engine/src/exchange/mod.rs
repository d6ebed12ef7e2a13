//! The `sessions_send` exchange (spec "sessions_send", reference §5.5): the primary run in
//! the target, the reply-back ping-pong between requester and target, and the target's
//! announce step, each reply taken from its run's own result (never re-read from history).

// The stored exchanges as the API's pages (`SessionsApi::exchanges`, `exchange`, `traffic`).
mod pages;

use std::time::Duration;

use serde_json::{Value, json};

use switchboard_store::{AnnounceRecord, NewExchange, RefusedExchange};
use std::sync::Arc;

use crate::context::Context;
use crate::delivery::Delivery;
use crate::delivery::{Delivered, Route};
use crate::events::EngineEvent;
use switchboard_types::key::SessionKey;

use crate::chain::Chain;
use switchboard_types::api::{
    AnnounceOutcome, ExchangeEnd, ExchangeKind, ExchangeStatus, SendKind,
};
use crate::runs::{ExchangeStart, Lane, RunHandle, RunOutcome, RunRequest, RunStatus, Runs};
use crate::tools::context::ToolHost;
use switchboard_store::StoreError;
use crate::session::store::now_ms;
use crate::agent::Step;

/// The exact reply that ends the ping-pong.
pub const REPLY_SKIP: &str = "REPLY_SKIP";
/// The exact announce reply that stays silent.
pub const ANNOUNCE_SKIP: &str = "ANNOUNCE_SKIP";
/// The announce step's message (not recorded in the transcript, as in OpenClaw).
pub const ANNOUNCE_MESSAGE: &str = "Agent-to-agent announce step.";
/// How long the exchange waits for any one step (OpenClaw: at most 60 s).
pub const STEP_WAIT: Duration = Duration::from_secs(60);

/// A send, as resolved and allowed by the tool.
#[derive(Debug, Clone)]
pub struct Send {
    pub requester: SessionKey,
    pub target: SessionKey,
    pub message: String,
    pub chain: Chain,
    /// How long the caller waits for the primary run (zero: not at all).
    pub wait: Duration,
    /// Sessions blocked on the caller (so the primary run can run nested if needed).
    pub waiting: Vec<SessionKey>,
    /// The two sessions' channels (the spec's Channel field), as the prompts name them.
    pub requester_channel: String,
    pub target_channel: String,
}

/// A started exchange: the exchange id and the primary run.
pub struct Started {
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub exchange_id: String,
    pub run: RunHandle,
}

/// The two parties' facts, as the prompts and provenance name them.
#[derive(Debug, Clone)]
struct Parties {
    requester: SessionKey,
    requester_display: String,
    requester_channel: String,
    target: SessionKey,
    target_display: String,
    target_channel: String,
}

/// The exchanges service: `sessions_send` from the primary run to the announce, the chain
/// limit, and the stored exchanges as pages. Starts its runs through the runs service and
/// queues announces through the delivery service.
pub struct Exchanges {
    ctx: Arc<Context>,
    runs: Arc<Runs>,
    delivery: Delivery,
}

impl Exchanges {
    pub(crate) fn new(ctx: Arc<Context>, runs: Arc<Runs>, delivery: Delivery) -> Exchanges {
        Exchanges {
            ctx,
            runs,
            delivery,
        }
    }

    internal_fn! {
        /// Start the exchange: record the exchange, start the primary run in the target, and hand
        /// the rest (ping-pong, announce) to a tracked background task.
        async fn start_send(self: &Arc<Self>, send: Send, tools: Arc<dyn ToolHost>) -> Result<Started, StoreError> {
            let scheme = self.ctx.store().scheme();
            let parties = Parties {
                requester: send.requester.clone(),
                requester_display: scheme.display(&send.requester),
                requester_channel: send.requester_channel.clone(),
                target: send.target.clone(),
                target_display: scheme.display(&send.target),
                target_channel: send.target_channel.clone(),
            };
            let exchange_id = uuid::Uuid::now_v7().to_string();
            // Sending to itself, or to a session that is waiting on this very call: its lane
            // is held by the caller, so the run goes in beside it instead of deadlocking.
            let lane = if !send.wait.is_zero()
                && (send.target == send.requester || send.waiting.contains(&send.target))
            {
                Lane::Nested
            } else {
                Lane::Own
            };
            let mut waiting = Vec::new();
            if !send.wait.is_zero() {
                waiting = send.waiting.clone();
                waiting.push(send.requester.clone());
            }
            let run_id = uuid::Uuid::now_v7().to_string();
            let exchange = ExchangeStart {
                exchange_id: exchange_id.clone(),
                chain_id: send.chain.id.clone(),
                hop: send.chain.hop,
                requester: send.requester.to_string(),
                message: send.message.clone(),
            };
            // A fire-and-forget caller is answered at once, so the exchange (with its message)
            // must be on disk first; a waiting caller's exchange is recorded with the primary
            // run, in the same commit.
            let exchange_start = if send.wait.is_zero() {
                self.record_exchange(&exchange, &send.target, &run_id).await?;
                None
            } else {
                Some(exchange)
            };
            let req = RunRequest {
                key: send.target.clone(),
                step: Step::Message,
                round: 1,
                from: Some(send.requester.clone()),
                text: send.message.clone(),
                context: Some(message_context(&parties)),
                inbound: Some(inter_session_message(
                    &send.message,
                    &send.requester,
                    &parties.requester_channel,
                    &send.chain,
                )),
                exchange_id: Some(exchange_id.clone()),
                chain: Some(send.chain.clone()),
                lane,
                deliver: false,
                waiting,
                sandboxed: self.ctx.config().agent_sandboxed(self.agent_of(&send.target)),
                // Recorded with the primary run's start, in the same commit.
                exchange_start: exchange_start.clone(),
                exchange_end: None,
                timeout: None,
                start_recorded: false,
            };
            let run = self.runs.start_with_id(run_id, req, &tools);
            let exchanges = self.clone();
            let (exchange, primary) = (exchange_id.clone(), run.clone());
            // Saturating: a caller's wait is bounded, but a panic here would strand the exchange.
            let limit = send.wait.saturating_add(STEP_WAIT);
            let what = format!(
                "exchange {exchange_id} from {} to {}",
                send.requester, send.target
            );
            self.ctx.tracker().spawn(what, async move {
                exchanges
                    .continue_exchange(exchange, send, parties, primary, limit, &tools)
                    .await;
            });
            Ok(Started { exchange_id, run })
        }
    }

    /// Record an exchange on its own (see `start_send`), and announce it.
    async fn record_exchange(
        &self,
        f: &ExchangeStart,
        target: &SessionKey,
        run_id: &str,
    ) -> Result<(), StoreError> {
        self.ctx.store()
            .backend()
            .start_exchange(NewExchange {
                exchange_id: f.exchange_id.clone(),
                chain_id: f.chain_id.clone(),
                requester: f.requester.clone(),
                target: target.to_string(),
                message: f.message.clone(),
                run_id: run_id.to_string(),
                owner: self.ctx.instance_id().to_string(),
                started_at: now_ms(),
            })
            .await?;
        self.ctx.events().emit(EngineEvent::ExchangeStarted {
            exchange_id: f.exchange_id.clone(),
            chain_id: f.chain_id.clone(),
            hop: f.hop,
            requester: f.requester.clone(),
            target: target.to_string(),
            message: f.message.clone(),
            run_id: run_id.to_string(),
            unattributed: false,
        });
        Ok(())
    }

    fn agent_of<'a>(&'a self, key: &'a SessionKey) -> &'a str {
        key.agent_id(&self.ctx.store().scheme().default_agent)
    }

    /// Everything after the primary run: ping-pong, then the announce. Never fails the
    /// tool call; problems end the exchange with a reason and an event.
    async fn continue_exchange(
        &self,
        exchange_id: String,
        send: Send,
        parties: Parties,
        mut primary: RunHandle,
        limit: Duration,
        tools: &Arc<dyn ToolHost>,
    ) {
        let mut closed = false;
        let first = primary.wait_known(limit).await;
        let round_one = Round {
            run: primary.clone(),
            round: 1,
            speaker: parties.target.clone(),
            listener: parties.requester.clone(),
        };
        match &first {
            // The exchange announces its rounds itself, in order.
            Some(o) if o.status == RunStatus::Ok && !o.reply.trim().is_empty() => {}
            Some(_) => self.announce_round(&exchange_id, round_one.clone()).await,
            None => self.emit_round_timeout(&exchange_id, &round_one),
        }
        let reason = match first {
            None => Ended::new(
                ExchangeEnd::Timeout,
                "the target did not reply in time; no reply-back loop and no announce",
            ),
            Some(o) if o.status == RunStatus::Aborted => Ended::new(
                ExchangeEnd::Aborted,
                "the owner aborted the target's run; no reply-back loop and no announce",
            ),
            Some(o) if o.status != RunStatus::Ok => Ended::new(
                ExchangeEnd::Error,
                format!(
                    "the target's run ended {}: {}; no reply-back loop and no announce",
                    o.status.as_str(),
                    o.error.unwrap_or_default()
                ),
            ),
            Some(o) if o.reply.trim().is_empty() => Ended::new(
                ExchangeEnd::NoReply,
                "the target did not reply; no reply-back loop and no announce",
            ),
            Some(o) => {
                // The announce run closes the exchange with its own record.
                closed = true;
                self.exchange(&exchange_id, &send, &parties, o, round_one, tools).await
            }
        };
        if !closed
            && let Err(e) = self
                .ctx
                .store()
                .backend()
                .finish_exchange(
                    &exchange_id,
                    reason.reason,
                    Some(reason.detail.clone()),
                    now_ms(),
                )
                .await
        {
            tracing::warn!(exchange_id, error = %e, "could not close an exchange");
        }
        self.ctx.events().emit(EngineEvent::ExchangeEnded {
            exchange_id,
            status: ExchangeStatus::Done,
            reason: reason.reason,
        });
    }

    /// Ping-pong then announce, after a non-empty round-1 reply.
    async fn exchange(
        &self,
        exchange_id: &str,
        send: &Send,
        parties: &Parties,
        round_one: RunOutcome,
        first: Round,
        tools: &Arc<dyn ToolHost>,
    ) -> Ended {
        let max_turns = self.ctx.config().session.agent_to_agent.max_ping_pong_turns();
        let mut latest = round_one.reply.clone();
        // The newest finished round, announced (after its commit) once the next one has
        // started: the exchange runs ahead of the disk, its events stay in order.
        let mut pending = Some(first);
        let mut turns_done = 0;
        let loop_end = if parties.requester == parties.target {
            Ended::new(
                ExchangeEnd::SameSession,
                "requester and target are the same session: no reply-back loop",
            )
        } else if max_turns == 0 {
            Ended::new(ExchangeEnd::Disabled, "session.agentToAgent.maxPingPongTurns is 0")
        } else {
            let mut end = None;
            for turn in 1..=max_turns {
                let requester_speaks = turn % 2 == 1;
                let (speaker, listener, listener_channel) = if requester_speaks {
                    (&parties.requester, &parties.target, &parties.target_channel)
                } else {
                    (
                        &parties.target,
                        &parties.requester,
                        &parties.requester_channel,
                    )
                };
                if let Some(reason) = self.policy_refuses(speaker, listener).await {
                    end = Some(Ended::new(ExchangeEnd::Policy, reason));
                    break;
                }
                let req = RunRequest {
                    key: speaker.clone(),
                    step: Step::Reply,
                    round: turn + 1,
                    from: Some(listener.clone()),
                    text: latest.clone(),
                    context: Some(reply_context(parties, requester_speaks, turn, max_turns)),
                    inbound: Some(inter_session_message(
                        &latest,
                        listener,
                        listener_channel,
                        &send.chain,
                    )),
                    exchange_id: Some(exchange_id.to_string()),
                    chain: Some(send.chain.clone()),
                    lane: Lane::Own,
                    deliver: false,
                    waiting: Vec::new(),
                    sandboxed: self.ctx.config().agent_sandboxed(self.agent_of(speaker)),
                    exchange_start: None,
                    exchange_end: None,
                    timeout: None,
                    start_recorded: false,
                };
                let mut run = self.runs.start(req, tools);
                if let Some(done) = pending.take() {
                    self.announce_round(exchange_id, done).await;
                }
                let outcome = run.wait_known(STEP_WAIT).await;
                turns_done = turn;
                let this = Round {
                    run: run.clone(),
                    round: turn + 1,
                    speaker: speaker.clone(),
                    listener: listener.clone(),
                };
                match &outcome {
                    Some(_) => pending = Some(this),
                    None => self.emit_round_timeout(exchange_id, &this),
                }
                match round_end(outcome, speaker, turn + 1) {
                    Ok(reply) => latest = reply,
                    Err(ended) => {
                        end = Some(ended);
                        break;
                    }
                }
            }
            end.unwrap_or_else(|| {
                Ended::new(
                    ExchangeEnd::Cap,
                    format!(
                        "maxPingPongTurns reached ({} after the first reply)",
                        switchboard_types::words::count(max_turns, "turn")
                    ),
                )
            })
        };
        if let Some(done) = pending.take() {
            self.announce_round(exchange_id, done).await;
        }
        self.ctx.events().emit(EngineEvent::ExchangeLoopEnded {
            exchange_id: exchange_id.to_string(),
            reason: loop_end.reason,
            rounds: turns_done + 1,
            detail: loop_end.detail.clone(),
        });
        let latest_reply = (turns_done > 0 || latest != round_one.reply).then_some(latest);
        self.announce(
            exchange_id,
            send,
            parties,
            &round_one.reply,
            latest_reply.as_deref(),
            turns_done,
            &loop_end,
            tools,
        )
        .await;
        loop_end
    }

    /// Whether `chain` has grown past `session.agentToAgent.maxChainHops`; if so, says so
    /// with a `ChainStopped` event and returns the hop count and the limit. Sends and
    /// spawns are hops; ping-pong rounds and announces are not (each is bounded by the send
    /// or spawn that caused it).
    pub(crate) fn chain_exceeded(
        &self,
        chain: &Chain,
        requester: &SessionKey,
        target: &str,
    ) -> Option<u32> {
        let max_hops = self.chain_limit_passed(chain)?;
        self.emit_chain_stopped(chain, requester, target);
        Some(max_hops)
    }

    /// Whether `chain` has grown past `session.agentToAgent.maxChainHops` (the limit, if so);
    /// no event (see `chain_exceeded`).
    pub(crate) fn chain_limit_passed(&self, chain: &Chain) -> Option<u32> {
        let max_hops = self.ctx.config().session.agent_to_agent.max_chain_hops;
        (chain.hop > max_hops).then_some(max_hops)
    }

    /// Say that `chain` was stopped before reaching `target` (`ChainStopped`).
    pub(crate) fn emit_chain_stopped(&self, chain: &Chain, requester: &SessionKey, target: &str) {
        let max_hops = self.ctx.config().session.agent_to_agent.max_chain_hops;
        tracing::info!(chain_id = %chain.id, hops = chain.hop, max_hops, %requester, target, "chain limit reached");
        self.ctx.events().emit(EngineEvent::ChainStopped {
            chain_id: chain.id.clone(),
            hops: chain.hop,
            max_hops,
            requester: requester.to_string(),
            target: target.to_string(),
        });
    }

    /// The send policy of `key` refuses agent-to-agent messages into it (from `requester`):
    /// why, if so.
    pub(crate) async fn policy_refuses(&self, key: &SessionKey, requester: &SessionKey) -> Option<String> {
        let entry = self.ctx.store().get(key).await.ok().flatten()?.entry;
        let decision = self.ctx.judge_policy(key, &entry, SendKind::Send, Some(requester));
        (!decision.is_allowed()).then(|| {
            format!(
                "send policy of {key} denies sends into it: {}",
                decision.source
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn announce(
        &self,
        exchange_id: &str,
        send: &Send,
        parties: &Parties,
        round_one: &str,
        latest: Option<&str>,
        turns_done: u32,
        loop_end: &Ended,
        tools: &Arc<dyn ToolHost>,
    ) {
        let req = RunRequest {
            key: parties.target.clone(),
            step: Step::Announce,
            round: turns_done + 2,
            from: Some(parties.requester.clone()),
            text: ANNOUNCE_MESSAGE.to_string(),
            context: Some(announce_context(parties, &send.message, round_one, latest)),
            inbound: None,
            exchange_id: Some(exchange_id.to_string()),
            chain: Some(send.chain.clone()),
            lane: Lane::Own,
            deliver: false,
            waiting: Vec::new(),
            sandboxed: self
                .ctx
                .config()
                .agent_sandboxed(self.agent_of(&parties.target)),
            exchange_start: None,
            exchange_end: Some(loop_end.reason),
            timeout: None,
            start_recorded: false,
        };
        let mut run = self.runs.start(req, tools);
        // Committed, not just known: the exchange is closed in the same commit.
        let outcome = run.wait_for(STEP_WAIT).await;
        let record = self
            .announce_record(outcome, &run.run_id, exchange_id, parties)
            .await;
        // Kept with the exchange (with why its loop ended) before anyone is told, so a
        // reader woken by the event finds it.
        if let Err(e) = self
            .ctx
            .store()
            .backend()
            .record_exchange_announce(exchange_id, &loop_end.detail, record.clone())
            .await
        {
            tracing::warn!(exchange_id, error = %e, "could not record an exchange's announce");
        }
        self.ctx.events().emit(EngineEvent::Announce {
            exchange_id: exchange_id.to_string(),
            target: parties.target.to_string(),
            outcome: record.outcome,
            text: record.text,
            channel: record.channel,
            to: record.to,
            detail: record.detail,
        });
    }

    /// What the announce step came to (`outcome` is its run's, `None` when it did not end in
    /// time): silent, failed, or delivered as far as the target's policy and route allow.
    async fn announce_record(
        &self,
        outcome: Option<RunOutcome>,
        run_id: &str,
        exchange_id: &str,
        parties: &Parties,
    ) -> AnnounceRecord {
        let record = |outcome, text: Option<String>, route: Option<&Route>, detail| AnnounceRecord {
            outcome,
            text,
            channel: route.map(|r| r.channel.clone()),
            to: route.map(|r| r.to.clone()),
            detail,
        };
        let o = match outcome {
            None => {
                tracing::warn!(exchange_id, run_id, target = %parties.target, "an exchange stopped waiting for its announce run after {STEP_WAIT:?}");
                let detail = format!(
                    "the announce step (run {run_id}) did not finish within {}s",
                    STEP_WAIT.as_secs()
                );
                return record(AnnounceOutcome::Failed, None, None, detail);
            }
            Some(o) => o,
        };
        if o.status != RunStatus::Ok {
            let detail = format!("the announce step failed: {}", o.error.unwrap_or_default());
            return record(AnnounceOutcome::Failed, None, None, detail);
        }
        let text = o.reply.trim().to_string();
        if text.is_empty() || text == ANNOUNCE_SKIP {
            let detail = "the target chose to stay silent".to_string();
            return record(AnnounceOutcome::Skipped, Some(text), None, detail);
        }
        let delivered = self
            .delivery
            .deliver(
                &parties.target,
                SendKind::Announce,
                &text,
                Some(run_id),
                Some(exchange_id),
            )
            .await;
        match delivered {
            Ok(Delivered::Queued { route, .. }) => {
                let detail = format!("queued for {} {}", route.channel, route.to);
                record(AnnounceOutcome::Delivered, Some(text), Some(&route), detail)
            }
            Ok(Delivered::Blocked { reason }) => {
                record(AnnounceOutcome::Blocked, Some(text), None, reason)
            }
            Ok(Delivered::NoRoute) => {
                let detail = format!(
                    "{} has no channel route to announce to",
                    parties.target_display
                );
                record(AnnounceOutcome::NoRoute, Some(text), None, detail)
            }
            Err(e) => {
                let detail = format!("delivery failed: {e}");
                record(AnnounceOutcome::Failed, Some(text), None, detail)
            }
        }
    }

    /// Keep a send that never started an exchange as an entry of its own (`kind`: `refused`
    /// by the target's send policy, or stopped by the `chain` limit), then say so with a
    /// `ExchangeEnded` (status `refused`), after the commit, so a reader woken by it finds it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn record_refused_send(
        &self,
        kind: ExchangeKind,
        requester: &SessionKey,
        target: &str,
        message: &str,
        chain: &Chain,
        run_id: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let exchange_id = uuid::Uuid::now_v7().to_string();
        let reason = match kind {
            ExchangeKind::Chain => ExchangeEnd::Chain,
            ExchangeKind::Refused | ExchangeKind::Send => ExchangeEnd::Policy,
        };
        self.ctx.store()
            .backend()
            .record_refused_exchange(RefusedExchange {
                exchange_id: exchange_id.clone(),
                kind,
                chain_id: chain.id.clone(),
                requester: requester.to_string(),
                target: target.to_string(),
                message: message.to_string(),
                run_id: run_id.to_string(),
                owner: self.ctx.instance_id().to_string(),
                at: now_ms(),
                reason,
                detail: detail.to_string(),
            })
            .await?;
        self.ctx.events().emit(EngineEvent::ExchangeEnded {
            exchange_id,
            status: ExchangeStatus::Refused,
            reason,
        });
        Ok(())
    }
}

/// One round of an exchange: its run and who spoke to whom.
#[derive(Debug, Clone)]
pub(crate) struct Round {
    run: RunHandle,
    round: u32,
    speaker: SessionKey,
    listener: SessionKey,
}

impl Exchanges {
    /// Wait for a round's record to commit, then announce it (`ExchangeRound`).
    async fn announce_round(&self, exchange_id: &str, mut r: Round) {
        match r.run.wait_for(STEP_WAIT).await {
            Some(o) => self.emit_round(exchange_id, &r, o.reply, o.status),
            None => self.emit_round_timeout(exchange_id, &r),
        }
    }

    /// A round that did not finish in time (its run goes on).
    fn emit_round_timeout(&self, exchange_id: &str, r: &Round) {
        tracing::warn!(
            exchange_id,
            round = r.round,
            run_id = %r.run.run_id,
            speaker = %r.speaker,
            "an exchange stopped waiting for a round's run; the run goes on"
        );
        self.emit_round(exchange_id, r, String::new(), RunStatus::Timeout);
    }

    fn emit_round(&self, exchange_id: &str, r: &Round, text: String, status: RunStatus) {
        self.ctx.events().emit(EngineEvent::ExchangeRound {
            exchange_id: exchange_id.to_string(),
            round: r.round,
            speaker: r.speaker.to_string(),
            listener: r.listener.to_string(),
            run_id: r.run.run_id.clone(),
            text,
            status,
        });
    }
}

/// Why an exchange (or its loop) ended.
#[derive(Debug, Clone)]
struct Ended {
    reason: ExchangeEnd,
    detail: String,
}

impl Ended {
    fn new(reason: ExchangeEnd, detail: impl Into<String>) -> Ended {
        Ended {
            reason,
            detail: detail.into(),
        }
    }
}

/// The user message an inter-session send records in the receiving transcript.
pub(crate) fn inter_session_message(
    text: &str,
    source: &SessionKey,
    source_channel: &str,
    chain: &Chain,
) -> Value {
    json!({
        "role": "user",
        "content": [{ "type": "text", "text": text }],
        "timestamp": now_ms(),
        "provenance": {
            "kind": "inter_session",
            "sourceSessionKey": source.as_str(),
            "sourceChannel": source_channel,
            "sourceTool": "sessions_send",
            "chainId": chain.id,
            "hop": chain.hop,
        },
    })
}

/// Reference §5.3: the context injected for the primary run.
fn message_context(p: &Parties) -> String {
    [
        "Agent-to-agent message context:".to_string(),
        format!("Agent 1 (requester) session: {}.", p.requester),
        format!("Agent 1 (requester) channel: {}.", p.requester_channel),
        format!("Agent 2 (target) session: {}.", p.target_display),
    ]
    .join("\n")
}

/// Reference §5.5 step 4: the context of one ping-pong turn.
fn reply_context(p: &Parties, requester_speaks: bool, turn: u32, max: u32) -> String {
    let who = if requester_speaks {
        "Current agent: Agent 1 (requester)."
    } else {
        "Current agent: Agent 2 (target)."
    };
    [
        "Agent-to-agent reply step:".to_string(),
        who.to_string(),
        format!("Turn {turn} of {max}."),
        format!("Agent 1 (requester) session: {}.", p.requester_display),
        format!("Agent 1 (requester) channel: {}.", p.requester_channel),
        format!("Agent 2 (target) session: {}.", p.target_display),
        format!("Agent 2 (target) channel: {}.", p.target_channel),
        format!("If you want to stop the ping-pong, reply exactly \"{REPLY_SKIP}\"."),
    ]
    .join("\n")
}

/// Reference §5.5 step 5: the announce step's context.
fn announce_context(p: &Parties, original: &str, round_one: &str, latest: Option<&str>) -> String {
    let or_na = |s: Option<&str>| match s {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => "(not available).".to_string(),
    };
    [
        "Agent-to-agent announce step:".to_string(),
        format!("Agent 1 (requester) session: {}.", p.requester_display),
        format!("Agent 1 (requester) channel: {}.", p.requester_channel),
        format!("Agent 2 (target) session: {}.", p.target_display),
        format!("Agent 2 (target) channel: {}.", p.target_channel),
        format!("Original request: {original}"),
        format!("Round 1 reply: {}", or_na(Some(round_one))),
        format!("Latest reply: {}", or_na(latest.or(Some(round_one)))),
        format!("If you want to remain silent, reply exactly \"{ANNOUNCE_SKIP}\"."),
        // OpenClaw 2026.9's wording: it says what happens here too (the reply is recorded,
        // and delivered only where the target has a route), where the older "will be posted
        // to the target channel" promised a delivery a webchat or console target never gets.
        "Any other reply is recorded in the target session. External delivery is attempted only if the target has a delivery route.".to_string(),
        "After this reply, the agent-to-agent conversation is over.".to_string(),
    ]
    .join("\n")
}

/// A ping-pong round's outcome: the reply the next round answers, or why the loop ends
/// (`round` as the exchange counts it, the primary run being round 1).
fn round_end(outcome: Option<RunOutcome>, speaker: &SessionKey, round: u32) -> Result<String, Ended> {
    match outcome {
        None => Err(Ended::new(ExchangeEnd::Timeout, format!("round {round} timed out"))),
        Some(o) if o.status == RunStatus::Aborted => Err(Ended::new(
            ExchangeEnd::Aborted,
            format!("the owner aborted round {round}"),
        )),
        Some(o) if o.status != RunStatus::Ok => Err(Ended::new(
            ExchangeEnd::Error,
            format!("round {round} failed: {}", o.error.unwrap_or_default()),
        )),
        Some(o) if o.reply.trim() == REPLY_SKIP => Err(Ended::new(
            ExchangeEnd::ReplySkip,
            format!("{speaker} replied REPLY_SKIP in round {round}"),
        )),
        Some(o) if o.reply.trim().is_empty() => Err(Ended::new(
            ExchangeEnd::Empty,
            format!("{speaker} did not reply in round {round}"),
        )),
        Some(o) => Ok(o.reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parties() -> Parties {
        Parties {
            requester: SessionKey::from_canonical("agent:main:s2"),
            requester_display: "agent:main:s2".into(),
            requester_channel: "telegram".into(),
            target: SessionKey::from_canonical("agent:work:s2"),
            target_display: "agent:work:s2".into(),
            target_channel: "unknown".into(),
        }
    }

    #[test]
    fn the_announce_prompt_holds_the_request_the_first_and_the_latest_reply() {
        let text = announce_context(&parties(), "PING from main", "pong", Some("latest words"));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Agent-to-agent announce step:");
        assert!(lines.contains(&"Original request: PING from main"));
        assert!(lines.contains(&"Round 1 reply: pong"));
        assert!(lines.contains(&"Latest reply: latest words"));
        assert!(lines.contains(&"Agent 2 (target) channel: unknown."));
        assert!(lines.contains(&"If you want to remain silent, reply exactly \"ANNOUNCE_SKIP\"."));
        assert!(lines.contains(&"Any other reply is recorded in the target session. External delivery is attempted only if the target has a delivery route."));
        assert_eq!(
            lines.last(),
            Some(&"After this reply, the agent-to-agent conversation is over.")
        );
        // Without ping-pong the latest reply is the first one.
        let text = announce_context(&parties(), "x", "only", None);
        assert!(text.contains("Latest reply: only"));
    }

    #[test]
    fn reply_and_message_contexts_follow_the_reference_lines() {
        let p = parties();
        assert_eq!(
            message_context(&p),
            "Agent-to-agent message context:\nAgent 1 (requester) session: agent:main:s2.\nAgent 1 (requester) channel: telegram.\nAgent 2 (target) session: agent:work:s2."
        );
        let r = reply_context(&p, false, 2, 5);
        assert!(r.starts_with(
            "Agent-to-agent reply step:\nCurrent agent: Agent 2 (target).\nTurn 2 of 5."
        ));
        assert!(r.ends_with("If you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."));
    }
}
