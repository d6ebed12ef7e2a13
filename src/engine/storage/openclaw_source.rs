//! Owns reading OpenClaw's per-agent SQLite store (2026.6 and later,
//! `agents/<id>/agent/openclaw-agent.sqlite`) read-only, as plain rows for the import.
//!
//! - **Never written.** Opened with the URI `file:…?mode=ro` (not `immutable`, so a running
//!   gateway's WAL is honoured). A rollback-journal database opens in place and SQLite creates
//!   nothing beside it. A WAL database whose `-shm` exists (a running gateway, or one that
//!   stopped normally) is opened in place too: its shared-memory index is how a reader sees the
//!   gateway's commits consistently, and SQLite only takes read marks in it. A WAL database
//!   *without* `-shm` (a copied folder) has no gateway attached, and opening it would make
//!   SQLite create a `-shm` next to the source (or fail where it cannot); so the database and
//!   its `-wal` are copied to a private temporary folder and the copy is read.
//! - **One snapshot.** `AgentDb::open` checks the schema and starts a read transaction, so every
//!   row comes from one consistent state even while the gateway writes.
//! - **Schema.** 2026.9.6 writes schema version 23 (`PRAGMA user_version`, `schema_meta`). A
//!   newer version is refused (`NewerSchema`): its rows may mean something this reader does
//!   not know, and a wrong import is worse than none. An older one is read when the tables and
//!   columns read here exist (`MissingTable` / `MissingColumn` otherwise).
//! - **Bounded.** An event longer than the caller's cap is reported by its length without its
//!   text being fetched; compressed events (`event_zstd`) are reported, not decoded (no zstd
//!   decoder in the build).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, types::ValueRef};

/// The per-agent database file name. The gateway's lock files beside it
/// (`openclaw-agent.sqlite.generation-lock.sqlite` …) end in `.sqlite` too and are not read.
pub const AGENT_DB_FILE: &str = "openclaw-agent.sqlite";

/// The newest per-agent schema this reader knows (OpenClaw 2026.9.6).
pub const KNOWN_SCHEMA: i64 = 23;

/// How long to wait for a writer's lock (only a rollback-journal database blocks readers).
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The columns read, per table: checked up front so a changed schema is one clear error.
const NEEDED: [(&str, &[&str]); 3] = [
    (
        "session_nodes",
        &["session_key", "current_session_id", "entry_json"],
    ),
    ("session_windows", &["session_id", "session_key"]),
    (
        "transcript_events",
        &["session_id", "seq", "event_json", "event_zstd"],
    ),
];

/// Why an agent database cannot be read. The path is added by the caller.
#[derive(Debug, thiserror::Error)]
pub enum OpenClawDbError {
    #[error(
        "it is locked by another process (the OpenClaw gateway writing?) for over {secs} s: {0}; try again once it is idle",
        secs = LOCK_WAIT.as_secs()
    )]
    Locked(String),
    #[error("it is damaged or incomplete (half-written?): {0}")]
    Corrupt(String),
    #[error(
        "its schema version {found} is newer than this importer knows ({known}, OpenClaw 2026.9.6); upgrade switchboard to import it"
    )]
    NewerSchema { found: i64, known: i64 },
    #[error("it has no table {0}: not an OpenClaw agent database of a known version")]
    MissingTable(&'static str),
    #[error("its table {table} has no column {column}: not an OpenClaw agent database of a known version")]
    MissingColumn {
        table: &'static str,
        column: &'static str,
    },
    #[error("cannot copy it for reading: {0}")]
    Copy(std::io::Error),
    #[error("cannot read it: {0}")]
    Sqlite(String),
}

impl From<rusqlite::Error> for OpenClawDbError {
    fn from(e: rusqlite::Error) -> OpenClawDbError {
        use rusqlite::ErrorCode as C;
        let detail = e.to_string();
        match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => OpenClawDbError::Locked(detail),
            Some(C::DatabaseCorrupt | C::NotADatabase) => OpenClawDbError::Corrupt(detail),
            _ => OpenClawDbError::Sqlite(detail),
        }
    }
}

/// One `session_nodes` row: a session key and its SessionEntry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub session_key: String,
    pub current_session_id: String,
    pub entry_json: Vec<u8>,
}

/// One `transcript_events` row, as far as it was fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventRow {
    /// `event_json`: one transcript line.
    Line { seq: i64, text: Vec<u8> },
    /// `event_json` longer than the cap: not fetched.
    TooLong { seq: i64, bytes: u64 },
    /// Stored compressed (`event_zstd`): not decoded.
    Compressed { seq: i64 },
}

impl EventRow {
    pub fn seq(&self) -> i64 {
        match self {
            EventRow::Line { seq, .. }
            | EventRow::TooLong { seq, .. }
            | EventRow::Compressed { seq } => *seq,
        }
    }
}

/// A transcript's event count and highest rowid (`AgentDb::transcript_stamp`). SQLite gives
/// an inserted row a rowid above every row in the table, so an appended event raises
/// `last_rowid` (and `events`); -1 when the transcript has no events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptStamp {
    pub events: i64,
    pub last_rowid: i64,
}

/// A temporary folder holding a copy of a WAL database; removed when dropped.
struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An open, checked agent database inside one read transaction.
pub struct AgentDb {
    // Behind a mutex only so `AgentDb` is `Sync` (an import future holds it across awaits).
    conn: Mutex<Connection>,
    /// Declared after `conn`, so the copy is removed once the connection is closed.
    _copy: Option<TempCopy>,
    /// The schema version found (`PRAGMA user_version`).
    pub schema_version: i64,
    /// Whether the source was read from a temporary copy (a WAL database without `-shm`).
    pub copied: bool,
}

impl AgentDb {
    /// Open `path` read-only (see the module docs), check its schema and start a snapshot.
    pub fn open(path: &Path) -> Result<AgentDb, OpenClawDbError> {
        let wal = is_wal(path)?;
        let shm = side_file(path, "-shm");
        let (open_at, copy) = if wal && !shm.exists() {
            let (db, dir) = copy_wal_db(path).map_err(OpenClawDbError::Copy)?;
            (db, Some(dir))
        } else {
            (path.to_path_buf(), None)
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(ro_uri(&open_at), flags)?;
        conn.busy_timeout(LOCK_WAIT)?;
        let schema_version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if schema_version > KNOWN_SCHEMA {
            return Err(OpenClawDbError::NewerSchema {
                found: schema_version,
                known: KNOWN_SCHEMA,
            });
        }
        for (table, columns) in NEEDED {
            let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
            let have: Vec<String> = stmt
                .query_map([table], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            if have.is_empty() {
                return Err(OpenClawDbError::MissingTable(table));
            }
            if let Some(column) = columns.iter().find(|c| !have.iter().any(|h| h == *c)) {
                return Err(OpenClawDbError::MissingColumn { table, column });
            }
        }
        // The first read after BEGIN pins the snapshot every later read sees.
        conn.execute_batch("BEGIN")?;
        conn.query_row("SELECT count(*) FROM session_nodes", [], |r| {
            r.get::<_, i64>(0)
        })?;
        Ok(AgentDb {
            conn: Mutex::new(conn),
            copied: copy.is_some(),
            _copy: copy,
            schema_version,
        })
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, rusqlite::Error>,
    ) -> Result<R, OpenClawDbError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| OpenClawDbError::Sqlite("a reader panicked".into()))?;
        Ok(f(&conn)?)
    }

    /// Every session node, by key.
    pub fn nodes(&self) -> Result<Vec<NodeRow>, OpenClawDbError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT session_key, current_session_id, CAST(entry_json AS BLOB)
                   FROM session_nodes ORDER BY session_key",
            )?;
            stmt.query_map([], |r| {
                Ok(NodeRow {
                    session_key: r.get(0)?,
                    current_session_id: r.get(1)?,
                    entry_json: r.get(2)?,
                })
            })?
            .collect()
        })
    }

    /// Up to `limit` events of transcript `session_id` with `seq > after`, in seq order.
    /// An `event_json` over `max_bytes` comes back as `TooLong`, unfetched.
    pub fn events(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<EventRow>, OpenClawDbError> {
        let after = after.unwrap_or(i64::MIN);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let max = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT seq, octet_length(event_json),
                        CASE WHEN octet_length(event_json) <= ?3 THEN CAST(event_json AS BLOB) END,
                        event_zstd IS NOT NULL
                   FROM transcript_events
                  WHERE session_id = ?1 AND seq > ?2
                  ORDER BY seq LIMIT ?4",
            )?;
            stmt.query_map(rusqlite::params![session_id, after, max, limit], |r| {
                let seq: i64 = r.get(0)?;
                let bytes: Option<i64> = r.get(1)?;
                let compressed: bool = r.get(3)?;
                Ok(match (r.get_ref(2)?, bytes) {
                    (ValueRef::Blob(b), _) => EventRow::Line {
                        seq,
                        text: b.to_vec(),
                    },
                    (_, Some(n)) => EventRow::TooLong {
                        seq,
                        bytes: u64::try_from(n).unwrap_or(0),
                    },
                    (_, None) if compressed => EventRow::Compressed { seq },
                    // Neither column: the table's CHECK forbids it; an empty line says so.
                    (_, None) => EventRow::Line { seq, text: vec![] },
                })
            })?
            .collect()
        })
    }

    /// What identifies transcript `session_id` as it stands, cheaply (the re-import's
    /// shortcut compares it with the last import's): how many events it holds and the
    /// highest rowid among them. Both come from the `(session_id, seq)` primary-key index,
    /// which carries the rowid, so no event text is read.
    pub fn transcript_stamp(&self, session_id: &str) -> Result<TranscriptStamp, OpenClawDbError> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT count(*), coalesce(max(rowid), -1) FROM transcript_events
                  WHERE session_id = ?1",
            )?
            .query_row([session_id], |r| {
                Ok(TranscriptStamp {
                    events: r.get(0)?,
                    last_rowid: r.get(1)?,
                })
            })
        })
    }

    /// Transcripts of `session_key` other than `current` that still hold events: earlier
    /// generations (`session_windows` rows replaced by a reset or rollover).
    pub fn earlier_transcripts(
        &self,
        session_key: &str,
        current: &str,
    ) -> Result<usize, OpenClawDbError> {
        self.with(|c| {
            c.query_row(
                "SELECT count(*) FROM session_windows w
                  WHERE w.session_key = ?1 AND w.session_id <> ?2
                    AND EXISTS (SELECT 1 FROM transcript_events e WHERE e.session_id = w.session_id)",
                [session_key, current],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| usize::try_from(n).unwrap_or(0))
    }
}

/// Whether the file is a SQLite database in WAL mode (header bytes 18/19 are 2).
fn is_wal(path: &Path) -> Result<bool, OpenClawDbError> {
    use std::io::Read;
    let mut header = [0u8; 100];
    let mut file = std::fs::File::open(path).map_err(|e| OpenClawDbError::Sqlite(e.to_string()))?;
    let mut got = 0;
    while got < header.len() {
        match file.read(&mut header[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(OpenClawDbError::Sqlite(e.to_string())),
        }
    }
    if got < header.len() || !header.starts_with(b"SQLite format 3\0") {
        return Err(OpenClawDbError::Corrupt(format!(
            "no SQLite header ({got} bytes read)"
        )));
    }
    Ok(header[18] == 2 || header[19] == 2)
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Copy a WAL database and its `-wal` (when there is one) into a new private folder.
fn copy_wal_db(path: &Path) -> std::io::Result<(PathBuf, TempCopy)> {
    let dir = std::env::temp_dir().join(format!("switchboard-import-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&dir)?;
    let guard = TempCopy(dir.clone());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let db = dir.join(AGENT_DB_FILE);
    // The database first, then the WAL: nothing writes a WAL database without its -shm.
    std::fs::copy(path, &db)?;
    let wal = side_file(path, "-wal");
    if wal.is_file() {
        std::fs::copy(&wal, side_file(&db, "-wal"))?;
    }
    Ok((db, guard))
}

/// `file:<path>?mode=ro`, the path percent-encoded where a URI needs it.
fn ro_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=ro");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(
            ro_uri(Path::new("/a b/x?y#z%.sqlite")),
            "file:/a%20b/x%3Fy%23z%25.sqlite?mode=ro"
        );
    }
}
