//! Owns the import bookkeeping: per session, what its last import saw (`ImportMark`), and
//! the SQL a merging import needs (the stored lines' identities, moving staged lines into
//! place). The merge rules themselves live in `engine/transfer/merge.rs`.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::StorageError;
use super::tail_cache;

pub use switchboard_store::ImportMark;

/// Every mark, by session key (one query: a re-import of 100,000 sessions looks each up).
pub fn all_marks(conn: &Connection) -> Result<HashMap<String, ImportMark>, StorageError> {
    let mut stmt = conn.prepare(
        "SELECT session_key, session_id, source_file, source_size, source_mtime_ns,
                source_entry_hash, entry_hash, last_seq FROM import_marks",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(ImportMark {
            session_key: r.get(0)?,
            session_id: r.get(1)?,
            source_file: r.get(2)?,
            source_size: r.get(3)?,
            source_mtime_ns: r.get(4)?,
            source_entry_hash: r.get(5)?,
            entry_hash: r.get(6)?,
            last_seq: r.get(7)?,
        })
    })?;
    let mut out = HashMap::new();
    for m in rows {
        let m = m?;
        out.insert(m.session_key.clone(), m);
    }
    Ok(out)
}

pub fn put_mark(conn: &Connection, m: &ImportMark) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO import_marks (session_key, session_id, source_file, source_size,
            source_mtime_ns, source_entry_hash, entry_hash, last_seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        m.session_key,
        m.session_id,
        m.source_file,
        m.source_size,
        m.source_mtime_ns,
        m.source_entry_hash,
        m.entry_hash,
        m.last_seq
    ])?;
    Ok(())
}

/// Visit every stored line of a session in seq order as `(seq, entry_id, line)`.
pub fn stored_lines(
    conn: &Connection,
    session_id: &str,
    mut visit: impl FnMut(i64, &str, &str),
) -> Result<(), StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, entry_id, line FROM transcript WHERE session_id = ?1 ORDER BY seq",
    )?;
    let mut rows = stmt.query([session_id])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let id: String = row.get(1)?;
        let line: String = row.get(2)?;
        visit(seq, &id, &line);
    }
    Ok(())
}

/// The newest seq of a session's transcript, or `None` when it has no lines.
pub fn max_seq(conn: &Connection, session_id: &str) -> Result<Option<i64>, StorageError> {
    Ok(conn
        .prepare_cached("SELECT max(seq) FROM transcript WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten())
}

/// Move the lines staged under `staging_id` (numbered from 0) to the end of `session_id`'s
/// transcript, from `first_seq` on. Returns how many moved.
pub fn move_staged(
    conn: &Connection,
    staging_id: &str,
    session_id: &str,
    first_seq: i64,
) -> Result<usize, StorageError> {
    tail_cache::invalidate();
    let moved = conn
        .prepare_cached(
            "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
             SELECT ?2, seq + ?3, entry_id, type, role, line FROM transcript
             WHERE session_id = ?1 ORDER BY seq",
        )?
        .execute(params![staging_id, session_id, first_seq])?;
    conn.prepare_cached("DELETE FROM transcript WHERE session_id = ?1")?
        .execute([staging_id])?;
    Ok(moved)
}
