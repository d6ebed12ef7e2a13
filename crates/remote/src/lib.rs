//! The remote side of `--connect`: a WebSocket link to a gateway (ours or OpenClaw's) and
//! `SessionsApi` implementations over it, so every front end runs unchanged on a remote engine.

pub mod device;
pub mod link;
pub mod openclaw;
pub mod refusal;
pub mod rpc;
pub mod switchboard;
pub mod tls;

pub use link::{DeviceSigner, DialError, Link, LinkOptions};
pub use switchboard::RemoteApi;
