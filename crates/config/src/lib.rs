//! The config file: JSON5 read with every problem reported by key path and line
//! (`load`), over the typed settings of `switchboard-types`, re-exported here so a
//! front end names one crate for both.

pub mod channels;
mod gateways;
pub mod load;
mod source;

pub use load::{
    ConfigError, ConfigProblem, DEFAULT_CONFIG_TEXT, check_file, check_file_warnings, load_file,
    parse_str, write_default,
};
pub use switchboard_types::config::*;
