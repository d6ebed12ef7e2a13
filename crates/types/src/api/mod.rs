//! `SessionsApi`: the one async surface the console, the CLI and the gateway use. The
//! embedded `Engine` implements it; a gateway client will too, so every front end runs
//! unchanged on a local or a remote engine. Front ends import this module, never the engine.

mod delivery;
mod events;
mod message;
pub mod pairing;
mod policy;
mod session_kind;
pub mod source;
mod stream;
pub mod time;
mod types;
pub(crate) mod wire;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use delivery::{DeliveryCounts, OutboxQuery, OutboxRow, OutboxStatus};
pub use events::EngineEvent;
pub use message::{
    RUN_FAILED_NOTICE, SILENT_TOKENS, is_silent_reply, message_text, role_and_text, run_failure,
    shown_role,
};
pub use policy::{
    PolicyDecision, PolicySetting, PolicySource, PolicySourceKind, PolicyView, SEND_POLICY_REFUSAL,
    SendPolicy, is_send_policy_refusal,
};
pub use session_kind::{SessionKind, group_channel_of};
pub use stream::{EventStream, Fed, StreamItem};
pub use types::*;
pub use wire::{
    AnnounceOutcome, Cleanup, ExchangeEnd, ExchangeKind, ExchangeStatus, RunStatus, SendKind,
    SpawnOutcome, Step, StorageKind, UnknownWord, announce_line,
};

impl ApiError {
    /// A storage failure of a kind this layer cannot name more precisely.
    pub fn storage(message: impl Into<String>) -> ApiError {
        ApiError::Storage {
            kind: StorageKind::Other,
            message: message.into(),
        }
    }
}

/// Why a call failed. The kinds map to what a user does next: fix the input (exit 2),
/// look for another session, or retry later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "camelCase")]
pub enum ApiError {
    /// Input the call cannot use (a bad key, unknown tool, invalid parameter).
    #[error("{0}")]
    BadInput(String),
    /// No such session.
    #[error("{0}")]
    NotFound(String),
    /// The state could not be read or written; `kind` says which condition (busy, full disk,
    /// read-only, damaged …) so a caller can tell "retry later" from "repair".
    #[error("{message}")]
    Storage { kind: StorageKind, message: String },
    /// The engine cannot be reached (a gateway connection dropped).
    #[error("{0}")]
    Unavailable(String),
}

/// The one surface over an engine. Every method is a complete request: nothing here
/// hands out the engine's internals, so a socket can carry each call unchanged.
#[async_trait]
pub trait SessionsApi: Send + Sync {
    /// What this API is attached to, and how many sessions it holds.
    async fn status(&self) -> Result<Status, ApiError>;

    /// A page of sessions, newest activity first (the owner's view: every session).
    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError>;

    /// The page `sessions` would give for `query`, as each row's key, agent and revision
    /// only, for a front end that keeps the rows it rendered (the gateway's `sessions.list`)
    /// and asks `sessions_by_key` for those that changed. `None`: not for this query (a text
    /// search, several kinds) or not from this API; ask `sessions` then.
    async fn session_revisions(
        &self,
        _query: &SessionsQuery,
    ) -> Result<Option<RevisionsPage>, ApiError> {
        Ok(None)
    }

    /// The rows of the sessions named that exist (with their owner entries, as a page with
    /// `entries` has them), each with its revision as read.
    async fn sessions_by_key(
        &self,
        _keys: Vec<String>,
    ) -> Result<Vec<(SessionRow, RowRevision)>, ApiError> {
        Err(ApiError::Unavailable(
            "rows by key are not available here".into(),
        ))
    }

    /// Stop (or let again) only the agent-to-agent sends into a session (`sessions_send` and
    /// reply rounds), leaving its replies and announces to its channel as they are: the
    /// narrower stop, beside the send policy's `deny`, which stops both. A gateway without
    /// it (OpenClaw's) says so.
    async fn set_agent_sends(
        &self,
        _key: &str,
        _stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        Err(ApiError::Unavailable(
            "this gateway cannot stop only agent-to-agent sends; `/send off` stops every send \
             into the session and its replies to its channel"
                .into(),
        ))
    }

    /// One session (by canonical key); `None` when there is no such session.
    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError>;

    /// A page of one session's transcript.
    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError>;

    /// A key as typed, made canonical (and, for `Existing`, found by key or session id).
    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError>;

    /// A message into a session (created if new): recorded, then answered by a run of its
    /// agent, or by the engine itself for an owner command. Messages into one session are
    /// recorded in the order the calls were made.
    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError>;

    /// Wait up to `limit` for a run to end (`status: "running"` if it has not).
    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError>;

    /// Wait up to `limit` for everything one call set off to end. `Ok(true)`: all ended.
    /// The work goes on when the wait gives up or the caller goes away.
    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError>;

    /// What is still running of one call's work (oldest first, with its age).
    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError>;

    /// How the end of one call's work was known when no record says it ended (an OpenClaw
    /// gateway sends no "exchange ended": the end is inferred from silence), in words for
    /// the user; `None` when the end was recorded (always, on an engine of ours).
    fn work_end_inferred(&self, _work: WorkId) -> Option<String> {
        None
    }

    /// Whether turning a session's send policy to deny also stops an exchange already
    /// running into it. Ours checks the policy before every round; OpenClaw 2026.9.6 checks
    /// it only where a send starts (`chat.send`, `agent` with `deliver`), not on its own
    /// agent-to-agent steps, so stopping a loop there also needs the running step aborted.
    fn policy_stops_exchanges(&self) -> bool {
        true
    }

    /// A session tool, called as the requester's agent would call it.
    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError>;

    /// Change a session's settings.
    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError>;

    /// Stop the run(s) executing on session `key` now (only `run_id`, when given), as a run
    /// timeout stops them: the turn is dropped (a model request with it), the run ends
    /// `aborted`, an exchange it belongs to ends, and the session stays usable. Runs still
    /// queued behind it are not touched. Resolves once the aborted runs have recorded
    /// their end. Nothing running is not an error: `run_ids` is empty.
    async fn abort(&self, key: &str, run_id: Option<&str>) -> Result<AbortOutcome, ApiError> {
        let _ = (key, run_id);
        Err(ApiError::Unavailable(
            "this connection cannot abort runs".to_string(),
        ))
    }

    /// A page of agent-to-agent exchanges (newest first), all or one session's.
    async fn exchanges(&self, query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        let _ = query;
        Err(ApiError::Unavailable(
            "this connection does not list exchanges".to_string(),
        ))
    }

    /// One exchange in full, by `ExchangeSummary::id`; `None` when there is none.
    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        let _ = id;
        Err(ApiError::Unavailable(
            "this connection does not list exchanges".to_string(),
        ))
    }

    /// Traffic per pair of sessions and minute since `since` (ms since the epoch), for the
    /// traffic view's history; live changes come as events.
    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        let _ = since;
        Err(ApiError::Unavailable(
            "this connection does not report traffic".to_string(),
        ))
    }

    /// Deliveries handed to channels, newest first (`query` filters and bounds them).
    async fn deliveries(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, ApiError> {
        let _ = query;
        Err(ApiError::Unavailable(
            "this connection does not record deliveries (an OpenClaw gateway keeps no outbox)"
                .to_string(),
        ))
    }

    /// How many deliveries stand in each status; `None` where deliveries are not recorded.
    async fn delivery_counts(&self) -> Result<Option<DeliveryCounts>, ApiError> {
        Ok(None)
    }

    /// Make failed (or retrying) delivery `id` due again with its attempts reset; the row as
    /// it is now (unchanged when it was in another status), `None` when there is no such row.
    async fn retry_delivery(&self, id: i64) -> Result<Option<OutboxRow>, ApiError> {
        let _ = id;
        Err(ApiError::Unavailable(
            "this connection does not record deliveries (an OpenClaw gateway keeps no outbox)"
                .to_string(),
        ))
    }

    /// A channel's sender not on its allow-list, under `dmPolicy: "pairing"`: approved, a
    /// new code to tell them, or nothing to say.
    async fn pairing_ask(
        &self,
        request: pairing::PairingRequest,
    ) -> Result<pairing::PairingAnswer, ApiError> {
        let _ = request;
        Err(ApiError::Unavailable(
            "this connection does not keep pairings".to_string(),
        ))
    }

    /// Approved senders and waiting codes, of one channel or all.
    async fn pairings(&self, channel: Option<String>) -> Result<Vec<pairing::Pairing>, ApiError> {
        let _ = channel;
        Err(ApiError::Unavailable(
            "this connection does not keep pairings (an OpenClaw gateway keeps them in its \
             credentials folder: `openclaw pairing list`)"
                .to_string(),
        ))
    }

    /// Approve the sender `code` was given to on `channel`; `None` when no such code waits
    /// (wrong, expired or already approved).
    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<pairing::Pairing>, ApiError> {
        let _ = (channel, code);
        Err(ApiError::Unavailable(
            "this connection does not keep pairings (an OpenClaw gateway: `openclaw pairing \
             approve`)"
                .to_string(),
        ))
    }

    /// Create session `key` (canonical) with no message yet, as OpenClaw's
    /// `sessions.create` does (their TUI's `/new`); `parent`, when given, is recorded as its
    /// `parentSessionKey`. False when it already existed (then nothing changes).
    async fn create(&self, key: &str, parent: Option<&str>) -> Result<bool, ApiError> {
        let _ = (key, parent);
        Err(ApiError::Unavailable(
            "this connection creates a session with its first message only".to_string(),
        ))
    }

    /// Remove a session and its transcript; false when there was none.
    async fn delete(&self, key: &str) -> Result<bool, ApiError>;

    /// The configured agents.
    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError>;

    /// Every engine event from now on, numbered; gaps are reported (`StreamItem::Missed`)
    /// so the subscriber reloads instead of drawing something wrong.
    fn subscribe(&self) -> EventStream;

    /// The connection under a remote API (`None`: the engine is in this process).
    fn link(&self) -> Option<Link> {
        None
    }

    /// Count a refused connect from `peer` (`None`: its address is unknown) where every node
    /// of the store sees it, and say how long until one more would be within `limit`
    /// (`None`: within it, or the engine keeps no shared count: the gateway's own limit
    /// then stands alone).
    async fn note_failed_connect(
        &self,
        peer: Option<String>,
        limit: ConnectLimit,
    ) -> Option<std::time::Duration> {
        let _ = (peer, limit);
        None
    }

    /// The sources behind this API when it merges several (keys, exchange ids and run ids
    /// are then `source/…` references, `source::SessionRef`); empty for one engine, whose
    /// keys are used alone.
    fn sources(&self) -> Vec<source::SourceInfo> {
        Vec::new()
    }
}
