//! The engine's storage seam: `Store`, the operations the engine performs on its state, one
//! transaction each, with domain types in and out (docs/ARCHITECTURE.md, "Storage").
//! Nothing here knows which database holds the data; `switchboard_store_sqlite` is one store.

pub mod check;
pub mod copy;
mod error;
pub mod idempotency;
pub mod line;
pub mod nodes;
pub mod notice;
pub mod openclaw;
mod outbox;
mod scan;
mod transfer;
mod types;

pub use error::{StoreError, StoreErrorKind};
pub use scan::{ScanChunk, ScanFeed, ScanRows, scan_channel};
pub use types::{
    AnnounceRecord, Appended, ExchangePageQuery, ExchangeRow, InboundWrite, KeyRow, NewExchange,
    NewLine, NewRunRecord, NewSpawn, PageFilter, RefusedExchange, Revision, RevisionRow,
    RevisionsPageRead, RunEnding, RunRow, RunStart, RunWrite, SessionScan, SessionsPageRead,
    SpawnAnnounce, SpawnAnnounced, SpawnEnding, SpawnRow, SpawnState, StoredSession, TrafficRow,
    TranscriptRow,
};

pub use outbox::{
    DeliveryCounts, OUTBOX_COLUMNS, OutboxClaim, OutboxOutcome, OutboxQuery, OutboxRow,
    OutboxStatus, OutcomeColumns, RELEASED_ERROR,
};
pub use switchboard_types::api::pairing::{Pairing, PairingAnswer, PairingRequest};
pub use transfer::{
    ImportMark, ImportOutcome, MergeCommit, NewImport, RawLine, iso_timestamp, line_identity,
    sha_hex,
};

use std::collections::HashMap;

use async_trait::async_trait;
use serde_json::Value;

use switchboard_types::key::SessionKey;

/// A write already queued when the call that made it returned, so it commits before
/// anything submitted after it; resolves once it has committed (or failed).
pub type PendingWrite<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send>>;

/// An edit of a stored session, applied inside the store's transaction so a concurrent
/// change cannot be lost between read and write. It may run more than once (a store may
/// replay a transaction); only its last run counts. `Err` refuses the edit with a message.
pub type SessionEdit = Box<dyn FnMut(&mut StoredSession) -> Result<(), String> + Send>;

/// What the engine stores, as named operations. Every write is one transaction, and writes
/// commit in the order they were submitted (a caller may act on a write it has submitted
/// before awaiting it); reads see the last committed state and never run on the async
/// workers (a store blocks elsewhere: a blocking pool, a reader task, a network client).
#[async_trait]
pub trait Store: Send + Sync {
    /// Where the data lives, as a user would name it (a database file's path): for messages
    /// and for the `sessionFile` a session reports.
    fn location(&self) -> String;

    /// Ticks whenever another process (or node) has committed to this store, so front ends
    /// can refresh. A store that cannot tell never ticks.
    fn external_changes(&self) -> tokio::sync::watch::Receiver<u64>;

    // ---- sessions ----

    /// How many sessions exist (every kind, archived included).
    async fn count_sessions(&self) -> Result<u64, StoreError>;

    async fn get_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError>;

    /// `get_session` for a view (a row, a name): the entry's typed fields and
    /// `entry::VIEW_FIELDS` only, the rest (most of an OpenClaw entry) skipped. Never
    /// written back (every write re-reads the entry whole).
    async fn view_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError>;

    /// The session id of the session at `key`, without reading its entry (a transcript
    /// page needs only this; OpenClaw's entries run to 30 KB).
    async fn session_id_of(&self, key: &SessionKey) -> Result<Option<String>, StoreError>;

    /// The keys whose entry has this `sessionId` (normally one).
    async fn keys_by_session_id(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError>;

    /// The keys whose entry has this label.
    async fn keys_by_label(&self, label: &str) -> Result<Vec<SessionKey>, StoreError>;

    /// The sessions `key` spawned.
    async fn children_of(&self, key: &SessionKey) -> Result<Vec<SessionKey>, StoreError>;

    /// The sessions each of `keys` spawned, in the order asked, in one read.
    async fn children_of_each(
        &self,
        keys: &[SessionKey],
    ) -> Result<Vec<Vec<SessionKey>>, StoreError>;

    /// Sessions newest first (or in the name order) as `scan` narrows them, in chunks the
    /// store reads on its side, each only when the caller asks for it (`scan_channel`); the
    /// store stops when the caller drops its end. An error ends the scan.
    async fn scan_sessions(&self, scan: SessionScan) -> ScanRows;

    /// The keys of `limit` sessions from position `offset` of the owner's order (newest
    /// first, or by name), narrowed by `filter`, and how many match in all when `count`.
    /// Must not cost more than the page (an index walk): pages run 100,000 rows deep.
    /// One page of the owner's sessions in one read: the rows in the filter's order, how many
    /// match (when `count`), every session's total, and with `previews` each row's last
    /// message line. A page is one round trip, not one per part.
    async fn page_sessions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
        previews: bool,
    ) -> Result<SessionsPageRead, StoreError>;

    /// `page_sessions` without the entries: each row's key, agent and revision, and the
    /// counts. For a reader that keeps rows it rendered before and reads again only those
    /// whose revision moved (`sessions_by_key`). A few small columns a row: cheap enough to
    /// read on the caller's thread.
    async fn page_revisions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
    ) -> Result<RevisionsPageRead, StoreError>;

    /// The sessions named (those that exist, in the order named), read as views, each with
    /// its revision at the time of this read.
    async fn sessions_by_key(
        &self,
        keys: Vec<SessionKey>,
    ) -> Result<Vec<(StoredSession, Revision)>, StoreError>;

    /// Store `session` with `header` as its transcript's first line (seq 0), unless its key
    /// exists already. Returns the stored session and whether this call created it.
    async fn create_session(
        &self,
        session: StoredSession,
        header: Value,
    ) -> Result<(StoredSession, bool), StoreError>;

    /// Read, edit and write a session in one transaction. `NotFound` when it does not
    /// exist, `Rejected` (with the edit's message) when the edit refuses.
    async fn update_session(
        &self,
        key: &SessionKey,
        edit: SessionEdit,
    ) -> Result<StoredSession, StoreError>;

    /// Delete a session and its transcript; whether it existed.
    async fn delete_session(&self, key: &SessionKey) -> Result<bool, StoreError>;

    // ---- transcripts ----

    /// The newest `limit` lines of a transcript that history shows (messages and shown
    /// notices, `notice`), oldest first (tool lines only when asked).
    async fn transcript_tail(
        &self,
        session_id: &str,
        limit: usize,
        include_tools: bool,
    ) -> Result<Vec<TranscriptRow>, StoreError>;

    /// A page of a transcript: the `limit` lines before `before` (or the newest), oldest
    /// first, and the transcript's newest `seq`, both from one snapshot.
    async fn transcript_page(
        &self,
        session_id: &str,
        before: Option<i64>,
        limit: usize,
        include_tools: bool,
    ) -> Result<(Vec<TranscriptRow>, i64), StoreError>;

    /// Each transcript's last line history shows, tool results aside (`None`: it has none),
    /// in the order asked.
    async fn last_messages(
        &self,
        session_ids: Vec<String>,
    ) -> Result<Vec<Option<TranscriptRow>>, StoreError>;

    /// The lines history shows after `seq`, oldest first, tool lines included, at most
    /// `limit`.
    async fn transcript_after(
        &self,
        session_id: &str,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<TranscriptRow>, StoreError>;

    /// The newest `seq` of a transcript (0: none).
    async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError>;

    /// The first message line of a transcript, as stored (a spawn's task message).
    async fn first_message_line(&self, session_id: &str) -> Result<Option<String>, StoreError>;

    // ---- runs ----

    /// Append lines to an existing session (submitted when called).
    fn submit_append(&self, key: &SessionKey, lines: Vec<NewLine>) -> PendingWrite<Appended>;

    /// Record a run's start and/or end with its lines, in one commit (submitted when
    /// called). The flag says whether this write closed the run (false: it was closed
    /// already); a write that starts the run closes it when it ends it too.
    fn submit_run(&self, write: RunWrite) -> PendingWrite<(Appended, bool)>;

    /// Record an inbound message (submitted when called). `Err` with the recorded key,
    /// and nothing written, when its idempotency key is recorded already (unexpired).
    fn submit_inbound(&self, write: InboundWrite) -> PendingWrite<Result<Appended, KeyRow>>;

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError>;

    /// A session's runs, newest first, at most `limit`.
    async fn runs_of(&self, session_key: &str, limit: usize) -> Result<Vec<RunRow>, StoreError>;

    // ---- exchanges ----

    /// A page of exchanges, newest first (by start, then id), and whether older ones
    /// match. Must cost O(limit), not O(all exchanges).
    async fn page_exchanges(
        &self,
        query: ExchangePageQuery,
    ) -> Result<(Vec<ExchangeRow>, bool), StoreError>;

    /// One exchange with its runs (oldest first), from one snapshot.
    async fn exchange_with_runs(
        &self,
        exchange_id: &str,
    ) -> Result<Option<(ExchangeRow, Vec<RunRow>)>, StoreError>;

    /// Record an exchange as started (status running).
    async fn start_exchange(&self, exchange: NewExchange) -> Result<(), StoreError>;

    /// Close a running exchange with why it ended (`detail`, when known, in words). An
    /// exchange already closed stays as it was.
    async fn finish_exchange(
        &self,
        exchange_id: &str,
        reason: switchboard_types::api::ExchangeEnd,
        detail: Option<String>,
        now: i64,
    ) -> Result<(), StoreError>;

    /// Record what an exchange's announce did, and why the loop before it ended.
    async fn record_exchange_announce(
        &self,
        exchange_id: &str,
        loop_detail: &str,
        announce: AnnounceRecord,
    ) -> Result<(), StoreError>;

    /// Record a send refused before it started an exchange.
    async fn record_refused_exchange(&self, refused: RefusedExchange) -> Result<(), StoreError>;

    /// Traffic per (requester, target, minute) of the exchanges started since `since`.
    async fn traffic_since(&self, since: i64) -> Result<Vec<TrafficRow>, StoreError>;

    // ---- spawns ----

    /// Start a sub-agent: its session, task line, run and spawn record commit together (no
    /// child without a record of who spawned it, no record without a run to finish).
    /// Returns the child's session id and the task line as committed.
    async fn start_spawn(
        &self,
        spawn: NewSpawn,
    ) -> Result<(String, Vec<TranscriptRow>), StoreError>;

    /// Record a child's end, once: only a spawn still running moves to ended (another
    /// process may be resuming the same one). Whether this call decided it.
    async fn end_spawn(&self, child_key: &str, ending: SpawnEnding) -> Result<bool, StoreError>;

    /// Record a sub-agent's announce once: only a spawn that has ended and whose announce
    /// is not recorded yet takes it (`None`: another process did).
    async fn record_spawn_announce(
        &self,
        announce: SpawnAnnounce,
    ) -> Result<Option<SpawnAnnounced>, StoreError>;

    async fn get_spawn(&self, child_key: &str) -> Result<Option<SpawnRow>, StoreError>;

    /// The spawns `requester` made, oldest first.
    async fn spawns_of(&self, requester: &str) -> Result<Vec<SpawnRow>, StoreError>;

    /// How many of `requester`'s sub-agents are still running.
    async fn running_children(&self, requester: &str) -> Result<u32, StoreError>;

    /// Spawns whose announce is not delivered yet (to resume after a restart).
    async fn open_spawns(&self) -> Result<Vec<SpawnRow>, StoreError>;

    /// Children due for archiving: (child key, when).
    async fn archive_timers(&self) -> Result<Vec<(String, i64)>, StoreError>;

    /// Archive a sub-agent at `now`: its spawn record and its session's entry, together.
    /// False when it was archived already (another process got there first).
    async fn archive_child(&self, child_key: &SessionKey, now: i64) -> Result<bool, StoreError>;

    // ---- deliveries ----

    /// Record a message handed to a channel; its id. `row.id` is ignored.
    async fn insert_outbox(&self, row: OutboxRow) -> Result<i64, StoreError>;

    /// What was handed to channels for a session, oldest first.
    async fn outbox_of(&self, session_key: &str) -> Result<Vec<OutboxRow>, StoreError>;

    /// Claim due rows for sending (`OutboxClaim` says which), oldest first; each claimed
    /// row's attempt is counted. Several drains (nodes) claiming at once never get one row
    /// twice.
    async fn claim_outbox(&self, claim: OutboxClaim) -> Result<Vec<OutboxRow>, StoreError>;

    /// Record a send's outcome for row `id` at `now`; false (nothing written) when the row
    /// is no longer `sending` under `owner`'s claim.
    async fn record_outbox(
        &self,
        id: i64,
        owner: &str,
        now: i64,
        outcome: OutboxOutcome,
    ) -> Result<bool, StoreError>;

    /// Deliveries, newest first (`query` filters and bounds them).
    async fn list_outbox(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, StoreError>;

    /// How many deliveries stand in each status.
    async fn count_outbox(&self) -> Result<DeliveryCounts, StoreError>;

    /// Make a failed (or retrying) row due at `now` again with its attempts reset; the row
    /// as it is now, `None` when there is no such row. A row in another status is returned
    /// unchanged.
    async fn retry_outbox(&self, id: i64, now: i64) -> Result<Option<OutboxRow>, StoreError>;

    // ---- pairing (docs/ARCHITECTURE.md, "Channels: pairing") ----

    /// The pairing of `sender` on `channel`: approved, or waiting with a code (which may
    /// have expired).
    async fn pairing_of(&self, channel: &str, sender: &str) -> Result<Option<Pairing>, StoreError>;

    /// In one transaction: `Approved` when the sender was approved, `Waiting` when their code
    /// has not expired at `now`, `Full` when the channel holds `cap` unexpired codes of
    /// others; else `code` is the sender's (until `now + ttl_ms`) and `New`. Expired codes of
    /// the channel are dropped on the way.
    async fn request_pairing(
        &self,
        request: PairingRequest,
        code: &str,
        now: i64,
        ttl_ms: i64,
        cap: u32,
    ) -> Result<PairingAnswer, StoreError>;

    /// Approve the sender `code` (unexpired at `now`) was given to on `channel`; the pairing
    /// as it now stands, `None` when no such code is waiting.
    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
        now: i64,
    ) -> Result<Option<Pairing>, StoreError>;

    /// Approve `sender` on `channel` without a code (one OpenClaw approved: an import); true
    /// when they were not approved yet.
    async fn approve_sender(
        &self,
        channel: &str,
        sender: &str,
        now: i64,
    ) -> Result<bool, StoreError>;

    /// Approved senders and codes unexpired at `now`, of one channel or all, by channel and
    /// newest first.
    async fn pairings(&self, channel: Option<String>, now: i64)
    -> Result<Vec<Pairing>, StoreError>;

    // ---- idempotency ----

    /// The send recorded under an idempotency key, unless it expired by `now`.
    async fn find_idempotency_key(&self, key: &str, now: i64)
    -> Result<Option<KeyRow>, StoreError>;

    // ---- import and export (OpenClaw state) ----

    /// Every import mark, by session key (one read: a re-import of 100,000 sessions looks
    /// each up).
    async fn import_marks(&self) -> Result<HashMap<String, ImportMark>, StoreError>;

    /// `(seq, line_identity)` of every stored line of a transcript, in seq order.
    async fn line_identities(&self, session_id: &str) -> Result<Vec<(i64, String)>, StoreError>;

    /// Write one chunk of a new session's lines under `session_id` from seq `first_seq`
    /// (`clean`: the first chunk, which first clears rows no session owns), submitted when
    /// called. `Some(owner)`, and nothing written, when a session owns that id meanwhile.
    /// The lines stay invisible until `submit_import_session` commits the session row.
    fn submit_import_chunk(
        &self,
        session_id: String,
        first_seq: i64,
        clean: bool,
        lines: Vec<RawLine>,
    ) -> PendingWrite<Option<SessionKey>>;

    /// Commit a new session's import: its last lines, the session row and its mark
    /// together (submitted when called).
    fn submit_import_session(&self, import: NewImport) -> PendingWrite<ImportOutcome>;

    /// Stage lines of a merge under `staging_id` (an id no session owns) from seq
    /// `first_seq`; `clean` clears that id first.
    async fn stage_lines(
        &self,
        staging_id: String,
        first_seq: i64,
        clean: bool,
        lines: Vec<RawLine>,
    ) -> Result<(), StoreError>;

    /// Drop every line under an id no session owns (staged or left by a cut-short import).
    async fn discard_orphan_lines(&self, session_id: String) -> Result<(), StoreError>;

    /// Commit a merge (see `MergeCommit`); false when the session changed meanwhile and
    /// nothing but the staged rows' removal happened.
    async fn commit_merge(&self, merge: MergeCommit) -> Result<bool, StoreError>;

    async fn put_import_mark(&self, mark: ImportMark) -> Result<(), StoreError>;

    /// Hand a transcript's stored lines, exactly as stored, in seq order, to `visit` on the
    /// caller's thread until it returns false; how many it took. Blocking: the export calls it
    /// on the blocking pool, where its synchronous writers run (docs/ARCHITECTURE.md, "The
    /// store seam"); bounded memory whatever the transcript's length.
    fn transcript_lines_now(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<usize, StoreError>;

    /// Whether `key` exists, answered on the caller's thread without yielding (one
    /// primary-key lookup). Only for `SessionsApi::resolve_key`, whose caller relies on it
    /// not waiting (docs/ARCHITECTURE.md, "The store seam"); every other read is async.
    fn session_exists_now(&self, key: &SessionKey) -> Result<bool, StoreError>;

    // ---- several engines (nodes.rs) ----

    /// Whether engine `owner` still runs, by the store's leases; `None` when the store has
    /// none (the state folder's lock files tell). Unsure counts as alive.
    async fn owner_alive(&self, _owner: &str) -> Option<bool> {
        None
    }

    /// This engine's lease on the store.
    fn standing(&self) -> nodes::Standing {
        nodes::Standing::Unleased
    }

    /// Take `key`'s lane for engine `owner` across nodes (a store without leases: always
    /// held; one host's lanes are in the engine).
    async fn claim_lane(&self, _key: &str, _owner: &str) -> Result<nodes::LaneClaim, StoreError> {
        Ok(nodes::LaneClaim::Held)
    }

    /// Give `key`'s lane back. Never fails: a release the server did not take is retried by
    /// the store until it does.
    async fn release_lane(&self, _key: &str, _owner: &str) {}

    /// Take over every engine that is dead: its lease expired, or it is in `dead_here` (the
    /// engines of this host whose process is gone, by their lock files). Close its runs and exchanges, release its
    /// lanes, forget it. Each dead engine is taken over by exactly one caller.
    async fn take_over_dead(
        &self,
        _now: i64,
        _dead_here: Vec<String>,
    ) -> Result<Vec<nodes::TakenOver>, StoreError> {
        Ok(Vec::new())
    }

    /// Count a refused connect from `peer` (and from all addresses together) where every
    /// engine on the store sees it, in windows of `limit.window`; how long until one more
    /// would be within the limit (`None`: within it, or the store keeps no shared count).
    async fn note_failed_connect(
        &self,
        _peer: Option<String>,
        _limit: switchboard_types::api::ConnectLimit,
    ) -> Result<Option<std::time::Duration>, StoreError> {
        Ok(None)
    }

    /// Relay events to the other engines on the store (fire and forget: one that cannot be
    /// relayed reaches them as a `Relayed::Gap`). A store without nodes drops them.
    fn relay(&self, _events: Vec<switchboard_types::api::EngineEvent>) {}

    /// The events other engines relay, from now on; `None`: the store relays nothing.
    fn relayed(&self) -> Option<tokio::sync::mpsc::Receiver<nodes::Relayed>> {
        None
    }
}
