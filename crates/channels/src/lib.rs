//! Switchboard's channels (docs/ARCHITECTURE.md, "Channels"): the outbound adapter seam
//! (`Channel`), the outbox drain that sends queued deliveries through the adapters with
//! retries and records each outcome in the store, and the generic webhook adapter. Knows the
//! store only as its trait; the binary builds the adapters from the config and starts the
//! drain beside the engine (which never calls an adapter).

pub mod channel;
pub mod discord;
pub mod drain;
pub mod retry;
pub mod webhook;

pub use channel::{Channel, Dedup, SendError, Sent, send_parts};
pub use drain::{Adapter, Drain, DrainHandle, DrainOptions, OnUpdate};
pub use retry::RetryPolicy;
