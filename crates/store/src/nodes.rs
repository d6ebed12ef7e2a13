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
    /// The lease is renewed; `renewed_ms_ago` since the last renewal the server confirmed.
    Leased { renewed_ms_ago: u64 },
    /// The lease expired before it could be renewed (a pause, a cut-off): another node may
    /// have taken this engine's runs over, so its writes for them are refused. Final.
    Lost,
}

impl Standing {
    /// Whether the engine may go on serving.
    pub fn is_good(&self) -> bool {
        !matches!(self, Standing::Lost)
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
