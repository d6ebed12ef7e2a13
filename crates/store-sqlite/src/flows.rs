//! SQL for the `flows` table: agent-to-agent exchanges (`sessions_send`) as started and
//! ended, the sends refused before they started, and the queries that list them (pages
//! newest first, one exchange with its runs, traffic per pair and minute).

use rusqlite::{Connection, OptionalExtension, params};

use super::error::StorageError;
use super::words::{word, word_opt};
pub use switchboard_store::{AnnounceRecord, ExchangeRow as FlowRow, TrafficRow};
use switchboard_types::api::{AnnounceOutcome, ExchangeEnd};

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

/// Close a running exchange with how it ended (`detail`, when known, says why in words).
pub fn finish_flow(
    conn: &Connection,
    flow_id: &str,
    reason: &str,
    detail: Option<&str>,
    now: i64,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE flows SET status = 'done', ended_reason = ?2, ended_at = ?3,
             detail = coalesce(?4, detail)
         WHERE flow_id = ?1 AND status = 'running'",
    )?
    .execute(params![flow_id, reason, now, detail])?;
    Ok(())
}

/// A send that never started an exchange: `kind` `refused` (the target's send policy) or
/// `chain` (the chain limit), recorded as an entry of its own with why.
#[derive(Debug, Clone)]
pub struct RefusedSend<'a> {
    pub flow_id: &'a str,
    pub kind: &'a str,
    pub chain_id: &'a str,
    pub requester: &'a str,
    pub target: &'a str,
    pub message: &'a str,
    pub run_id: &'a str,
    pub owner: &'a str,
    pub at: i64,
    /// `policy` or `chain`.
    pub reason: &'a str,
    pub detail: &'a str,
}

pub fn insert_refused(conn: &Connection, f: &RefusedSend<'_>) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status, owner,
                            started_at, ended_at, ended_reason, kind, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'refused', ?7, ?8, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        f.flow_id,
        f.chain_id,
        f.requester,
        f.target,
        f.message,
        f.run_id,
        f.owner,
        f.at,
        f.reason,
        f.kind,
        f.detail
    ])?;
    Ok(())
}

/// Record what the announce did, and why the loop before it ended (`loop_detail`).
pub fn record_announce(
    conn: &Connection,
    flow_id: &str,
    loop_detail: &str,
    a: &AnnounceRecord,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE flows SET detail = ?2, announce = ?3, announce_text = ?4, announce_channel = ?5,
             announce_to = ?6, announce_detail = ?7
         WHERE flow_id = ?1",
    )?
    .execute(params![
        flow_id,
        loop_detail,
        a.outcome.as_str(),
        a.text,
        a.channel,
        a.to,
        a.detail
    ])?;
    Ok(())
}

const FLOW_COLS: &str = "f.flow_id, f.kind, f.chain_id, f.requester, f.target, f.message, f.status,
    f.started_at, f.ended_at, f.ended_reason, f.detail,
    (SELECT count(*) FROM runs r WHERE r.flow_id = f.flow_id AND r.step IN ('message', 'reply')),
    f.announce, f.announce_text, f.announce_channel, f.announce_to, f.announce_detail";

fn flow_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FlowRow> {
    let outcome: Option<AnnounceOutcome> = word_opt(r, 12)?;
    // A reason is free to grow: one this build does not know reads as `Unknown`.
    let ended_reason: Option<String> = r.get(9)?;
    Ok(FlowRow {
        flow_id: r.get(0)?,
        kind: word(r, 1)?,
        chain_id: r.get(2)?,
        requester: r.get(3)?,
        target: r.get(4)?,
        message: r.get(5)?,
        status: word(r, 6)?,
        started_at: r.get(7)?,
        ended_at: r.get(8)?,
        ended_reason: ended_reason.map(|e| e.parse().unwrap_or(ExchangeEnd::Unknown)),
        detail: r.get(10)?,
        rounds: r.get(11)?,
        announce: match outcome {
            Some(outcome) => Some(AnnounceRecord {
                outcome,
                text: r.get(13)?,
                channel: r.get(14)?,
                to: r.get(15)?,
                detail: r.get::<_, Option<String>>(16)?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

/// Which exchanges a page holds.
#[derive(Debug, Clone, Default)]
pub struct FlowPageQuery<'a> {
    /// Only those with this session as requester or target.
    pub key: Option<&'a str>,
    /// Only those older than this exchange (the last of the previous page).
    pub before: Option<&'a str>,
    /// Only those started at or after this time.
    pub since: Option<i64>,
    pub limit: usize,
}

/// A page of exchanges, newest first (by start, then id), and whether older ones match.
/// Each part is a range scan of an index, so a page costs O(limit · log n) however many
/// exchanges there are; one session's page merges its requester and target ranges.
pub fn page(
    conn: &Connection,
    q: &FlowPageQuery<'_>,
) -> Result<(Vec<FlowRow>, bool), StorageError> {
    let limit = q.limit.max(1);
    let cursor: (i64, String) = match q.before {
        None => (i64::MAX, String::new()),
        Some(id) => match conn
            .prepare_cached("SELECT started_at FROM flows WHERE flow_id = ?1")?
            .query_row([id], |r| r.get::<_, i64>(0))
            .optional()?
        {
            Some(at) => (at, id.to_string()),
            // An unknown cursor names nothing to continue from.
            None => return Ok((Vec::new(), false)),
        },
    };
    let since = q.since.unwrap_or(i64::MIN);
    let take = (limit + 1) as i64;
    let mut rows = match q.key {
        None => conn
            .prepare_cached(&format!(
                "SELECT {FLOW_COLS} FROM flows f INDEXED BY flows_by_started
                 WHERE (f.started_at, f.flow_id) < (?1, ?2) AND f.started_at >= ?3
                 ORDER BY f.started_at DESC, f.flow_id DESC LIMIT ?4"
            ))?
            .query_map(params![cursor.0, cursor.1, since, take], flow_from_row)?
            .collect::<Result<Vec<_>, _>>()?,
        Some(key) => {
            let mut merged = Vec::new();
            for (column, index) in [
                ("requester", "flows_by_requester"),
                ("target", "flows_by_target"),
            ] {
                let part = conn
                    .prepare_cached(&format!(
                        "SELECT {FLOW_COLS} FROM flows f INDEXED BY {index}
                         WHERE f.{column} = ?5 AND (f.started_at, f.flow_id) < (?1, ?2)
                           AND f.started_at >= ?3
                         ORDER BY f.started_at DESC, f.flow_id DESC LIMIT ?4"
                    ))?
                    .query_map(params![cursor.0, cursor.1, since, take, key], flow_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                merged.extend(part);
            }
            merged.sort_by(|a, b| {
                (b.started_at, b.flow_id.as_str()).cmp(&(a.started_at, a.flow_id.as_str()))
            });
            // A session's exchange with itself is in both ranges.
            merged.dedup_by(|a, b| a.flow_id == b.flow_id);
            merged
        }
    };
    let more = rows.len() > limit;
    rows.truncate(limit);
    Ok((rows, more))
}

/// One exchange by id.
pub fn get(conn: &Connection, flow_id: &str) -> Result<Option<FlowRow>, StorageError> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {FLOW_COLS} FROM flows f WHERE f.flow_id = ?1"
        ))?
        .query_row([flow_id], flow_from_row)
        .optional()?)
}

/// Traffic per (requester, target, minute) of the exchanges started since `since`: a range
/// of `flows_by_started`, grouped. A send's messages are its message plus every answer.
pub fn traffic(conn: &Connection, since: i64) -> Result<Vec<TrafficRow>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.requester, f.target, (f.started_at / 60000) * 60000 AS minute, count(*),
             sum(CASE WHEN f.kind = 'send' THEN 1 + (SELECT count(*) FROM runs r
                 WHERE r.flow_id = f.flow_id AND r.step IN ('message', 'reply')) ELSE 0 END),
             sum(f.ended_reason = 'cap'), sum(f.kind = 'chain'), sum(f.kind = 'refused')
         FROM flows f INDEXED BY flows_by_started
         WHERE f.started_at >= ?1
         GROUP BY f.requester, f.target, minute
         ORDER BY minute, f.requester, f.target",
    )?;
    let rows = stmt
        .query_map([since], |r| {
            Ok(TrafficRow {
                requester: r.get(0)?,
                target: r.get(1)?,
                minute: r.get(2)?,
                exchanges: r.get(3)?,
                messages: r.get(4)?,
                capped: r.get(5)?,
                chain_stopped: r.get(6)?,
                refused: r.get(7)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement a page or traffic runs, with the plan SQLite picks.
    fn plans(conn: &Connection, sql: &str, n: usize) -> String {
        let params: Vec<rusqlite::types::Value> =
            (0..n).map(|_| rusqlite::types::Value::Integer(0)).collect();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("plan");
        let rows: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(params), |r| {
                r.get::<_, String>(3)
            })
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("plan rows");
        rows.join("\n")
    }

    /// A page is a range of an index read in order: no scan of the table, no sort of
    /// what matched (which would cost O(n) at 100,000 exchanges); the rounds subquery
    /// reads the runs of one exchange by index.
    #[test]
    fn pages_and_traffic_read_index_ranges() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        let all = format!(
            "SELECT {FLOW_COLS} FROM flows f INDEXED BY flows_by_started
             WHERE (f.started_at, f.flow_id) < (?1, ?2) AND f.started_at >= ?3
             ORDER BY f.started_at DESC, f.flow_id DESC LIMIT ?4"
        );
        let plan = plans(&conn, &all, 4);
        assert!(
            plan.contains("SEARCH f USING INDEX flows_by_started"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        assert!(plan.contains("runs_by_flow"), "{plan}");
        let one = format!(
            "SELECT {FLOW_COLS} FROM flows f INDEXED BY flows_by_target
             WHERE f.target = ?5 AND (f.started_at, f.flow_id) < (?1, ?2) AND f.started_at >= ?3
             ORDER BY f.started_at DESC, f.flow_id DESC LIMIT ?4"
        );
        let plan = plans(&conn, &one, 5);
        assert!(
            plan.contains("SEARCH f USING INDEX flows_by_target (target=? AND"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}
