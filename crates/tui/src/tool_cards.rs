//! Tool calls as cards: a tool line's text (`said\nname({args}), name({args})`, as
//! `api::role_and_text` writes it) split into its calls, each paired with the result line
//! that follows it, with a short argument summary and an ok/error status.

use serde_json::Value;

use super::state::TranscriptLine;

/// One call of a tool line.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    /// The arguments as given (JSON when they parse, else the raw text).
    pub args: Result<Value, String>,
}

/// What the agent wrote beside its calls, and the calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLine {
    pub said: String,
    pub calls: Vec<Call>,
}

/// How a call ended, as far as its result line tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Error,
    /// No result line (yet) in the loaded window.
    Pending,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Pending => "…",
        }
    }
}

/// Split a tool line's text into what was said and the calls. Text that does not read as
/// calls is one call named `?` holding it, so nothing is ever lost from the screen.
pub fn parse(text: &str) -> ToolLine {
    // The calls are the last line; what was said (if anything) comes before it.
    let (said, calls_text) = match text.rfind('\n') {
        Some(i) if looks_like_call(&text[i + 1..]) => (&text[..i], &text[i + 1..]),
        _ => ("", text),
    };
    let mut calls = Vec::new();
    let mut rest = calls_text.trim_start();
    while !rest.is_empty() {
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_string();
        let after = &rest[open + 1..];
        let mut stream = serde_json::Deserializer::from_str(after).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                let used = stream.byte_offset();
                let tail = after[used..].trim_start();
                let Some(tail) = tail.strip_prefix(')') else {
                    break;
                };
                calls.push(Call { name, args: Ok(v) });
                rest = tail.trim_start().trim_start_matches(',').trim_start();
                continue;
            }
            _ => break,
        }
    }
    if calls.is_empty() || !rest.is_empty() {
        // Not the shape expected (text escaped on its way in, a cut line): keep it whole.
        let name = calls_text
            .split('(')
            .next()
            .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace))
            .unwrap_or("?")
            .to_string();
        return ToolLine {
            said: said.to_string(),
            calls: vec![Call {
                name,
                args: Err(calls_text.to_string()),
            }],
        };
    }
    ToolLine {
        said: said.to_string(),
        calls,
    }
}

fn looks_like_call(s: &str) -> bool {
    s.find('(')
        .is_some_and(|i| i > 0 && !s[..i].contains(char::is_whitespace))
        && s.ends_with(')')
}

/// `key: value` pairs of the arguments on one line, each value cut short.
pub fn summary(args: &Result<Value, String>) -> String {
    match args {
        Ok(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => format!("{:?}", short(s, 24)),
                    other => short(&other.to_string(), 24),
                };
                format!("{k}: {v}")
            })
            .collect::<Vec<_>>()
            .join(", "),
        Ok(other) => short(&other.to_string(), 60),
        Err(raw) => short(raw, 60),
    }
}

fn short(s: &str, max: usize) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() <= max {
        s
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Pretty-printed arguments, one string per row.
pub fn pretty(args: &Result<Value, String>) -> Vec<String> {
    match args {
        Ok(v) => serde_json::to_string_pretty(v)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect(),
        Err(raw) => raw.lines().map(str::to_string).collect(),
    }
}

/// Whether a result's text reports a failure: a JSON object with `"status": "error"` or an
/// `error` field, or text starting with "error".
pub fn status_of(result: &str) -> Status {
    let t = result.trim_start();
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(t) {
        let failed = m.get("status").and_then(Value::as_str) == Some("error")
            || m.get("error").is_some_and(|e| !e.is_null());
        return if failed { Status::Error } else { Status::Ok };
    }
    if t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("error")) {
        Status::Error
    } else {
        Status::Ok
    }
}

/// The result lines answering the tool line at `index`: the result lines right after it,
/// in call order.
pub fn results_of(lines: &[TranscriptLine], index: usize) -> Vec<&TranscriptLine> {
    lines
        .iter()
        .skip(index + 1)
        .take_while(|l| l.role == "result")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_and_what_was_said_come_apart() {
        let t = parse(
            "let me check\nsessions_list({\"limit\":5}), sessions_send({\"sessionKey\":\"a(b)\",\"message\":\"hi, there\"})",
        );
        assert_eq!(t.said, "let me check");
        assert_eq!(t.calls.len(), 2);
        assert_eq!(t.calls[0].name, "sessions_list");
        assert_eq!(
            t.calls[1].args,
            Ok(json!({"sessionKey": "a(b)", "message": "hi, there"}))
        );
        assert_eq!(summary(&t.calls[0].args), "limit: 5");
    }

    #[test]
    fn text_that_is_not_calls_is_kept_whole() {
        let t = parse("weird(stuff");
        assert_eq!(t.calls.len(), 1);
        assert_eq!(t.calls[0].args, Err("weird(stuff".into()));
    }

    #[test]
    fn an_error_result_reads_as_error() {
        assert_eq!(
            status_of(r#"{"status":"error","error":"nope"}"#),
            Status::Error
        );
        assert_eq!(status_of(r#"{"status":"ok"}"#), Status::Ok);
        assert_eq!(status_of("Error: no such session"), Status::Error);
        assert_eq!(status_of("fine"), Status::Ok);
    }
}
