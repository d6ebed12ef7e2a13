//! The session engine: keys, storage, session entries, transcripts, tools. No terminal or
//! network code lives here; front ends talk to it through `switchboard_types::api::SessionsApi`, which
//! `Engine` implements (docs/ARCHITECTURE.md, "Layers").

/// Declares modules `pub` with the `internals` feature (integration tests and benches turn
/// it on through the self dev-dependency) and `pub(crate)` without it, so in a normal build
/// code outside this crate reaches the engine only through `api` and `engine::Engine`.
macro_rules! internal {
    ($(mod $name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

/// `pub use` with the `internals` feature, `pub(crate) use` without (see `internal!`).
macro_rules! internal_use {
    ($($path:tt)*) => {
        #[cfg(feature = "internals")]
        pub use $($path)*;
        #[cfg(not(feature = "internals"))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

/// A method `pub` with the `internals` feature and `pub(crate)` without it: the engine's
/// methods that hand out its internals (store, events, runs) stay out of front ends' reach.
macro_rules! internal_fn {
    ($(#[$attr:meta])* fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) fn $($rest)*
    };
    ($(#[$attr:meta])* async fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub async fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) async fn $($rest)*
    };
}

pub mod agent;
/// The engine's claim on a state folder (public: whoever opens a folder claims it first).
pub mod instance;
internal! {
    mod chain;
    mod delivery;
    mod events;
    mod exchange;
    mod failpoint;
    mod inbound;
    mod runs;
    mod session;
    mod spawn;
    mod tools;
    mod tracker;
    mod transfer;
}
mod sessions_api;

// The paths tests, benches and (until issue 11 lands everywhere) front ends name, kept
// across the move into `session/`.
internal_use!(session::{entry, key, policy, store, transcript_text});

// What the composition root (cli.rs) names besides `Engine`: the errors its calls return,
// the export option and the transfer reports; see docs/ARCHITECTURE.md "Layers".
pub use switchboard_store::StoreError;
pub use transfer::{
    ExportReport, ImportLimits, ImportReport, Overwrite, SkipReason, TransferError,
};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use events::{EngineEvent, EventBus};
use instance::Instance;
use runs::Runner;
use runs::lane;
use session::key::SessionKey;
use session::store::SessionStore;
use switchboard_store::openclaw::OpenClawDbs;
use switchboard_store::{RunRow, Store};
use switchboard_types::config::Config;
use tracker::Tracker;

/// The engine over one state folder: config, store and event stream. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    config: Arc<Config>,
    store: SessionStore,
    events: EventBus,
    state_dir: PathBuf,
    runtime: Arc<Runtime>,
    /// Reads OpenClaw's per-agent SQLite databases for an import; without one, importing
    /// that layout fails with a clear error (`with_openclaw_dbs`).
    openclaw_dbs: Option<Arc<dyn OpenClawDbs>>,
}

/// What lives as long as the engine instance: run lanes, agent backends, background work
/// and this instance's claim on the state folder.
struct Runtime {
    runner: Runner,
    tracker: Tracker,
    instance: Instance,
    /// Each session's line of incoming messages: recorded in the order they were sent.
    intake: lane::Lanes,
    /// Runs this engine is executing, by id, for `SessionsApi::wait_run`.
    runs: runs::LiveRuns,
    /// Whether other processes' commits are being turned into events yet.
    watching: std::sync::Once,
}

impl Engine {
    /// The engine over `store` (the binary's `state_folder` opens a folder's store and
    /// builds one). `instance` is this engine's claim on the folder: the `owner` of the runs
    /// it executes.
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        state_dir: &Path,
        instance: Instance,
    ) -> Engine {
        let scheme = config.key_scheme();
        let events = EventBus::default();
        let store = SessionStore::new(store, scheme, events.clone());
        Engine {
            config: Arc::new(config),
            store,
            events,
            state_dir: state_dir.to_path_buf(),
            runtime: Arc::new(Runtime {
                runner: Runner::default(),
                tracker: Tracker::default(),
                instance,
                intake: lane::Lanes::default(),
                runs: runs::LiveRuns::default(),
                watching: std::sync::Once::new(),
            }),
            openclaw_dbs: None,
        }
    }

    /// The reader `import_openclaw` uses for OpenClaw's per-agent SQLite databases (a
    /// source, not a store: see `switchboard_store::openclaw`).
    pub fn with_openclaw_dbs(mut self, dbs: Arc<dyn OpenClawDbs>) -> Engine {
        self.openclaw_dbs = Some(dbs);
        self
    }

    pub(crate) fn openclaw_dbs(&self) -> Option<&dyn OpenClawDbs> {
        self.openclaw_dbs.as_deref()
    }

    /// Tell subscribers which runs and exchanges the store closed at opening because a
    /// stopped engine left them open (nothing is emitted when there are none).
    pub fn announce_recovered(&self, runs: Vec<String>, exchanges: Vec<String>) {
        if runs.is_empty() && exchanges.is_empty() {
            return;
        }
        tracing::warn!(
            runs = runs.len(),
            exchanges = exchanges.len(),
            "closed runs and exchanges a stopped engine left open"
        );
        self.events.emit(EngineEvent::Recovered { runs, exchanges });
    }

    /// The engine as front ends use it. Start-up work (finishing what a stopped engine left:
    /// sub-agent announces, archive timers) begins in the background, tracked like any
    /// other work. Call inside a tokio runtime.
    pub fn start(&self) -> Arc<dyn switchboard_types::api::SessionsApi> {
        let engine = self.clone();
        self.tracker().spawn(
            "start-up: resuming what a stopped engine left",
            async move {
                if let Err(e) = engine.resume().await {
                    tracing::warn!(error = %e, "resuming what a stopped engine left failed");
                }
            },
        );
        Arc::new(self.clone())
    }

    /// Turn other processes' commits into `ExternalChange` events (once per engine).
    pub(crate) fn watch_other_processes(&self) {
        self.runtime.watching.call_once(|| {
            let mut changes = self.store().backend().external_changes();
            let events = self.events().clone();
            // Not tracked: it lives as long as the storage and is no one's work to wait for.
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    events.emit(EngineEvent::ExternalChange);
                }
            });
        });
    }

    pub(crate) fn runner(&self) -> &Runner {
        &self.runtime.runner
    }

    pub(crate) fn tracker(&self) -> &Tracker {
        &self.runtime.tracker
    }

    internal_fn! {
        /// This engine instance's id (the `owner` of the runs it executes).
        fn instance_id(&self) -> &str {
            self.runtime.instance.id()
        }
    }

    /// Resolve once every run, exchange and delivery this engine started has finished.
    /// Each of them ends by itself (runs end, exchange steps time out); should that take
    /// long, the log says every `IDLE_REPORT` what is still running.
    pub async fn idle(&self) {
        while let Err(busy) = self.runtime.tracker.idle_for(IDLE_REPORT).await {
            tracing::warn!(%busy, "still waiting for work this engine started");
        }
    }

    /// The work this engine started that is still running, oldest first, with its age.
    pub fn still_running(&self) -> Vec<(String, std::time::Duration)> {
        self.runtime.tracker.running()
    }

    internal_fn! {
        /// A run as recorded.
        async fn run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
            self.store.backend().get_run(run_id).await
        }
    }

    internal_fn! {
        /// A session's runs, newest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn runs_of(&self, key: &SessionKey, limit: usize) -> Result<Vec<RunRow>, StoreError> {
            self.store.backend().runs_of(key.as_str(), limit).await
        }
    }

    internal_fn! {
        fn config(&self) -> &Config {
            &self.config
        }
    }

    internal_fn! {
        fn store(&self) -> &SessionStore {
            &self.store
        }
    }

    internal_fn! {
        fn events(&self) -> &EventBus {
            &self.events
        }
    }

    internal_fn! {
        fn state_dir(&self) -> &Path {
            &self.state_dir
        }
    }

    internal_fn! {
        /// Where a transcript lives: inside the database, addressed by session id. (OpenClaw
        /// gives a JSONL path; `switchboard sessions export` writes that file on demand.)
        fn transcript_path(&self, session_id: &str) -> String {
            format!("{}#{}", self.store.backend().location(), session_id)
        }
    }

    internal_fn! {
        /// The canonical key for a requester named on the command line (`--as`): `main` is the
        /// default agent's main session. The error says why `raw` names no session.
        fn requester_key(&self, raw: &str) -> Result<SessionKey, key::KeyError> {
            let scheme = self.store.scheme();
            scheme.canonicalize(raw, &scheme.default_agent)
        }
    }
}

/// How often a long `Engine::idle` logs what it is still waiting for.
const IDLE_REPORT: std::time::Duration = std::time::Duration::from_secs(30);
