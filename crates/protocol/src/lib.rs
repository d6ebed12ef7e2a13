//! The OpenClaw gateway protocol v4's frames and payloads (serde only), and what both ends of
//! a link share: device identity, TLS set-up and token files. No sockets, no engine.

mod decode;
pub mod device;
mod frame;
mod handshake;
pub mod switchboard;
pub mod tls;
pub mod tls_client;
pub mod token;

pub use decode::ProtocolError;
pub use frame::{ErrorShape, Event, Frame, INVALID_REQUEST, Rendered, Request, Response};
pub use handshake::{
    AuthParams, ClientInfo, ConnectChallenge, ConnectParams, DeviceAuth, Features, HelloOk,
    HelloOkTag, Policy, ServerInfo,
};

/// The largest `maxPayload` a Switchboard client accepts (its WebSocket frame and message
/// limit), and so the largest `switchboard serve --max-payload` may advertise: one number
/// both sides honour (docs/ARCHITECTURE.md, "Frames agree end to end").
pub const MAX_PAYLOAD_CEILING: usize = 64 * 1024 * 1024;
/// The smallest `maxPayload` `serve` may advertise: room for a `connect`, an answer's
/// envelope and some text.
pub const MIN_MAX_PAYLOAD: usize = 64 * 1024;

/// The protocol version this side speaks.
pub const PROTOCOL_VERSION: u32 = 4;
/// The oldest protocol version a client may offer and still be accepted.
pub const MIN_CLIENT_PROTOCOL: u32 = 3;
