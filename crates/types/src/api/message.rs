//! How a message in OpenClaw's transcript format reads: its text blocks, and the role and
//! text a transcript line shows. One reading for the engine's own transcripts and for the
//! messages an OpenClaw gateway returns, so both panes show a message the same way.

use serde_json::Value;

use super::LineRole;

/// The `customType` of the notice OpenClaw writes into a transcript when a run fails before
/// it replies ("This turn ended before a reply: …"; `switchboard_store::notice`).
pub const RUN_FAILED_NOTICE: &str = "run-failed-before-reply";
/// The replies OpenClaw treats as "say nothing" (`sessions-send-tokens.ts`, `tokens.ts`).
pub const SILENT_TOKENS: [&str; 3] = ["NO_REPLY", "ANNOUNCE_SKIP", "REPLY_SKIP"];

/// An assistant reply that is only a silent token (trimmed, any case), with nothing but
/// text in it: OpenClaw's `chat.history` leaves these out.
pub fn is_silent_reply(message: &Value) -> bool {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return false;
    }
    let text_only = match message.get("content") {
        Some(Value::String(_)) => true,
        Some(Value::Array(parts)) => parts
            .iter()
            .all(|p| p.get("type").and_then(Value::as_str) == Some("text")),
        _ => false,
    };
    if !text_only {
        return false;
    }
    let text = message_text(message);
    let text = text.trim();
    SILENT_TOKENS.iter().any(|t| text.eq_ignore_ascii_case(t))
}

/// The text blocks of a message joined by newlines (tool calls and other blocks left out):
/// what an agent said, as a run's reply or an announce quotes it.
pub fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| {
                p.get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|t| t == "text")
            })
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Why a turn failed, for a turn that did (`stopReason` `error`, or `aborted`: a run that
/// timed out or was stopped); `None` for any other turn. The reason is its `errorMessage` as
/// stored, else its text, which is where OpenClaw 2026.9.6's `chat.history` puts it ("LLM
/// request failed: connection refused by the provider endpoint.", with no `errorMessage`),
/// else a plain "the run failed" / "the run was aborted".
pub fn run_failure(message: &Value) -> Option<String> {
    let plain = match message.get("stopReason").and_then(Value::as_str) {
        Some("error") => "the run failed",
        Some("aborted") => "the run was aborted",
        _ => return None,
    };
    if let Some(e) = message
        .get("errorMessage")
        .and_then(Value::as_str)
        .filter(|e| !e.trim().is_empty())
    {
        return Some(e.to_string());
    }
    let said = message_text(message);
    Some(if said.trim().is_empty() {
        plain.to_string()
    } else {
        said
    })
}

/// The role a line shows and its text (tool calls as `name({args})`, beside what the agent
/// said with them); `None` for a message without a role, and for an assistant turn with
/// nothing to show.
pub fn role_and_text(message: &Value) -> Option<(LineRole, String)> {
    let role = message.get("role")?.as_str()?;
    let calls: Vec<String> = match message.get("content") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
            .map(|p| {
                format!(
                    "{}({})",
                    p.get("name").and_then(Value::as_str).unwrap_or("?"),
                    p.get("arguments").map(Value::to_string).unwrap_or_default()
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let (role, text) = match role {
        // What the agent said beside its calls is kept: it is often the why of the call.
        "assistant" if !calls.is_empty() => {
            let said = message_text(message);
            let calls = calls.join(", ");
            let text = if said.is_empty() {
                calls
            } else {
                format!("{said}\n{calls}")
            };
            (LineRole::Tool, text)
        }
        "assistant" => match run_failure(message) {
            Some(why) => (LineRole::Error, why),
            None => (LineRole::Assistant, message_text(message)),
        },
        "toolResult" => (LineRole::Result, message_text(message)),
        "user" => (LineRole::User, message_text(message)),
        // OpenClaw's notice that a run failed before it replied ("This turn ended before a
        // reply: …"): shown as the failed run it reports; its other notices are notes.
        "custom"
            if message.get("customType").and_then(Value::as_str) == Some(RUN_FAILED_NOTICE) =>
        {
            (LineRole::Error, message_text(message))
        }
        _ => (LineRole::Note, message_text(message)),
    };
    if text.is_empty() && role == LineRole::Assistant {
        return None;
    }
    Some((role, text))
}

/// The role a line shows, and whether it shows at all: what `role_and_text` gives, without
/// building the text (`None` exactly where `role_and_text` is `None`).
pub fn shown_role(message: &Value) -> Option<LineRole> {
    let role = message.get("role")?.as_str()?;
    let has_calls = match message.get("content") {
        Some(Value::Array(parts)) => parts
            .iter()
            .any(|p| p.get("type").and_then(Value::as_str) == Some("toolCall")),
        _ => false,
    };
    Some(match role {
        "assistant" if has_calls => LineRole::Tool,
        "assistant" if run_failure_kind(message) => LineRole::Error,
        "assistant" if has_text(message) => LineRole::Assistant,
        "assistant" => return None,
        "toolResult" => LineRole::Result,
        "user" => LineRole::User,
        "custom"
            if message.get("customType").and_then(Value::as_str) == Some(RUN_FAILED_NOTICE) =>
        {
            LineRole::Error
        }
        _ => LineRole::Note,
    })
}

/// Whether `run_failure` gives a reason (it always does for such a turn).
fn run_failure_kind(message: &Value) -> bool {
    matches!(
        message.get("stopReason").and_then(Value::as_str),
        Some("error" | "aborted")
    )
}

/// Whether `message_text` is non-empty: a non-empty text block, or two blocks (joined by a
/// newline).
fn has_text(message: &Value) -> bool {
    match message.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(parts)) => {
            let mut blocks = 0;
            for p in parts {
                let text = p
                    .get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|t| t == "text");
                if let Some(t) = p.get("text").and_then(Value::as_str).filter(|_| text) {
                    if !t.is_empty() {
                        return true;
                    }
                    blocks += 1;
                }
            }
            blocks >= 2
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A failed turn as OpenClaw 2026.9.6's `chat.history` returned it on the live peer (the
    /// model's endpoint refused the connection): the reason is the text, no `errorMessage`.
    /// `shown_role` answers as `role_and_text` does, line for line, on every shape a line
    /// can take (a wrong answer would drop or show a line only in `chat.history`).
    #[test]
    fn the_role_alone_agrees_with_the_role_and_text() {
        let text = |t: &str| json!({"type": "text", "text": t});
        let contents = [
            json!(null),
            json!(""),
            json!("hi"),
            json!([]),
            json!([text("")]),
            json!([text(""), text("")]),
            json!([text("said")]),
            json!([{"text": ""}]),
            json!([{"text": "untyped"}]),
            json!([{"type": "thinking", "thinking": "hm"}]),
            json!([{"type": "toolCall", "name": "sessions_list", "arguments": {}}]),
            json!([{"type": "image"}, text("")]),
            json!(7),
        ];
        let roles = [
            json!("assistant"),
            json!("user"),
            json!("toolResult"),
            json!("custom"),
            json!("system"),
            json!(3),
            Value::Null,
        ];
        let stops = [Value::Null, json!("error"), json!("aborted"), json!("stop")];
        let customs = [Value::Null, json!(RUN_FAILED_NOTICE), json!("other")];
        let mut seen = 0;
        for content in &contents {
            for role in &roles {
                for stop in &stops {
                    for custom in &customs {
                        let mut m = json!({"content": content, "stopReason": stop,
                                           "customType": custom});
                        if !role.is_null() {
                            m["role"] = role.clone();
                        }
                        assert_eq!(shown_role(&m), role_and_text(&m).map(|(r, _)| r), "{m}");
                        seen += usize::from(shown_role(&m).is_none());
                    }
                }
            }
        }
        assert!(seen > 0, "some lines are not shown");
    }

    #[test]
    fn a_failed_turn_shows_why_it_failed_in_either_shape() {
        let history = json!({"role": "assistant", "stopReason": "error",
            "content": [{"type": "text",
                         "text": "LLM request failed: connection refused by the provider endpoint."}],
            "provider": "fake", "model": "fake-1"});
        assert_eq!(
            role_and_text(&history),
            Some((
                LineRole::Error,
                "LLM request failed: connection refused by the provider endpoint.".to_string()
            ))
        );
        // As stored in its transcript (and in ours): `errorMessage`, empty content.
        let stored = json!({"role": "assistant", "stopReason": "error", "content": [],
            "errorMessage": "Connection error."});
        assert_eq!(run_failure(&stored).as_deref(), Some("Connection error."));
        let bare = json!({"role": "assistant", "stopReason": "error", "content": []});
        assert_eq!(run_failure(&bare).as_deref(), Some("the run failed"));
        // A run that timed out, as 2026.9.6's chat.history returned it (`agent` with
        // `timeout: 3` on a slow model): empty text, `aborted`; it used to show nothing.
        let timed_out = json!({"role": "assistant", "stopReason": "aborted",
            "content": [{"type": "text", "text": ""}], "errorMessage": "request timed out"});
        assert_eq!(
            role_and_text(&timed_out),
            Some((LineRole::Error, "request timed out".to_string()))
        );
        let replied = json!({"role": "assistant", "stopReason": "stop", "content": "hi"});
        assert_eq!(run_failure(&replied), None);
    }
}
