//! Loading the config file (placeholder; being written).
use std::path::{Path, PathBuf};

use super::model::Config;

pub const DEFAULT_CONFIG_TEXT: &str = "{}";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    pub line: Option<usize>,
    pub path: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("invalid config {path}")]
    Invalid { path: PathBuf, problems: Vec<ConfigProblem> },
}

pub fn parse_str(src: &str) -> Result<Config, Vec<ConfigProblem>> {
    json5::from_str(src).map_err(|e| vec![ConfigProblem { line: None, path: String::new(), message: e.to_string() }])
}

pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
    parse_str(&text).map_err(|problems| ConfigError::Invalid { path: path.to_path_buf(), problems })
}

pub fn check_file(path: &Path) -> Result<Vec<ConfigProblem>, ConfigError> {
    match load_file(path) {
        Ok(_) => Ok(Vec::new()),
        Err(ConfigError::Invalid { problems, .. }) => Ok(problems),
        Err(e) => Err(e),
    }
}

pub fn write_default(path: &Path, _force: bool) -> Result<(), ConfigError> {
    std::fs::write(path, DEFAULT_CONFIG_TEXT).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })
}
