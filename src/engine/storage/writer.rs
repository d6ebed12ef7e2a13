//! The single writer: one thread owns the write connection and commits whatever jobs are
//! pending as one transaction (group commit), answering each caller only after the commit.

use std::sync::mpsc;
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::StorageError;

/// How many jobs one transaction takes at most; bounds the latency of the first job.
const MAX_BATCH: usize = 4096;

/// A unit of work for the writer. `run` executes inside the open transaction (within its
/// own savepoint) and returns whether it succeeded plus what to do once the commit is known.
pub(crate) trait Job: Send {
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Finish>);
    fn abort(self: Box<Self>, err: StorageError);
}

/// Tells the caller how it went, once the transaction's fate is known.
pub(crate) trait Finish: Send {
    fn finish(self: Box<Self>, commit: Result<(), StorageError>);
}

struct TypedJob<R, F> {
    op: F,
    reply: oneshot::Sender<Result<R, StorageError>>,
}

struct TypedFinish<R> {
    result: Result<R, StorageError>,
    reply: oneshot::Sender<Result<R, StorageError>>,
}

impl<R: Send + 'static> Finish for TypedFinish<R> {
    fn finish(self: Box<Self>, commit: Result<(), StorageError>) {
        let outcome = match (commit, self.result) {
            (Ok(()), r) => r,
            (Err(e), _) => Err(e),
        };
        // The caller may have gone away (e.g. a timed-out wait); the write still happened.
        let _ = self.reply.send(outcome);
    }
}

impl<R, F> Job for TypedJob<R, F>
where
    R: Send + 'static,
    F: FnOnce(&Connection) -> Result<R, StorageError> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Finish>) {
        let this = *self;
        let result = (this.op)(conn);
        let ok = result.is_ok();
        (
            ok,
            Box::new(TypedFinish {
                result,
                reply: this.reply,
            }),
        )
    }

    fn abort(self: Box<Self>, err: StorageError) {
        let _ = self.reply.send(Err(err));
    }
}

/// Handle to the writer thread. Dropping every handle ends the thread after it drains.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Box<dyn Job>>,
}

impl Writer {
    pub fn start(conn: Connection) -> Result<Writer, StorageError> {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        thread::Builder::new()
            .name("switchboard-writer".into())
            .spawn(move || writer_loop(conn, rx))
            .map_err(StorageError::Thread)?;
        Ok(Writer { tx })
    }

    /// Queue `op`; the receiver yields its result after the batch holding it commits.
    pub fn submit<R, F>(&self, op: F) -> oneshot::Receiver<Result<R, StorageError>>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StorageError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(TypedJob { op, reply });
        if let Err(mpsc::SendError(job)) = self.tx.send(job) {
            job.abort(StorageError::WriterGone);
        }
        rx
    }
}

fn writer_loop(conn: Connection, rx: mpsc::Receiver<Box<dyn Job>>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&conn, batch);
    }
}

fn commit_batch(conn: &Connection, batch: Vec<Box<dyn Job>>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::error!(error = %e, "cannot open a write transaction");
        let err = StorageError::from(e);
        for job in batch {
            job.abort(err.clone_for_caller());
        }
        return;
    }
    let mut finishers = Vec::with_capacity(batch.len());
    for job in batch {
        // A savepoint per job: one failing job rolls back only its own changes.
        // Cached statements: these run once per job, so re-parsing them would dominate a burst.
        if let Err(e) = exec_cached(conn, "SAVEPOINT job") {
            job.abort(StorageError::from(e));
            continue;
        }
        let (ok, finish) = job.run(conn);
        let end = if ok {
            exec_cached(conn, "RELEASE job")
        } else {
            exec_cached(conn, "ROLLBACK TO job").and_then(|()| exec_cached(conn, "RELEASE job"))
        };
        if let Err(e) = end {
            tracing::error!(error = %e, "savepoint end failed");
        }
        finishers.push(finish);
    }
    let commit = conn.execute_batch("COMMIT").map_err(StorageError::from);
    if let Err(e) = &commit {
        tracing::error!(error = %e, "commit failed; rolling back the batch");
        let _ = conn.execute_batch("ROLLBACK");
    }
    for finish in finishers {
        let c = match &commit {
            Ok(()) => Ok(()),
            Err(e) => Err(e.clone_for_caller()),
        };
        finish.finish(c);
    }
}

fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}
