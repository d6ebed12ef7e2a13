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
    mod context;
    mod delivery;
    mod events;
    mod exchange;
    mod failpoint;
    mod inbound;
    mod nodes;
    mod runs;
    mod session;
    mod sessions;
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
// `tool --help` lists every tool from this one list.
pub use tools::TOOL_NAMES;
pub use transfer::{
    ExportReport, ImportLimits, ImportReport, Overwrite, SkipReason, TransferError,
};

use std::path::Path;
use std::sync::Arc;

use context::Context;
use delivery::Delivery;
use events::{EngineEvent, EventBus};
use exchange::Exchanges;
use inbound::{Inbound, Received};
use instance::Instance;
use runs::{RunHandle, RunRequest, Runner, Runs};
use session::key::SessionKey;
use session::store::SessionStore;
use sessions::Sessions;
use spawn::Spawns;
use switchboard_store::openclaw::OpenClawDbs;
use switchboard_store::{OutboxRow, RunRow, SpawnRow, Store};
use switchboard_types::config::Config;
use tools::{ToolContext, ToolError, Tools};
use tracker::Tracker;

/// The engine over one state folder: a thin composition of its services over one shared
/// context (docs/ARCHITECTURE.md, "The engine's services"). It implements `SessionsApi`
/// by delegating to them (sessions_api.rs), and keeps the paths the binary, tests and
/// benches name (`engine.receive`, `engine.outbox`, …) as one-line delegations. Cheap to
/// clone.
#[derive(Clone)]
pub struct Engine {
    ctx: Arc<Context>,
    delivery: Delivery,
    runs: Arc<Runs>,
    spawns: Arc<Spawns>,
    exchanges: Arc<Exchanges>,
    /// The session tools: what every run calls tools through.
    tools: Arc<Tools>,
    sessions: Arc<Sessions>,
    /// Reads OpenClaw's per-agent SQLite databases for an import; without one, importing
    /// that layout fails with a clear error (`with_openclaw_dbs`).
    openclaw_dbs: Option<Arc<dyn OpenClawDbs>>,
    /// Whether other processes' commits are being turned into events yet.
    watching: Arc<std::sync::Once>,
    /// Whether this engine relays events with the other nodes and watches for dead ones
    /// (once, however often `start` is called).
    joined: Arc<std::sync::Once>,
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
        let ctx = Arc::new(Context::new(config, store, events, state_dir, instance));
        // Built bottom-up: each service gets the ones it calls, none calls back up.
        let delivery = Delivery::new(ctx.clone());
        let runs = Arc::new(Runs::new(ctx.clone(), delivery.clone()));
        let exchanges = Arc::new(Exchanges::new(ctx.clone(), runs.clone(), delivery.clone()));
        let spawns = Arc::new(Spawns::new(ctx.clone(), runs.clone()));
        let tools = Arc::new(Tools::new(ctx.clone(), exchanges.clone(), spawns.clone()));
        let sessions = Arc::new(Sessions::new(ctx.clone(), runs.clone()));
        Engine {
            ctx,
            delivery,
            runs,
            spawns,
            exchanges,
            tools,
            sessions,
            openclaw_dbs: None,
            watching: Arc::new(std::sync::Once::new()),
            joined: Arc::new(std::sync::Once::new()),
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
        self.ctx
            .events()
            .emit(EngineEvent::Recovered { runs, exchanges });
    }

    /// The engine as front ends use it. Start-up work (finishing what a stopped engine left:
    /// sub-agent announces, archive timers) begins in the background, tracked like any
    /// other work. Call inside a tokio runtime.
    pub fn start(&self) -> Arc<dyn switchboard_types::api::SessionsApi> {
        self.joined.call_once(|| {
            nodes::relay(self);
            nodes::watch(self);
        });
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

    /// Resolve once every run, exchange and delivery this engine started has finished.
    /// Each of them ends by itself (runs end, exchange steps time out); should that take
    /// long, the log says every `IDLE_REPORT` what is still running.
    pub async fn idle(&self) {
        while let Err(busy) = self.tracker().idle_for(IDLE_REPORT).await {
            tracing::warn!(%busy, "still waiting for work this engine started");
        }
    }

    /// The store behind this engine, for the services the composition root runs beside it
    /// (the channel drain, which must not live in the engine: it calls the adapters).
    pub fn backend(&self) -> Arc<dyn Store> {
        self.ctx.store().backend().clone()
    }

    /// This engine instance's id: the owner its drain claims deliveries as.
    pub fn owner_id(&self) -> String {
        self.ctx.instance_id().to_string()
    }

    /// Tell subscribers (the console, gateway clients, other nodes) how a delivery stands.
    pub fn delivery_updated(&self, row: &switchboard_store::OutboxRow) {
        self.ctx.events().emit(EngineEvent::DeliveryUpdated {
            outbox_id: row.id,
            channel: row.channel.clone(),
            status: row.status,
            attempt: row.attempt,
            message_id: row.message_id.clone(),
            next_at: row.next_at,
            error: row.last_error.clone(),
        });
    }

    /// This engine's lease on its store (several nodes on one database).
    pub fn standing(&self) -> switchboard_store::nodes::Standing {
        self.store().backend().standing()
    }

    /// The work this engine started that is still running, oldest first, with its age.
    pub fn still_running(&self) -> Vec<(String, std::time::Duration)> {
        self.tracker().running()
    }

    pub(crate) fn tracker(&self) -> &Tracker {
        self.ctx.tracker()
    }

    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn spawn_service(&self) -> &Arc<Spawns> {
        &self.spawns
    }

    pub(crate) fn tool_service(&self) -> &Arc<Tools> {
        &self.tools
    }

    pub(crate) fn runner(&self) -> &Runner {
        self.runs.runner()
    }

    internal_fn! {
        fn config(&self) -> &Config {
            self.ctx.config()
        }
    }

    internal_fn! {
        fn store(&self) -> &SessionStore {
            self.ctx.store()
        }
    }

    internal_fn! {
        fn events(&self) -> &EventBus {
            self.ctx.events()
        }
    }

    internal_fn! {
        fn state_dir(&self) -> &Path {
            self.ctx.state_dir()
        }
    }

    internal_fn! {
        /// This engine instance's id (the `owner` of the runs it executes).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        fn instance_id(&self) -> &str {
            self.ctx.instance_id()
        }
    }

    internal_fn! {
        /// Where a transcript lives (see `Context::transcript_path`).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        fn transcript_path(&self, session_id: &str) -> String {
            self.ctx.transcript_path(session_id)
        }
    }

    internal_fn! {
        /// The canonical key for a requester named on the command line (`--as`).
        fn requester_key(&self, raw: &str) -> Result<SessionKey, key::KeyError> {
            self.ctx.requester_key(raw)
        }
    }

    internal_fn! {
        /// A run as recorded.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
            self.store().backend().get_run(run_id).await
        }
    }

    internal_fn! {
        /// A session's runs, newest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn runs_of(&self, key: &SessionKey, limit: usize) -> Result<Vec<RunRow>, StoreError> {
            self.store().backend().runs_of(key.as_str(), limit).await
        }
    }

    internal_fn! {
        /// Start a run; it proceeds in the background (tracked: `Engine::idle` waits for it).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        fn start_run(&self, req: RunRequest) -> RunHandle {
            self.runs.start(req, &self.tool_host())
        }
    }

    internal_fn! {
        /// An inbound message, recorded and answered (see `Sessions::receive`).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn receive(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<Received, StoreError> {
            self.sessions.receive(key, text, from, &self.tool_host()).await
        }
    }

    internal_fn! {
        /// Record `text` arriving in session `key` (created if new), without starting a run.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn record_inbound(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<inbound::InboundRecorded, StoreError> {
            self.sessions.record_inbound(key, text, from).await
        }
    }

    internal_fn! {
        /// The session tools `ctx`'s session may call at all (see `Tools::allowed_tools`).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        fn allowed_tools(&self, ctx: &ToolContext) -> Vec<&'static str> {
            self.tools.allowed_tools(ctx)
        }
    }

    internal_fn! {
        /// Run one session tool exactly as an agent would.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn call_tool(
            &self,
            name: &str,
            params: &serde_json::Value,
            ctx: &ToolContext,
        ) -> Result<serde_json::Value, ToolError> {
            self.tools.call_tool(name, params, ctx).await
        }
    }

    internal_fn! {
        /// A session's outbox, oldest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn outbox(&self, key: &SessionKey) -> Result<Vec<OutboxRow>, StoreError> {
            self.delivery.outbox(key).await
        }
    }

    internal_fn! {
        /// Pick up what a stopped engine left (see `Spawns::resume`).
        async fn resume(&self) -> Result<(), StoreError> {
            self.spawns.resume(&self.tool_host()).await
        }
    }

    internal_fn! {
        /// Archive every sub-agent session whose timer is due at `now` (ms).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn archive_due(&self, now: i64) -> Result<Vec<SessionKey>, StoreError> {
            self.spawns.archive_due(now).await
        }
    }

    internal_fn! {
        /// A requester's sub-agents, newest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn spawns_of(&self, requester: &SessionKey) -> Result<Vec<SpawnRow>, StoreError> {
            self.spawns.spawns_of(requester).await
        }
    }

    internal_fn! {
        /// One sub-agent's record.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn spawn_record(&self, child: &SessionKey) -> Result<Option<SpawnRow>, StoreError> {
            self.spawns.spawn_record(child).await
        }
    }

    /// The tools every run this engine starts calls through.
    fn tool_host(&self) -> Arc<dyn tools::context::ToolHost> {
        self.tools.clone()
    }
}

/// How often a long `Engine::idle` logs what it is still waiting for.
const IDLE_REPORT: std::time::Duration = std::time::Duration::from_secs(30);
