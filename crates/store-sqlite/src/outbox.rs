//! SQL for the `outbox` table: what was handed to a channel for delivery.

use rusqlite::{Connection, params};

use super::error::StorageError;
pub use switchboard_store::OutboxRow;

pub fn insert_outbox(conn: &Connection, o: &OutboxRow) -> Result<i64, StorageError> {
    conn.prepare_cached(
        "INSERT INTO outbox (created_at, session_key, kind, channel, recipient, account_id, thread_id, text, status, run_id, flow_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        o.created_at,
        o.session_key,
        o.kind,
        o.channel,
        o.to,
        o.account_id,
        o.thread_id,
        o.text,
        o.status,
        o.run_id,
        o.flow_id
    ])?;
    Ok(conn.last_insert_rowid())
}

/// A session's outbox, oldest first.
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
pub fn outbox_of(conn: &Connection, session_key: &str) -> Result<Vec<OutboxRow>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, created_at, session_key, kind, channel, recipient, account_id, thread_id, text, status, run_id, flow_id
         FROM outbox WHERE session_key = ?1 ORDER BY id",
    )?;
    let rows = stmt
        .query_map([session_key], |r| {
            Ok(OutboxRow {
                id: r.get(0)?,
                created_at: r.get(1)?,
                session_key: r.get(2)?,
                kind: r.get(3)?,
                channel: r.get(4)?,
                to: r.get(5)?,
                account_id: r.get(6)?,
                thread_id: r.get(7)?,
                text: r.get(8)?,
                status: r.get(9)?,
                run_id: r.get(10)?,
                flow_id: r.get(11)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
