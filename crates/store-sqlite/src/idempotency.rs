//! SQL for `idempotency_keys`: the `idempotencyKey` of each recorded send, written in the
//! commit of the message it deduplicates, kept for `TTL` and at most `MAX_KEYS` rows
//! (expired rows are pruned as new ones go in, the oldest past the cap now and then).

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OptionalExtension, params};

use super::error::StorageError;
pub use switchboard_store::KeyRow;
use switchboard_store::idempotency::TTL;

/// The most keys kept at once; past it the oldest go first (a burst of more than this many
/// keyed sends within `TTL` shortens the window for the oldest).
pub const MAX_KEYS: u64 = 100_000;
/// The cap is checked once in this many inserts: counting rows on every send would cost
/// more than the rows do.
const CAP_EVERY: u64 = 1024;

static INSERTS: AtomicU64 = AtomicU64::new(0);

/// Where a key's window ends before `now` (ms).
fn expired_before(now: i64) -> i64 {
    now.saturating_sub(TTL.as_millis() as i64)
}

/// The key's send, when it is still within its window at `now`.
pub fn find(conn: &Connection, key: &str, now: i64) -> Result<Option<KeyRow>, StorageError> {
    Ok(conn
        .prepare_cached(
            "SELECT key, session_key, message_hash, run_id, seq, command_reply, created_at
             FROM idempotency_keys WHERE key = ?1 AND created_at > ?2",
        )?
        .query_row(params![key, expired_before(now)], |r| {
            Ok(KeyRow {
                key: r.get(0)?,
                session_key: r.get(1)?,
                message_hash: r.get(2)?,
                run_id: r.get(3)?,
                seq: r.get(4)?,
                command_reply: r.get(5)?,
                created_at: r.get(6)?,
            })
        })
        .optional()?)
}

/// Record a key (replacing an expired row of the same key), pruning what has expired.
pub fn insert(conn: &Connection, row: &KeyRow) -> Result<(), StorageError> {
    prune(conn, row.created_at)?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO idempotency_keys
             (key, session_key, message_hash, run_id, seq, command_reply, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        row.key,
        row.session_key,
        row.message_hash,
        row.run_id,
        row.seq,
        row.command_reply,
        row.created_at
    ])?;
    Ok(())
}

/// Drop expired keys (one index range, usually empty), and now and then the oldest past
/// `MAX_KEYS`.
fn prune(conn: &Connection, now: i64) -> Result<(), StorageError> {
    conn.prepare_cached("DELETE FROM idempotency_keys WHERE created_at <= ?1")?
        .execute([expired_before(now)])?;
    if INSERTS
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(CAP_EVERY)
    {
        conn.prepare_cached(
            "DELETE FROM idempotency_keys WHERE created_at <
                 (SELECT created_at FROM idempotency_keys ORDER BY created_at DESC
                  LIMIT 1 OFFSET ?1)",
        )?
        .execute([MAX_KEYS as i64])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_store::idempotency::message_hash;

    fn row(key: &str, at: i64) -> KeyRow {
        KeyRow {
            key: key.into(),
            session_key: "agent:main:main".into(),
            message_hash: message_hash("hi"),
            run_id: Some("r".into()),
            seq: 1,
            command_reply: None,
            created_at: at,
        }
    }

    #[test]
    fn a_key_is_found_within_its_window_and_pruned_after() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let ttl = TTL.as_millis() as i64;
        insert(&conn, &row("a", 1_000)).expect("insert");
        assert_eq!(
            find(&conn, "a", 1_000 + ttl - 1).expect("find"),
            Some(row("a", 1_000))
        );
        assert_eq!(find(&conn, "a", 1_000 + ttl).expect("find"), None);
        // A later insert prunes the expired row; the same key may then be used afresh.
        insert(&conn, &row("b", 1_000 + ttl)).expect("insert");
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM idempotency_keys WHERE key = 'a'",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(left, 0);
    }
}
