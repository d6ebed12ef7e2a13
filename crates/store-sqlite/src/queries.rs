//! SQL for sessions and transcript lines: the writes the writer runs inside its transaction,
//! and the reads (session pages newest first, transcript tails, id and label lookups).

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use super::error::StorageError;
use super::tail_cache::{self, Tail};
pub use switchboard_store::{
    NewLine, PageFilter, Revision, RevisionRow, RevisionsPageRead, SessionScan, SessionsPageRead,
    StoredSession, TranscriptRow,
};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, SessionKind};

fn kind_from_str(s: &str) -> SessionKind {
    SessionKind::parse(s).unwrap_or(SessionKind::Other)
}

const SESSION_COLS: &str = "key, agent_id, kind, updated_at, entry";

/// A session row as read: key, agent id, kind, updated_at, entry JSON.
type RawSession = (String, String, String, i64, String);

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<RawSession> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn decode_session(raw: RawSession) -> Result<StoredSession, StorageError> {
    decode(raw, Read::Whole)
}

/// How much of an entry a read decodes.
#[derive(Clone, Copy)]
enum Read {
    /// Every field: what writes, exports and the engine's own work read.
    Whole,
    /// A view's fields only (`SessionEntry::view_from_str`): rows and names. Never written
    /// back: every write re-reads the entry whole inside its transaction.
    View,
}

fn decode(
    (key, agent_id, kind, updated_at, entry): RawSession,
    read: Read,
) -> Result<StoredSession, StorageError> {
    let entry = match read {
        Read::Whole => serde_json::from_str(&entry),
        Read::View => SessionEntry::view_from_str(&entry),
    };
    let mut entry = entry.map_err(|e| StorageError::Corrupt(format!("session {key}: {e}")))?;
    // The column is authoritative: appends bump it without rewriting the entry JSON.
    entry.updated_at = updated_at;
    Ok(StoredSession {
        key: SessionKey::from_canonical(key),
        agent_id,
        kind: kind_from_str(&kind),
        entry,
    })
}

pub use switchboard_store::line::name_key;

/// Redo `name_key` for the rows whose entry has an `origin` block (the shown name may now be
/// its label, `SessionEntry::origin_label`), after the migration that made it so.
pub fn refill_origin_names(conn: &Connection) -> Result<(), StorageError> {
    refill_where(conn, "entry LIKE '%\"origin\"%'")
}

/// Redo `name_key` for the rows whose name has a character SQL's `lower()` leaves alone
/// (anything outside printable ASCII), after the migration that fills the column in SQL.
pub fn refill_name_keys(conn: &Connection) -> Result<(), StorageError> {
    refill_where(conn, "name_key GLOB '*[^ -~]*'")
}

/// Redo `name_key` in Rust for the sessions rows matching `filter` (an SQL condition).
fn refill_where(conn: &Connection, filter: &str) -> Result<(), StorageError> {
    let mut rows = Vec::new();
    {
        let mut stmt = conn.prepare(&format!("SELECT key, entry FROM sessions WHERE {filter}"))?;
        let mut q = stmt.query([])?;
        while let Some(r) = q.next()? {
            rows.push((r.get::<_, String>(0)?, r.get::<_, String>(1)?));
        }
    }
    let mut update = conn.prepare("UPDATE sessions SET name_key = ?2 WHERE key = ?1")?;
    for (key, entry) in rows {
        // An entry that does not decode keeps the SQL value; it fails when read, as before.
        if let Ok(entry) = serde_json::from_str::<SessionEntry>(&entry) {
            let name = name_key(&SessionKey::from_canonical(key.clone()), &entry);
            update.execute(params![key, name])?;
        }
    }
    Ok(())
}

/// A brand-new session and its transcript's header line (seq 0), in the caller's
/// transaction.
pub fn insert_session(
    conn: &Connection,
    s: &StoredSession,
    header: &Value,
) -> Result<(), StorageError> {
    put_session(conn, s)?;
    put_raw_lines(conn, &s.entry.session_id, 0, std::slice::from_ref(header))
}

/// Insert or replace a session row (the writer's upsert).
pub fn put_session(conn: &Connection, s: &StoredSession) -> Result<(), StorageError> {
    tail_cache::invalidate();
    let entry = serde_json::to_string(&s.entry)
        .map_err(|e| StorageError::Corrupt(format!("cannot encode entry: {e}")))?;
    let channel = s
        .entry
        .channel
        .as_deref()
        .or(s.entry.effective_last_channel());
    let mut stmt = conn.prepare_cached(
        "INSERT INTO sessions (key, session_id, agent_id, kind, channel, updated_at, label, spawned_by, entry, archived_at, name_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT(key) DO UPDATE SET session_id = excluded.session_id, agent_id = excluded.agent_id,
           kind = excluded.kind, channel = excluded.channel, updated_at = excluded.updated_at,
           label = excluded.label, spawned_by = excluded.spawned_by, entry = excluded.entry,
           archived_at = excluded.archived_at, name_key = excluded.name_key",
    )?;
    stmt.execute(params![
        s.key.as_str(),
        s.entry.session_id,
        s.agent_id,
        s.kind.as_str(),
        channel,
        s.entry.updated_at,
        s.entry.label,
        s.entry.spawned_by,
        entry,
        s.entry.archived_at,
        name_key(&s.key, &s.entry)
    ])?;
    Ok(())
}

pub fn delete_session(conn: &Connection, key: &SessionKey) -> Result<bool, StorageError> {
    tail_cache::invalidate();
    let Some(s) = get_session(conn, key)? else {
        return Ok(false);
    };
    conn.prepare_cached("DELETE FROM transcript WHERE session_id = ?1")?
        .execute([&s.entry.session_id])?;
    conn.prepare_cached("DELETE FROM sessions WHERE key = ?1")?
        .execute([key.as_str()])?;
    Ok(true)
}

pub fn get_session(
    conn: &Connection,
    key: &SessionKey,
) -> Result<Option<StoredSession>, StorageError> {
    read_session(conn, key, Read::Whole)
}

/// `get_session` read as a view (`Read::View`).
pub fn view_session(
    conn: &Connection,
    key: &SessionKey,
) -> Result<Option<StoredSession>, StorageError> {
    read_session(conn, key, Read::View)
}

fn read_session(
    conn: &Connection,
    key: &SessionKey,
    read: Read,
) -> Result<Option<StoredSession>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLS} FROM sessions WHERE key = ?1"
    ))?;
    let raw = stmt
        .query_row([key.as_str()], session_from_row)
        .optional()?;
    raw.map(|r| decode(r, read)).transpose()
}

/// Whether `key` exists: one primary-key probe, the entry neither read nor decoded (a key
/// resolution asks this for every gateway request that names a session; decoding a large
/// entry only to drop it was 11 % of a `chat.history` call).
pub fn session_exists(conn: &Connection, key: &SessionKey) -> Result<bool, StorageError> {
    let found = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE key = ?1")?
        .query_row([key.as_str()], |_| Ok(()))
        .optional()?;
    Ok(found.is_some())
}

/// The session id column of `key`'s row: the entry is neither read nor decoded.
pub fn session_id_of(conn: &Connection, key: &SessionKey) -> Result<Option<String>, StorageError> {
    Ok(conn
        .prepare_cached("SELECT session_id FROM sessions WHERE key = ?1")?
        .query_row([key.as_str()], |r| r.get(0))
        .optional()?)
}

/// Keys whose session id is `id` (0 or 1; the index is unique).
pub fn keys_by_session_id(conn: &Connection, id: &str) -> Result<Vec<SessionKey>, StorageError> {
    let mut stmt = conn.prepare_cached("SELECT key FROM sessions WHERE session_id = ?1")?;
    let keys = stmt
        .query_map([id], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(keys.into_iter().map(SessionKey::from_canonical).collect())
}

pub fn keys_by_label(conn: &Connection, label: &str) -> Result<Vec<SessionKey>, StorageError> {
    let mut stmt = conn.prepare_cached("SELECT key FROM sessions WHERE label = ?1 ORDER BY key")?;
    let keys = stmt
        .query_map([label], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(keys.into_iter().map(SessionKey::from_canonical).collect())
}

/// Direct children: sessions whose `spawnedBy` is `parent`.
pub fn children_of(
    conn: &Connection,
    parent: &SessionKey,
) -> Result<Vec<SessionKey>, StorageError> {
    let mut stmt = conn.prepare_cached("SELECT key FROM sessions WHERE spawned_by = ?1")?;
    let keys = stmt
        .query_map([parent.as_str()], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(keys.into_iter().map(SessionKey::from_canonical).collect())
}

/// Every session, the reserved keys and archived ones included. From the counters (schema
/// 5): each row is in exactly one of them, and summing a few rows costs the same at any
/// size, where `count(*)` walks a whole index (every page reports this total).
pub fn count_sessions(conn: &Connection) -> Result<u64, StorageError> {
    let n: i64 = conn
        .prepare_cached("SELECT coalesce(sum(n), 0) FROM session_counts")?
        .query_row([], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// One page of the owner's sessions list, read in one snapshot (so a write from another
/// process in between cannot make its parts disagree): `limit` sessions from position
/// `offset` of the newest-first order (or the name order, `by_name`), how many match in all
/// (when asked), how many exist, and each row's last message (with `previews`).
///
/// The walk reads only covering index entries and keeps their rowids, so a page 100,000
/// rows deep costs one index walk; then only the page's rows are read, by rowid (no second
/// descent of the key index per row).
pub fn page_sessions(
    c: &Connection,
    filter: &PageFilter,
    offset: usize,
    limit: usize,
    count: bool,
    previews: bool,
) -> Result<SessionsPageRead, StorageError> {
    let c = rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Deferred)?;
    let matching = count.then(|| matching_sessions(&c, filter)).transpose()?;
    let ids = page_ids(&c, filter, offset, limit)?;
    let rows = sessions_by_rowid(&c, &ids)?;
    let last = if previews {
        let ids: Vec<String> = rows.iter().map(|s| s.entry.session_id.clone()).collect();
        last_messages(&c, &ids)?
    } else {
        Vec::new()
    };
    let total = count_sessions(&c)?;
    c.commit()?;
    Ok(SessionsPageRead {
        rows,
        matching,
        total,
        last,
    })
}

/// The row ids of a page of the owner's sessions, in its order (`page_sessions`'s walk).
fn page_ids(
    c: &Connection,
    filter: &PageFilter,
    offset: usize,
    limit: usize,
) -> Result<Vec<i64>, StorageError> {
    let kind = filter.kind.map(|k| k.as_str());
    let (since, archived, global) = (filter.updated_since, filter.archived, filter.show_global);
    let sql = if filter.by_name {
        name_page_sql(kind.is_some(), since.is_some())
    } else {
        ACTIVITY_PAGE_SQL.to_string()
    };
    Ok(c.prepare_cached(&sql)?
        .query_map(
            params![kind, since, archived, global, limit as i64, offset as i64],
            |r| r.get::<_, i64>(0),
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?)
}

/// `page_sessions` as keys and revisions: the same walk and counts, no entry read.
pub fn page_revisions(
    c: &Connection,
    filter: &PageFilter,
    offset: usize,
    limit: usize,
    count: bool,
) -> Result<RevisionsPageRead, StorageError> {
    let c = rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Deferred)?;
    let matching = count.then(|| matching_sessions(&c, filter)).transpose()?;
    let ids = page_ids(&c, filter, offset, limit)?;
    let ids = serde_json::to_string(&ids)
        .map_err(|e| StorageError::Corrupt(format!("cannot encode row ids: {e}")))?;
    let rows = c
        .prepare_cached(
            "SELECT s.key, s.agent_id, s.rev, s.updated_at FROM json_each(?1) AS j \
             JOIN sessions AS s ON s.rowid = j.value ORDER BY j.key",
        )?
        .query_map([ids], |r| {
            Ok(RevisionRow {
                key: SessionKey::from_canonical(r.get::<_, String>(0)?),
                agent_id: r.get(1)?,
                revision: Revision {
                    rev: r.get(2)?,
                    updated_at: r.get(3)?,
                },
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let total = count_sessions(&c)?;
    c.commit()?;
    Ok(RevisionsPageRead {
        rows,
        matching,
        total,
    })
}

/// The sessions named that exist, in the order named, as views, each with its revision.
pub fn sessions_by_key(
    c: &Connection,
    keys: &[SessionKey],
) -> Result<Vec<(StoredSession, Revision)>, StorageError> {
    let keys = serde_json::to_string(&keys.iter().map(SessionKey::as_str).collect::<Vec<_>>())
        .map_err(|e| StorageError::Corrupt(format!("cannot encode keys: {e}")))?;
    let mut stmt = c.prepare_cached(
        "SELECT s.key, s.agent_id, s.kind, s.updated_at, s.entry, s.rev FROM json_each(?1) AS j \
         JOIN sessions AS s ON s.key = j.value ORDER BY j.key",
    )?;
    let raw = stmt
        .query_map([keys], |r| Ok((session_from_row(r)?, r.get::<_, i64>(5)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    raw.into_iter()
        .map(|(row, rev)| {
            let updated_at = row.3;
            Ok((decode(row, Read::View)?, Revision { rev, updated_at }))
        })
        .collect()
}

/// The activity-ordered walk of `page_sessions`.
const ACTIVITY_PAGE_SQL: &str = "SELECT rowid FROM sessions \
    WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR updated_at >= ?2) \
    AND (?3 OR archived_at IS NULL) AND key != 'unknown' AND (?4 OR key != 'global') \
    ORDER BY updated_at DESC, key LIMIT ?5 OFFSET ?6";

/// The filters of the owner's page that every count can take from the covering indexes.
const PAGE_FILTERS: &str = "(?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR updated_at >= ?2)";

/// How many sessions the owner's page filter matches.
fn matching_sessions(c: &Connection, filter: &PageFilter) -> Result<u64, StorageError> {
    // Archived is the entry's `archivedAt`, copied to the `archived_at` column by every write
    // (the engine's archive timer and imported entries alike), so this is the same rule the
    // rows' `archived` field and the text path apply.
    let kind = filter.kind.map(|k| k.as_str());
    let (since, archived, global) = (filter.updated_since, filter.archived, filter.show_global);
    if since.is_none() {
        // Kept by triggers (schema 5), so the total sums a few counter rows whatever the
        // number of sessions; the same rules as the walk, applied to the counters.
        let n: i64 = c
            .prepare_cached(
                "SELECT coalesce(sum(n), 0) FROM session_counts \
                 WHERE (?1 IS NULL OR kind = ?1) AND (?2 OR archived = 0) \
                 AND slot != 'unknown' AND (?3 OR slot != 'global')",
            )?
            .query_row(params![kind, archived, global], |r| r.get(0))?;
        return Ok(n.max(0) as u64);
    }
    // With `updated_since`, counted over the range of the index, proportional to the rows
    // that match. Counted on the filters the covering indexes hold, then less what is
    // hidden: the archived rows that match (a walk of the small partial index
    // `sessions_archived`) and the reserved keys (two primary-key lookups). A condition on
    // `key` or `archived_at` in the count itself would make SQLite read every row instead
    // of counting index entries (at 100,000 sessions: 44 ms against 6 ms).
    let all: i64 = c
        .prepare_cached(&format!(
            "SELECT count(*) FROM sessions WHERE {PAGE_FILTERS}"
        ))?
        .query_row(params![kind, since], |r| r.get(0))?;
    let archived_rows: i64 = if archived {
        0
    } else {
        c.prepare_cached(&format!(
            "SELECT count(*) FROM sessions WHERE {PAGE_FILTERS} AND archived_at IS NOT NULL"
        ))?
        .query_row(params![kind, since], |r| r.get(0))?
    };
    let reserved: i64 = c
        .prepare_cached(&format!(
            "SELECT count(*) FROM sessions WHERE {PAGE_FILTERS} AND (?3 OR archived_at IS NULL) \
             AND (key = 'unknown' OR (NOT ?4 AND key = 'global'))"
        ))?
        .query_row(params![kind, since, archived, global], |r| r.get(0))?;
    Ok((all - archived_rows - reserved).max(0) as u64)
}

/// The sessions of `ids` (rowids), in that order, in one statement; a row gone meanwhile is
/// left out.
fn sessions_by_rowid(c: &Connection, ids: &[i64]) -> Result<Vec<StoredSession>, StorageError> {
    let ids = serde_json::to_string(ids)
        .map_err(|e| StorageError::Corrupt(format!("cannot encode row ids: {e}")))?;
    let mut stmt = c.prepare_cached(
        "SELECT s.key, s.agent_id, s.kind, s.updated_at, s.entry FROM json_each(?1) AS j \
         JOIN sessions AS s ON s.rowid = j.value ORDER BY j.key",
    )?;
    let raw = stmt
        .query_map([ids], session_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // A page is rows to show: its entries are read as views.
    raw.into_iter().map(|r| decode(r, Read::View)).collect()
}

/// The name-ordered walk of `page_sessions` (same parameters), for a kind filter or not and a
/// time filter or not.
fn name_page_sql(kind: bool, since: bool) -> String {
    // The kind as a plain equality (when there is one), so the planner walks the covering
    // index that starts with it; `?1 IS NULL` keeps the parameter numbering.
    let kind_cond = if kind { "kind = ?1" } else { "?1 IS NULL" };
    // With a time filter, the activity range (what matches) is read and sorted: the name
    // indexes do not hold `updated_at`, and walking one would read every row it passes
    // (100,000 for a page at the end).
    let (from, since_cond) = match (since, kind) {
        (false, _) => ("sessions", "?2 IS NULL"),
        (true, false) => (
            "sessions INDEXED BY sessions_by_updated",
            "updated_at >= ?2",
        ),
        (true, true) => ("sessions INDEXED BY sessions_by_kind", "updated_at >= ?2"),
    };
    format!(
        "SELECT rowid FROM {from} WHERE {kind_cond} AND {since_cond} \
         AND (?3 OR archived_at IS NULL) AND key != 'unknown' AND (?4 OR key != 'global') \
         ORDER BY name_key, key LIMIT ?5 OFFSET ?6"
    )
}

/// The rows history shows: message lines, and OpenClaw's shown notices (`custom_message`
/// lines with `display: true`, whose rows have role `custom`: `switchboard_store::notice`).
/// A literal, so statements stay `&'static str` for the statement cache.
macro_rules! shown_lines {
    () => {
        "(type = 'message' OR role = 'custom')"
    };
}

/// `transcript_before`'s statements, with tool results and without.
const BEFORE_WITH_TOOLS_SQL: &str = concat!(
    "SELECT seq, entry_id, line FROM transcript WHERE session_id = ?1 AND ",
    shown_lines!(),
    " AND seq < ?3 ORDER BY seq DESC LIMIT ?2"
);
const BEFORE_WITHOUT_TOOLS_SQL: &str = concat!(
    "SELECT seq, entry_id, line FROM transcript WHERE session_id = ?1 AND ",
    shown_lines!(),
    " AND seq < ?3 AND (role IS NULL OR role NOT IN ('toolResult', 'tool')) \
     ORDER BY seq DESC LIMIT ?2"
);

const BYTES_WITH_TOOLS_SQL: &str = concat!(
    "SELECT coalesce(sum(octet_length(line)), 0) FROM (SELECT line FROM transcript \
     WHERE session_id = ?1 AND ",
    shown_lines!(),
    " AND seq < ?3 ORDER BY seq DESC LIMIT ?2)"
);
const BYTES_WITHOUT_TOOLS_SQL: &str = concat!(
    "SELECT coalesce(sum(octet_length(line)), 0) FROM (SELECT line FROM transcript \
     WHERE session_id = ?1 AND ",
    shown_lines!(),
    " AND seq < ?3 AND (role IS NULL OR role NOT IN ('toolResult', 'tool')) \
     ORDER BY seq DESC LIMIT ?2)"
);

/// The last `limit` lines history shows (`shown_lines`) before sequence number `before`
/// (oldest first).
pub fn transcript_before(
    conn: &Connection,
    session_id: &str,
    before: i64,
    limit: usize,
    include_tools: bool,
) -> Result<Vec<TranscriptRow>, StorageError> {
    let sql = if include_tools {
        BEFORE_WITH_TOOLS_SQL
    } else {
        BEFORE_WITHOUT_TOOLS_SQL
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt
        .query_map(params![session_id, limit as i64, before], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.reverse();
    parsed(rows)
}

/// The stored size in bytes of the lines `transcript_before` would read with the same
/// arguments (sizes from the record headers: no line is read).
pub fn transcript_bytes(
    conn: &Connection,
    session_id: &str,
    before: i64,
    limit: usize,
    include_tools: bool,
) -> Result<u64, StorageError> {
    let sql = if include_tools {
        BYTES_WITH_TOOLS_SQL
    } else {
        BYTES_WITHOUT_TOOLS_SQL
    };
    let bytes: i64 = conn
        .prepare_cached(sql)?
        .query_row(params![session_id, limit as i64, before], |r| r.get(0))?;
    Ok(u64::try_from(bytes).unwrap_or(0))
}

/// The last message line other than a tool result of each of `session_ids` (`None` for one
/// with none), in one statement: a page's previews are one read, not one statement run per
/// row (SQLite re-prepared that statement at every run: 17 % of a 400-row page's time in a
/// profile, and 20 ms of previews for a page of 400).
pub fn last_messages(
    conn: &Connection,
    session_ids: &[String],
) -> Result<Vec<Option<TranscriptRow>>, StorageError> {
    let ids = serde_json::to_string(session_ids)
        .map_err(|e| StorageError::Corrupt(format!("cannot encode session ids: {e}")))?;
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT j.key, t.seq, t.entry_id, t.line FROM json_each(?1) AS j
         JOIN transcript AS t ON t.session_id = j.value AND t.seq = (
             SELECT seq FROM transcript WHERE session_id = j.value AND ",
        shown_lines!(),
        " AND (role IS NULL OR role NOT IN ('toolResult', 'tool')) ORDER BY seq DESC LIMIT 1)"
    ))?;
    let found = stmt
        .query_map([ids], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                (
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ),
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut out: Vec<Option<TranscriptRow>> = vec![None; session_ids.len()];
    for (at, row) in found {
        if let Some(slot) = usize::try_from(at).ok().and_then(|i| out.get_mut(i)) {
            *slot = parsed(vec![row])?.pop();
        }
    }
    Ok(out)
}

/// The message lines of a session after `after` (oldest first, tool lines included), at
/// most `limit`.
pub fn transcript_after(
    conn: &Connection,
    session_id: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<TranscriptRow>, StorageError> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT seq, entry_id, line FROM transcript WHERE session_id = ?1 AND ",
        shown_lines!(),
        " AND seq > ?2 ORDER BY seq LIMIT ?3"
    ))?;
    let rows = stmt
        .query_map(params![session_id, after, limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    parsed(rows)
}

/// `(seq, entry_id, line text)` rows as transcript rows, each line parsed.
fn parsed(rows: Vec<(i64, String, String)>) -> Result<Vec<TranscriptRow>, StorageError> {
    rows.into_iter()
        .map(|(seq, entry_id, text)| {
            let line = serde_json::from_str(&text)
                .map_err(|e| StorageError::Corrupt(format!("transcript line {seq}: {e}")))?;
            Ok(TranscriptRow {
                seq,
                entry_id,
                line,
            })
        })
        .collect()
}

/// The newest sequence number of a session's transcript (0: none).
pub fn last_seq(conn: &Connection, session_id: &str) -> Result<i64, StorageError> {
    Ok(conn
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM transcript WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))?)
}

/// Stream sessions newest first (or in the name order) through `visit` until it returns
/// false. With a kinds filter, newest first, one index range scan per kind is merged, so
/// each step costs O(log n) whatever the mix; the name order walks its index and filters as
/// it decodes (its callers decode every row they pass anyway: text filters).
pub fn scan_sessions(
    conn: &Connection,
    scan: &SessionScan,
    mut visit: impl FnMut(StoredSession) -> bool,
) -> Result<(), StorageError> {
    if let Some(root) = &scan.tree_of {
        // A tree is small (a session and its direct children): fetch and sort in memory.
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE key = ?1 OR spawned_by = ?1"
        ))?;
        let mut rows = stmt
            .query_map([root.as_str()], session_from_row)?
            .map(|r| decode_session(r?))
            .collect::<Result<Vec<_>, StorageError>>()?;
        if scan.by_name {
            rows.sort_by_cached_key(|s| (name_key(&s.key, &s.entry), s.key.as_str().to_string()));
        } else {
            rows.sort_by(|a, b| {
                b.updated_at()
                    .cmp(&a.updated_at())
                    .then_with(|| a.key.as_str().cmp(b.key.as_str()))
            });
        }
        for s in rows {
            if !keep(scan, &s) {
                continue;
            }
            if !visit(s) {
                break;
            }
        }
        return Ok(());
    }
    if scan.by_name {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {SESSION_COLS} FROM sessions ORDER BY name_key, key"
        ))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let s = decode_session(session_from_row(r)?)?;
            if keep(scan, &s) && !visit(s) {
                break;
            }
        }
        return Ok(());
    }
    let since = scan.updated_since.unwrap_or(i64::MIN);
    let kinds: Vec<Option<SessionKind>> = match &scan.kinds {
        Some(k) => k.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut stmts = Vec::with_capacity(kinds.len());
    for kind in &kinds {
        let sql = match (kind, &scan.agent_id) {
            (Some(_), Some(_)) => format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE agent_id = ?1 AND kind = ?2 AND updated_at >= ?3 ORDER BY updated_at DESC, key"
            ),
            (None, Some(_)) => format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE agent_id = ?1 AND updated_at >= ?3 AND ?2 IS NOT NULL ORDER BY updated_at DESC, key"
            ),
            (Some(_), None) => format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE kind = ?2 AND updated_at >= ?3 AND ?1 IS NOT NULL ORDER BY updated_at DESC, key"
            ),
            (None, None) => format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE updated_at >= ?3 AND ?1 IS NOT NULL AND ?2 IS NOT NULL ORDER BY updated_at DESC, key"
            ),
        };
        stmts.push(conn.prepare_cached(&sql)?);
    }
    let agent = scan.agent_id.clone().unwrap_or_default();
    let mut cursors = Vec::with_capacity(stmts.len());
    for (stmt, kind) in stmts.iter_mut().zip(&kinds) {
        let kind = kind.map(|k| k.as_str()).unwrap_or("");
        cursors.push(stmt.query(params![agent, kind, since])?);
    }
    let mut heads: Vec<Option<RawSession>> = Vec::new();
    for c in cursors.iter_mut() {
        heads.push(c.next()?.map(session_from_row).transpose()?);
    }
    loop {
        // Pick the newest head (ties broken by key so the order is stable).
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            if let Some(h) = h {
                let better = match best.and_then(|b| heads[b].as_ref()) {
                    None => true,
                    Some(b) => h.3 > b.3 || (h.3 == b.3 && h.0 < b.0),
                };
                if better {
                    best = Some(i);
                }
            }
        }
        let Some(i) = best else { break };
        let next = cursors[i].next()?.map(session_from_row).transpose()?;
        let Some(raw) = std::mem::replace(&mut heads[i], next) else {
            break;
        };
        let s = decode_session(raw)?;
        if !visit(s) {
            break;
        }
    }
    Ok(())
}

fn keep(scan: &SessionScan, s: &StoredSession) -> bool {
    if let Some(kinds) = &scan.kinds
        && !kinds.contains(&s.kind)
    {
        return false;
    }
    if let Some(agent) = &scan.agent_id
        && &s.agent_id != agent
    {
        return false;
    }
    scan.updated_since.is_none_or(|t| s.updated_at() >= t)
}

pub use switchboard_store::line::{Placed, PreparedLine, finish_rows};

/// Append lines to a session's transcript, chaining `parentId` to the last entry and bumping
/// the session's `updated_at`. Runs inside the writer's transaction, so `seq` stays dense
/// even with another process appending to the same session.
pub fn append_lines(
    conn: &Connection,
    key: &SessionKey,
    lines: &[NewLine],
    now_ms: i64,
) -> Result<(String, Vec<TranscriptRow>), StorageError> {
    let prepared: Vec<PreparedLine> = lines
        .iter()
        .map(|l| PreparedLine::new(l.clone(), now_ms))
        .collect();
    let (session_id, placed) = append_prepared(conn, key, &prepared, now_ms)?;
    Ok((session_id, finish_rows(prepared, placed)))
}

/// The writer's half of an append: number the lines, link them, insert them.
pub fn append_prepared(
    conn: &Connection,
    key: &SessionKey,
    lines: &[PreparedLine],
    now_ms: i64,
) -> Result<(String, Placed), StorageError> {
    let Tail {
        session_id,
        mut seq,
        mut parent,
        updated_at,
    } = match tail_cache::get(key.as_str()) {
        Some(tail) => tail,
        None => read_tail(conn, key)?,
    };
    let mut insert = conn.prepare_cached(
        "INSERT INTO transcript (session_id, seq, entry_id, type, role, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        seq += 1;
        let text = l.text(parent.as_deref());
        insert.execute(params![session_id, seq, l.id, l.kind, l.role, text])?;
        out.push((seq, parent.replace(l.id.clone())));
    }
    // Within a burst most appends share the millisecond; skipping the no-op update saves
    // rewriting the row and its three updated_at indexes on every append, and the memo
    // saves even looking.
    if updated_at < now_ms {
        conn.prepare_cached(
            "UPDATE sessions SET updated_at = ?2 WHERE key = ?1 AND updated_at < ?2",
        )?
        .execute(params![key.as_str(), now_ms])?;
    }
    tail_cache::put(
        key.as_str(),
        Tail {
            session_id: session_id.clone(),
            seq,
            parent,
            // Now at least `now_ms`, whether this call raised it or it already was.
            updated_at: updated_at.max(now_ms),
        },
    );
    Ok((session_id, out))
}

/// Append one message to the session stored under `key` (canonical), outside the writer's
/// memo (recovery, before the writer starts). A session deleted since gets nothing: false.
pub fn append_message_if_present(
    conn: &Connection,
    key: &str,
    message: Value,
    now_ms: i64,
) -> Result<bool, StorageError> {
    let key = SessionKey::from_canonical(key.to_string());
    if get_session(conn, &key)?.is_none() {
        return Ok(false);
    }
    let line = PreparedLine::new(NewLine::message(message), now_ms);
    append_prepared(conn, &key, &[line], now_ms)?;
    Ok(true)
}

/// Add a run's token usage to the session's counters (`inputTokens`, `outputTokens`,
/// `totalTokens`), inside the writer's transaction.
pub fn add_tokens(
    conn: &Connection,
    key: &SessionKey,
    input: u64,
    output: u64,
) -> Result<(), StorageError> {
    let Some(mut s) = get_session(conn, key)? else {
        return Err(StorageError::NoSession(key.to_string()));
    };
    let e = &mut s.entry;
    // Saturating: counters reported by a backend must not be able to panic the writer.
    let i = e.input_tokens.unwrap_or(0).saturating_add(input);
    let o = e.output_tokens.unwrap_or(0).saturating_add(output);
    e.input_tokens = Some(i);
    e.output_tokens = Some(o);
    e.total_tokens = Some(i.saturating_add(o));
    put_session(conn, &s)
}

/// A session's id and the end of its transcript, read from the database.
fn read_tail(conn: &Connection, key: &SessionKey) -> Result<Tail, StorageError> {
    let session_id: String = conn
        .prepare_cached("SELECT session_id FROM sessions WHERE key = ?1")?
        .query_row([key.as_str()], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StorageError::NoSession(key.to_string()))?;
    let last: Option<(i64, String, String)> = conn
        .prepare_cached(
            "SELECT seq, entry_id, type FROM transcript WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([&session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (seq, parent) = match last {
        // Imported lines may lack an id; they cannot be a parent.
        Some((seq, id, ty)) if ty != "session" && !id.is_empty() => (seq, Some(id)),
        Some((seq, _, _)) => (seq, None),
        None => (0, None),
    };
    Ok(Tail {
        session_id,
        seq,
        parent,
        updated_at: i64::MIN,
    })
}

pub use switchboard_store::{RawLine, iso_timestamp};

/// Store raw lines exactly as given (import), numbering them from `first_seq`.
pub fn put_raw_lines(
    conn: &Connection,
    session_id: &str,
    first_seq: i64,
    lines: &[Value],
) -> Result<(), StorageError> {
    let lines: Vec<RawLine> = lines.iter().map(RawLine::from_value).collect();
    put_lines(conn, session_id, first_seq, &lines)
}

/// Store lines already encoded (import), numbering them from `first_seq`.
pub fn put_lines(
    conn: &Connection,
    session_id: &str,
    first_seq: i64,
    lines: &[RawLine],
) -> Result<(), StorageError> {
    tail_cache::invalidate();
    let mut insert = conn.prepare_cached(
        "INSERT OR REPLACE INTO transcript (session_id, seq, entry_id, type, role, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (i, line) in lines.iter().enumerate() {
        insert.execute(params![
            session_id,
            first_seq + i as i64,
            line.id,
            line.kind,
            line.role,
            line.text
        ])?;
    }
    Ok(())
}

/// The last `limit` message lines (oldest first), optionally without `toolResult` messages.
/// An index range scan from the end: cost and memory depend on `limit`, not on the length.
pub fn transcript_tail(
    conn: &Connection,
    session_id: &str,
    limit: usize,
    include_tools: bool,
) -> Result<Vec<TranscriptRow>, StorageError> {
    // `seq < i64::MAX` is the same index range scan from the end.
    transcript_before(conn, session_id, i64::MAX, limit, include_tools)
}

/// Every stored line of a session, in order, as raw JSON text (export).
pub fn transcript_lines(
    conn: &Connection,
    session_id: &str,
    mut visit: impl FnMut(&str) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let mut stmt =
        conn.prepare_cached("SELECT line FROM transcript WHERE session_id = ?1 ORDER BY seq")?;
    let mut rows = stmt.query([session_id])?;
    while let Some(row) = rows.next()? {
        let text: String = row.get(0)?;
        visit(&text)?;
    }
    Ok(())
}

/// The first message line of a session's transcript (the header and other entries before it
/// are passed over inside the index range), without reading the rest.
pub fn first_message_line(
    conn: &Connection,
    session_id: &str,
) -> Result<Option<String>, StorageError> {
    Ok(conn
        .prepare_cached(
            "SELECT line FROM transcript WHERE session_id = ?1 AND type = 'message' \
             ORDER BY seq LIMIT 1",
        )?
        .query_row([session_id], |r| r.get::<_, String>(0))
        .optional()?)
}

/// A transcript's line count (the benches check their setup with it).
#[cfg(feature = "internals")]
pub fn transcript_len(conn: &Connection, session_id: &str) -> Result<u64, StorageError> {
    Ok(conn
        .prepare_cached(
            "SELECT count(*) FROM transcript WHERE session_id = ?1 AND type = 'message'",
        )?
        .query_row([session_id], |r| r.get::<_, i64>(0))? as u64)
}

/// Kinds are stored for indexing but depend on `session.mainKey` and `session.scope`; when
/// those change between runs, reclassify every row once (recorded in `meta`).
pub fn reclassify_if_needed(
    conn: &Connection,
    scheme: &switchboard_types::key::KeyScheme,
) -> Result<(), StorageError> {
    let basis = format!("{}|{}", scheme.main_key, scheme.global_scope);
    let current: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE name = 'kind_basis'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    if current.as_deref() == Some(basis.as_str()) {
        return Ok(());
    }
    // IMMEDIATE, so another process's write meanwhile makes this wait, not fail.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let mut rows = Vec::new();
    {
        let mut stmt = tx.prepare("SELECT key, entry FROM sessions")?;
        let mut q = stmt.query([])?;
        while let Some(r) = q.next()? {
            rows.push((r.get::<_, String>(0)?, r.get::<_, String>(1)?));
        }
    }
    {
        let mut update = tx.prepare_cached("UPDATE sessions SET kind = ?2 WHERE key = ?1")?;
        for (key, entry) in rows {
            let chat_type = serde_json::from_str::<Value>(&entry).ok().and_then(|v| {
                v.get("chatType")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            let kind = scheme.kind(
                &SessionKey::from_canonical(key.clone()),
                chat_type.as_deref(),
            );
            update.execute(params![key, kind.as_str()])?;
        }
    }
    tx.execute(
        "INSERT INTO meta (name, value) VALUES ('kind_basis', ?1)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        [basis],
    )?;
    tx.commit()?;
    Ok(())
}

/// Delete transcript rows of `session_id` that no session row owns: what an import cut short
/// leaves behind (transfer.rs writes the session row last). Returns the number of rows removed.
pub fn delete_orphan_transcript(
    conn: &Connection,
    session_id: &str,
) -> Result<usize, StorageError> {
    tail_cache::invalidate();
    Ok(conn
        .prepare_cached(
            "DELETE FROM transcript WHERE session_id = ?1
             AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1)",
        )?
        .execute([session_id])?)
}

#[cfg(test)]
mod prepared_tests {
    use super::*;
    use serde_json::json;

    /// A name-ordered page without a time filter walks a covering index in order (no row
    /// read, no sort), so its cost is the index entries before it; with one, it reads the
    /// activity range and sorts only that.
    #[test]
    fn name_pages_walk_a_covering_index_or_the_activity_range() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let plan = |kind: bool, since: bool| -> String {
            let sql = format!("EXPLAIN QUERY PLAN {}", name_page_sql(kind, since));
            let mut stmt = conn.prepare(&sql).expect("prepare");
            let kind: Option<&str> = kind.then_some("group");
            let rows = stmt
                .query_map(params![kind, 0i64, false, false, 10i64, 0i64], |r| {
                    r.get::<_, String>(3)
                })
                .expect("plan")
                .collect::<Result<Vec<_>, _>>()
                .expect("plan rows");
            rows.join("; ")
        };
        assert_eq!(
            plan(false, false),
            "SCAN sessions USING COVERING INDEX sessions_by_name"
        );
        assert_eq!(
            plan(true, false),
            "SEARCH sessions USING COVERING INDEX sessions_by_kind_name (kind=?)"
        );
        assert!(plan(false, true).starts_with("SEARCH sessions USING INDEX sessions_by_updated"));
        assert!(plan(true, true).starts_with("SEARCH sessions USING INDEX sessions_by_kind"));
    }

    /// Existence is a probe of the key, not a read of the entry: a row whose entry cannot be
    /// decoded still exists (the full read says what is wrong with it), and a missing key
    /// does not. Before, the check decoded the whole entry and failed on such a row.
    #[test]
    fn existence_does_not_decode_the_entry() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        conn.execute(
            "INSERT INTO sessions (key, session_id, agent_id, kind, updated_at, entry) \
             VALUES ('agent:main:x', 'sid-x', 'main', 'other', 1, 'not json')",
            [],
        )
        .expect("insert");
        let key = SessionKey::from_canonical("agent:main:x");
        assert!(session_exists(&conn, &key).expect("probe"));
        assert!(get_session(&conn, &key).is_err(), "the full read decodes");
        let none = SessionKey::from_canonical("agent:main:none");
        assert!(!session_exists(&conn, &none).expect("probe"));
    }

    /// The size the store asks before reading a transcript page on the caller's thread is
    /// the size of exactly the lines that page reads: with tool results or without, before
    /// a point, and a line too large to read there counted whole.
    #[test]
    fn a_transcript_page_is_sized_as_it_will_be_read() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let big = "x".repeat(300 * 1024);
        let lines = [
            ("session", None, json!({"type": "session", "id": "sid-x"})),
            (
                "message",
                Some("user"),
                json!({"type": "message", "message": {"role": "user", "content": "hi"}}),
            ),
            (
                "message",
                Some("toolResult"),
                json!({"type": "message", "message": {"role": "toolResult", "content": big}}),
            ),
            (
                "message",
                Some("assistant"),
                json!({"type": "message", "message": {"role": "assistant", "content": "ok"}}),
            ),
        ];
        for (seq, (kind, role, line)) in lines.iter().enumerate() {
            conn.execute(
                "INSERT INTO transcript (session_id, seq, entry_id, type, role, line) \
                 VALUES ('sid-x', ?1, ?2, ?3, ?4, ?5)",
                params![seq as i64, format!("e{seq}"), kind, role, line.to_string()],
            )
            .expect("insert");
        }
        for tools in [true, false] {
            for (before, limit) in [(i64::MAX, 10), (i64::MAX, 1), (3, 10), (2, 1), (0, 10)] {
                let read: usize = transcript_before(&conn, "sid-x", before, limit, tools)
                    .expect("page")
                    .iter()
                    .map(|r| r.line.to_string().len())
                    .sum();
                let sized = transcript_bytes(&conn, "sid-x", before, limit, tools).expect("size");
                assert_eq!(
                    sized, read as u64,
                    "tools {tools}, before {before}, limit {limit}"
                );
            }
        }
        assert!(transcript_bytes(&conn, "sid-x", i64::MAX, 10, true).expect("size") > 300 * 1024);
        assert!(transcript_bytes(&conn, "sid-x", i64::MAX, 10, false).expect("size") < 1024);
    }

    /// Every write of a session's entry, by any statement, gives its row a revision never
    /// given before (deleting and re-creating a key included); an append moves only its
    /// `updated_at`. Pages read as revisions list the rows `page_sessions` lists.
    #[test]
    fn every_entry_write_gives_a_new_revision() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let session = |key: &str, label: &str| StoredSession {
            key: SessionKey::from_canonical(key.to_string()),
            agent_id: "main".into(),
            kind: SessionKind::Other,
            entry: SessionEntry {
                session_id: format!("sid-{key}"),
                updated_at: 5,
                label: Some(label.into()),
                ..SessionEntry::default()
            },
        };
        let rev_of = |conn: &Connection, key: &str| -> (i64, i64) {
            conn.query_row(
                "SELECT rev, updated_at FROM sessions WHERE key = ?1",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row")
        };
        let mut seen = std::collections::HashSet::new();
        let mut fresh = |rev: i64| assert!(seen.insert(rev), "revision {rev} given twice");
        put_session(&conn, &session("agent:main:a", "one")).expect("put");
        put_session(&conn, &session("agent:main:b", "one")).expect("put");
        fresh(rev_of(&conn, "agent:main:a").0);
        fresh(rev_of(&conn, "agent:main:b").0);
        // The same entry written again still counts as a write.
        put_session(&conn, &session("agent:main:a", "one")).expect("put");
        fresh(rev_of(&conn, "agent:main:a").0);
        put_session(&conn, &session("agent:main:a", "two")).expect("put");
        fresh(rev_of(&conn, "agent:main:a").0);
        // Another process's own SQL.
        conn.execute(
            "UPDATE sessions SET entry = json_set(entry, '$.label', 'three') WHERE key = 'agent:main:a'",
            [],
        )
        .expect("update");
        fresh(rev_of(&conn, "agent:main:a").0);
        // An append moves the activity time, not the revision.
        let (rev, at) = rev_of(&conn, "agent:main:a");
        conn.execute(
            "UPDATE sessions SET updated_at = 99 WHERE key = 'agent:main:a'",
            [],
        )
        .expect("bump");
        assert_eq!(rev_of(&conn, "agent:main:a"), (rev, 99));
        assert_ne!(at, 99);
        // The newest row deleted and made again does not get its old number back.
        let b = rev_of(&conn, "agent:main:b").0;
        conn.execute("DELETE FROM sessions WHERE key = 'agent:main:b'", [])
            .expect("delete");
        put_session(&conn, &session("agent:main:b", "one")).expect("put");
        assert!(rev_of(&conn, "agent:main:b").0 > b);
        fresh(rev_of(&conn, "agent:main:b").0);

        let filter = PageFilter::default();
        let page = page_sessions(&conn, &filter, 0, 10, true, false).expect("page");
        let revisions = page_revisions(&conn, &filter, 0, 10, true).expect("revisions");
        let keys = |rows: Vec<String>| rows;
        assert_eq!(
            keys(page.rows.iter().map(|s| s.key.to_string()).collect()),
            keys(revisions.rows.iter().map(|r| r.key.to_string()).collect())
        );
        assert_eq!(
            (revisions.matching, revisions.total),
            (page.matching, page.total)
        );
        let by_key = sessions_by_key(
            &conn,
            &[
                SessionKey::from_canonical("agent:main:b".to_string()),
                SessionKey::from_canonical("agent:main:gone".to_string()),
                SessionKey::from_canonical("agent:main:a".to_string()),
            ],
        )
        .expect("by key");
        let named: Vec<(String, i64)> = by_key
            .iter()
            .map(|(s, r)| (s.key.to_string(), r.rev))
            .collect();
        assert_eq!(
            named,
            [
                ("agent:main:b".to_string(), rev_of(&conn, "agent:main:b").0),
                ("agent:main:a".to_string(), rev_of(&conn, "agent:main:a").0),
            ]
        );
    }

    /// A page read again runs its statements as prepared (a bound LIMIT or key made SQLite
    /// prepare them anew on every call: `schema::plan_once`), and a page's rows are views:
    /// the typed fields and the view's own, nothing else of the entry.
    #[test]
    fn a_page_is_not_prepared_anew_and_its_rows_are_views() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let entry = json!({"sessionId": "sid-x", "updatedAt": 5, "label": "x",
            "origin": {"label": "pyclient"}, "skillsSnapshot": {"big": [1, 2, 3]}});
        conn.execute(
            "INSERT INTO sessions (key, session_id, agent_id, kind, updated_at, entry) \
             VALUES ('agent:main:x', 'sid-x', 'main', 'other', 5, ?1)",
            [entry.to_string()],
        )
        .expect("insert");
        super::super::schema::plan_once(&conn).expect("plans");
        let filter = PageFilter::default();
        for _ in 0..3 {
            let page = page_sessions(&conn, &filter, 0, 10, true, false).expect("page");
            assert_eq!(page.rows.len(), 1);
            let e = &page.rows[0].entry;
            assert_eq!(
                (e.label.as_deref(), e.origin_label()),
                (Some("x"), Some("pyclient"))
            );
            assert!(!e.extra.contains_key("skillsSnapshot"), "{:?}", e.extra);
        }
        let walk = conn.prepare_cached(ACTIVITY_PAGE_SQL).expect("cached");
        assert_eq!(walk.get_status(rusqlite::StatementStatus::RePrepare), 0);
        drop(walk);
        let mut prepared = 0;
        for (tools, sql) in [
            (true, BEFORE_WITH_TOOLS_SQL),
            (false, BEFORE_WITHOUT_TOOLS_SQL),
        ] {
            for _ in 0..3 {
                transcript_before(&conn, "sid-x", i64::MAX, 10, tools).expect("transcript");
            }
            let st = conn.prepare_cached(sql).expect("cached");
            prepared += st.get_status(rusqlite::StatementStatus::RePrepare);
        }
        assert_eq!(prepared, 0, "the transcript page is not prepared anew");
        // Every connection the store opens plans once.
        let dir = tempfile::tempdir().expect("dir");
        let opened = Connection::open(dir.path().join("s.db")).expect("open");
        super::super::schema::configure(&opened).expect("configure");
        let qpsg = rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG;
        assert!(opened.db_config(qpsg).expect("read"));
        let whole = get_session(&conn, &SessionKey::from_canonical("agent:main:x"))
            .expect("read")
            .expect("there");
        assert!(whole.entry.extra.contains_key("skillsSnapshot"));
    }

    #[test]
    fn spliced_text_is_the_value_with_its_parent_in_openclaw_field_order() {
        let line = NewLine::message(json!({"role": "user", "content": "hi \"there\""}));
        let p = PreparedLine::new(line, 1_795_353_349_734);
        for parent in [None, Some("ab12cd34")] {
            let text = p.text(parent);
            let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
            let mut expected = p.value.clone();
            expected["parentId"] = parent.map_or(Value::Null, |s| json!(s));
            assert_eq!(parsed, expected);
            assert_eq!(text, expected.to_string(), "same bytes, same key order");
        }
        let keys: Vec<&str> = p
            .value
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["type", "id", "parentId", "timestamp", "message"]);
        assert_eq!(p.value["timestamp"], "2026-11-22T13:15:49.734Z");
    }

    /// Each session's last message that is not a tool result, in the order asked, whatever
    /// the others hold: none at all, only a header, a tool result last, an unknown id.
    #[test]
    fn last_messages_skip_tool_results_and_keep_the_order_asked() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let line = |role: &str, text: &str| json!({"type": "message", "id": text, "message": {"role": role, "content": text}});
        put_raw_lines(&conn, "a", 0, &[json!({"type": "session", "id": "h"})]).expect("a");
        put_raw_lines(
            &conn,
            "b",
            1,
            &[
                line("user", "b1"),
                line("assistant", "b2"),
                line("toolResult", "b3"),
            ],
        )
        .expect("b");
        put_raw_lines(&conn, "c", 1, &[line("user", "c1")]).expect("c");
        let ids: Vec<String> = ["c", "a", "zz", "b", "c"].map(String::from).to_vec();
        let got: Vec<Option<(i64, String)>> = last_messages(&conn, &ids)
            .expect("read")
            .into_iter()
            .map(|r| r.map(|r| (r.seq, r.entry_id)))
            .collect();
        assert_eq!(
            got,
            [
                Some((1, "c1".to_string())),
                None,
                None,
                Some((2, "b2".to_string())),
                Some((1, "c1".to_string())),
            ]
        );
    }
}
