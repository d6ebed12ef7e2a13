//! The one place that touches the database: opening and migrating it, a pool of read
//! connections, and the single group-committing writer (DESIGN §3.4).

pub mod queries;
pub mod runlog;
mod schema;
mod tail_cache;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

pub use schema::SCHEMA_VERSION;
use writer::Writer;

/// The database file inside a state folder.
pub const DB_FILE: &str = "switchboard.db";

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "the database was written by a newer Switchboard (schema {found}; this build knows up to {known}); upgrade switchboard or use another --state-dir"
    )]
    NewerSchema { found: i64, known: i64 },
    #[error("cannot create state folder {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open database {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("cannot start the writer thread: {0}")]
    Thread(std::io::Error),
    #[error("the database writer has stopped")]
    WriterGone,
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
    #[error("no session found: {0}")]
    NoSession(String),
    #[error("{0}")]
    Rejected(String),
}

impl StorageError {
    /// A copy to hand each caller of a failed batch (rusqlite errors are not `Clone`).
    pub(crate) fn clone_for_caller(&self) -> StorageError {
        match self {
            StorageError::NewerSchema { found, known } => StorageError::NewerSchema {
                found: *found,
                known: *known,
            },
            StorageError::WriterGone => StorageError::WriterGone,
            StorageError::NoSession(s) => StorageError::NoSession(s.clone()),
            StorageError::Rejected(s) => StorageError::Rejected(s.clone()),
            other => StorageError::Corrupt(other.to_string()),
        }
    }
}

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
    writer: Writer,
    readers: Mutex<Vec<Connection>>,
}

impl Storage {
    /// Open (creating if needed) `<state_dir>/switchboard.db` and migrate it.
    pub fn open(state_dir: &Path) -> Result<Storage, StorageError> {
        Storage::open_prepared(state_dir, |_| Ok(()))
    }

    /// Open, migrate, then run `prepare` on the write connection before the writer starts
    /// (one-off fix-ups that must not block on the writer from inside an async runtime).
    pub fn open_prepared(
        state_dir: &Path,
        prepare: impl FnOnce(&Connection) -> Result<(), StorageError>,
    ) -> Result<Storage, StorageError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StorageError::StateDir {
            path: state_dir.to_path_buf(),
            source,
        })?;
        let path = state_dir.join(DB_FILE);
        let mut conn = open_conn(&path)?;
        schema::migrate(&mut conn)?;
        prepare(&conn)?;
        schema::configure_writer(&conn)?;
        let checkpointer = open_conn(&path)?;
        let writer = Writer::start(conn, Some(checkpointer))?;
        Ok(Storage {
            inner: Arc::new(Inner {
                path,
                writer,
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Like `write`, for callers outside an async runtime (benchmarks, start-up tools).
    /// Panics if called from inside a tokio runtime thread: use `write(..).await` there.
    pub fn write_blocking<R, F>(&self, op: F) -> Result<R, StorageError>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        self.inner
            .writer
            .submit(op)
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
        Pending(self.inner.writer.submit(op))
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
            .map_err(|_| StorageError::Corrupt("reader pool poisoned".into()))?
            .pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_conn(&self.inner.path)?,
        };
        let result = op(&conn);
        if let Ok(mut pool) = self.inner.readers.lock()
            && pool.len() < 8
        {
            pool.push(conn);
        }
        result
    }
}

fn open_conn(path: &Path) -> Result<Connection, StorageError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| StorageError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    schema::configure(&conn).map_err(|e| StorageError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(conn)
}
