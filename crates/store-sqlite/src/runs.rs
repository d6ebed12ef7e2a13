//! SQL for the `runs` table: each agent turn as started and ended, and closing what a
//! dead engine instance left running (with its exchanges) so a restart can tell what was in flight.

use super::words::word;
use rusqlite::{Connection, OptionalExtension, params};

use super::error::StorageError;
pub use switchboard_store::RunRow;

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
        step: word(r, 3)?,
        round: r.get(4)?,
        flow_id: r.get(5)?,
        status: word(r, 6)?,
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
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
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

/// The runs of one exchange, in round order (`runs_by_flow`).
pub fn runs_of_flow(conn: &Connection, flow_id: &str) -> Result<Vec<RunRow>, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs WHERE flow_id = ?1 ORDER BY round, started_at, rowid"
    ))?;
    let rows = stmt
        .query_map([flow_id], run_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Owners with runs or flows still open.
pub fn open_owners(conn: &Connection) -> Result<Vec<String>, StorageError> {
    let mut stmt = conn.prepare_cached(
        "SELECT owner FROM runs WHERE status = 'running'
         UNION SELECT owner FROM flows WHERE status = 'running'
         UNION SELECT claimed_by FROM outbox WHERE status = 'sending' AND claimed_by IS NOT NULL",
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

pub use switchboard_store::line::INTERRUPTED;

/// Close everything a dead engine instance left open: its runs end `error` with
/// `INTERRUPTED` (a failure, not an abort: nobody stopped them, and a waiting client must
/// not read it as "still going"), each with that error as an assistant line in its session's
/// transcript so history shows why no reply came; its flows end `interrupted`. Returns
/// what was closed, for events and logs.
pub fn close_owner(conn: &Connection, owner: &str, now: i64) -> Result<Recovered, StorageError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs WHERE status = 'running' AND owner = ?1"
    ))?;
    let runs = stmt
        .query_map([owner], run_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    conn.prepare_cached(
        "UPDATE runs SET status = 'error', ended_at = ?2, error = ?3
         WHERE status = 'running' AND owner = ?1",
    )?
    .execute(params![owner, now, INTERRUPTED])?;
    for run in &runs {
        record_interruption(conn, run, now)?;
    }
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
    // Deliveries it was sending: due again at once (it may have sent them: at least once).
    crate::outbox::release(conn, &[owner.to_string()], now)?;
    Ok(Recovered { runs, flows })
}

/// The failed turn's line, as a run that ends in error records it (`stopReason: "error"`,
/// `errorMessage`, the run in `__switchboard`). A session deleted since has none.
fn record_interruption(conn: &Connection, run: &RunRow, now: i64) -> Result<(), StorageError> {
    let message = switchboard_store::line::interruption_message(run, now);
    super::queries::append_message_if_present(conn, &run.session_key, message, now)?;
    Ok(())
}

/// Close what dead instances left open (`is_alive(owner)` false), one IMMEDIATE
/// transaction per owner, on the write connection before the writer starts.
pub fn close_dead_owners(
    conn: &Connection,
    now: i64,
    is_alive: impl Fn(&str) -> bool,
) -> Result<Recovered, StorageError> {
    let mut all = Recovered::default();
    for owner in open_owners(conn)? {
        if is_alive(&owner) {
            continue;
        }
        // IMMEDIATE: a deferred transaction that read first could not take the write lock
        // after another process wrote, and would fail at once instead of waiting.
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        let r = close_owner(&tx, &owner, now)?;
        tx.commit()?;
        all.runs.extend(r.runs);
        all.flows.extend(r.flows);
    }
    Ok(all)
}
