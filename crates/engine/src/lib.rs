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
pub mod state_folder;
internal! {
    mod chain;
    mod context;
    mod delivery;
    mod events;
    mod exchange;
    mod failpoint;
    mod inbound;
    mod instance;
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

use std::path::Path;
use std::sync::Arc;

use context::Context;
use delivery::Delivery;
use events::{EngineEvent, EventBus};
use instance::Instance;
use runs::lane;
use runs::{RunHandle, RunRequest, Runner, Runs};
use session::key::SessionKey;
use session::store::SessionStore;
use switchboard_store::{RunRow, Store};
use switchboard_store_sqlite::Storage;
use switchboard_types::config::Config;
use tracker::Tracker;

/// The engine over one state folder: a thin composition of its services (docs/ARCHITECTURE.md,
/// "The engine's services") over one shared context. It implements `SessionsApi` by
/// delegating, and is the `ToolHost` runs call session tools through. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    core: Arc<Context>,
    delivery: Delivery,
    runs: Arc<Runs>,
    /// Each session's line of incoming messages: recorded in the order they were sent.
    intake: Arc<lane::Lanes>,
    /// Whether other processes' commits are being turned into events yet.
    watching: Arc<std::sync::Once>,
}

impl Engine {
    internal_fn! {
    /// The engine over `store` (see `crate::state_folder` for opening a state folder).
    /// `instance` is this engine's claim on the folder: the `owner` of the runs it executes.
    fn new(
        config: Config,
        store: Arc<dyn Store>,
        storage: Storage,
        state_dir: &Path,
        instance: Instance,
    ) -> Engine {
        let scheme = config.key_scheme();
        let events = EventBus::default();
        let store = SessionStore::new(store, storage, scheme, events.clone());
        let core = Arc::new(Context::new(config, store, events, state_dir, instance));
        let delivery = Delivery::new(core.clone());
        Engine {
            runs: Arc::new(Runs::new(core.clone(), delivery.clone())),
            delivery,
            core,
            intake: Arc::default(),
            watching: Arc::new(std::sync::Once::new()),
        }
    }
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
        self.watching.call_once(|| {
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
        self.runs.runner()
    }

    pub(crate) fn tracker(&self) -> &Tracker {
        self.core.tracker()
    }

    internal_fn! {
        /// This engine instance's id (the `owner` of the runs it executes).
        fn instance_id(&self) -> &str {
            self.core.instance_id()
        }
    }

    internal_fn! {
        /// Start a run; it proceeds in the background (tracked: `Engine::idle` waits for it).
        fn start_run(&self, req: RunRequest) -> RunHandle {
            // Time-ordered (v7): a burst of new runs lands on the same last B-tree page.
            self.start_run_with_id(uuid::Uuid::now_v7().to_string(), req)
        }
    }

    internal_fn! {
        /// `start_run` with an id chosen by the caller (recorded elsewhere before the run).
        /// The run calls session tools through this engine.
        fn start_run_with_id(&self, run_id: String, req: RunRequest) -> RunHandle {
            self.runs.start(run_id, req, Arc::new(self.clone()))
        }
    }

    /// The delivery service (outbound messages to a session's channel).
    pub(crate) fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    internal_fn! {
        /// A session's outbox, oldest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn outbox(
            &self,
            key: &SessionKey,
        ) -> Result<Vec<switchboard_store::OutboxRow>, StoreError> {
            self.delivery.outbox(key).await
        }
    }

    /// The runs service.
    pub(crate) fn runs(&self) -> &Arc<Runs> {
        &self.runs
    }

    pub(crate) fn intake(&self) -> &lane::Lanes {
        &self.intake
    }

    /// Evaluate and announce `key`'s send policy (see `Context::judge_policy`).
    pub(crate) fn judge_policy(
        &self,
        key: &SessionKey,
        entry: &switchboard_types::entry::SessionEntry,
        action: switchboard_types::api::SendKind,
        requester: Option<&SessionKey>,
    ) -> session::policy::PolicyDecision {
        self.core.judge_policy(key, entry, action, requester)
    }

    /// Resolve once every run, exchange and delivery this engine started has finished.
    /// Each of them ends by itself (runs end, exchange steps time out); should that take
    /// long, the log says every `IDLE_REPORT` what is still running.
    pub async fn idle(&self) {
        while let Err(busy) = self.core.tracker().idle_for(IDLE_REPORT).await {
            tracing::warn!(%busy, "still waiting for work this engine started");
        }
    }

    /// The work this engine started that is still running, oldest first, with its age.
    pub fn still_running(&self) -> Vec<(String, std::time::Duration)> {
        self.core.tracker().running()
    }

    internal_fn! {
        /// A run as recorded.
        async fn run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
            self.core.store().backend().get_run(run_id).await
        }
    }

    internal_fn! {
        /// A session's runs, newest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn runs_of(&self, key: &SessionKey, limit: usize) -> Result<Vec<RunRow>, StoreError> {
            self.core.store().backend().runs_of(key.as_str(), limit).await
        }
    }

    internal_fn! {
        fn config(&self) -> &Config {
            self.core.config()
        }
    }

    internal_fn! {
        fn store(&self) -> &SessionStore {
            self.core.store()
        }
    }

    internal_fn! {
        fn events(&self) -> &EventBus {
            self.core.events()
        }
    }

    internal_fn! {
        fn state_dir(&self) -> &Path {
            self.core.state_dir()
        }
    }

    internal_fn! {
        /// Where a transcript lives: inside the database, addressed by session id. (OpenClaw
        /// gives a JSONL path; `switchboard sessions export` writes that file on demand.)
        fn transcript_path(&self, session_id: &str) -> String {
            format!("{}#{}", self.core.store().backend().location(), session_id)
        }
    }

    internal_fn! {
        /// The canonical key for a requester named on the command line (`--as`): `main` is the
        /// default agent's main session. The error says why `raw` names no session.
        fn requester_key(&self, raw: &str) -> Result<SessionKey, key::KeyError> {
            let scheme = self.core.store().scheme();
            scheme.canonicalize(raw, &scheme.default_agent)
        }
    }
}

/// How often a long `Engine::idle` logs what it is still waiting for.
const IDLE_REPORT: std::time::Duration = std::time::Duration::from_secs(30);
