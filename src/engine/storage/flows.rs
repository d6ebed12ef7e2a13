//! SQL for the `flows` table: agent-to-agent exchanges (`sessions_send`) as started and ended.

use rusqlite::{Connection, params};

use super::error::StorageError;

/// An agent-to-agent flow as it starts.
#[derive(Debug, Clone)]
pub struct NewFlow<'a> {
    pub flow_id: &'a str,
    pub chain_id: &'a str,
    pub requester: &'a str,
    pub target: &'a str,
    pub message: &'a str,
    pub run_id: &'a str,
    pub owner: &'a str,
    pub started_at: i64,
}

pub fn insert_flow(conn: &Connection, f: &NewFlow<'_>) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status, owner, started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?8)",
    )?
    .execute(params![
        f.flow_id,
        f.chain_id,
        f.requester,
        f.target,
        f.message,
        f.run_id,
        f.owner,
        f.started_at
    ])?;
    Ok(())
}

pub fn finish_flow(
    conn: &Connection,
    flow_id: &str,
    reason: &str,
    now: i64,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE flows SET status = 'done', ended_reason = ?2, ended_at = ?3
         WHERE flow_id = ?1 AND status = 'running'",
    )?
    .execute(params![flow_id, reason, now])?;
    Ok(())
}
