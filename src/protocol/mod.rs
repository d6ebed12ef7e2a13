//! The OpenClaw gateway protocol v4's frames and payloads, serde only (no sockets, no engine).

mod decode;
pub mod device;
mod frame;
mod handshake;
pub mod switchboard;

pub use decode::ProtocolError;
pub use frame::{ErrorShape, Event, Frame, INVALID_REQUEST, Request, Response};
pub use handshake::{
    AuthParams, ClientInfo, ConnectChallenge, ConnectParams, DeviceAuth, Features, HelloOk,
    HelloOkTag, Policy, ServerInfo,
};

/// The protocol version this side speaks.
pub const PROTOCOL_VERSION: u32 = 4;
/// The oldest protocol version a client may offer and still be accepted.
pub const MIN_CLIENT_PROTOCOL: u32 = 3;
