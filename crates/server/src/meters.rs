//! What the gateway counts for an operator's monitoring (`/metrics`): connections, requests
//! by method, answers by outcome, events sent, slow clients disconnected. Recorded through
//! the `metrics` facade, so nothing is kept unless the binary installs a recorder
//! (`serve --metrics` or `--metrics-bind`). Labels come from fixed lists only: a hostile
//! client's method names or error codes never become series of their own.

use metrics::{counter, gauge};

use switchboard_protocol::switchboard::{code, method};

/// A connection was accepted (after its WebSocket upgrade).
pub fn connection_opened() {
    gauge!("switchboard_connections").increment(1.0);
    counter!("switchboard_connections_total").increment(1);
}

/// A connection ended.
pub fn connection_closed() {
    gauge!("switchboard_connections").decrement(1.0);
}

/// The method as a label: one of the methods served, or `other`.
fn method_label(name: &str) -> &'static str {
    super::methods::METHODS
        .iter()
        .chain(method::ALL)
        .find(|m| **m == name)
        .copied()
        .unwrap_or("other")
}

/// A request arrived.
pub fn request(name: &str) {
    counter!("switchboard_requests_total", "method" => method_label(name)).increment(1);
}

/// A request was answered: `ok`, or its error code (one of ours, else `other`).
pub fn answered(error: Option<&str>) {
    let outcome = match error {
        None => "ok",
        Some(c) => [
            code::INVALID_REQUEST,
            code::NOT_FOUND,
            code::STORAGE,
            code::UNAVAILABLE,
            code::FORBIDDEN,
        ]
        .into_iter()
        .find(|k| *k == c)
        .unwrap_or("other"),
    };
    counter!("switchboard_responses_total", "outcome" => outcome).increment(1);
}

/// An event frame was queued for a client.
pub fn event_sent() {
    counter!("switchboard_events_sent_total").increment(1);
}

/// A client that did not read its frames was disconnected.
pub fn lagged() {
    counter!("switchboard_lagged_disconnects_total").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_fixed_lists_only() {
        assert_eq!(method_label("sessions.list"), "sessions.list");
        assert_eq!(method_label(method::SESSIONS), method::SESSIONS);
        assert_eq!(method_label("x".repeat(1000).as_str()), "other");
    }
}
