//! The WebSocket gateway: in process (`gateway_support`) and as a real `switchboard serve`
//! (`gateway_process`), with real clients; frames against those captured from OpenClaw.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../fake_model/mod.rs"]
mod fake_model;
#[path = "../gateway_process/mod.rs"]
mod gateway_process;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;

mod channel_discord;
mod channel_discord_gateway;
mod channel_telegram_bot;
mod channel_telegram_serve;
mod gateway_abort;
mod gateway_ack;
mod gateway_bounds;
mod gateway_channels;
mod gateway_chat_deltas;
mod gateway_device;
mod gateway_events;
mod gateway_exchanges;
mod gateway_frames;
mod gateway_fuzz;
mod gateway_list_rows;
mod gateway_load;
mod gateway_methods;
mod gateway_openclaw_clients;
mod gateway_openclaw_events;
mod gateway_operators;
mod gateway_private_paths;
mod gateway_serve;
mod gateway_sort;
mod gateway_tls;
mod gateway_token;
mod gateway_usage;
mod protocol_frames;
