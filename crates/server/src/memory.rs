//! Giving memory back to the system once clients leave. glibc's allocator keeps freed memory
//! in its arenas (and raises its mmap threshold after large frees, so later large frames
//! come from the arenas too): after a thousand lagged clients are dropped the process would
//! stay at its peak. `malloc_trim` returns the free pages; it is called after connections
//! end, at most once a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The least time between two trims.
const EVERY: Duration = Duration::from_secs(1);

static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Called when a connection ended: trims the allocator if it was not trimmed in the last
/// second. The trim itself takes milliseconds even for a large heap.
pub fn after_connection_ended() {
    let now = Instant::now();
    {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| now.duration_since(t) < EVERY) {
            return;
        }
        *last = Some(now);
    }
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
