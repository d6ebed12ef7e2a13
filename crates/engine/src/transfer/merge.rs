//! Owns bringing one source session into the store, whatever the source format: the entry
//! JSON plus its transcript lines in order (`SourceSession`, entry point `Engine::bring_in`).
//! A key not yet here is imported whole; a key already here is **merged**:
//!
//! - **Line identity**: a line's `id` (OpenClaw's 8-hex or UUID; the `session` header's `id`
//!   is the sessionId). A line without a string `id` is identified by the SHA-256 of its JSON
//!   text as stored (re-encoded, so whitespace differences do not matter). The source always
//!   counts as holding the header (`id` = sessionId), since a file without one got a
//!   synthesised header on its first import.
//! - **Append**: source lines whose identity is not stored for the session are appended in
//!   source order after the last stored line; lines already stored are left alone.
//! - **Conflict**: the source has new lines *and* the store has lines after the last
//!   imported one (`ImportMark::last_seq`; without a mark, any stored line) that the source
//!   lacks: the session was continued on both sides. It is reported by key and nothing of it
//!   changes (entry, lines, mark).
//! - **Entry**: replaced by the source's when the source's `updatedAt` is newer than the
//!   stored one and the stored entry is still what the last import left (its hash equals the
//!   mark's `entry_hash`; without a mark, the stored `updatedAt` is not newer than the
//!   source's). An entry changed here since (a `/send` override, a patched label, a run here)
//!   is kept and the report warns that OpenClaw's newer entry was not applied: nothing set
//!   here is lost silently. The mark then keeps its old `entry_hash`, so the next import
//!   still sees the entry as changed here.
//! - **Shortcut**: when the mark says the same transcript file (canonical path, size,
//!   modification time) and the same source entry (hash) were seen last time, the session
//!   is unchanged without reading its transcript. An append changes the size, so appends are
//!   always seen; a rewrite that keeps both size and mtime would not be (OpenClaw only
//!   appends to transcripts). A SQLite source has no file per transcript: its fingerprint is
//!   the database's path + `#` + session id, the event count and the highest event rowid
//!   (`sqlite.rs`), which an appended event changes just as an append changes a file's size.
//! - A key here whose sessionId differs from the source's (OpenClaw reset it), or a sessionId
//!   owned by another key here, is skipped with a warning, as before.
//!
//! **Crash safety** holds for appends as for new sessions: lines are staged under a session
//! id no session owns (`<sessionId>` + NUL + `merge`, which no real id can be: ids with
//! control characters are refused), so they are invisible, and the last writer job moves
//! them into place together with the entry and the mark. An import cut short leaves only
//! staged rows, which the next merge of that session deletes first.

use std::collections::{HashMap, HashSet};

use serde_json::json;

use super::error::{SkipReason, TransferError};
use super::{CHUNK_LINES, ImportReport};
use crate::Engine;
use crate::events::EngineEvent;
use switchboard_store::{
    ImportMark, ImportOutcome, MergeCommit, NewImport, PendingWrite, RawLine, Store,
    StoredSession, iso_timestamp, line_identity, sha_hex,
};
use switchboard_types::key::SessionKey;

/// A source's transcript, read line by line in source order. Lines the reader cannot use
/// are its own business (it counts and explains them); it yields only lines worth storing.
pub(crate) trait SourceLines {
    fn next_line(&mut self) -> Result<Option<RawLine>, TransferError>;
}

/// What identifies the transcript as read: the shortcut compares it with the last import's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    /// Canonical path of the file, or "" when the source has no transcript.
    pub file: String,
    pub size: i64,
    pub mtime_ns: i64,
}

impl Fingerprint {
    pub(crate) fn none() -> Fingerprint {
        Fingerprint {
            file: String::new(),
            size: -1,
            mtime_ns: -1,
        }
    }
}

/// One session of the source: its entry (as it will be stored, `sessionFile` dropped) and
/// its transcript, if it has one.
pub(crate) struct SourceSession<'a> {
    pub stored: StoredSession,
    pub fingerprint: Fingerprint,
    pub lines: Option<&'a mut dyn SourceLines>,
}

/// What `bring_in` did with one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Merged {
    /// A new session, `lines` transcript lines read from the source.
    Imported { lines: usize },
    /// A known session that got lines appended and/or its entry replaced.
    Updated { appended: usize, entry: bool },
    Unchanged,
    /// Continued on both sides; nothing changed (the report names it).
    Conflict,
    /// Left out (the report counts and explains it).
    Skipped,
}

/// New sessions whose final writer job is submitted but not yet awaited: awaiting each one
/// would cost a commit (an fsync) per session, 100,000 of them for a large store; submitted
/// together, the writer commits them in groups. `Engine::settle` awaits them and corrects the
/// report for any that did not go in after all.
///
/// The jobs are handed to the writer `BURST` at a time rather than one by one: the writer
/// commits whatever is queued when it starts a transaction, so jobs trickling in made many
/// small commits, and with the sessions table's random-order indexes each commit rewrote
/// most of their pages (a 118 MB database took 1.6 GB of writes for 100,000 sessions).
#[derive(Default)]
pub(crate) struct PendingImports {
    items: Vec<PendingNew>,
    /// Final writes of `items[items.len() - held.len()..]`, not yet handed to the store.
    held: Vec<NewImport>,
}

/// Final jobs kept before they are awaited: bounds memory and how much of the report is
/// provisional.
const PENDING_MAX: usize = 10_000;

/// Final jobs handed to the writer together.
const BURST: usize = 2_500;

struct PendingNew {
    key: SessionKey,
    session_id: String,
    lines: usize,
    pending: Option<PendingWrite<ImportOutcome>>,
}

impl PendingImports {
    /// Hand every held final write to the store.
    fn release(&mut self, store: &dyn Store) {
        let first = self.items.len() - self.held.len();
        for (item, import) in self.items[first..].iter_mut().zip(self.held.drain(..)) {
            item.pending = Some(store.submit_import_session(import));
        }
    }
}

/// The staged lines of a merge live under this id until they are moved into place.
fn staging_id(session_id: &str) -> String {
    format!("{session_id}\0merge")
}

/// Hash of an entry as stored (JSON, fields in their fixed order).
fn entry_hash(stored: &StoredSession) -> Result<String, TransferError> {
    let text = serde_json::to_vec(&stored.entry).map_err(|e| TransferError::Unexportable {
        key: stored.key.to_string(),
        reason: format!("its entry does not encode: {e}"),
    })?;
    Ok(sha_hex(&text))
}

fn raw_identity(line: &RawLine) -> String {
    line_identity(&line.id, &line.text)
}

/// Wait for a queued chunk (if any) to commit: `Some(owner)` when its session id was taken.
/// The failpoint stands for a crash after a chunk landed and before the session row did.
async fn chunk_owner(
    chunk: Option<PendingWrite<Option<SessionKey>>>,
) -> Result<Option<SessionKey>, TransferError> {
    let Some(chunk) = chunk else {
        return Ok(None);
    };
    let owner = chunk.await?;
    if owner.is_none() {
        crate::failpoint::hit("import-after-chunk");
    }
    Ok(owner)
}

impl Engine {
    /// Bring one source session in: import it when its key is new here, merge it when it is
    /// known (module docs). `marks` are the store's import marks (`Store::import_marks`), read
    /// once per import. Counts and explanations go into `report`.
    pub(crate) async fn bring_in(
        &self,
        src: SourceSession<'_>,
        marks: &HashMap<String, ImportMark>,
        pending: &mut PendingImports,
        report: &mut ImportReport,
    ) -> Result<Merged, TransferError> {
        let key = src.stored.key.clone();
        let session_id = src.stored.entry.session_id.clone();
        let Some(here) = self.store().get(&key).await? else {
            if let Some(owner) = self
                .store()
                .keys_by_session_id(&session_id)
                .await?
                .into_iter()
                .next()
            {
                report.skip(SkipReason::IdTaken);
                report.warnings.push(super::id_taken(&key, &session_id, &owner));
                return Ok(Merged::Skipped);
            }
            return self.import_new(src, pending, report).await;
        };
        if here.entry.session_id != session_id {
            report.skip(SkipReason::OtherSession);
            report.warnings.push(format!(
                "session {key} skipped: here it is session {}, the source's is {session_id} \
                 (reset on one side); nothing was merged",
                here.entry.session_id
            ));
            return Ok(Merged::Skipped);
        }
        let source_entry_hash = entry_hash(&src.stored)?;
        let mark = marks
            .get(key.as_str())
            .filter(|m| m.session_id == session_id);
        if let Some(m) = mark
            && m.source_file == src.fingerprint.file
            && m.source_size == src.fingerprint.size
            && m.source_mtime_ns == src.fingerprint.mtime_ns
            && m.source_entry_hash == source_entry_hash
        {
            return Ok(Merged::Unchanged);
        }
        self.merge_known(src, here, mark.cloned(), source_entry_hash, report)
            .await
    }

    /// Merge a session whose key and sessionId are already here.
    async fn merge_known(
        &self,
        src: SourceSession<'_>,
        here: StoredSession,
        mark: Option<ImportMark>,
        source_entry_hash: String,
        report: &mut ImportReport,
    ) -> Result<Merged, TransferError> {
        let store = self.store().backend().clone();
        let key = here.key.clone();
        let session_id = here.entry.session_id.clone();
        let staging = staging_id(&session_id);

        // What is stored: identity -> seq, and the last seq.
        let mut stored: HashMap<String, i64> = HashMap::new();
        let mut last_here = -1i64;
        for (seq, ident) in store.line_identities(&session_id).await? {
            stored.insert(ident, seq);
            last_here = last_here.max(seq);
        }

        // Stream the source: remember its identities, stage what is new.
        let mut in_source: HashSet<String> = HashSet::new();
        in_source.insert(format!("id:{session_id}"));
        let mut new_lines: Vec<RawLine> = Vec::new();
        let mut staged = 0i64;
        let mut cleared = false;
        if let Some(lines) = src.lines {
            while let Some(v) = lines.next_line()? {
                let ident = raw_identity(&v);
                let fresh = !stored.contains_key(&ident) && !in_source.contains(&ident);
                in_source.insert(ident);
                if !fresh {
                    continue;
                }
                new_lines.push(v);
                if new_lines.len() >= CHUNK_LINES {
                    let chunk = std::mem::take(&mut new_lines);
                    store
                        .stage_lines(staging.clone(), staged, !cleared, chunk)
                        .await?;
                    staged += CHUNK_LINES as i64;
                    cleared = true;
                    crate::failpoint::hit("import-after-chunk");
                }
            }
        }
        let appended = staged as usize + new_lines.len();

        // The last stored line the source also has; stored lines past the mark that the
        // source lacks were written here.
        let floor = mark.as_ref().map_or(-1, |m| m.last_seq);
        let mut last_shared = -1i64;
        let mut local = 0usize;
        for (ident, &seq) in &stored {
            if in_source.contains(ident) {
                last_shared = last_shared.max(seq);
            } else if seq > floor {
                local += 1;
            }
        }
        if appended > 0 && local > 0 {
            report.conflicts.push(format!(
                "{key}: continued on both sides ({appended} new lines in the source, {local} \
                 lines here it does not have); left as it is"
            ));
            if cleared {
                store.discard_orphan_lines(staging).await?;
            }
            return Ok(Merged::Conflict);
        }

        let here_hash = entry_hash(&here)?;
        let changed_here = match &mark {
            Some(m) => m.entry_hash != here_hash,
            None => here.entry.updated_at > src.stored.entry.updated_at,
        };
        let source_newer = src.stored.entry.updated_at > here.entry.updated_at;
        let replace = source_newer && !changed_here && src.stored.entry != here.entry;
        if source_newer && changed_here {
            report.warnings.push(format!(
                "session {key}: its entry was changed here since the last import; kept it \
                 (the source's newer entry was not applied)"
            ));
        }
        if appended == 0 && !replace {
            // Nothing to write but the mark, so the next run can take the shortcut.
            let new_mark = ImportMark {
                session_key: key.to_string(),
                session_id: session_id.clone(),
                source_file: src.fingerprint.file.clone(),
                source_size: src.fingerprint.size,
                source_mtime_ns: src.fingerprint.mtime_ns,
                source_entry_hash,
                entry_hash: if changed_here {
                    mark.map(|m| m.entry_hash).unwrap_or_default()
                } else {
                    here_hash
                },
                last_seq: last_shared,
            };
            store.put_import_mark(new_mark).await?;
            return Ok(Merged::Unchanged);
        }

        let entry_now = if replace { &src.stored } else { &here };
        let new_mark_hash = if changed_here {
            mark.as_ref()
                .map(|m| m.entry_hash.clone())
                .unwrap_or_default()
        } else {
            entry_hash(entry_now)?
        };
        let first_seq = last_here + 1;
        let new_mark = ImportMark {
            session_key: key.to_string(),
            session_id: session_id.clone(),
            source_file: src.fingerprint.file.clone(),
            source_size: src.fingerprint.size,
            source_mtime_ns: src.fingerprint.mtime_ns,
            source_entry_hash,
            entry_hash: new_mark_hash,
            last_seq: if appended > 0 {
                first_seq + appended as i64 - 1
            } else {
                last_shared
            },
        };
        let written = store
            .commit_merge(MergeCommit {
                key: key.clone(),
                session_id: session_id.clone(),
                staging_id: staging,
                staged,
                clean: !cleared,
                lines: new_lines,
                first_seq,
                entry: replace.then(|| src.stored.clone()),
                mark: new_mark,
            })
            .await?;
        if !written {
            report.conflicts.push(format!(
                "{key}: changed here while it was being imported; left as it is"
            ));
            return Ok(Merged::Conflict);
        }
        if appended > 0 {
            self.events().emit(EngineEvent::SessionUpdated {
                key: key.to_string(),
            });
        }
        Ok(Merged::Updated {
            appended,
            entry: replace,
        })
    }

    /// Import a session whose key is new here: stream its transcript in chunks, then commit
    /// the last chunk, the session row and its mark together (see the module docs of
    /// `transfer`).
    async fn import_new(
        &self,
        src: SourceSession<'_>,
        pending_imports: &mut PendingImports,
        report: &mut ImportReport,
    ) -> Result<Merged, TransferError> {
        let store = self.store().backend().clone();
        let key = src.stored.key.clone();
        let session_id = src.stored.entry.session_id.clone();
        let header = RawLine::from_value(&json!({
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": iso_timestamp(src.stored.entry.updated_at),
            "cwd": "",
        }));
        let mut lines = 0usize;
        let mut pending: Vec<RawLine> = Vec::new();
        let mut next_seq = 0i64; // seq of pending[0]
        let mut first_job = true;
        let mut header_decided = false;
        // The chunk being written while the next is read: the writer thread inserts one while
        // this one parses and encodes the next, so a long transcript keeps both cores busy.
        let mut in_flight: Option<PendingWrite<Option<SessionKey>>> = None;
        if let Some(reader) = src.lines {
            while let Some(value) = reader.next_line()? {
                if !header_decided {
                    header_decided = true;
                    if value.kind == "session" {
                        let id = &value.id;
                        if *id != session_id {
                            report.warnings.push(format!(
                                "session {key}: its transcript's header names session {id:?} but the entry says {session_id:?}; kept as is"
                            ));
                        }
                    } else {
                        pending.push(header.clone());
                    }
                }
                if pending.len() >= CHUNK_LINES {
                    let chunk = std::mem::take(&mut pending);
                    let count = chunk.len() as i64;
                    let before = in_flight.replace(store.submit_import_chunk(
                        session_id.clone(),
                        next_seq,
                        first_job,
                        chunk,
                    ));
                    if let Some(owner) = chunk_owner(before).await? {
                        // Someone created a session with this id meanwhile: leave it be (the
                        // chunk queued since checks too and writes nothing).
                        report.skip(SkipReason::IdTaken);
                        report.warnings.push(super::id_taken(&key, &session_id, &owner));
                        return Ok(Merged::Skipped);
                    }
                    next_seq += count;
                    first_job = false;
                }
                pending.push(value);
                lines += 1;
            }
        }
        // Every chunk has committed before the session row is queued: should one fail, the
        // row must not go in without it.
        if let Some(owner) = chunk_owner(in_flight).await? {
            report.skip(SkipReason::IdTaken);
            report.warnings.push(super::id_taken(&key, &session_id, &owner));
            return Ok(Merged::Skipped);
        }
        if !header_decided {
            // No transcript, empty, or nothing parsable: still give the session its header.
            pending.push(header);
        }

        let source_entry_hash = entry_hash(&src.stored)?;
        let last_seq = next_seq + pending.len() as i64 - 1;
        let mark = ImportMark {
            session_key: key.to_string(),
            session_id: session_id.clone(),
            source_file: src.fingerprint.file.clone(),
            source_size: src.fingerprint.size,
            source_mtime_ns: src.fingerprint.mtime_ns,
            entry_hash: source_entry_hash.clone(),
            source_entry_hash,
            last_seq,
        };
        pending_imports.items.push(PendingNew {
            key,
            session_id,
            lines,
            pending: None,
        });
        pending_imports.held.push(NewImport {
            session: src.stored,
            first_seq: next_seq,
            clean: first_job,
            lines: pending,
            mark,
        });
        if pending_imports.held.len() >= BURST {
            pending_imports.release(store.as_ref());
        }
        if pending_imports.items.len() >= PENDING_MAX {
            self.settle(pending_imports, report).await?;
        }
        // Provisional: `settle` corrects the report should it not go in.
        Ok(Merged::Imported { lines })
    }

    /// Await every submitted new session; one that did not go in after all (its key or
    /// sessionId appeared meanwhile, e.g. twice in one source) is taken back out of the
    /// report's counts and explained.
    pub(crate) async fn settle(
        &self,
        pending: &mut PendingImports,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        pending.release(self.store().backend().as_ref());
        for item in pending.items.drain(..) {
            // `release` above gave every item its submitted job.
            let Some(submitted) = item.pending else {
                continue;
            };
            match submitted.await? {
                ImportOutcome::Imported => self.events().emit(EngineEvent::SessionCreated {
                    key: item.key.to_string(),
                    session_id: item.session_id,
                }),
                // Created here meanwhile: the next import merges it.
                ImportOutcome::KeyExists => {
                    report.sessions_imported -= 1;
                    report.lines_imported -= item.lines;
                    report.sessions_present += 1;
                }
                ImportOutcome::IdTaken(owner) => {
                    report.sessions_imported -= 1;
                    report.lines_imported -= item.lines;
                    report.skip(SkipReason::IdTaken);
                    report
                        .warnings
                        .push(super::id_taken(&item.key, &item.session_id, &owner));
                }
            }
        }
        Ok(())
    }
}
