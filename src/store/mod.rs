//! The engine's storage seam: `Store`, the operations the engine performs on its state, one
//! transaction each, with domain types in and out (docs/ARCHITECTURE.md, "Storage").
//! Nothing here knows which database holds the data; `crate::store_sqlite` is one store.

mod error;
mod types;

pub use error::{StoreError, StoreErrorKind};
pub use types::{NewLine, PageFilter, StoredSession, TranscriptRow};

use async_trait::async_trait;
use serde_json::Value;

use crate::engine::key::SessionKey;

/// An edit of a stored session, applied inside the store's transaction so a concurrent
/// change cannot be lost between read and write. It may run more than once (a store may
/// replay a transaction); only its last run counts. `Err` refuses the edit with a message.
pub type SessionEdit = Box<dyn FnMut(&mut StoredSession) -> Result<(), String> + Send>;

/// What the engine stores, as named operations. Every write is one transaction, and writes
/// commit in the order they were submitted (a caller may act on a write it has submitted
/// before awaiting it); reads see the last committed state and never run on the async
/// workers (a store blocks elsewhere: a blocking pool, a reader task, a network client).
#[async_trait]
pub trait Store: Send + Sync {
    /// Where the data lives, as a user would name it (a database file's path): for messages
    /// and for the `sessionFile` a session reports.
    fn location(&self) -> String;

    /// Ticks whenever another process (or node) has committed to this store, so front ends
    /// can refresh. A store that cannot tell never ticks.
    fn external_changes(&self) -> tokio::sync::watch::Receiver<u64>;

    // ---- sessions ----

    /// How many sessions exist (every kind, archived included).
    async fn count_sessions(&self) -> Result<u64, StoreError>;

    async fn get_session(&self, key: &SessionKey) -> Result<Option<StoredSession>, StoreError>;

    /// The keys whose entry has this `sessionId` (normally one).
    async fn keys_by_session_id(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError>;

    /// The keys whose entry has this label.
    async fn keys_by_label(&self, label: &str) -> Result<Vec<SessionKey>, StoreError>;

    /// The sessions `key` spawned.
    async fn children_of(&self, key: &SessionKey) -> Result<Vec<SessionKey>, StoreError>;

    /// The keys of `limit` sessions from position `offset` of the owner's order (newest
    /// first, or by name), narrowed by `filter`, and how many match in all when `count`.
    /// Must not cost more than the page (an index walk): pages run 100,000 rows deep.
    async fn page_session_keys(
        &self,
        filter: PageFilter,
        offset: usize,
        limit: usize,
        count: bool,
    ) -> Result<(Vec<SessionKey>, Option<u64>), StoreError>;

    /// Store `session` with `header` as its transcript's first line (seq 0), unless its key
    /// exists already. Returns the stored session and whether this call created it.
    async fn create_session(
        &self,
        session: StoredSession,
        header: Value,
    ) -> Result<(StoredSession, bool), StoreError>;

    /// Read, edit and write a session in one transaction. `NotFound` when it does not
    /// exist, `Rejected` (with the edit's message) when the edit refuses.
    async fn update_session(
        &self,
        key: &SessionKey,
        edit: SessionEdit,
    ) -> Result<StoredSession, StoreError>;

    /// Delete a session and its transcript; whether it existed.
    async fn delete_session(&self, key: &SessionKey) -> Result<bool, StoreError>;

    // ---- transcripts ----

    /// The newest `limit` lines of a transcript, oldest first (tool lines only when asked).
    async fn transcript_tail(
        &self,
        session_id: &str,
        limit: usize,
        include_tools: bool,
    ) -> Result<Vec<TranscriptRow>, StoreError>;

    /// A page of a transcript: the `limit` lines before `before` (or the newest), oldest
    /// first, and the transcript's newest `seq`, both from one snapshot.
    async fn transcript_page(
        &self,
        session_id: &str,
        before: Option<i64>,
        limit: usize,
        include_tools: bool,
    ) -> Result<(Vec<TranscriptRow>, i64), StoreError>;

    /// Each transcript's last message line (`None`: it has none), in the order asked.
    async fn last_messages(
        &self,
        session_ids: Vec<String>,
    ) -> Result<Vec<Option<TranscriptRow>>, StoreError>;

    /// The lines after `seq`, oldest first, tool lines included, at most `limit`.
    async fn transcript_after(
        &self,
        session_id: &str,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<TranscriptRow>, StoreError>;

    /// The newest `seq` of a transcript (0: none).
    async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError>;

    /// The first message line of a transcript, as stored (a spawn's task message).
    async fn first_message_line(&self, session_id: &str) -> Result<Option<String>, StoreError>;
}
