//! What importing and exporting OpenClaw state stores: raw transcript lines, the per-session
//! import marks, and the writes of an import (chunks staged, the session row last) and of a
//! merge. The merge rules live in the engine (`transfer/merge.rs`); these are its writes.

use serde_json::Value;
use sha2::{Digest, Sha256};

use switchboard_types::key::SessionKey;

use crate::StoredSession;

/// A transcript line as an import stores it and an export reads it: its text exactly as
/// written, with the columns the store indexes. Built from a parsed line (`from_value`) or
/// by the import's own encoder, which gives the same text and columns without a `Value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLine {
    /// The line's compact JSON text (serde_json's encoding, fields in source order).
    pub text: String,
    /// Its `type`, or `unknown` when that is not a string.
    pub kind: String,
    /// Its `id`, or "" when that is not a string.
    pub id: String,
    /// Its `message.role`, when that is a string; `notice::NOTICE_ROLE` for a shown notice
    /// (`notice::row_role`).
    pub role: Option<String>,
}

impl RawLine {
    pub fn from_value(line: &Value) -> RawLine {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let kind = text(line.get("type")).unwrap_or_else(|| "unknown".into());
        let notice = crate::notice::notice_shown(
            line.get("display") == Some(&Value::Bool(true)),
            line.get("customType").and_then(Value::as_str),
        );
        let role = line
            .get("message")
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str);
        RawLine {
            text: line.to_string(),
            role: crate::notice::row_role(&kind, role, notice),
            kind,
            id: text(line.get("id")).unwrap_or_default(),
        }
    }
}

/// A line's identity for merging: its `id` when it has one, else the SHA-256 of its text.
/// The store answers `Store::line_identities` with it, so a store need not ship the text.
pub fn line_identity(id: &str, text: &str) -> String {
    if id.is_empty() {
        format!("sha:{}", sha_hex(text.as_bytes()))
    } else {
        format!("id:{id}")
    }
}

/// Lowercase hex SHA-256 (identities and entry hashes).
pub fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the last import of one session saw and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportMark {
    pub session_key: String,
    pub session_id: String,
    /// The transcript file read (canonical path), or "" when the source had none.
    pub source_file: String,
    /// Its size and modification time then (-1 when there was none): the re-import shortcut.
    pub source_size: i64,
    pub source_mtime_ns: i64,
    /// Hash of the source's entry as read (`sessionFile` dropped).
    pub source_entry_hash: String,
    /// Hash of the stored entry right after that import; another value now means the entry
    /// was changed here since.
    pub entry_hash: String,
    /// Seq of the last stored line that came from (or is also in) the source; stored lines
    /// after it that the source lacks were written here.
    pub last_seq: i64,
}

/// The last write of a new session's import: its last lines, the session row and its mark,
/// committed together after every earlier chunk (`Store::submit_import_chunk`) has.
#[derive(Debug, Clone)]
pub struct NewImport {
    pub session: StoredSession,
    /// Seq of `lines[0]`.
    pub first_seq: i64,
    /// No chunk went before: rows left under this session id by a cut-short import are
    /// cleared first.
    pub clean: bool,
    pub lines: Vec<RawLine>,
    pub mark: ImportMark,
}

/// How a new session's import ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportOutcome {
    Imported,
    /// Its key was created here meanwhile: nothing written (the next import merges it).
    KeyExists,
    /// Another session here took its session id meanwhile: nothing written.
    IdTaken(SessionKey),
}

/// The last write of a merge into a known session: the lines staged under `staging_id`
/// plus `lines` move to the end of the transcript, the entry is replaced when given, and the
/// mark is written; all only when the session is still `session_id` and its transcript still
/// ends at `first_seq - 1` (else nothing changes but the staged rows being dropped).
#[derive(Debug, Clone)]
pub struct MergeCommit {
    pub key: SessionKey,
    pub session_id: String,
    pub staging_id: String,
    /// Lines staged so far (`lines` go in after them).
    pub staged: i64,
    /// Nothing was staged yet: clear the staging id first.
    pub clean: bool,
    pub lines: Vec<RawLine>,
    pub first_seq: i64,
    pub entry: Option<StoredSession>,
    pub mark: ImportMark,
}

/// OpenClaw's ISO-8601 line timestamp (`2026-11-22T13:29:11.116Z`).
pub fn iso_timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
