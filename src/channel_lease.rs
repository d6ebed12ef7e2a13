//! One inbound connection per bot across the nodes of one database: Telegram allows one
//! `getUpdates` poller per bot, and two Discord gateway sessions of one bot would each be
//! handed every message. The node that polls (or holds the gateway) holds the store's lane
//! `channel:<kind>:<bot>` while it does; the others wait, and one of them takes over when
//! its node dies (its lanes go with its take-over). On a store without nodes the lane is
//! always free.

use std::sync::Arc;
use std::time::Duration;

/// How often a node that does not hold the lane asks for it again.
const LEASE_WAIT: Duration = Duration::from_secs(2);

pub struct ChannelLease {
    pub store: Arc<dyn switchboard_store::Store>,
    pub owner: String,
}

impl ChannelLease {
    pub fn new(engine: &switchboard_engine::Engine) -> ChannelLease {
        ChannelLease {
            store: engine.backend(),
            owner: engine.owner_id(),
        }
    }

    /// The lane of bot `bot` (its id, never its secret) of channel `kind`.
    pub fn lane(kind: &str, bot: &str) -> String {
        format!("channel:{kind}:{bot}")
    }

    /// Wait until this engine holds `lane`.
    pub async fn acquire(&self, lane: &str) {
        loop {
            match self.store.claim_lane(lane, &self.owner).await {
                Ok(switchboard_store::nodes::LaneClaim::Held) => return,
                Ok(switchboard_store::nodes::LaneClaim::Busy { owner }) => {
                    tracing::debug!(%owner, %lane, "another node holds this channel; waiting");
                }
                Err(e) => tracing::warn!(error = %e, %lane, "cannot ask for a channel's lane"),
            }
            tokio::time::sleep(LEASE_WAIT).await;
        }
    }

    pub async fn release(&self, lane: &str) {
        self.store.release_lane(lane, &self.owner).await;
    }
}
