//! Session entries keyed by `SessionKey`: create, read, patch, delete, append to their
//! transcripts, look up by sessionId or label; every committed change becomes an event.

use serde_json::{Value, json};

use switchboard_types::entry::{DeliveryContext, SessionEntry};
use crate::events::{EngineEvent, EventBus};
use switchboard_types::key::{KeyScheme, SessionKey};
use std::sync::Arc;

use switchboard_store::{
    Appended, InboundWrite, KeyRow, NewLine, PendingWrite, RunWrite, Store, StoreError,
    StoredSession, TranscriptRow,
};
use switchboard_store::SessionScan;

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
        "timestamp": switchboard_store::iso_timestamp(now),
        "cwd": cwd,
    })
}

pub use switchboard_types::api::time::now_ms;

#[derive(Clone)]
pub struct SessionStore {
    store: Arc<dyn Store>,
    scheme: KeyScheme,
    events: EventBus,
}

impl SessionStore {
    pub fn new(
        store: Arc<dyn Store>,
        scheme: KeyScheme,
        events: EventBus,
    ) -> SessionStore {
        SessionStore {
            store,
            scheme,
            events,
        }
    }

    /// The store behind the engine.
    pub fn backend(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Whether `key` exists, answered without yielding: one primary-key lookup on the
    /// caller's thread. `SessionsApi::resolve_key` uses it because the gateway relies on
    /// that call not waiting: it polls a send once before reading the next request, and
    /// that first poll must reach the session's intake line, or pipelined sends into one
    /// session are recorded out of order (tests/gateway/gateway_load.rs). Transitional:
    /// the gateway should take its place in line before any I/O (docs/ARCHITECTURE.md,
    /// "The store seam").
    pub fn exists_now(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.store.session_exists_now(key)
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

    /// A session read for a row or name only (see the store trait's `view_session`).
    pub async fn view(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError> {
        self.store.view_session(key).await
    }

    pub async fn session_id_of(&self, key: &SessionKey) -> Result<Option<String>, StoreError> {
        self.store.session_id_of(key).await
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


    /// The children of each of `keys`, in one read.
    pub async fn children_of_each(
        &self,
        keys: &[SessionKey],
    ) -> Result<Vec<Vec<SessionKey>>, StoreError> {
        self.store.children_of_each(keys).await
    }

    /// Visit sessions as `scan` narrows them until `visit` returns false (the rows are
    /// read on the store's side while the caller visits).
    pub async fn scan(
        &self,
        scan: &SessionScan,
        mut visit: impl FnMut(StoredSession) -> bool,
    ) -> Result<(), StoreError> {
        let mut chunks = self.store.scan_sessions(scan.clone()).await;
        while let Some(chunk) = chunks.next().await {
            for row in chunk? {
                if !visit(row) {
                    return Ok(());
                }
            }
        }
        Ok(())
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

    /// The lines history shows of a session after `seq` (messages and shown notices, oldest
    /// first, tool lines included), at most `limit`.
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
        std::path::Path::new(&self.store.location())
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
        let pending = self.store.submit_append(key, lines);
        let (rows, ()) = self.pending(key, Box::pin(async move { Ok((pending.await?, ())) }))
            .committed()
            .await?;
        Ok(rows)
    }

    /// A run's start and/or end with its lines, submitted now (see `Store::submit_run`);
    /// `committed` yields the lines and whether this write closed the run.
    pub fn submit_run(&self, write: RunWrite) -> PendingAppend<bool> {
        let key = write.key.clone();
        let pending = self.store.submit_run(write);
        self.pending(&key, pending)
    }

    /// An inbound message with its run and idempotency key, submitted now (see
    /// `Store::submit_inbound`); `committed` yields `Err` with the recorded key when the
    /// key was taken already (nothing written).
    pub fn submit_inbound(&self, write: InboundWrite) -> PendingAppend<Option<KeyRow>> {
        let key = write.key.clone();
        let pending = self.store.submit_inbound(write);
        self.pending(
            &key,
            Box::pin(async move {
                Ok(match pending.await? {
                    Ok(appended) => (appended, None),
                    Err(found) => (Appended::default(), Some(found)),
                })
            }),
        )
    }

    /// `pending`, whose lines are announced once it has committed.
    pub(crate) fn pending<R>(
        &self,
        key: &SessionKey,
        pending: PendingWrite<(Appended, R)>,
    ) -> PendingAppend<R> {
        PendingAppend {
            events: self.events.clone(),
            key: key.clone(),
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

/// An append submitted to the store; `committed` waits for it and announces the lines.
pub struct PendingAppend<R> {
    events: EventBus,
    key: SessionKey,
    pending: PendingWrite<(Appended, R)>,
}

impl<R> PendingAppend<R> {
    pub async fn committed(self) -> Result<(Vec<TranscriptRow>, R), StoreError> {
        let (Appended { session_id, rows }, extra) = self.pending.await?;
        if self.events.listening() {
            for row in &rows {
                self.events.emit(EngineEvent::MessageAppended {
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
