//! SQL for runs, agent-to-agent flows and the outbox: the rows that let a restart tell what
//! was in flight, and what was handed to a channel.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::StorageError;

/// A run as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    pub step: String,
    pub round: u32,
    pub flow_id: Option<String>,
    pub status: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
    pub reply: Option<String>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    /// The engine instance that executes (or executed) it.
    pub owner: String,
}

/// The fields a run starts with.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub run_id: &'a str,
    pub session_key: &'a str,
    pub agent_id: &'a str,
    pub step: &'a str,
    pub round: u32,
    pub flow_id: Option<&'a str>,
    pub owner: &'a str,
    pub started_at: i64,
}

pub fn insert_run(conn: &Connection, r: &NewRun<'_>) -> Result<(), StorageError> {
    insert_run_row(conn, r, None)
}

/// Record a run that starts and ends in the same commit (a quick turn) with one insert:
/// updating a fresh `running` row would rewrite it and churn the `runs_running` index.
pub fn insert_finished_run(
    conn: &Connection,
    r: &NewRun<'_>,
    end: &RunEnd<'_>,
) -> Result<(), StorageError> {
    insert_run_row(conn, r, Some(end))
}

fn insert_run_row(
    conn: &Connection,
    r: &NewRun<'_>,
    end: Option<&RunEnd<'_>>,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO runs (run_id, session_key, agent_id, step, round, flow_id, status, owner, started_at,
                           ended_at, error, reply, tokens_in, tokens_out)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![
        r.run_id,
        r.session_key,
        r.agent_id,
        r.step,
        r.round,
        r.flow_id,
        end.map_or("running", |e| e.status),
        r.owner,
        r.started_at,
        end.map(|e| e.ended_at),
        end.and_then(|e| e.error),
        end.and_then(|e| e.reply),
        end.and_then(|e| e.tokens_in).map(|t| t as i64),
        end.and_then(|e| e.tokens_out).map(|t| t as i64),
    ])?;
    Ok(())
}

/// How a run ended.
#[derive(Debug, Clone, Default)]
pub struct RunEnd<'a> {
    pub status: &'a str,
    pub ended_at: i64,
    pub error: Option<&'a str>,
    pub reply: Option<&'a str>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
}

/// Close a run; a run already closed (by crash recovery in another process) stays as it is.
pub fn finish_run(conn: &Connection, run_id: &str, end: &RunEnd<'_>) -> Result<bool, StorageError> {
    let n = conn
        .prepare_cached(
            "UPDATE runs SET status = ?2, ended_at = ?3, error = ?4, reply = ?5, tokens_in = ?6, tokens_out = ?7
             WHERE run_id = ?1 AND status = 'running'",
        )?
        .execute(params![
            run_id,
            end.status,
            end.ended_at,
            end.error,
            end.reply,
            end.tokens_in.map(|t| t as i64),
            end.tokens_out.map(|t| t as i64)
        ])?;
    Ok(n > 0)
}

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        run_id: r.get(0)?,
        session_key: r.get(1)?,
        agent_id: r.get(2)?,
        step: r.get(3)?,
        round: r.get(4)?,
        flow_id: r.get(5)?,
        status: r.get(6)?,
        started_at: r.get(7)?,
        ended_at: r.get(8)?,
        error: r.get(9)?,
        reply: r.get(10)?,
        tokens_in: r.get::<_, Option<i64>>(11)?.map(|t| t as u64),
        tokens_out: r.get::<_, Option<i64>>(12)?.map(|t| t as u64),
        owner: r.get(13)?,
    })
}

const RUN_COLS: &str = "run_id, session_key, agent_id, step, round, flow_id, status, started_at, ended_at, error, reply, tokens_in, tokens_out, owner";

pub fn get_run(conn: &Connection, run_id: &str) -> Result<Option<RunRow>, StorageError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {RUN_COLS} FROM runs WHERE run_id = ?1"))?
        .query_row([run_id], run_from_row)
        .optional()?)
}

/// A session's runs, newest first.
pub fn runs_of(
    conn: &Connection,
    session_key: &str,
    limit: usize,
) -> Result<Vec<RunRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs WHERE session_key = ?1 ORDER BY started_at DESC, rowid DESC LIMIT ?2"
    ))?;
    let rows = stmt
        .query_map(params![session_key, limit as i64], run_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Owners with runs or flows still open.
pub fn open_owners(conn: &Connection) -> Result<Vec<String>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT owner FROM runs WHERE status = 'running'
         UNION SELECT owner FROM flows WHERE status = 'running'",
    )?;
    let rows = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(rows)
}

/// What recovery closed for one dead owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    pub runs: Vec<RunRow>,
    pub flows: Vec<String>,
}

/// Close everything a dead engine instance left open: its runs end `aborted`, its flows
/// `interrupted`. Returns what was closed, for events and logs.
pub fn close_owner(conn: &Connection, owner: &str, now: i64) -> Result<Recovered, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs WHERE status = 'running' AND owner = ?1"
    ))?;
    let runs = stmt
        .query_map([owner], run_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    conn.prepare_cached(
        "UPDATE runs SET status = 'aborted', ended_at = ?2,
             error = 'the engine stopped while this run was in progress'
         WHERE status = 'running' AND owner = ?1",
    )?
    .execute(params![owner, now])?;
    let mut stmt =
        conn.prepare_cached("SELECT flow_id FROM flows WHERE status = 'running' AND owner = ?1")?;
    let flows = stmt
        .query_map([owner], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    conn.prepare_cached(
        "UPDATE flows SET status = 'interrupted', ended_at = ?2,
             ended_reason = 'the engine stopped during the exchange'
         WHERE status = 'running' AND owner = ?1",
    )?
    .execute(params![owner, now])?;
    Ok(Recovered { runs, flows })
}

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

pub fn finish_flow(
    conn: &Connection,
    flow_id: &str,
    reason: &str,
    now: i64,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE flows SET status = 'done', ended_reason = ?2, ended_at = ?3
         WHERE flow_id = ?1 AND status = 'running'",
    )?
    .execute(params![flow_id, reason, now])?;
    Ok(())
}

/// A message handed to a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxRow {
    pub id: i64,
    pub created_at: i64,
    pub session_key: String,
    pub kind: String,
    pub channel: String,
    pub to: String,
    pub account_id: Option<String>,
    pub thread_id: Option<String>,
    pub text: String,
    pub status: String,
    pub run_id: Option<String>,
    pub flow_id: Option<String>,
}

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

/// A spawned sub-agent as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnRow {
    pub child_key: String,
    pub requester: String,
    pub run_id: String,
    pub agent_id: String,
    pub task: String,
    pub label: Option<String>,
    pub cleanup: String,
    pub mode: String,
    pub status: String,
    pub outcome: Option<String>,
    pub error: Option<String>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub announce: Option<String>,
    pub announce_state: Option<String>,
    pub announced_at: Option<i64>,
    pub archive_at: Option<i64>,
    pub archived_at: Option<i64>,
}

const SPAWN_COLS: &str = "child_key, requester, run_id, agent_id, task, label, cleanup, mode, status, outcome, error, started_at, ended_at, announce, announce_state, announced_at, archive_at, archived_at";

fn spawn_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SpawnRow> {
    Ok(SpawnRow {
        child_key: r.get(0)?,
        requester: r.get(1)?,
        run_id: r.get(2)?,
        agent_id: r.get(3)?,
        task: r.get(4)?,
        label: r.get(5)?,
        cleanup: r.get(6)?,
        mode: r.get(7)?,
        status: r.get(8)?,
        outcome: r.get(9)?,
        error: r.get(10)?,
        started_at: r.get(11)?,
        ended_at: r.get(12)?,
        announce: r.get(13)?,
        announce_state: r.get(14)?,
        announced_at: r.get(15)?,
        archive_at: r.get(16)?,
        archived_at: r.get(17)?,
    })
}

pub fn insert_spawn(conn: &Connection, s: &SpawnRow) -> Result<(), StorageError> {
    conn.prepare_cached(&format!(
        "INSERT INTO spawns ({SPAWN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
    ))?
    .execute(params![
        s.child_key,
        s.requester,
        s.run_id,
        s.agent_id,
        s.task,
        s.label,
        s.cleanup,
        s.mode,
        s.status,
        s.outcome,
        s.error,
        s.started_at,
        s.ended_at,
        s.announce,
        s.announce_state,
        s.announced_at,
        s.archive_at,
        s.archived_at
    ])?;
    Ok(())
}

/// What a child's run ended with, and the announce decided from it.
pub struct SpawnEnd<'a> {
    pub outcome: &'a str,
    pub error: Option<&'a str>,
    pub ended_at: i64,
    pub announce: Option<&'a str>,
    /// `pending` (to deliver) or `skipped` (a silent `ANNOUNCE_SKIP`).
    pub announce_state: &'a str,
}

/// Record a child's end, once: only a spawn still `running` is moved to `ended` (another
/// process may be resuming the same one). Returns whether this call decided it.
pub fn end_spawn(
    conn: &Connection,
    child_key: &str,
    e: &SpawnEnd<'_>,
) -> Result<bool, StorageError> {
    let n = conn
        .prepare_cached(
            "UPDATE spawns SET status = 'ended', outcome = ?2, error = ?3, ended_at = ?4,
                 announce = ?5, announce_state = ?6
             WHERE child_key = ?1 AND status = 'running'",
        )?
        .execute(params![
            child_key,
            e.outcome,
            e.error,
            e.ended_at,
            e.announce,
            e.announce_state
        ])?;
    Ok(n > 0)
}

/// Mark a spawn's announce delivered (or skipped) and set its archive time.
pub fn finish_spawn(
    conn: &Connection,
    child_key: &str,
    announce_state: &str,
    announced_at: i64,
    archive_at: Option<i64>,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "UPDATE spawns SET status = 'done', announce_state = ?2, announced_at = ?3, archive_at = ?4
         WHERE child_key = ?1",
    )?
    .execute(params![child_key, announce_state, announced_at, archive_at])?;
    Ok(())
}

/// Mark a spawn archived, once. Returns whether this call did it.
pub fn archive_spawn(conn: &Connection, child_key: &str, now: i64) -> Result<bool, StorageError> {
    let n = conn
        .prepare_cached(
            "UPDATE spawns SET archived_at = ?2 WHERE child_key = ?1 AND archived_at IS NULL",
        )?
        .execute(params![child_key, now])?;
    Ok(n > 0)
}

pub fn get_spawn(conn: &Connection, child_key: &str) -> Result<Option<SpawnRow>, StorageError> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SPAWN_COLS} FROM spawns WHERE child_key = ?1"
        ))?
        .query_row([child_key], spawn_from_row)
        .optional()?)
}

/// Children of `requester` still running.
pub fn running_children(conn: &Connection, requester: &str) -> Result<u32, StorageError> {
    Ok(conn
        .prepare_cached("SELECT count(*) FROM spawns WHERE requester = ?1 AND status = 'running'")?
        .query_row([requester], |r| r.get(0))?)
}

/// Spawns not yet done (running, or ended with the announce still to deliver).
pub fn open_spawns(conn: &Connection) -> Result<Vec<SpawnRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SPAWN_COLS} FROM spawns WHERE status != 'done' ORDER BY started_at"
    ))?;
    let rows = stmt
        .query_map([], spawn_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Spawns whose archive timer is set and not yet fired, soonest first.
pub fn archive_timers(conn: &Connection) -> Result<Vec<(String, i64)>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT child_key, archive_at FROM spawns
         WHERE archive_at IS NOT NULL AND archived_at IS NULL ORDER BY archive_at",
    )?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// A requester's children, newest first.
pub fn spawns_of(conn: &Connection, requester: &str) -> Result<Vec<SpawnRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SPAWN_COLS} FROM spawns WHERE requester = ?1 ORDER BY started_at DESC"
    ))?;
    let rows = stmt
        .query_map([requester], spawn_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
