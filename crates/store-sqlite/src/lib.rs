//! The one place that touches the database: opening and migrating it, a pool of read
//! connections, and the single group-committing writer (DESIGN §3.4).

pub mod backup;
pub mod check;
pub mod copy;
mod error;
pub mod flows;
pub mod idempotency;
pub mod imports;
pub mod openclaw_source;
pub mod outbox;
pub mod pairings;
pub mod queries;
pub mod runs;
mod schema;
pub mod spawns;
mod store;
mod tail_cache;
pub mod words;
mod writer;
pub use store::SqliteStore;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

pub use error::StorageError;
pub use schema::SCHEMA_VERSION;
use writer::Writer;

/// The database file inside a state folder.
pub const DB_FILE: &str = "switchboard.db";

/// A submitted write whose commit has not been awaited yet.
pub struct Pending<R>(tokio::sync::oneshot::Receiver<Result<R, StorageError>>);

impl<R> Pending<R> {
    /// Resolve once the write's transaction has committed (or failed).
    pub async fn committed(self) -> Result<R, StorageError> {
        self.0.await.unwrap_or(Err(StorageError::WriterGone))
    }
}

/// Shared handle to one state folder's database. Cheap to clone.
#[derive(Clone)]
pub struct Storage {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// `None` when the database was opened read-only: every write then fails `ReadOnly`.
    writer: Option<Writer>,
    readers: Mutex<Vec<Connection>>,
    read_only: bool,
    /// Counts commits by other processes, as the writer notices them.
    external: tokio::sync::watch::Receiver<u64>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers first, so the writer's closing checkpoint is not held back by this
        // process's own pooled connections; then the writer drains, checkpoints and closes.
        if let Ok(mut pool) = self.readers.lock() {
            pool.clear();
        }
        self.writer.take();
    }
}

impl Storage {
    /// Open (creating if needed) `<state_dir>/switchboard.db` and migrate it.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn open(state_dir: &Path) -> Result<Storage, StorageError> {
        Storage::open_prepared(state_dir, |_| Ok(()))
    }

    /// Open, migrate, then run `prepare` on the write connection before the writer starts
    /// (one-off fix-ups that must not block on the writer from inside an async runtime).
    /// Every step waits for other processes (busy timeout, and retries where SQLite
    /// reports busy without waiting), so processes started together all open; `prepare`
    /// may therefore run more than once and must be idempotent.
    pub fn open_prepared(
        state_dir: &Path,
        mut prepare: impl FnMut(&Connection) -> Result<(), StorageError>,
    ) -> Result<Storage, StorageError> {
        std::fs::create_dir_all(state_dir).map_err(|e| StorageError::io(state_dir, e))?;
        let path = state_dir.join(DB_FILE);
        let mut conn = open_conn(&path)?;
        schema::retry_busy(|| schema::migrate(&mut conn))?;
        schema::retry_busy(|| prepare(&conn))?;
        schema::configure_writer(&conn)?;
        let checkpointer = open_conn(&path)?;
        let (external, external_rx) = tokio::sync::watch::channel(0);
        let writer = Writer::start(conn, Some(checkpointer), wal_path(&path), external)?;
        Ok(Storage {
            inner: Arc::new(Inner {
                path,
                writer: Some(writer),
                readers: Mutex::new(Vec::new()),
                read_only: false,
                external: external_rx,
            }),
        })
    }

    /// Open an existing database for reading only: no writer, nothing created, migrated or
    /// recovered, so it works on a folder this user cannot write. Writes fail `ReadOnly`.
    pub fn open_read_only(state_dir: &Path) -> Result<Storage, StorageError> {
        let path = state_dir.join(DB_FILE);
        let conn = open_read_only_conn(&path)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StorageError::NewerSchema {
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version < SCHEMA_VERSION {
            return Err(StorageError::ReadOnly(format!(
                "{} needs an upgrade (schema {version} to {SCHEMA_VERSION}), which needs write access",
                path.display()
            )));
        }
        Ok(Storage {
            inner: Arc::new(Inner {
                path,
                writer: None,
                readers: Mutex::new(vec![conn]),
                read_only: true,
                // Nothing watches a read-only handle: its counter never moves.
                external: tokio::sync::watch::channel(0).1,
            }),
        })
    }

    /// Ticks whenever another process has committed to this database (checked about four
    /// times a second while idle, and before every batch).
    pub fn external_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.external.clone()
    }

    /// Whether this handle was opened read-only.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Like `write`, for callers outside an async runtime (benchmarks, start-up tools).
    /// Panics if called from inside a tokio runtime thread: use `write(..).await` there.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn write_blocking<R, F>(&self, op: F) -> Result<R, StorageError>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        self.submit(op)
            .0
            .blocking_recv()
            .unwrap_or(Err(StorageError::WriterGone))
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Run `op` in the writer's next transaction; resolves after that transaction commits.
    /// `op` may run more than once (the batch is replayed if another job in it fails); only
    /// its last run's changes and result count, so it must not consume what it captures.
    pub async fn write<R, F>(&self, op: F) -> Result<R, StorageError>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        self.submit(op).committed().await
    }

    /// Queue `op` now and wait for its commit later. The writer commits in submission order,
    /// so anything submitted after this can never be durable while this is not: a caller
    /// may act on what it wrote (e.g. hand a reply to the next step) before the commit.
    pub fn submit<R, F>(&self, op: F) -> Pending<R>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        match &self.inner.writer {
            Some(writer) => Pending(writer.submit(op)),
            None => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let _ = tx.send(Err(StorageError::ReadOnly(format!(
                    "{} was opened for reading only",
                    self.inner.path.display()
                ))));
                Pending(rx)
            }
        }
    }

    /// Run a read on a pooled connection. Reads see the last committed state (WAL snapshot).
    pub fn read<R>(
        &self,
        op: impl FnOnce(&Connection) -> Result<R, StorageError>,
    ) -> Result<R, StorageError> {
        let pooled = self
            .inner
            .readers
            .lock()
            .map_err(|_| StorageError::Sqlite("reader pool poisoned".into()))?
            .pop();
        let conn = match pooled {
            Some(c) => c,
            None if self.inner.read_only => open_read_only_conn(&self.inner.path)?,
            None => open_conn(&self.inner.path)?,
        };
        let began = std::time::Instant::now();
        let result = op(&conn);
        metrics::histogram!("switchboard_store_read_seconds").record(began.elapsed().as_secs_f64());
        // A connection left inside a transaction or with a statement still stepping would
        // pin its snapshot, and no checkpoint could pass it: such a one is closed, not kept.
        if !conn.is_autocommit() || conn.is_busy() {
            tracing::warn!("a read left its snapshot open; closing that connection");
            return result;
        }
        if let Ok(mut pool) = self.inner.readers.lock()
            && pool.len() < 8
        {
            pool.push(conn);
        }
        result
    }
}

/// The write-ahead log beside a database file.
fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn open_conn(path: &Path) -> Result<Connection, StorageError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
    schema::retry_busy(|| schema::configure(&conn)).map_err(|e| match e {
        StorageError::Sqlite(message) => StorageError::Open {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    })?;
    Ok(conn)
}

/// A connection that never writes. Without the WAL's shared-memory file (removed when the
/// last writer closed cleanly) and without the right to create it, SQLite cannot coordinate
/// with writers; nobody can write such a folder then, so it is read as immutable.
pub(crate) fn open_read_only_conn(path: &Path) -> Result<Connection, StorageError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    if !path.exists() {
        return Err(StorageError::Open {
            path: path.to_path_buf(),
            message: "there is no database here yet".into(),
        });
    }
    let try_open = |target: &str| -> Result<Connection, StorageError> {
        let conn = Connection::open_with_flags(target, flags).map_err(|e| open_error(path, e))?;
        schema::configure_read_only(&conn)?;
        // Reading the schema now surfaces a WAL that cannot be opened.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(conn)
    };
    let plain = path.to_string_lossy().into_owned();
    match try_open(&plain) {
        Ok(conn) => Ok(conn),
        Err(first) => {
            let shm = {
                let mut name = path.as_os_str().to_owned();
                name.push("-shm");
                PathBuf::from(name)
            };
            if shm.exists() || wal_path(path).exists() {
                return Err(first);
            }
            let uri = format!("file:{}?immutable=1", uri_path(path));
            try_open(&uri).map_err(|_| first)
        }
    }
}

/// `path` percent-encoded for a `file:` URI.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for b in path.to_string_lossy().bytes() {
        match b {
            b'?' | b'#' | b'%' => out.push_str(&format!("%{b:02X}")),
            _ => out.push(b as char),
        }
    }
    out
}

/// An open failure by kind: a file SQLite cannot open in a folder this user cannot write
/// is a read-only folder, not a broken database.
fn open_error(path: &Path, e: rusqlite::Error) -> StorageError {
    let classified = StorageError::from(e);
    match classified {
        StorageError::Sqlite(message) => {
            let folder = path.parent().unwrap_or(Path::new("."));
            if !writable(folder) {
                StorageError::ReadOnly(format!("{}: {message}", path.display()))
            } else {
                StorageError::Open {
                    path: path.to_path_buf(),
                    message,
                }
            }
        }
        other => other,
    }
}

/// Whether this process may create files in `dir` (the effective user, as the kernel sees
/// it, including a read-only mount).
#[cfg(unix)]
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(not(unix))]
fn writable(dir: &Path) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| !m.permissions().readonly())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(storage: &Storage, name: &'static str) {
        storage
            .write_blocking(move |c| {
                c.execute("INSERT INTO meta (name, value) VALUES (?1, 'x')", [name])?;
                Ok(())
            })
            .expect("write");
    }

    #[test]
    fn a_read_that_leaves_its_transaction_open_does_not_pin_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = Storage::open(dir.path()).expect("open");
        put(&storage, "a");
        // A careless read: a transaction begun and never finished.
        storage
            .read(|c| {
                c.execute_batch("BEGIN")?;
                c.query_row("SELECT count(*) FROM meta", [], |_| Ok(()))?;
                Ok(())
            })
            .expect("read");
        put(&storage, "b");
        let other = Connection::open(storage.path()).expect("other");
        let (log, copied): (i64, i64) = other
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(1)?, r.get(2)?))
            })
            .expect("checkpoint");
        assert_eq!(copied, log, "no reader holds an old snapshot");
        let n: i64 = storage
            .read(|c| Ok(c.query_row("SELECT count(*) FROM meta", [], |r| r.get(0))?))
            .expect("read");
        assert!(n >= 2);
    }

    #[test]
    fn a_long_lived_writer_keeps_the_log_under_the_bound_while_a_reader_is_open() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = Storage::open(dir.path()).expect("open");
        let wal = wal_path(storage.path());
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (db, stop) = (storage.path().to_path_buf(), stop.clone());
            std::thread::spawn(move || {
                let conn = Connection::open(db).expect("reader");
                while !stop.load(Ordering::Relaxed) {
                    let _: i64 = conn
                        .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
                        .expect("read");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        };
        // 80 MB in 80 jobs: far fewer than the 1,000 jobs between routine checkpoints.
        let mut peak = 0;
        for i in 0..80 {
            storage
                .write_blocking(move |c| {
                    c.execute(
                        "INSERT INTO meta (name, value) VALUES (?1, zeroblob(1000000))",
                        [format!("blob{i}")],
                    )?;
                    Ok(())
                })
                .expect("write");
            peak = peak.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().expect("reader thread");
        assert!(peak < 64 * 1024 * 1024, "the log reached {peak} bytes");
    }
}
