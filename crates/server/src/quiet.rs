//! Log lines a client can set off at will (refused connects, handshakes that fail, accept
//! errors) pass through a gate: a few per second are written, the rest are counted and the
//! next written line says how many similar ones were left out (`skipped=N`). A flood of
//! connections costs the log a bounded number of bytes per second, whatever its rate.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Lines of one kind written per second at most, after a first burst of `BURST`.
const PER_SECOND: u32 = 5;
const BURST: u32 = 20;

/// The gate for one kind of line.
pub struct Quiet {
    limiter: DefaultDirectRateLimiter,
    skipped: AtomicU64,
}

impl Default for Quiet {
    fn default() -> Self {
        Quiet::new(PER_SECOND, BURST)
    }
}

impl Quiet {
    pub fn new(per_second: u32, burst: u32) -> Quiet {
        let quota = Quota::per_second(NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
        Quiet {
            limiter: RateLimiter::direct(quota),
            skipped: AtomicU64::new(0),
        }
    }

    /// `Some(skipped)` when this line may be written, with the number of lines of its kind
    /// left out since the last one written; `None` when it is to be left out (and counted).
    pub fn admit(&self) -> Option<u64> {
        if self.limiter.check().is_ok() {
            Some(self.skipped.swap(0, Ordering::Relaxed))
        } else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// Lines left out and not yet reported (for a last summary at shutdown).
    pub fn take_skipped(&self) -> u64 {
        self.skipped.swap(0, Ordering::Relaxed)
    }
}

/// The gates of the gateway's noisy lines, one per kind, so a flood of one kind does not
/// silence another.
#[derive(Default)]
pub struct Gates {
    /// `connect` refused (token, params, protocol, lockout).
    pub refused: Quiet,
    /// TLS or WebSocket upgrade failed or timed out, or the peer left before `connect`.
    pub handshake: Quiet,
    /// `accept` failed (out of descriptors, …) or a connection was turned away at the cap.
    pub accept: Quiet,
    /// Connections opened and closed after `hello-ok`.
    pub session: Quiet,
}

impl Gates {
    /// A last line for every kind that left lines out, so no flood goes unreported.
    pub fn report_skipped(&self) {
        for (kind, gate) in [
            ("refused connects", &self.refused),
            ("failed handshakes", &self.handshake),
            ("accept errors and turned-away connections", &self.accept),
            ("connection opens and closes", &self.session),
        ] {
            let skipped = gate.take_skipped();
            if skipped > 0 {
                tracing::info!(
                    skipped,
                    "{kind}: lines left out of the log since the last one"
                );
            }
        }
    }
}

/// At most `max` bytes of client-supplied text, on a character boundary, with a note of the
/// full length when cut: what a log line or an error message may quote of a client's input.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_burst_and_counted() {
        let gate = Quiet::new(1, 3);
        let admitted: Vec<_> = (0..100).filter_map(|_| gate.admit()).collect();
        assert_eq!(
            admitted,
            vec![0, 0, 0],
            "three lines pass, none skipped before them"
        );
        assert_eq!(gate.take_skipped(), 97);
        assert_eq!(gate.take_skipped(), 0);
    }

    #[test]
    fn excerpts_are_short_and_say_how_long_the_text_was() {
        assert_eq!(excerpt("short", 10), "short");
        let long = "é".repeat(100);
        let cut = excerpt(&long, 5);
        assert_eq!(cut, "éé… (200 bytes)");
    }
}
