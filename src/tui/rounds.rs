//! The rounds pane's state: exchanges and spawns as their events arrive, whether it shows
//! every session's or the selected one's, the paged list of exchanges and the open one.

use std::collections::BTreeMap;

use super::state::{FlowView, SpawnView};

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct RoundsPane {
    pub flows: BTreeMap<String, FlowView>,
    pub spawns: BTreeMap<String, SpawnView>,
    /// Every session's exchanges, not only the selected one's.
    pub all: bool,
    /// The list of exchanges (paged from the engine) and the open exchange.
    pub exchanges: crate::tui::exchanges::Exchanges,
    pub exchange_view: Option<crate::tui::exchanges::ExchangeView>,
}
