//! The config file's typed shape (`model`), its text limits and the warnings it earns;
//! parsing the file is `switchboard-config`'s, above the engine.

pub mod channels;
pub mod model;
pub mod text_limits;
pub mod warnings;

pub use channels::{ChannelsConfig, TelegramConfig};
pub use model::*;
pub use warnings::{ConfigWarning, warnings};
