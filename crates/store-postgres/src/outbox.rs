//! SQL for the `outbox` table on PostgreSQL: what was handed to a channel and how its
//! delivery stands. Several nodes drain one outbox: a claim locks the due rows it takes
//! with `FOR UPDATE SKIP LOCKED`, so two nodes claiming at once take disjoint rows, and an
//! outcome is written only by the node still holding the row.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::Row;

use crate::error::PgError;
use crate::sessions::{exec, row, rows};
use crate::text::{pg, pg_opt};
use switchboard_store::{
    DeliveryCounts, OUTBOX_COLUMNS, OutboxClaim, OutboxOutcome, OutboxQuery, OutboxRow,
    OutboxStatus, RELEASED_ERROR,
};

pub async fn insert_outbox(c: &ClientWrapper, o: &OutboxRow) -> Result<i64, PgError> {
    let found = rows(
        c,
        "INSERT INTO outbox (created_at, session_key, kind, channel, recipient, account_id,
                             thread_id, text, status, run_id, flow_id, next_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $1) RETURNING id",
        &[
            &o.created_at,
            &o.session_key,
            &pg(&o.kind),
            &pg(&o.channel),
            &pg(&o.to),
            &pg_opt(o.account_id.as_deref()),
            &pg_opt(o.thread_id.as_deref()),
            &pg(&o.text),
            &o.status.as_str(),
            &o.run_id,
            &o.flow_id,
            &o.next_at,
        ],
    )
    .await?;
    Ok(found[0].try_get(0)?)
}

fn row_of(r: &Row) -> Result<OutboxRow, PgError> {
    Ok(OutboxRow {
        id: r.try_get(0)?,
        created_at: r.try_get(1)?,
        session_key: r.try_get(2)?,
        kind: r.try_get(3)?,
        channel: r.try_get(4)?,
        to: r.try_get(5)?,
        account_id: r.try_get(6)?,
        thread_id: r.try_get(7)?,
        text: r.try_get(8)?,
        status: OutboxStatus::parse(r.try_get(9)?),
        run_id: r.try_get(10)?,
        flow_id: r.try_get(11)?,
        attempt: u32::try_from(r.try_get::<_, i64>(12)?).unwrap_or(u32::MAX),
        next_at: r.try_get(13)?,
        claimed_by: r.try_get(14)?,
        claim_until: r.try_get(15)?,
        message_id: r.try_get(16)?,
        last_error: r.try_get(17)?,
        updated_at: r.try_get(18)?,
    })
}

pub async fn outbox_of(c: &ClientWrapper, session_key: &str) -> Result<Vec<OutboxRow>, PgError> {
    rows(
        c,
        &format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE session_key = $1 ORDER BY id"),
        &[&session_key],
    )
    .await?
    .iter()
    .map(row_of)
    .collect()
}

pub async fn claim(c: &ClientWrapper, claim: &OutboxClaim) -> Result<Vec<OutboxRow>, PgError> {
    let limit = i64::from(claim.limit);
    let mut found = rows(
        c,
        &format!(
            "UPDATE outbox SET status = 'sending', claimed_by = $1, claim_until = $2,
                    attempt = attempt + 1, updated_at = $3
             WHERE id IN (
                 SELECT id FROM outbox
                 WHERE ((status IN ('queued', 'retrying') AND coalesce(next_at, 0) <= $3)
                        OR (status = 'sending' AND coalesce(claim_until, 0) < $3))
                   AND channel = ANY($4)
                 ORDER BY coalesce(next_at, 0), id LIMIT $5
                 FOR UPDATE SKIP LOCKED)
               -- Checked again on the row as it is when updated: a row another claim took
               -- meanwhile is not taken twice.
               AND ((status IN ('queued', 'retrying') AND coalesce(next_at, 0) <= $3)
                    OR (status = 'sending' AND coalesce(claim_until, 0) < $3))
             RETURNING {OUTBOX_COLUMNS}"
        ),
        &[
            &claim.owner,
            &claim.claim_until,
            &claim.now,
            &claim.channels,
            &limit,
        ],
    )
    .await?
    .iter()
    .map(row_of)
    .collect::<Result<Vec<_>, _>>()?;
    found.sort_by_key(|r| r.id);
    Ok(found)
}

pub async fn record(
    c: &ClientWrapper,
    id: i64,
    owner: &str,
    now: i64,
    outcome: &OutboxOutcome,
) -> Result<bool, PgError> {
    let o = outcome.columns();
    let n = exec(
        c,
        "UPDATE outbox SET status = $1, next_at = $2, message_id = coalesce($3, message_id),
                last_error = $4, attempt = attempt - $5, claimed_by = NULL,
                claim_until = NULL, updated_at = $6
         WHERE id = $7 AND status = 'sending' AND claimed_by = $8",
        &[
            &o.status.as_str(),
            &o.next_at,
            &o.message_id.map(pg),
            &o.last_error.map(pg),
            &o.uncount,
            &now,
            &id,
            &owner,
        ],
    )
    .await?;
    Ok(n == 1)
}

pub async fn list(c: &ClientWrapper, q: OutboxQuery) -> Result<Vec<OutboxRow>, PgError> {
    // Only the filters asked for are in the statement (and only their parameters passed),
    // so a session's rows are found by its index rather than a scan.
    let limit = i64::from(q.limit);
    let mut filters = vec!["(NOT $1 OR status = 'failed')".to_string()];
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&q.failed_only, &limit];
    if let Some(key) = &q.session_key {
        params.push(key);
        filters.push(format!("session_key = ${}", params.len()));
    }
    if let Some(flow) = &q.flow_id {
        params.push(flow);
        filters.push(format!("flow_id = ${}", params.len()));
    }
    rows(
        c,
        &format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE {} ORDER BY id DESC LIMIT $2",
            filters.join(" AND ")
        ),
        &params,
    )
    .await?
    .iter()
    .map(row_of)
    .collect()
}

pub async fn count(c: &ClientWrapper) -> Result<DeliveryCounts, PgError> {
    let mut counts = DeliveryCounts::default();
    for r in rows(
        c,
        "SELECT status, count(*) FROM outbox GROUP BY status",
        &[],
    )
    .await?
    {
        let status: String = r.try_get(0)?;
        let n: i64 = r.try_get(1)?;
        counts.add(OutboxStatus::parse(&status), u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub async fn retry(c: &ClientWrapper, id: i64, now: i64) -> Result<Option<OutboxRow>, PgError> {
    exec(
        c,
        "UPDATE outbox SET status = 'queued', attempt = 0, next_at = $2, updated_at = $2
         WHERE id = $1 AND status IN ('failed', 'retrying')",
        &[&id, &now],
    )
    .await?;
    row(
        c,
        &format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = $1"),
        &[&id],
    )
    .await?
    .as_ref()
    .map(row_of)
    .transpose()
}

pub async fn release(c: &ClientWrapper, owners: &[String], now: i64) -> Result<u64, PgError> {
    exec(
        c,
        "UPDATE outbox SET status = 'retrying', next_at = $2, claimed_by = NULL,
                claim_until = NULL, updated_at = $2, last_error = $3
         WHERE status = 'sending' AND claimed_by = ANY($1)",
        &[&owners, &now, &RELEASED_ERROR],
    )
    .await
}
