//! Owns importing OpenClaw's current state (2026.6 and later): one SQLite database per agent,
//! `agents/<agentId>/agent/openclaw-agent.sqlite`, read by `storage::openclaw_source`.
//!
//! Each `session_nodes` row is one source session: its key, its `entry_json` (every field
//! kept, as the legacy import keeps a `sessions.json` entry) and the `transcript_events` of its
//! `current_session_id` in `seq` order (one transcript line each), which is the shape the
//! legacy import reads from `<sessionId>.jsonl`. The rows are read a page at a time
//! (`EventLines`, a `SourceLines`) and checked as the legacy lines are
//! (`line::parse_raw_line`, the line cap), and each session goes through the same `Engine::bring_in` (`merge.rs`) as a legacy
//! one: a new key is imported whole (a synthesised header when seq 0 is not one, chunks with
//! the session row committed last), a key already here is **merged** (new lines appended by
//! line id, a newer entry applied unless changed here, a session continued on both sides
//! reported as a conflict). So importing again after the owner kept using OpenClaw brings the
//! new lines, and a second import in a row changes nothing.
//! - **Fingerprint** (the merge's shortcut): file = the database's canonical path + `#` +
//!   the session id, size = the number of the transcript's events, mtime = the highest rowid
//!   among them (`AgentDbSource::transcript_stamp`, from the primary-key index, no text read).
//!   OpenClaw appends events: an append raises both (SQLite gives a new row a rowid above the
//!   table's highest), so it is always seen. A rewrite that keeps both (delete the newest
//!   event, insert one reusing its rowid) would not be: OpenClaw does not do that. A `VACUUM`
//!   may renumber rowids, which only costs a full read that finds nothing new.
//! - Every database is opened and checked (schema, tables, a read snapshot) before anything is
//!   written: a locked, damaged or unknown database fails the import with nothing changed.
//! - A session whose rows fail to read later (a damaged page) is skipped whole
//!   (`UnreadableRows`); its already written chunks belong to no session (as in the legacy
//!   import; a merge's are staged) and are cleared by the next import of it.
//! - An entry that does not decode is `UnreadableEntry`; an entry whose `sessionId` differs
//!   from the node's `current_session_id` takes the node's (that is the transcript read), with
//!   a warning. A session with no transcript rows at all is imported with a synthesised header
//!   and counted, as a missing legacy transcript is (one summary warning for all of them).
//!   Missing seq numbers are a warning.
//! - Earlier transcript generations of a key (other `session_windows` with events) are counted
//!   (`EarlierTranscript`), not imported: the engine keeps one transcript per session, and the
//!   legacy import likewise ignores `*.jsonl.reset.*` files.
//! - Compressed events (`event_zstd`) are skipped lines (`CompressedLine`): no zstd decoder is
//!   in the build (a C binding); OpenClaw compresses only very large lines.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::merge::{Fingerprint, Merged, PendingImports, SourceLines, SourceSession};
use super::source::{Refused, SourceRoot};
use super::{
    ImportLimits, ImportReport, LINE_WARNINGS_PER_FILE, SkipReason, TransferError, io_err,
    is_safe_file_stem,
};
use crate::Engine;
use switchboard_store::openclaw::{
    AGENT_DB_FILE, AgentDbSource, EventRow, KNOWN_SCHEMA, NodeRow, OpenClawDbError, OpenClawDbs,
    TranscriptStamp,
};
use switchboard_store::{ImportMark, RawLine, StoredSession};

/// One agent's database found in the import source.
pub(super) struct AgentDbFile {
    pub agent_id: String,
    pub path: PathBuf,
}

/// An agent database opened and checked, ready to import.
pub(super) struct OpenDb {
    agent_id: String,
    path: PathBuf,
    /// `path` canonicalised: names its transcripts in import marks.
    canonical: String,
    db: Box<dyn AgentDbSource>,
}

/// The agent databases of `dir`: `dir/agents/<id>/agent/openclaw-agent.sqlite`, or `dir`
/// itself being one `agents/<id>/agent` folder (`find_layout`). Empty when there are none.
pub(super) fn find_agent_dbs(dir: &Path) -> Result<Vec<AgentDbFile>, TransferError> {
    Ok(super::find_layout(dir, "agent", AGENT_DB_FILE)?
        .into_iter()
        .map(|f| AgentDbFile {
            agent_id: f.agent_id,
            path: f.dir.join(AGENT_DB_FILE),
        })
        .collect())
}

/// Open and check every database (see the module docs) before anything is written. A file
/// the folder rules refuse (a symlink, outside the folder) is skipped with its reason.
pub(super) fn open_all(
    dbs: Option<&dyn OpenClawDbs>,
    found: Vec<AgentDbFile>,
    root: &SourceRoot,
    limits: &ImportLimits,
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
        let db = dbs
            .ok_or(OpenClawDbError::NoReader)
            .and_then(|dbs| dbs.open(&f.path, limits.max_read_time))
            .map_err(|source| TransferError::OpenClawDb {
                path: f.path.clone(),
                source,
            })?;
        if db.schema_version() < KNOWN_SCHEMA {
            report.warnings.push(format!(
                "{}: schema version {} is older than the one this importer was checked against ({KNOWN_SCHEMA}); read as far as its tables match",
                f.path.display(),
                db.schema_version()
            ));
        }
        if db.copied() {
            report.warnings.push(format!(
                "{}: a WAL database without its -shm; read from a private copy so nothing is created beside it",
                f.path.display()
            ));
        }
        let canonical = fs::canonicalize(&f.path)
            .unwrap_or_else(|_| f.path.clone())
            .to_string_lossy()
            .into_owned();
        open.push(OpenDb {
            agent_id: f.agent_id,
            path: f.path,
            canonical,
            db,
        });
    }
    Ok(open)
}

/// Rows fetched per query: bounds what the reader holds besides the chunk `bring_in` gathers.
const EVENT_PAGE: usize = 256;

impl Engine {
    /// Import or merge (`merge.rs`) every session of the opened databases. New sessions are
    /// settled before returning, even on failure, so the legacy pass that follows (and the
    /// marks it reads) sees them.
    pub(super) async fn import_sqlite(
        &self,
        dbs: Vec<OpenDb>,
        limits: &ImportLimits,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        if dbs.is_empty() {
            return Ok(());
        }
        let marks = self.store().backend().import_marks().await?;
        let mut pending = PendingImports::default();
        let done = async {
            for db in &dbs {
                let nodes = db.db.nodes().map_err(|source| TransferError::OpenClawDb {
                    path: db.path.clone(),
                    source,
                })?;
                for node in nodes {
                    self.import_node(db, node, limits, &marks, &mut pending, report)
                        .await?;
                }
            }
            Ok(())
        }
        .await;
        // What was submitted still commits; wait for it before failing.
        let settled = self.settle(&mut pending, report).await;
        done.and(settled)
    }

    async fn import_node(
        &self,
        db: &OpenDb,
        node: NodeRow,
        limits: &ImportLimits,
        marks: &HashMap<String, ImportMark>,
        pending: &mut PendingImports,
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
            Err(why) => {
                skip(report, SkipReason::UnreadableEntry, why);
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

        let read = db.db.earlier_transcripts(&raw_key, &session_id).and_then(|earlier| {
            Ok((earlier, db.db.transcript_stamp(&session_id)?))
        });
        let (earlier, stamp) = match read {
            Ok(r) => r,
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
        let mut reader = EventLines::new(db, &session_id, limits);
        let src = SourceSession {
            stored,
            fingerprint: fingerprint(db, &session_id, stamp),
            lines: Some(&mut reader),
        };
        let merged = match self.bring_in(src, marks, pending, report).await {
            Ok(m) => m,
            Err(e) => match reader.failed.take() {
                // A damaged page part-way: what was written for it belongs to no session (or
                // is staged) and is cleared by its next import.
                Some(why) => {
                    skip(
                        report,
                        SkipReason::UnreadableRows,
                        format!("its transcript rows cannot be read: {why}"),
                    );
                    return Ok(());
                }
                None => return Err(e),
            },
        };
        if reader.last_seq.is_none() && matches!(merged, Merged::Imported { .. }) {
            report.note_empty(&key);
        }
        if earlier > 0 {
            for _ in 0..earlier {
                reader.skips.skip(SkipReason::EarlierTranscript);
            }
            reader.warnings.push(format!(
                "session {key}: {} in {} not imported (only the current one is)",
                switchboard_types::words::count(earlier, "earlier transcript generation"),
                path.display()
            ));
        }
        report.tally_lines(&merged, reader.skips, reader.warnings);
        report.tally(&merged);
        Ok(())
    }
}

/// What the re-import's shortcut compares for one SQLite transcript (see the module docs):
/// the database's canonical path and the session id, the number of its events, and the
/// highest rowid among them.
fn fingerprint(db: &OpenDb, session_id: &str, stamp: TranscriptStamp) -> Fingerprint {
    Fingerprint {
        file: format!("{}#{session_id}", db.canonical),
        size: stamp.events,
        mtime_ns: stamp.last_rowid,
    }
}

/// The `transcript_events` of one transcript in `seq` order, fetched a page at a time and
/// checked as the legacy import checks a `.jsonl`'s lines (`line::parse_raw_line`, the line
/// cap): rows it cannot use are counted by reason and explained (the first
/// `LINE_WARNINGS_PER_FILE`).
struct EventLines<'a> {
    db: &'a OpenDb,
    session_id: &'a str,
    /// How warnings name this transcript.
    where_: String,
    max_line: usize,
    page: std::vec::IntoIter<EventRow>,
    /// The seq of the last row read (`None`: no row yet): the next page starts after it.
    last_seq: Option<i64>,
    /// The last page came back short, so no rows follow it.
    exhausted: bool,
    done: bool,
    gaps: u64,
    skipped_lines: usize,
    skips: ImportReport,
    warnings: Vec<String>,
    /// Set when rows could not be read: the session is then skipped whole.
    failed: Option<String>,
}

impl<'a> EventLines<'a> {
    fn new(db: &'a OpenDb, session_id: &'a str, limits: &ImportLimits) -> EventLines<'a> {
        EventLines {
            db,
            session_id,
            where_: format!("{} transcript {session_id}", db.path.display()),
            max_line: limits.max_line_bytes,
            page: Vec::new().into_iter(),
            last_seq: None,
            exhausted: false,
            done: false,
            gaps: 0,
            skipped_lines: 0,
            skips: ImportReport::default(),
            warnings: Vec::new(),
            failed: None,
        }
    }

    /// Fetch the next page; false when there are no more rows.
    fn fetch(&mut self) -> Result<bool, TransferError> {
        if self.exhausted {
            return Ok(false);
        }
        let rows = self
            .db
            .db
            .events(self.session_id, self.last_seq, EVENT_PAGE, self.max_line)
            .map_err(|source| {
                self.failed = Some(source.to_string());
                TransferError::OpenClawDb {
                    path: self.db.path.clone(),
                    source,
                }
            })?;
        self.exhausted = rows.len() < EVENT_PAGE;
        let any = !rows.is_empty();
        self.page = rows.into_iter();
        Ok(any)
    }

    fn finish(&mut self) {
        self.done = true;
        if self.skipped_lines > LINE_WARNINGS_PER_FILE {
            let n = self.skipped_lines - LINE_WARNINGS_PER_FILE;
            self.warnings.push(format!(
                "{}: {n} more {} skipped (counted in the summary)",
                self.where_,
                switchboard_types::words::noun(n, "line", "lines")
            ));
        }
        if self.gaps > 0 {
            self.warnings.push(format!(
                "{}: {} seq numbers missing between its rows; the rows present were imported in order",
                self.where_, self.gaps
            ));
        }
    }

    /// A row as a line, or why it is skipped.
    fn check(&self, row: EventRow) -> Result<RawLine, (SkipReason, String)> {
        match row {
            EventRow::Line { text, .. } => super::line::parse_raw_line(&text),
            EventRow::TooLong { bytes, .. } => Err((
                SkipReason::LineTooLong,
                format!(
                    "{bytes} bytes, over the cap of {} bytes per line",
                    self.max_line
                ),
            )),
            EventRow::Compressed { .. } => Err((
                SkipReason::CompressedLine,
                "stored compressed (event_zstd), which this build does not decode".into(),
            )),
        }
    }
}

impl SourceLines for EventLines<'_> {
    fn next_line(&mut self) -> Result<Option<RawLine>, TransferError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let row = match self.page.next() {
                Some(row) => row,
                None => {
                    if !self.fetch()? {
                        self.finish();
                        return Ok(None);
                    }
                    continue;
                }
            };
            let seq = row.seq();
            let expected = self.last_seq.map_or(0, |s| s.saturating_add(1));
            if seq > expected {
                self.gaps += u64::try_from(seq - expected).unwrap_or(0);
            }
            self.last_seq = Some(seq);
            match self.check(row) {
                Ok(v) => return Ok(Some(v)),
                Err((reason, why)) => {
                    self.skips.skip(reason);
                    self.skipped_lines += 1;
                    if self.skipped_lines <= LINE_WARNINGS_PER_FILE {
                        self.warnings
                            .push(format!("{}, seq {seq}: skipped ({why})", self.where_));
                    }
                }
            }
        }
    }
}
