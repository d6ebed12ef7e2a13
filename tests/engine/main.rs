//! The engine through its own entry points: sessions, sends, exchanges, spawns, tools, policy,
//! storage as the engine uses it, the openai backend against a fake model, and the demo's traffic.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../fake_model/mod.rs"]
mod fake_model;

mod agent_openai;
mod agent_openai_context;
mod agent_openai_service;
mod agent_openai_stream;
mod api_engine;
mod api_send_order;
mod demo_traffic;
mod engine_agents_list;
mod engine_archived;
mod engine_config;
mod engine_exchanges;
mod engine_keys;
mod engine_policy;
mod engine_send;
mod engine_sort;
mod engine_spawn;
mod engine_storage;
mod engine_tools;
mod engine_transfer;
mod proptest_inputs;
mod session_counts;
mod stress_concurrent;
