//! `StoreError`: a storage failure by kind (what the caller and the user can do about it)
//! with the message that says it, and nothing of the database that produced it.

/// What went wrong, by what the caller can do about it. A store maps its own failures onto
/// these; the engine and front ends only ever look at the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The thing named does not exist (a session patched after it was deleted).
    NotFound,
    /// The operation refused the change (a patch whose check failed, an export stopped).
    Rejected,
    /// Another process holds the store past the wait (SQLite's busy timeout).
    Busy,
    /// This process may not write: a read-only folder or mount, or a read-only open.
    ReadOnly,
    /// The data was written by a newer Switchboard than this one.
    NewerSchema,
    /// No space left: the change was not saved.
    Full,
    /// The stored data is damaged.
    Corrupt,
    /// The state folder or the store's files could not be created or opened.
    Io,
    /// The store cannot be reached or has stopped (its writer is gone, a server is down).
    Unavailable,
    /// This node lost its lease (it was paused or cut off past its expiry, and another node
    /// took over its runs): its writes for those runs are refused so two owners never write.
    Fenced,
    /// Any other failure of the store's backend.
    Backend,
}

/// A storage failure: its kind and the message a user reads (which says what to do).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
}

impl StoreError {
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> StoreError {
        StoreError {
            kind,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// An operation refused the change; `message` is shown as it is.
    pub fn rejected(message: impl Into<String>) -> StoreError {
        StoreError::new(StoreErrorKind::Rejected, message)
    }

    /// The store stopped under a caller (its writer, its connection).
    pub fn unavailable(message: impl Into<String>) -> StoreError {
        StoreError::new(StoreErrorKind::Unavailable, message)
    }

    /// A store answered something it must not (an append that returned no row).
    pub fn corrupt(detail: impl std::fmt::Display) -> StoreError {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("stored data is damaged: {detail}"),
        )
    }

    /// No session under `key`.
    pub fn no_session(key: impl std::fmt::Display) -> StoreError {
        StoreError::new(StoreErrorKind::NotFound, format!("no session found: {key}"))
    }

    /// Whether the failure is the lack of write access (a read-only open may still work).
    pub fn is_read_only(&self) -> bool {
        self.kind == StoreErrorKind::ReadOnly
    }
}

/// What an API caller learns of a storage failure: its kind as the wire names it (a subset:
/// what a front end can act on), and the message.
impl From<StoreError> for switchboard_types::api::ApiError {
    fn from(e: StoreError) -> switchboard_types::api::ApiError {
        use switchboard_types::api::StorageKind;
        let kind = match e.kind() {
            StoreErrorKind::Busy => StorageKind::Busy,
            StoreErrorKind::Full => StorageKind::DiskFull,
            StoreErrorKind::ReadOnly => StorageKind::ReadOnly,
            StoreErrorKind::Corrupt => StorageKind::Corrupt,
            StoreErrorKind::NewerSchema => StorageKind::NewerSchema,
            StoreErrorKind::NotFound
            | StoreErrorKind::Rejected
            | StoreErrorKind::Io
            | StoreErrorKind::Unavailable
            | StoreErrorKind::Fenced
            | StoreErrorKind::Backend => StorageKind::Other,
        };
        switchboard_types::api::ApiError::Storage {
            kind,
            message: e.to_string(),
        }
    }
}
