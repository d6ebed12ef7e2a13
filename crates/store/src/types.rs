//! The domain types the `Store` trait takes and returns: sessions as stored, transcript
//! lines to append and as committed. Plain data, no database in them.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::outbox::OutboxRow;
use switchboard_types::api::{
    AnnounceOutcome, Cleanup, ExchangeEnd, ExchangeKind, ExchangeStatus, RunStatus, Step,
};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, SessionKind};

/// A session as stored: its key, owning agent, kind, last activity and entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub key: SessionKey,
    pub agent_id: String,
    pub kind: SessionKind,
    pub entry: SessionEntry,
}

impl StoredSession {
    pub fn updated_at(&self) -> i64 {
        self.entry.updated_at
    }
}

/// A transcript line to append. The writer fills in `id`, `parentId` and `timestamp`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLine {
    /// The line's `type` (`message`, `custom`, …).
    pub kind: String,
    /// Fields after `type/id/parentId/timestamp` (for messages: `{"message": {...}}`).
    pub body: Map<String, Value>,
}

impl NewLine {
    pub fn message(message: Value) -> NewLine {
        let mut body = Map::new();
        body.insert("message".into(), message);
        NewLine {
            kind: "message".into(),
            body,
        }
    }

    /// The message's `role`, for a message line.
    pub fn role(&self) -> Option<&str> {
        self.body.get("message")?.get("role")?.as_str()
    }
}

/// A line as committed.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptRow {
    pub seq: i64,
    pub entry_id: String,
    pub line: Value,
}

/// One page of sessions as `Store::page_sessions` reads it.
#[derive(Debug, Clone, Default)]
pub struct SessionsPageRead {
    /// The page's sessions in the filter's order (a key deleted meanwhile is left out),
    /// their entries read as views (see `Store::view_session`).
    pub rows: Vec<StoredSession>,
    /// How many sessions match the filter, when asked.
    pub matching: Option<u64>,
    /// How many sessions exist.
    pub total: u64,
    /// With previews: each row's last message line, in `rows`' order; else empty.
    pub last: Vec<Option<TranscriptRow>>,
}

/// What tells whether a session's row changed since it was read: its revision (new on every
/// write of its entry) and its `updated_at` (which appends bump without touching the entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision {
    pub rev: i64,
    pub updated_at: i64,
}

/// One row of a page read as its key and revision only (`Store::page_revisions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRow {
    pub key: SessionKey,
    pub agent_id: String,
    pub revision: Revision,
}

/// A page of the owner's sessions as keys and revisions, with the counts a page has.
#[derive(Debug, Clone, Default)]
pub struct RevisionsPageRead {
    pub rows: Vec<RevisionRow>,
    pub matching: Option<u64>,
    pub total: u64,
}

/// What the owner's sessions page is narrowed to (every filter SQL can apply from indexes).
#[derive(Debug, Clone, Default)]
pub struct PageFilter {
    pub kind: Option<SessionKind>,
    pub updated_since: Option<i64>,
    pub archived: bool,
    /// `global` is listed (the config's `session.scope` is `global`); `unknown` never is.
    pub show_global: bool,
    /// In the name order (`name_key`, then key) instead of newest first.
    pub by_name: bool,
}

/// A run as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    pub step: Step,
    pub round: u32,
    pub flow_id: Option<String>,
    pub status: RunStatus,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
    pub reply: Option<String>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    /// The engine instance that executes (or executed) it.
    pub owner: String,
}

/// The announce step's outcome, kept with its exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceRecord {
    pub outcome: AnnounceOutcome,
    pub text: Option<String>,
    pub channel: Option<String>,
    pub to: Option<String>,
    pub detail: String,
}

/// One exchange as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeRow {
    /// The exchange's id (the `flow_id` column).
    pub flow_id: String,
    pub kind: ExchangeKind,
    pub chain_id: String,
    pub requester: String,
    pub target: String,
    pub message: String,
    pub status: ExchangeStatus,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub ended_reason: Option<ExchangeEnd>,
    pub detail: Option<String>,
    /// Runs of the exchange that answered (the target's reply, then the reply-back rounds).
    pub rounds: u32,
    pub announce: Option<AnnounceRecord>,
}

/// One pair's traffic in one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrafficRow {
    pub requester: String,
    pub target: String,
    pub minute: i64,
    pub exchanges: u32,
    pub messages: u32,
    pub capped: u32,
    pub chain_stopped: u32,
    pub refused: u32,
}

switchboard_types::wire_enum! {
    /// Where a spawn's record is: its child's run going on, its announce decided, delivered.
    "spawn state"
    pub enum SpawnState {
        Running = "running",
        /// The outcome and the announce are decided; the delivery is not done yet.
        Ended = "ended",
        Done = "done",
    }
}

/// A spawned sub-agent as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnRow {
    pub child_key: String,
    pub requester: String,
    pub run_id: String,
    pub agent_id: String,
    pub task: String,
    pub label: Option<String>,
    pub cleanup: Cleanup,
    pub mode: String,
    pub status: SpawnState,
    pub outcome: Option<String>,
    pub error: Option<String>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub announce: Option<String>,
    pub announce_state: Option<String>,
    pub announced_at: Option<i64>,
    pub archive_at: Option<i64>,
    pub archived_at: Option<i64>,
}

/// A send recorded under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub key: String,
    /// The canonical session the message went to.
    pub session_key: String,
    /// `message_hash` of the message text.
    pub message_hash: String,
    /// The run answering it (none for an owner command).
    pub run_id: Option<String>,
    /// The message's place in the session's transcript.
    pub seq: i64,
    /// The engine's answer to an owner command.
    pub command_reply: Option<String>,
    pub created_at: i64,
}

/// Which exchanges a page holds.
#[derive(Debug, Clone, Default)]
pub struct ExchangePageQuery {
    /// Only those with this session as requester or target.
    pub key: Option<String>,
    /// Only those older than this exchange (the last of the previous page).
    pub before: Option<String>,
    /// Only those started at or after this time.
    pub since: Option<i64>,
    pub limit: usize,
}

/// An agent-to-agent exchange as it starts (`sessions_send`).
#[derive(Debug, Clone)]
pub struct NewExchange {
    pub exchange_id: String,
    pub chain_id: String,
    pub requester: String,
    pub target: String,
    pub message: String,
    /// The run that delivers the message to the target.
    pub run_id: String,
    /// The engine instance driving it (recovery closes a dead owner's exchanges).
    pub owner: String,
    pub started_at: i64,
}

/// A send that never started an exchange, kept as an entry of its own with why.
#[derive(Debug, Clone)]
pub struct RefusedExchange {
    pub exchange_id: String,
    /// `refused` (the target's send policy) or `chain` (the chain limit).
    pub kind: ExchangeKind,
    pub chain_id: String,
    pub requester: String,
    pub target: String,
    pub message: String,
    pub run_id: String,
    pub owner: String,
    pub at: i64,
    /// `policy` or `chain`.
    pub reason: ExchangeEnd,
    pub detail: String,
}

/// A sub-agent as it starts: its new session (with the transcript header), its task
/// message, and its spawn record; the run named by `spawn.run_id` is recorded with them.
#[derive(Debug, Clone)]
pub struct NewSpawn {
    pub session: StoredSession,
    pub header: Value,
    pub task: NewLine,
    pub spawn: SpawnRow,
    /// The engine instance that executes the child's run.
    pub owner: String,
    pub now: i64,
}

/// What a child's run ended with, and the announce decided from it.
#[derive(Debug, Clone)]
pub struct SpawnEnding {
    pub outcome: String,
    pub error: Option<String>,
    pub ended_at: i64,
    pub announce: Option<String>,
    /// `pending` (to deliver) or `skipped` (a silent `ANNOUNCE_SKIP`).
    pub announce_state: String,
}

/// A run as it starts.
#[derive(Debug, Clone)]
pub struct NewRunRecord {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    pub step: Step,
    pub round: u32,
    pub exchange_id: Option<String>,
    /// The engine instance executing it (recovery closes a dead owner's runs).
    pub owner: String,
    pub started_at: i64,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunEnding {
    pub status: RunStatus,
    pub ended_at: i64,
    pub error: Option<String>,
    pub reply: Option<String>,
    /// Tokens in and out; added to the session's totals as well.
    pub tokens: Option<(u64, u64)>,
}

/// A run's start (with the exchange it opens, if any).
#[derive(Debug, Clone)]
pub struct RunStart {
    pub run: NewRunRecord,
    pub exchange: Option<NewExchange>,
}

/// One commit of a run: its start, its end, or both, with the transcript lines that go
/// with them (the inbound message, the reply), the session's token totals and the end of
/// the exchange the run closes.
#[derive(Debug, Clone)]
pub struct RunWrite {
    /// The session the lines go to.
    pub key: SessionKey,
    pub run_id: String,
    pub lines: Vec<NewLine>,
    /// Record the run as started (finished at once when `end` is given too).
    pub start: Option<RunStart>,
    /// Close the run (a run already closed, by recovery elsewhere, stays as it was).
    pub end: Option<RunEnding>,
    /// `(exchange id, reason)`: close that exchange when `end` is recorded.
    pub exchange_end: Option<(String, ExchangeEnd)>,
    /// When the lines were written.
    pub now: i64,
}

/// Lines as committed to one session.
#[derive(Debug, Clone, Default)]
pub struct Appended {
    pub session_id: String,
    pub rows: Vec<TranscriptRow>,
}

/// A message arriving in a session, with the run that will answer it and the idempotency
/// key it came with; all commit together, or, when the key is already recorded (another
/// call won), nothing does.
#[derive(Debug, Clone)]
pub struct InboundWrite {
    pub key: SessionKey,
    pub line: NewLine,
    pub run: Option<NewRunRecord>,
    /// Recorded with `seq` set to where the line landed.
    pub idempotency: Option<KeyRow>,
    pub now: i64,
}

/// What a session page scan is narrowed to in SQL. Finer filters (visibility patterns) are
/// applied by the caller's visitor while rows stream, so a page is never short because rows
/// were dropped after a LIMIT (OpenClaw's quirk).
#[derive(Debug, Clone, Default)]
pub struct SessionScan {
    pub kinds: Option<Vec<SessionKind>>,
    pub agent_id: Option<String>,
    /// Only this key and the sessions it spawned (visibility `tree`).
    pub tree_of: Option<SessionKey>,
    pub updated_since: Option<i64>,
    /// In the name order (`name_key`, then key) instead of newest first.
    pub by_name: bool,
    /// How many rows the caller expects to take, when it knows (a list's limit, plus one):
    /// a hint, not a limit. The first chunk is that size, so a list that takes them all is
    /// one hand-over and nothing read past it.
    pub wanted: Option<usize>,
}

/// A sub-agent's announce as decided, to record once: the line for the requester's
/// transcript (when it still exists), the message for its channel, and what becomes of
/// the child (deleted, or archived at `archive_at`).
#[derive(Debug, Clone)]
pub struct SpawnAnnounce {
    pub child_key: SessionKey,
    pub requester: SessionKey,
    pub line: Option<NewLine>,
    pub outbox: Option<OutboxRow>,
    /// `delivered`, `blocked`, `no_route` or `skipped`.
    pub outcome: String,
    pub delete_child: bool,
    pub archive_at: Option<i64>,
    pub now: i64,
}

/// What recording an announce did.
#[derive(Debug, Clone, Default)]
pub struct SpawnAnnounced {
    /// The line in the requester's transcript, if it was written.
    pub appended: Option<Appended>,
    pub outbox_id: Option<i64>,
    /// Whether the child session was deleted.
    pub deleted: bool,
}
