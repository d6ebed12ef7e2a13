//! SQL for the `pairings` table on PostgreSQL (SQLite's `pairings.rs` says what it holds). A
//! request counts and inserts under a transaction-scoped advisory lock of its channel, so
//! two nodes asking at once never give more codes than the cap.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::Row;

use crate::error::PgError;
use crate::sessions::{exec, row, rows};
use crate::text::pg_opt;
use switchboard_store::{Pairing, PairingAnswer, PairingRequest};

const COLUMNS: &str = "channel, sender, display_name, code, requested_at, expires_at, approved_at";

fn row_of(r: &Row) -> Result<Pairing, PgError> {
    Ok(Pairing {
        channel: r.try_get(0)?,
        sender: r.try_get(1)?,
        display_name: r.try_get(2)?,
        code: r.try_get(3)?,
        requested_at: r.try_get(4)?,
        expires_at: r.try_get(5)?,
        approved_at: r.try_get(6)?,
    })
}

pub async fn pairing_of(
    c: &ClientWrapper,
    channel: &str,
    sender: &str,
) -> Result<Option<Pairing>, PgError> {
    row(
        c,
        &format!("SELECT {COLUMNS} FROM pairings WHERE channel = $1 AND sender = $2"),
        &[&channel, &sender],
    )
    .await?
    .as_ref()
    .map(row_of)
    .transpose()
}

pub async fn request(
    c: &ClientWrapper,
    r: &PairingRequest,
    code: &str,
    now: i64,
    ttl_ms: i64,
    cap: u32,
) -> Result<PairingAnswer, PgError> {
    exec(
        c,
        "SELECT pg_advisory_xact_lock(hashtext('switchboard_pairing:' || $1))",
        &[&r.channel],
    )
    .await?;
    exec(
        c,
        "DELETE FROM pairings WHERE channel = $1 AND approved_at IS NULL AND expires_at <= $2",
        &[&r.channel, &now],
    )
    .await?;
    if let Some(p) = pairing_of(c, &r.channel, &r.sender).await? {
        return Ok(match p.approved_at {
            Some(_) => PairingAnswer::Approved,
            None => PairingAnswer::Waiting,
        });
    }
    let waiting: i64 = row(
        c,
        "SELECT count(*) FROM pairings WHERE channel = $1 AND approved_at IS NULL",
        &[&r.channel],
    )
    .await?
    .map(|r| r.try_get(0))
    .transpose()?
    .unwrap_or(0);
    if waiting >= i64::from(cap) {
        return Ok(PairingAnswer::Full);
    }
    let expires_at = now + ttl_ms;
    exec(
        c,
        "INSERT INTO pairings (channel, sender, display_name, code, requested_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &r.channel,
            &r.sender,
            &pg_opt(r.display_name.as_deref()),
            &code,
            &now,
            &expires_at,
        ],
    )
    .await?;
    Ok(PairingAnswer::New {
        code: code.to_string(),
        expires_at,
    })
}

pub async fn approve(
    c: &ClientWrapper,
    channel: &str,
    code: &str,
    now: i64,
) -> Result<Option<Pairing>, PgError> {
    row(
        c,
        &format!(
            "UPDATE pairings SET approved_at = $3
             WHERE channel = $1 AND code = $2 AND approved_at IS NULL AND expires_at > $3
             RETURNING {COLUMNS}"
        ),
        &[&channel, &code, &now],
    )
    .await?
    .as_ref()
    .map(row_of)
    .transpose()
}

pub async fn approve_sender(
    c: &ClientWrapper,
    channel: &str,
    sender: &str,
    now: i64,
) -> Result<bool, PgError> {
    // The code of a sender approved without one (SQLite's `imported_code`).
    let code = format!("imported:{sender}");
    let changed = exec(
        c,
        "INSERT INTO pairings (channel, sender, code, requested_at, expires_at, approved_at)
         VALUES ($1, $2, $3, $4, $4, $4)
         ON CONFLICT (channel, sender) DO UPDATE SET approved_at = $4
         WHERE pairings.approved_at IS NULL",
        &[&channel, &sender, &code, &now],
    )
    .await?;
    Ok(changed > 0)
}

pub async fn list(
    c: &ClientWrapper,
    channel: Option<&str>,
    now: i64,
) -> Result<Vec<Pairing>, PgError> {
    rows(
        c,
        &format!(
            "SELECT {COLUMNS} FROM pairings
             WHERE ($1::text IS NULL OR channel = $1) AND (approved_at IS NOT NULL OR expires_at > $2)
             ORDER BY channel, requested_at DESC"
        ),
        &[&channel, &now],
    )
    .await?
    .iter()
    .map(row_of)
    .collect()
}
