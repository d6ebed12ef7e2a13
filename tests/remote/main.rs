//! The console's remote client: the API over a link to a gateway, the CLI's `--connect`, and
//! OpenClaw's RPC shapes.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_process/mod.rs"]
mod gateway_process;

mod openclaw_record;
mod remote_api;
mod remote_channels;
mod remote_cli;
mod remote_failover;
mod remote_fake_rpc;
mod remote_link;
mod remote_nodes;
mod remote_openclaw;
mod remote_openclaw_cli;
mod remote_openclaw_exchanges;
mod remote_openclaw_inject;
mod sources_merge;
mod sources_three;
