//! Crash and failure points for tests: `SWITCHBOARD_FAILPOINT=<name>` makes the process stop
//! dead at the named point (exit code 86, no cleanup, no core file), so a test can stop the
//! real binary exactly between two commits (e.g. after a sub-agent's announce is decided and
//! before it is delivered) and check the restart; or, at a point checked with `active`,
//! makes an operation fail as a full disk would.

/// The exit code of a process stopped by a failpoint.
pub const EXIT_CODE: i32 = 86;

/// Stop the process here if the failpoint `name` is set. `exit` runs no destructors and
/// stops every thread where it stands, as a crash would; pending writes are lost.
pub fn hit(name: &str) {
    if active(name) {
        tracing::error!(failpoint = name, "failpoint hit: stopping the process");
        std::process::exit(EXIT_CODE);
    }
}

/// Whether the failpoint `name` is set: the caller then fails the operation it guards.
pub fn active(name: &str) -> bool {
    std::env::var("SWITCHBOARD_FAILPOINT").is_ok_and(|v| v == name)
}
