//! `EngineEvent`: every committed change an engine announces, carrying what a front end
//! needs to draw it without asking again. Plain serde data (the gateway forwards it as is);
//! the engine's `EventBus` sends it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::delivery::OutboxStatus;
use super::policy::PolicySetting;
use super::wire::{
    AnnounceOutcome, Cleanup, ExchangeEnd, ExchangeStatus, RunStatus, SendKind, SpawnOutcome, Step,
};

/// Wire names: the exchange events and fields keep the names they were published under
/// (`flowStarted`, `flowRound`, `flowLoopEnded`, `flowEnded`, `flowId`, `Recovered.flows`):
/// OpenClaw clients read this JSON as the gateway's `a2a` event, so the code's word
/// ("exchange") is not the wire's.
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
        step: Step,
        round: u32,
        #[serde(rename = "flowId")]
        exchange_id: Option<String>,
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
        step: Step,
        round: u32,
        status: RunStatus,
        reply: Option<String>,
        error: Option<String>,
        duration_ms: i64,
        tokens_in: Option<u64>,
        tokens_out: Option<u64>,
        #[serde(rename = "flowId")]
        exchange_id: Option<String>,
    },
    /// A `sessions_send` exchange began (its primary run is `run_id`).
    #[serde(rename = "flowStarted", rename_all = "camelCase")]
    ExchangeStarted {
        #[serde(rename = "flowId")]
        exchange_id: String,
        chain_id: String,
        hop: u32,
        requester: String,
        target: String,
        message: String,
        run_id: String,
        /// The requester is not known for sure (an OpenClaw record that does not name the
        /// sender, or names a session this gateway does not show): the exchange is listed,
        /// but no edge is drawn from `requester` and it is counted in no traffic.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unattributed: bool,
    },
    /// One reply of an exchange: round 1 is the target's reply to the original message,
    /// then the speakers alternate requester, target, …
    #[serde(rename = "flowRound", rename_all = "camelCase")]
    ExchangeRound {
        #[serde(rename = "flowId")]
        exchange_id: String,
        round: u32,
        speaker: String,
        listener: String,
        run_id: String,
        /// The reply (empty when the speaker had nothing to say, failed or timed out).
        text: String,
        status: RunStatus,
    },
    /// The reply-back loop stopped: `reason` is `cap` | `reply_skip` | `empty` | `error` |
    /// `timeout` | `aborted` (the owner stopped a round) | `self` | `disabled` | `policy` |
    /// `no_reply`.
    #[serde(rename = "flowLoopEnded", rename_all = "camelCase")]
    ExchangeLoopEnded {
        #[serde(rename = "flowId")]
        exchange_id: String,
        reason: ExchangeEnd,
        rounds: u32,
        detail: String,
    },
    /// The announce step's outcome: `delivered` | `skipped` | `blocked` | `no_route` |
    /// `failed` | `not_run`.
    #[serde(rename_all = "camelCase")]
    Announce {
        #[serde(rename = "flowId")]
        exchange_id: String,
        target: String,
        outcome: AnnounceOutcome,
        text: Option<String>,
        channel: Option<String>,
        to: Option<String>,
        detail: String,
    },
    /// The exchange is over (`status`: `done` | `interrupted`).
    #[serde(rename = "flowEnded", rename_all = "camelCase")]
    ExchangeEnded {
        #[serde(rename = "flowId")]
        exchange_id: String,
        status: ExchangeStatus,
        reason: ExchangeEnd,
    },
    /// A message was handed to a channel (recorded in the outbox).
    #[serde(rename_all = "camelCase")]
    Delivery {
        key: String,
        kind: SendKind,
        channel: String,
        to: String,
        account_id: Option<String>,
        text: String,
        outbox_id: i64,
    },
    /// A delivery's status changed (a drain claimed, sent, retried or gave up on it, or
    /// `deliveries retry` made it due again). `message_id`: the channel's id once sent;
    /// `next_at`: when a retry is due (ms since the epoch); `error`: why it failed or waits.
    #[serde(rename_all = "camelCase")]
    DeliveryUpdated {
        outbox_id: i64,
        channel: String,
        status: OutboxStatus,
        attempt: u32,
        message_id: Option<String>,
        next_at: Option<i64>,
        error: Option<String>,
    },
    /// The send policy allowed or refused something (`action`: `send` | `announce` |
    /// `reply`), and why. `requester` is the session that would have sent into `key` (a
    /// `send`: the `sessions_send` caller, or the other party of a reply round); outbound
    /// deliveries have none, and older engines never give one.
    #[serde(rename_all = "camelCase")]
    PolicyDecision {
        key: String,
        action: SendKind,
        allowed: bool,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requester: Option<String>,
    },
    /// A session's send-policy override changed (`policy`: `allow` | `deny` | `inherit`).
    #[serde(rename_all = "camelCase")]
    PolicyChanged {
        key: String,
        policy: PolicySetting,
        by: String,
    },
    /// A session's stop of agent-to-agent sends into it was set or lifted
    /// (`SessionsApi::set_agent_sends`).
    #[serde(rename_all = "camelCase")]
    AgentSendsChanged {
        key: String,
        stopped: bool,
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
        cleanup: Cleanup,
    },
    /// A sub-agent's run ended; `outcome` is `completed` | `failed` | `timed out`.
    #[serde(rename_all = "camelCase")]
    SpawnEnded {
        requester: String,
        child: String,
        outcome: SpawnOutcome,
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
        outcome: AnnounceOutcome,
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
        #[serde(rename = "flows")]
        exchanges: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each event that carries a status, kind, reason, outcome or policy word, as the JSON
    /// the engine sent when those fields were strings (written out by hand from the old
    /// types' serde): read into the typed event and written back, byte for byte the same.
    #[test]
    fn typed_events_keep_the_wire_bytes() {
        let frames = [
            r#"{"type":"runStarted","runId":"r1","key":"agent:main:main","agentId":"main","step":"subagent-announce","round":2,"flowId":null}"#,
            r#"{"type":"runEnded","runId":"r1","key":"agent:main:main","step":"reply","round":3,"status":"timeout","reply":null,"error":"slow","durationMs":5,"tokensIn":null,"tokensOut":2,"flowId":"f1"}"#,
            r#"{"type":"flowRound","flowId":"f1","round":2,"speaker":"a","listener":"b","runId":"r2","text":"","status":"aborted"}"#,
            r#"{"type":"flowLoopEnded","flowId":"f1","reason":"self","rounds":1,"detail":"same session"}"#,
            r#"{"type":"flowLoopEnded","flowId":"f1","reason":"reply_skip","rounds":2,"detail":"d"}"#,
            r#"{"type":"announce","flowId":"f1","target":"b","outcome":"no_route","text":"t","channel":null,"to":null,"detail":"d"}"#,
            r#"{"type":"flowEnded","flowId":"f1","status":"interrupted","reason":"the engine stopped during the exchange"}"#,
            r#"{"type":"flowEnded","flowId":"f2","status":"refused","reason":"chain"}"#,
            r#"{"type":"delivery","key":"k","kind":"reply","channel":"slack","to":"c","accountId":null,"text":"t","outboxId":4}"#,
            r#"{"type":"policyDecision","key":"k","action":"announce","allowed":false,"source":"rule 1 (channel=discord)"}"#,
            r#"{"type":"policyChanged","key":"k","policy":"inherit","by":"/send"}"#,
            r#"{"type":"spawned","requester":"a","child":"c","runId":"r","agentId":"main","label":null,"task":"t","cleanup":"delete"}"#,
            r#"{"type":"spawnEnded","requester":"a","child":"c","outcome":"timed out","error":null,"runtimeMs":7,"tokensIn":1,"tokensOut":2}"#,
            r#"{"type":"spawnAnnounce","requester":"a","child":"c","outcome":"blocked","text":null,"channel":null,"to":null,"detail":"d"}"#,
        ];
        for frame in frames {
            let event: EngineEvent = serde_json::from_str(frame).expect(frame);
            assert_eq!(serde_json::to_string(&event).expect("serialise"), frame);
        }
    }
}
