//! How a transfer fails (`TransferError`) and why an import leaves something out
//! (`SkipReason`): the types the import, the export and their file helpers share.

use std::path::PathBuf;

use switchboard_store::StoreError;

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
    Storage(#[from] StoreError),
    #[error("no session found: {0}")]
    NoSession(String),
    #[error("cannot write the export: {0}")]
    Write(#[source] std::io::Error),
    #[error("{path} already exists (nothing was overwritten); pass --force to replace it")]
    WouldOverwrite { path: PathBuf },
    #[error("cannot export to {path}: {reason}")]
    UnsafeTarget { path: PathBuf, reason: String },
    #[error("{path} is {size} bytes, over the import's cap of {cap} bytes for this file")]
    TooLarge { path: PathBuf, size: u64, cap: u64 },
    #[error("cannot import {path}: {source}")]
    OpenClawDb {
        path: PathBuf,
        #[source]
        source: switchboard_store::openclaw::OpenClawDbError,
    },
    #[error("session {key} cannot be exported: {reason}")]
    Unexportable { key: String, reason: String },
}

/// Why something was left out of an import. Session reasons count sessions, file reasons
/// count files (a session whose transcript is refused is not imported), line reasons count
/// transcript lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    /// Session: its key cannot be made canonical.
    InvalidKey,
    /// Session: its `sessionId` cannot name a transcript file.
    InvalidId,
    /// Session: its entry does not decode.
    UnreadableEntry,
    /// Session: its `sessionId` already belongs to another key here.
    IdTaken,
    /// Session: its key is here with another `sessionId` (reset on one side).
    OtherSession,
    /// File: it resolves outside the imported folder.
    OutsideFolder,
    /// File: it is a symlink.
    Symlink,
    /// File: a folder, FIFO, device or socket.
    NotRegularFile,
    /// File: over `ImportLimits::max_transcript_bytes`.
    FileTooLarge,
    /// File: its name is not a usable path, or opening it failed (permissions …).
    UnreadableFile,
    /// Line: over `ImportLimits::max_line_bytes`.
    LineTooLong,
    /// Line: not UTF-8, not JSON, or not a JSON object.
    BadJson,
    /// Line: a `message` line whose `message` is not a `{role, content}` object.
    BadShape,
    /// Line: stored compressed (`event_zstd`) in an OpenClaw database; not decoded.
    CompressedLine,
    /// Session: its rows could not be read from an OpenClaw database (damaged part).
    UnreadableRows,
    /// Transcript: an earlier generation of a session in an OpenClaw database (before a
    /// reset or rollover); like the legacy `*.jsonl.reset.*` files, not imported.
    EarlierTranscript,
}

impl SkipReason {
    /// A phrase for `n` of them: "1 invalid session id", "3 lines too long".
    pub fn describe(self, n: usize) -> String {
        let (one, many) = match self {
            SkipReason::InvalidKey => ("unusable session key", "unusable session keys"),
            SkipReason::InvalidId => ("invalid session id", "invalid session ids"),
            SkipReason::UnreadableEntry => {
                ("unreadable session entry", "unreadable session entries")
            }
            SkipReason::IdTaken => (
                "session id already used by another key",
                "session ids already used by other keys",
            ),
            SkipReason::OtherSession => (
                "session whose key holds another session id here",
                "sessions whose keys hold other session ids here",
            ),
            SkipReason::OutsideFolder => ("file outside the folder", "files outside the folder"),
            SkipReason::Symlink => ("symlinked file", "symlinked files"),
            SkipReason::NotRegularFile => (
                "file that is not a regular file",
                "files that are not regular files",
            ),
            SkipReason::FileTooLarge => ("file over the size cap", "files over the size cap"),
            SkipReason::UnreadableFile => ("unreadable file", "unreadable files"),
            SkipReason::LineTooLong => ("line too long", "lines too long"),
            SkipReason::BadJson => ("line not a JSON object", "lines not JSON objects"),
            SkipReason::BadShape => (
                "message line of the wrong shape",
                "message lines of the wrong shape",
            ),
            SkipReason::CompressedLine => (
                "compressed line (event_zstd) not decoded",
                "compressed lines (event_zstd) not decoded",
            ),
            SkipReason::UnreadableRows => (
                "session with unreadable database rows",
                "sessions with unreadable database rows",
            ),
            SkipReason::EarlierTranscript => (
                "earlier transcript generation not imported",
                "earlier transcript generations not imported",
            ),
        };
        switchboard_types::words::count_as(n, one, many)
    }
}
