//! The engine's event stream: every committed change is announced once, on a tokio
//! broadcast channel, carrying what a front end needs to draw it without asking again.

pub use switchboard_types::api::EngineEvent;
use switchboard_types::api::Sequenced;
use tokio::sync::broadcast;

/// Large enough that a console redrawing at 60 fps never lags behind a burst of appends.
const CAPACITY: usize = 4096;

/// Cheap-to-clone sender side; subscribers get every event sent after they subscribe.
/// Events are numbered in the order emitted; API subscribers get the numbers, so a gap
/// (a subscriber that fell behind) is visible to them.
#[derive(Clone, Default)]
pub struct EventBus {
    /// Both channels are made on their first subscription: a 4,096-slot channel costs about
    /// half a millisecond to set up, which every `state_folder::open_engine` (each CLI command) would pay.
    tx: std::sync::Arc<std::sync::OnceLock<broadcast::Sender<EngineEvent>>>,
    numbered: std::sync::Arc<std::sync::OnceLock<broadcast::Sender<Sequenced>>>,
    /// Serialises numbering and sending, so the numbers arrive in order.
    next: std::sync::Arc<std::sync::Mutex<u64>>,
    /// Where this engine's own events also go: the other nodes on the store (`relay`).
    outlet: std::sync::Arc<std::sync::OnceLock<Outlet>>,
}

/// Takes each event this engine emits (not those relayed to it) for the other nodes.
pub type Outlet = Box<dyn Fn(&EngineEvent) + Send + Sync>;

impl EventBus {
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.tx
            .get_or_init(|| broadcast::channel(CAPACITY).0)
            .subscribe()
    }

    /// Numbered events, for `SessionsApi::subscribe`.
    pub fn subscribe_numbered(&self) -> broadcast::Receiver<Sequenced> {
        self.numbered
            .get_or_init(|| broadcast::channel(CAPACITY).0)
            .subscribe()
    }

    /// Whether anyone subscribes: lets hot paths skip building events nobody reads.
    pub fn listening(&self) -> bool {
        self.outlet.get().is_some()
            || self.tx.get().is_some_and(|t| t.receiver_count() > 0)
            || self.numbered.get().is_some_and(|n| n.receiver_count() > 0)
    }

    /// Nobody listening is normal (the CLI), so a send without receivers is not an error.
    pub fn emit(&self, event: EngineEvent) {
        if let Some(outlet) = self.outlet.get() {
            outlet(&event);
        }
        self.emit_relayed(event);
    }

    /// Send this engine's events to `outlet` too, from now on (once; later calls are
    /// ignored).
    pub fn set_outlet(&self, outlet: Outlet) {
        let _ = self.outlet.set(outlet);
    }

    /// Emit an event another node relayed: to this engine's subscribers only.
    pub fn emit_relayed(&self, event: EngineEvent) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        if let Some(numbered) = self.numbered.get()
            && numbered.receiver_count() > 0
        {
            let _ = numbered.send(Sequenced {
                seq: *next,
                event: event.clone(),
            });
        }
        if let Some(tx) = self.tx.get() {
            let _ = tx.send(event);
        }
    }
}
