//! What went wrong talking to PostgreSQL, mapped onto `StoreErrorKind` by what the user can
//! do about it: a server that cannot be reached is `Unavailable` with a message naming it and
//! saying to retry later; a lock or serialization conflict is `Busy`; the rest by SQLSTATE.

use switchboard_store::{StoreError, StoreErrorKind};
use tokio_postgres::error::SqlState;

/// A failure of this store, before it becomes a `StoreError`.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("PostgreSQL at {at}: {}", describe(source))]
    Db {
        at: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(
        "PostgreSQL at {at} cannot be reached ({detail}); check that the server runs and \
         accepts connections there, then retry"
    )]
    Unreachable { at: String, detail: String },
    #[error(
        "the database at {at} was written by a newer Switchboard (schema {found}; this build \
         knows up to {known}); upgrade switchboard or point --store at another database"
    )]
    NewerSchema { at: String, found: i64, known: i64 },
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
    #[error("no session found: {0}")]
    NoSession(String),
    #[error("{0}")]
    Rejected(String),
    #[error("the PostgreSQL store has stopped")]
    Stopped,
    #[error(
        "this node ({0}) lost its lease on the database (it was paused or cut off past the \
         lease, and another node took over its runs); its writes for them are refused"
    )]
    Fenced(String),
    /// A driver error not yet placed (`locate` names the server).
    #[error("PostgreSQL: {}", describe(.0))]
    Driver(#[from] tokio_postgres::Error),
}

impl PgError {
    /// Name the server in a driver error (the boundary of every operation does this).
    pub fn locate(self, at: &str) -> PgError {
        match self {
            PgError::Driver(e) => PgError::from_driver(at, e),
            other => other,
        }
    }

    /// A driver error from the server at `at`: a broken or refused connection reads as
    /// unreachable, anything the server answered keeps its SQLSTATE.
    pub fn from_driver(at: &str, e: tokio_postgres::Error) -> PgError {
        if e.as_db_error().is_none() && (e.is_closed() || is_io(&e)) {
            return PgError::Unreachable {
                at: at.to_string(),
                detail: e.to_string(),
            };
        }
        PgError::Db {
            at: at.to_string(),
            source: e,
        }
    }

    /// A pool failure (no connection within the wait, or the connection's own error).
    pub fn from_pool(at: &str, e: deadpool_postgres::PoolError) -> PgError {
        match e {
            deadpool_postgres::PoolError::Backend(e) => PgError::from_driver(at, e),
            other => PgError::Unreachable {
                at: at.to_string(),
                detail: other.to_string(),
            },
        }
    }
}

/// The driver's error in words: for an error the server answered, its message, SQLSTATE
/// and detail (the driver's own text is only "db error").
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(&format!("; {detail}"));
            }
            text
        }
        None => e.to_string(),
    }
}

/// Whether the driver failed on the socket (refused, reset, timed out).
fn is_io(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    // The driver's own connect timeout has no io source.
    e.to_string().contains("timed out")
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> StoreError {
        let kind = match &e {
            PgError::Db { source, .. } => match source.code() {
                Some(c) if *c == SqlState::DISK_FULL || *c == SqlState::OUT_OF_MEMORY => {
                    StoreErrorKind::Full
                }
                Some(c)
                    if *c == SqlState::READ_ONLY_SQL_TRANSACTION
                        || *c == SqlState::INSUFFICIENT_PRIVILEGE =>
                {
                    StoreErrorKind::ReadOnly
                }
                Some(c)
                    if *c == SqlState::T_R_SERIALIZATION_FAILURE
                        || *c == SqlState::T_R_DEADLOCK_DETECTED
                        || *c == SqlState::LOCK_NOT_AVAILABLE
                        || *c == SqlState::TOO_MANY_CONNECTIONS =>
                {
                    StoreErrorKind::Busy
                }
                Some(c) if *c == SqlState::DATA_CORRUPTED || *c == SqlState::INDEX_CORRUPTED => {
                    StoreErrorKind::Corrupt
                }
                Some(c)
                    if *c == SqlState::ADMIN_SHUTDOWN
                        || *c == SqlState::CRASH_SHUTDOWN
                        || *c == SqlState::CANNOT_CONNECT_NOW
                        || c.code().starts_with("08") =>
                {
                    StoreErrorKind::Unavailable
                }
                _ => StoreErrorKind::Backend,
            },
            PgError::Unreachable { .. } | PgError::Stopped => StoreErrorKind::Unavailable,
            PgError::Driver(_) => StoreErrorKind::Backend,
            PgError::NewerSchema { .. } => StoreErrorKind::NewerSchema,
            PgError::Corrupt(_) => StoreErrorKind::Corrupt,
            PgError::NoSession(_) => StoreErrorKind::NotFound,
            PgError::Rejected(_) => StoreErrorKind::Rejected,
            PgError::Fenced(_) => StoreErrorKind::Fenced,
        };
        StoreError::new(kind, e.to_string())
    }
}
