//! The remote side of `--connect`: a WebSocket link to a gateway (ours or OpenClaw's) and
//! `SessionsApi` implementations over it, so every front end runs unchanged on a remote engine.

pub mod openclaw;
pub mod rpc;
