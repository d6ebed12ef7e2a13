//! `SqliteStore`: the `Store` trait over one state folder's SQLite database. Writes go to
//! the single group-committing writer; reads run on pooled connections on tokio's blocking
//! pool, never on the async workers.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::Value;

use super::queries::PreparedLine;

use super::{Storage, StorageError};
use super::{flows, idempotency, imports, outbox, pairings, queries, runs, spawns};
use switchboard_store::{
    AnnounceRecord, Appended, DeliveryCounts, ExchangePageQuery, ExchangeRow, InboundWrite, KeyRow,
    NewExchange, NewLine, NewRunRecord, NewSpawn, OutboxClaim, OutboxOutcome, OutboxQuery,
    OutboxRow, PageFilter, PendingWrite, RefusedExchange, RunRow, RunWrite, SessionEdit,
    SessionScan, SessionsPageRead, SpawnAnnounce, SpawnAnnounced, SpawnEnding, SpawnRow, Store,
    StoreError, StoredSession, TrafficRow, TranscriptRow,
};
use switchboard_store::{ImportMark, ImportOutcome, MergeCommit, NewImport, RawLine};
use switchboard_store::{Pairing, PairingAnswer, PairingRequest};
use switchboard_store::{Revision, RevisionsPageRead};
use switchboard_store::{ScanRows, scan_channel};
use switchboard_types::api::time::now_ms;
use switchboard_types::key::SessionKey;

/// A transcript page of at most this many lines, whose stored text is at most
/// `INLINE_BYTES` (asked of SQLite first, from the records' headers: about 0.01 ms), is read
/// on the caller's thread rather than on the blocking pool: such a read takes about 0.1 ms,
/// and the hop to the pool and back was a quarter of a 100-line `chat.history`
/// (BENCHMARKS.md, issue 25). A longer page, or one of large lines (a 1 MB tool result),
/// still leaves the async workers. A page of revisions (`page_revisions`: small columns
/// only, no entry) within as many rows is read in place too.
const INLINE_ROWS: usize = 200;
const INLINE_BYTES: u64 = 256 * 1024;

/// The SQLite store. Cheap to clone (it shares the `Storage` handle).
#[derive(Clone)]
pub struct SqliteStore {
    storage: Storage,
}

impl SqliteStore {
    pub fn new(storage: Storage) -> SqliteStore {
        SqliteStore { storage }
    }

    /// Run `op` on a pooled connection on the blocking pool.
    /// Submit `job` now; it appends the prepared lines by calling the function it is given
    /// (at most once; not at all keeps them out). The lines are serialised here, on the
    /// caller's thread, not on the writer's: it is the one shared bottleneck.
    fn submit_lines<R, F>(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
        now: i64,
        mut job: F,
    ) -> PendingWrite<(Appended, R)>
    where
        R: Send + 'static,
        F: FnMut(
                &Connection,
                &dyn Fn(&Connection) -> Result<(String, queries::Placed), StorageError>,
            ) -> Result<(String, queries::Placed, R), StorageError>
            + Send
            + 'static,
    {
        let key = key.clone();
        let prepared: Vec<PreparedLine> = lines
            .into_iter()
            .map(|l| PreparedLine::new(l, now))
            .collect();
        let shared = Arc::new(prepared);
        let for_writer = shared.clone();
        let pending = self.storage.submit(move |c| {
            let append = |c: &Connection| {
                if for_writer.is_empty() {
                    return Ok((String::new(), Vec::new()));
                }
                queries::append_prepared(c, &key, &for_writer, now)
            };
            job(c, &append)
        });
        Box::pin(async move {
            let (session_id, placed, extra) = pending.committed().await?;
            let prepared = Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone());
            let rows = queries::finish_rows(prepared, placed);
            Ok((Appended { session_id, rows }, extra))
        })
    }

    async fn read<R, F>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || storage.read(op))
            .await
            .map_err(|e| StoreError::unavailable(format!("a database read stopped: {e}")))?
            .map_err(StoreError::from)
    }

    /// A point read (by primary key or a unique index, a handful of rows) on the caller's
    /// thread. Measured on this VM, such a lookup takes a few microseconds and the hop to the
    /// blocking pool and back several times that (a `sessions_send` makes about ten of them:
    /// 85 µs a send inline, 425 µs through the pool), so only reads that scan (pages, tails,
    /// counts, traffic, exports) leave the async workers.
    fn lookup<R>(
        &self,
        op: impl FnOnce(&Connection) -> Result<R, StorageError>,
    ) -> Result<R, StoreError> {
        Ok(self.storage.read(op)?)
    }

    async fn write<R, F>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        Ok(self.storage.write(op).await?)
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn location(&self) -> String {
        self.storage.path().display().to_string()
    }

    fn external_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.storage.external_changes()
    }

    async fn count_sessions(&self) -> Result<u64, StoreError> {
        self.read(queries::count_sessions).await
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        let key = key.clone();
        self.lookup(|c| queries::get_session(c, &key))
    }

    async fn view_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        self.lookup(|c| queries::view_session(c, key))
    }

    async fn session_id_of(&self, key: &SessionKey) -> Result<Option<String>, StoreError> {
        self.lookup(|c| queries::session_id_of(c, key))
    }

    async fn keys_by_session_id(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError> {
        let id = session_id.to_string();
        self.lookup(|c| queries::keys_by_session_id(c, &id))
    }

    async fn keys_by_label(&self, label: &str) -> Result<Vec<SessionKey>, StoreError> {
        let label = label.to_string();
        self.lookup(|c| queries::keys_by_label(c, &label))
    }

    async fn children_of(&self, key: &SessionKey) -> Result<Vec<SessionKey>, StoreError> {
        let key = key.clone();
        self.lookup(|c| queries::children_of(c, &key))
    }

    async fn children_of_each(
        &self,
        keys: &[SessionKey],
    ) -> Result<Vec<Vec<SessionKey>>, StoreError> {
        let keys = keys.to_vec();
        self.read(move |c| keys.iter().map(|k| queries::children_of(c, k)).collect())
            .await
    }

    async fn scan_sessions(&self, scan: SessionScan) -> ScanRows {
        // Rows go over in chunks, one wake-up of the caller each (a 200-row list was 200
        // hand-overs between the reader thread and the runtime), and the next chunk is read
        // only when the caller asks. The first chunk is the size the caller expects to take.
        let (mut feed, rows) = scan_channel();
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || {
            let mut size = scan.wanted.unwrap_or(SCAN_CHUNK).clamp(1, SCAN_CHUNK_MAX);
            let mut chunk = Vec::with_capacity(size);
            let read = storage.read(|c| {
                queries::scan_sessions(c, &scan, |s| {
                    chunk.push(s);
                    if chunk.len() < size {
                        return true;
                    }
                    // Later chunks grow: a long scan (a text search through every session)
                    // is a few hundred hand-overs, not one per 32 rows.
                    size = (size * 2).clamp(SCAN_CHUNK, SCAN_CHUNK_GROWN);
                    feed.hand_over_blocking(std::mem::replace(&mut chunk, Vec::with_capacity(size)))
                })
            });
            feed.finish_blocking(read.map(|()| chunk).map_err(StoreError::from));
        });
        rows
    }

    async fn page_revisions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
    ) -> Result<RevisionsPageRead, StoreError> {
        // A short page is read here: a few small columns a row and no entry (see
        // `INLINE_ROWS`); a deep one (a long walk to its offset) goes to the pool.
        if offset.saturating_add(limit) <= INLINE_ROWS {
            return self.lookup(|c| queries::page_revisions(c, &filter, offset, limit, count));
        }
        self.read(move |c| queries::page_revisions(c, &filter, offset, limit, count))
            .await
    }

    async fn sessions_by_key(
        &self,
        keys: Vec<SessionKey>,
    ) -> Result<Vec<(StoredSession, Revision)>, StoreError> {
        self.read(move |c| queries::sessions_by_key(c, &keys)).await
    }

    async fn page_sessions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
        previews: bool,
    ) -> Result<SessionsPageRead, StoreError> {
        // Not read here even when short, unlike a transcript page (`INLINE_BYTES`): asking
        // SQLite for the entries' size first cost about what the hop saves (0.06 ms of a
        // 50-row page, BENCHMARKS.md, issue 25), and without asking, a page of large
        // entries (an imported entry is up to ~30 KB, a label is a client's) would hold an
        // async worker for milliseconds.
        self.read(move |c| queries::page_sessions(c, &filter, offset, limit, count, previews))
            .await
    }

    async fn create_session(
        &self,
        session: StoredSession,
        header: Value,
    ) -> Result<(StoredSession, bool), StoreError> {
        self.write(move |c| {
            if let Some(existing) = queries::get_session(c, &session.key)? {
                return Ok((existing, false));
            }
            queries::insert_session(c, &session, &header)?;
            Ok((session.clone(), true))
        })
        .await
    }

    async fn update_session(
        &self,
        key: &SessionKey,
        mut edit: SessionEdit,
    ) -> Result<StoredSession, StoreError> {
        let key = key.clone();
        self.write(move |c| {
            let mut s = queries::get_session(c, &key)?
                .ok_or_else(|| StorageError::NoSession(key.to_string()))?;
            edit(&mut s).map_err(StorageError::Rejected)?;
            queries::put_session(c, &s)?;
            Ok(s)
        })
        .await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, StoreError> {
        let key = key.clone();
        self.write(move |c| queries::delete_session(c, &key)).await
    }

    async fn transcript_tail(
        &self,
        session_id: &str,
        limit: usize,
        include_tools: bool,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| queries::transcript_tail(c, &id, limit, include_tools))
            .await
    }

    async fn transcript_page(
        &self,
        session_id: &str,
        before: Option<i64>,
        limit: usize,
        include_tools: bool,
    ) -> Result<(Vec<TranscriptRow>, i64), StoreError> {
        let id = session_id.to_string();
        let before = before.unwrap_or(i64::MAX);
        let small = limit <= INLINE_ROWS
            && self.lookup(|c| queries::transcript_bytes(c, &id, before, limit, include_tools))?
                <= INLINE_BYTES;
        let read = move |c: &Connection| {
            let rows = queries::transcript_before(c, &id, before, limit, include_tools)?;
            Ok((rows, queries::last_seq(c, &id)?))
        };
        // A short page of small lines is read here: see `INLINE_BYTES`.
        if small {
            return self.lookup(read);
        }
        self.read(read).await
    }

    async fn last_messages(
        &self,
        session_ids: Vec<String>,
    ) -> Result<Vec<Option<TranscriptRow>>, StoreError> {
        self.read(move |c| queries::last_messages(c, &session_ids))
            .await
    }

    async fn transcript_after(
        &self,
        session_id: &str,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| queries::transcript_after(c, &id, seq, limit))
            .await
    }

    async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError> {
        let id = session_id.to_string();
        self.lookup(|c| queries::last_seq(c, &id))
    }

    async fn first_message_line(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| queries::first_message_line(c, &id))
            .await
    }

    fn submit_append(&self, key: &SessionKey, lines: Vec<NewLine>) -> PendingWrite<Appended> {
        let pending = self.submit_lines(key, lines, now_ms(), |c, append| {
            let (sid, placed) = append(c)?;
            Ok((sid, placed, ()))
        });
        Box::pin(async move { Ok(pending.await?.0) })
    }

    fn submit_run(&self, w: RunWrite) -> PendingWrite<(Appended, bool)> {
        let (key, lines, now) = (w.key.clone(), w.lines.clone(), w.now);
        self.submit_lines(&key, lines, now, move |c, append| {
            let closed = record_run(c, &w)?;
            let (sid, placed) = append(c)?;
            Ok((sid, placed, closed))
        })
    }

    fn submit_inbound(&self, w: InboundWrite) -> PendingWrite<Result<Appended, KeyRow>> {
        let (key, now) = (w.key.clone(), w.now);
        let pending = self.submit_lines(&key, vec![w.line.clone()], now, move |c, append| {
            // Another call with the key may have committed since the caller looked.
            if let Some(k) = &w.idempotency
                && let Some(found) = idempotency::find(c, &k.key, now)?
            {
                return Ok((String::new(), Vec::new(), Some(found)));
            }
            let (sid, placed) = append(c)?;
            if let Some(run) = &w.run {
                runs::insert_run(c, &new_run(run))?;
            }
            if let Some(row) = &w.idempotency {
                let mut row = row.clone();
                row.seq = placed.first().map_or(0, |p| p.0);
                idempotency::insert(c, &row)?;
            }
            Ok((sid, placed, None))
        });
        Box::pin(async move {
            let (appended, repeat) = pending.await?;
            Ok(match repeat {
                Some(found) => Err(found),
                None => Ok(appended),
            })
        })
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let id = run_id.to_string();
        self.lookup(|c| runs::get_run(c, &id))
    }

    async fn runs_of(&self, session_key: &str, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        let key = session_key.to_string();
        self.read(move |c| runs::runs_of(c, &key, limit)).await
    }

    async fn page_exchanges(
        &self,
        query: ExchangePageQuery,
    ) -> Result<(Vec<ExchangeRow>, bool), StoreError> {
        self.read(move |c| {
            flows::page(
                c,
                &flows::FlowPageQuery {
                    key: query.key.as_deref(),
                    before: query.before.as_deref(),
                    since: query.since,
                    limit: query.limit,
                },
            )
        })
        .await
    }

    async fn exchange_with_runs(
        &self,
        exchange_id: &str,
    ) -> Result<Option<(ExchangeRow, Vec<RunRow>)>, StoreError> {
        let id = exchange_id.to_string();
        self.read(move |c| {
            let Some(exchange) = flows::get(c, &id)? else {
                return Ok(None);
            };
            Ok(Some((exchange, runs::runs_of_flow(c, &id)?)))
        })
        .await
    }

    async fn start_exchange(&self, e: NewExchange) -> Result<(), StoreError> {
        self.write(move |c| {
            flows::insert_flow(
                c,
                &flows::NewFlow {
                    flow_id: &e.exchange_id,
                    chain_id: &e.chain_id,
                    requester: &e.requester,
                    target: &e.target,
                    message: &e.message,
                    run_id: &e.run_id,
                    owner: &e.owner,
                    started_at: e.started_at,
                },
            )
        })
        .await
    }

    async fn finish_exchange(
        &self,
        exchange_id: &str,
        reason: switchboard_types::api::ExchangeEnd,
        detail: Option<String>,
        now: i64,
    ) -> Result<(), StoreError> {
        let id = exchange_id.to_string();
        self.write(move |c| flows::finish_flow(c, &id, reason.as_str(), detail.as_deref(), now))
            .await
    }

    async fn record_exchange_announce(
        &self,
        exchange_id: &str,
        loop_detail: &str,
        announce: AnnounceRecord,
    ) -> Result<(), StoreError> {
        let (id, loop_detail) = (exchange_id.to_string(), loop_detail.to_string());
        self.write(move |c| flows::record_announce(c, &id, &loop_detail, &announce))
            .await
    }

    async fn record_refused_exchange(&self, r: RefusedExchange) -> Result<(), StoreError> {
        self.write(move |c| {
            flows::insert_refused(
                c,
                &flows::RefusedSend {
                    flow_id: &r.exchange_id,
                    kind: r.kind.as_str(),
                    chain_id: &r.chain_id,
                    requester: &r.requester,
                    target: &r.target,
                    message: &r.message,
                    run_id: &r.run_id,
                    owner: &r.owner,
                    at: r.at,
                    reason: r.reason.as_str(),
                    detail: &r.detail,
                },
            )
        })
        .await
    }

    async fn traffic_since(&self, since: i64) -> Result<Vec<TrafficRow>, StoreError> {
        self.read(move |c| flows::traffic(c, since)).await
    }

    async fn start_spawn(&self, s: NewSpawn) -> Result<(String, Vec<TranscriptRow>), StoreError> {
        self.write(move |c| {
            queries::insert_session(c, &s.session, &s.header)?;
            let appended =
                queries::append_lines(c, &s.session.key, std::slice::from_ref(&s.task), s.now)?;
            runs::insert_run(
                c,
                &runs::NewRun {
                    run_id: &s.spawn.run_id,
                    session_key: &s.spawn.child_key,
                    agent_id: &s.spawn.agent_id,
                    step: "subagent",
                    round: 0,
                    flow_id: None,
                    owner: &s.owner,
                    started_at: s.now,
                },
            )?;
            spawns::insert_spawn(c, &s.spawn)?;
            Ok(appended)
        })
        .await
    }

    async fn end_spawn(&self, child_key: &str, e: SpawnEnding) -> Result<bool, StoreError> {
        let key = child_key.to_string();
        self.write(move |c| {
            spawns::end_spawn(
                c,
                &key,
                &spawns::SpawnEnd {
                    outcome: &e.outcome,
                    error: e.error.as_deref(),
                    ended_at: e.ended_at,
                    announce: e.announce.as_deref(),
                    announce_state: &e.announce_state,
                },
            )
        })
        .await
    }

    async fn record_spawn_announce(
        &self,
        a: SpawnAnnounce,
    ) -> Result<Option<SpawnAnnounced>, StoreError> {
        self.write(move |c| {
            let child = a.child_key.as_str();
            match spawns::get_spawn(c, child)? {
                Some(s) if s.status == switchboard_store::SpawnState::Ended => {}
                _ => return Ok(None),
            }
            let mut done = SpawnAnnounced::default();
            if let Some(line) = &a.line
                && queries::get_session(c, &a.requester)?.is_some()
            {
                let (session_id, rows) =
                    queries::append_lines(c, &a.requester, std::slice::from_ref(line), a.now)?;
                done.appended = Some(Appended { session_id, rows });
            }
            if let Some(row) = &a.outbox {
                done.outbox_id = Some(outbox::insert_outbox(c, row)?);
            }
            spawns::finish_spawn(c, child, &a.outcome, a.now, a.archive_at)?;
            if a.delete_child {
                done.deleted = queries::delete_session(c, &a.child_key)?;
            }
            Ok(Some(done))
        })
        .await
    }

    async fn get_spawn(&self, child_key: &str) -> Result<Option<SpawnRow>, StoreError> {
        let key = child_key.to_string();
        self.lookup(|c| spawns::get_spawn(c, &key))
    }

    async fn spawns_of(&self, requester: &str) -> Result<Vec<SpawnRow>, StoreError> {
        let key = requester.to_string();
        self.read(move |c| spawns::spawns_of(c, &key)).await
    }

    async fn running_children(&self, requester: &str) -> Result<u32, StoreError> {
        let key = requester.to_string();
        self.lookup(|c| spawns::running_children(c, &key))
    }

    async fn open_spawns(&self) -> Result<Vec<SpawnRow>, StoreError> {
        self.read(spawns::open_spawns).await
    }

    async fn archive_timers(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(spawns::archive_timers).await
    }

    async fn archive_child(&self, child_key: &SessionKey, now: i64) -> Result<bool, StoreError> {
        let key = child_key.clone();
        self.write(move |c| {
            if !spawns::archive_spawn(c, key.as_str(), now)? {
                return Ok(false);
            }
            if let Some(mut s) = queries::get_session(c, &key)? {
                s.entry.archived_at = Some(now);
                queries::put_session(c, &s)?;
            }
            Ok(true)
        })
        .await
    }

    async fn insert_outbox(&self, row: OutboxRow) -> Result<i64, StoreError> {
        self.write(move |c| outbox::insert_outbox(c, &row)).await
    }

    async fn outbox_of(&self, session_key: &str) -> Result<Vec<OutboxRow>, StoreError> {
        let key = session_key.to_string();
        self.read(move |c| outbox::outbox_of(c, &key)).await
    }

    async fn claim_outbox(&self, claim: OutboxClaim) -> Result<Vec<OutboxRow>, StoreError> {
        self.write(move |c| outbox::claim(c, &claim)).await
    }

    async fn record_outbox(
        &self,
        id: i64,
        owner: &str,
        now: i64,
        outcome: OutboxOutcome,
    ) -> Result<bool, StoreError> {
        let owner = owner.to_string();
        self.write(move |c| outbox::record(c, id, &owner, now, &outcome))
            .await
    }

    async fn list_outbox(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        self.read(move |c| outbox::list(c, query)).await
    }

    async fn count_outbox(&self) -> Result<DeliveryCounts, StoreError> {
        self.read(outbox::count).await
    }

    async fn pairing_of(&self, channel: &str, sender: &str) -> Result<Option<Pairing>, StoreError> {
        let (channel, sender) = (channel.to_string(), sender.to_string());
        self.read(move |c| pairings::pairing_of(c, &channel, &sender))
            .await
    }

    async fn request_pairing(
        &self,
        request: PairingRequest,
        code: &str,
        now: i64,
        ttl_ms: i64,
        cap: u32,
    ) -> Result<PairingAnswer, StoreError> {
        let code = code.to_string();
        self.write(move |c| pairings::request(c, &request, &code, now, ttl_ms, cap))
            .await
    }

    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
        now: i64,
    ) -> Result<Option<Pairing>, StoreError> {
        let (channel, code) = (channel.to_string(), code.to_string());
        self.write(move |c| pairings::approve(c, &channel, &code, now))
            .await
    }

    async fn approve_sender(
        &self,
        channel: &str,
        sender: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (channel, sender) = (channel.to_string(), sender.to_string());
        self.write(move |c| pairings::approve_sender(c, &channel, &sender, now))
            .await
    }

    async fn pairings(
        &self,
        channel: Option<String>,
        now: i64,
    ) -> Result<Vec<Pairing>, StoreError> {
        self.read(move |c| pairings::list(c, channel.as_deref(), now))
            .await
    }

    async fn retry_outbox(&self, id: i64, now: i64) -> Result<Option<OutboxRow>, StoreError> {
        self.write(move |c| outbox::retry(c, id, now)).await
    }

    async fn find_idempotency_key(
        &self,
        key: &str,
        now: i64,
    ) -> Result<Option<KeyRow>, StoreError> {
        let key = key.to_string();
        self.lookup(|c| idempotency::find(c, &key, now))
    }

    async fn import_marks(&self) -> Result<HashMap<String, ImportMark>, StoreError> {
        self.read(imports::all_marks).await
    }

    async fn line_identities(&self, session_id: &str) -> Result<Vec<(i64, String)>, StoreError> {
        let sid = session_id.to_string();
        self.read(move |c| {
            let mut out = Vec::new();
            imports::stored_lines(c, &sid, |seq, id, line| {
                out.push((seq, switchboard_store::line_identity(id, line)));
            })?;
            Ok(out)
        })
        .await
    }

    fn submit_import_chunk(
        &self,
        session_id: String,
        first_seq: i64,
        clean: bool,
        lines: Vec<RawLine>,
    ) -> PendingWrite<Option<SessionKey>> {
        let pending = self.storage.submit(move |conn| {
            if let Some(owner) = queries::keys_by_session_id(conn, &session_id)?
                .into_iter()
                .next()
            {
                return Ok(Some(owner));
            }
            if clean {
                queries::delete_orphan_transcript(conn, &session_id)?;
            }
            queries::put_lines(conn, &session_id, first_seq, &lines)?;
            Ok(None)
        });
        Box::pin(async move { Ok(pending.committed().await?) })
    }

    fn submit_import_session(&self, import: NewImport) -> PendingWrite<ImportOutcome> {
        let pending = self.storage.submit(move |conn| {
            let NewImport {
                session,
                first_seq,
                clean,
                lines,
                mark,
            } = &import;
            let sid = &session.entry.session_id;
            if queries::get_session(conn, &session.key)?.is_some() {
                queries::delete_orphan_transcript(conn, sid)?;
                return Ok(ImportOutcome::KeyExists);
            }
            if let Some(owner) = queries::keys_by_session_id(conn, sid)?.into_iter().next() {
                return Ok(ImportOutcome::IdTaken(owner));
            }
            if *clean {
                queries::delete_orphan_transcript(conn, sid)?;
            }
            queries::put_lines(conn, sid, *first_seq, lines)?;
            queries::put_session(conn, session)?;
            imports::put_mark(conn, mark)?;
            Ok(ImportOutcome::Imported)
        });
        Box::pin(async move { Ok(pending.committed().await?) })
    }

    async fn stage_lines(
        &self,
        staging_id: String,
        first_seq: i64,
        clean: bool,
        lines: Vec<RawLine>,
    ) -> Result<(), StoreError> {
        self.write(move |conn| {
            if clean {
                queries::delete_orphan_transcript(conn, &staging_id)?;
            }
            queries::put_lines(conn, &staging_id, first_seq, &lines)
        })
        .await
    }

    async fn discard_orphan_lines(&self, session_id: String) -> Result<(), StoreError> {
        self.write(move |conn| queries::delete_orphan_transcript(conn, &session_id))
            .await
            .map(|_| ())
    }

    async fn commit_merge(&self, merge: MergeCommit) -> Result<bool, StoreError> {
        self.write(move |conn| {
            let m = &merge;
            // Checked again inside the transaction: a run here may have appended since.
            let still = queries::get_session(conn, &m.key)?
                .is_some_and(|s| s.entry.session_id == m.session_id);
            let last_now = imports::max_seq(conn, &m.session_id)?.unwrap_or(-1);
            if !still || last_now != m.first_seq - 1 {
                queries::delete_orphan_transcript(conn, &m.staging_id)?;
                return Ok(false);
            }
            if m.clean {
                queries::delete_orphan_transcript(conn, &m.staging_id)?;
            }
            queries::put_lines(conn, &m.staging_id, m.staged, &m.lines)?;
            imports::move_staged(conn, &m.staging_id, &m.session_id, m.first_seq)?;
            if let Some(entry) = &m.entry {
                queries::put_session(conn, entry)?;
            }
            imports::put_mark(conn, &m.mark)?;
            Ok(true)
        })
        .await
    }

    async fn put_import_mark(&self, mark: ImportMark) -> Result<(), StoreError> {
        self.write(move |conn| imports::put_mark(conn, &mark)).await
    }

    fn transcript_lines_now(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<usize, StoreError> {
        let mut count = 0usize;
        let mut stopped = false;
        let read = self.storage.read(|c| {
            queries::transcript_lines(c, session_id, |line| {
                if visit(line) {
                    count += 1;
                    Ok(())
                } else {
                    // Ends the statement; reported as the visitor's stop, not an error.
                    stopped = true;
                    Err(StorageError::Rejected("stopped by the reader".into()))
                }
            })
        });
        match read {
            Err(_) if stopped => Ok(count),
            other => other.map(|()| count).map_err(StoreError::from),
        }
    }

    fn session_exists_now(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.lookup(|c| queries::session_exists(c, key))
    }
}

/// Rows a session scan hands its caller in its first chunk (without a `wanted` hint) and
/// at least in each later one.
const SCAN_CHUNK: usize = 32;

/// The largest first chunk a scan's `wanted` hint asks for.
const SCAN_CHUNK_MAX: usize = 1024;

/// The largest later chunk.
const SCAN_CHUNK_GROWN: usize = 256;

/// The run row as the SQL helpers take it.
fn new_run(r: &NewRunRecord) -> runs::NewRun<'_> {
    runs::NewRun {
        run_id: &r.run_id,
        session_key: &r.session_key,
        agent_id: &r.agent_id,
        step: r.step.as_str(),
        round: r.round,
        flow_id: r.exchange_id.as_deref(),
        owner: &r.owner,
        started_at: r.started_at,
    }
}

/// The rows of a `RunWrite` (its lines aside), in the caller's transaction; whether it
/// closed the run.
fn record_run(c: &Connection, w: &RunWrite) -> Result<bool, StorageError> {
    let end = w.end.as_ref().map(|e| runs::RunEnd {
        status: e.status.as_str(),
        ended_at: e.ended_at,
        error: e.error.as_deref(),
        reply: e.reply.as_deref(),
        tokens_in: e.tokens.map(|t| t.0),
        tokens_out: e.tokens.map(|t| t.1),
    });
    let mut closed = false;
    if let Some(start) = &w.start {
        if let Some(x) = &start.exchange {
            flows::insert_flow(
                c,
                &flows::NewFlow {
                    flow_id: &x.exchange_id,
                    chain_id: &x.chain_id,
                    requester: &x.requester,
                    target: &x.target,
                    message: &x.message,
                    run_id: &x.run_id,
                    owner: &x.owner,
                    started_at: x.started_at,
                },
            )?;
        }
        match &end {
            Some(end) => runs::insert_finished_run(c, &new_run(&start.run), end)?,
            None => runs::insert_run(c, &new_run(&start.run))?,
        }
        // Inserted finished just now, so nobody else can have closed it.
        closed = end.is_some();
    }
    if let Some(ending) = &w.end {
        if let Some((input, output)) = ending.tokens.filter(|t| t.0 > 0 || t.1 > 0) {
            queries::add_tokens(c, &w.key, input, output)?;
        }
        if let Some((exchange, reason)) = &w.exchange_end {
            flows::finish_flow(c, exchange, reason.as_str(), None, ending.ended_at)?;
        }
    }
    if w.start.is_none()
        && let Some(end) = &end
    {
        closed = runs::finish_run(c, &w.run_id, end)?;
    }
    Ok(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `Store` read goes through `SqliteStore::read`: on a single-threaded runtime
    /// (the console's and the tests' shape) it must run on another thread, or a slow query
    /// would stall every task on that runtime while it runs.
    #[test]
    fn reads_run_off_the_async_worker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::new(Storage::open(dir.path()).expect("open"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let worker = std::thread::current().id();
        let (reader, count) = rt.block_on(async {
            let reader = store
                .read(|_| Ok(std::thread::current().id()))
                .await
                .expect("read");
            (reader, store.count_sessions().await.expect("count"))
        });
        assert_ne!(reader, worker, "the read ran on the async worker");
        assert_eq!(count, 0);
    }
}
