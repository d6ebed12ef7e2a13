//! The command line through the real binary: each command group, config checks, provider secrets;
//! and the repository checks (the layer rule, README's key table).
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

mod cli_abort;
mod cli_bounds;
mod cli_channels;
mod cli_commands;
mod cli_exchanges;
mod cli_import;
mod cli_policy;
mod cli_send;
mod cli_sources;
mod cli_spawn;
mod cli_store;
mod cli_store_copy;
mod cli_text_safety;
mod cli_transfer;
mod config_honesty;
mod layers;
mod provider_secrets;
mod readme_keys;
