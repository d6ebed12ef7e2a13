//! SQL for the `outbox` table: what was handed to a channel for delivery, and how its
//! delivery stands (claims, outcomes, retries; `switchboard_store::OutboxStatus`).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::error::StorageError;
pub use switchboard_store::OutboxRow;
use switchboard_store::{
    DeliveryCounts, OUTBOX_COLUMNS, OutboxClaim, OutboxOutcome, OutboxQuery, OutboxStatus,
    RELEASED_ERROR,
};

pub fn insert_outbox(conn: &Connection, o: &OutboxRow) -> Result<i64, StorageError> {
    conn.prepare_cached(
        "INSERT INTO outbox (created_at, session_key, kind, channel, recipient, account_id, thread_id, text, status, run_id, flow_id, next_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?1)",
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
        o.status.as_str(),
        o.run_id,
        o.flow_id,
        o.next_at,
    ])?;
    Ok(conn.last_insert_rowid())
}

fn row_of(r: &Row<'_>) -> rusqlite::Result<OutboxRow> {
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
        status: OutboxStatus::parse(&r.get::<_, String>(9)?),
        run_id: r.get(10)?,
        flow_id: r.get(11)?,
        attempt: u32::try_from(r.get::<_, i64>(12)?).unwrap_or(u32::MAX),
        next_at: r.get(13)?,
        claimed_by: r.get(14)?,
        claim_until: r.get(15)?,
        message_id: r.get(16)?,
        last_error: r.get(17)?,
        updated_at: r.get(18)?,
    })
}

/// A session's outbox, oldest first.
pub fn outbox_of(conn: &Connection, session_key: &str) -> Result<Vec<OutboxRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE session_key = ?1 ORDER BY id"
    ))?;
    let rows = stmt
        .query_map([session_key], row_of)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Claim due rows (one statement on the single writer: no other claim can interleave).
pub fn claim(conn: &Connection, c: &OutboxClaim) -> Result<Vec<OutboxRow>, StorageError> {
    // A list of strings always serialises.
    let channels = serde_json::Value::from(c.channels.clone()).to_string();
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE outbox SET status = 'sending', claimed_by = ?1, claim_until = ?2,
                attempt = attempt + 1, updated_at = ?3
         WHERE id IN (
             SELECT id FROM outbox
             WHERE ((status IN ('queued', 'retrying') AND coalesce(next_at, 0) <= ?3)
                    OR (status = 'sending' AND coalesce(claim_until, 0) < ?3))
               AND channel IN (SELECT value FROM json_each(?4))
             ORDER BY coalesce(next_at, 0), id LIMIT ?5)
         RETURNING {OUTBOX_COLUMNS}"
    ))?;
    let mut rows = stmt
        .query_map(
            params![c.owner, c.claim_until, c.now, channels, c.limit],
            row_of,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Record an outcome on a row `owner` still holds.
pub fn record(
    conn: &Connection,
    id: i64,
    owner: &str,
    now: i64,
    outcome: &OutboxOutcome,
) -> Result<bool, StorageError> {
    let o = outcome.columns();
    let n = conn
        .prepare_cached(
            "UPDATE outbox SET status = ?1, next_at = ?2, message_id = coalesce(?3, message_id),
                    last_error = ?4, attempt = attempt - ?5, claimed_by = NULL,
                    claim_until = NULL, updated_at = ?6
             WHERE id = ?7 AND status = 'sending' AND claimed_by = ?8",
        )?
        .execute(params![
            o.status.as_str(),
            o.next_at,
            o.message_id,
            o.last_error,
            o.uncount,
            now,
            id,
            owner
        ])?;
    Ok(n == 1)
}

pub fn list(conn: &Connection, q: OutboxQuery) -> Result<Vec<OutboxRow>, StorageError> {
    // Only the filters asked for are in the statement (and only their parameters bound),
    // so a session's rows are found by its index rather than a scan.
    let mut filters = vec!["(?1 = 0 OR status = 'failed')".to_string()];
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&q.failed_only, &q.limit];
    if let Some(key) = &q.session_key {
        params.push(key);
        filters.push(format!("session_key = ?{}", params.len()));
    }
    if let Some(flow) = &q.flow_id {
        params.push(flow);
        filters.push(format!("flow_id = ?{}", params.len()));
    }
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE {} ORDER BY id DESC LIMIT ?2",
        filters.join(" AND ")
    ))?;
    let rows = stmt
        .query_map(params.as_slice(), row_of)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn count(conn: &Connection) -> Result<DeliveryCounts, StorageError> {
    let mut stmt = conn.prepare_cached("SELECT status, count(*) FROM outbox GROUP BY status")?;
    let mut counts = DeliveryCounts::default();
    let mut query = stmt.query([])?;
    while let Some(r) = query.next()? {
        let status: String = r.get(0)?;
        let n: i64 = r.get(1)?;
        counts.add(OutboxStatus::parse(&status), u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub fn retry(conn: &Connection, id: i64, now: i64) -> Result<Option<OutboxRow>, StorageError> {
    conn.prepare_cached(
        "UPDATE outbox SET status = 'queued', attempt = 0, next_at = ?2, updated_at = ?2
         WHERE id = ?1 AND status IN ('failed', 'retrying')",
    )?
    .execute(params![id, now])?;
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1"
        ))?
        .query_row([id], row_of)
        .optional()?)
}

pub fn release(conn: &Connection, owners: &[String], now: i64) -> Result<u64, StorageError> {
    let mut n = 0;
    let mut stmt = conn.prepare_cached(
        "UPDATE outbox SET status = 'retrying', next_at = ?2, claimed_by = NULL,
                claim_until = NULL, updated_at = ?2,
                last_error = ?3
         WHERE status = 'sending' AND claimed_by = ?1",
    )?;
    for owner in owners {
        n += stmt.execute(params![owner, now, RELEASED_ERROR])? as u64;
    }
    Ok(n)
}
