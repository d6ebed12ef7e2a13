//! The console end to end: the real binary driven under tmux. Without tmux these tests skip with a
//! message, except under `CI=true`, where they fail.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;

mod e2e_channels;
mod e2e_composer;
mod e2e_console;
mod e2e_drill;
mod e2e_exchanges;
mod e2e_navigation;
mod e2e_remote;
mod e2e_sources;
mod e2e_streaming;
mod e2e_terminals;
mod e2e_traffic;
mod e2e_transcript;
mod tmux_missing;
