//! Reading OpenClaw's own per-agent SQLite databases (`agents/<id>/agent/openclaw-agent.sqlite`)
//! is a SOURCE of an import, not a store: the engine reads it through `OpenClawDbs` and
//! `AgentDbSource`, implemented by `switchboard_store_sqlite::openclaw_source`, so the engine
//! names no SQLite. The rows come back as these plain types.

use std::path::Path;
use std::time::Duration;

/// The per-agent database file name. The gateway's lock files beside it
/// (`openclaw-agent.sqlite.generation-lock.sqlite` …) end in `.sqlite` too and are not read.
pub const AGENT_DB_FILE: &str = "openclaw-agent.sqlite";

/// The newest per-agent schema this reader knows (OpenClaw 2026.9.6).
pub const KNOWN_SCHEMA: i64 = 23;

/// How long to wait for a writer's lock (only a rollback-journal database blocks readers).
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The longest one read of an agent database may take by default (`ReadBudget`). The reads
/// are indexed and paged, so a real database answers each in well under a second; two
/// minutes leaves room for a huge one on a slow disk and still ends a hostile one.
pub const READ_DEADLINE: Duration = Duration::from_secs(120);

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
    #[error(
        "its table {table} has no column {column}: not an OpenClaw agent database of a known version"
    )]
    MissingColumn {
        table: &'static str,
        column: &'static str,
    },
    #[error(
        "its {name} is a {kind}, not a table: a {kind} runs a query of the file's choosing (an endless one too), so it is not read; an OpenClaw agent database has a plain table there"
    )]
    NotATable { name: &'static str, kind: String },
    #[error(
        "its table {table} computes column {column} on read (a generated column), so it is not read; an OpenClaw agent database stores it"
    )]
    GeneratedColumn {
        table: &'static str,
        column: &'static str,
    },
    #[error(
        "a read took over {secs} s and was stopped (a damaged or crafted file?); nothing of it was imported",
        secs = .0.as_secs()
    )]
    TooSlow(Duration),
    #[error("cannot copy it for reading: {0}")]
    Copy(std::io::Error),
    #[error("cannot read it: {0}")]
    Sqlite(String),
    #[error(
        "this program was built without a reader for OpenClaw's SQLite state; import a legacy sessions.json folder instead"
    )]
    NoReader,
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

/// Opens OpenClaw agent databases (given to the engine by the composition root).
pub trait OpenClawDbs: Send + Sync {
    /// Open `path` read-only, check its schema and start a snapshot; each read (the checks
    /// included) is stopped after `read_deadline` (`READ_DEADLINE` by default).
    fn open(
        &self,
        path: &Path,
        read_deadline: Duration,
    ) -> Result<Box<dyn AgentDbSource>, OpenClawDbError>;
}

/// An open, checked agent database inside one read snapshot.
pub trait AgentDbSource: Send + Sync {
    /// The schema version found (`PRAGMA user_version`).
    fn schema_version(&self) -> i64;

    /// Whether it was read from a temporary copy (a WAL database without `-shm`).
    fn copied(&self) -> bool;

    /// Every session node, by key.
    fn nodes(&self) -> Result<Vec<NodeRow>, OpenClawDbError>;

    /// Up to `limit` events of transcript `session_id` with `seq > after`, in seq order.
    /// An `event_json` over `max_bytes` comes back as `TooLong`, unfetched.
    fn events(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<EventRow>, OpenClawDbError>;

    /// How many events transcript `session_id` holds and the highest rowid among them,
    /// read without its text (the re-import's shortcut).
    fn transcript_stamp(&self, session_id: &str) -> Result<TranscriptStamp, OpenClawDbError>;

    /// Transcripts of `session_key` other than `current` that still hold events.
    fn earlier_transcripts(
        &self,
        session_key: &str,
        current: &str,
    ) -> Result<usize, OpenClawDbError>;
}
