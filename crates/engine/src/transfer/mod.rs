//! Owns import from an OpenClaw state folder and export to OpenClaw-compatible JSONL.
//!
//! **Import** (`Engine::import_openclaw`) reads OpenClaw's legacy layout,
//! `<DIR>/agents/<agentId>/sessions/sessions.json` (session key → SessionEntry) plus one
//! `<sessionId>.jsonl` transcript per session beside it. `DIR` may also be one
//! `agents/<agentId>/sessions` folder itself.
//! - Keys are canonicalised (OpenClaw keys may be mixed case). Each session is handed to
//!   `merge.rs` (`Engine::bring_in`): a new key is imported whole, a known one is merged
//!   (new lines appended by line id, a newer entry applied, conflicts reported), so
//!   importing again after the owner kept using OpenClaw brings the new lines, and a second
//!   run changes nothing. A sessionId that already belongs to another key is a warning and
//!   a skip.
//! - **Folders are self-contained**: the transcript is `<sessionId>.jsonl` in the folder
//!   first (a copied folder's entries still name the original's absolute paths); the
//!   entry's `sessionFile` is used only when that file is missing, and only when it is a
//!   usable file inside the folder. The report notes every session whose `sessionFile` was
//!   used or not read, and why (`ImportReport::source_notes`).
//! - **Only files inside `DIR` are read** (`source.rs`): a `sessionFile` that resolves
//!   outside it (absolute elsewhere, `../…`), a symlinked transcript or index, and anything
//!   that is not a regular file (FIFO, device, `/proc`) is never opened; it is skipped with
//!   a reason. With nothing usable the session is skipped, so a later import, once the
//!   folder is fixed, can still bring it in.
//! - **Everything read is bounded** (`ImportLimits`): each line (a longer one is skipped
//!   without being buffered), each transcript file, and each `sessions.json` (over the cap is
//!   an error: it must be parsed whole).
//! - Transcript lines are stored verbatim, one row per line, seq 0 being the `session`
//!   header; a file without a header gets a synthesised one and its lines are numbered from 1.
//!   Lines that are not JSON objects, and `message` lines whose `message` is not an object
//!   with a known `role` and a string or array `content`, are skipped: history readers can
//!   rely on that shape. A missing transcript is counted (the session is imported with a
//!   synthesised header only); one warning at the end names how many and a few keys.
//! - The report counts every skip by reason (`SkipReason`), and sessions by outcome: new,
//!   updated, unchanged, conflicts (named).
//! - The entry's `sessionFile` is dropped: it names OpenClaw's file, and once imported the
//!   transcript lives in the database (`Engine::transcript_path`). Export writes a fresh one.
//! - Each line's stored text is serde_json's compact encoding of it (fields in source
//!   order); `line.rs` makes it without building a `Value` whenever it can be sure of the
//!   same bytes, and otherwise parses and encodes.
//! - Files are streamed and written in chunks of `CHUNK_LINES` lines, one writer job per
//!   chunk; the writer inserts one chunk while the next is read. **Choice:** the session row
//!   is written in the *last* job, together with the last chunk, once every earlier chunk
//!   has committed, so a session appears only once its whole transcript has committed;
//!   readers never see a half-imported session, and an import cut short (crash, I/O error)
//!   leaves at most transcript rows that no session owns. Those are invisible to every query
//!   and are deleted when the session is imported again (the first job of a session clears
//!   rows of its sessionId that no session row owns). A short transcript is one job. Appends
//!   to a known session are staged the same way (`merge.rs`).
//! - Each `sessions.json` is parsed before anything is written, so a damaged index fails the
//!   import with nothing changed.
//!
//! **Import of OpenClaw 2026.6+** (per-agent SQLite, `agents/<id>/agent/openclaw-agent.sqlite`)
//! is `sqlite.rs`: each database row becomes the same entry + lines a `sessions.json` entry and
//! its `.jsonl` give, brought in (imported or merged) by the same `Engine::bring_in`. A folder
//! with both layouts imports both, SQLite first.
//!
//! **Export**: `Engine::export_session_jsonl` writes a session's stored lines in seq order,
//! exactly as stored; `Engine::export_session_to_file` does so into a file and
//! `Engine::export_openclaw` writes the legacy layout (every session; entries carry no
//! `sessionFile`, so OpenClaw finds `<sessionId>.jsonl` beside `sessions.json` and the folder
//! can be moved), which `import_openclaw` reads back into the same
//! sessions and lines; a direct chat's entry without `channel` gets its last channel there, as
//! OpenClaw's own legacy entries carry. Files are written by `atomic.rs`: an existing target is refused unless
//! `Overwrite::Replace`, a non-regular one always, no symlink is followed, and a failure
//! leaves nothing behind. `export_openclaw` writes every file under a temporary name first
//! and publishes them only when all are written.

mod approvals;
mod atomic;
mod error;
mod folders;
mod line;
mod merge;
mod source;
mod sqlite;

pub use atomic::Overwrite;
pub use error::{SkipReason, TransferError};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Engine;
use super::entry::SessionEntry;
use super::key::{SessionKey, SessionKind, is_valid_agent_id, normalize_agent_id};
use switchboard_store::{ImportMark, RawLine, SessionScan, StoredSession};
use atomic::StagedFile;
use folders::{NewFolders, check_real_folder};
use merge::{Fingerprint, Merged, PendingImports, SourceLines, SourceSession};
use source::{Line, Refused, SourceRoot};

/// Transcript lines per writer job during import: bounds memory and the writer's latency.
pub(crate) const CHUNK_LINES: usize = 5_000;

/// The index file of one agent's sessions in OpenClaw's legacy layout.
const SESSIONS_FILE: &str = "sessions.json";

const EXPECTED_LAYOUT: &str = "expected a folder containing agents/<agentId>/agent/openclaw-agent.sqlite \
     (OpenClaw 2026.6 and later) or agents/<agentId>/sessions/sessions.json (older), i.e. OpenClaw's state \
     folder, usually ~/.openclaw; or one agents/<agentId>/agent or agents/<agentId>/sessions folder itself";

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TransferError {
    let path = path.to_path_buf();
    move |source| TransferError::Io { op, path, source }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Sessions new here, imported whole.
    pub sessions_imported: usize,
    /// Sessions already here that got lines appended or their entry replaced (`merge.rs`).
    pub sessions_updated: usize,
    /// Sessions already here with nothing new in the source (left as they are).
    pub sessions_present: usize,
    /// Transcript lines read from files and stored for new sessions (synthesised headers
    /// not counted).
    pub lines_imported: usize,
    /// Lines appended to sessions already here.
    pub lines_appended: usize,
    /// Entries replaced by the source's newer one.
    pub entries_updated: usize,
    /// Sessions continued on both sides, one line each naming the key; nothing of them
    /// changed.
    pub conflicts: Vec<String>,
    /// Where transcripts came from when that was not simply `<sessionId>.jsonl` in the
    /// folder (a `sessionFile` used, or one not read), the first `SOURCE_NOTES` of them.
    pub source_notes: Vec<String>,
    /// How many sessions such a note concerns in all.
    pub source_notes_total: usize,
    /// Sessions imported with an empty transcript because the source had none (no
    /// `<sessionId>.jsonl`, no `transcript_events` rows): summarised in ONE warning at the
    /// end (`EMPTY_EXAMPLES` keys named), not a line each (a store of 10,000 sessions
    /// created and never run printed 9,998 lines).
    pub empty_sessions: usize,
    /// The first `EMPTY_EXAMPLES` keys of those sessions.
    pub empty_examples: Vec<String>,
    /// What was left out, by reason; each reason counts its own unit (see `SkipReason`).
    /// Line skips count only for sessions that were imported or updated.
    pub skipped: BTreeMap<SkipReason, usize>,
    pub warnings: Vec<String>,
    /// Senders OpenClaw had approved (its `credentials/<channel>-allowFrom.json`), newly
    /// approved here, by channel.
    pub approvals: BTreeMap<String, usize>,
}

impl ImportReport {
    /// How many things were skipped for `reason`.
    pub fn skipped(&self, reason: SkipReason) -> usize {
        self.skipped.get(&reason).copied().unwrap_or(0)
    }

    /// True when the import changed nothing in the store.
    pub fn changed_nothing(&self) -> bool {
        self.sessions_imported == 0 && self.sessions_updated == 0 && self.approvals.is_empty()
    }

    fn skip(&mut self, reason: SkipReason) {
        *self.skipped.entry(reason).or_default() += 1;
    }

    /// Count one session `Engine::bring_in` handled, by its outcome.
    fn tally(&mut self, merged: &Merged) {
        match *merged {
            Merged::Imported { lines } => {
                self.sessions_imported += 1;
                self.lines_imported += lines;
            }
            Merged::Updated { appended, entry } => {
                self.sessions_updated += 1;
                self.lines_appended += appended;
                self.entries_updated += usize::from(entry);
            }
            Merged::Unchanged => self.sessions_present += 1,
            Merged::Conflict | Merged::Skipped => {}
        }
    }

    /// Add what a transcript reader left out (`skips`: counts by reason; `warnings`: their
    /// explanations), but only for a session that was imported or updated: a session left as
    /// it was gained nothing from the lines read, so their skips would only be noise.
    fn tally_lines(&mut self, merged: &Merged, skips: ImportReport, warnings: Vec<String>) {
        if matches!(merged, Merged::Imported { .. } | Merged::Updated { .. }) {
            for (reason, n) in skips.skipped {
                *self.skipped.entry(reason).or_default() += n;
            }
            self.warnings.extend(warnings);
        }
    }

    /// Count a session imported with an empty transcript (see `empty_sessions`).
    fn note_empty(&mut self, key: &SessionKey) {
        self.empty_sessions += 1;
        if self.empty_examples.len() < EMPTY_EXAMPLES {
            self.empty_examples.push(key.to_string());
        }
    }

    /// The one warning that sums up `empty_sessions`, when there are any.
    fn empty_summary(&self) -> Option<String> {
        let n = self.empty_sessions;
        if n == 0 {
            return None;
        }
        let more = n - self.empty_examples.len();
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "{n} {} imported with an empty transcript (no transcript rows or .jsonl file in the source): {}{tail}",
            if n == 1 { "session" } else { "sessions" },
            self.empty_examples.join(", ")
        ))
    }

    fn note_source(&mut self, note: String) {
        self.source_notes_total += 1;
        if self.source_notes.len() < SOURCE_NOTES {
            self.source_notes.push(note);
        }
    }
}

/// Transcript source notes kept in the report; `source_notes_total` counts the rest.
const SOURCE_NOTES: usize = 20;

/// Keys of sessions imported with an empty transcript named in the summary warning.
const EMPTY_EXAMPLES: usize = 3;

/// Caps on what an import reads, so no input makes it buffer or run without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportLimits {
    /// Longest transcript line kept. OpenClaw inlines images as base64 in lines, so a real
    /// line can reach several MiB; 16 MiB leaves room while bounding the buffer.
    pub max_line_bytes: usize,
    /// Largest transcript file read. 4 GiB is some 2 million typical lines (twice the
    /// million-message transcript the console is built for) and bounds both the import's
    /// time and the database's growth from one file; a larger one is skipped.
    pub max_transcript_bytes: u64,
    /// Largest `sessions.json`, which must be parsed whole: 256 MiB is about a million
    /// entries, far past OpenClaw's own store (which moved to SQLite for size).
    pub max_index_bytes: u64,
    /// The longest one read of an OpenClaw SQLite database may take before the import stops
    /// with an error naming the file (`openclaw_source::READ_DEADLINE`, 2 minutes): a crafted
    /// or damaged database never hangs the import.
    pub max_read_time: std::time::Duration,
}

impl Default for ImportLimits {
    fn default() -> Self {
        ImportLimits {
            max_line_bytes: 16 << 20,
            max_transcript_bytes: 4 << 30,
            max_index_bytes: 256 << 20,
            max_read_time: switchboard_store::openclaw::READ_DEADLINE,
        }
    }
}

/// Line warnings kept per file; the counts in the report cover the rest.
const LINE_WARNINGS_PER_FILE: usize = 20;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    pub sessions: usize,
    pub lines: usize,
}

/// One agent's sessions folder found in the import source.
pub(super) struct AgentFolder {
    pub(super) agent_id: String,
    pub(super) dir: PathBuf,
}

/// A session to import, checked and ready.
struct Candidate {
    stored: StoredSession,
    /// The entry's `sessionFile`, resolved against its folder (not yet checked).
    session_file: Option<PathBuf>,
    /// `<sessionId>.jsonl` in its folder: the transcript when `sessionFile` is not usable.
    expected: PathBuf,
}

/// Where a session's transcript comes from.
enum Transcript {
    File {
        file: fs::File,
        meta: Box<fs::Metadata>,
        path: PathBuf,
    },
    /// There is none: the session gets a synthesised header.
    Missing,
    /// Refused (already counted and explained): the session is not imported.
    Refused,
}

impl Engine {
    /// Bring an OpenClaw state folder's sessions and transcripts in (see the module docs),
    /// with the default `ImportLimits`.
    pub async fn import_openclaw(&self, dir: &Path) -> Result<ImportReport, TransferError> {
        self.import_openclaw_with(dir, &ImportLimits::default())
            .await
    }

    /// `import_openclaw` with explicit caps. Files are read with blocking I/O between the
    /// writer jobs (a chunk at a time), which is what the CLI and tests want; a server should
    /// run this on a blocking-friendly task.
    pub async fn import_openclaw_with(
        &self,
        dir: &Path,
        limits: &ImportLimits,
    ) -> Result<ImportReport, TransferError> {
        let mut report = ImportReport::default();
        let dbs = sqlite::find_agent_dbs(dir)?;
        let folders = match find_agent_folders(dir) {
            Err(TransferError::NotAnOpenClawFolder { .. }) if !dbs.is_empty() => Vec::new(),
            found => found?,
        };
        let root = SourceRoot::new(dir).map_err(io_err("read", dir))?;
        // Every database is checked before anything is written (see sqlite.rs).
        let dbs = sqlite::open_all(self.openclaw_dbs(), dbs, &root, limits, &mut report)?;
        let mut candidates = Vec::new();
        for folder in &folders {
            self.read_sessions_json(folder, &root, limits, &mut candidates, &mut report)?;
        }
        if !dbs.is_empty() && !folders.is_empty() {
            report.warnings.push(format!(
                "{} holds both layouts (per-agent SQLite and legacy sessions.json); both were imported, SQLite first, so a key in both keeps its SQLite version",
                dir.display()
            ));
        }
        // SQLite first: it is OpenClaw's current store, a leftover sessions.json the older one.
        self.import_sqlite(dbs, limits, &mut report).await?;
        let marks = self.store().backend().import_marks().await?;
        let mut pending = PendingImports::default();
        for c in candidates {
            let done = self
                .import_one(c, &root, limits, &marks, &mut pending, &mut report)
                .await;
            if let Err(e) = done {
                // What was submitted still commits; wait for it before failing.
                let _ = self.settle(&mut pending, &mut report).await;
                return Err(e);
            }
        }
        self.settle(&mut pending, &mut report).await?;
        self.import_approvals(dir, &root, &mut report).await?;
        if let Some(summary) = report.empty_summary() {
            report.warnings.push(summary);
        }
        Ok(report)
    }

    /// Write every stored line of session `key` (canonical: a `ResolvedKey::key`, or a
    /// `SessionKey`) in seq order, one per line, exactly as stored, to `out`, and hand `out`
    /// back with the number of lines written. The transcript is read and written on the
    /// blocking pool (a long one takes seconds), not on one of the runtime's workers.
    pub async fn export_session_jsonl<W: Write + Send + 'static>(
        &self,
        key: &(impl AsRef<str> + ?Sized),
        mut out: W,
    ) -> Result<(usize, W), TransferError> {
        let session_id = self.session_id_of(key.as_ref()).await?;
        self.blocking(move |engine| {
            let n = engine.write_transcript(&session_id, &mut out)?;
            out.flush().map_err(TransferError::Write)?;
            Ok((n, out))
        })
        .await
    }

    /// Write session `key`'s transcript (as `export_session_jsonl`) into the file `path`,
    /// safely (see `atomic.rs`): all or nothing, no symlink followed, an existing file
    /// replaced only with `Overwrite::Replace`. Returns the number of lines written.
    pub async fn export_session_to_file(
        &self,
        key: &(impl AsRef<str> + ?Sized),
        path: &Path,
        overwrite: Overwrite,
    ) -> Result<usize, TransferError> {
        let session_id = self.session_id_of(key.as_ref()).await?;
        let path = path.to_path_buf();
        self.blocking(move |engine| {
            atomic::write_file(&path, overwrite, |out| engine.write_transcript(&session_id, out))
        })
        .await
    }

    /// The session id of the existing session `key` (canonical).
    async fn session_id_of(&self, key: &str) -> Result<String, TransferError> {
        let key = SessionKey::from_canonical(key);
        let session = self
            .store()
            .get(&key)
            .await?
            .ok_or_else(|| TransferError::NoSession(key.to_string()))?;
        Ok(session.entry.session_id)
    }

    /// Run `op` (reads of the store and writes of files, both blocking) on the blocking
    /// pool rather than on one of the runtime's workers.
    async fn blocking<R: Send + 'static>(
        &self,
        op: impl FnOnce(&Engine) -> Result<R, TransferError> + Send + 'static,
    ) -> Result<R, TransferError> {
        let engine = self.clone();
        tokio::task::spawn_blocking(move || op(&engine))
            .await
            .map_err(|e| TransferError::Write(std::io::Error::other(format!("the export stopped: {e}"))))?
    }

    /// Write every session in OpenClaw's legacy layout under `dir`:
    /// `agents/<agentId>/sessions/sessions.json` and `<sessionId>.jsonl` beside it. Refuses
    /// (before writing anything) when one of those files already exists, unless
    /// `Overwrite::Replace`, and always when one is not a regular file or symlink or a folder
    /// of the layout is not a real folder. Every file is written under a temporary name
    /// first; only when all are written are they published, so a failure part-way (a full
    /// disk) leaves no export file behind and a retry works. Every folder it created is
    /// removed again on failure (`folders.rs`); folders that were there before stay.
    pub async fn export_openclaw(
        &self,
        dir: &Path,
        overwrite: Overwrite,
    ) -> Result<ExportReport, TransferError> {
        let root = std::path::absolute(dir).map_err(io_err("resolve", dir))?;
        let mut by_agent: BTreeMap<String, Vec<StoredSession>> = BTreeMap::new();
        self.store().scan(&SessionScan::default(), |s| {
            by_agent.entry(s.agent_id.clone()).or_default().push(s);
            true
        })
        .await?;

        // Check everything first, so a refusal leaves the folder untouched.
        let mut ids = HashSet::new();
        for (agent, sessions) in by_agent.iter_mut() {
            sessions.sort_by(|a, b| a.key.cmp(&b.key));
            if let Some(s) = sessions.first()
                && !is_valid_agent_id(agent)
            {
                return Err(TransferError::Unexportable {
                    key: s.key.to_string(),
                    reason: format!("its agent id {agent:?} cannot be a folder name"),
                });
            }
            let agent_dir = root.join("agents").join(agent);
            let sessions_dir = agent_dir.join("sessions");
            // Before the files: a symlinked folder is the clearer message.
            for folder in [root.join("agents"), agent_dir, sessions_dir.clone()] {
                check_real_folder(&folder)?;
            }
            for s in sessions.iter() {
                if !is_safe_file_stem(&s.entry.session_id) {
                    return Err(TransferError::Unexportable {
                        key: s.key.to_string(),
                        reason: format!(
                            "its session id {:?} cannot be a file name",
                            s.entry.session_id
                        ),
                    });
                }
                if !ids.insert(s.entry.session_id.clone()) {
                    return Err(TransferError::Unexportable {
                        key: s.key.to_string(),
                        reason: format!(
                            "its session id {:?} also belongs to another session, and both would write one file",
                            s.entry.session_id
                        ),
                    });
                }
                let file = sessions_dir.join(format!("{}.jsonl", s.entry.session_id));
                atomic::check_target(&file, overwrite)?;
            }
            atomic::check_target(&sessions_dir.join(SESSIONS_FILE), overwrite)?;
        }

        // Reading the transcripts and writing the files block: on the blocking pool, not on
        // one of the runtime's workers (an export of a large state takes seconds).
        self.blocking(move |engine| engine.write_export(&root, &by_agent, overwrite))
            .await
    }

    /// The export's files, checked already: staged, then published together (see
    /// `export_openclaw`).
    fn write_export(
        &self,
        root: &Path,
        by_agent: &BTreeMap<String, Vec<StoredSession>>,
        overwrite: Overwrite,
    ) -> Result<ExportReport, TransferError> {
        let mut report = ExportReport::default();
        // Declared before the staged files, so on failure they are dropped (their
        // temporaries removed) first and the folders this export created are then empty.
        let mut made = NewFolders::default();
        let mut staged = Vec::new();
        let mut folders = Vec::new();
        for (agent, sessions) in by_agent {
            let sessions_dir = root.join("agents").join(agent).join("sessions");
            made.make(root, &sessions_dir)?;
            let mut index = Map::new();
            for s in sessions {
                let path = sessions_dir.join(format!("{}.jsonl", s.entry.session_id));
                let mut file = StagedFile::create(&path, overwrite)?;
                let lines = atomic::fill_staged(&mut file, |out| {
                    self.write_transcript(&s.entry.session_id, out)
                })?;
                file.seal()?;
                staged.push((path.clone(), file));
                let mut entry = match serde_json::to_value(&s.entry) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) | Err(_) => {
                        return Err(TransferError::Unexportable {
                            key: s.key.to_string(),
                            reason: "its entry does not encode as a JSON object".into(),
                        });
                    }
                };
                // No `sessionFile`: OpenClaw then uses `<sessions dir>/<sessionId>.jsonl`, the
                // file written here, wherever the folder is. An absolute path would tie the
                // folder to where it was written: OpenClaw 2026.5.28 serving a copied or moved
                // export was seen appending to the original's file, not the copy's.
                if let Some(channel) = direct_channel(s) {
                    entry.insert("channel".into(), Value::String(channel.to_string()));
                }
                index.insert(s.key.as_str().to_string(), Value::Object(entry));
                report.sessions += 1;
                report.lines += lines;
            }
            let index_path = sessions_dir.join(SESSIONS_FILE);
            let mut file = StagedFile::create(&index_path, overwrite)?;
            atomic::fill_staged(&mut file, |out| {
                serde_json::to_writer_pretty(&mut *out, &Value::Object(index))
                    .map_err(|e| TransferError::Write(e.into()))?;
                out.write_all(b"\n").map_err(TransferError::Write)
            })?;
            file.seal()?;
            // The index last: an export stopped while publishing never lists a missing file.
            staged.push((index_path, file));
            folders.push(sessions_dir);
        }

        let mut published: Vec<PathBuf> = Vec::new();
        for (path, file) in staged {
            if let Err(e) = file.publish() {
                for p in &published {
                    // New files of this export (refusing to overwrite, or in a folder it
                    // created): take them back, so a retry works and its folders can go.
                    if overwrite == Overwrite::Refuse || p.parent().is_some_and(|f| made.is_new(f)) {
                        let _ = fs::remove_file(p);
                    }
                }
                return Err(e);
            }
            published.push(path);
        }
        for folder in &folders {
            atomic::sync_folder(folder)?;
        }
        made.keep();
        Ok(report)
    }

    /// Stream a session's stored lines to `out`, one per line.
    fn write_transcript(
        &self,
        session_id: &str,
        out: &mut dyn Write,
    ) -> Result<usize, TransferError> {
        let mut write_error: Option<std::io::Error> = None;
        // Blocking, like the writers it fills (see `Store::transcript_lines_now`).
        let count = self
            .store()
            .backend()
            .transcript_lines_now(session_id, &mut |line| {
                match out
                    .write_all(line.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                {
                    Ok(()) => true,
                    Err(e) => {
                        write_error = Some(e);
                        false
                    }
                }
            });
        if let Some(e) = write_error {
            return Err(TransferError::Write(e));
        }
        Ok(count?)
    }

    /// Parse one `sessions.json` into candidates; entries that cannot be used are warnings.
    fn read_sessions_json(
        &self,
        folder: &AgentFolder,
        root: &SourceRoot,
        limits: &ImportLimits,
        out: &mut Vec<Candidate>,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let path = folder.dir.join(SESSIONS_FILE);
        let (file, meta) = match root.open(&path).map_err(io_err("read", &path))? {
            Ok(opened) => opened,
            Err(Refused::Missing) => {
                return Err(TransferError::Io {
                    op: "read",
                    path,
                    source: std::io::ErrorKind::NotFound.into(),
                });
            }
            Err(Refused::Skip(reason, why)) => {
                report.skip(reason);
                report
                    .warnings
                    .push(format!("{}: not read: {why}", path.display()));
                return Ok(());
            }
        };
        let cap = limits.max_index_bytes;
        let too_large = |size| TransferError::TooLarge {
            path: path.clone(),
            size,
            cap,
        };
        if meta.len() > cap {
            return Err(too_large(meta.len()));
        }
        let mut bytes = Vec::new();
        file.take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io_err("read", &path))?;
        if bytes.len() as u64 > cap {
            // It grew while being read.
            return Err(too_large(bytes.len() as u64));
        }
        let index: Map<String, Value> =
            serde_json::from_slice(&bytes).map_err(|e| TransferError::Json {
                path: path.clone(),
                line: e.line(),
                message: e.to_string(),
            })?;
        drop(bytes);
        let scheme = self.store().scheme();
        for (raw_key, value) in index {
            let skip = |report: &mut ImportReport, reason: SkipReason, why: String| {
                report.skip(reason);
                report.warnings.push(format!(
                    "{}: session {raw_key:?} skipped: {why}",
                    path.display()
                ));
            };
            let key = match scheme.canonicalize(&raw_key, &folder.agent_id) {
                Ok(key) => key,
                Err(e) => {
                    skip(
                        report,
                        SkipReason::InvalidKey,
                        format!("not a usable session key: {e}"),
                    );
                    continue;
                }
            };
            let mut entry = match decode_entry(value) {
                Ok(e) => e,
                Err(why) => {                    skip(report, SkipReason::UnreadableEntry, why);
                    continue;
                }
            };
            if !is_safe_file_stem(&entry.session_id) {
                skip(
                    report,
                    SkipReason::InvalidId,
                    format!("sessionId {:?} is not a usable id", entry.session_id),
                );
                continue;
            }
            let session_file = entry.extra.shift_remove("sessionFile");
            let expected = folder.dir.join(format!("{}.jsonl", entry.session_id));
            let session_file = session_file
                .as_ref()
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| folder.dir.join(s));
            let agent_id = key.agent_id(&scheme.default_agent).to_string();
            let kind = scheme.kind(&key, entry.chat_type.as_deref());
            out.push(Candidate {
                stored: StoredSession {
                    key,
                    agent_id,
                    kind,
                    entry,
                },
                session_file,
                expected,
            });
        }
        Ok(())
    }

    /// Find and open a candidate's transcript. The folder's own `<sessionId>.jsonl` comes
    /// first (a copied folder's entries still name the original's files); the entry's
    /// `sessionFile` is used only when that is missing and it is a usable file inside the
    /// folder. Every use or refusal of a `sessionFile` is noted in the report.
    fn open_transcript(
        c: &Candidate,
        root: &SourceRoot,
        limits: &ImportLimits,
        report: &mut ImportReport,
    ) -> Result<Transcript, TransferError> {
        let key = &c.stored.key;
        // Debug form for names that come from the file being imported.
        let named = c.session_file.as_ref().filter(|p| **p != c.expected);
        let opened = match open_or_skip(root, &c.expected) {
            Ok((file, meta)) => {
                if let Some(path) = named {
                    report.note_source(format!(
                        "session {key}: read {} from the folder; its sessionFile {path:?} was not read (the folder's own file comes first)",
                        file_name(&c.expected)
                    ));
                }
                (file, meta, c.expected.clone())
            }
            Err(Refused::Skip(reason, why)) => {
                report.skip(reason);
                report.warnings.push(format!(
                    "session {key} skipped: {} was not read: {why}",
                    c.expected.display()
                ));
                return Ok(Transcript::Refused);
            }
            Err(Refused::Missing) => {
                let Some(path) = named else {
                    return Ok(Transcript::Missing);
                };
                match open_or_skip(root, path) {
                    Ok((file, meta)) => {
                        report.note_source(format!(
                            "session {key}: {} is missing; read its sessionFile {path:?} (inside the folder)",
                            file_name(&c.expected)
                        ));
                        (file, meta, path.clone())
                    }
                    Err(Refused::Missing) => {
                        report.note_source(format!(
                            "session {key}: no transcript ({} and its sessionFile {path:?} are missing); imported with an empty transcript",
                            file_name(&c.expected)
                        ));
                        return Ok(Transcript::Missing);
                    }
                    Err(Refused::Skip(reason, why)) => {
                        report.skip(reason);
                        report.note_source(format!(
                            "session {key}: {} is missing and its sessionFile {path:?} was not read: {why}",
                            file_name(&c.expected)
                        ));
                        report.warnings.push(format!(
                            "session {key} skipped: no transcript inside the folder (its sessionFile {path:?} was not read: {why})"
                        ));
                        return Ok(Transcript::Refused);
                    }
                }
            }
        };
        let (file, meta, path) = opened;
        if meta.len() > limits.max_transcript_bytes {
            report.skip(SkipReason::FileTooLarge);
            report.warnings.push(format!(
                "session {key} skipped: {} is {} bytes, over the cap of {} bytes per transcript",
                path.display(),
                meta.len(),
                limits.max_transcript_bytes
            ));
            return Ok(Transcript::Refused);
        }
        Ok(Transcript::File {
            file,
            meta: Box::new(meta),
            path,
        })
    }

    /// Import or merge one candidate (`merge.rs`), from its transcript file.
    async fn import_one(
        &self,
        c: Candidate,
        root: &SourceRoot,
        limits: &ImportLimits,
        marks: &HashMap<String, ImportMark>,
        pending: &mut PendingImports,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let key = c.stored.key.clone();
        let transcript = Self::open_transcript(&c, root, limits, report)?;
        let mut reader = None;
        let fingerprint = match transcript {
            Transcript::Refused => return Ok(()),
            Transcript::Missing => Fingerprint::none(),
            Transcript::File { file, meta, path } => {
                let fingerprint = Fingerprint {
                    file: fs::canonicalize(&path)
                        .unwrap_or_else(|_| path.clone())
                        .to_string_lossy()
                        .into_owned(),
                    size: i64::try_from(meta.len()).unwrap_or(i64::MAX),
                    mtime_ns: mtime_ns(&meta),
                };
                reader = Some(JsonlLines::new(file, path, limits));
                fingerprint
            }
        };
        let missing = reader.is_none();
        let src = SourceSession {
            stored: c.stored,
            fingerprint,
            lines: reader.as_mut().map(|r| r as &mut dyn SourceLines),
        };
        let merged = self.bring_in(src, marks, pending, report).await?;
        if let Some(r) = reader {
            report.tally_lines(&merged, r.skips, r.warnings);
        }
        if missing && matches!(merged, Merged::Imported { .. }) {
            report.note_empty(&key);
        }
        report.tally(&merged);
        Ok(())
    }
}

/// A legacy `<sessionId>.jsonl` transcript read line by line under `ImportLimits`: lines
/// it cannot use are counted by reason and explained (the first `LINE_WARNINGS_PER_FILE`).
struct JsonlLines {
    reader: BufReader<std::io::Take<fs::File>>,
    path: PathBuf,
    max_line: usize,
    max_file: u64,
    buf: Vec<u8>,
    line_no: usize,
    skipped_lines: usize,
    skips: ImportReport,
    warnings: Vec<String>,
    done: bool,
}

impl JsonlLines {
    fn new(file: fs::File, path: PathBuf, limits: &ImportLimits) -> JsonlLines {
        JsonlLines {
            reader: BufReader::with_capacity(1 << 16, file.take(limits.max_transcript_bytes)),
            path,
            max_line: limits.max_line_bytes,
            max_file: limits.max_transcript_bytes,
            buf: Vec::new(),
            line_no: 0,
            skipped_lines: 0,
            skips: ImportReport::default(),
            warnings: Vec::new(),
            done: false,
        }
    }

    fn finish(&mut self) -> Result<(), TransferError> {
        self.done = true;
        if self.skipped_lines > LINE_WARNINGS_PER_FILE {
            let n = self.skipped_lines - LINE_WARNINGS_PER_FILE;
            self.warnings.push(format!(
                "{}: {n} more {} skipped (counted in the summary)",
                self.path.display(),
                switchboard_types::words::noun(n, "line", "lines")
            ));
        }
        let mut probe = [0u8; 1];
        let file = self.reader.get_mut().get_mut();
        if file.read(&mut probe).map_err(io_err("read", &self.path))? > 0 {
            // It grew past the cap while being read: what was read is kept.
            self.skips.skip(SkipReason::FileTooLarge);
            self.warnings.push(format!(
                "{}: grew past the cap of {} bytes while being read; the rest was not imported",
                self.path.display(),
                self.max_file
            ));
        }
        Ok(())
    }
}

impl SourceLines for JsonlLines {
    fn next_line(&mut self) -> Result<Option<RawLine>, TransferError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let read = source::read_line_capped(&mut self.reader, &mut self.buf, self.max_line)
                .map_err(io_err("read", &self.path))?;
            let skipped = match read {
                Line::Eof => {
                    self.finish()?;
                    return Ok(None);
                }
                Line::TooLong { bytes } => {
                    self.line_no += 1;
                    Some((
                        SkipReason::LineTooLong,
                        format!(
                            "{bytes} bytes, over the cap of {} bytes per line",
                            self.max_line
                        ),
                    ))
                }
                Line::Text => {
                    self.line_no += 1;
                    None
                }
            };
            let value = match skipped {
                Some(skip) => Err(skip),
                None => {
                    let mut text = trim_line_end(&self.buf);
                    if self.line_no == 1 {
                        // A byte-order mark from an editor is not part of the JSON.
                        text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
                    }
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    line::parse_raw_line(text)
                }
            };
            match value {
                Ok(v) => return Ok(Some(v)),
                Err((reason, why)) => {
                    self.skips.skip(reason);
                    self.skipped_lines += 1;
                    if self.skipped_lines <= LINE_WARNINGS_PER_FILE {
                        self.warnings.push(format!(
                            "{}, line {}: skipped ({why})",
                            self.path.display(),
                            self.line_no
                        ));
                    }
                }
            }
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A file's modification time in nanoseconds since the epoch (0 when unknown).
fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

/// Open a transcript; an I/O error (a name with a NUL byte, a path through a file, no
/// permission) skips that file rather than failing the whole import.
fn open_or_skip(root: &SourceRoot, path: &Path) -> Result<(fs::File, fs::Metadata), Refused> {
    match root.open(path) {
        Ok(opened) => opened,
        Err(e) => Err(Refused::Skip(SkipReason::UnreadableFile, e.to_string())),
    }
}

fn id_taken(key: &SessionKey, session_id: &str, owner: &SessionKey) -> String {
    format!("session {key} skipped: its sessionId {session_id} already belongs to {owner}")
}

/// Whether anything is at `path` (a file, a folder, a FIFO, a symlink, even a dangling one),
/// without following or opening it: where the import expects a file, whatever is there is
/// taken up and, when it is not a regular file inside the folder, reported as skipped with
/// its reason (`SourceRoot::open`), never passed over in silence.
fn something_at(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// The folders of one OpenClaw layout under `dir` holding `file`: `dir/agents/*/<sub>` with
/// `file` in it, or `dir` itself being one `agents/<agentId>/<sub>` folder holding it. Empty
/// when there are none; an error when `dir` holds `file` but is not such a folder (its agent
/// would be unknown). Anything at that name counts (a folder, a FIFO, a symlink), so the
/// reader reports why it is not read instead of passing over it. Both layouts (the legacy
/// `sessions/sessions.json`, the per-agent `agent/openclaw-agent.sqlite`) are found by it.
pub(super) fn find_layout(
    dir: &Path,
    sub: &str,
    file: &str,
) -> Result<Vec<AgentFolder>, TransferError> {
    let agents = dir.join("agents");
    let mut found = Vec::new();
    if agents.is_dir() {
        for item in fs::read_dir(&agents).map_err(io_err("read", &agents))? {
            let item = item.map_err(io_err("read", &agents))?;
            let folder = item.path().join(sub);
            if something_at(&folder.join(file)) {
                found.push(AgentFolder {
                    agent_id: normalize_agent_id(&item.file_name().to_string_lossy()),
                    dir: folder,
                });
            }
        }
        found.sort_by(|a, b| a.agent_id.cmp(&b.agent_id).then_with(|| a.dir.cmp(&b.dir)));
        return Ok(found);
    }
    if something_at(&dir.join(file)) {
        let abs = fs::canonicalize(dir).map_err(io_err("read", dir))?;
        let name = |p: Option<&Path>| {
            p.and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        };
        let agent_dir = abs.parent();
        if name(Some(&abs)).as_deref() == Some(sub)
            && name(agent_dir.and_then(Path::parent)).as_deref() == Some("agents")
            && let Some(agent) = name(agent_dir)
        {
            found.push(AgentFolder {
                agent_id: normalize_agent_id(&agent),
                dir: dir.to_path_buf(),
            });
        } else {
            return Err(TransferError::NotAnOpenClawFolder {
                path: dir.to_path_buf(),
                hint: format!(
                    "it has {} {file} but is not an agents/<agentId>/{sub} folder, so its agent is unknown; {EXPECTED_LAYOUT}",
                    if file.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
                ),
            });
        }
    }
    Ok(found)
}

/// The sessions folders of an import source (legacy layout), or why it is not one.
fn find_agent_folders(dir: &Path) -> Result<Vec<AgentFolder>, TransferError> {
    let meta = fs::metadata(dir).map_err(io_err("read", dir))?;
    let not_openclaw = |hint: String| TransferError::NotAnOpenClawFolder {
        path: dir.to_path_buf(),
        hint,
    };
    if !meta.is_dir() {
        return Err(not_openclaw(format!("it is a file; {EXPECTED_LAYOUT}")));
    }
    let found = find_layout(dir, "sessions", SESSIONS_FILE)?;
    if !found.is_empty() {
        return Ok(found);
    }
    if dir.join("agents").is_dir() {
        return Err(not_openclaw(format!(
            "its agents folder has no <agentId>/sessions/sessions.json; {EXPECTED_LAYOUT}"
        )));
    }
    Err(not_openclaw(EXPECTED_LAYOUT.to_string()))
}

/// An entry from its JSON, or why it cannot be one (naming the field at fault).
fn decode_entry(value: Value) -> Result<SessionEntry, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let at = e.path().to_string();
        if at == "." {
            format!("unreadable entry: {}", e.inner())
        } else {
            format!("unreadable entry field {at}: {}", e.inner())
        }
    })
}

/// A transcript line: one JSON object, and a `message` line of the shape history readers
/// rely on. Anything else is a skip with its reason.
fn parse_line(text: &[u8]) -> Result<Value, (SkipReason, String)> {
    let bad = |why: String| (SkipReason::BadJson, why);
    let text = std::str::from_utf8(text).map_err(|_| bad("not UTF-8 text".into()))?;
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Err(bad("not a JSON object".into())),
        Err(e) => return Err(bad(format!("not valid JSON: {e}"))),
    };
    if value.get("type").and_then(Value::as_str) == Some("message") {
        message_shape(value.get("message")).map_err(|why| (SkipReason::BadShape, why))?;
    }
    Ok(value)
}

/// A message is `{role: user|assistant|toolResult, content: string|array, …}`.
fn message_shape(message: Option<&Value>) -> Result<(), String> {
    let Some(message) = message.and_then(Value::as_object) else {
        return Err("a message line whose message is not an object".into());
    };
    match message.get("role").and_then(Value::as_str) {
        Some("user" | "assistant" | "toolResult") => {}
        Some(role) => {
            return Err(format!(
                "a message with role {role:?}, not user, assistant or toolResult"
            ));
        }
        None => return Err("a message without a role".into()),
    }
    match message.get("content") {
        Some(Value::String(_) | Value::Array(_)) => Ok(()),
        _ => Err("a message whose content is not text or a list of blocks".into()),
    }
}

fn trim_line_end(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &buf[..end]
}

/// The `channel` an exported direct session's entry gains when it has none: its last
/// channel (`deliveryContext.channel`, else `lastChannel`), which is what OpenClaw's own
/// legacy entries of direct chats carry beside it. Groups keep what they have; nothing is
/// invented for a session that never had a channel.
fn direct_channel(s: &StoredSession) -> Option<&str> {
    if s.entry.channel.is_some() || !matches!(s.kind, SessionKind::Main | SessionKind::Other) {
        return None;
    }
    s.entry.effective_last_channel()
}

/// A session id that can name a file inside the sessions folder (no separators, not `.`/`..`).
fn is_safe_file_stem(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && !id
            .chars()
            .any(|c| c == '/' || c == '\\' || c == '\0' || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"").unwrap();
    }

    /// Both layouts go through one finder: the same two shapes, the same refusal.
    #[test]
    fn one_finder_serves_both_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("agents/b/sessions").join(SESSIONS_FILE));
        touch(&root.join("agents/a/sessions").join(SESSIONS_FILE));
        touch(&root.join("agents/a/agent/openclaw-agent.sqlite"));
        let legacy = find_layout(root, "sessions", SESSIONS_FILE).unwrap();
        let ids: Vec<_> = legacy.iter().map(|f| f.agent_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let dbs = sqlite::find_agent_dbs(root).unwrap();
        assert_eq!(dbs.len(), 1);
        assert_eq!(dbs[0].agent_id, "a");
        assert!(dbs[0].path.ends_with("agents/a/agent/openclaw-agent.sqlite"));

        // One agent's own folder is accepted, for either layout.
        let one = find_layout(&root.join("agents/a/agent"), "agent", "openclaw-agent.sqlite");
        assert_eq!(one.unwrap()[0].agent_id, "a");

        // A folder holding the file but not shaped agents/<id>/<sub>: its agent is unknown.
        let stray = root.join("stray");
        touch(&stray.join(SESSIONS_FILE));
        touch(&stray.join("openclaw-agent.sqlite"));
        for (sub, file, article) in [
            ("sessions", SESSIONS_FILE, "a"),
            ("agent", "openclaw-agent.sqlite", "an"),
        ] {
            let err = find_layout(&stray, sub, file).err().unwrap().to_string();
            assert!(
                err.contains(&format!(
                    "it has {article} {file} but is not an agents/<agentId>/{sub} folder"
                )),
                "{err}"
            );
        }
        // Nothing of a layout: empty, not an error (the caller says what is missing).
        assert!(find_layout(&stray.join("none"), "agent", "x").unwrap().is_empty());
    }
}
