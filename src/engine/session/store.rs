//! Session entries keyed by `SessionKey`: create, read, patch, delete, append to their
//! transcripts, look up by sessionId or label; every committed change becomes an event.

use serde_json::{Value, json};

use crate::engine::session::entry::{DeliveryContext, SessionEntry};
use crate::engine::events::{EngineEvent, EventBus};
use crate::engine::session::key::{KeyScheme, SessionKey};
use std::sync::Arc;

use crate::store::{Store, StoreError};
use crate::store_sqlite::queries::{
    self, NewLine, PreparedLine, SessionScan, StoredSession, TranscriptRow,
};
use crate::store_sqlite::{Pending, Storage, StorageError};

/// What an inbound message or a creator knows about a session that does not exist yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionInit {
    pub channel: Option<String>,
    pub chat_type: Option<String>,
    pub display_name: Option<String>,
    /// Where replies go on that channel (a chat or user id).
    pub to: Option<String>,
    pub label: Option<String>,
    pub spawned_by: Option<SessionKey>,
}

/// The first line of a new session's transcript (OpenClaw's `session` header).
pub(crate) fn transcript_header(session_id: &str, cwd: &str, now: i64) -> Value {
    json!({
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": queries::iso_timestamp(now),
        "cwd": cwd,
    })
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[derive(Clone)]
pub struct SessionStore {
    store: Arc<dyn Store>,
    /// The SQLite handle, for the writes and reads not behind `Store` yet.
    storage: Storage,
    scheme: KeyScheme,
    events: EventBus,
}

impl SessionStore {
    pub fn new(
        store: Arc<dyn Store>,
        storage: Storage,
        scheme: KeyScheme,
        events: EventBus,
    ) -> SessionStore {
        SessionStore {
            store,
            storage,
            scheme,
            events,
        }
    }

    /// The store behind the engine.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// A read on the SQLite handle, for what is not behind `Store` yet.
    pub fn sqlite_read<R>(
        &self,
        op: impl FnOnce(&rusqlite::Connection) -> Result<R, StorageError>,
    ) -> Result<R, StoreError> {
        Ok(self.storage.read(op)?)
    }

    /// A write on the SQLite handle, for what is not behind `Store` yet.
    pub async fn sqlite_write<R, F>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&rusqlite::Connection) -> Result<R, StorageError> + Send + 'static,
    {
        Ok(self.storage.write(op).await?)
    }

    pub fn scheme(&self) -> &KeyScheme {
        &self.scheme
    }

    pub async fn count(&self) -> Result<u64, StoreError> {
        self.store.count_sessions().await
    }

    pub async fn get(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        self.store.get_session(key).await
    }

    pub async fn keys_by_session_id(&self, id: &str) -> Result<Vec<SessionKey>, StoreError> {
        self.store.keys_by_session_id(id).await
    }

    pub async fn keys_by_label(&self, label: &str) -> Result<Vec<SessionKey>, StoreError> {
        self.store.keys_by_label(label).await
    }

    pub async fn children_of(&self, key: &SessionKey) -> Result<Vec<SessionKey>, StoreError> {
        self.store.children_of(key).await
    }

    pub fn scan(
        &self,
        scan: &SessionScan,
        visit: impl FnMut(StoredSession) -> bool,
    ) -> Result<(), StoreError> {
        Ok(self
            .storage
            .read(|c| queries::scan_sessions(c, scan, visit))?)
    }

    pub async fn tail(
        &self,
        session_id: &str,
        limit: usize,
        include_tools: bool,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        self.store
            .transcript_tail(session_id, limit, include_tools)
            .await
    }

    /// The message lines of a session after `seq` (oldest first, tool lines included), at
    /// most `limit`.
    pub async fn after(
        &self,
        session_id: &str,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        self.store.transcript_after(session_id, seq, limit).await
    }

    /// The newest `seq` of a session's transcript (0: none).
    pub async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError> {
        self.store.last_seq(session_id).await
    }

    /// Build the row for a brand-new session (not yet stored).
    /// The folder recorded as `cwd` in transcript headers.
    pub(crate) fn cwd(&self) -> String {
        self.storage
            .path()
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// A brand-new session row (not yet stored), as `ensure` would create it.
    pub(crate) fn fresh(&self, key: &SessionKey, init: &SessionInit, now: i64) -> StoredSession {
        let mut entry = SessionEntry::new(now);
        entry.chat_type = init.chat_type.clone();
        entry.display_name = init.display_name.clone();
        entry.label = init.label.clone();
        if let Some(parent) = &init.spawned_by {
            entry.spawned_by = Some(parent.to_string());
            entry.parent_session_key = Some(parent.to_string());
        }
        if let Some(channel) = &init.channel {
            // Groups keep their channel on the entry; direct chats learn it as their last route.
            if matches!(init.chat_type.as_deref(), Some("group" | "channel")) {
                entry.channel = Some(channel.clone());
            }
            entry.last_channel = Some(channel.clone());
            entry.delivery_context = Some(DeliveryContext {
                channel: Some(channel.clone()),
                to: init.to.clone(),
                ..DeliveryContext::default()
            });
            if init.to.is_some() {
                entry.last_to = init.to.clone();
            }
        }
        let agent_id = key.agent_id(&self.scheme.default_agent).to_string();
        let kind = self.scheme.kind(key, entry.chat_type.as_deref());
        StoredSession {
            key: key.clone(),
            agent_id,
            kind,
            entry,
        }
    }

    /// The session `key`, created with `init` if it does not exist. Returns it and whether it
    /// was created. Creation and the transcript header commit together.
    pub async fn ensure(
        &self,
        key: &SessionKey,
        init: SessionInit,
    ) -> Result<(StoredSession, bool), StoreError> {
        // Most calls find the session: a read answers them without a write transaction.
        if let Some(existing) = self.get(key).await? {
            return Ok((existing, false));
        }
        let now = now_ms();
        let fresh = self.fresh(key, &init, now);
        let header = transcript_header(&fresh.entry.session_id, &self.cwd(), now);
        let (stored, created) = self.store.create_session(fresh, header).await?;
        if created {
            self.events.emit(EngineEvent::SessionCreated {
                key: key.to_string(),
                session_id: stored.entry.session_id.clone(),
            });
        }
        Ok((stored, created))
    }

    /// Append transcript lines to an existing session.
    pub async fn append(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
    ) -> Result<Vec<TranscriptRow>, StoreError> {
        let (rows, ()) = self.append_and(key, lines, |_| Ok(())).await?;
        Ok(rows)
    }

    /// Run `op` and append `lines` in one writer job (one commit): how a run records its
    /// start (run row + inbound message) and its end (reply + outcome) without paying a
    /// commit for each. `op` runs first; it may run twice (see `Storage::write`).
    pub async fn append_and<R, F>(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
        op: F,
    ) -> Result<(Vec<TranscriptRow>, R), StoreError>
    where
        R: Send + 'static,
        F: FnMut(&rusqlite::Connection) -> Result<R, StorageError> + Send + 'static,
    {
        self.submit_append(key, lines, op).committed().await
    }

    /// `append_and`, submitted now and committed when awaited (see `Storage::submit`).
    pub fn submit_append<R, F>(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
        mut op: F,
    ) -> PendingAppend<R>
    where
        R: Send + 'static,
        F: FnMut(&rusqlite::Connection) -> Result<R, StorageError> + Send + 'static,
    {
        self.submit_lines(key, lines, move |c, append| {
            let extra = op(c)?;
            let (sid, placed) = append(c)?;
            Ok((sid, placed, extra))
        })
    }

    /// An append that `guard` may keep out, in one writer job: `guard` runs first, and what
    /// it returns (`Some`) ends the job with nothing appended; otherwise the lines go in
    /// and `then` runs with where they landed. Everything commits together, so what `then`
    /// writes about the lines (a key naming their seq) exists exactly when they do.
    pub fn submit_append_guarded<H, R, G, F>(
        &self,
        key: &SessionKey,
        lines: Vec<NewLine>,
        mut guard: G,
        mut then: F,
    ) -> PendingAppend<Result<R, H>>
    where
        H: Send + 'static,
        R: Send + 'static,
        G: FnMut(&rusqlite::Connection) -> Result<Option<H>, StorageError> + Send + 'static,
        F: FnMut(&rusqlite::Connection, &queries::Placed) -> Result<R, StorageError>
            + Send
            + 'static,
    {
        self.submit_lines(key, lines, move |c, append| {
            if let Some(held) = guard(c)? {
                return Ok((String::new(), Vec::new(), Err(held)));
            }
            let (sid, placed) = append(c)?;
            let extra = then(c, &placed)?;
            Ok((sid, placed, Ok(extra)))
        })
    }

    /// Submit `job`, which appends the prepared lines by calling the function it is given
    /// (at most once; not at all keeps them out).
    fn submit_lines<R, F>(&self, key: &SessionKey, lines: Vec<NewLine>, mut job: F) -> PendingAppend<R>
    where
        R: Send + 'static,
        F: FnMut(
                &rusqlite::Connection,
                &dyn Fn(&rusqlite::Connection) -> Result<(String, queries::Placed), StorageError>,
            ) -> Result<(String, queries::Placed, R), StorageError>
            + Send
            + 'static,
    {
        let k = key.clone();
        let now = now_ms();
        // Serialise here, not on the writer thread: it is the one shared bottleneck.
        let prepared: Vec<PreparedLine> = lines
            .into_iter()
            .map(|l| PreparedLine::new(l, now))
            .collect();
        let shared = std::sync::Arc::new(prepared);
        let for_writer = shared.clone();
        let pending = self.storage.submit(move |c| {
            let append = |c: &rusqlite::Connection| {
                if for_writer.is_empty() {
                    return Ok((String::new(), Vec::new()));
                }
                queries::append_prepared(c, &k, &for_writer, now)
            };
            job(c, &append)
        });
        PendingAppend {
            store: self.clone(),
            key: key.clone(),
            lines: shared,
            pending,
        }
    }

    /// Append one message (`{role, content, …}`) to a session.
    pub async fn append_message(
        &self,
        key: &SessionKey,
        message: Value,
    ) -> Result<TranscriptRow, StoreError> {
        let mut rows = self.append(key, vec![NewLine::message(message)]).await?;
        rows.pop()
            .ok_or_else(|| StoreError::corrupt("append returned no row"))
    }

    /// Read-modify-write an entry inside the writer's transaction, so a patch from another
    /// process in between cannot be lost. `f` may refuse with a message.
    pub async fn patch(
        &self,
        key: &SessionKey,
        mut f: impl FnMut(&mut SessionEntry) -> Result<(), String> + Send + 'static,
    ) -> Result<StoredSession, StoreError> {
        let scheme = self.scheme.clone();
        let edit = Box::new(move |s: &mut StoredSession| {
            f(&mut s.entry)?;
            s.kind = scheme.kind(&s.key, s.entry.chat_type.as_deref());
            Ok(())
        });
        let stored = self.store.update_session(key, edit).await?;
        self.events.emit(EngineEvent::SessionUpdated {
            key: key.to_string(),
        });
        Ok(stored)
    }

    pub async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        let deleted = self.store.delete_session(key).await?;
        if deleted {
            self.events.emit(EngineEvent::SessionDeleted {
                key: key.to_string(),
            });
        }
        Ok(deleted)
    }
}

/// An append submitted to the writer; `committed` waits for it and announces the lines.
pub struct PendingAppend<R> {
    store: SessionStore,
    key: SessionKey,
    lines: std::sync::Arc<Vec<PreparedLine>>,
    pending: Pending<(String, queries::Placed, R)>,
}

impl<R> PendingAppend<R> {
    pub async fn committed(self) -> Result<(Vec<TranscriptRow>, R), StoreError> {
        let (session_id, placed, extra) = self.pending.committed().await?;
        let prepared = std::sync::Arc::try_unwrap(self.lines).unwrap_or_else(|a| (*a).clone());
        let rows = queries::finish_rows(prepared, placed);
        let events = &self.store.events;
        if events.listening() {
            for row in &rows {
                events.emit(EngineEvent::MessageAppended {
                    key: self.key.to_string(),
                    session_id: session_id.clone(),
                    seq: row.seq,
                    line: row.line.clone(),
                });
            }
        }
        Ok((rows, extra))
    }
}
