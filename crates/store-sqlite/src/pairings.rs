//! SQL for the `pairings` table: the senders a channel gave a pairing code to, and those the
//! owner approved (`switchboard_types::api::pairing`).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::error::StorageError;
use switchboard_store::{Pairing, PairingAnswer, PairingRequest};

const COLUMNS: &str = "channel, sender, display_name, code, requested_at, expires_at, approved_at";

fn row_of(r: &Row<'_>) -> rusqlite::Result<Pairing> {
    Ok(Pairing {
        channel: r.get(0)?,
        sender: r.get(1)?,
        display_name: r.get(2)?,
        code: r.get(3)?,
        requested_at: r.get(4)?,
        expires_at: r.get(5)?,
        approved_at: r.get(6)?,
    })
}

pub fn pairing_of(
    conn: &Connection,
    channel: &str,
    sender: &str,
) -> Result<Option<Pairing>, StorageError> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM pairings WHERE channel = ?1 AND sender = ?2"
        ))?
        .query_row(params![channel, sender], row_of)
        .optional()?)
}

/// On the single writer, so the count and the insert cannot interleave with another's.
pub fn request(
    conn: &Connection,
    r: &PairingRequest,
    code: &str,
    now: i64,
    ttl_ms: i64,
    cap: u32,
) -> Result<PairingAnswer, StorageError> {
    conn.prepare_cached(
        "DELETE FROM pairings WHERE channel = ?1 AND approved_at IS NULL AND expires_at <= ?2",
    )?
    .execute(params![r.channel, now])?;
    if let Some(p) = pairing_of(conn, &r.channel, &r.sender)? {
        return Ok(match p.approved_at {
            Some(_) => PairingAnswer::Approved,
            None => PairingAnswer::Waiting,
        });
    }
    let waiting: i64 = conn
        .prepare_cached("SELECT count(*) FROM pairings WHERE channel = ?1 AND approved_at IS NULL")?
        .query_row([&r.channel], |row| row.get(0))?;
    if waiting >= i64::from(cap) {
        return Ok(PairingAnswer::Full);
    }
    let expires_at = now + ttl_ms;
    conn.prepare_cached(
        "INSERT INTO pairings (channel, sender, display_name, code, requested_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        r.channel,
        r.sender,
        r.display_name,
        code,
        now,
        expires_at
    ])?;
    Ok(PairingAnswer::New {
        code: code.to_string(),
        expires_at,
    })
}

pub fn approve(
    conn: &Connection,
    channel: &str,
    code: &str,
    now: i64,
) -> Result<Option<Pairing>, StorageError> {
    Ok(conn
        .prepare_cached(&format!(
            "UPDATE pairings SET approved_at = ?3
             WHERE channel = ?1 AND code = ?2 AND approved_at IS NULL AND expires_at > ?3
             RETURNING {COLUMNS}"
        ))?
        .query_row(params![channel, code, now], row_of)
        .optional()?)
}

/// The code of a sender approved without one: unique per channel as the sender is, never
/// what `code_from` makes (it has a colon).
fn imported_code(sender: &str) -> String {
    format!("imported:{sender}")
}

pub fn approve_sender(
    conn: &Connection,
    channel: &str,
    sender: &str,
    now: i64,
) -> Result<bool, StorageError> {
    let changed = conn
        .prepare_cached(
            "INSERT INTO pairings (channel, sender, code, requested_at, expires_at, approved_at)
             VALUES (?1, ?2, ?3, ?4, ?4, ?4)
             ON CONFLICT (channel, sender) DO UPDATE SET approved_at = ?4
             WHERE pairings.approved_at IS NULL",
        )?
        .execute(params![channel, sender, imported_code(sender), now])?;
    Ok(changed > 0)
}

pub fn list(
    conn: &Connection,
    channel: Option<&str>,
    now: i64,
) -> Result<Vec<Pairing>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM pairings
         WHERE (?1 IS NULL OR channel = ?1) AND (approved_at IS NOT NULL OR expires_at > ?2)
         ORDER BY channel, requested_at DESC"
    ))?;
    let rows = stmt
        .query_map(params![channel, now], row_of)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
