//! Opening a state folder: the SQLite store in it (or the PostgreSQL database the config's
//! `storage.url` names), the recovery of what a stopped engine left open, and the engine over
//! that store. The composition root's one place that names the stores; the engine itself
//! only knows `switchboard_store::Store` (and, for imports,
//! `switchboard_store::openclaw::OpenClawDbs`).

use std::path::Path;
use std::sync::Arc;

use switchboard_engine::Engine;
use switchboard_engine::instance::Instance;
use switchboard_store::StoreError;
use switchboard_store_postgres::PgStore;
use switchboard_store_sqlite::openclaw_source::SqliteOpenClawDbs;
use switchboard_store_sqlite::runs::{self, Recovered};
use switchboard_store_sqlite::{SqliteStore, Storage, StorageError, queries};
use switchboard_types::api::time::now_ms;
use switchboard_types::config::Config;

/// Open the state folder's database (creating and migrating it as needed). Runs and
/// exchanges left open by an engine that died are closed (`error` / `interrupted`), and the
/// lock files such engines left in `instances/` are removed.
pub fn open_engine(state_dir: &Path, config: Config) -> Result<Engine, StoreError> {
    let scheme = config.key_scheme();
    std::fs::create_dir_all(state_dir).map_err(|e| StorageError::io(state_dir, e))?;
    let instance = Instance::claim(state_dir)
        .map_err(|e| StorageError::io(&state_dir.join("instances"), e))?;
    if let Some(url) = config.storage.url.clone() {
        return open_postgres_engine(&url, state_dir, config, instance);
    }
    let mut recovered = Recovered::default();
    let storage = Storage::open_prepared(state_dir, |conn| {
        queries::reclassify_if_needed(conn, &scheme)?;
        // Close what dead instances left open, on the write connection before the writer
        // starts.
        let r = runs::close_dead_owners(conn, now_ms(), |owner| {
            owner == instance.id() || Instance::is_alive(state_dir, owner)
        })?;
        recovered.runs.extend(r.runs);
        recovered.flows.extend(r.flows);
        Ok(())
    })?;
    let swept = Instance::sweep(state_dir);
    if swept > 0 {
        tracing::info!(swept, "removed lock files of stopped engines");
    }
    let engine = engine_over(config, storage, state_dir, instance);
    engine.announce_recovered(
        recovered.runs.into_iter().map(|r| r.run_id).collect(),
        recovered.flows,
    );
    Ok(engine)
}

/// The engine over the PostgreSQL database at `url`: migrated, its kinds reclassified and
/// what dead instances left open closed, as for SQLite. The state folder keeps the rest
/// (logs, tokens, the instance locks that tell a live owner from a dead one).
fn open_postgres_engine(
    url: &str,
    state_dir: &Path,
    config: Config,
    instance: Instance,
) -> Result<Engine, StoreError> {
    let store = PgStore::open_node(url, instance.id())?;
    store.reclassify_if_needed(&config.key_scheme())?;
    // This host's dead processes are taken over now; other hosts' dead nodes by the running
    // nodes' watch once their lease has run out (engine `nodes::watch`).
    let dead_here = Instance::dead_here(state_dir);
    let taken = store.take_over_dead_now(now_ms(), dead_here.clone())?;
    // Their lock files go once nothing of theirs is left: taken over now, or before (by
    // another node, which could not remove a file in this folder).
    let swept = Instance::sweep_these(state_dir, &store.without_lease_now(dead_here)?);
    if swept > 0 {
        tracing::info!(swept, "removed lock files of stopped engines");
    }
    let (mut runs, mut flows) = (Vec::new(), Vec::new());
    for dead in taken {
        runs.extend(dead.runs.into_iter().map(|r| r.run_id));
        flows.extend(dead.flows);
    }
    let engine = Engine::new(config, Arc::new(store), state_dir, instance)
        .with_openclaw_dbs(Arc::new(SqliteOpenClawDbs));
    engine.announce_recovered(runs, flows);
    Ok(engine)
}

/// Open a state folder for reading only: nothing is created, migrated or recovered and no
/// instance is claimed, so it works where this user cannot write. Any write fails with
/// `StoreErrorKind::ReadOnly`.
pub fn open_engine_read_only(state_dir: &Path, config: Config) -> Result<Engine, StoreError> {
    let storage = Storage::open_read_only(state_dir)?;
    Ok(engine_over(
        config,
        storage,
        state_dir,
        Instance::unclaimed(),
    ))
}

/// The engine over an opened SQLite store, with the reader of OpenClaw's SQLite state.
fn engine_over(config: Config, storage: Storage, state_dir: &Path, instance: Instance) -> Engine {
    Engine::new(
        config,
        Arc::new(SqliteStore::new(storage)),
        state_dir,
        instance,
    )
    .with_openclaw_dbs(Arc::new(SqliteOpenClawDbs))
}

/// Whether `state_dir` is a state folder: its database is there. A command that only
/// reads needs one and never makes one (a mistyped `--state-dir` must not leave a new,
/// empty folder behind and report "no sessions").
pub fn exists(state_dir: &Path) -> bool {
    state_dir.join(switchboard_store_sqlite::DB_FILE).is_file()
}

/// Whether there is state to read: the PostgreSQL database the config names (made by the
/// first open, whatever the folder holds), else the folder's SQLite database (`exists`).
pub fn has_state(state_dir: &Path, config: &Config) -> bool {
    config.storage.url.is_some() || exists(state_dir)
}

/// Why a state folder could not be opened for reading.
#[derive(Debug, thiserror::Error)]
pub enum ReadOpenError {
    #[error(
        "no state folder at {path} (no {db} there): check --state-dir (or \
$SWITCHBOARD_STATE_DIR); to make one there, run `switchboard --state-dir {path}` (the console) \
or record a first message with `switchboard --state-dir {path} inject agent:main:main \"hello\"`",
        path = .0.display(),
        db = switchboard_store_sqlite::DB_FILE
    )]
    Missing(std::path::PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// For commands that only read: the folder must exist (nothing is created); it is opened
/// normally, or read-only when it cannot be written.
pub fn open_engine_for_reading(state_dir: &Path, config: Config) -> Result<Engine, ReadOpenError> {
    // The state lives in the database: the folder only holds logs and locks.
    if config.storage.url.is_some() {
        return Ok(open_engine(state_dir, config)?);
    }
    if !exists(state_dir) {
        return Err(ReadOpenError::Missing(state_dir.to_path_buf()));
    }
    Ok(open_existing_for_reading(state_dir, config)?)
}

fn open_existing_for_reading(state_dir: &Path, config: Config) -> Result<Engine, StoreError> {
    match open_engine(state_dir, config.clone()) {
        Err(e) if e.is_read_only() => {
            tracing::info!(error = %e, "the state folder is read-only; reading only");
            open_engine_read_only(state_dir, config).map_err(|ro| match ro.kind() {
                // No database to read: the write failure says more.
                switchboard_store::StoreErrorKind::Io => e,
                _ => ro,
            })
        }
        other => other,
    }
}
