//! Switchboard's binary crate, as a library for its integration tests: the demo's set-up
//! and opening a state folder. Everything else lives in the workspace's crates
//! (docs/ARCHITECTURE.md, "Crates").

pub mod channel_lease;
pub mod channels;
pub mod demo;
pub mod discord;
pub mod state_folder;
pub mod stores;
pub mod telegram;
pub mod telegram_push;
