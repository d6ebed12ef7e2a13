//! What the engine's services share: the config, the store, the event bus, the state folder
//! and this instance's claim on it, and the tracker of background work. Nothing here belongs
//! to one service; each service holds an `Arc<Context>` next to the state it owns.

use std::path::{Path, PathBuf};

use switchboard_types::api::{PolicySource, SendKind, SendPolicy};
use switchboard_types::config::Config;
use switchboard_types::entry::{AGENT_SENDS_STOPPED, SessionEntry};
use switchboard_types::key::{KeyError, SessionKey};

use crate::events::{EngineEvent, EventBus};
use crate::instance::Instance;
use crate::session::policy::{PolicyDecision, evaluate};
use crate::session::store::SessionStore;
use crate::tracker::Tracker;

/// The engine's shared context (see the module comment). Built once per engine.
pub struct Context {
    config: Config,
    store: SessionStore,
    events: EventBus,
    state_dir: PathBuf,
    tracker: Tracker,
    /// This engine's claim on the state folder: the `owner` of the runs it executes.
    instance: Instance,
}

impl Context {
    pub(crate) fn new(
        config: Config,
        store: SessionStore,
        events: EventBus,
        state_dir: &Path,
        instance: Instance,
    ) -> Context {
        Context {
            config,
            store,
            events,
            state_dir: state_dir.to_path_buf(),
            tracker: Tracker::default(),
            instance,
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn store(&self) -> &SessionStore {
        &self.store
    }

    pub(crate) fn events(&self) -> &EventBus {
        &self.events
    }

    pub(crate) fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub(crate) fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// This engine instance's id (the `owner` of the runs it executes).
    pub(crate) fn instance_id(&self) -> &str {
        self.instance.id()
    }

    /// Whether engine `owner` still runs: not if it ran on this state folder and its
    /// process is gone; otherwise as the store's leases say (several nodes), or, for a store
    /// without them, as this folder's lock files say. Unsure counts as alive.
    pub(crate) async fn owner_alive(&self, owner: &str) -> bool {
        if owner == self.instance_id() {
            return true;
        }
        if Instance::is_dead_here(&self.state_dir, owner) {
            return false;
        }
        match self.store.backend().owner_alive(owner).await {
            Some(alive) => alive,
            None => Instance::is_alive(&self.state_dir, owner),
        }
    }

    /// Where a transcript lives: inside the database, addressed by session id. (OpenClaw
    /// gives a JSONL path; `switchboard sessions export` writes that file on demand.)
    pub(crate) fn transcript_path(&self, session_id: &str) -> String {
        format!("{}#{}", self.store.backend().location(), session_id)
    }

    /// The canonical key for a requester named on the command line (`--as`): `main` is the
    /// default agent's main session. The error says why `raw` names no session.
    pub(crate) fn requester_key(&self, raw: &str) -> Result<SessionKey, KeyError> {
        let scheme = self.store.scheme();
        scheme.canonicalize(raw, &scheme.default_agent)
    }

    /// Evaluate `key`'s send policy for `action` (`send`, `announce`, `reply`, …) and
    /// announce the decision as an event, so every enforcement point is visible the same way.
    /// `requester` is the session sending into `key`, when there is one. Here rather than in
    /// one service because delivery, exchanges and the send tool all enforce it.
    pub(crate) fn judge_policy(
        &self,
        key: &SessionKey,
        entry: &SessionEntry,
        action: SendKind,
        requester: Option<&SessionKey>,
    ) -> PolicyDecision {
        // The narrower stop: agent-to-agent sends only, whatever the send policy says.
        let decision = if action == SendKind::Send
            && entry.agent_send_policy.as_deref() == Some(AGENT_SENDS_STOPPED)
        {
            PolicyDecision {
                policy: SendPolicy::Deny,
                source: PolicySource::AgentSends,
            }
        } else {
            evaluate(self.config(), key, entry)
        };
        self.events().emit(EngineEvent::PolicyDecision {
            key: key.to_string(),
            action,
            allowed: decision.is_allowed(),
            source: decision.source.to_string(),
            requester: requester.map(|r| r.to_string()),
        });
        decision
    }
}
