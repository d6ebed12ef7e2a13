//! What a stored transcript line says, extracted once for every front end: its role as
//! shown, who spoke, and its text (tool calls as `name({args})`). Text stays as stored;
//! front ends make it safe for their own output.

use std::borrow::Cow;

use serde_json::Value;

use switchboard_store::notice::{NOTICE_ROLE, shown_message};
use switchboard_types::api::{TranscriptLine, role_and_text, shown_role};

pub use switchboard_types::api::message_text;

/// One stored line as front ends show it (`None` for lines that are not messages or shown
/// notices, and for assistant turns with nothing to show).
/// The line is taken: a kept message is moved out of it, not copied (a 100-line page copied
/// every message once more).
/// `bare`: the message alone (with `keep_message`), its text and speaker left empty.
pub fn line_of(
    seq: i64,
    mut line: Value,
    keep_message: bool,
    bare: bool,
) -> Option<TranscriptLine> {
    let m = shown_message(&line)?;
    let timestamp = m.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
    let (role, text, from) = if bare && keep_message {
        (shown_role(&m)?, String::new(), String::new())
    } else {
        let (role, text) = role_and_text(&m)?;
        (role, text, speaker(&m))
    };
    let message = match (keep_message, m) {
        (false, _) => None,
        (true, Cow::Owned(notice)) => Some(notice),
        (true, Cow::Borrowed(_)) => line.get_mut("message").map(Value::take),
    };
    Some(TranscriptLine {
        seq,
        role,
        timestamp,
        from,
        text,
        message,
    })
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// Who a message is from: `from <key> via <tool>` for another session's message, the
/// sender's label (marked when it is the owner), the tool's name, or `agent`.
fn speaker(m: &Value) -> String {
    let role = str_of(m.get("role")).unwrap_or("");
    let prov = m.get("provenance");
    let owner = m.get("senderIsOwner").and_then(Value::as_bool) == Some(true);
    match role {
        "user" if str_of(prov.and_then(|p| p.get("kind"))) == Some("inter_session") => format!(
            "from {} via {}",
            str_of(prov.and_then(|p| p.get("sourceSessionKey"))).unwrap_or("?"),
            str_of(prov.and_then(|p| p.get("sourceTool"))).unwrap_or("?")
        ),
        "user" => match (str_of(m.get("senderLabel")), owner) {
            (Some(s), true) => format!("{s} (owner)"),
            (Some(s), false) => s.to_string(),
            (None, true) => "owner".to_string(),
            (None, false) => "user".to_string(),
        },
        "toolResult" => str_of(m.get("toolName")).unwrap_or("tool").to_string(),
        // OpenClaw's own notice (a failed run's), not something an agent said.
        NOTICE_ROLE => "notice".to_string(),
        _ => "agent".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_types::api::LineRole;
    use serde_json::json;

    #[test]
    fn each_kind_of_line_reads_as_the_panes_show_it() {
        let user = json!({"message": {"role": "user", "timestamp": 5,
            "content": [{"type": "text", "text": "hi"}], "senderLabel": "alice", "senderIsOwner": true}});
        let l = line_of(1, user, false, false).expect("user line");
        assert_eq!(
            (l.role, l.from.as_str(), l.text.as_str(), l.timestamp),
            (LineRole::User, "alice (owner)", "hi", 5)
        );
        let call = json!({"message": {"role": "assistant", "content": [
            {"type": "text", "text": "let me ask"},
            {"type": "toolCall", "name": "sessions_send", "arguments": {"message": "x"}}]}});
        let l = line_of(2, call.clone(), true, false).expect("call line");
        assert_eq!(l.role, LineRole::Tool);
        assert_eq!(l.text, "let me ask\nsessions_send({\"message\":\"x\"})");
        assert_eq!(l.message.as_ref(), call.get("message"), "the message moved out whole");
        let a2a = json!({"message": {"role": "user", "content": "ping",
            "provenance": {"kind": "inter_session", "sourceSessionKey": "agent:a:main", "sourceTool": "sessions_send"}}});
        assert_eq!(
            line_of(3, a2a, false, false).expect("a2a").from,
            "from agent:a:main via sessions_send"
        );
        let failed = json!({"message": {"role": "assistant", "stopReason": "error", "errorMessage": "boom", "content": []}});
        assert_eq!(line_of(4, failed, false, false).expect("error").text, "boom");
        let empty = json!({"message": {"role": "assistant", "content": []}});
        assert!(line_of(5, empty, false, false).is_none());
        assert!(line_of(6, json!({"type": "session"}), false, false).is_none());
    }
}
