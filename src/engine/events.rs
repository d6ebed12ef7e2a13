//! The engine's event stream: every committed change is announced once, on a tokio
//! broadcast channel, carrying what a front end needs to draw it without asking again.

use serde::{Deserialize, Serialize};

use crate::api::Sequenced;
use serde_json::Value;
use tokio::sync::broadcast;

/// Large enough that a console redrawing at 60 fps never lags behind a burst of appends.
const CAPACITY: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum EngineEvent {
    /// A session row appeared.
    #[serde(rename_all = "camelCase")]
    SessionCreated { key: String, session_id: String },
    /// A session's entry changed (patch, token counters, policy override …).
    #[serde(rename_all = "camelCase")]
    SessionUpdated { key: String },
    /// A session and its transcript were removed.
    #[serde(rename_all = "camelCase")]
    SessionDeleted { key: String },
    /// A transcript line was committed.
    #[serde(rename_all = "camelCase")]
    MessageAppended {
        key: String,
        session_id: String,
        seq: i64,
        line: Value,
    },
    /// A run began executing on its session's lane.
    #[serde(rename_all = "camelCase")]
    RunStarted {
        run_id: String,
        key: String,
        agent_id: String,
        /// `message` | `reply` | `announce` | …
        step: String,
        round: u32,
        flow_id: Option<String>,
    },
    /// Part of a reply while a model streams it. Not stored: the transcript line is written
    /// once, when the reply is complete (`MessageAppended`, then `RunEnded`). `step` is the
    /// model call within the run (a call that ends in tool calls is followed by another);
    /// `offset` is the length in bytes of that step's text before this delta, so a consumer
    /// that missed a delta can tell.
    #[serde(rename_all = "camelCase")]
    ReplyDelta {
        run_id: String,
        key: String,
        agent_id: String,
        step: u32,
        offset: usize,
        delta: String,
    },
    /// A run ended: `status` is `ok` | `error` | `timeout` | `aborted`.
    #[serde(rename_all = "camelCase")]
    RunEnded {
        run_id: String,
        key: String,
        step: String,
        round: u32,
        status: String,
        reply: Option<String>,
        error: Option<String>,
        duration_ms: i64,
        tokens_in: Option<u64>,
        tokens_out: Option<u64>,
        flow_id: Option<String>,
    },
    /// A `sessions_send` exchange began (its primary run is `run_id`).
    #[serde(rename_all = "camelCase")]
    FlowStarted {
        flow_id: String,
        chain_id: String,
        hop: u32,
        requester: String,
        target: String,
        message: String,
        run_id: String,
    },
    /// One reply of an exchange: round 1 is the target's reply to the original message,
    /// then the speakers alternate requester, target, …
    #[serde(rename_all = "camelCase")]
    FlowRound {
        flow_id: String,
        round: u32,
        speaker: String,
        listener: String,
        run_id: String,
        /// The reply (empty when the speaker had nothing to say, failed or timed out).
        text: String,
        status: String,
    },
    /// The reply-back loop stopped: `reason` is `cap` | `reply_skip` | `empty` | `error` |
    /// `timeout` | `aborted` (the owner stopped a round) | `self` | `disabled` | `policy` |
    /// `no_reply`.
    #[serde(rename_all = "camelCase")]
    FlowLoopEnded {
        flow_id: String,
        reason: String,
        rounds: u32,
        detail: String,
    },
    /// The announce step's outcome: `delivered` | `skipped` | `blocked` | `no_route` |
    /// `failed` | `not_run`.
    #[serde(rename_all = "camelCase")]
    Announce {
        flow_id: String,
        target: String,
        outcome: String,
        text: Option<String>,
        channel: Option<String>,
        to: Option<String>,
        detail: String,
    },
    /// The exchange is over (`status`: `done` | `interrupted`).
    #[serde(rename_all = "camelCase")]
    FlowEnded {
        flow_id: String,
        status: String,
        reason: String,
    },
    /// A message was handed to a channel (recorded in the outbox).
    #[serde(rename_all = "camelCase")]
    Delivery {
        key: String,
        kind: String,
        channel: String,
        to: String,
        account_id: Option<String>,
        text: String,
        outbox_id: i64,
    },
    /// The send policy allowed or refused something (`action`: `send` | `announce` |
    /// `reply`), and why. `requester` is the session that would have sent into `key` (a
    /// `send`: the `sessions_send` caller, or the other party of a reply round); outbound
    /// deliveries have none, and older engines never give one.
    #[serde(rename_all = "camelCase")]
    PolicyDecision {
        key: String,
        action: String,
        allowed: bool,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requester: Option<String>,
    },
    /// A session's send-policy override changed (`policy`: `allow` | `deny` | `inherit`).
    #[serde(rename_all = "camelCase")]
    PolicyChanged {
        key: String,
        policy: String,
        by: String,
    },
    /// A send or spawn was refused because its chain of agent-to-agent hops grew too long.
    #[serde(rename_all = "camelCase")]
    ChainStopped {
        chain_id: String,
        hops: u32,
        max_hops: u32,
        requester: String,
        target: String,
    },
    /// A sub-agent was spawned: its session exists and its run is starting.
    #[serde(rename_all = "camelCase")]
    Spawned {
        requester: String,
        child: String,
        run_id: String,
        agent_id: String,
        label: Option<String>,
        task: String,
        cleanup: String,
    },
    /// A sub-agent's run ended; `outcome` is `completed` | `failed` | `timed out`.
    #[serde(rename_all = "camelCase")]
    SpawnEnded {
        requester: String,
        child: String,
        outcome: String,
        error: Option<String>,
        runtime_ms: i64,
        tokens_in: u64,
        tokens_out: u64,
    },
    /// The completion announce of a sub-agent: `delivered` | `skipped` | `blocked` |
    /// `no_route` (recorded in the requester session either way, except `skipped`).
    #[serde(rename_all = "camelCase")]
    SpawnAnnounce {
        requester: String,
        child: String,
        outcome: String,
        text: Option<String>,
        channel: Option<String>,
        to: Option<String>,
        detail: String,
    },
    /// A session was archived (hidden from default lists, still readable).
    #[serde(rename_all = "camelCase")]
    SessionArchived { key: String },
    /// Another process committed to the state folder (seen through SQLite's
    /// `PRAGMA data_version`): what it changed is not known here, so reload what is shown.
    ExternalChange,
    /// Runs or exchanges a dead engine instance left open were closed on start-up.
    #[serde(rename_all = "camelCase")]
    Recovered {
        runs: Vec<String>,
        flows: Vec<String>,
    },
}

/// Cheap-to-clone sender side; subscribers get every event sent after they subscribe.
/// Events are numbered in the order emitted; API subscribers get the numbers, so a gap
/// (a subscriber that fell behind) is visible to them.
#[derive(Clone, Default)]
pub struct EventBus {
    /// Both channels are made on their first subscription: a 4,096-slot channel costs about
    /// half a millisecond to set up, which every `state_folder::open_engine` (each CLI command) would pay.
    tx: std::sync::Arc<std::sync::OnceLock<broadcast::Sender<EngineEvent>>>,
    numbered: std::sync::Arc<std::sync::OnceLock<broadcast::Sender<Sequenced>>>,
    /// Serialises numbering and sending, so the numbers arrive in order.
    next: std::sync::Arc<std::sync::Mutex<u64>>,
}

impl EventBus {
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.tx
            .get_or_init(|| broadcast::channel(CAPACITY).0)
            .subscribe()
    }

    /// Numbered events, for `SessionsApi::subscribe`.
    pub fn subscribe_numbered(&self) -> broadcast::Receiver<Sequenced> {
        self.numbered
            .get_or_init(|| broadcast::channel(CAPACITY).0)
            .subscribe()
    }

    /// Whether anyone subscribes: lets hot paths skip building events nobody reads.
    pub fn listening(&self) -> bool {
        self.tx.get().is_some_and(|t| t.receiver_count() > 0)
            || self.numbered.get().is_some_and(|n| n.receiver_count() > 0)
    }

    /// Nobody listening is normal (the CLI), so a send without receivers is not an error.
    pub fn emit(&self, event: EngineEvent) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        if let Some(numbered) = self.numbered.get()
            && numbered.receiver_count() > 0
        {
            let _ = numbered.send(Sequenced {
                seq: *next,
                event: event.clone(),
            });
        }
        if let Some(tx) = self.tx.get() {
            let _ = tx.send(event);
        }
    }
}
