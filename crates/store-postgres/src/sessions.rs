//! SQL for sessions: rows read and written whole or as views, lookups by id, label and
//! parent, the owner's pages (newest first or by name) with their counts, scans in chunks,
//! and the kind column kept in step with the key scheme.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::PgError;
use crate::text::{pg, pg_opt};
use crate::transcript;
use switchboard_store::line::name_key;
use switchboard_store::{
    PageFilter, Revision, RevisionRow, RevisionsPageRead, SessionScan, SessionsPageRead,
    StoredSession,
};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, SessionKind};

/// The columns `decode` reads, in its order.
pub const SESSION_COLS: &str = "key, agent_id, kind, updated_at, entry";

/// How much of an entry a read decodes.
#[derive(Clone, Copy)]
pub enum Read {
    /// Every field: what writes, exports and the engine's own work read.
    Whole,
    /// A view's fields only (`SessionEntry::view_from_str`): rows and names.
    View,
}

/// Run a cached statement.
pub async fn rows(
    c: &ClientWrapper,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, PgError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query(&stmt, params).await?)
}

/// Run a cached statement that changes rows; how many.
pub async fn exec(
    c: &ClientWrapper,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, PgError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.execute(&stmt, params).await?)
}

/// A cached statement's first row, if any.
pub async fn row(
    c: &ClientWrapper,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, PgError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&stmt, params).await?)
}

/// A session from a row of `SESSION_COLS` (from column `at` on).
pub fn decode(r: &Row, read: Read) -> Result<StoredSession, PgError> {
    let key: String = r.try_get(0)?;
    let text: &str = r.try_get(4)?;
    let entry = match read {
        Read::Whole => serde_json::from_str(text),
        Read::View => SessionEntry::view_from_str(text),
    };
    let mut entry: SessionEntry =
        entry.map_err(|e| PgError::Corrupt(format!("session {key}: {e}")))?;
    // The column is authoritative: appends bump it without rewriting the entry.
    entry.updated_at = r.try_get(3)?;
    let kind: &str = r.try_get(2)?;
    Ok(StoredSession {
        key: SessionKey::from_canonical(key),
        agent_id: r.try_get(1)?,
        kind: SessionKind::parse(kind).unwrap_or(SessionKind::Other),
        entry,
    })
}

pub async fn read_session(
    c: &ClientWrapper,
    key: &SessionKey,
    read: Read,
) -> Result<Option<StoredSession>, PgError> {
    let sql = format!("SELECT {SESSION_COLS} FROM sessions WHERE key = $1");
    row(c, &sql, &[&key.as_str()])
        .await?
        .map(|r| decode(&r, read))
        .transpose()
}

/// `read_session` that locks the row until the transaction ends (writes that read, edit
/// and write back; another node's write waits rather than being lost).
pub async fn lock_session(
    c: &ClientWrapper,
    key: &SessionKey,
) -> Result<Option<StoredSession>, PgError> {
    let sql = format!("SELECT {SESSION_COLS} FROM sessions WHERE key = $1 FOR UPDATE");
    row(c, &sql, &[&key.as_str()])
        .await?
        .map(|r| decode(&r, Read::Whole))
        .transpose()
}

/// Hold `name`'s advisory lock until the transaction ends: writers that check for a row and
/// then insert it (a new session, an idempotency key) queue here across processes and nodes,
/// so the second one sees the first one's row instead of failing on its insert.
pub async fn lock_name(c: &ClientWrapper, name: &str) -> Result<(), PgError> {
    exec(
        c,
        "SELECT pg_advisory_xact_lock(hashtext($1)::bigint)",
        &[&pg(name)],
    )
    .await?;
    Ok(())
}

pub async fn session_exists(c: &ClientWrapper, key: &SessionKey) -> Result<bool, PgError> {
    Ok(
        row(c, "SELECT 1 FROM sessions WHERE key = $1", &[&key.as_str()])
            .await?
            .is_some(),
    )
}

pub async fn session_id_of(c: &ClientWrapper, key: &SessionKey) -> Result<Option<String>, PgError> {
    row(
        c,
        "SELECT session_id FROM sessions WHERE key = $1",
        &[&key.as_str()],
    )
    .await?
    .map(|r| r.try_get(0).map_err(PgError::from))
    .transpose()
}

/// The keys of `sql`'s rows (first column).
async fn keys(
    c: &ClientWrapper,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<SessionKey>, PgError> {
    rows(c, sql, params)
        .await?
        .iter()
        .map(|r| Ok(SessionKey::from_canonical(r.try_get::<_, String>(0)?)))
        .collect()
}

pub async fn keys_by_session_id(c: &ClientWrapper, id: &str) -> Result<Vec<SessionKey>, PgError> {
    keys(
        c,
        "SELECT key FROM sessions WHERE session_id = $1",
        &[&pg(id)],
    )
    .await
}

pub async fn keys_by_label(c: &ClientWrapper, label: &str) -> Result<Vec<SessionKey>, PgError> {
    keys(
        c,
        "SELECT key FROM sessions WHERE label = $1 ORDER BY key",
        &[&pg(label)],
    )
    .await
}

pub async fn children_of(
    c: &ClientWrapper,
    parent: &SessionKey,
) -> Result<Vec<SessionKey>, PgError> {
    keys(
        c,
        "SELECT key FROM sessions WHERE spawned_by = $1",
        &[&parent.as_str()],
    )
    .await
}

pub async fn count_sessions(c: &ClientWrapper) -> Result<u64, PgError> {
    // Kept by triggers (schema 2): a few rows summed, whatever the number of sessions.
    let n: i64 = rows(
        c,
        "SELECT coalesce(sum(n), 0)::bigint FROM session_counts",
        &[],
    )
    .await?[0]
        .try_get(0)?;
    Ok(n.max(0) as u64)
}

/// Insert or replace a session row; every write of the entry takes a new revision.
pub async fn put_session(c: &ClientWrapper, s: &StoredSession) -> Result<(), PgError> {
    let entry = serde_json::to_string(&s.entry)
        .map_err(|e| PgError::Corrupt(format!("cannot encode entry: {e}")))?;
    let channel = s
        .entry
        .channel
        .as_deref()
        .or(s.entry.effective_last_channel());
    exec(
        c,
        "INSERT INTO sessions (key, session_id, agent_id, kind, channel, updated_at, label,
                               spawned_by, entry, archived_at, name_key, rev)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, nextval('session_revs'))
         ON CONFLICT (key) DO UPDATE SET session_id = excluded.session_id,
           agent_id = excluded.agent_id, kind = excluded.kind, channel = excluded.channel,
           updated_at = excluded.updated_at, label = excluded.label,
           spawned_by = excluded.spawned_by, entry = excluded.entry,
           archived_at = excluded.archived_at, name_key = excluded.name_key,
           rev = excluded.rev",
        &[
            &s.key.as_str(),
            &pg(&s.entry.session_id),
            &s.agent_id,
            &s.kind.as_str(),
            &pg_opt(channel),
            &s.entry.updated_at,
            &pg_opt(s.entry.label.as_deref()),
            &pg_opt(s.entry.spawned_by.as_deref()),
            &entry,
            &s.entry.archived_at,
            &pg(&name_key(&s.key, &s.entry)),
        ],
    )
    .await?;
    Ok(())
}

/// A brand-new session and its transcript's header line (seq 0).
pub async fn insert_session(
    c: &ClientWrapper,
    s: &StoredSession,
    header: &serde_json::Value,
) -> Result<(), PgError> {
    put_session(c, s).await?;
    let line = switchboard_store::RawLine::from_value(header);
    transcript::put_lines(c, &s.entry.session_id, 0, std::slice::from_ref(&line)).await
}

/// Delete a session and its transcript; whether it existed.
pub async fn delete_session(c: &ClientWrapper, key: &SessionKey) -> Result<bool, PgError> {
    let Some(id) = row(
        c,
        "DELETE FROM sessions WHERE key = $1 RETURNING session_id",
        &[&key.as_str()],
    )
    .await?
    else {
        return Ok(false);
    };
    let id: String = id.try_get(0)?;
    exec(c, "DELETE FROM transcript WHERE session_id = $1", &[&id]).await?;
    Ok(true)
}

/// Add a run's token usage to the session's counters.
pub async fn add_tokens(
    c: &ClientWrapper,
    key: &SessionKey,
    input: u64,
    output: u64,
) -> Result<(), PgError> {
    let Some(mut s) = lock_session(c, key).await? else {
        return Err(PgError::NoSession(key.to_string()));
    };
    let e = &mut s.entry;
    // Saturating: counters reported by a backend must not be able to panic the writer.
    let i = e.input_tokens.unwrap_or(0).saturating_add(input);
    let o = e.output_tokens.unwrap_or(0).saturating_add(output);
    e.input_tokens = Some(i);
    e.output_tokens = Some(o);
    e.total_tokens = Some(i.saturating_add(o));
    put_session(c, &s).await
}

/// The owner's page filter as SQL over `$1` kind, `$2` since, `$3` archived, `$4` global.
const PAGE_WHERE: &str = "($1::text IS NULL OR kind = $1) \
    AND ($2::bigint IS NULL OR updated_at >= $2) AND ($3 OR archived_at IS NULL) \
    AND key <> 'unknown' AND ($4 OR key <> 'global')";

fn page_order(filter: &PageFilter) -> &'static str {
    if filter.by_name {
        "ORDER BY name_key, key"
    } else {
        "ORDER BY updated_at DESC, key"
    }
}

async fn matching(c: &ClientWrapper, filter: &PageFilter) -> Result<u64, PgError> {
    let kind = filter.kind.map(|k| k.as_str());
    if filter.updated_since.is_none() {
        // The counters (schema 2), with the same rules as the walk below.
        let n: i64 = rows(
            c,
            "SELECT coalesce(sum(n), 0)::bigint FROM session_counts \
             WHERE ($1::text IS NULL OR kind = $1) AND ($2 OR NOT archived) \
             AND slot <> 'unknown' AND ($3 OR slot <> 'global')",
            &[&kind, &filter.archived, &filter.show_global],
        )
        .await?[0]
            .try_get(0)?;
        return Ok(n.max(0) as u64);
    }
    let sql = format!("SELECT count(*) FROM sessions WHERE {PAGE_WHERE}");
    let n: i64 = rows(
        c,
        &sql,
        &[
            &kind,
            &filter.updated_since,
            &filter.archived,
            &filter.show_global,
        ],
    )
    .await?[0]
        .try_get(0)?;
    Ok(n.max(0) as u64)
}

/// Begin a read-only snapshot: a page's parts agree with each other.
pub async fn begin_snapshot(c: &ClientWrapper) -> Result<(), PgError> {
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    Ok(())
}

/// End a snapshot begun by `begin_snapshot` (read-only: commit and rollback are alike).
pub async fn end_snapshot<T>(c: &ClientWrapper, result: Result<T, PgError>) -> Result<T, PgError> {
    let end = c.batch_execute("COMMIT").await;
    let value = result?;
    end?;
    Ok(value)
}

pub async fn page_sessions(
    c: &ClientWrapper,
    filter: &PageFilter,
    offset: usize,
    limit: usize,
    count: bool,
    previews: bool,
) -> Result<SessionsPageRead, PgError> {
    begin_snapshot(c).await?;
    let read = async {
        let matching = if count {
            Some(matching(c, filter).await?)
        } else {
            None
        };
        let kind = filter.kind.map(|k| k.as_str());
        let sql = format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE {PAGE_WHERE} {} LIMIT $5 OFFSET $6",
            page_order(filter)
        );
        let (limit, offset) = (limit as i64, offset as i64);
        let found = rows(
            c,
            &sql,
            &[
                &kind,
                &filter.updated_since,
                &filter.archived,
                &filter.show_global,
                &limit,
                &offset,
            ],
        )
        .await?;
        let rows = found
            .iter()
            .map(|r| decode(r, Read::View))
            .collect::<Result<Vec<_>, _>>()?;
        let last = if previews {
            let ids: Vec<String> = rows.iter().map(|s| s.entry.session_id.clone()).collect();
            transcript::last_messages(c, &ids).await?
        } else {
            Vec::new()
        };
        let total = count_sessions(c).await?;
        Ok(SessionsPageRead {
            rows,
            matching,
            total,
            last,
        })
    }
    .await;
    end_snapshot(c, read).await
}

pub async fn page_revisions(
    c: &ClientWrapper,
    filter: &PageFilter,
    offset: usize,
    limit: usize,
    count: bool,
) -> Result<RevisionsPageRead, PgError> {
    begin_snapshot(c).await?;
    let read = async {
        let matching = if count {
            Some(matching(c, filter).await?)
        } else {
            None
        };
        let kind = filter.kind.map(|k| k.as_str());
        let sql = format!(
            "SELECT key, agent_id, rev, updated_at FROM sessions WHERE {PAGE_WHERE} {} \
             LIMIT $5 OFFSET $6",
            page_order(filter)
        );
        let (limit, offset) = (limit as i64, offset as i64);
        let found = rows(
            c,
            &sql,
            &[
                &kind,
                &filter.updated_since,
                &filter.archived,
                &filter.show_global,
                &limit,
                &offset,
            ],
        )
        .await?;
        let rows = found
            .iter()
            .map(|r| {
                Ok(RevisionRow {
                    key: SessionKey::from_canonical(r.try_get::<_, String>(0)?),
                    agent_id: r.try_get(1)?,
                    revision: Revision {
                        rev: r.try_get(2)?,
                        updated_at: r.try_get(3)?,
                    },
                })
            })
            .collect::<Result<Vec<_>, PgError>>()?;
        let total = count_sessions(c).await?;
        Ok(RevisionsPageRead {
            rows,
            matching,
            total,
        })
    }
    .await;
    end_snapshot(c, read).await
}

/// The sessions named that exist, in the order named, as views, each with its revision.
pub async fn sessions_by_key(
    c: &ClientWrapper,
    keys: &[SessionKey],
) -> Result<Vec<(StoredSession, Revision)>, PgError> {
    let names: Vec<&str> = keys.iter().map(SessionKey::as_str).collect();
    let found = rows(
        c,
        "SELECT s.key, s.agent_id, s.kind, s.updated_at, s.entry, s.rev
         FROM unnest($1::text[]) WITH ORDINALITY AS j(key, n)
         JOIN sessions AS s ON s.key = j.key ORDER BY j.n",
        &[&names],
    )
    .await?;
    found
        .iter()
        .map(|r| {
            let s = decode(r, Read::View)?;
            let revision = Revision {
                rev: r.try_get(5)?,
                updated_at: s.entry.updated_at,
            };
            Ok((s, revision))
        })
        .collect()
}

/// Where a scan continues from: the last row handed over, in the scan's order.
#[derive(Debug, Clone)]
pub enum ScanAfter {
    Start,
    /// Newest first: `(updated_at, key)` of the last row.
    Activity(i64, String),
    /// By name: `(name_key, key)` of the last row.
    Name(String, String),
}

/// Up to `limit` sessions of `scan` after `after`, in its order, with where the next chunk
/// starts. Keyset pages, so a long scan costs one index range per chunk.
pub async fn scan_chunk(
    c: &ClientWrapper,
    scan: &SessionScan,
    after: &ScanAfter,
    limit: usize,
) -> Result<(Vec<StoredSession>, ScanAfter), PgError> {
    let kinds: Option<Vec<&str>> = scan
        .kinds
        .as_ref()
        .map(|k| k.iter().map(|k| k.as_str()).collect());
    let tree = scan.tree_of.as_ref().map(SessionKey::as_str);
    let filters = "($1::text[] IS NULL OR kind = ANY($1)) \
        AND ($2::text IS NULL OR agent_id = $2) \
        AND ($3::bigint IS NULL OR updated_at >= $3) \
        AND ($4::text IS NULL OR key = $4 OR spawned_by = $4)";
    let limit = limit as i64;
    let (cursor_a, cursor_b): (Option<i64>, Option<String>) = match after {
        ScanAfter::Activity(at, key) => (Some(*at), Some(key.clone())),
        _ => (None, None),
    };
    let (name_a, name_b): (Option<String>, Option<String>) = match after {
        ScanAfter::Name(name, key) => (Some(name.clone()), Some(key.clone())),
        _ => (None, None),
    };
    let found = if scan.by_name {
        let sql = format!(
            "SELECT {SESSION_COLS}, name_key FROM sessions WHERE {filters}
             AND ($5::text IS NULL OR (name_key, key) > ($5, $6::text))
             ORDER BY name_key, key LIMIT $7"
        );
        rows(
            c,
            &sql,
            &[
                &kinds,
                &scan.agent_id,
                &scan.updated_since,
                &tree,
                &name_a,
                &name_b,
                &limit,
            ],
        )
        .await?
    } else {
        let sql = format!(
            "SELECT {SESSION_COLS}, name_key FROM sessions WHERE {filters}
             AND ($5::bigint IS NULL OR updated_at < $5 OR (updated_at = $5 AND key > $6::text))
             ORDER BY updated_at DESC, key LIMIT $7"
        );
        rows(
            c,
            &sql,
            &[
                &kinds,
                &scan.agent_id,
                &scan.updated_since,
                &tree,
                &cursor_a,
                &cursor_b,
                &limit,
            ],
        )
        .await?
    };
    let next = match found.last() {
        None => after.clone(),
        Some(r) if scan.by_name => ScanAfter::Name(r.try_get(5)?, r.try_get(0)?),
        Some(r) => ScanAfter::Activity(r.try_get(3)?, r.try_get(0)?),
    };
    let sessions = found
        .iter()
        .map(|r| decode(r, Read::Whole))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((sessions, next))
}

/// Recompute every session's kind when the key scheme it was derived from changed (the
/// config's main key or scope), as the SQLite store does at open; one transaction.
pub async fn reclassify_if_needed(
    c: &mut ClientWrapper,
    scheme: &switchboard_types::key::KeyScheme,
) -> Result<(), PgError> {
    let basis = format!("{}|{}", scheme.main_key, scheme.global_scope);
    let tx = c.transaction().await?;
    // One node at a time (the row lock), the others then see the new basis.
    tx.execute("LOCK TABLE meta IN EXCLUSIVE MODE", &[]).await?;
    let current: Option<String> = tx
        .query_opt("SELECT value FROM meta WHERE name = 'kind_basis'", &[])
        .await?
        .map(|r| r.try_get(0))
        .transpose()?;
    if current.as_deref() == Some(basis.as_str()) {
        tx.commit().await?;
        return Ok(());
    }
    let all = tx.query("SELECT key, entry FROM sessions", &[]).await?;
    let update = tx
        .prepare("UPDATE sessions SET kind = $2 WHERE key = $1")
        .await?;
    for r in all {
        let key: String = r.try_get(0)?;
        let entry: &str = r.try_get(1)?;
        let chat_type = serde_json::from_str::<serde_json::Value>(entry)
            .ok()
            .and_then(|v| {
                v.get("chatType")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string)
            });
        let kind = scheme.kind(
            &SessionKey::from_canonical(key.clone()),
            chat_type.as_deref(),
        );
        tx.execute(&update, &[&key, &kind.as_str()]).await?;
    }
    tx.execute(
        "INSERT INTO meta (name, value) VALUES ('kind_basis', $1)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        &[&basis],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
