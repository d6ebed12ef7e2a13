//! How OpenClaw 2026.9.6 shows transcript text to agents: the inbound timestamp envelope
//! stripped from user text, silent replies (`NO_REPLY`, `ANNOUNCE_SKIP`, `REPLY_SKIP`)
//! recognised, and the one-line `lastMessagePreview` of a session.

use serde_json::Value;

use switchboard_types::api::message_text;

// The silent replies live beside `message_text`, so the gateway's `chat.history` hides
// exactly what the engine's tools do.
pub use switchboard_types::api::is_silent_reply;

/// `lastMessagePreview` is at most this many characters, `...` included.
pub const PREVIEW_MAX_CHARS: usize = 240;

/// An envelope's inside is short (`Sun 2026-11-22 21:02 UTC`, a channel name and a time);
/// anything longer is the user's own bracketed text.
const ENVELOPE_MAX_CHARS: usize = 120;

/// `text` without a leading inbound envelope `[<weekday> YYYY-MM-DD HH:MM <zone>] `: one
/// bracket pair with no bracket inside, holding a date and a time, then any whitespace.
/// Only the first one goes (a user who writes an envelope-looking line keeps the rest), and
/// `[Inter-session message]` or `[[reply_to]]` are not envelopes.
pub fn strip_envelope(text: &str) -> &str {
    let Some(rest) = text.strip_prefix('[') else {
        return text;
    };
    let Some(close) = rest
        .char_indices()
        .take(ENVELOPE_MAX_CHARS + 1)
        .find(|&(_, c)| c == ']' || c == '[')
        .and_then(|(i, c)| (c == ']').then_some(i))
    else {
        return text;
    };
    let inside = &rest[..close];
    if !has_date_and_time(inside) {
        return text;
    }
    rest[close + 1..].trim_start()
}

/// A `YYYY-MM-DD` followed later by an `HH:MM`.
fn has_date_and_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| {
        b.get(from..from + n)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let date_at = (0..b.len()).find(|&i| {
        digits(i, 4)
            && b.get(i + 4) == Some(&b'-')
            && digits(i + 5, 2)
            && b.get(i + 7) == Some(&b'-')
            && digits(i + 8, 2)
    });
    let Some(d) = date_at else {
        return false;
    };
    (d + 10..b.len()).any(|i| digits(i, 2) && b.get(i + 2) == Some(&b':') && digits(i + 3, 2))
}

/// A user message with its envelope stripped from the string content or the first text
/// block; other messages are left as they are.
pub fn strip_user_envelope(message: &mut Value) {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return;
    }
    let Some(content) = message.get_mut("content") else {
        return;
    };
    let target = match content {
        Value::String(_) => Some(content),
        Value::Array(parts) => parts
            .iter_mut()
            .find(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|p| p.get_mut("text")),
        _ => None,
    };
    if let Some(Value::String(s)) = target {
        let stripped = strip_envelope(s);
        if stripped.len() != s.len() {
            *s = stripped.to_string();
        }
    }
}

/// The preview OpenClaw gives a message: its text on one line (whitespace runs become one
/// space), cut to `PREVIEW_MAX_CHARS` with `...`; `None` when it has no text.
pub fn preview(message: &Value) -> Option<String> {
    let text = message_text(message);
    let mut one_line = String::with_capacity(text.len().min(PREVIEW_MAX_CHARS * 4));
    let mut chars = 0usize;
    let mut truncated = false;
    for word in text.split_whitespace() {
        for c in (!one_line.is_empty()).then_some(' ').into_iter().chain(word.chars()) {
            if chars == PREVIEW_MAX_CHARS {
                truncated = true;
                break;
            }
            one_line.push(c);
            chars += 1;
        }
        if truncated {
            break;
        }
    }
    if one_line.is_empty() {
        return None;
    }
    if truncated {
        let keep: String = one_line.chars().take(PREVIEW_MAX_CHARS - 3).collect();
        return Some(format!("{keep}..."));
    }
    Some(one_line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_timestamp_envelope_is_stripped() {
        assert_eq!(strip_envelope("[Sun 2026-11-22 21:02 UTC] hello"), "hello");
        assert_eq!(
            strip_envelope("[Telegram me 2026-11-22 21:02 GMT+1]\n  two words"),
            "two words"
        );
    }

    #[test]
    fn other_brackets_are_kept() {
        for text in [
            "[Inter-session message] sourceSession=agent:work:s2",
            "[[reply_to_current]] hi",
            "[note] 2026-11-22 21:02 outside",
            "no envelope [Sun 2026-11-22 21:02 UTC] here",
            "[Sun 2026-11-22] no time",
            "[unclosed 2026-11-22 21:02",
            "",
        ] {
            assert_eq!(strip_envelope(text), text, "{text:?}");
        }
    }

    #[test]
    fn an_envelope_alone_leaves_nothing() {
        assert_eq!(strip_envelope("[Sun 2026-11-22 21:02 UTC] "), "");
        assert_eq!(strip_envelope("[Sun 2026-11-22 21:02 UTC]"), "");
    }

    #[test]
    fn nested_brackets_are_not_an_envelope() {
        let nested = "[[Sun 2026-11-22 21:02 UTC]] hi";
        assert_eq!(strip_envelope(nested), nested);
        let inner = "[Sun [2026-11-22 21:02] UTC] hi";
        assert_eq!(strip_envelope(inner), inner);
    }

    #[test]
    fn only_the_first_envelope_goes() {
        assert_eq!(
            strip_envelope("[Sun 2026-11-22 21:02 UTC] [Mon 2026-11-23 10:00 UTC] again"),
            "[Mon 2026-11-23 10:00 UTC] again"
        );
    }

    #[test]
    fn a_one_megabyte_line_is_handled_without_scanning_it_whole() {
        let mut big = String::from("[");
        big.push_str(&"2026-11-22 21:02 ".repeat(60_000));
        big.push(']');
        assert!(big.len() > 1_000_000);
        assert_eq!(strip_envelope(&big), big.as_str(), "too long to be an envelope");
        let long_body = format!("[Sun 2026-11-22 21:02 UTC] {}", "é".repeat(600_000));
        assert_eq!(strip_envelope(&long_body).chars().count(), 600_000);
        let unicode_inside = format!("[{}] x", "ü".repeat(500_000));
        assert_eq!(strip_envelope(&unicode_inside), unicode_inside);
    }

    #[test]
    fn only_user_messages_lose_their_envelope() {
        let mut user = json!({"role": "user", "content": [{"type": "text", "text": "[Sun 2026-11-22 21:02 UTC] hi"}]});
        strip_user_envelope(&mut user);
        assert_eq!(user["content"][0]["text"], "hi");
        let mut plain = json!({"role": "user", "content": "[Sun 2026-11-22 21:02 UTC] hi"});
        strip_user_envelope(&mut plain);
        assert_eq!(plain["content"], "hi");
        let mut reply = json!({"role": "assistant", "content": "[Sun 2026-11-22 21:02 UTC] hi"});
        strip_user_envelope(&mut reply);
        assert_eq!(reply["content"], "[Sun 2026-11-22 21:02 UTC] hi");
    }

    #[test]
    fn silent_replies_are_recognised() {
        for t in ["REPLY_SKIP", " announce_skip\n", "NO_REPLY"] {
            assert!(is_silent_reply(&json!({"role": "assistant", "content": [{"type": "text", "text": t}]})), "{t:?}");
        }
        for m in [
            json!({"role": "assistant", "content": "REPLY_SKIP, thanks"}),
            json!({"role": "user", "content": "REPLY_SKIP"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "REPLY_SKIP"}, {"type": "toolCall", "name": "x"}]}),
            json!({"role": "assistant"}),
        ] {
            assert!(!is_silent_reply(&m), "{m}");
        }
    }

    #[test]
    fn previews_are_one_line_and_capped() {
        let m = json!({"role": "assistant", "content": "a\n\n b\tc  "});
        assert_eq!(preview(&m).as_deref(), Some("a b c"));
        let long = json!({"role": "user", "content": "x".repeat(241)});
        let p = preview(&long).unwrap();
        assert_eq!(p.chars().count(), 240);
        assert!(p.ends_with("..."));
        let exact = json!({"role": "user", "content": "y".repeat(240)});
        assert_eq!(preview(&exact).unwrap(), "y".repeat(240));
        assert_eq!(preview(&json!({"role": "user", "content": "  "})), None);
    }
}
