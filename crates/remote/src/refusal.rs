//! Whether a gateway's refusal of `connect` is for now or for good. A lockout, a full
//! gateway or one shutting down will let the same client in later, so the link dials again
//! (after the wait the gateway named, if any); a wrong token, a protocol mismatch or a
//! device the gateway does not accept would be refused again, so the link stops there.

use std::time::Duration;

use serde_json::Value;

use switchboard_protocol::ErrorShape;

/// The longest wait a gateway's hint may impose: a hostile or broken one cannot park the
/// link for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10 * 60);

/// What to do about a refused `connect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It would be refused again: stop.
    Final,
    /// Try again later: after `after` when the gateway said (capped at `MAX_RETRY_AFTER`),
    /// else with the usual backoff.
    Later { after: Option<Duration> },
}

/// Words of a refusal that will pass by itself (ours: the failed-connect lockout, the
/// connection cap, shutdown; OpenClaw's: startup, rate limits).
const TRANSIENT: &[&str] = &[
    "too many failed attempts",
    "too many connections",
    "too many requests",
    "rate limit",
    "overloaded",
    "shutting down",
    "try again later",
    "retry in ",
    "during gateway startup",
];

/// Classifies `error`: OpenClaw's own fields first (`retryable`, `retryAfterMs`), then the
/// code `UNAVAILABLE`, then the message's words. Anything else is final.
pub fn classify(error: &ErrorShape) -> Refusal {
    let hinted = error
        .extra
        .get("retryAfterMs")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .or_else(|| retry_in_seconds(&error.message));
    let after = hinted.map(|d| d.min(MAX_RETRY_AFTER));
    match error.extra.get("retryable").and_then(Value::as_bool) {
        Some(true) => return Refusal::Later { after },
        Some(false) => return Refusal::Final,
        None => {}
    }
    let message = error.message.to_ascii_lowercase();
    if error.code == "UNAVAILABLE" || TRANSIENT.iter().any(|w| message.contains(w)) {
        Refusal::Later { after }
    } else {
        Refusal::Final
    }
}

/// `N` in "… retry in N s …" (our gateway's lockout message).
fn retry_in_seconds(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let rest = &lower[lower.find("retry in ")? + "retry in ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let unit = rest[digits.len()..].trim_start();
    let n: u64 = digits.parse().ok()?;
    (unit.starts_with('s') || unit.is_empty()).then(|| Duration::from_secs(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(code: &str, message: &str, extra: Value) -> ErrorShape {
        ErrorShape {
            code: code.into(),
            message: message.into(),
            extra: extra.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn lockouts_and_busy_gateways_are_for_now_and_the_rest_for_good() {
        let lockout = shape(
            "INVALID_REQUEST",
            "too many failed attempts; retry in 42 s",
            json!({}),
        );
        assert_eq!(
            classify(&lockout),
            Refusal::Later {
                after: Some(Duration::from_secs(42))
            }
        );
        let startup = shape(
            "UNAVAILABLE",
            "connect unavailable during gateway startup",
            json!({"retryable": true, "retryAfterMs": 500}),
        );
        assert_eq!(
            classify(&startup),
            Refusal::Later {
                after: Some(Duration::from_millis(500))
            }
        );
        let full = shape("UNAVAILABLE", "too many connections", json!({}));
        assert_eq!(classify(&full), Refusal::Later { after: None });
        for message in [
            "unauthorized: gateway token missing or wrong",
            "protocol mismatch: client speaks 3..4, this gateway 5..5",
            "device signature invalid: stale",
            "pairing required",
        ] {
            assert_eq!(
                classify(&shape("INVALID_REQUEST", message, json!({}))),
                Refusal::Final,
                "{message}"
            );
        }
        // The gateway's own word wins over the message's.
        let said_no = shape("UNAVAILABLE", "overloaded", json!({"retryable": false}));
        assert_eq!(classify(&said_no), Refusal::Final);
        // A hint is capped.
        let forever = shape("X", "retry in 99999999 s", json!({"retryable": true}));
        assert_eq!(
            classify(&forever),
            Refusal::Later {
                after: Some(MAX_RETRY_AFTER)
            }
        );
    }
}
