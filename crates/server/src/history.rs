//! `chat.history` messages as OpenClaw's gateway shows them (display-normalised): a turn
//! another session forwarded reads as `role: "assistant"` with `senderLabel: "Forwarded
//! from <agent>"` and `senderSession`, silent replies (`REPLY_SKIP`, `NO_REPLY`,
//! `ANNOUNCE_SKIP`) are left out, and the answer carries `totalMessages` and a
//! `deltaCursor`. Our own client may still ask for the messages as stored (`raw: true`).

use base64::Engine as _;
use serde_json::{Value, json};

use super::events::agent_of;
use switchboard_types::api::is_silent_reply;

/// The line our engine may put before a forwarded turn's text for the model; OpenClaw's
/// display shows the text without it.
const INTER_SESSION_LINE: &str = "[Inter-session message]";

/// One stored message as OpenClaw displays it; `None` for one it hides.
pub fn display(mut message: Value) -> Option<Value> {
    if is_silent_reply(&message) {
        return None;
    }
    let source = message
        .get("provenance")
        .filter(|p| p.get("kind").and_then(Value::as_str) == Some("inter_session"))
        .and_then(|p| p.get("sourceSessionKey"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(source) = source
        && message.get("role").and_then(Value::as_str) == Some("user")
    {
        let agent = agent_of(&source).unwrap_or(&source).to_string();
        message["role"] = json!("assistant");
        message["senderLabel"] = json!(format!("Forwarded from {agent}"));
        message["senderSession"] = json!({"sessionKey": source, "agentId": agent});
        strip_inter_session_line(&mut message);
    }
    Some(message)
}

/// Drops a leading `[Inter-session message] …` line from the text (string content or the
/// first text block).
fn strip_inter_session_line(message: &mut Value) {
    let text = match message.get_mut("content") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(parts)) => parts
            .iter_mut()
            .find(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|p| p.get_mut("text"))
            .and_then(|t| match t {
                Value::String(s) => Some(s),
                _ => None,
            }),
        _ => None,
    };
    if let Some(s) = text
        && s.starts_with(INTER_SESSION_LINE)
    {
        let rest = s.split_once('\n').map(|(_, rest)| rest).unwrap_or_default();
        *s = rest.to_string();
    }
}

/// OpenClaw's opaque `deltaCursor`: base64url JSON naming the session and the newest line
/// the answer covers. Ours is never read back (a delta request gets the whole page), so
/// it only has to change when the history does.
pub fn delta_cursor(session_id: &str, last_seq: i64) -> String {
    let inner = json!({"sessionId": session_id, "lastSeq": last_seq, "version": 1});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(inner.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_turn_reads_as_the_other_agent_and_a_skip_is_hidden() {
        let forwarded = json!({
            "role": "user",
            "content": [{"type": "text", "text": "[Inter-session message] sourceSession=agent:work:s2\nPING"}],
            "provenance": {"kind": "inter_session", "sourceSessionKey": "agent:work:s2"},
        });
        let shown = display(forwarded).expect("shown");
        assert_eq!(shown["role"], "assistant");
        assert_eq!(shown["senderLabel"], "Forwarded from work");
        assert_eq!(shown["senderSession"]["agentId"], "work");
        assert_eq!(shown["content"][0]["text"], "PING");
        let skip =
            json!({"role": "assistant", "content": [{"type": "text", "text": " REPLY_SKIP "}]});
        assert_eq!(display(skip), None);
        let own = json!({"role": "user", "content": "hi"});
        assert_eq!(display(own.clone()), Some(own));
    }
}
