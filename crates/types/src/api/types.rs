//! The requests, results and events of `SessionsApi`: plain serde data, so the same calls
//! cross a socket unchanged. Text in them is as stored (agents' words, unescaped); every
//! front end makes it safe for its own output.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::events::EngineEvent;
use super::policy::{PolicySetting, PolicyView, SendPolicy};
use super::session_kind::SessionKind;
use super::wire::{AnnounceOutcome, ExchangeEnd, ExchangeKind, ExchangeStatus, RunStatus};

/// A page of sessions, newest activity first unless `order` says otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionsQuery {
    /// Only these kinds (empty: every kind).
    pub kinds: Vec<SessionKind>,
    /// Only sessions whose key or name contains this (case-insensitive; empty: all).
    pub text: String,
    /// Include archived sub-agent sessions.
    pub archived: bool,
    /// Only sessions updated at or after this time (ms since the epoch).
    pub active_since: Option<i64>,
    /// Position of the first row in the whole (newest-first) order.
    pub offset: usize,
    pub limit: usize,
    /// Also count every matching session (walks the whole index: ask only when needed).
    pub count: bool,
    /// Also give each row's owner entry (`SessionRow::entry`), so a full listing is one
    /// request, not one more per row (a round trip each over `--connect`).
    pub entries: bool,
    /// Also give each row's last message (`SessionRow::last_message`): one index lookup per
    /// row, so only front ends that show it ask.
    pub previews: bool,
    /// The order `offset` counts in (absent from older clients: activity).
    pub order: SessionsOrder,
    /// Only this source's sessions, on an API that merges several (`SessionsApi::sources`);
    /// one engine ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// What tells a front end that keeps rows it rendered whether one changed: the store's
/// revision of the session (new on every write of its entry), its last activity (appends
/// move it without writing the entry) and whether it is running (the engine's, not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RowRevision {
    pub rev: i64,
    pub updated_at: i64,
    pub running: bool,
}

/// A page of sessions as keys and revisions (`SessionsApi::session_revisions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionsPage {
    /// Key, agent id and revision of each row, in the page's order.
    pub rows: Vec<(String, String, RowRevision)>,
    pub matching: Option<u64>,
    pub total: u64,
}

/// The order of a sessions page, over every matching session (not only the page's rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionsOrder {
    /// Newest activity first, ties by key.
    #[default]
    Activity,
    /// By the name front ends show (the display name, else the label, else the key),
    /// case-insensitive, ties by key.
    Name,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsPage {
    pub rows: Vec<SessionRow>,
    /// The `offset` asked for.
    pub offset: usize,
    /// How many sessions match, when `count` was asked.
    pub matching: Option<u64>,
    /// Sessions stored in all (any kind, archived or not).
    pub total: u64,
    /// The order the rows are in. An engine that predates `SessionsQuery::order` leaves it
    /// out (activity), so a front end can tell that a name order it asked for was ignored.
    #[serde(default)]
    pub order: SessionsOrder,
}

/// One session as every front end lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// The canonical key: what every other call takes.
    pub key: String,
    /// The key as agents see it (`global` shows as `main`).
    pub display_key: String,
    pub kind: SessionKind,
    pub agent_id: String,
    pub channel: String,
    /// The display name, else the label, else the display key.
    pub name: String,
    pub label: Option<String>,
    pub display_name: Option<String>,
    pub session_id: String,
    pub updated_at: i64,
    pub policy: PolicyView,
    /// A run of this session's agent is executing in this engine now.
    pub running: bool,
    pub archived: bool,
    /// Agent-to-agent sends into it are stopped (`SessionsApi::set_agent_sends`), whatever
    /// `policy` says of its replies.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agents_stopped: bool,
    /// The owner's `sessions_list`-shaped row (as `SessionDetail::entry`), when the query
    /// asked for `entries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<Value>,
    /// The start of its last message (up to 120 characters, as stored: unescaped), when
    /// the query asked for `previews`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
}

/// One session in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDetail {
    pub row: SessionRow,
    /// The owner's `sessions_list`-shaped row: every field the entry has.
    pub entry: Value,
}

/// A page of one session's transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TranscriptQuery {
    /// A canonical key (as in `SessionRow::key`).
    pub key: String,
    /// Only lines before this sequence number (older); `None`: the newest lines.
    pub before: Option<i64>,
    pub limit: usize,
    /// Include tool results.
    pub tools: bool,
    /// Include each line's stored message object.
    pub raw: bool,
    /// With `raw`: the message alone, no text or speaker extracted (left empty), for a
    /// caller that passes messages on as they are (the gateway's `chat.history`: the
    /// extraction was a sixth of its time). The same lines are in the page either way.
    pub bare: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptPage {
    pub key: String,
    /// False when no such session exists (deleted meanwhile): `lines` is empty.
    pub exists: bool,
    /// Oldest first.
    pub lines: Vec<TranscriptLine>,
    /// The newest line's sequence number in the whole transcript (0: none).
    pub last_seq: i64,
    /// Older lines a gateway left out of this page so that it fits the frame size it
    /// advertises (`maxPayload`): page back with `before` for them. 0 from a local engine.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a transcript line says, as every front end shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineRole {
    User,
    Assistant,
    /// An assistant turn that called tools (text: the calls).
    Tool,
    /// A tool's result.
    Result,
    /// A failed run.
    Error,
    Note,
}

impl LineRole {
    pub fn as_str(self) -> &'static str {
        match self {
            LineRole::User => "user",
            LineRole::Assistant => "assistant",
            LineRole::Tool => "tool",
            LineRole::Result => "result",
            LineRole::Error => "error",
            LineRole::Note => "note",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptLine {
    pub seq: i64,
    pub role: LineRole,
    pub timestamp: i64,
    /// Who: the sender label, `from <key> via <tool>`, the tool's name, or `agent`.
    pub from: String,
    /// The text, extracted once (tool calls as `name({args})`).
    pub text: String,
    /// The stored message object, when `raw` was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
}

/// What a raw key is being resolved for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyPurpose {
    /// An existing session, by key or session id (`sessions show`, `patch`, `export`).
    Existing,
    /// The session a tool is called as (`--as`): need not exist.
    Requester,
    /// A session a message is sent into: need not exist; `unknown`/`current` are refused.
    Inbound,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedKey {
    pub key: String,
    pub display_key: String,
    pub exists: bool,
}

/// Who sent a message and over what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sender {
    pub channel: Option<String>,
    /// `direct` | `group` | `channel`.
    pub chat_type: Option<String>,
    pub display_name: Option<String>,
    pub sender: Option<String>,
    /// The gateway's owner (owner-only commands such as `/send`).
    pub owner: bool,
}

impl Sender {
    /// The owner, typing in the console.
    pub fn owner() -> Sender {
        Sender {
            owner: true,
            ..Sender::default()
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendRequest {
    /// The session, as typed (canonicalised by the engine).
    pub key: String,
    pub text: String,
    #[serde(default)]
    pub from: Sender,
    /// Makes a retry safe: a send repeating a key recorded within the engine's window
    /// (`store::idempotency::TTL`, restarts included) records nothing and is
    /// answered with the first send's receipt; a key reused for another session or another
    /// message is refused (`BadInput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// What a message set off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendReceipt {
    pub key: String,
    pub display_key: String,
    pub created: bool,
    /// The message's sequence number in the transcript.
    pub seq: i64,
    /// The run answering it (none for an owner command).
    pub run_id: Option<String>,
    /// The engine's own answer to an owner command (`/send …`).
    pub command_reply: Option<String>,
    /// Everything this call set off, for `wait_work`.
    pub work: WorkId,
}

/// The work one call set off: its run, the sends that run made, their rounds and announces,
/// and anything those started in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkId(pub u64);

/// How a run ended, or that it has not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub run_id: String,
    /// `running`: still going when the wait ended.
    pub status: RunStatus,
    pub reply: String,
    pub error: Option<String>,
}

/// What an abort stopped: the runs whose turn was cut off (empty when nothing was running).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortOutcome {
    pub run_ids: Vec<String>,
}

/// A session tool called as a session's agent would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub tool: String,
    pub params: Value,
    /// The session calling it, as typed (`main` is the default agent's main session).
    pub requester: String,
    #[serde(default)]
    pub sandboxed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// Exactly what the agent sees.
    pub result: Value,
    pub work: WorkId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchRequest {
    /// A canonical key (see `resolve_key`).
    pub key: String,
    pub send_policy: Option<PolicySetting>,
}

/// What `SessionsApi::set_agent_sends` left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSendsResult {
    pub key: String,
    pub display_key: String,
    /// Agent-to-agent sends into the session are now stopped (its replies and announces
    /// to its channel are not).
    pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchResult {
    pub key: String,
    pub display_key: String,
    /// The override now stored (`None`: the config decides).
    pub send_policy: Option<SendPolicy>,
    pub effective: PolicyView,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    pub id: String,
    pub model: String,
    pub is_default: bool,
    /// Other agents it may spawn sub-agents under (`subagents.allowAgents`; `*`: any);
    /// spawning under itself is always allowed. Empty when the connection does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub may_spawn: Vec<String>,
    /// The model's context window when the config lists it
    /// (`models.providers.<p>.models[].contextWindow`): what OpenClaw's rows call
    /// `contextTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

/// What an API is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The state folder, or the gateway's address.
    pub attached: String,
    pub sessions: u64,
}

/// An engine event with its place in the stream: a gap in `seq` means events were missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sequenced {
    pub seq: u64,
    pub event: EngineEvent,
}

/// The state of the connection under a remote API, for the console's header. An embedded
/// engine has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum LinkState {
    /// Dialling (the first time, or again after `attempt - 1` failures).
    #[serde(rename_all = "camelCase")]
    Connecting { attempt: u32 },
    /// Attached: the protocol agreed, the last measured round trip.
    #[serde(rename_all = "camelCase")]
    Connected {
        protocol: u32,
        /// `switchboard` or `openclaw`, and its version.
        server: String,
        rtt_ms: Option<u64>,
        /// Events were missed while away and everything shown was reloaded.
        resynced: bool,
    },
    /// Lost; the next attempt is in `retry_in_ms`.
    #[serde(rename_all = "camelCase")]
    Reconnecting {
        attempt: u32,
        retry_in_ms: u64,
        /// What went wrong, in the server's or the OS's words (free text, not a code).
        message: String,
    },
    /// Refused for good (bad token, pairing required, protocol mismatch): no retry.
    #[serde(rename_all = "camelCase")]
    Failed {
        /// Why, in the server's words (free text, not a code).
        message: String,
    },
}

/// What the header shows about a remote engine: where, and how the link is.
#[derive(Debug, Clone)]
pub struct Link {
    /// The address as the user gave it (`ws://…`, `wss://…`).
    pub target: String,
    pub state: tokio::sync::watch::Receiver<LinkState>,
    /// What this engine does not expose, said where it would be shown (rounds, announces and
    /// sub-agents on an OpenClaw gateway); `None`: everything.
    pub unavailable: Option<String>,
}

/// A page of agent-to-agent exchanges, newest first: every `sessions_send` the engine
/// recorded, plus the sends that never started an exchange (refused by the target's send
/// policy, or stopped by the chain limit), each as its own entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExchangesQuery {
    /// Only exchanges with this session (canonical key) as requester or target.
    pub key: Option<String>,
    /// Only exchanges older than this one (the last `id` of the previous page).
    pub before: Option<String>,
    /// Only exchanges started at or after this time (ms since the epoch).
    pub since: Option<i64>,
    pub limit: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangesPage {
    /// Newest first.
    pub exchanges: Vec<ExchangeSummary>,
    /// More (older) exchanges match: ask again with `before` = the last `id`.
    pub more: bool,
}

/// One exchange as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeSummary {
    pub id: String,
    pub kind: ExchangeKind,
    pub requester: String,
    pub target: String,
    /// The message the requester sent (empty for a `chain` entry).
    pub message: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub status: ExchangeStatus,
    /// Replies recorded (round 1 is the target's answer to the message).
    pub rounds: u32,
    /// How the reply-back loop ended.
    pub ended_reason: Option<ExchangeEnd>,
    /// Why, in words (the policy's source, the hop counts).
    pub detail: String,
    /// The announce step's outcome, when it ran.
    pub announce: Option<AnnounceOutcome>,
}

/// One exchange in full: every turn and the announce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeDetail {
    pub summary: ExchangeSummary,
    /// Oldest first: round 1 (the target's reply), then the speakers alternate.
    pub turns: Vec<ExchangeTurn>,
    pub announce: Option<ExchangeAnnounce>,
}

/// One run of an exchange: who spoke, when, for how long, and what it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeTurn {
    pub round: u32,
    /// The speaking session (canonical key).
    pub speaker: String,
    pub listener: String,
    pub run_id: String,
    pub status: RunStatus,
    /// The reply as stored (agents' words: escape before showing).
    pub text: String,
    pub error: Option<String>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
}

/// The announce step of an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeAnnounce {
    pub outcome: AnnounceOutcome,
    pub text: Option<String>,
    pub channel: Option<String>,
    pub to: Option<String>,
    pub detail: String,
    /// How the queued announce's delivery stands (absent where deliveries are not recorded,
    /// or nothing was queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<super::OutboxRow>,
}

/// Traffic between one pair of sessions in one minute (`sessions_send` requester → target).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficCount {
    pub requester: String,
    pub target: String,
    /// The minute (ms since the epoch, a multiple of 60 000).
    pub minute: i64,
    /// Exchanges started (including refused and chain-stopped sends).
    pub exchanges: u32,
    /// Messages: each exchange's message plus every reply round.
    pub messages: u32,
    /// Exchanges that ended at the ping-pong cap.
    pub capped: u32,
    /// Sends stopped by the chain limit.
    pub chain_stopped: u32,
    /// Sends refused by the target's send policy.
    pub refused: u32,
}

/// The failed-connect limit a gateway keeps, for a count shared by every node of a store
/// (`SessionsApi::note_failed_connect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectLimit {
    /// Failures one address may have in `window`.
    pub max_failures: u32,
    /// Failures all addresses together may have in `window`.
    pub max_failures_global: u32,
    pub window: std::time::Duration,
}
