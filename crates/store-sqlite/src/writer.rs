//! The single writer: one thread owns the write connection and commits whatever jobs are
//! pending as one transaction (group commit), answering each caller only after the commit.
//!
//! A batch first runs every job back to back with no savepoints (the common case: nothing
//! fails). If any job fails, the whole transaction is rolled back and the batch is replayed
//! with a savepoint around each job, so one failing job undoes only its own changes. That is
//! why jobs are `FnMut`: a job may run twice, and only the last run's result counts.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::error::{BUSY_TIMEOUT, StorageError};
use super::schema::WAL_LIMIT_BYTES;
use super::tail_cache;

/// How many jobs one transaction takes at most; bounds the latency of the first job.
const MAX_BATCH: usize = 4096;

/// A unit of work for the writer. `run` executes inside the open transaction and keeps its
/// result; `reply` hands the kept result to the caller once the commit's fate is known.
pub(crate) trait Job: Send {
    /// Run (again); returns whether it succeeded.
    fn run(&mut self, conn: &Connection) -> bool;
    /// The error of the last run, if it failed.
    fn error(&self) -> Option<StorageError>;
    fn reply(self: Box<Self>, commit: Result<(), StorageError>);
}

struct TypedJob<R, F> {
    op: F,
    result: Option<Result<R, StorageError>>,
    reply: oneshot::Sender<Result<R, StorageError>>,
}

impl<R, F> Job for TypedJob<R, F>
where
    R: Send + 'static,
    F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let result = (self.op)(conn);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn error(&self) -> Option<StorageError> {
        match &self.result {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    fn reply(self: Box<Self>, commit: Result<(), StorageError>) {
        let TypedJob { op, result, reply } = *self;
        // Release what the job captured before the caller wakes, so it can take back
        // shared data without copying it.
        drop(op);
        let outcome = match (commit, result) {
            (Ok(()), Some(r)) => r,
            (Ok(()), None) => Err(StorageError::Sqlite("write job never ran".into())),
            (Err(e), _) => Err(e),
        };
        // The caller may have gone away (e.g. a timed-out wait); the write still happened.
        let _ = reply.send(outcome);
    }
}

/// Handle to the writer thread. Dropping it lets the thread drain what is queued, run a
/// closing checkpoint and close; the drop waits for that (unless it runs on the writer thread
/// itself), so a process that exits right after cannot leave its log behind unchecked.
pub(crate) struct Writer {
    tx: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(handle) = self.thread.take()
            && handle.thread().id() != thread::current().id()
        {
            let _ = handle.join();
        }
    }
}

impl Writer {
    /// Start the writer on `conn`. With a `checkpointer` connection, WAL checkpoints run on
    /// their own thread (the writer's automatic checkpoints are turned off), so copying pages
    /// back into the database never stalls group commit. `wal` is the log file's path.
    pub fn start(
        conn: Connection,
        checkpointer: Option<Connection>,
        wal: PathBuf,
        external: tokio::sync::watch::Sender<u64>,
    ) -> Result<Writer, StorageError> {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let ckpt = match checkpointer {
            Some(ckpt) => {
                conn.pragma_update(None, "wal_autocheckpoint", 0)?;
                ckpt.busy_timeout(CHECKPOINT_WAIT)?;
                let (nudge, wake) = mpsc::sync_channel::<()>(1);
                let wal = wal.clone();
                let handle = thread::Builder::new()
                    .name("switchboard-checkpoint".into())
                    .spawn(move || checkpoint_loop(ckpt, wake, &wal))
                    .map_err(|e| StorageError::Thread(e.to_string()))?;
                Some((nudge, handle))
            }
            None => None,
        };
        let thread = thread::Builder::new()
            .name("switchboard-writer".into())
            .spawn(move || writer_loop(conn, rx, ckpt, &wal, &external))
            .map_err(|e| StorageError::Thread(e.to_string()))?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queue `op`; the receiver yields its result after the batch holding it commits.
    pub fn submit<R, F>(&self, op: F) -> oneshot::Receiver<Result<R, StorageError>>
    where
        R: Send + 'static,
        F: FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(TypedJob {
            op,
            result: None,
            reply,
        });
        match &self.tx {
            Some(tx) => {
                if let Err(mpsc::SendError(job)) = tx.send(job) {
                    job.reply(Err(StorageError::WriterGone));
                }
            }
            None => job.reply(Err(StorageError::WriterGone)),
        }
        rx
    }
}

/// The least time between two checkpoints: a burst's commits share one checkpoint instead of
/// each paying for its own, and the WAL grows by at most what this long of writing adds.
const CHECKPOINT_SPACING: Duration = Duration::from_millis(200);

/// Jobs committed between checkpoint requests: about SQLite's default of one checkpoint per
/// 1,000 WAL pages, since a job writes a page or more. Checkpointing after every commit would
/// put a second fsync beside each lone append's.
const CHECKPOINT_EVERY_JOBS: usize = 1000;

/// How long a truncating checkpoint waits for readers (and holds off writers meanwhile)
/// before giving up until the next round. Short, since writers of every process wait too.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(2);

/// The log's size on disk (0 when there is none).
fn wal_size(wal: &Path) -> u64 {
    std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
}

/// After a truncating checkpoint gave up (a reader stayed on the log), none is tried for
/// this long: each attempt holds off every process's writers while it waits, so retrying
/// after every batch would throttle them all behind one slow reader.
const TRUNCATE_BACKOFF: Duration = Duration::from_secs(5);

/// One checkpoint. PASSIVE copies what no reader still needs and never waits. Past the size
/// limit (and `may_truncate`), TRUNCATE also waits (briefly) for readers to move off the log
/// and empties it, so the file shrinks even when passive rounds keep being overtaken by other
/// processes. Returns whether a truncating checkpoint was tried and could not finish.
fn checkpoint(conn: &Connection, wal: &Path, may_truncate: bool) -> bool {
    let size = wal_size(wal);
    if size == 0 {
        return false;
    }
    let mode = if may_truncate && size >= WAL_LIMIT_BYTES {
        "TRUNCATE"
    } else {
        "PASSIVE"
    };
    let done = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    let blocked = match done {
        Ok((busy, log, copied)) => {
            tracing::trace!(mode, size, busy, log, copied, "checkpoint");
            busy != 0
        }
        Err(e) => {
            tracing::warn!(error = %e, mode, "checkpoint failed; will retry");
            true
        }
    };
    if blocked && mode == "TRUNCATE" {
        tracing::info!(
            size,
            "the log could not be truncated: a reader is still on it"
        );
    }
    blocked && mode == "TRUNCATE"
}

fn checkpoint_loop(conn: Connection, wake: mpsc::Receiver<()>, wal: &Path) {
    let mut last: Option<Instant> = None;
    while wake.recv().is_ok() {
        if let Some(rest) = last.and_then(|t| CHECKPOINT_SPACING.checked_sub(t.elapsed())) {
            // Wait out the spacing, but leave at once when the writer stops: it runs the
            // closing checkpoint itself.
            if let Err(mpsc::RecvTimeoutError::Disconnected) = wake.recv_timeout(rest) {
                break;
            }
        }
        checkpoint(&conn, wal, false);
        last = Some(Instant::now());
    }
}

/// Past the size limit the writer truncates the log itself, between two batches: it then
/// holds no lock, whereas a checkpoint on another thread would have to catch the write lock
/// in the moments between this writer's transactions, and under a steady stream of writes
/// it never does. Writes wait meanwhile (back-pressure); a reader that keeps the log from
/// being emptied turns this off for `TRUNCATE_BACKOFF`.
fn truncate_if_big(conn: &Connection, wal: &Path, failed: &mut Option<Instant>) {
    if wal_size(wal) < WAL_LIMIT_BYTES || failed.is_some_and(|t| t.elapsed() < TRUNCATE_BACKOFF) {
        return;
    }
    let _ = conn.busy_timeout(CHECKPOINT_WAIT);
    *failed = checkpoint(conn, wal, true).then(Instant::now);
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
}

/// How often an idle writer looks for other processes' commits.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// SQLite's `data_version` on the writer's connection: it changes only when another
/// connection commits, and this process's only writing connection is this one, so a change
/// is another process's write.
fn data_version(conn: &Connection) -> Option<i64> {
    conn.prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .ok()
}

/// Count one more external change when `data_version` moved since `seen`.
fn watch_external(
    conn: &Connection,
    seen: &mut Option<i64>,
    external: &tokio::sync::watch::Sender<u64>,
) {
    let now = data_version(conn);
    if now.is_some() && *seen != now {
        if seen.is_some() {
            external.send_modify(|n| *n += 1);
        }
        *seen = now;
    }
}

fn writer_loop(
    conn: Connection,
    rx: mpsc::Receiver<Box<dyn Job>>,
    ckpt: Option<(mpsc::SyncSender<()>, thread::JoinHandle<()>)>,
    wal: &Path,
    external: &tokio::sync::watch::Sender<u64>,
) {
    let mut since_nudge = 0usize;
    let mut truncate_failed = None;
    let mut seen = data_version(&conn);
    let mut last_watch = Instant::now();
    loop {
        let first = match rx.recv_timeout(WATCH_EVERY) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                watch_external(&conn, &mut seen, external);
                last_watch = Instant::now();
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Busy, the check runs at most every `WATCH_EVERY` too (before a batch, never
        // inside one): once per batch cost a ping-pong exchange about a third more.
        if last_watch.elapsed() >= WATCH_EVERY {
            watch_external(&conn, &mut seen, external);
            last_watch = Instant::now();
        }
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        since_nudge += batch.len();
        commit_batch(&conn, batch);
        if ckpt.is_some() {
            truncate_if_big(&conn, wal, &mut truncate_failed);
        }
        if let Some((nudge, _)) = &ckpt
            && since_nudge >= CHECKPOINT_EVERY_JOBS
        {
            // Full means a checkpoint is already due; it will see this commit too.
            let _ = nudge.try_send(());
            since_nudge = 0;
        }
    }
    // Closing: whatever this process wrote is copied into the database now. Without this a
    // short-lived process (one `inject`) would never checkpoint, and while any other process
    // keeps the database open no close is the last one, so the log would only grow.
    if let Some((nudge, handle)) = ckpt {
        drop(nudge);
        let _ = handle.join();
        let _ = conn.busy_timeout(CHECKPOINT_WAIT);
        checkpoint(&conn, wal, true);
    }
}

fn commit_batch(conn: &Connection, mut batch: Vec<Box<dyn Job>>) {
    // The store's write latency for `/metrics`: one transaction, fsync included.
    let began = std::time::Instant::now();
    let jobs = batch.len();
    let commit = match run_batch(conn, &mut batch) {
        Ok(()) => commit(conn),
        Err(e) => {
            // Harmless if no transaction is open (BEGIN itself failed).
            let _ = conn.execute_batch("ROLLBACK");
            tail_cache::disarm();
            Err(e)
        }
    };
    metrics::histogram!("switchboard_store_write_seconds").record(began.elapsed().as_secs_f64());
    metrics::histogram!("switchboard_store_write_batch_jobs").record(jobs as f64);
    if commit.is_err() {
        metrics::counter!("switchboard_store_write_failures_total").increment(1);
    }
    for job in batch {
        job.reply(commit.clone());
    }
}

/// Run every job inside one open transaction: fast path first, savepoint replay on failure.
fn run_batch(conn: &Connection, batch: &mut [Box<dyn Job>]) -> Result<(), StorageError> {
    begin(conn)?;
    if batch.iter_mut().all(|job| job.run(conn)) {
        return Ok(());
    }
    // `all` stopped at the first failure; the jobs after it never ran. Start over with a
    // savepoint around each job so the failure cannot take the others' changes with it.
    tracing::debug!(
        jobs = batch.len(),
        "a write job failed; replaying the batch"
    );
    // SQLite itself may have rolled the transaction back (disk full, I/O error).
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    tail_cache::disarm();
    begin(conn)?;
    for job in batch.iter_mut() {
        exec_cached(conn, "SAVEPOINT job")?;
        let ok = job.run(conn);
        if !ok {
            if conn.is_autocommit() {
                // The failure took the whole transaction with it, the other jobs' changes
                // too: the batch fails with that failure's own kind (e.g. disk full).
                tail_cache::disarm();
                return Err(job.error().unwrap_or_else(|| {
                    StorageError::Sqlite("the transaction was rolled back".into())
                }));
            }
            exec_cached(conn, "ROLLBACK TO job")?;
            tail_cache::invalidate();
        }
        exec_cached(conn, "RELEASE job")?;
    }
    Ok(())
}

fn begin(conn: &Connection) -> Result<(), StorageError> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| {
        tracing::error!(error = %e, "cannot open a write transaction");
        StorageError::from(e)
    })?;
    tail_cache::arm();
    Ok(())
}

fn commit(conn: &Connection) -> Result<(), StorageError> {
    tail_cache::disarm();
    conn.execute_batch("COMMIT").map_err(|e| {
        tracing::error!(error = %e, "commit failed; rolling back the batch");
        let _ = conn.execute_batch("ROLLBACK");
        StorageError::from(e)
    })
}

fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    // Cached: these run once per job on the slow path, so re-parsing them would show.
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job<R: Send + 'static>(
        op: impl FnMut(&Connection) -> Result<R, StorageError> + Send + 'static,
    ) -> (Box<dyn Job>, oneshot::Receiver<Result<R, StorageError>>) {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(TypedJob {
            op,
            result: None,
            reply,
        });
        (job, rx)
    }

    fn insert(n: i64) -> impl FnMut(&Connection) -> Result<i64, StorageError> + Send + 'static {
        move |c| {
            c.execute("INSERT INTO t (n) VALUES (?1)", [n])?;
            Ok(n)
        }
    }

    #[test]
    fn a_failing_job_undoes_only_its_own_changes() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY)")
            .expect("schema");
        let (a, ra) = job(insert(1));
        // Writes a row, then fails: the row must not survive.
        let (b, rb) = job(|c: &Connection| -> Result<(), StorageError> {
            c.execute("INSERT INTO t (n) VALUES (2)", [])?;
            Err(StorageError::Rejected("no".into()))
        });
        let (c, rc) = job(insert(3));
        // A constraint violation is a failure too.
        let (d, rd) = job(insert(1));
        let (e, re) = job(insert(5));
        commit_batch(&conn, vec![a, b, c, d, e]);

        assert_eq!(ra.blocking_recv().expect("reply").expect("a"), 1);
        assert!(matches!(
            rb.blocking_recv().expect("reply"),
            Err(StorageError::Rejected(_))
        ));
        assert_eq!(rc.blocking_recv().expect("reply").expect("c"), 3);
        assert!(rd.blocking_recv().expect("reply").is_err());
        assert_eq!(re.blocking_recv().expect("reply").expect("e"), 5);
        let rows: Vec<i64> = conn
            .prepare("SELECT n FROM t ORDER BY n")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(rows, vec![1, 3, 5]);
        assert!(conn.is_autocommit(), "the transaction was closed");
    }

    #[test]
    fn a_failure_that_ends_the_transaction_fails_the_batch_with_its_own_kind() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY, b BLOB)")
            .expect("schema");
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("pages");
        conn.pragma_update(None, "max_page_count", pages + 2)
            .expect("limit");
        let (a, ra) = job(insert(1));
        // Too big for the space left: SQLite rolls the whole transaction back itself.
        let (b, rb) = job(|c: &Connection| -> Result<(), StorageError> {
            c.execute("INSERT INTO t (n, b) VALUES (2, zeroblob(1000000))", [])?;
            Ok(())
        });
        commit_batch(&conn, vec![a, b]);
        for reply in [
            ra.blocking_recv().expect("reply").map(|_| ()),
            rb.blocking_recv().expect("reply"),
        ] {
            assert!(matches!(reply, Err(StorageError::DiskFull(_))), "{reply:?}");
        }
        assert!(conn.is_autocommit(), "no transaction is left open");
        // The next batch works.
        let (c, rc) = job(insert(3));
        commit_batch(&conn, vec![c]);
        assert_eq!(rc.blocking_recv().expect("reply").expect("c"), 3);
    }

    #[test]
    fn a_batch_without_failures_commits_every_job() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY)")
            .expect("schema");
        let (jobs, replies): (Vec<_>, Vec<_>) = (0..100).map(|n| job(insert(n))).unzip();
        commit_batch(&conn, jobs);
        for (n, rx) in replies.into_iter().enumerate() {
            assert_eq!(rx.blocking_recv().expect("reply").expect("ok"), n as i64);
        }
        let count: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(count, 100);
    }
}

#[cfg(test)]
mod tail_tests {
    use super::*;
    use crate::queries::{self, NewLine};
    use serde_json::json;
    use switchboard_types::key::SessionKey;

    type Reply = oneshot::Receiver<Result<Vec<i64>, StorageError>>;

    fn append(key: &'static str, fail_after: bool) -> (Box<dyn Job>, Reply) {
        let (reply, rx) = oneshot::channel();
        let op = move |c: &Connection| {
            let key = SessionKey::from_canonical(key.to_string());
            let line = NewLine::message(json!({"role": "user", "content": "x"}));
            let (_, rows) = queries::append_lines(c, &key, &[line], 1)?;
            if fail_after {
                return Err(StorageError::Rejected("after append".into()));
            }
            Ok(rows.iter().map(|r| r.seq).collect())
        };
        let job = Box::new(TypedJob {
            op,
            result: None,
            reply,
        });
        (job, rx)
    }

    #[test]
    fn appends_in_one_batch_stay_dense_when_a_job_in_between_is_undone() {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::schema::migrate(&mut conn).expect("migrate");
        conn.execute(
            "INSERT INTO sessions (key, session_id, agent_id, kind, updated_at, entry)
             VALUES ('agent:main:a', 'sid-a', 'main', 'other', 0, '{}')",
            [],
        )
        .expect("session");
        let (jobs, replies): (Vec<_>, Vec<_>) = [
            append("agent:main:a", false),
            append("agent:main:a", true),
            append("agent:main:a", false),
            append("agent:main:a", true),
            append("agent:main:a", false),
        ]
        .into_iter()
        .unzip();
        commit_batch(&conn, jobs);
        let got: Vec<Option<Vec<i64>>> = replies
            .into_iter()
            .map(|r| r.blocking_recv().expect("reply").ok())
            .collect();
        assert_eq!(
            got,
            vec![Some(vec![1]), None, Some(vec![2]), None, Some(vec![3])]
        );
        // Each line's parent is the line before it: no link to an undone line.
        let rows: Vec<(i64, String)> = conn
            .prepare("SELECT seq, line FROM transcript WHERE session_id = 'sid-a' ORDER BY seq")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let lines: Vec<serde_json::Value> = rows
            .iter()
            .map(|(_, l)| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(lines[0]["parentId"], serde_json::Value::Null);
        assert_eq!(lines[1]["parentId"], lines[0]["id"]);
        assert_eq!(lines[2]["parentId"], lines[1]["id"]);
    }
}
