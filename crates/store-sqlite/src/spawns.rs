//! SQL for the `spawns` table: sub-agents, their outcome, announce and archive timer.

use super::words::word;
use rusqlite::{Connection, OptionalExtension, params};

use super::error::StorageError;
pub use switchboard_store::SpawnRow;

const SPAWN_COLS: &str = "child_key, requester, run_id, agent_id, task, label, cleanup, mode, status, outcome, error, started_at, ended_at, announce, announce_state, announced_at, archive_at, archived_at";

fn spawn_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SpawnRow> {
    Ok(SpawnRow {
        child_key: r.get(0)?,
        requester: r.get(1)?,
        run_id: r.get(2)?,
        agent_id: r.get(3)?,
        task: r.get(4)?,
        label: r.get(5)?,
        cleanup: word(r, 6)?,
        mode: r.get(7)?,
        status: word(r, 8)?,
        outcome: r.get(9)?,
        error: r.get(10)?,
        started_at: r.get(11)?,
        ended_at: r.get(12)?,
        announce: r.get(13)?,
        announce_state: r.get(14)?,
        announced_at: r.get(15)?,
        archive_at: r.get(16)?,
        archived_at: r.get(17)?,
    })
}

pub fn insert_spawn(conn: &Connection, s: &SpawnRow) -> Result<(), StorageError> {
    conn.prepare_cached(&format!(
        "INSERT INTO spawns ({SPAWN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
    ))?
    .execute(params![
        s.child_key,
        s.requester,
        s.run_id,
        s.agent_id,
        s.task,
        s.label,
        s.cleanup.as_str(),
        s.mode,
        s.status.as_str(),
        s.outcome,
        s.error,
        s.started_at,
        s.ended_at,
        s.announce,
        s.announce_state,
        s.announced_at,
        s.archive_at,
        s.archived_at
    ])?;
    Ok(())
}

/// What a child's run ended with, and the announce decided from it.
pub struct SpawnEnd<'a> {
    pub outcome: &'a str,
    pub error: Option<&'a str>,
    pub ended_at: i64,
    pub announce: Option<&'a str>,
    /// `pending` (to deliver) or `skipped` (a silent `ANNOUNCE_SKIP`).
    pub announce_state: &'a str,
}

/// Record a child's end, once: only a spawn still `running` is moved to `ended` (another
/// process may be resuming the same one). Returns whether this call decided it.
pub fn end_spawn(
    conn: &Connection,
    child_key: &str,
    e: &SpawnEnd<'_>,
) -> Result<bool, StorageError> {
    let n = conn
        .prepare_cached(
            "UPDATE spawns SET status = 'ended', outcome = ?2, error = ?3, ended_at = ?4,
                 announce = ?5, announce_state = ?6
             WHERE child_key = ?1 AND status = 'running'",
        )?
        .execute(params![
            child_key,
            e.outcome,
            e.error,
            e.ended_at,
            e.announce,
            e.announce_state
        ])?;
    Ok(n > 0)
}

/// Mark a spawn's announce delivered (or skipped) and set its archive time.
pub fn finish_spawn(
    conn: &Connection,
    child_key: &str,
    announce_state: &str,
    announced_at: i64,
    archive_at: Option<i64>,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE spawns SET status = 'done', announce_state = ?2, announced_at = ?3, archive_at = ?4
         WHERE child_key = ?1",
    )?
    .execute(params![child_key, announce_state, announced_at, archive_at])?;
    Ok(())
}

/// Mark a spawn archived, once. Returns whether this call did it.
pub fn archive_spawn(conn: &Connection, child_key: &str, now: i64) -> Result<bool, StorageError> {
    let n = conn
        .prepare_cached(
            "UPDATE spawns SET archived_at = ?2 WHERE child_key = ?1 AND archived_at IS NULL",
        )?
        .execute(params![child_key, now])?;
    Ok(n > 0)
}

pub fn get_spawn(conn: &Connection, child_key: &str) -> Result<Option<SpawnRow>, StorageError> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SPAWN_COLS} FROM spawns WHERE child_key = ?1"
        ))?
        .query_row([child_key], spawn_from_row)
        .optional()?)
}

/// Children of `requester` still running.
pub fn running_children(conn: &Connection, requester: &str) -> Result<u32, StorageError> {
    Ok(conn
        .prepare_cached("SELECT count(*) FROM spawns WHERE requester = ?1 AND status = 'running'")?
        .query_row([requester], |r| r.get(0))?)
}

/// Spawns not yet done (running, or ended with the announce still to deliver).
pub fn open_spawns(conn: &Connection) -> Result<Vec<SpawnRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SPAWN_COLS} FROM spawns WHERE status != 'done' ORDER BY started_at"
    ))?;
    let rows = stmt
        .query_map([], spawn_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Spawns whose archive timer is set and not yet fired, soonest first.
pub fn archive_timers(conn: &Connection) -> Result<Vec<(String, i64)>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT child_key, archive_at FROM spawns
         WHERE archive_at IS NOT NULL AND archived_at IS NULL ORDER BY archive_at",
    )?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// A requester's children, newest first.
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
pub fn spawns_of(conn: &Connection, requester: &str) -> Result<Vec<SpawnRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SPAWN_COLS} FROM spawns WHERE requester = ?1 ORDER BY started_at DESC"
    ))?;
    let rows = stmt
        .query_map([requester], spawn_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
