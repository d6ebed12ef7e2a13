//! `switchboard store check` on a state folder: SQLite's own integrity check, then the checks
//! every store answers (`switchboard_store::check`): the schema version against this build's,
//! transcript lines that belong to no session, transcripts whose seq is not dense from 0,
//! session counters that drifted, rows of deleted sessions, and the work recorded as still
//! running that the next start would recover. Read-only; safe while a gateway serves the
//! folder.

use std::path::Path;

use rusqlite::Connection;

use switchboard_store::check::{
    self as common, CheckReport, CountKey, Integrity, Leases, to_count,
};

use crate::error::StorageError;

/// Check `<state_dir>/switchboard.db`.
pub fn check(state_dir: &Path) -> Result<CheckReport, StorageError> {
    let path = state_dir.join(crate::DB_FILE);
    let conn = crate::open_read_only_conn(&path)?;
    let count = |sql: &str| -> Result<u64, StorageError> {
        let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
        Ok(to_count(n))
    };
    let mut integrity = Vec::new();
    {
        let mut stmt = conn.prepare("PRAGMA integrity_check(20)")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            integrity.push(row.get::<_, String>(0)?);
        }
    }
    let schema: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let (broken_seq, broken_seq_keys) = broken_seq(&conn)?;
    Ok(CheckReport {
        integrity: Integrity::Checked(integrity),
        schema,
        schema_known: crate::SCHEMA_VERSION,
        sessions: count(common::SQL_SESSIONS)?,
        lines: count(common::SQL_LINES)?,
        orphan_lines: count(common::SQL_ORPHAN_LINES)?,
        broken_seq,
        broken_seq_keys,
        count_drift: common::count_drift(
            counts(&conn, common::SQL_KEPT_COUNTS)?,
            counts(&conn, common::SQL_COUNTED)?,
        ),
        gone_runs: count(common::SQL_GONE_RUNS)?,
        gone_spawns: count(common::SQL_GONE_SPAWNS)?,
        gone_outbox: count(common::SQL_GONE_OUTBOX)?,
        running_runs: count(common::SQL_RUNNING_RUNS)?,
        running_exchanges: count(common::SQL_RUNNING_EXCHANGES)?,
        running_spawns: count(common::SQL_RUNNING_SPAWNS)?,
        leases: Leases::default(),
    })
}

/// How many sessions have a seq gap, and the first of them.
fn broken_seq(conn: &Connection) -> Result<(u64, Vec<String>), StorageError> {
    let mut stmt = conn.prepare(common::SQL_BROKEN_SEQ)?;
    let mut rows = stmt.query([])?;
    let (mut n, mut keys) = (0u64, Vec::new());
    while let Some(r) = rows.next()? {
        n += 1;
        if keys.len() < common::NAMED {
            keys.push(r.get::<_, String>(0)?);
        }
    }
    Ok((n, keys))
}

/// (kind, archived, slot) -> n rows of `sql`.
fn counts(conn: &Connection, sql: &str) -> Result<Vec<(CountKey, i64)>, StorageError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |r| {
        Ok((
            (
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)? != 0,
                r.get::<_, String>(2)?,
            ),
            r.get::<_, i64>(3)?,
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
