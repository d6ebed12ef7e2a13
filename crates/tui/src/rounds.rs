//! The rounds pane's state: exchanges and spawns as their events arrive, whether it shows
//! every session's or the selected one's, the paged list of exchanges and the open one.

use std::collections::BTreeMap;

use switchboard_types::api::{AnnounceOutcome, EngineEvent, ExchangeEnd, RunStatus};

/// Sub-agents the pane keeps (the newest).
const SPAWNS_KEPT: usize = 500;

/// One round of an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundView {
    pub round: u32,
    pub speaker: String,
    pub text: String,
    pub status: RunStatus,
}

/// A `sessions_send` exchange as the rounds pane draws it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExchangeRounds {
    pub exchange_id: String,
    pub requester: String,
    pub target: String,
    pub message: String,
    pub rounds: Vec<RoundView>,
    /// How the loop ended, with detail.
    pub loop_end: Option<(ExchangeEnd, String)>,
    /// The announce's outcome and detail.
    pub announce: Option<(AnnounceOutcome, String)>,
    pub done: bool,
    pub started: i64,
}

/// A spawned sub-agent as the rounds pane draws it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnView {
    pub requester: String,
    pub child: String,
    pub label: String,
    pub status: String,
    pub runtime_ms: Option<i64>,
    pub tokens: Option<(u64, u64)>,
    pub announce: Option<String>,
    pub started: i64,
    /// Arrival order (spawns between two clock ticks share `started`): newest is highest.
    pub arrival: u64,
}

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct RoundsPane {
    pub exchange_rounds: BTreeMap<String, ExchangeRounds>,
    pub spawns: BTreeMap<String, SpawnView>,
    /// Every session's exchanges, not only the selected one's.
    pub all: bool,
    /// The list of exchanges (paged from the engine) and the open exchange.
    pub exchanges: crate::exchanges::Exchanges,
    pub exchange_view: Option<crate::exchanges::ExchangeView>,
    /// Spawns seen so far (each one's `arrival`).
    spawns_seen: u64,
}

impl RoundsPane {
    /// An engine event, as far as this pane's state goes: the paged list and the open
    /// exchange keep themselves current; exchanges and spawns build up as their events
    /// arrive (`now` orders them).
    pub fn event(&mut self, e: &EngineEvent, now: i64) {
        self.exchanges.event(e);
        if let Some(v) = &mut self.exchange_view {
            v.event(e);
        }
        self.exchange_event(e, now);
        self.spawn_event(e, now);
    }

    /// The timeline of exchanges (`ExchangeRounds`), and the sends a chain limit refused.
    fn exchange_event(&mut self, e: &EngineEvent, now: i64) {
        match e {
            EngineEvent::ExchangeStarted {
                exchange_id,
                requester,
                target,
                message,
                ..
            } => {
                let f = self.exchange_rounds.entry(exchange_id.clone()).or_default();
                f.exchange_id = exchange_id.clone();
                f.requester = requester.clone();
                f.target = target.clone();
                f.message = message.clone();
                f.started = now;
                self.trim();
            }
            EngineEvent::ExchangeRound {
                exchange_id,
                round,
                speaker,
                text,
                status,
                ..
            } => {
                let f = self.exchange_rounds.entry(exchange_id.clone()).or_default();
                f.rounds.push(RoundView {
                    round: *round,
                    speaker: speaker.clone(),
                    text: switchboard_types::text_safety::safe_text(text).into_owned(),
                    status: *status,
                });
            }
            EngineEvent::ExchangeLoopEnded {
                exchange_id,
                reason,
                detail,
                ..
            } => {
                self.exchange_rounds
                    .entry(exchange_id.clone())
                    .or_default()
                    .loop_end = Some((*reason, detail.clone()));
            }
            EngineEvent::Announce {
                exchange_id,
                outcome,
                detail,
                ..
            } => {
                self.exchange_rounds
                    .entry(exchange_id.clone())
                    .or_default()
                    .announce = Some((*outcome, detail.clone()));
            }
            EngineEvent::ExchangeEnded {
                exchange_id,
                reason,
                ..
            } => {
                let f = self.exchange_rounds.entry(exchange_id.clone()).or_default();
                f.done = true;
                if f.loop_end.is_none() {
                    f.loop_end = Some((*reason, String::new()));
                }
            }
            EngineEvent::ChainStopped {
                chain_id,
                hops,
                max_hops,
                requester,
                target,
            } => {
                // The refused send shows in the timeline too, with why it never ran.
                let id = format!("chain-{chain_id}-{hops}");
                self.exchange_rounds.insert(
                    id.clone(),
                    ExchangeRounds {
                        exchange_id: id,
                        requester: requester.clone(),
                        target: target.clone(),
                        message: String::new(),
                        rounds: Vec::new(),
                        loop_end: Some((
                            ExchangeEnd::Chain,
                            format!(
                                "{} > session.agentToAgent.maxChainHops {max_hops}",
                                switchboard_types::words::count(*hops, "send")
                            ),
                        )),
                        announce: None,
                        done: true,
                        started: now,
                    },
                );
                self.trim();
            }
            _ => {}
        }
    }

    /// Spawned sub-agents: started, ended (outcome, runtime, tokens), announced.
    fn spawn_event(&mut self, e: &EngineEvent, now: i64) {
        match e {
            EngineEvent::Spawned {
                requester,
                child,
                label,
                task,
                ..
            } => {
                self.spawns_seen += 1;
                self.spawns.insert(
                    child.clone(),
                    SpawnView {
                        arrival: self.spawns_seen,
                        requester: requester.clone(),
                        child: child.clone(),
                        label: label.clone().unwrap_or_else(|| task.clone()),
                        status: "running".into(),
                        started: now,
                        ..SpawnView::default()
                    },
                );
                // Bounded like the exchanges: the newest 500 (the pane shows the newest).
                if self.spawns.len() > SPAWNS_KEPT
                    && let Some(oldest) = self
                        .spawns
                        .iter()
                        .min_by_key(|(_, v)| v.arrival)
                        .map(|(k, _)| k.clone())
                {
                    self.spawns.remove(&oldest);
                }
            }
            EngineEvent::SpawnEnded {
                child,
                outcome,
                runtime_ms,
                tokens_in,
                tokens_out,
                ..
            } => {
                if let Some(v) = self.spawns.get_mut(child) {
                    v.status = outcome.to_string();
                    v.runtime_ms = Some(*runtime_ms);
                    v.tokens = Some((*tokens_in, *tokens_out));
                }
            }
            EngineEvent::SpawnAnnounce { child, outcome, .. } => {
                if let Some(v) = self.spawns.get_mut(child) {
                    v.announce = Some(match outcome {
                        // An OpenClaw gateway records the announce, not its delivery.
                        AnnounceOutcome::NotRecorded => {
                            "recorded (delivery not recorded by OpenClaw)".into()
                        }
                        o => o.shown().to_string(),
                    });
                }
            }
            _ => {}
        }
    }

    /// Keep the timeline bounded: the newest 200 exchanges.
    fn trim(&mut self) {
        while self.exchange_rounds.len() > 200 {
            let oldest = self
                .exchange_rounds
                .iter()
                .min_by_key(|(_, f)| f.started)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.exchange_rounds.remove(&k);
                }
                None => break,
            }
        }
    }
}
