//! `switchboard store check`: what an operator asks of a state folder before trusting it
//! (after a crash, a disk error, a copy): SQLite's own integrity check, the schema version
//! against this build's, transcript lines that belong to no session, and the work recorded as
//! still running (runs, exchanges, sub-agents) that the next start would recover. Read-only;
//! safe while a gateway serves the folder.

use std::path::Path;

use rusqlite::Connection;

use crate::error::StorageError;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// `ok`, or SQLite's findings (at most 20 lines of them).
    pub integrity: Vec<String>,
    pub schema: i64,
    pub sessions: u64,
    pub lines: u64,
    /// Transcript lines whose session id no session has (an import cut short leaves them;
    /// the next import of that session discards them).
    pub orphan_lines: u64,
    /// Recorded as still running: recovered (ended as interrupted) by the next start, unless
    /// a live process is running them now.
    pub running_runs: u64,
    pub running_exchanges: u64,
    pub running_spawns: u64,
}

impl CheckReport {
    /// Damage or orphans: what makes `store check` exit 1.
    pub fn problems(&self) -> bool {
        self.integrity != ["ok"] || self.orphan_lines > 0
    }
}

/// Check `<state_dir>/switchboard.db`.
pub fn check(state_dir: &Path) -> Result<CheckReport, StorageError> {
    let path = state_dir.join(crate::DB_FILE);
    let conn = crate::open_read_only_conn(&path)?;
    let count = |conn: &Connection, sql: &str| -> Result<u64, StorageError> {
        let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
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
    Ok(CheckReport {
        integrity,
        schema,
        sessions: count(&conn, "SELECT count(*) FROM sessions")?,
        lines: count(&conn, "SELECT count(*) FROM transcript")?,
        orphan_lines: count(
            &conn,
            "SELECT count(*) FROM transcript t
             WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = t.session_id)",
        )?,
        running_runs: count(&conn, "SELECT count(*) FROM runs WHERE status = 'running'")?,
        running_exchanges: count(&conn, "SELECT count(*) FROM flows WHERE status = 'running'")?,
        running_spawns: count(
            &conn,
            "SELECT count(*) FROM spawns WHERE status = 'running'",
        )?,
    })
}
