//! Idempotency keys as every store keeps them: how long a key is remembered, how long one
//! may be, and what tells one message from another under a key.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// How long a key is remembered, restarts included. OpenClaw keeps its (in-memory) request
/// dedupe for 5 minutes; ours is longer so a client retrying across a slow restart is
/// still answered with its first run, and it holds every repeat OpenClaw's would.
pub const TTL: Duration = Duration::from_secs(10 * 60);
/// The longest key accepted (OpenClaw's clients send UUIDs; 36 characters).
pub const MAX_KEY_LEN: usize = 256;

/// What tells one message from another under a key: the SHA-256 of its text, in hex (the
/// text itself may be megabytes).
pub fn message_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
