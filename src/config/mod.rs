//! Configuration: the JSON5 file's typed shape (`model`), and loading it with every problem
//! reported by key path and line (`load`).

pub mod load;
pub mod model;
mod source;
pub mod text_limits;
pub mod warnings;

pub use load::{
    ConfigError, ConfigProblem, DEFAULT_CONFIG_TEXT, check_file, check_file_warnings, load_file,
    parse_str, write_default,
};
pub use model::*;
pub use warnings::{ConfigWarning, warnings};
