//! Owns importing OpenClaw's current state (2026.6 and later): one SQLite database per agent,
//! `agents/<agentId>/agent/openclaw-agent.sqlite`, read by `storage::openclaw_source`.
//!
//! Each `session_nodes` row is one source session: its key, its `entry_json` (every field
//! kept, as the legacy import keeps a `sessions.json` entry) and the `transcript_events` of its
//! `current_session_id` in `seq` order (one transcript line each), which is the shape the
//! legacy import reads from `<sessionId>.jsonl`. Lines are checked and stored exactly as the
//! legacy import does (`parse_line`, a synthesised header when seq 0 is not one, chunks with
//! the session row committed last), so both layouts give the same sessions.
//! - Every database is opened and checked (schema, tables, a read snapshot) before anything is
//!   written: a locked, damaged or unknown database fails the import with nothing changed.
//! - A session whose rows fail to read later (a damaged page) is skipped whole
//!   (`UnreadableRows`); its already written chunks belong to no session (as in the legacy
//!   import) and are cleared by the next import of it.
//! - An entry that does not decode is `UnreadableEntry`; an entry whose `sessionId` differs
//!   from the node's `current_session_id` takes the node's (that is the transcript read), with
//!   a warning. A session with no transcript rows at all is imported with a synthesised header
//!   and a warning, as a missing legacy transcript is. Missing seq numbers are a warning.
//! - Earlier transcript generations of a key (other `session_windows` with events) are counted
//!   (`EarlierTranscript`), not imported: the engine keeps one transcript per session, and the
//!   legacy import likewise ignores `*.jsonl.reset.*` files.
//! - Compressed events (`event_zstd`) are skipped lines (`CompressedLine`): no zstd decoder is
//!   in the build (a C binding); OpenClaw compresses only very large lines.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::source::{Refused, SourceRoot};
use super::{
    CHUNK_LINES, ImportLimits, ImportReport, LINE_WARNINGS_PER_FILE, SkipReason,
    TransferError, id_taken, io_err, is_safe_file_stem, parse_line,
};
use crate::engine::Engine;
use crate::engine::events::EngineEvent;
use crate::engine::key::{SessionKey, normalize_agent_id};
use crate::engine::storage::openclaw_source::{
    AGENT_DB_FILE, AgentDb, EventRow, KNOWN_SCHEMA, NodeRow,
};
use crate::engine::storage::queries::{self, StoredSession};

/// One agent's database found in the import source.
pub(super) struct AgentDbFile {
    pub agent_id: String,
    pub path: PathBuf,
}

/// An agent database opened and checked, ready to import.
pub(super) struct OpenDb {
    agent_id: String,
    path: PathBuf,
    db: AgentDb,
}

/// The agent databases of `dir`: `dir/agents/<id>/agent/openclaw-agent.sqlite`, or `dir`
/// itself being one `agents/<id>/agent` folder. Empty when there are none.
pub(super) fn find_agent_dbs(dir: &Path) -> Result<Vec<AgentDbFile>, TransferError> {
    let agents = dir.join("agents");
    let mut found = Vec::new();
    if agents.is_dir() {
        for item in fs::read_dir(&agents).map_err(io_err("read", &agents))? {
            let item = item.map_err(io_err("read", &agents))?;
            let path = item.path().join("agent").join(AGENT_DB_FILE);
            if path.is_file() {
                found.push(AgentDbFile {
                    agent_id: normalize_agent_id(&item.file_name().to_string_lossy()),
                    path,
                });
            }
        }
        found.sort_by(|a, b| a.agent_id.cmp(&b.agent_id).then_with(|| a.path.cmp(&b.path)));
        return Ok(found);
    }
    let path = dir.join(AGENT_DB_FILE);
    if path.is_file() {
        let abs = fs::canonicalize(dir).map_err(io_err("read", dir))?;
        let name = |p: Option<&Path>| {
            p.and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        };
        let agent_dir = abs.parent();
        if name(Some(&abs)).as_deref() == Some("agent")
            && name(agent_dir.and_then(Path::parent)).as_deref() == Some("agents")
            && let Some(agent) = name(agent_dir)
        {
            found.push(AgentDbFile {
                agent_id: normalize_agent_id(&agent),
                path,
            });
        } else {
            return Err(TransferError::NotAnOpenClawFolder {
                path: dir.to_path_buf(),
                hint: format!(
                    "it has an {AGENT_DB_FILE} but is not an agents/<agentId>/agent folder, so its agent is unknown; {}",
                    super::EXPECTED_LAYOUT
                ),
            });
        }
    }
    Ok(found)
}

/// Open and check every database (see the module docs) before anything is written. A file
/// the folder rules refuse (a symlink, outside the folder) is skipped with its reason.
pub(super) fn open_all(
    found: Vec<AgentDbFile>,
    root: &SourceRoot,
    report: &mut ImportReport,
) -> Result<Vec<OpenDb>, TransferError> {
    let mut open = Vec::new();
    for f in found {
        match root.open(&f.path).map_err(io_err("read", &f.path))? {
            Ok(_) => {}
            Err(Refused::Missing) => continue,
            Err(Refused::Skip(reason, why)) => {
                report.skip(reason);
                report
                    .warnings
                    .push(format!("{}: not read: {why}", f.path.display()));
                continue;
            }
        }
        let db = AgentDb::open(&f.path).map_err(|source| TransferError::OpenClawDb {
            path: f.path.clone(),
            source,
        })?;
        if db.schema_version < KNOWN_SCHEMA {
            report.warnings.push(format!(
                "{}: schema version {} is older than the one this importer was checked against ({KNOWN_SCHEMA}); read as far as its tables match",
                f.path.display(),
                db.schema_version
            ));
        }
        if db.copied {
            report.warnings.push(format!(
                "{}: a WAL database without its -shm; read from a private copy so nothing is created beside it",
                f.path.display()
            ));
        }
        open.push(OpenDb {
            agent_id: f.agent_id,
            path: f.path,
            db,
        });
    }
    Ok(open)
}

/// How a session's final job ended.
enum Outcome {
    Imported,
    KeyExists,
    IdTaken(SessionKey),
}

impl Engine {
    /// Import every session of the opened databases.
    pub(super) async fn import_sqlite(
        &self,
        dbs: Vec<OpenDb>,
        limits: &ImportLimits,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let present_before = report.sessions_present;
        for db in &dbs {
            let nodes = match db.db.nodes() {
                Ok(n) => n,
                Err(source) => {
                    return Err(TransferError::OpenClawDb {
                        path: db.path.clone(),
                        source,
                    });
                }
            };
            for node in nodes {
                self.import_node(db, node, limits, report).await?;
            }
        }
        // Not yet routed through the re-import merge (merge.rs), which the legacy layout
        // uses: a key already here is left as it is, and the owner is told so.
        if report.sessions_present > present_before {
            report.warnings.push(format!(
                "{} session(s) of the SQLite state are already here and were left as they are: \
                 merging new lines from a SQLite state is not built yet (a legacy folder's are merged)",
                report.sessions_present - present_before
            ));
        }
        Ok(())
    }

    async fn import_node(
        &self,
        db: &OpenDb,
        node: NodeRow,
        limits: &ImportLimits,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let path = &db.path;
        let raw_key = node.session_key;
        let skip = |report: &mut ImportReport, reason: SkipReason, why: String| {
            report.skip(reason);
            report.warnings.push(format!(
                "{}: session {raw_key:?} skipped: {why}",
                path.display()
            ));
        };
        let scheme = self.store().scheme();
        let key = match scheme.canonicalize(&raw_key, &db.agent_id) {
            Ok(key) => key,
            Err(e) => {
                skip(
                    report,
                    SkipReason::InvalidKey,
                    format!("not a usable session key: {e}"),
                );
                return Ok(());
            }
        };
        let value: Value = match serde_json::from_slice(&node.entry_json) {
            Ok(v) => v,
            Err(e) => {
                skip(
                    report,
                    SkipReason::UnreadableEntry,
                    format!("entry_json is not JSON: {e}"),
                );
                return Ok(());
            }
        };
        let mut entry = match super::decode_entry(value) {
                Ok(e) => e,
                Err(why) => {                skip(report, SkipReason::UnreadableEntry, why);
                return Ok(());
            }
        };
        let session_id = node.current_session_id;
        if !is_safe_file_stem(&session_id) {
            skip(
                report,
                SkipReason::InvalidId,
                format!("current_session_id {session_id:?} is not a usable id"),
            );
            return Ok(());
        }
        if entry.session_id != session_id {
            report.warnings.push(format!(
                "{}: session {key}: entry sessionId {:?} differs from the row's current_session_id {session_id:?}; the row's (whose transcript is read) is kept",
                path.display(),
                entry.session_id
            ));
            entry.session_id = session_id.clone();
        }
        entry.extra.shift_remove("sessionFile");

        let store = self.store();
        if store.get(&key)?.is_some() {
            report.sessions_present += 1;
            return Ok(());
        }
        if let Some(owner) = store.keys_by_session_id(&session_id)?.into_iter().next() {
            report.skip(SkipReason::IdTaken);
            report.warnings.push(id_taken(&key, &session_id, &owner));
            return Ok(());
        }
        let earlier = match db.db.earlier_transcripts(&raw_key, &session_id) {
            Ok(n) => n,
            Err(e) => {
                skip(
                    report,
                    SkipReason::UnreadableRows,
                    format!("its transcripts cannot be read: {e}"),
                );
                return Ok(());
            }
        };

        let agent_id = key.agent_id(&scheme.default_agent).to_string();
        let kind = scheme.kind(&key, entry.chat_type.as_deref());
        let stored = StoredSession {
            key: key.clone(),
            agent_id,
            kind,
            entry,
        };
        let header = json!({
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": queries::iso_timestamp(stored.entry.updated_at),
            "cwd": "",
        });
        let where_ = format!("{} transcript {session_id}", path.display());
        let storage = store.storage().clone();
        let mut warnings = Vec::new();
        let mut line_skips = ImportReport::default();
        let mut line_warnings = 0usize;
        let mut lines = 0usize;
        let mut pending: Vec<Value> = Vec::new();
        let mut next_seq = 0i64;
        let mut first_job = true;
        let mut header_decided = false;
        let mut last_seq: Option<i64> = None;
        let mut gaps = 0u64;
        loop {
            let rows = match db
                .db
                .events(&session_id, last_seq, CHUNK_LINES, limits.max_line_bytes)
            {
                Ok(rows) => rows,
                Err(e) => {
                    skip(
                        report,
                        SkipReason::UnreadableRows,
                        format!("its transcript rows cannot be read: {e}"),
                    );
                    return Ok(());
                }
            };
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let seq = row.seq();
                let expected = last_seq.map_or(0, |s| s.saturating_add(1));
                if seq > expected {
                    gaps += u64::try_from(seq - expected).unwrap_or(0);
                }
                last_seq = Some(seq);
                let value = match row {
                    EventRow::Line { text, .. } => parse_line(&text),
                    EventRow::TooLong { bytes, .. } => Err((
                        SkipReason::LineTooLong,
                        format!(
                            "{bytes} bytes, over the cap of {} bytes per line",
                            limits.max_line_bytes
                        ),
                    )),
                    EventRow::Compressed { .. } => Err((
                        SkipReason::CompressedLine,
                        "stored compressed (event_zstd), which this build does not decode"
                            .into(),
                    )),
                };
                let value = match value {
                    Ok(v) => v,
                    Err((reason, why)) => {
                        line_skips.skip(reason);
                        line_warnings += 1;
                        if line_warnings <= LINE_WARNINGS_PER_FILE {
                            warnings.push(format!("{where_}, seq {seq}: skipped ({why})"));
                        }
                        continue;
                    }
                };
                if !header_decided {
                    header_decided = true;
                    if value.get("type").and_then(Value::as_str) == Some("session") {
                        let id = value.get("id").and_then(Value::as_str).unwrap_or("");
                        if id != session_id {
                            warnings.push(format!(
                                "{where_}: header names session {id:?} but the row for {key} says {session_id:?}; kept as is"
                            ));
                        }
                    } else {
                        pending.push(header.clone());
                    }
                }
                pending.push(value);
                lines += 1;
            }
            if pending.len() >= CHUNK_LINES {
                let chunk = std::mem::take(&mut pending);
                let count = chunk.len() as i64;
                let sid = session_id.clone();
                let (first, clean) = (next_seq, first_job);
                let owner = super::merge::write_new_chunk(&storage, sid, first, clean, chunk).await?;
                if let Some(owner) = owner {
                    report.skip(SkipReason::IdTaken);
                    report.warnings.push(id_taken(&key, &session_id, &owner));
                    return Ok(());
                }
                next_seq += count;
                first_job = false;
            }
        }
        if line_warnings > LINE_WARNINGS_PER_FILE {
            warnings.push(format!(
                "{where_}: {} more lines skipped (counted in the summary)",
                line_warnings - LINE_WARNINGS_PER_FILE
            ));
        }
        if last_seq.is_none() {
            warnings.push(format!(
                "session {key}: no transcript rows for {session_id} in {}; imported with an empty transcript",
                path.display()
            ));
        } else if gaps > 0 {
            warnings.push(format!(
                "{where_}: {gaps} seq numbers missing between its rows; the rows present were imported in order"
            ));
        }
        if !header_decided {
            pending.push(header);
        }
        if earlier > 0 {
            for _ in 0..earlier {
                line_skips.skip(SkipReason::EarlierTranscript);
            }
            warnings.push(format!(
                "session {key}: {earlier} earlier transcript generation(s) in {} not imported (only the current one is)",
                path.display()
            ));
        }

        let (k, sid) = (key.clone(), session_id.clone());
        let outcome = storage
            .write(move |conn| {
                if queries::get_session(conn, &k)?.is_some() {
                    queries::delete_orphan_transcript(conn, &sid)?;
                    return Ok(Outcome::KeyExists);
                }
                if let Some(owner) = queries::keys_by_session_id(conn, &sid)?.into_iter().next() {
                    return Ok(Outcome::IdTaken(owner));
                }
                if first_job {
                    queries::delete_orphan_transcript(conn, &sid)?;
                }
                queries::put_raw_lines(conn, &sid, next_seq, &pending)?;
                queries::put_session(conn, &stored)?;
                Ok(Outcome::Imported)
            })
            .await?;
        match outcome {
            Outcome::Imported => {
                report.sessions_imported += 1;
                report.lines_imported += lines;
                for (reason, n) in line_skips.skipped {
                    *report.skipped.entry(reason).or_default() += n;
                }
                report.warnings.extend(warnings);
                self.events().emit(EngineEvent::SessionCreated {
                    key: key.to_string(),
                    session_id,
                });
            }
            Outcome::KeyExists => report.sessions_present += 1,
            Outcome::IdTaken(owner) => {
                report.skip(SkipReason::IdTaken);
                report.warnings.push(id_taken(&key, &session_id, &owner));
            }
        }
        Ok(())
    }
}
