//! The engine's model providers: one `ProviderClient` (HTTP client, retries, request limiter)
//! per provider id, built on first use and shared by every agent and model override on that
//! provider, so `maxConcurrent` caps the provider as a whole and connections are reused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::client::ProviderClient;
use switchboard_types::config::ModelProvider;

#[derive(Default)]
pub struct Providers {
    clients: Mutex<HashMap<String, Arc<ProviderClient>>>,
}

impl Providers {
    /// The client of provider `id` (configured as `config`; an engine's config does not
    /// change while it runs, so the first one built stays).
    pub fn client(&self, id: &str, config: &ModelProvider) -> Arc<ProviderClient> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(ProviderClient::new(id, config)))
            .clone()
    }
}
