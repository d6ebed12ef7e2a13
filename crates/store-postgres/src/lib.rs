//! `PgStore`: the engine's `Store` on PostgreSQL (docs/ARCHITECTURE.md, "The PostgreSQL
//! store"). The store runs on a runtime of its own (two threads), so it answers the same
//! from any caller: a current-thread test runtime, one with paused time, or the blocking
//! calls the trait has (`session_exists_now`, `transcript_lines_now`). Writes go through
//! one writer task in the order they were submitted, each its own transaction; reads take
//! a pooled connection (`deadpool-postgres`).

mod changes;
pub mod check;
pub mod copy;
mod error;
mod nodes;
mod outbox;
mod pairings;
mod records;
mod relay;
mod schema;
mod sessions;
mod store;
mod text;
mod transcript;

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};

pub use error::PgError;
pub use nodes::{RENEW as LEASE_RENEW, TTL as LEASE_TTL};
pub use schema::SCHEMA_VERSION;
use switchboard_store::{PendingWrite, StoreError};

/// A pooled connection, shared by an operation's future for as long as it runs.
pub(crate) type Conn = Arc<deadpool_postgres::Object>;

type BoxFut = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A write for the writer task: run in a transaction on the connection it is given (or
/// told why there is none) between the statements `Txn` gives, answering its caller itself.
type Job = Box<dyn FnOnce(Result<Conn, PgError>, Txn) -> BoxFut + Send>;

/// What begins and ends each write transaction of this store.
#[derive(Clone)]
struct Txn {
    /// `BEGIN`, and for a node the fence check (one round trip).
    begin: Arc<str>,
    /// The change notice and `COMMIT`.
    commit: Arc<str>,
}

/// How long a connection may take to open, and a caller to wait for a pooled one, before
/// the server counts as unreachable: fail fast with a clear error rather than hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections per node: the writer's one and the readers'.
const POOL_SIZE: usize = 8;

/// The PostgreSQL store. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The server as a user names it, without the password: `postgres://user@host:port/db`.
    at: String,
    pool: Pool,
    /// `None` once dropped: the runtime is shut down in the background (dropping a runtime
    /// inside another one's worker would panic).
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    writer: mpsc::UnboundedSender<Job>,
    /// Ticks when another store (process or node) on this database commits
    /// (`changes::listen`).
    external: tokio::sync::watch::Receiver<u64>,
    /// This store's lease when it is a node (`open_node`).
    node: Option<Arc<nodes::Node>>,
    /// Events to relay to the other nodes, and those they relay (relay.rs).
    relay: relay::Relay,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.relay.flush(Duration::from_secs(1));
        if let Some(node) = &self.node {
            // A clean exit hands the lanes back at once instead of after the lease.
            let (pool, id) = (self.pool.clone(), node.id.clone());
            let left = self.handle.spawn(async move {
                let c = pool.get().await.ok()?;
                nodes::leave(&c, &id).await.ok()
            });
            let (tx, rx) = std::sync::mpsc::channel();
            self.handle.spawn(async move {
                let _ = tx.send(left.await);
            });
            let _ = rx.recv_timeout(Duration::from_secs(2));
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Why a `postgres://` URL or its server could not be used at open.
fn bad_url(url: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::new(
        switchboard_store::StoreErrorKind::Io,
        format!(
            "{}: not a usable PostgreSQL URL ({detail}); expected \
             postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
            redact(url)
        ),
    )
}

/// The URL with any password left out, for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// How a user names the server of `config`.
fn location(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .next()
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

impl PgStore {
    /// Connect to the database at `url`, bring its schema up to date (under an advisory
    /// lock), and start the writer. A bad URL, a refused or unreachable server and a
    /// database at a newer schema each fail with a message naming the server. The store is
    /// no node: it holds no lease and fences nothing (tools, tests).
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        PgStore::open_as(url, None)
    }

    /// `open` as node `id` (the engine's instance id, the `owner` of its runs): it registers
    /// a lease, renews it every second, and every write is fenced on it (nodes.rs).
    pub fn open_node(url: &str, id: &str) -> Result<PgStore, StoreError> {
        PgStore::open_as(url, Some(Arc::new(nodes::Node::new(id.to_string()))))
    }

    fn open_as(url: &str, node: Option<Arc<nodes::Node>>) -> Result<PgStore, StoreError> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| bad_url(url, e))?;
        if config.get_hosts().is_empty() {
            return Err(bad_url(url, "no host"));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("switchboard");
        }
        let at = location(&config);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("switchboard-pg")
            .enable_all()
            .build()
            .map_err(|e| {
                StoreError::unavailable(format!("cannot start the PostgreSQL store: {e}"))
            })?;
        let listen_config = config.clone();
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        // The pool's timeouts run on the store's runtime (it is entered while building).
        let pool = {
            let _entered = rt.enter();
            Pool::builder(manager)
                .max_size(POOL_SIZE)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(CONNECT_TIMEOUT))
                .create_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|e| bad_url(url, e))?
        };
        let handle = rt.handle().clone();
        let (writer, jobs) = mpsc::unbounded_channel();
        let (external_tx, external) = tokio::sync::watch::channel(0);
        // This store's name in its change notices, so it does not count its own commits.
        let origin = uuid::Uuid::new_v4().simple().to_string();
        let relay = relay::Relay::new(origin.clone());
        let store = PgStore {
            inner: Arc::new(Inner {
                at: at.clone(),
                pool: pool.clone(),
                rt: Some(rt),
                handle: handle.clone(),
                writer,
                external,
                node: node.clone(),
                relay: relay.clone(),
            }),
        };
        let registering = node.clone();
        store.block(async move {
            let mut c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
            schema::migrate(&mut c, &at).await?;
            if let Some(node) = registering {
                nodes::register(&c, &node).await?;
            }
            Ok(())
        })?;
        handle.spawn(run_writer(
            store.inner.pool.clone(),
            store.inner.at.clone(),
            origin.clone(),
            node.clone(),
            relay.clone(),
            jobs,
        ));
        if let Some(node) = node {
            handle.spawn(heartbeat(Arc::downgrade(&store.inner), node));
        }
        handle.spawn(relay::publish(store.inner.pool.clone(), relay.clone()));
        handle.spawn(changes::listen(listen_config, origin, external_tx, relay));
        Ok(store)
    }

    /// Run `fut` on the store's runtime and wait for it on this thread (start-up steps and
    /// the trait's blocking calls). Blocks the caller's thread, whatever it is.
    fn block<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, PgError>> + Send + 'static,
    ) -> Result<R, StoreError> {
        let at = self.inner.at.clone();
        block_on(&self.inner.handle, async move {
            fut.await.map_err(|e| StoreError::from(e.locate(&at)))
        })
    }

    /// Run `op` on a pooled connection, on the store's runtime.
    async fn read<R, F, Fut>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, PgError>> + Send + 'static,
    {
        let (pool, at) = (self.inner.pool.clone(), self.inner.at.clone());
        let task = self.inner.handle.spawn(async move {
            let c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
            op(Arc::new(c)).await.map_err(|e| e.locate(&at))
        });
        match task.await {
            Ok(result) => result.map_err(StoreError::from),
            Err(_) => Err(PgError::Stopped.into()),
        }
    }

    /// `read` on the caller's thread, blocking it (the trait's `_now` calls).
    fn read_now<R, F, Fut>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, PgError>> + Send + 'static,
    {
        self.reader().read_now(op)
    }

    /// What blocking reads need, without a handle on the store (see `Reader`).
    fn reader(&self) -> Reader {
        Reader {
            pool: self.inner.pool.clone(),
            at: self.inner.at.clone(),
            handle: self.inner.handle.clone(),
        }
    }

    /// Queue `op` for the writer now: it runs in a transaction of its own after every
    /// write submitted before it has committed (or failed). Resolves after its commit.
    fn submit<R, F, Fut>(&self, op: F) -> PendingWrite<R>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, PgError>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<R, PgError>>();
        let at = self.inner.at.clone();
        let node = self.inner.node.clone();
        let job: Job = Box::new(move |conn: Result<Conn, PgError>, txn: Txn| {
            Box::pin(async move {
                let result = match conn {
                    Ok(c) => in_transaction(c, &txn, op).await,
                    Err(e) => Err(e),
                };
                if let (Err(PgError::Fenced(_)), Some(node)) = (&result, &node) {
                    node.lose();
                }
                // The caller may have stopped waiting; the write stands either way.
                let _ = reply.send(result.map_err(|e| e.locate(&at)));
            })
        });
        let queued = self.inner.writer.send(job).is_ok();
        Box::pin(async move {
            if !queued {
                return Err(PgError::Stopped.into());
            }
            match answer.await {
                Ok(result) => result.map_err(StoreError::from),
                Err(_) => Err(PgError::Stopped.into()),
            }
        })
    }

    async fn write<R, F, Fut>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, PgError>> + Send + 'static,
    {
        self.submit(op).await
    }

    /// Recompute every session's kind if the key scheme changed since the last open.
    pub fn reclassify_if_needed(
        &self,
        scheme: &switchboard_types::key::KeyScheme,
    ) -> Result<(), StoreError> {
        let (pool, at, scheme) = (
            self.inner.pool.clone(),
            self.inner.at.clone(),
            scheme.clone(),
        );
        self.block(async move {
            let mut c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
            sessions::reclassify_if_needed(&mut c, &scheme).await
        })
    }

    /// Take over every engine that is dead (see `nodes::candidates`): one whose lease
    /// expired (only once this node has stood a whole lease itself, or when `now_judge`),
    /// one with open work and no row, and one in `dead_here` (a process of this host whose
    /// instance lock is free). Each in a transaction of its own, through the
    /// writer; what was closed, per engine.
    pub async fn take_over_dead(
        &self,
        now: i64,
        now_judge: bool,
        dead_here: Vec<String>,
    ) -> Result<Vec<switchboard_store::nodes::TakenOver>, StoreError> {
        use nodes::Doubt;
        let candidates = self
            .read(|c| async move { nodes::candidates(&c).await })
            .await?;
        let me = self.inner.node.as_ref().map(|n| n.id.clone());
        let judge = now_judge || self.inner.node.as_ref().is_some_and(|n| n.may_judge());
        let mut taken = Vec::new();
        for (owner, doubt) in candidates {
            if Some(&owner) == me.as_ref() {
                continue;
            }
            let dead = match doubt {
                Doubt::NoRow => true,
                Doubt::Expired => judge || dead_here.contains(&owner),
                Doubt::Live => dead_here.contains(&owner),
            };
            if !dead {
                continue;
            }
            let found = self
                .write(move |c| async move { nodes::take_over(&c, &owner, doubt, now).await })
                .await?;
            taken.extend(found);
        }
        Ok(taken)
    }

    /// Those of `owners` that have no node row (taken over, or never nodes), on this thread:
    /// their lock files may go.
    pub fn without_lease_now(&self, owners: Vec<String>) -> Result<Vec<String>, StoreError> {
        self.read_now(move |c| async move {
            let mut gone = Vec::new();
            for owner in owners {
                if !nodes::alive(&c, &owner).await? {
                    gone.push(owner);
                }
            }
            Ok(gone)
        })
    }

    /// `take_over_dead` on this thread (start-up). Expired leases are left to the nodes
    /// that run (a process just started has stood no lease yet: see `Node::may_judge`).
    pub fn take_over_dead_now(
        &self,
        now: i64,
        dead_here: Vec<String>,
    ) -> Result<Vec<switchboard_store::nodes::TakenOver>, StoreError> {
        let store = self.clone();
        block_on(&self.inner.handle.clone(), async move {
            store.take_over_dead(now, false, dead_here).await
        })
    }
}

/// Blocking reads for a thread that must not keep the store alive (a scan's reader): once
/// the store is dropped its runtime stops, and these reads fail `Unavailable`.
pub(crate) struct Reader {
    pool: Pool,
    at: String,
    handle: tokio::runtime::Handle,
}

impl Reader {
    pub(crate) fn read_now<R, F, Fut>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, PgError>> + Send + 'static,
    {
        let (pool, at) = (self.pool.clone(), self.at.clone());
        block_on(&self.handle, async move {
            let result = async {
                let c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
                op(Arc::new(c)).await
            }
            .await;
            result.map_err(|e| StoreError::from(e.locate(&at)))
        })
    }
}

/// Run `fut` on the store's runtime (`handle`) and wait for it on this thread: start-up
/// steps and the trait's blocking calls. A stopped runtime is `Unavailable`.
fn block_on<R: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = Result<R, StoreError>> + Send + 'static,
) -> Result<R, StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().unwrap_or_else(|_| Err(PgError::Stopped.into()))
}

/// Run `op` between `txn.begin` (BEGIN and, for a node, its fence) and `txn.commit` (the
/// change notice and COMMIT, one round trip; ROLLBACK when it fails).
async fn in_transaction<R, F, Fut>(c: Conn, txn: &Txn, op: F) -> Result<R, PgError>
where
    F: FnOnce(Conn) -> Fut,
    Fut: Future<Output = Result<R, PgError>>,
{
    if let Err(e) = c.batch_execute(&txn.begin).await {
        let _ = c.batch_execute("ROLLBACK").await;
        return Err(fenced_or(e));
    }
    match op(c.clone()).await {
        Ok(value) => {
            c.batch_execute(&txn.commit).await?;
            Ok(value)
        }
        Err(e) => {
            // A broken connection fails this too; the writer then takes a new one.
            let _ = c.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// The writer task: jobs in the order submitted, one at a time, on one connection kept
/// while it works (a new one taken when it breaks; a job finding none fails, the next
/// tries again, so the writer recovers by itself when the server is back).
async fn run_writer(
    pool: Pool,
    at: String,
    origin: String,
    node: Option<Arc<nodes::Node>>,
    relay: relay::Relay,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    let begin: Arc<str> = match &node {
        // The id is a UUID's hex digits made by this program: nothing to quote.
        Some(n) => format!("BEGIN; SELECT switchboard_fence('{}')", n.id).into(),
        None => "BEGIN".into(),
    };
    let plain: Arc<str> = changes::commit_sql(&origin, false).into();
    let relaying: Arc<str> = changes::commit_sql(&origin, true).into();
    let mut kept: Option<Conn> = None;
    while let Some(job) = jobs.recv().await {
        let conn = match kept.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => pool
                .get()
                .await
                .map(Arc::new)
                .map_err(|e| PgError::from_pool(&at, e)),
        };
        if let Err(e) = &conn {
            tracing::warn!(error = %e, "the PostgreSQL writer has no connection");
        }
        kept = conn.as_ref().ok().cloned();
        let txn = Txn {
            begin: begin.clone(),
            commit: if relay.is_on() {
                relaying.clone()
            } else {
                plain.clone()
            },
        };
        job(conn, txn).await;
    }
}

/// A driver error, or `Fenced` when it is the fence's refusal.
fn fenced_or(e: tokio_postgres::Error) -> PgError {
    match e.as_db_error() {
        Some(db) if db.code().code() == nodes::FENCED => PgError::Fenced(
            db.message()
                .trim_start_matches("node ")
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_string(),
        ),
        _ => PgError::Driver(e),
    }
}

/// Renew this node's lease every `nodes::RENEW` while the store lives; a failed renewal
/// is tried again (the lease stands while the row does: see `nodes::renew`).
async fn heartbeat(store: std::sync::Weak<Inner>, node: Arc<nodes::Node>) {
    let mut tick = tokio::time::interval(nodes::RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = store.upgrade() else {
            return;
        };
        let (pool, at) = (inner.pool.clone(), inner.at.clone());
        drop(inner);
        let renewed = async {
            let c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
            nodes::renew(&c, &node).await
        };
        match tokio::time::timeout(nodes::RENEW * 2, renewed).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e.locate(&at), "renewing this node's lease failed")
            }
            Err(_) => tracing::warn!("renewing this node's lease timed out"),
        }
        if matches!(node.standing(), switchboard_store::nodes::Standing::Lost) {
            return;
        }
    }
}
