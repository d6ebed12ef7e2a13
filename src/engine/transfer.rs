//! Owns import from an OpenClaw state folder and export to OpenClaw-compatible JSONL.
//!
//! **Import** (`Engine::import_openclaw`) reads OpenClaw's legacy layout,
//! `<DIR>/agents/<agentId>/sessions/sessions.json` (session key → SessionEntry) plus one
//! `<sessionId>.jsonl` transcript per session beside it (or the entry's `sessionFile`, when
//! that file exists). `DIR` may also be one `agents/<agentId>/sessions` folder itself.
//! - Keys are canonicalised (OpenClaw keys may be mixed case); a key already in the store is
//!   skipped, so re-importing is harmless. A sessionId that already belongs to another key is
//!   a warning and a skip.
//! - Transcript lines are stored verbatim, one row per line, seq 0 being the `session`
//!   header; a file without a header gets a synthesised one and its lines are numbered from 1.
//!   Unparsable lines are skipped, counted and named in a warning; a missing transcript is a
//!   warning (the session is imported with a synthesised header only).
//! - The entry's `sessionFile` is dropped: it names OpenClaw's file, and once imported the
//!   transcript lives in the database (`Engine::transcript_path`). Export writes a fresh one.
//! - Files are streamed with `BufRead` and written in chunks of `CHUNK_LINES` lines, one
//!   writer job per chunk. **Choice:** the session row is written in the *last* job, together
//!   with the last chunk, so a session appears only once its whole transcript has committed;
//!   readers never see a half-imported session, and an import cut short (crash, I/O error)
//!   leaves at most transcript rows that no session owns. Those are invisible to every query
//!   and are deleted when the session is imported again (the first job of a session clears
//!   rows of its sessionId that no session row owns). A short transcript is one job.
//! - Each `sessions.json` is parsed before anything is written, so a damaged index fails the
//!   import with nothing changed.
//!
//! **Export**: `Engine::export_session_jsonl` writes a session's stored lines in seq order,
//! exactly as stored; `Engine::export_openclaw` writes the legacy layout (every session, with
//! `sessionFile` set to the written file's absolute path), which `import_openclaw` reads back
//! into the same sessions and lines. Export refuses to overwrite existing files.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Engine;
use super::entry::SessionEntry;
use super::events::EngineEvent;
use super::key::{SessionKey, is_valid_agent_id, normalize_agent_id};
use super::storage::StorageError;
use super::storage::queries::{self, SessionScan, StoredSession};

/// Transcript lines per writer job during import: bounds memory and the writer's latency.
const CHUNK_LINES: usize = 5_000;

/// The index file of one agent's sessions in OpenClaw's legacy layout.
const SESSIONS_FILE: &str = "sessions.json";

const EXPECTED_LAYOUT: &str = "expected a folder containing agents/<agentId>/sessions/sessions.json \
     (OpenClaw's state folder, usually ~/.openclaw), or one agents/<agentId>/sessions folder itself";

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done: `read`, `create`, `write` …
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an OpenClaw state folder: {hint}")]
    NotAnOpenClawFolder { path: PathBuf, hint: String },
    #[error("{path}, line {line}: not valid JSON: {message}")]
    Json {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("no session found: {0}")]
    NoSession(String),
    #[error("cannot write the export: {0}")]
    Write(#[source] std::io::Error),
    #[error("{path} already exists; export into an empty folder (nothing was overwritten)")]
    WouldOverwrite { path: PathBuf },
    #[error("session {key} cannot be exported: {reason}")]
    Unexportable { key: String, reason: String },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TransferError {
    let path = path.to_path_buf();
    move |source| TransferError::Io { op, path, source }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub sessions_imported: usize,
    /// Already present (same key), or refused (sessionId taken, unreadable entry …).
    pub sessions_skipped: usize,
    /// Transcript lines read from files and stored (synthesised headers not counted).
    pub lines_imported: usize,
    /// Lines of imported sessions that were not JSON objects and were left out.
    pub bad_lines: usize,
    pub warnings: Vec<String>,
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    pub sessions: usize,
    pub lines: usize,
}

/// One agent's sessions folder found in the import source.
struct AgentFolder {
    agent_id: String,
    dir: PathBuf,
}

/// A session to import, checked and ready.
struct Candidate {
    stored: StoredSession,
    /// The transcript to read, when one exists.
    transcript: Option<PathBuf>,
    /// Where it was looked for (for the warning when it is missing).
    expected: PathBuf,
}

/// How a session's final job ended.
enum Outcome {
    Imported,
    KeyExists,
    IdTaken(SessionKey),
}

impl Engine {
    /// Bring an OpenClaw state folder's sessions and transcripts in (see the module docs).
    /// Files are read with blocking I/O between the writer jobs (a chunk at a time), which is
    /// what the CLI and tests want; a server should run this on a blocking-friendly task.
    pub async fn import_openclaw(&self, dir: &Path) -> Result<ImportReport, TransferError> {
        let mut report = ImportReport::default();
        let folders = find_agent_folders(dir)?;
        let mut candidates = Vec::new();
        for folder in &folders {
            self.read_sessions_json(folder, &mut candidates, &mut report)?;
        }
        for c in candidates {
            self.import_one(c, &mut report).await?;
        }
        Ok(report)
    }

    /// Write every stored line of session `key` in seq order, one per line, exactly as
    /// stored. Returns the number of lines written.
    pub fn export_session_jsonl(
        &self,
        key: &SessionKey,
        out: &mut dyn Write,
    ) -> Result<usize, TransferError> {
        let session = self
            .store()
            .get(key)?
            .ok_or_else(|| TransferError::NoSession(key.to_string()))?;
        let n = self.write_transcript(&session.entry.session_id, out)?;
        out.flush().map_err(TransferError::Write)?;
        Ok(n)
    }

    /// Write every session in OpenClaw's legacy layout under `dir`:
    /// `agents/<agentId>/sessions/sessions.json` and `<sessionId>.jsonl` beside it. Refuses
    /// (before writing anything) when one of those files already exists.
    pub fn export_openclaw(&self, dir: &Path) -> Result<ExportReport, TransferError> {
        let root = std::path::absolute(dir).map_err(io_err("resolve", dir))?;
        let mut by_agent: BTreeMap<String, Vec<StoredSession>> = BTreeMap::new();
        self.store().scan(&SessionScan::default(), |s| {
            by_agent.entry(s.agent_id.clone()).or_default().push(s);
            true
        })?;

        // Check everything first, so a refusal leaves the folder untouched.
        for (agent, sessions) in by_agent.iter_mut() {
            sessions.sort_by(|a, b| a.key.cmp(&b.key));
            let sessions_dir = root.join("agents").join(agent).join("sessions");
            for s in sessions.iter() {
                if !is_valid_agent_id(agent) {
                    return Err(TransferError::Unexportable {
                        key: s.key.to_string(),
                        reason: format!("its agent id {agent:?} cannot be a folder name"),
                    });
                }
                if !is_safe_file_stem(&s.entry.session_id) {
                    return Err(TransferError::Unexportable {
                        key: s.key.to_string(),
                        reason: format!(
                            "its session id {:?} cannot be a file name",
                            s.entry.session_id
                        ),
                    });
                }
                let file = sessions_dir.join(format!("{}.jsonl", s.entry.session_id));
                if file.exists() {
                    return Err(TransferError::WouldOverwrite { path: file });
                }
            }
            let index = sessions_dir.join(SESSIONS_FILE);
            if index.exists() {
                return Err(TransferError::WouldOverwrite { path: index });
            }
        }

        let mut report = ExportReport::default();
        for (agent, sessions) in &by_agent {
            let sessions_dir = root.join("agents").join(agent).join("sessions");
            fs::create_dir_all(&sessions_dir).map_err(io_err("create", &sessions_dir))?;
            let mut index = Map::new();
            for s in sessions {
                let path = sessions_dir.join(format!("{}.jsonl", s.entry.session_id));
                let file = create_new(&path)?;
                let mut out = BufWriter::new(file);
                let lines = self
                    .write_transcript(&s.entry.session_id, &mut out)
                    .map_err(|e| with_path(e, "write", &path))?;
                out.flush().map_err(io_err("write", &path))?;
                let mut entry = match serde_json::to_value(&s.entry) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) | Err(_) => {
                        return Err(TransferError::Unexportable {
                            key: s.key.to_string(),
                            reason: "its entry does not encode as a JSON object".into(),
                        });
                    }
                };
                entry.insert(
                    "sessionFile".into(),
                    Value::String(path.to_string_lossy().into_owned()),
                );
                index.insert(s.key.as_str().to_string(), Value::Object(entry));
                report.sessions += 1;
                report.lines += lines;
            }
            let index_path = sessions_dir.join(SESSIONS_FILE);
            let mut out = BufWriter::new(create_new(&index_path)?);
            serde_json::to_writer_pretty(&mut out, &Value::Object(index)).map_err(|e| {
                TransferError::Io {
                    op: "write",
                    path: index_path.clone(),
                    source: e.into(),
                }
            })?;
            out.write_all(b"\n")
                .and_then(|()| out.flush())
                .map_err(io_err("write", &index_path))?;
        }
        Ok(report)
    }

    /// Stream a session's stored lines to `out`, one per line.
    fn write_transcript(
        &self,
        session_id: &str,
        out: &mut dyn Write,
    ) -> Result<usize, TransferError> {
        let mut count = 0usize;
        let mut write_error: Option<std::io::Error> = None;
        let result = self.store().storage().read(|c| {
            queries::transcript_lines(c, session_id, |line| {
                match out
                    .write_all(line.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                {
                    Ok(()) => {
                        count += 1;
                        Ok(())
                    }
                    Err(e) => {
                        write_error = Some(e);
                        Err(StorageError::Rejected(
                            "export stopped by a write error".into(),
                        ))
                    }
                }
            })
        });
        if let Some(e) = write_error {
            return Err(TransferError::Write(e));
        }
        result?;
        Ok(count)
    }

    /// Parse one `sessions.json` into candidates; entries that cannot be used are warnings.
    fn read_sessions_json(
        &self,
        folder: &AgentFolder,
        out: &mut Vec<Candidate>,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let path = folder.dir.join(SESSIONS_FILE);
        let bytes = fs::read(&path).map_err(io_err("read", &path))?;
        let index: Map<String, Value> =
            serde_json::from_slice(&bytes).map_err(|e| TransferError::Json {
                path: path.clone(),
                line: e.line(),
                message: e.to_string(),
            })?;
        let scheme = self.store().scheme();
        for (raw_key, value) in index {
            let skip = |report: &mut ImportReport, why: String| {
                report.sessions_skipped += 1;
                report.warnings.push(format!(
                    "{}: session {raw_key:?} skipped: {why}",
                    path.display()
                ));
            };
            let key = match scheme.canonicalize(&raw_key, &folder.agent_id) {
                Ok(key) => key,
                Err(e) => {
                    skip(report, format!("not a usable session key: {e}"));
                    continue;
                }
            };
            let mut entry: SessionEntry = match serde_path_to_error::deserialize(value) {
                Ok(e) => e,
                Err(e) => {
                    let at = e.path().to_string();
                    let why = if at == "." {
                        format!("unreadable entry: {}", e.inner())
                    } else {
                        format!("unreadable entry field {at}: {}", e.inner())
                    };
                    skip(report, why);
                    continue;
                }
            };
            if !is_safe_file_stem(&entry.session_id) {
                skip(
                    report,
                    format!("sessionId {:?} is not a usable id", entry.session_id),
                );
                continue;
            }
            let session_file = entry.extra.shift_remove("sessionFile");
            let expected = folder.dir.join(format!("{}.jsonl", entry.session_id));
            let from_entry = session_file
                .as_ref()
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| folder.dir.join(s))
                .filter(|p| p.is_file());
            let transcript = from_entry.or_else(|| expected.is_file().then(|| expected.clone()));
            let agent_id = key.agent_id(&scheme.default_agent).to_string();
            let kind = scheme.kind(&key, entry.chat_type.as_deref());
            out.push(Candidate {
                stored: StoredSession {
                    key,
                    agent_id,
                    kind,
                    entry,
                },
                transcript,
                expected,
            });
        }
        Ok(())
    }

    /// Import one session: stream its transcript in chunks, then commit the last chunk and
    /// the session row together.
    async fn import_one(
        &self,
        c: Candidate,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let store = self.store();
        let storage = store.storage().clone();
        let key = c.stored.key.clone();
        let session_id = c.stored.entry.session_id.clone();
        if store.get(&key)?.is_some() {
            report.sessions_skipped += 1;
            return Ok(());
        }
        if let Some(owner) = store.keys_by_session_id(&session_id)?.into_iter().next() {
            report.sessions_skipped += 1;
            report.warnings.push(id_taken(&key, &session_id, &owner));
            return Ok(());
        }

        let header = json!({
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": queries::iso_timestamp(c.stored.entry.updated_at),
            "cwd": "",
        });
        let mut warnings = Vec::new();
        let mut lines = 0usize;
        let mut bad = 0usize;
        let mut pending: Vec<Value> = Vec::new();
        let mut next_seq = 0i64; // seq of pending[0]
        let mut first_job = true;

        match &c.transcript {
            None => {
                warnings.push(format!(
                    "session {key}: no transcript at {}; imported with an empty transcript",
                    c.expected.display()
                ));
                pending.push(header);
            }
            Some(path) => {
                let file = File::open(path).map_err(io_err("read", path))?;
                let mut reader = BufReader::with_capacity(1 << 16, file);
                let mut buf = Vec::new();
                let mut line_no = 0usize;
                let mut header_decided = false;
                loop {
                    buf.clear();
                    let n = reader
                        .read_until(b'\n', &mut buf)
                        .map_err(io_err("read", path))?;
                    if n == 0 {
                        break;
                    }
                    line_no += 1;
                    let mut text = trim_line_end(&buf);
                    if line_no == 1 {
                        // A byte-order mark from an editor is not part of the JSON.
                        text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
                    }
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let value = match parse_line(text) {
                        Ok(v) => v,
                        Err(why) => {
                            bad += 1;
                            warnings.push(format!(
                                "{}, line {line_no}: skipped ({why})",
                                path.display()
                            ));
                            continue;
                        }
                    };
                    if !header_decided {
                        header_decided = true;
                        if value.get("type").and_then(Value::as_str) == Some("session") {
                            let id = value.get("id").and_then(Value::as_str).unwrap_or("");
                            if id != session_id {
                                warnings.push(format!(
                                    "{}: header names session {id:?} but the entry for {key} says {session_id:?}; kept as is",
                                    path.display()
                                ));
                            }
                        } else {
                            pending.push(header.clone());
                        }
                    }
                    if pending.len() >= CHUNK_LINES {
                        let chunk = std::mem::take(&mut pending);
                        let count = chunk.len() as i64;
                        let sid = session_id.clone();
                        let (first, clean) = (next_seq, first_job);
                        let owner = storage
                            .write(move |conn| {
                                if let Some(owner) =
                                    queries::keys_by_session_id(conn, &sid)?.into_iter().next()
                                {
                                    return Ok(Some(owner));
                                }
                                if clean {
                                    queries::delete_orphan_transcript(conn, &sid)?;
                                }
                                queries::put_raw_lines(conn, &sid, first, &chunk)?;
                                Ok(None)
                            })
                            .await?;
                        if let Some(owner) = owner {
                            // Someone created a session with this id meanwhile: leave it be.
                            report.sessions_skipped += 1;
                            report.warnings.push(id_taken(&key, &session_id, &owner));
                            return Ok(());
                        }
                        next_seq += count;
                        first_job = false;
                    }
                    pending.push(value);
                    lines += 1;
                }
                if !header_decided {
                    // Empty, or nothing parsable: still give the session its header.
                    pending.push(header);
                }
            }
        }

        let stored = c.stored;
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
                report.bad_lines += bad;
                report.warnings.extend(warnings);
                self.events().emit(EngineEvent::SessionCreated {
                    key: key.to_string(),
                    session_id,
                });
            }
            Outcome::KeyExists => report.sessions_skipped += 1,
            Outcome::IdTaken(owner) => {
                report.sessions_skipped += 1;
                report.warnings.push(id_taken(&key, &session_id, &owner));
            }
        }
        Ok(())
    }
}

fn id_taken(key: &SessionKey, session_id: &str, owner: &SessionKey) -> String {
    format!("session {key} skipped: its sessionId {session_id} already belongs to {owner}")
}

/// The sessions folders of an import source, or why it is not one.
fn find_agent_folders(dir: &Path) -> Result<Vec<AgentFolder>, TransferError> {
    let meta = fs::metadata(dir).map_err(io_err("read", dir))?;
    let not_openclaw = |hint: String| TransferError::NotAnOpenClawFolder {
        path: dir.to_path_buf(),
        hint,
    };
    if !meta.is_dir() {
        return Err(not_openclaw(format!("it is a file; {EXPECTED_LAYOUT}")));
    }
    let agents = dir.join("agents");
    if agents.is_dir() {
        let mut found = Vec::new();
        for item in fs::read_dir(&agents).map_err(io_err("read", &agents))? {
            let item = item.map_err(io_err("read", &agents))?;
            let sessions = item.path().join("sessions");
            if sessions.join(SESSIONS_FILE).is_file() {
                found.push(AgentFolder {
                    agent_id: normalize_agent_id(&item.file_name().to_string_lossy()),
                    dir: sessions,
                });
            }
        }
        if found.is_empty() {
            return Err(not_openclaw(format!(
                "its agents folder has no <agentId>/sessions/sessions.json; {EXPECTED_LAYOUT}"
            )));
        }
        found.sort_by(|a, b| a.agent_id.cmp(&b.agent_id).then_with(|| a.dir.cmp(&b.dir)));
        return Ok(found);
    }
    if dir.join(SESSIONS_FILE).is_file() {
        let abs = fs::canonicalize(dir).map_err(io_err("read", dir))?;
        let name = |p: Option<&Path>| {
            p.and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        };
        let agent_dir = abs.parent();
        if name(Some(&abs)).as_deref() == Some("sessions")
            && name(agent_dir.and_then(Path::parent)).as_deref() == Some("agents")
            && let Some(agent) = name(agent_dir)
        {
            return Ok(vec![AgentFolder {
                agent_id: normalize_agent_id(&agent),
                dir: dir.to_path_buf(),
            }]);
        }
        return Err(not_openclaw(format!(
            "it has a sessions.json but is not an agents/<agentId>/sessions folder, so its agent is unknown; {EXPECTED_LAYOUT}"
        )));
    }
    Err(not_openclaw(EXPECTED_LAYOUT.to_string()))
}

/// A transcript line: one JSON object. Anything else is reported as bad.
fn parse_line(text: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_string())?;
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

fn trim_line_end(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &buf[..end]
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

fn create_new(path: &Path) -> Result<File, TransferError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                TransferError::WouldOverwrite {
                    path: path.to_path_buf(),
                }
            } else {
                TransferError::Io {
                    op: "create",
                    path: path.to_path_buf(),
                    source: e,
                }
            }
        })
}

/// A write error during export, with the file it was writing.
fn with_path(e: TransferError, op: &'static str, path: &Path) -> TransferError {
    match e {
        TransferError::Write(source) => TransferError::Io {
            op,
            path: path.to_path_buf(),
            source,
        },
        other => other,
    }
}
