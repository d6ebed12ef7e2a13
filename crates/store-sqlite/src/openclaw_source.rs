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
//! - **Hostile files.** A database is a program as much as data: a `VIEW` named like a table
//!   can run any query, an endless recursive CTE too, and a generated column computes on
//!   read. So every table read must be a plain table (`sqlite_master.type = 'table'`) whose
//!   columns read are stored, not generated (`NotATable`, `GeneratedColumn`); and, whatever
//!   else a damaged or crafted file does, every read runs under a deadline (`ReadBudget`,
//!   a progress handler) and fails with `TooSlow` past it instead of hanging the import.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, types::ValueRef};

pub use switchboard_store::openclaw::{
    AGENT_DB_FILE, AgentDbSource, EventRow, KNOWN_SCHEMA, LOCK_WAIT, NodeRow, OpenClawDbError,
    OpenClawDbs, READ_DEADLINE, TranscriptStamp,
};

/// SQLite virtual-machine steps between two looks at the clock: cheap (a look costs far
/// less than the steps) and fine-grained (a few milliseconds of work).
const STEPS_PER_CHECK: i32 = 10_000;

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

/// What a SQLite error means for the import (the error type lives with the source trait).
fn db_error(e: rusqlite::Error) -> OpenClawDbError {
    {
        use rusqlite::ErrorCode as C;
        let detail = e.to_string();
        match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => OpenClawDbError::Locked(detail),
            Some(C::DatabaseCorrupt | C::NotADatabase) => OpenClawDbError::Corrupt(detail),
            _ => OpenClawDbError::Sqlite(detail),
        }
    }
}

/// A temporary folder holding a copy of a WAL database; removed when dropped.
struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The deadline of each read (`AgentDb::with`): a progress handler on the connection looks
/// at it every `STEPS_PER_CHECK` steps and interrupts the statement once it has passed.
struct ReadBudget {
    limit: Duration,
    start: Instant,
    /// Milliseconds after `start` when the current read must have ended.
    deadline_ms: Arc<AtomicU64>,
}

impl ReadBudget {
    fn install(conn: &mut Connection, limit: Duration) -> rusqlite::Result<ReadBudget> {
        let start = Instant::now();
        let deadline_ms = Arc::new(AtomicU64::new(0));
        let seen = deadline_ms.clone();
        conn.progress_handler(
            STEPS_PER_CHECK,
            Some(move || {
                let now = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                // true interrupts the statement (SQLITE_INTERRUPT).
                now > seen.load(Ordering::Relaxed)
            }),
        )?;
        let budget = ReadBudget {
            limit,
            start,
            deadline_ms,
        };
        budget.renew();
        Ok(budget)
    }

    /// A new read begins: it has the whole `limit`.
    fn renew(&self) {
        let end = self.start.elapsed().saturating_add(self.limit);
        let end = u64::try_from(end.as_millis()).unwrap_or(u64::MAX);
        self.deadline_ms.store(end, Ordering::Relaxed);
    }

    /// The error for a read: an interrupt is the deadline's.
    fn error(&self, e: rusqlite::Error) -> OpenClawDbError {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) {
            OpenClawDbError::TooSlow(self.limit)
        } else {
            db_error(e)
        }
    }
}

/// An open, checked agent database inside one read transaction.
pub struct AgentDb {
    // Behind a mutex only so `AgentDb` is `Sync` (an import future holds it across awaits).
    conn: Mutex<Connection>,
    budget: ReadBudget,
    /// Declared after `conn`, so the copy is removed once the connection is closed.
    _copy: Option<TempCopy>,
    /// The schema version found (`PRAGMA user_version`).
    pub schema_version: i64,
    /// Whether the source was read from a temporary copy (a WAL database without `-shm`).
    pub copied: bool,
}

impl AgentDb {
    /// Open `path` read-only (see the module docs), check its schema and start a snapshot;
    /// each read (the checks here included) is stopped after `read_deadline`
    /// (`READ_DEADLINE` by default, `ImportLimits::max_read_time`).
    pub fn open(path: &Path, read_deadline: Duration) -> Result<AgentDb, OpenClawDbError> {
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
        let mut conn = Connection::open_with_flags(ro_uri(&open_at), flags).map_err(db_error)?;
        conn.busy_timeout(LOCK_WAIT).map_err(db_error)?;
        let budget = ReadBudget::install(&mut conn, read_deadline).map_err(db_error)?;
        let schema_version = check_schema(&conn).map_err(|e| match e {
            Checked::Sqlite(e) => budget.error(e),
            Checked::Refused(e) => e,
        })?;
        let db = AgentDb {
            conn: Mutex::new(conn),
            budget,
            copied: copy.is_some(),
            _copy: copy,
            schema_version,
        };
        // The first read after BEGIN pins the snapshot every later read sees.
        db.with(|c| {
            c.execute_batch("BEGIN")?;
            c.query_row("SELECT count(*) FROM session_nodes", [], |r| {
                r.get::<_, i64>(0)
            })
        })?;
        Ok(db)
    }

    /// One read, under a fresh deadline.
    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, rusqlite::Error>,
    ) -> Result<R, OpenClawDbError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| OpenClawDbError::Sqlite("a reader panicked".into()))?;
        self.budget.renew();
        f(&conn).map_err(|e| self.budget.error(e))
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

/// Why `check_schema` stopped.
enum Checked {
    Sqlite(rusqlite::Error),
    Refused(OpenClawDbError),
}

impl From<rusqlite::Error> for Checked {
    fn from(e: rusqlite::Error) -> Checked {
        Checked::Sqlite(e)
    }
}

/// The schema version, once every table read is a plain table with the columns read stored
/// (see the module docs); nothing of a table's rows is read here.
fn check_schema(conn: &Connection) -> Result<i64, Checked> {
    let refused = |e| Err(Checked::Refused(e));
    let schema_version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if schema_version > KNOWN_SCHEMA {
        return refused(OpenClawDbError::NewerSchema {
            found: schema_version,
            known: KNOWN_SCHEMA,
        });
    }
    for (table, columns) in NEEDED {
        // `main` only: a temp object of the same name cannot exist in a fresh connection.
        let kind: Option<String> = conn
            .query_row(
                "SELECT type FROM main.sqlite_master WHERE name = ?1 COLLATE NOCASE",
                [table],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        match kind.as_deref() {
            None => return refused(OpenClawDbError::MissingTable(table)),
            Some("table") => {}
            Some(other) => {
                return refused(OpenClawDbError::NotATable {
                    name: table,
                    kind: other.to_string(),
                });
            }
        }
        // `table_xinfo` lists generated columns too: `hidden` 2 or 3 (1 is a virtual
        // table's hidden column, which a plain table cannot have).
        let mut stmt = conn.prepare("SELECT name, hidden FROM pragma_table_xinfo(?1)")?;
        let have: Vec<(String, i64)> = stmt
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for column in columns.iter() {
            match have.iter().find(|(name, _)| name == column) {
                None => return refused(OpenClawDbError::MissingColumn { table, column }),
                Some((_, 0)) => {}
                Some(_) => return refused(OpenClawDbError::GeneratedColumn { table, column }),
            }
        }
    }
    Ok(schema_version)
}

/// Whether the file is a SQLite database in WAL mode (header bytes 18/19 are 2). Opened
/// without blocking and without following a symlink: should a FIFO have taken the
/// database's place since it was checked, opening it must not wait for a writer.
fn is_wal(path: &Path) -> Result<bool, OpenClawDbError> {
    use std::io::Read;
    let mut header = [0u8; 100];
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let mut file = options
        .open(path)
        .map_err(|e| OpenClawDbError::Sqlite(e.to_string()))?;
    let is_file = file
        .metadata()
        .map_err(|e| OpenClawDbError::Sqlite(e.to_string()))?
        .is_file();
    if !is_file {
        return Err(OpenClawDbError::Sqlite("it is not a regular file".into()));
    }
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

/// Opens agent databases with `AgentDb::open`: what the composition root hands the engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteOpenClawDbs;

impl OpenClawDbs for SqliteOpenClawDbs {
    fn open(
        &self,
        path: &Path,
        read_deadline: Duration,
    ) -> Result<Box<dyn AgentDbSource>, OpenClawDbError> {
        Ok(Box::new(AgentDb::open(path, read_deadline)?))
    }
}

impl AgentDbSource for AgentDb {
    fn schema_version(&self) -> i64 {
        self.schema_version
    }

    fn copied(&self) -> bool {
        self.copied
    }

    fn nodes(&self) -> Result<Vec<NodeRow>, OpenClawDbError> {
        AgentDb::nodes(self)
    }

    fn events(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<EventRow>, OpenClawDbError> {
        AgentDb::events(self, session_id, after, limit, max_bytes)
    }

    fn transcript_stamp(&self, session_id: &str) -> Result<TranscriptStamp, OpenClawDbError> {
        AgentDb::transcript_stamp(self, session_id)
    }

    fn earlier_transcripts(
        &self,
        session_key: &str,
        current: &str,
    ) -> Result<usize, OpenClawDbError> {
        AgentDb::earlier_transcripts(self, session_key, current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deadline is the backstop for whatever the schema checks do not foresee: an
    /// endless statement on an open database is interrupted and named `TooSlow`. Run on a
    /// thread and waited for with a generous bound, so a missing deadline fails, not hangs.
    #[test]
    fn an_endless_read_is_stopped_by_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(AGENT_DB_FILE);
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE session_nodes (session_key TEXT, current_session_id TEXT, entry_json TEXT);
             CREATE TABLE session_windows (session_id TEXT, session_key TEXT);
             CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, event_zstd BLOB);",
        )
        .unwrap();
        drop(c);
        let db = AgentDb::open(&path, Duration::from_millis(200)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let endless = db.with(|c| {
                c.query_row(
                    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
                     SELECT count(*) FROM r",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            });
            // The next read has its own budget again.
            let after = db.nodes().map(|n| n.len());
            let _ = tx.send((endless, after));
        });
        let (endless, after) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the endless read was stopped");
        match endless {
            Err(OpenClawDbError::TooSlow(d)) => assert_eq!(d, Duration::from_millis(200)),
            other => panic!("{other:?}"),
        }
        assert_eq!(after.unwrap(), 0);
    }

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(
            ro_uri(Path::new("/a b/x?y#z%.sqlite")),
            "file:/a%20b/x%3Fy%23z%25.sqlite?mode=ro"
        );
    }
}
