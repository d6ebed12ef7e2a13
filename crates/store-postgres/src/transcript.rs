//! SQL for transcript lines: appends numbered densely inside the write transaction (the
//! session's row locked, so two nodes appending to one session queue rather than collide),
//! the pages and tails history reads, and the raw lines imports write and exports read.

use deadpool_postgres::ClientWrapper;

use crate::error::PgError;
use crate::sessions::{exec, row, rows};
use crate::text::{pg, pg_opt};
use switchboard_store::line::{Placed, PreparedLine};
use switchboard_store::{RawLine, TranscriptRow};
use switchboard_types::key::SessionKey;

/// The rows history shows: message lines and shown notices (`switchboard_store::notice`).
macro_rules! shown_lines {
    () => {
        "(type = 'message' OR role = 'custom')"
    };
}

/// Tool results left out (`include_tools` false).
const NO_TOOLS: &str = "(role IS NULL OR role NOT IN ('toolResult', 'tool'))";

/// `(seq, entry_id, line)` rows as transcript rows, each line parsed.
fn parsed(found: &[tokio_postgres::Row]) -> Result<Vec<TranscriptRow>, PgError> {
    found
        .iter()
        .map(|r| {
            let seq: i64 = r.try_get(0)?;
            let text: &str = r.try_get(2)?;
            let line = serde_json::from_str(text)
                .map_err(|e| PgError::Corrupt(format!("transcript line {seq}: {e}")))?;
            Ok(TranscriptRow {
                seq,
                entry_id: r.try_get(1)?,
                line,
            })
        })
        .collect()
}

/// Append prepared lines to the session at `key`, chaining `parentId` to its last entry
/// and bumping `updated_at`; the session's row is locked until the transaction ends, so
/// `seq` stays dense whichever node appends.
pub async fn append_prepared(
    c: &ClientWrapper,
    key: &SessionKey,
    lines: &[PreparedLine],
    now_ms: i64,
) -> Result<(String, Placed), PgError> {
    let Some(found) = row(
        c,
        "SELECT session_id FROM sessions WHERE key = $1 FOR UPDATE",
        &[&key.as_str()],
    )
    .await?
    else {
        return Err(PgError::NoSession(key.to_string()));
    };
    let session_id: String = found.try_get(0)?;
    let last = row(
        c,
        "SELECT seq, entry_id, type FROM transcript WHERE session_id = $1
         ORDER BY seq DESC LIMIT 1",
        &[&session_id],
    )
    .await?;
    let (mut seq, mut parent) = match last {
        Some(r) => {
            let (seq, id, kind): (i64, String, String) =
                (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            // Imported lines may lack an id; they cannot be a parent, nor can the header.
            if kind != "session" && !id.is_empty() {
                (seq, Some(id))
            } else {
                (seq, None)
            }
        }
        None => (0, None),
    };
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        seq += 1;
        let text = l.text(parent.as_deref());
        exec(
            c,
            "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &session_id,
                &seq,
                &pg(&l.id),
                &pg(&l.kind),
                &pg_opt(l.role.as_deref()),
                &text,
            ],
        )
        .await?;
        out.push((seq, parent.replace(l.id.clone())));
    }
    exec(
        c,
        "UPDATE sessions SET updated_at = $2 WHERE key = $1 AND updated_at < $2",
        &[&key.as_str(), &now_ms],
    )
    .await?;
    Ok((session_id, out))
}

/// Store lines exactly as given (imports), numbered from `first_seq`, replacing any there.
pub async fn put_lines(
    c: &ClientWrapper,
    session_id: &str,
    first_seq: i64,
    lines: &[RawLine],
) -> Result<(), PgError> {
    for (i, line) in lines.iter().enumerate() {
        let seq = first_seq + i as i64;
        exec(
            c,
            "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (session_id, seq) DO UPDATE SET entry_id = excluded.entry_id,
               type = excluded.type, role = excluded.role, line = excluded.line",
            &[
                &pg(session_id),
                &seq,
                &pg(&line.id),
                &pg(&line.kind),
                &pg_opt(line.role.as_deref()),
                &pg(&line.text),
            ],
        )
        .await?;
    }
    Ok(())
}

/// The last `limit` lines history shows before `before`, oldest first.
pub async fn transcript_before(
    c: &ClientWrapper,
    session_id: &str,
    before: i64,
    limit: usize,
    include_tools: bool,
) -> Result<Vec<TranscriptRow>, PgError> {
    let tools = if include_tools { "TRUE" } else { NO_TOOLS };
    let sql = format!(
        concat!(
            "SELECT seq, entry_id, line FROM transcript WHERE session_id = $1 AND ",
            shown_lines!(),
            " AND seq < $3 AND {} ORDER BY seq DESC LIMIT $2"
        ),
        tools
    );
    let mut found = rows(c, &sql, &[&pg(session_id), &(limit as i64), &before]).await?;
    found.reverse();
    parsed(&found)
}

/// Each transcript's last shown line other than a tool result, in the order asked.
pub async fn last_messages(
    c: &ClientWrapper,
    session_ids: &[String],
) -> Result<Vec<Option<TranscriptRow>>, PgError> {
    let found = rows(
        c,
        concat!(
            "SELECT t.seq, t.entry_id, t.line, j.n FROM unnest($1::text[]) WITH ORDINALITY AS j(id, n)
             CROSS JOIN LATERAL (SELECT seq, entry_id, line FROM transcript
                 WHERE session_id = j.id AND ",
            shown_lines!(),
            " AND (role IS NULL OR role NOT IN ('toolResult', 'tool'))
                 ORDER BY seq DESC LIMIT 1) AS t"
        ),
        &[&session_ids.iter().map(|s| pg(s)).collect::<Vec<_>>()],
    )
    .await?;
    let mut out: Vec<Option<TranscriptRow>> = vec![None; session_ids.len()];
    for r in &found {
        let n: i64 = r.try_get(3)?;
        let parsed_row = parsed(std::slice::from_ref(r))?.pop();
        if let Some(slot) = usize::try_from(n - 1).ok().and_then(|i| out.get_mut(i)) {
            *slot = parsed_row;
        }
    }
    Ok(out)
}

/// The shown lines after `after`, oldest first, tool lines included, at most `limit`.
pub async fn transcript_after(
    c: &ClientWrapper,
    session_id: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<TranscriptRow>, PgError> {
    let found = rows(
        c,
        concat!(
            "SELECT seq, entry_id, line FROM transcript WHERE session_id = $1 AND ",
            shown_lines!(),
            " AND seq > $2 ORDER BY seq LIMIT $3"
        ),
        &[&pg(session_id), &after, &(limit as i64)],
    )
    .await?;
    parsed(&found)
}

pub async fn last_seq(c: &ClientWrapper, session_id: &str) -> Result<i64, PgError> {
    Ok(rows(
        c,
        "SELECT coalesce(max(seq), 0)::bigint FROM transcript WHERE session_id = $1",
        &[&pg(session_id)],
    )
    .await?[0]
        .try_get(0)?)
}

/// The highest seq stored under `session_id`, if any.
pub async fn max_seq(c: &ClientWrapper, session_id: &str) -> Result<Option<i64>, PgError> {
    Ok(rows(
        c,
        "SELECT max(seq) FROM transcript WHERE session_id = $1",
        &[&pg(session_id)],
    )
    .await?[0]
        .try_get(0)?)
}

pub async fn first_message_line(
    c: &ClientWrapper,
    session_id: &str,
) -> Result<Option<String>, PgError> {
    row(
        c,
        "SELECT line FROM transcript WHERE session_id = $1 AND type = 'message'
         ORDER BY seq LIMIT 1",
        &[&pg(session_id)],
    )
    .await?
    .map(|r| r.try_get(0).map_err(PgError::from))
    .transpose()
}

/// Up to `limit` stored lines after `after`: `(seq, entry_id, text)`, in seq order.
pub async fn lines_after(
    c: &ClientWrapper,
    session_id: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<(i64, String, String)>, PgError> {
    rows(
        c,
        "SELECT seq, entry_id, line FROM transcript WHERE session_id = $1 AND seq > $2
         ORDER BY seq LIMIT $3",
        &[&pg(session_id), &after, &(limit as i64)],
    )
    .await?
    .iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
    .collect()
}

/// Drop the lines under an id no session owns (staged, or left by a cut-short import).
pub async fn delete_orphan_transcript(c: &ClientWrapper, session_id: &str) -> Result<u64, PgError> {
    exec(
        c,
        "DELETE FROM transcript WHERE session_id = $1
         AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1)",
        &[&pg(session_id)],
    )
    .await
}

/// Move lines staged under `staging_id` to `session_id`, shifted by `first_seq`.
pub async fn move_staged(
    c: &ClientWrapper,
    staging_id: &str,
    session_id: &str,
    first_seq: i64,
) -> Result<u64, PgError> {
    let moved = exec(
        c,
        "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
         SELECT $2, seq + $3, entry_id, type, role, line FROM transcript
         WHERE session_id = $1 ORDER BY seq",
        &[&pg(staging_id), &pg(session_id), &first_seq],
    )
    .await?;
    exec(
        c,
        "DELETE FROM transcript WHERE session_id = $1",
        &[&pg(staging_id)],
    )
    .await?;
    Ok(moved)
}
