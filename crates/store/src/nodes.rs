//! Several engines on one store: who is alive, who owns a session's lane, what a dead
//! engine left, and the events one engine relays to the others (docs/ARCHITECTURE.md,
//! "Several nodes"). A store that one host's processes share (SQLite) answers "unknown"
//! and relays nothing: its liveness is the state folder's lock files.

use switchboard_types::api::EngineEvent;

use crate::RunRow;

/// Whether this engine may run in a session's lane now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneClaim {
    /// Ours until released (or until our lease is lost).
    Held,
    /// Another live node runs in it; try again later.
    Busy { owner: String },
}

/// This engine's lease on the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The store has no leases (one host's processes; liveness by lock files).
    Unleased,
    /// The lease is renewed; `renewed_ms_ago` since the last renewal the server confirmed,
    /// `lanes` the sessions this engine runs in now.
    Leased { renewed_ms_ago: u64, lanes: usize },
    /// Not renewed for longer than the lease lasts (the database does not answer): other
    /// nodes may take this one over at any moment.
    Lapsing { renewed_ms_ago: u64 },
    /// The lease expired before it could be renewed (a pause, a cut-off): another node may
    /// have taken this engine's runs over, so its writes for them are refused. Final.
    Lost,
}

impl Standing {
    /// Whether the engine can be counted on (ready).
    pub fn is_good(&self) -> bool {
        matches!(self, Standing::Unleased | Standing::Leased { .. })
    }

    /// Why it cannot, in words (`None`: it can).
    pub fn trouble(&self) -> Option<String> {
        match self {
            Standing::Unleased | Standing::Leased { .. } => None,
            Standing::Lapsing { renewed_ms_ago } => Some(format!(
                "this node's lease on the database was last renewed {:.1} s ago (the database \
                 does not answer); another node may take its work over",
                *renewed_ms_ago as f64 / 1000.0
            )),
            Standing::Lost => Some(
                "this node lost its lease on the database: another node took its work over, \
                 and its writes are refused; restart it"
                    .to_string(),
            ),
        }
    }
}

/// What the store closed for one dead engine, taken over by this one (exactly one engine
/// takes each dead one over).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenOver {
    /// The dead engine's id.
    pub owner: String,
    /// Its runs, as they were, now closed in error with the interruption line.
    pub runs: Vec<RunRow>,
    /// Its exchanges, now `interrupted`.
    pub flows: Vec<String>,
}

/// An event another engine on the store relayed, or the news that some were missed.
#[derive(Debug, Clone, PartialEq)]
pub enum Relayed {
    Event(EngineEvent),
    /// Events from another engine were missed (a gap in its numbers, one too large to
    /// relay, the listener reconnected): readers must read again.
    Gap,
}
