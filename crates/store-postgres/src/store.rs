//! The `Store` trait on `PgStore`: each operation as one transaction (writes, through the
//! writer) or one read on a pooled connection, with the SQLite store's semantics.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::PgError;
use crate::sessions::{self, Read, ScanAfter};
use crate::{PgStore, nodes, outbox, pairings, records, transcript};
use switchboard_store::line::{PreparedLine, finish_rows};
use switchboard_store::nodes::{LaneClaim, Relayed, Standing, TakenOver};
use switchboard_store::{
    AnnounceRecord, Appended, DeliveryCounts, ExchangePageQuery, ExchangeRow, ImportMark,
    ImportOutcome, InboundWrite, KeyRow, MergeCommit, NewExchange, NewImport, NewLine, NewSpawn,
    OutboxClaim, OutboxOutcome, OutboxQuery, OutboxRow, PageFilter, PendingWrite, RawLine,
    RefusedExchange, Revision, RevisionsPageRead, RunRow, RunWrite, ScanRows, SessionEdit,
    SessionScan, SessionsPageRead, SpawnAnnounce, SpawnAnnounced, SpawnEnding, SpawnRow,
    SpawnState, Store, StoreError, StoredSession, TrafficRow, TranscriptRow, scan_channel,
};
use switchboard_store::{Pairing, PairingAnswer, PairingRequest};
use switchboard_types::api::EngineEvent;

/// The `auth_failures` row that counts every address together (no address is `*`).
const GLOBAL_PEER: &str = "*";
use switchboard_types::api::time::now_ms;
use switchboard_types::key::SessionKey;

/// Rows a scan hands over first without a `wanted` hint, and at least in each later chunk.
const SCAN_CHUNK: usize = 32;
/// The largest first chunk a `wanted` hint asks for, and the largest later chunk.
const SCAN_CHUNK_MAX: usize = 1024;
const SCAN_CHUNK_GROWN: usize = 256;

/// Lines an export reads per round trip (`transcript_lines_now`): bounded memory.
const EXPORT_CHUNK: usize = 512;

impl PgStore {
    /// Submit an append of `lines` to `key` with `job`'s other writes in the same
    /// transaction; the lines are serialised here, on the caller's thread.
    fn submit_lines<R, F, Fut>(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
        now: i64,
        job: F,
    ) -> PendingWrite<(Appended, R)>
    where
        R: Send + 'static,
        F: FnOnce(crate::Conn, Arc<Vec<PreparedLine>>) -> Fut + Send + 'static,
        Fut: std::future::Future<
                Output = Result<(String, switchboard_store::line::Placed, R), PgError>,
            > + Send
            + 'static,
    {
        let _ = key;
        let prepared: Vec<PreparedLine> = lines
            .into_iter()
            .map(|l| PreparedLine::new(l, now))
            .collect();
        let shared = Arc::new(prepared);
        let for_writer = shared.clone();
        let pending = self.submit(move |c| job(c, for_writer));
        Box::pin(async move {
            let (session_id, placed, extra) = pending.await?;
            let prepared = Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone());
            Ok((
                Appended {
                    session_id,
                    rows: finish_rows(prepared, placed),
                },
                extra,
            ))
        })
    }
}

/// Append `lines` (none: nothing, no session needed).
async fn append(
    c: &crate::Conn,
    key: &SessionKey,
    lines: &[PreparedLine],
    now: i64,
) -> Result<(String, switchboard_store::line::Placed), PgError> {
    if lines.is_empty() {
        return Ok((String::new(), Vec::new()));
    }
    transcript::append_prepared(c, key, lines, now).await
}

/// The rows of a `RunWrite` (its lines aside); whether it closed the run.
async fn record_run(c: &crate::Conn, w: &RunWrite) -> Result<bool, PgError> {
    let mut closed = false;
    if let Some(start) = &w.start {
        if let Some(x) = &start.exchange {
            records::insert_flow(c, x).await?;
        }
        records::insert_run(c, &start.run, w.end.as_ref()).await?;
        // Inserted finished just now, so nobody else can have closed it.
        closed = w.end.is_some();
    }
    if let Some(ending) = &w.end {
        if let Some((input, output)) = ending.tokens.filter(|t| t.0 > 0 || t.1 > 0) {
            sessions::add_tokens(c, &w.key, input, output).await?;
        }
        if let Some((exchange, reason)) = &w.exchange_end {
            records::finish_flow(c, exchange, *reason, None, ending.ended_at).await?;
        }
        if w.start.is_none() {
            closed = records::finish_run(c, &w.run_id, ending).await?;
        }
    }
    Ok(closed)
}

#[async_trait]
impl Store for PgStore {
    fn location(&self) -> String {
        self.inner.at.clone()
    }

    fn external_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.external.clone()
    }

    async fn count_sessions(&self) -> Result<u64, StoreError> {
        self.read(|c| async move { sessions::count_sessions(&c).await })
            .await
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        let key = key.clone();
        self.read(|c| async move { sessions::read_session(&c, &key, Read::Whole).await })
            .await
    }

    async fn view_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        let key = key.clone();
        self.read(|c| async move { sessions::read_session(&c, &key, Read::View).await })
            .await
    }

    async fn session_id_of(&self, key: &SessionKey) -> Result<Option<String>, StoreError> {
        let key = key.clone();
        self.read(|c| async move { sessions::session_id_of(&c, &key).await })
            .await
    }

    async fn keys_by_session_id(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError> {
        let id = session_id.to_string();
        self.read(|c| async move { sessions::keys_by_session_id(&c, &id).await })
            .await
    }

    async fn keys_by_label(&self, label: &str) -> Result<Vec<SessionKey>, StoreError> {
        let label = label.to_string();
        self.read(|c| async move { sessions::keys_by_label(&c, &label).await })
            .await
    }

    async fn children_of(&self, key: &SessionKey) -> Result<Vec<SessionKey>, StoreError> {
        let key = key.clone();
        self.read(|c| async move { sessions::children_of(&c, &key).await })
            .await
    }

    async fn children_of_each(
        &self,
        keys: &[SessionKey],
    ) -> Result<Vec<Vec<SessionKey>>, StoreError> {
        let keys = keys.to_vec();
        self.read(|c| async move {
            let mut out = Vec::with_capacity(keys.len());
            for k in &keys {
                out.push(sessions::children_of(&c, k).await?);
            }
            Ok(out)
        })
        .await
    }

    async fn scan_sessions(&self, scan: SessionScan) -> ScanRows {
        // Chunks read one at a time, each only when the caller asks (`scan_channel`), on a
        // blocking thread of the store's runtime (the feed's hand-over blocks).
        let (mut feed, rows) = scan_channel();
        // Not the store itself: a scan must not keep it (and its runtime) alive.
        let reader = self.reader();
        self.inner.handle.spawn_blocking(move || {
            let mut size = scan.wanted.unwrap_or(SCAN_CHUNK).clamp(1, SCAN_CHUNK_MAX);
            let mut after = ScanAfter::Start;
            loop {
                let (scan_now, after_now) = (scan.clone(), after.clone());
                let chunk = reader.read_now(move |c| async move {
                    sessions::scan_chunk(&c, &scan_now, &after_now, size).await
                });
                match chunk {
                    Err(e) => return feed.finish_blocking(Err(e)),
                    Ok((chunk, next)) if chunk.len() < size => {
                        let _ = next;
                        return feed.finish_blocking(Ok(chunk));
                    }
                    Ok((chunk, next)) => {
                        if !feed.hand_over_blocking(chunk) {
                            return;
                        }
                        after = next;
                        size = (size * 2).clamp(SCAN_CHUNK, SCAN_CHUNK_GROWN);
                    }
                }
            }
        });
        rows
    }

    async fn page_sessions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
        previews: bool,
    ) -> Result<SessionsPageRead, StoreError> {
        self.read(move |c| async move {
            sessions::page_sessions(&c, &filter, offset, limit, count, previews).await
        })
        .await
    }

    async fn page_revisions(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
    ) -> Result<RevisionsPageRead, StoreError> {
        self.read(move |c| async move {
            sessions::page_revisions(&c, &filter, offset, limit, count).await
        })
        .await
    }

    async fn sessions_by_key(
        &self,
        keys: Vec<SessionKey>,
    ) -> Result<Vec<(StoredSession, Revision)>, StoreError> {
        self.read(|c| async move { sessions::sessions_by_key(&c, &keys).await })
            .await
    }

    async fn create_session(
        &self,
        session: StoredSession,
        header: Value,
    ) -> Result<(StoredSession, bool), StoreError> {
        self.write(|c| async move {
            // Another process creating the same key waits here until its insert commits,
            // then finds it.
            sessions::lock_name(&c, session.key.as_str()).await?;
            if let Some(existing) = sessions::read_session(&c, &session.key, Read::Whole).await? {
                return Ok((existing, false));
            }
            sessions::insert_session(&c, &session, &header).await?;
            Ok((session, true))
        })
        .await
    }

    async fn update_session(
        &self,
        key: &SessionKey,
        mut edit: SessionEdit,
    ) -> Result<StoredSession, StoreError> {
        let key = key.clone();
        self.write(|c| async move {
            let mut s = sessions::lock_session(&c, &key)
                .await?
                .ok_or_else(|| PgError::NoSession(key.to_string()))?;
            edit(&mut s).map_err(PgError::Rejected)?;
            sessions::put_session(&c, &s).await?;
            Ok(s)
        })
        .await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, StoreError> {
        let key = key.clone();
        self.write(|c| async move { sessions::delete_session(&c, &key).await })
            .await
    }

    async fn transcript_tail(
        &self,
        session_id: &str,
        limit: usize,
        include_tools: bool,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| async move {
            transcript::transcript_before(&c, &id, i64::MAX, limit, include_tools).await
        })
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
        self.read(move |c| async move {
            sessions::begin_snapshot(&c).await?;
            let read = async {
                let rows =
                    transcript::transcript_before(&c, &id, before, limit, include_tools).await?;
                Ok((rows, transcript::last_seq(&c, &id).await?))
            }
            .await;
            sessions::end_snapshot(&c, read).await
        })
        .await
    }

    async fn last_messages(
        &self,
        session_ids: Vec<String>,
    ) -> Result<Vec<Option<TranscriptRow>>, StoreError> {
        self.read(|c| async move { transcript::last_messages(&c, &session_ids).await })
            .await
    }

    async fn transcript_after(
        &self,
        session_id: &str,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| async move { transcript::transcript_after(&c, &id, seq, limit).await })
            .await
    }

    async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError> {
        let id = session_id.to_string();
        self.read(|c| async move { transcript::last_seq(&c, &id).await })
            .await
    }

    async fn first_message_line(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let id = session_id.to_string();
        self.read(|c| async move { transcript::first_message_line(&c, &id).await })
            .await
    }

    fn submit_append(&self, key: &SessionKey, lines: Vec<NewLine>) -> PendingWrite<Appended> {
        let k = key.clone();
        let now = now_ms();
        let pending = self.submit_lines(key, lines, now, move |c, lines| async move {
            let (sid, placed) = append(&c, &k, &lines, now).await?;
            Ok((sid, placed, ()))
        });
        Box::pin(async move { Ok(pending.await?.0) })
    }

    fn submit_run(&self, w: RunWrite) -> PendingWrite<(Appended, bool)> {
        let (key, lines, now) = (w.key.clone(), w.lines.clone(), w.now);
        self.submit_lines(&key, lines, now, move |c, lines| async move {
            let closed = record_run(&c, &w).await?;
            let (sid, placed) = append(&c, &w.key, &lines, now).await?;
            Ok((sid, placed, closed))
        })
    }

    fn submit_inbound(&self, w: InboundWrite) -> PendingWrite<Result<Appended, KeyRow>> {
        let (key, now) = (w.key.clone(), w.now);
        let pending = self.submit_lines(
            &key,
            vec![w.line.clone()],
            now,
            move |c, lines| async move {
                if let Some(k) = &w.idempotency {
                    // Another process recording the key waits here until it commits, then
                    // the find sees its row.
                    sessions::lock_name(&c, &format!("idempotency:{}", k.key)).await?;
                    if let Some(found) = records::find_key(&c, &k.key, now).await? {
                        return Ok((String::new(), Vec::new(), Some(found)));
                    }
                }
                let (sid, placed) = append(&c, &w.key, &lines, now).await?;
                if let Some(run) = &w.run {
                    records::insert_run(&c, run, None).await?;
                }
                if let Some(row) = &w.idempotency {
                    let mut row = row.clone();
                    row.seq = placed.first().map_or(0, |p| p.0);
                    records::insert_key(&c, &row).await?;
                }
                Ok((sid, placed, None))
            },
        );
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
        self.read(|c| async move { records::get_run(&c, &id).await })
            .await
    }

    async fn runs_of(&self, session_key: &str, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        let key = session_key.to_string();
        self.read(move |c| async move { records::runs_of(&c, &key, limit).await })
            .await
    }

    async fn page_exchanges(
        &self,
        query: ExchangePageQuery,
    ) -> Result<(Vec<ExchangeRow>, bool), StoreError> {
        self.read(|c| async move { records::page_flows(&c, &query).await })
            .await
    }

    async fn exchange_with_runs(
        &self,
        exchange_id: &str,
    ) -> Result<Option<(ExchangeRow, Vec<RunRow>)>, StoreError> {
        let id = exchange_id.to_string();
        self.read(|c| async move {
            sessions::begin_snapshot(&c).await?;
            let read = async {
                let Some(flow) = records::get_flow(&c, &id).await? else {
                    return Ok(None);
                };
                let runs = records::runs_of_flow(&c, &id).await?;
                Ok(Some((flow, runs)))
            }
            .await;
            sessions::end_snapshot(&c, read).await
        })
        .await
    }

    async fn start_exchange(&self, exchange: NewExchange) -> Result<(), StoreError> {
        self.write(|c| async move { records::insert_flow(&c, &exchange).await })
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
        self.write(move |c| async move {
            records::finish_flow(&c, &id, reason, detail.as_deref(), now).await
        })
        .await
    }

    async fn record_exchange_announce(
        &self,
        exchange_id: &str,
        loop_detail: &str,
        announce: AnnounceRecord,
    ) -> Result<(), StoreError> {
        let (id, detail) = (exchange_id.to_string(), loop_detail.to_string());
        self.write(|c| async move { records::record_announce(&c, &id, &detail, &announce).await })
            .await
    }

    async fn record_refused_exchange(&self, refused: RefusedExchange) -> Result<(), StoreError> {
        self.write(|c| async move { records::insert_refused(&c, &refused).await })
            .await
    }

    async fn traffic_since(&self, since: i64) -> Result<Vec<TrafficRow>, StoreError> {
        self.read(move |c| async move { records::traffic(&c, since).await })
            .await
    }

    async fn start_spawn(&self, s: NewSpawn) -> Result<(String, Vec<TranscriptRow>), StoreError> {
        let prepared = PreparedLine::new(s.task.clone(), s.now);
        let lines = vec![prepared];
        let for_writer = lines.clone();
        let (session_id, placed) = self
            .write(move |c| async move {
                sessions::insert_session(&c, &s.session, &s.header).await?;
                let placed =
                    transcript::append_prepared(&c, &s.session.key, &for_writer, s.now).await?;
                records::insert_run_parts(
                    &c,
                    records::RunParts {
                        run_id: &s.spawn.run_id,
                        session_key: &s.spawn.child_key,
                        agent_id: &s.spawn.agent_id,
                        step: "subagent",
                        round: 0,
                        flow_id: None,
                        owner: &s.owner,
                        started_at: s.now,
                    },
                    None,
                )
                .await?;
                records::insert_spawn(&c, &s.spawn).await?;
                Ok(placed)
            })
            .await?;
        Ok((session_id, finish_rows(lines, placed)))
    }

    async fn end_spawn(&self, child_key: &str, ending: SpawnEnding) -> Result<bool, StoreError> {
        let key = child_key.to_string();
        self.write(|c| async move { records::end_spawn(&c, &key, &ending).await })
            .await
    }

    async fn record_spawn_announce(
        &self,
        a: SpawnAnnounce,
    ) -> Result<Option<SpawnAnnounced>, StoreError> {
        let line = a.line.clone().map(|l| PreparedLine::new(l, a.now));
        let for_writer = line.clone();
        let done = self
            .write(move |c| async move {
                let child = a.child_key.as_str();
                // Locked: a node resuming the same spawn waits, then finds it done.
                match records::get_spawn(&c, child, true).await? {
                    Some(s) if s.status == SpawnState::Ended => {}
                    _ => return Ok(None),
                }
                let mut appended = None;
                if let Some(line) = for_writer
                    && sessions::session_exists(&c, &a.requester).await?
                {
                    appended =
                        Some(transcript::append_prepared(&c, &a.requester, &[line], a.now).await?);
                }
                let mut outbox_id = None;
                if let Some(row) = &a.outbox {
                    outbox_id = Some(outbox::insert_outbox(&c, row).await?);
                }
                records::finish_spawn(&c, child, &a.outcome, a.now, a.archive_at).await?;
                let deleted = if a.delete_child {
                    sessions::delete_session(&c, &a.child_key).await?
                } else {
                    false
                };
                Ok(Some((appended, outbox_id, deleted)))
            })
            .await?;
        Ok(done.map(|(appended, outbox_id, deleted)| SpawnAnnounced {
            appended: match (appended, line) {
                (Some((session_id, placed)), Some(line)) => Some(Appended {
                    session_id,
                    rows: finish_rows(vec![line], placed),
                }),
                _ => None,
            },
            outbox_id,
            deleted,
        }))
    }

    async fn get_spawn(&self, child_key: &str) -> Result<Option<SpawnRow>, StoreError> {
        let key = child_key.to_string();
        self.read(|c| async move { records::get_spawn(&c, &key, false).await })
            .await
    }

    async fn spawns_of(&self, requester: &str) -> Result<Vec<SpawnRow>, StoreError> {
        let key = requester.to_string();
        self.read(|c| async move { records::spawns_of(&c, &key).await })
            .await
    }

    async fn running_children(&self, requester: &str) -> Result<u32, StoreError> {
        let key = requester.to_string();
        self.read(|c| async move { records::running_children(&c, &key).await })
            .await
    }

    async fn open_spawns(&self) -> Result<Vec<SpawnRow>, StoreError> {
        self.read(|c| async move { records::open_spawns(&c).await })
            .await
    }

    async fn archive_timers(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(|c| async move { records::archive_timers(&c).await })
            .await
    }

    async fn archive_child(&self, child_key: &SessionKey, now: i64) -> Result<bool, StoreError> {
        let key = child_key.clone();
        self.write(move |c| async move {
            if !records::archive_spawn(&c, key.as_str(), now).await? {
                return Ok(false);
            }
            if let Some(mut s) = sessions::lock_session(&c, &key).await? {
                s.entry.archived_at = Some(now);
                sessions::put_session(&c, &s).await?;
            }
            Ok(true)
        })
        .await
    }

    async fn insert_outbox(&self, row: OutboxRow) -> Result<i64, StoreError> {
        self.write(|c| async move { outbox::insert_outbox(&c, &row).await })
            .await
    }

    async fn outbox_of(&self, session_key: &str) -> Result<Vec<OutboxRow>, StoreError> {
        let key = session_key.to_string();
        self.read(|c| async move { outbox::outbox_of(&c, &key).await })
            .await
    }

    async fn claim_outbox(&self, claim: OutboxClaim) -> Result<Vec<OutboxRow>, StoreError> {
        self.write(move |c| async move { outbox::claim(&c, &claim).await })
            .await
    }

    async fn record_outbox(
        &self,
        id: i64,
        owner: &str,
        now: i64,
        outcome: OutboxOutcome,
    ) -> Result<bool, StoreError> {
        let owner = owner.to_string();
        self.write(move |c| async move { outbox::record(&c, id, &owner, now, &outcome).await })
            .await
    }

    async fn list_outbox(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        self.read(move |c| async move { outbox::list(&c, query).await })
            .await
    }

    async fn count_outbox(&self) -> Result<DeliveryCounts, StoreError> {
        self.read(|c| async move { outbox::count(&c).await }).await
    }

    async fn pairing_of(&self, channel: &str, sender: &str) -> Result<Option<Pairing>, StoreError> {
        let (channel, sender) = (channel.to_string(), sender.to_string());
        self.read(|c| async move { pairings::pairing_of(&c, &channel, &sender).await })
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
        self.write(move |c| async move {
            pairings::request(&c, &request, &code, now, ttl_ms, cap).await
        })
        .await
    }

    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
        now: i64,
    ) -> Result<Option<Pairing>, StoreError> {
        let (channel, code) = (channel.to_string(), code.to_string());
        self.write(move |c| async move { pairings::approve(&c, &channel, &code, now).await })
            .await
    }

    async fn approve_sender(
        &self,
        channel: &str,
        sender: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (channel, sender) = (channel.to_string(), sender.to_string());
        self.write(
            move |c| async move { pairings::approve_sender(&c, &channel, &sender, now).await },
        )
        .await
    }

    async fn pairings(
        &self,
        channel: Option<String>,
        now: i64,
    ) -> Result<Vec<Pairing>, StoreError> {
        self.read(move |c| async move { pairings::list(&c, channel.as_deref(), now).await })
            .await
    }

    async fn retry_outbox(&self, id: i64, now: i64) -> Result<Option<OutboxRow>, StoreError> {
        self.write(move |c| async move { outbox::retry(&c, id, now).await })
            .await
    }

    async fn find_idempotency_key(
        &self,
        key: &str,
        now: i64,
    ) -> Result<Option<KeyRow>, StoreError> {
        let key = key.to_string();
        self.read(move |c| async move { records::find_key(&c, &key, now).await })
            .await
    }

    async fn import_marks(&self) -> Result<HashMap<String, ImportMark>, StoreError> {
        let marks = self
            .read(|c| async move { records::all_marks(&c).await })
            .await?;
        Ok(marks
            .into_iter()
            .map(|m| (m.session_key.clone(), m))
            .collect())
    }

    async fn line_identities(&self, session_id: &str) -> Result<Vec<(i64, String)>, StoreError> {
        let id = session_id.to_string();
        self.read(|c| async move {
            let mut out = Vec::new();
            let mut after = -1;
            loop {
                let chunk = transcript::lines_after(&c, &id, after, EXPORT_CHUNK).await?;
                let done = chunk.len() < EXPORT_CHUNK;
                for (seq, entry_id, line) in chunk {
                    out.push((seq, switchboard_store::line_identity(&entry_id, &line)));
                    after = seq;
                }
                if done {
                    return Ok(out);
                }
            }
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
        self.submit(move |c| async move {
            if let Some(owner) = sessions::keys_by_session_id(&c, &session_id)
                .await?
                .into_iter()
                .next()
            {
                return Ok(Some(owner));
            }
            if clean {
                transcript::delete_orphan_transcript(&c, &session_id).await?;
            }
            transcript::put_lines(&c, &session_id, first_seq, &lines).await?;
            Ok(None)
        })
    }

    fn submit_import_session(&self, import: NewImport) -> PendingWrite<ImportOutcome> {
        self.submit(move |c| async move {
            let NewImport {
                session,
                first_seq,
                clean,
                lines,
                mark,
            } = &import;
            let sid = &session.entry.session_id;
            sessions::lock_name(&c, session.key.as_str()).await?;
            if sessions::session_exists(&c, &session.key).await? {
                transcript::delete_orphan_transcript(&c, sid).await?;
                return Ok(ImportOutcome::KeyExists);
            }
            if let Some(owner) = sessions::keys_by_session_id(&c, sid)
                .await?
                .into_iter()
                .next()
            {
                return Ok(ImportOutcome::IdTaken(owner));
            }
            if *clean {
                transcript::delete_orphan_transcript(&c, sid).await?;
            }
            transcript::put_lines(&c, sid, *first_seq, lines).await?;
            sessions::put_session(&c, session).await?;
            records::put_mark(&c, mark).await?;
            Ok(ImportOutcome::Imported)
        })
    }

    async fn stage_lines(
        &self,
        staging_id: String,
        first_seq: i64,
        clean: bool,
        lines: Vec<RawLine>,
    ) -> Result<(), StoreError> {
        self.write(move |c| async move {
            if clean {
                transcript::delete_orphan_transcript(&c, &staging_id).await?;
            }
            transcript::put_lines(&c, &staging_id, first_seq, &lines).await
        })
        .await
    }

    async fn discard_orphan_lines(&self, session_id: String) -> Result<(), StoreError> {
        self.write(|c| async move {
            transcript::delete_orphan_transcript(&c, &session_id)
                .await
                .map(|_| ())
        })
        .await
    }

    async fn commit_merge(&self, merge: MergeCommit) -> Result<bool, StoreError> {
        self.write(|c| async move {
            let m = &merge;
            // Checked again inside the transaction (the row locked): a run here may have
            // appended since.
            let still = sessions::lock_session(&c, &m.key)
                .await?
                .is_some_and(|s| s.entry.session_id == m.session_id);
            let last_now = transcript::max_seq(&c, &m.session_id).await?.unwrap_or(-1);
            if !still || last_now != m.first_seq - 1 {
                transcript::delete_orphan_transcript(&c, &m.staging_id).await?;
                return Ok(false);
            }
            if m.clean {
                transcript::delete_orphan_transcript(&c, &m.staging_id).await?;
            }
            transcript::put_lines(&c, &m.staging_id, m.staged, &m.lines).await?;
            transcript::move_staged(&c, &m.staging_id, &m.session_id, m.first_seq).await?;
            if let Some(entry) = &m.entry {
                sessions::put_session(&c, entry).await?;
            }
            records::put_mark(&c, &m.mark).await?;
            Ok(true)
        })
        .await
    }

    async fn put_import_mark(&self, mark: ImportMark) -> Result<(), StoreError> {
        self.write(|c| async move { records::put_mark(&c, &mark).await })
            .await
    }

    fn transcript_lines_now(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<usize, StoreError> {
        // Chunks by seq, each one round trip: bounded memory whatever the length, and a
        // visitor that stops early leaves the rest unread.
        let mut count = 0usize;
        let mut after = -1;
        loop {
            let id = session_id.to_string();
            let chunk = self.read_now(move |c| async move {
                transcript::lines_after(&c, &id, after, EXPORT_CHUNK).await
            })?;
            let done = chunk.len() < EXPORT_CHUNK;
            for (seq, _, line) in chunk {
                if !visit(&line) {
                    return Ok(count);
                }
                count += 1;
                after = seq;
            }
            if done {
                return Ok(count);
            }
        }
    }

    fn session_exists_now(&self, key: &SessionKey) -> Result<bool, StoreError> {
        let key = key.clone();
        self.read_now(|c| async move { sessions::session_exists(&c, &key).await })
    }

    async fn owner_alive(&self, owner: &str) -> Option<bool> {
        let owner = owner.to_string();
        // Unsure (the server away) counts as alive.
        Some(
            self.read(|c| async move { nodes::alive(&c, &owner).await })
                .await
                .unwrap_or(true),
        )
    }

    fn standing(&self) -> Standing {
        match &self.inner.node {
            Some(node) => node.standing(),
            None => Standing::Unleased,
        }
    }

    async fn claim_lane(&self, key: &str, owner: &str) -> Result<LaneClaim, StoreError> {
        let Some(node) = self.inner.node.clone() else {
            return Ok(LaneClaim::Held);
        };
        // Held before asking: should the answer be lost, the heartbeat keeps the row rather
        // than deleting a lane we may be running in.
        node.hold(key);
        let (k, o) = (key.to_string(), owner.to_string());
        let claim = self
            .read(|c| async move { nodes::claim_lane(&c, &k, &o).await })
            .await;
        if !matches!(claim, Ok(LaneClaim::Held)) {
            node.let_go(key);
        }
        claim
    }

    async fn release_lane(&self, key: &str, owner: &str) {
        let Some(node) = self.inner.node.clone() else {
            return;
        };
        node.let_go(key);
        let (k, o) = (key.to_string(), owner.to_string());
        // A release the server did not take: the heartbeat deletes lane rows we do not hold.
        if let Err(e) = self
            .read(|c| async move { nodes::release_lane(&c, &k, &o).await })
            .await
        {
            tracing::debug!(error = %e, key, "releasing a lane failed; the heartbeat retries");
        }
    }

    async fn take_over_dead(
        &self,
        now: i64,
        dead_here: Vec<String>,
    ) -> Result<Vec<TakenOver>, StoreError> {
        PgStore::take_over_dead(self, now, false, dead_here).await
    }

    async fn note_failed_connect(
        &self,
        peer: Option<String>,
        limit: switchboard_types::api::ConnectLimit,
    ) -> Result<Option<std::time::Duration>, StoreError> {
        // All addresses together first: past that, a spray of new addresses adds no rows.
        let window = limit.window;
        let all = self
            .read(move |c| async move {
                nodes::count_failure(&c, GLOBAL_PEER, limit.max_failures_global, window).await
            })
            .await?;
        if all.is_some() {
            return Ok(all);
        }
        let Some(peer) = peer else {
            return Ok(None);
        };
        self.read(move |c| async move {
            nodes::count_failure(&c, &peer, limit.max_failures, window).await
        })
        .await
    }

    fn relay(&self, events: Vec<EngineEvent>) {
        self.inner.relay.send(events);
    }

    fn relayed(&self) -> Option<tokio::sync::mpsc::Receiver<Relayed>> {
        self.inner.relay.take_inbox()
    }
}
