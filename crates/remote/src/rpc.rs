//! `Rpc`: the seam between a gateway connection and the APIs built on it. The link (socket,
//! handshake, reconnects) implements it; the Switchboard and OpenClaw dialects use only it,
//! so each is tested against recorded frames without a socket.

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::broadcast;

use switchboard_protocol::{ErrorShape, HelloOk};
use switchboard_types::api::{ApiError, LinkState};

/// A server event as it arrived (the frame's per-connection `seq` is checked by the link).
#[derive(Debug, Clone, PartialEq)]
pub enum WireEvent {
    Event {
        event: String,
        payload: Value,
    },
    /// The connection dropped and came back (or events were dropped): what a subscriber
    /// holds may be stale, reload it. `hello` is the new handshake's answer.
    Reconnected,
}

/// Why a call did not get an answer from the gateway.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RpcError {
    /// The gateway answered `ok: false`.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(ErrorShape),
    /// No connection (dialling, or given up), or it dropped before the answer came.
    #[error("{0}")]
    Unavailable(String),
    /// The answer came too late.
    #[error("no answer from the gateway within {0} ms")]
    Timeout(u64),
}

impl RpcError {
    /// As the API's error, keeping the kind the gateway reported.
    pub fn into_api(self) -> ApiError {
        match self {
            RpcError::Refused(shape) => switchboard_protocol::switchboard::api_error(&shape),
            RpcError::Unavailable(m) => ApiError::Unavailable(m),
            RpcError::Timeout(_) => ApiError::Unavailable(self.to_string()),
        }
    }
}

/// One gateway connection, as the dialects see it.
#[async_trait]
pub trait Rpc: Send + Sync {
    /// One request, answered by its first `res` (OpenClaw's `agent` sends two; the second is
    /// dropped unless asked for through `request_final`).
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError>;

    /// A request whose answer comes in two `res` frames (OpenClaw's `agent`): the final one.
    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError>;

    /// Events from now on (a lagging receiver sees `Lagged`, and treats it as `Reconnected`).
    fn events(&self) -> broadcast::Receiver<WireEvent>;

    /// The last handshake's answer (`None` before the first).
    fn hello(&self) -> Option<HelloOk>;

    /// The connection's state, for the header.
    fn state(&self) -> tokio::sync::watch::Receiver<LinkState>;

    /// The address as the user gave it.
    fn target(&self) -> String;
}
