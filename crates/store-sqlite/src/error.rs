//! `StorageError`: what went wrong with the database, by what the user can do about it.

use std::path::{Path, PathBuf};

/// How long a connection waits for another process's lock before reporting the database
/// busy. Generous: a second process waits its turn rather than failing.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What went wrong, by what the user can do about it. The four storage conditions a user
/// meets (busy, disk full, read-only, damaged) keep their kind all the way to the caller,
/// each with a message that says what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    #[error("database error: {0}")]
    Sqlite(String),
    #[error(
        "the database was written by a newer Switchboard (schema {found}; this build knows up to {known}); upgrade switchboard or use another --state-dir"
    )]
    NewerSchema { found: i64, known: i64 },
    #[error("cannot create state folder {path}: {message}")]
    StateDir { path: PathBuf, message: String },
    #[error("cannot open database {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("cannot start the writer thread: {0}")]
    Thread(String),
    #[error("the database writer has stopped")]
    WriterGone,
    #[error(
        "the database is busy: another switchboard process kept it locked for over {secs} s ({0}); wait for that process to finish or stop it, then try again",
        secs = BUSY_TIMEOUT.as_secs()
    )]
    Locked(String),
    #[error(
        "the disk holding the state folder is full ({0}); the change was not saved. Free some space, then try again"
    )]
    DiskFull(String),
    #[error(
        "the state folder is read-only for this user ({0}); make it writable, or pass --state-dir with a folder you can write"
    )]
    ReadOnly(String),
    #[error(
        "stored data is damaged: {0}. Check it with `sqlite3 switchboard.db 'PRAGMA integrity_check'`; restore switchboard.db from a backup, or move it aside to start afresh"
    )]
    Corrupt(String),
    #[error("no session found: {0}")]
    NoSession(String),
    #[error("{0}")]
    Rejected(String),
}

impl From<rusqlite::Error> for StorageError {
    fn from(e: rusqlite::Error) -> StorageError {
        use rusqlite::ErrorCode as C;
        let detail = e.to_string();
        match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => StorageError::Locked(detail),
            Some(C::DiskFull) => StorageError::DiskFull(detail),
            Some(C::ReadOnly | C::PermissionDenied) => StorageError::ReadOnly(detail),
            Some(C::DatabaseCorrupt | C::NotADatabase) => StorageError::Corrupt(detail),
            _ => StorageError::Sqlite(detail),
        }
    }
}

impl StorageError {
    /// A file-system failure on `path`, by kind: a folder this user cannot write (or a
    /// read-only mount) and a full disk are told apart from other failures.
    pub fn io(path: &Path, e: std::io::Error) -> StorageError {
        use std::io::ErrorKind as K;
        let detail = format!("{}: {e}", path.display());
        match e.kind() {
            K::PermissionDenied | K::ReadOnlyFilesystem => StorageError::ReadOnly(detail),
            K::StorageFull => StorageError::DiskFull(detail),
            _ => StorageError::StateDir {
                path: path.to_path_buf(),
                message: e.to_string(),
            },
        }
    }

    /// Whether the failure is the lack of write access (a read-only open may still work).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StorageError::ReadOnly(_))
    }
}

/// At the `Store` seam a SQLite failure keeps its kind and its message, and loses SQLite.
impl From<StorageError> for switchboard_store::StoreError {
    fn from(e: StorageError) -> switchboard_store::StoreError {
        use switchboard_store::StoreErrorKind as K;
        let kind = match &e {
            StorageError::Sqlite(_) => K::Backend,
            StorageError::NewerSchema { .. } => K::NewerSchema,
            StorageError::StateDir { .. } | StorageError::Open { .. } => K::Io,
            StorageError::Thread(_) | StorageError::WriterGone => K::Unavailable,
            StorageError::Locked(_) => K::Busy,
            StorageError::DiskFull(_) => K::Full,
            StorageError::ReadOnly(_) => K::ReadOnly,
            StorageError::Corrupt(_) => K::Corrupt,
            StorageError::NoSession(_) => K::NotFound,
            StorageError::Rejected(_) => K::Rejected,
        };
        switchboard_store::StoreError::new(kind, e.to_string())
    }
}
