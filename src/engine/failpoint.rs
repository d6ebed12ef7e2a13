//! Crash points for tests: `SWITCHBOARD_FAILPOINT=<name>` makes the process abort at the
//! named point, so a test can stop the real binary exactly between two commits (e.g. after
//! a sub-agent's announce is decided and before it is delivered) and check the restart.

/// Abort the process here if the failpoint `name` is set.
pub fn hit(name: &str) {
    if std::env::var("SWITCHBOARD_FAILPOINT").is_ok_and(|v| v == name) {
        tracing::error!(failpoint = name, "failpoint hit: aborting");
        std::process::abort();
    }
}
