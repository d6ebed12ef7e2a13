//! Logging: `tracing` to `<state>/logs/switchboard.log`, never to stdout (stdout carries
//! results for scripts, and later the console's screen).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// Start logging into `state_dir/logs/`. Returns the log file's path, or `None` when the
/// folder cannot be written (then the command still runs; its own errors say why).
pub fn init(state_dir: &Path) -> Option<PathBuf> {
    let dir = state_dir.join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("switchboard.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
    let filter =
        EnvFilter::try_from_env("SWITCHBOARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init()
        .ok()?;
    Some(path)
}
