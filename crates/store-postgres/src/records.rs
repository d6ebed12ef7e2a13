//! SQL for what a run leaves behind: runs, exchanges (`flows`), spawns, the outbox,
//! idempotency keys and import marks. Stored words (statuses, kinds) are read back into the
//! API's enums; one this build does not know is an error naming the column.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::ClientWrapper;
use tokio_postgres::Row;

use crate::error::PgError;
use crate::sessions::{exec, row, rows};
use crate::text::{pg, pg_opt};
use switchboard_store::idempotency::TTL;
use switchboard_store::{
    AnnounceRecord, ExchangePageQuery, ExchangeRow, ImportMark, KeyRow, NewExchange, NewRunRecord,
    RefusedExchange, RunEnding, RunRow, SpawnEnding, SpawnRow, TrafficRow,
};
use switchboard_types::api::{AnnounceOutcome, ExchangeEnd, UnknownWord};

fn word<T: FromStr<Err = UnknownWord>>(r: &Row, idx: usize) -> Result<T, PgError> {
    let text: &str = r.try_get(idx)?;
    text.parse()
        .map_err(|e: UnknownWord| PgError::Corrupt(format!("column {idx}: {e}")))
}

fn word_opt<T: FromStr<Err = UnknownWord>>(r: &Row, idx: usize) -> Result<Option<T>, PgError> {
    let text: Option<&str> = r.try_get(idx)?;
    text.map(|t| {
        t.parse()
            .map_err(|e: UnknownWord| PgError::Corrupt(format!("column {idx}: {e}")))
    })
    .transpose()
}

fn count(r: &Row, idx: usize) -> Result<u32, PgError> {
    Ok(u32::try_from(r.try_get::<_, i64>(idx)?.max(0)).unwrap_or(u32::MAX))
}

// ---- runs ----

const RUN_COLS: &str = "run_id, session_key, agent_id, step, round, flow_id, status, started_at, \
    ended_at, error, reply, tokens_in, tokens_out, owner";

fn run_from_row(r: &Row) -> Result<RunRow, PgError> {
    Ok(RunRow {
        run_id: r.try_get(0)?,
        session_key: r.try_get(1)?,
        agent_id: r.try_get(2)?,
        step: word(r, 3)?,
        round: count(r, 4)?,
        flow_id: r.try_get(5)?,
        status: word(r, 6)?,
        started_at: r.try_get(7)?,
        ended_at: r.try_get(8)?,
        error: r.try_get(9)?,
        reply: r.try_get(10)?,
        tokens_in: r.try_get::<_, Option<i64>>(11)?.map(|t| t.max(0) as u64),
        tokens_out: r.try_get::<_, Option<i64>>(12)?.map(|t| t.max(0) as u64),
        owner: r.try_get(13)?,
    })
}

fn tokens(t: Option<u64>) -> Option<i64> {
    t.map(|t| i64::try_from(t).unwrap_or(i64::MAX))
}

/// Record a run as started, or started and ended at once (`end`).
pub async fn insert_run(
    c: &ClientWrapper,
    r: &NewRunRecord,
    end: Option<&RunEnding>,
) -> Result<(), PgError> {
    insert_run_parts(
        c,
        RunParts {
            run_id: &r.run_id,
            session_key: &r.session_key,
            agent_id: &r.agent_id,
            step: r.step.as_str(),
            round: r.round,
            flow_id: r.exchange_id.as_deref(),
            owner: &r.owner,
            started_at: r.started_at,
        },
        end,
    )
    .await
}

/// A run's starting columns (a spawn's run has no `NewRunRecord`).
pub struct RunParts<'a> {
    pub run_id: &'a str,
    pub session_key: &'a str,
    pub agent_id: &'a str,
    pub step: &'a str,
    pub round: u32,
    pub flow_id: Option<&'a str>,
    pub owner: &'a str,
    pub started_at: i64,
}

pub async fn insert_run_parts(
    c: &ClientWrapper,
    r: RunParts<'_>,
    end: Option<&RunEnding>,
) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO runs (run_id, session_key, agent_id, step, round, flow_id, status, owner,
                           started_at, ended_at, error, reply, tokens_in, tokens_out)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        &[
            &r.run_id,
            &r.session_key,
            &r.agent_id,
            &r.step,
            &i64::from(r.round),
            &r.flow_id,
            &end.map_or("running", |e| e.status.as_str()),
            &r.owner,
            &r.started_at,
            &end.map(|e| e.ended_at),
            &pg_opt(end.and_then(|e| e.error.as_deref())),
            &pg_opt(end.and_then(|e| e.reply.as_deref())),
            &tokens(end.and_then(|e| e.tokens.map(|t| t.0))),
            &tokens(end.and_then(|e| e.tokens.map(|t| t.1))),
        ],
    )
    .await?;
    Ok(())
}

/// Close a run; one already closed (by recovery elsewhere) stays. Whether this closed it.
pub async fn finish_run(c: &ClientWrapper, run_id: &str, e: &RunEnding) -> Result<bool, PgError> {
    let n = exec(
        c,
        "UPDATE runs SET status = $2, ended_at = $3, error = $4, reply = $5, tokens_in = $6,
             tokens_out = $7
         WHERE run_id = $1 AND status = 'running'",
        &[
            &run_id,
            &e.status.as_str(),
            &e.ended_at,
            &pg_opt(e.error.as_deref()),
            &pg_opt(e.reply.as_deref()),
            &tokens(e.tokens.map(|t| t.0)),
            &tokens(e.tokens.map(|t| t.1)),
        ],
    )
    .await?;
    Ok(n > 0)
}

pub async fn get_run(c: &ClientWrapper, run_id: &str) -> Result<Option<RunRow>, PgError> {
    let sql = format!("SELECT {RUN_COLS} FROM runs WHERE run_id = $1");
    row(c, &sql, &[&run_id])
        .await?
        .map(|r| run_from_row(&r))
        .transpose()
}

pub async fn runs_of(
    c: &ClientWrapper,
    session_key: &str,
    limit: usize,
) -> Result<Vec<RunRow>, PgError> {
    let sql = format!(
        "SELECT {RUN_COLS} FROM runs WHERE session_key = $1
         ORDER BY started_at DESC, n DESC LIMIT $2"
    );
    rows(c, &sql, &[&session_key, &(limit as i64)])
        .await?
        .iter()
        .map(run_from_row)
        .collect()
}

pub async fn runs_of_flow(c: &ClientWrapper, flow_id: &str) -> Result<Vec<RunRow>, PgError> {
    let sql =
        format!("SELECT {RUN_COLS} FROM runs WHERE flow_id = $1 ORDER BY round, started_at, n");
    rows(c, &sql, &[&flow_id])
        .await?
        .iter()
        .map(run_from_row)
        .collect()
}

/// Owners with runs or exchanges still open.
pub async fn open_owners(c: &ClientWrapper) -> Result<Vec<String>, PgError> {
    rows(
        c,
        "SELECT owner FROM runs WHERE status = 'running'
         UNION SELECT owner FROM flows WHERE status = 'running'",
        &[],
    )
    .await?
    .iter()
    .map(|r| Ok(r.try_get(0)?))
    .collect()
}

/// Close `owner`'s running runs (error, `INTERRUPTED`); the runs closed.
pub async fn close_owner_runs(
    c: &ClientWrapper,
    owner: &str,
    now: i64,
) -> Result<Vec<RunRow>, PgError> {
    let sql = format!(
        "UPDATE runs SET status = 'error', ended_at = $2, error = $3
         WHERE status = 'running' AND owner = $1 RETURNING {RUN_COLS}"
    );
    let closed = rows(
        c,
        &sql,
        &[&owner, &now, &switchboard_store::line::INTERRUPTED],
    )
    .await?;
    // As read before the update: still `running` to whoever reports them.
    closed
        .iter()
        .map(|r| {
            let mut run = run_from_row(r)?;
            run.status = switchboard_types::api::RunStatus::Running;
            run.ended_at = None;
            run.error = None;
            Ok(run)
        })
        .collect()
}

/// Close `owner`'s running exchanges (`interrupted`); their ids.
pub async fn close_owner_flows(
    c: &ClientWrapper,
    owner: &str,
    now: i64,
) -> Result<Vec<String>, PgError> {
    rows(
        c,
        "UPDATE flows SET status = 'interrupted', ended_at = $2,
             ended_reason = 'the engine stopped during the exchange'
         WHERE status = 'running' AND owner = $1 RETURNING flow_id",
        &[&owner, &now],
    )
    .await?
    .iter()
    .map(|r| Ok(r.try_get(0)?))
    .collect()
}

// ---- exchanges ----

pub async fn insert_flow(c: &ClientWrapper, x: &NewExchange) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status,
                            owner, started_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8)",
        &[
            &x.exchange_id,
            &x.chain_id,
            &x.requester,
            &x.target,
            &pg(&x.message),
            &x.run_id,
            &x.owner,
            &x.started_at,
        ],
    )
    .await?;
    Ok(())
}

pub async fn finish_flow(
    c: &ClientWrapper,
    flow_id: &str,
    reason: ExchangeEnd,
    detail: Option<&str>,
    now: i64,
) -> Result<(), PgError> {
    exec(
        c,
        "UPDATE flows SET status = 'done', ended_reason = $2, ended_at = $3,
             detail = coalesce($4, detail)
         WHERE flow_id = $1 AND status = 'running'",
        &[&flow_id, &reason.as_str(), &now, &pg_opt(detail)],
    )
    .await?;
    Ok(())
}

pub async fn insert_refused(c: &ClientWrapper, f: &RefusedExchange) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status,
                            owner, started_at, ended_at, ended_reason, kind, detail)
         VALUES ($1, $2, $3, $4, $5, $6, 'refused', $7, $8, $8, $9, $10, $11)",
        &[
            &f.exchange_id,
            &f.chain_id,
            &f.requester,
            &f.target,
            &pg(&f.message),
            &f.run_id,
            &f.owner,
            &f.at,
            &f.reason.as_str(),
            &f.kind.as_str(),
            &pg(&f.detail),
        ],
    )
    .await?;
    Ok(())
}

pub async fn record_announce(
    c: &ClientWrapper,
    flow_id: &str,
    loop_detail: &str,
    a: &AnnounceRecord,
) -> Result<(), PgError> {
    exec(
        c,
        "UPDATE flows SET detail = $2, announce = $3, announce_text = $4,
             announce_channel = $5, announce_to = $6, announce_detail = $7
         WHERE flow_id = $1",
        &[
            &flow_id,
            &pg(loop_detail),
            &a.outcome.as_str(),
            &pg_opt(a.text.as_deref()),
            &pg_opt(a.channel.as_deref()),
            &pg_opt(a.to.as_deref()),
            &pg(&a.detail),
        ],
    )
    .await?;
    Ok(())
}

const FLOW_COLS: &str = "f.flow_id, f.kind, f.chain_id, f.requester, f.target, f.message, \
    f.status, f.started_at, f.ended_at, f.ended_reason, f.detail, \
    (SELECT count(*) FROM runs r WHERE r.flow_id = f.flow_id AND r.step IN ('message', 'reply')), \
    f.announce, f.announce_text, f.announce_channel, f.announce_to, f.announce_detail";

fn flow_from_row(r: &Row) -> Result<ExchangeRow, PgError> {
    let outcome: Option<AnnounceOutcome> = word_opt(r, 12)?;
    // A reason is free to grow: one this build does not know reads as `Unknown`.
    let ended_reason: Option<&str> = r.try_get(9)?;
    Ok(ExchangeRow {
        flow_id: r.try_get(0)?,
        kind: word(r, 1)?,
        chain_id: r.try_get(2)?,
        requester: r.try_get(3)?,
        target: r.try_get(4)?,
        message: r.try_get(5)?,
        status: word(r, 6)?,
        started_at: r.try_get(7)?,
        ended_at: r.try_get(8)?,
        ended_reason: ended_reason.map(|e| e.parse().unwrap_or(ExchangeEnd::Unknown)),
        detail: r.try_get(10)?,
        rounds: count(r, 11)?,
        announce: match outcome {
            Some(outcome) => Some(AnnounceRecord {
                outcome,
                text: r.try_get(13)?,
                channel: r.try_get(14)?,
                to: r.try_get(15)?,
                detail: r.try_get::<_, Option<String>>(16)?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

pub async fn get_flow(c: &ClientWrapper, flow_id: &str) -> Result<Option<ExchangeRow>, PgError> {
    let sql = format!("SELECT {FLOW_COLS} FROM flows f WHERE f.flow_id = $1");
    row(c, &sql, &[&flow_id])
        .await?
        .map(|r| flow_from_row(&r))
        .transpose()
}

/// A page of exchanges, newest first (by start, then id), and whether older ones match:
/// index ranges, one session's page merging its requester and target ranges.
pub async fn page_flows(
    c: &ClientWrapper,
    q: &ExchangePageQuery,
) -> Result<(Vec<ExchangeRow>, bool), PgError> {
    let limit = q.limit.max(1);
    let cursor: (i64, String) = match &q.before {
        None => (i64::MAX, String::new()),
        Some(id) => match row(c, "SELECT started_at FROM flows WHERE flow_id = $1", &[id]).await? {
            Some(r) => (r.try_get(0)?, id.clone()),
            // An unknown cursor names nothing to continue from.
            None => return Ok((Vec::new(), false)),
        },
    };
    let since = q.since.unwrap_or(i64::MIN);
    let take = (limit + 1) as i64;
    let mut found = match &q.key {
        None => {
            let sql = format!(
                "SELECT {FLOW_COLS} FROM flows f
                 WHERE (f.started_at, f.flow_id) < ($1, $2::text) AND f.started_at >= $3
                 ORDER BY f.started_at DESC, f.flow_id DESC LIMIT $4"
            );
            rows(c, &sql, &[&cursor.0, &cursor.1, &since, &take])
                .await?
                .iter()
                .map(flow_from_row)
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(key) => {
            let mut merged = Vec::new();
            for column in ["requester", "target"] {
                let sql = format!(
                    "SELECT {FLOW_COLS} FROM flows f
                     WHERE f.{column} = $5 AND (f.started_at, f.flow_id) < ($1, $2::text)
                       AND f.started_at >= $3
                     ORDER BY f.started_at DESC, f.flow_id DESC LIMIT $4"
                );
                for r in rows(c, &sql, &[&cursor.0, &cursor.1, &since, &take, key]).await? {
                    merged.push(flow_from_row(&r)?);
                }
            }
            merged.sort_by(|a, b| {
                (b.started_at, b.flow_id.as_str()).cmp(&(a.started_at, a.flow_id.as_str()))
            });
            // A session's exchange with itself is in both ranges.
            merged.dedup_by(|a, b| a.flow_id == b.flow_id);
            merged
        }
    };
    let more = found.len() > limit;
    found.truncate(limit);
    Ok((found, more))
}

pub async fn traffic(c: &ClientWrapper, since: i64) -> Result<Vec<TrafficRow>, PgError> {
    rows(
        c,
        "SELECT f.requester, f.target, (f.started_at / 60000) * 60000 AS minute, count(*),
             coalesce(sum(CASE WHEN f.kind = 'send' THEN 1 + (SELECT count(*) FROM runs r
                 WHERE r.flow_id = f.flow_id AND r.step IN ('message', 'reply')) ELSE 0 END), 0)::bigint,
             count(*) FILTER (WHERE f.ended_reason = 'cap'),
             count(*) FILTER (WHERE f.kind = 'chain'),
             count(*) FILTER (WHERE f.kind = 'refused')
         FROM flows f WHERE f.started_at >= $1
         GROUP BY f.requester, f.target, minute
         ORDER BY minute, f.requester, f.target",
        &[&since],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(TrafficRow {
            requester: r.try_get(0)?,
            target: r.try_get(1)?,
            minute: r.try_get(2)?,
            exchanges: count(r, 3)?,
            messages: count(r, 4)?,
            capped: count(r, 5)?,
            chain_stopped: count(r, 6)?,
            refused: count(r, 7)?,
        })
    })
    .collect()
}

// ---- spawns ----

const SPAWN_COLS: &str = "child_key, requester, run_id, agent_id, task, label, cleanup, mode, \
    status, outcome, error, started_at, ended_at, announce, announce_state, announced_at, \
    archive_at, archived_at";

fn spawn_from_row(r: &Row) -> Result<SpawnRow, PgError> {
    Ok(SpawnRow {
        child_key: r.try_get(0)?,
        requester: r.try_get(1)?,
        run_id: r.try_get(2)?,
        agent_id: r.try_get(3)?,
        task: r.try_get(4)?,
        label: r.try_get(5)?,
        cleanup: word(r, 6)?,
        mode: r.try_get(7)?,
        status: word(r, 8)?,
        outcome: r.try_get(9)?,
        error: r.try_get(10)?,
        started_at: r.try_get(11)?,
        ended_at: r.try_get(12)?,
        announce: r.try_get(13)?,
        announce_state: r.try_get(14)?,
        announced_at: r.try_get(15)?,
        archive_at: r.try_get(16)?,
        archived_at: r.try_get(17)?,
    })
}

pub async fn insert_spawn(c: &ClientWrapper, s: &SpawnRow) -> Result<(), PgError> {
    let sql = format!(
        "INSERT INTO spawns ({SPAWN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
         $11, $12, $13, $14, $15, $16, $17, $18)"
    );
    exec(
        c,
        &sql,
        &[
            &s.child_key,
            &s.requester,
            &s.run_id,
            &s.agent_id,
            &pg(&s.task),
            &pg_opt(s.label.as_deref()),
            &s.cleanup.as_str(),
            &pg(&s.mode),
            &s.status.as_str(),
            &pg_opt(s.outcome.as_deref()),
            &pg_opt(s.error.as_deref()),
            &s.started_at,
            &s.ended_at,
            &pg_opt(s.announce.as_deref()),
            &pg_opt(s.announce_state.as_deref()),
            &s.announced_at,
            &s.archive_at,
            &s.archived_at,
        ],
    )
    .await?;
    Ok(())
}

pub async fn end_spawn(
    c: &ClientWrapper,
    child_key: &str,
    e: &SpawnEnding,
) -> Result<bool, PgError> {
    let n = exec(
        c,
        "UPDATE spawns SET status = 'ended', outcome = $2, error = $3, ended_at = $4,
             announce = $5, announce_state = $6
         WHERE child_key = $1 AND status = 'running'",
        &[
            &child_key,
            &pg(&e.outcome),
            &pg_opt(e.error.as_deref()),
            &e.ended_at,
            &pg_opt(e.announce.as_deref()),
            &pg(&e.announce_state),
        ],
    )
    .await?;
    Ok(n > 0)
}

pub async fn finish_spawn(
    c: &ClientWrapper,
    child_key: &str,
    announce_state: &str,
    announced_at: i64,
    archive_at: Option<i64>,
) -> Result<(), PgError> {
    exec(
        c,
        "UPDATE spawns SET status = 'done', announce_state = $2, announced_at = $3,
             archive_at = $4
         WHERE child_key = $1",
        &[&child_key, &announce_state, &announced_at, &archive_at],
    )
    .await?;
    Ok(())
}

pub async fn archive_spawn(c: &ClientWrapper, child_key: &str, now: i64) -> Result<bool, PgError> {
    let n = exec(
        c,
        "UPDATE spawns SET archived_at = $2 WHERE child_key = $1 AND archived_at IS NULL",
        &[&child_key, &now],
    )
    .await?;
    Ok(n > 0)
}

/// The spawn at `child_key`; `lock` holds its row until the transaction ends.
pub async fn get_spawn(
    c: &ClientWrapper,
    child_key: &str,
    lock: bool,
) -> Result<Option<SpawnRow>, PgError> {
    let sql = format!(
        "SELECT {SPAWN_COLS} FROM spawns WHERE child_key = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    row(c, &sql, &[&child_key])
        .await?
        .map(|r| spawn_from_row(&r))
        .transpose()
}

pub async fn running_children(c: &ClientWrapper, requester: &str) -> Result<u32, PgError> {
    let found = rows(
        c,
        "SELECT count(*) FROM spawns WHERE requester = $1 AND status = 'running'",
        &[&requester],
    )
    .await?;
    count(&found[0], 0)
}

async fn spawn_list(
    c: &ClientWrapper,
    filter_order: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<SpawnRow>, PgError> {
    let sql = format!("SELECT {SPAWN_COLS} FROM spawns {filter_order}");
    rows(c, &sql, params)
        .await?
        .iter()
        .map(spawn_from_row)
        .collect()
}

pub async fn open_spawns(c: &ClientWrapper) -> Result<Vec<SpawnRow>, PgError> {
    spawn_list(c, "WHERE status != 'done' ORDER BY started_at", &[]).await
}

pub async fn spawns_of(c: &ClientWrapper, requester: &str) -> Result<Vec<SpawnRow>, PgError> {
    spawn_list(
        c,
        "WHERE requester = $1 ORDER BY started_at DESC",
        &[&requester],
    )
    .await
}

pub async fn archive_timers(c: &ClientWrapper) -> Result<Vec<(String, i64)>, PgError> {
    rows(
        c,
        "SELECT child_key, archive_at FROM spawns
         WHERE archive_at IS NOT NULL AND archived_at IS NULL ORDER BY archive_at",
        &[],
    )
    .await?
    .iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
    .collect()
}

// ---- idempotency ----

/// The most keys kept; past it the oldest go (as the SQLite store's cap).
const MAX_KEYS: i64 = 100_000;
/// How often (in inserts, this process) the cap is checked.
const CAP_EVERY: u64 = 1024;
static INSERTS: AtomicU64 = AtomicU64::new(0);

fn expired_before(now: i64) -> i64 {
    now.saturating_sub(TTL.as_millis() as i64)
}

pub async fn find_key(c: &ClientWrapper, key: &str, now: i64) -> Result<Option<KeyRow>, PgError> {
    row(
        c,
        "SELECT key, session_key, message_hash, run_id, seq, command_reply, created_at
         FROM idempotency_keys WHERE key = $1 AND created_at > $2",
        &[&pg(key), &expired_before(now)],
    )
    .await?
    .map(|r| {
        Ok(KeyRow {
            key: r.try_get(0)?,
            session_key: r.try_get(1)?,
            message_hash: r.try_get(2)?,
            run_id: r.try_get(3)?,
            seq: r.try_get(4)?,
            command_reply: r.try_get(5)?,
            created_at: r.try_get(6)?,
        })
    })
    .transpose()
}

pub async fn insert_key(c: &ClientWrapper, k: &KeyRow) -> Result<(), PgError> {
    exec(
        c,
        "DELETE FROM idempotency_keys WHERE created_at <= $1",
        &[&expired_before(k.created_at)],
    )
    .await?;
    exec(
        c,
        "INSERT INTO idempotency_keys (key, session_key, message_hash, run_id, seq,
                                       command_reply, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (key) DO UPDATE SET session_key = excluded.session_key,
           message_hash = excluded.message_hash, run_id = excluded.run_id, seq = excluded.seq,
           command_reply = excluded.command_reply, created_at = excluded.created_at",
        &[
            &pg(&k.key),
            &k.session_key,
            &k.message_hash,
            &k.run_id,
            &k.seq,
            &pg_opt(k.command_reply.as_deref()),
            &k.created_at,
        ],
    )
    .await?;
    // The cap, as the SQLite store keeps it: checked every `CAP_EVERY` inserts (the check
    // walks up to `MAX_KEYS` index entries), expired rows going on every insert above.
    if INSERTS
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(CAP_EVERY)
    {
        exec(
            c,
            "DELETE FROM idempotency_keys WHERE created_at < (SELECT created_at
                 FROM idempotency_keys ORDER BY created_at DESC LIMIT 1 OFFSET $1)",
            &[&MAX_KEYS],
        )
        .await?;
    }
    Ok(())
}

// ---- import marks ----

pub async fn all_marks(c: &ClientWrapper) -> Result<Vec<ImportMark>, PgError> {
    rows(
        c,
        "SELECT session_key, session_id, source_file, source_size, source_mtime_ns,
                source_entry_hash, entry_hash, last_seq FROM import_marks",
        &[],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(ImportMark {
            session_key: r.try_get(0)?,
            session_id: r.try_get(1)?,
            source_file: r.try_get(2)?,
            source_size: r.try_get(3)?,
            source_mtime_ns: r.try_get(4)?,
            source_entry_hash: r.try_get(5)?,
            entry_hash: r.try_get(6)?,
            last_seq: r.try_get(7)?,
        })
    })
    .collect()
}

pub async fn put_mark(c: &ClientWrapper, m: &ImportMark) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO import_marks (session_key, session_id, source_file, source_size,
            source_mtime_ns, source_entry_hash, entry_hash, last_seq)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id,
           source_file = excluded.source_file, source_size = excluded.source_size,
           source_mtime_ns = excluded.source_mtime_ns,
           source_entry_hash = excluded.source_entry_hash, entry_hash = excluded.entry_hash,
           last_seq = excluded.last_seq",
        &[
            &m.session_key,
            &m.session_id,
            &m.source_file,
            &m.source_size,
            &m.source_mtime_ns,
            &m.source_entry_hash,
            &m.entry_hash,
            &m.last_seq,
        ],
    )
    .await?;
    Ok(())
}
