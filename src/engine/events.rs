//! The engine's event stream: every committed change is announced once, on a tokio
//! broadcast channel, carrying what a front end needs to draw it without asking again.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// Large enough that a console redrawing at 60 fps never lags behind a burst of appends.
const CAPACITY: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum EngineEvent {
    /// A session row appeared.
    #[serde(rename_all = "camelCase")]
    SessionCreated { key: String, session_id: String },
    /// A session's entry changed (patch, token counters, policy override …).
    #[serde(rename_all = "camelCase")]
    SessionUpdated { key: String },
    /// A session and its transcript were removed.
    #[serde(rename_all = "camelCase")]
    SessionDeleted { key: String },
    /// A transcript line was committed.
    #[serde(rename_all = "camelCase")]
    MessageAppended {
        key: String,
        session_id: String,
        seq: i64,
        line: Value,
    },
}

/// Cheap-to-clone sender side; subscribers get every event sent after they subscribe.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<EngineEvent>,
}

impl Default for EventBus {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        EventBus { tx }
    }
}

impl EventBus {
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.tx.subscribe()
    }

    /// Whether anyone subscribes: lets hot paths skip building events nobody reads.
    pub fn listening(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Nobody listening is normal (the CLI), so a send without receivers is not an error.
    pub fn emit(&self, event: EngineEvent) {
        let _ = self.tx.send(event);
    }
}
