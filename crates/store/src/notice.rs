//! OpenClaw's notices to the owner: `custom_message` transcript lines with `display: true`
//! (the gateway writes "This turn ended before a reply: …" when a run fails). They are stored
//! verbatim like every line; history shows them as OpenClaw's `chat.history` does, as a
//! message `{role: "custom", customType, content, timestamp}` (its `details` stay out), so
//! an owner sees that a run failed. The store marks their rows with `NOTICE_ROLE`, which
//! history reads select beside `message` lines.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// The role a shown notice has in history, and in its row's `role` column.
pub const NOTICE_ROLE: &str = "custom";

/// The line type of a notice.
pub const NOTICE_TYPE: &str = "custom_message";

pub use switchboard_types::api::RUN_FAILED_NOTICE;

/// `customType`s OpenClaw's `chat.history` leaves out even with `display: true` (context it
/// hands the model, not words for the owner).
const HIDDEN_TYPES: [&str; 1] = ["openclaw.runtime-context"];

/// Whether a `custom_message` line with this `display` value and `customType` is shown:
/// `display` exactly `true` (what OpenClaw writes) and not a hidden type.
pub fn notice_shown(display_true: bool, custom_type: Option<&str>) -> bool {
    display_true && !custom_type.is_some_and(|t| HIDDEN_TYPES.contains(&t))
}

/// The role column of a line of type `kind` (`message_role`: its `message.role`): a shown
/// notice gets `NOTICE_ROLE`, other lines their message's role.
pub fn row_role(kind: &str, message_role: Option<&str>, notice: bool) -> Option<String> {
    if kind == NOTICE_TYPE {
        return notice.then(|| NOTICE_ROLE.to_string());
    }
    message_role.map(str::to_string)
}

/// The message a stored line shows in history: a `message` line's `message`; a shown notice
/// as `{role: "custom", customType, content, timestamp (ms)}`; `None` for anything else.
pub fn shown_message(line: &Value) -> Option<Cow<'_, Value>> {
    if let Some(m) = line.get("message") {
        return Some(Cow::Borrowed(m));
    }
    if line.get("type").and_then(Value::as_str) != Some(NOTICE_TYPE) {
        return None;
    }
    let custom_type = line.get("customType").and_then(Value::as_str);
    if !notice_shown(line.get("display") == Some(&Value::Bool(true)), custom_type) {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), Value::String(NOTICE_ROLE.into()));
    if let Some(t) = custom_type {
        m.insert("customType".into(), Value::String(t.into()));
    }
    m.insert(
        "content".into(),
        line.get("content")
            .cloned()
            .unwrap_or(Value::String(String::new())),
    );
    // The line's ISO time as the milliseconds a message carries.
    if let Some(ms) = line
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis())
    {
        m.insert("timestamp".into(), Value::from(ms));
    }
    Some(Cow::Owned(Value::Object(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_displayed_notice_reads_as_openclaws_history_shows_it() {
        let line = json!({"type": "custom_message", "customType": RUN_FAILED_NOTICE,
            "content": "This turn ended before a reply: boom", "display": true,
            "details": {"runId": "r1", "error": "PRIVATE"}, "id": "n1", "parentId": null,
            "timestamp": "2026-11-23T13:09:00.000Z"});
        assert_eq!(
            shown_message(&line).unwrap().into_owned(),
            json!({"role": "custom", "customType": RUN_FAILED_NOTICE,
                "content": "This turn ended before a reply: boom", "timestamp": 1795439340000i64})
        );
        let mut hidden = line.clone();
        hidden["display"] = json!(false);
        assert_eq!(shown_message(&hidden), None);
        hidden["display"] = json!(true);
        hidden["customType"] = json!("openclaw.runtime-context");
        assert_eq!(shown_message(&hidden), None);
        let message = json!({"type": "message", "message": {"role": "user", "content": "hi"}});
        assert_eq!(
            shown_message(&message).unwrap().into_owned(),
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(shown_message(&json!({"type": "custom", "data": {}})), None);
    }
}
