//! The session engine: keys, storage, session entries, transcripts, tools. No terminal or
//! network code lives here; front ends talk to it through `Engine`.

pub mod entry;
pub mod events;
pub mod inbound;
pub mod key;
pub mod sanitize;
pub mod storage;
pub mod store;
pub mod tools;
pub mod transfer;
pub mod visibility;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use events::EventBus;
use key::SessionKey;
use storage::{Storage, StorageError};
use store::SessionStore;

/// The engine over one state folder: config, store and event stream. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    config: Arc<Config>,
    store: SessionStore,
    events: EventBus,
    state_dir: PathBuf,
}

impl Engine {
    /// Open the state folder's database (creating and migrating it as needed).
    pub fn open(state_dir: &Path, config: Config) -> Result<Engine, StorageError> {
        let scheme = config.key_scheme();
        let storage = Storage::open_prepared(state_dir, |conn| {
            storage::queries::reclassify_if_needed(conn, &scheme)
        })?;
        let events = EventBus::default();
        let store = SessionStore::new(storage, scheme, events.clone());
        Ok(Engine {
            config: Arc::new(config),
            store,
            events,
            state_dir: state_dir.to_path_buf(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    pub fn events(&self) -> &EventBus {
        &self.events
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Where a transcript lives: inside the database, addressed by session id. (OpenClaw
    /// gives a JSONL path; `switchboard sessions export` writes that file on demand.)
    pub fn transcript_path(&self, session_id: &str) -> String {
        format!("{}#{}", self.store.storage().path().display(), session_id)
    }

    /// The canonical key for a requester named on the command line (`--as`): `main` is the
    /// default agent's main session.
    pub fn requester_key(&self, raw: &str) -> Option<SessionKey> {
        let scheme = self.store.scheme();
        scheme.canonicalize(raw, &scheme.default_agent)
    }
}
