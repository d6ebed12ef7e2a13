//! Owns what `sessions_history` does to transcript messages before they leave the engine:
//! stripping bookkeeping fields, credential redaction, the per-text length cap, image omission
//! and the 80 KiB byte cap on the whole result (OpenClaw `sessions-history-tool.ts` and
//! `logging/redact.ts`; reference §4.4, §4.5, §4.7).
//!
//! Deliberate differences from OpenClaw, each explained where it is implemented:
//! - deleting `details`/`usage`/`cost` or `thinkingSignature` does not set `contentTruncated`
//!   (OpenClaw sets it for almost every assistant message, so the flag told nobody anything);
//! - a truncated text stays within 4000 UTF-16 units including the `\n…(truncated)…` suffix
//!   (OpenClaw's planned behaviour, not its current one);
//! - string leaves of tool-call arguments are redacted too, and leaves under credential-named
//!   keys are masked outright;
//! - the env-style rule only ignores case for the credential words themselves, so prose such as
//!   "primary key: id" or "sessionKey: agent:main:main" is not masked;
//! - one pass over the text for all token patterns, so a value masked by one rule is never
//!   masked again by another.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value};

use switchboard_types::json_size::json_len;

/// Largest serialized size, in UTF-8 bytes, of the returned `messages` array.
pub const HISTORY_MAX_BYTES: usize = 80 * 1024;
/// Longest text kept, in UTF-16 code units (JavaScript string length, as OpenClaw counts).
pub const HISTORY_TEXT_MAX_CHARS: usize = 4000;

/// Appended to a cut text; `…` is U+2026 as in OpenClaw.
const TRUNCATION_SUFFIX: &str = "\n…(truncated)…";
/// UTF-16 length of [`TRUNCATION_SUFFIX`] (checked by a test).
const TRUNCATION_SUFFIX_UNITS: usize = 14;
/// The single message that stands in for a history whose newest message alone is over the cap.
const OVERSIZED_PLACEHOLDER: &str = "[sessions_history omitted: message too large]";

/// Secrets shorter than this (in chars) are replaced by `***`; longer ones keep a short head and
/// tail so a reader can still tell two keys apart.
const MASK_MIN_LEN: usize = 18;
const MASK_KEEP_START: usize = 6;
const MASK_KEEP_END: usize = 4;

/// Result of [`sanitize_history`]; the flags map onto the tool result's `truncated`,
/// `droppedMessages`, `contentTruncated`, `contentRedacted` and `bytes`.
#[derive(Debug, Clone, PartialEq)]
pub struct SanitizedHistory {
    pub messages: Vec<Value>,
    /// `dropped_messages || content_truncated`.
    pub truncated: bool,
    /// Oldest messages were dropped, or everything was replaced by the oversize placeholder.
    pub dropped_messages: bool,
    /// Some text was cut or some image data was omitted.
    pub content_truncated: bool,
    /// Credential redaction changed some text.
    pub content_redacted: bool,
    /// UTF-8 length of the compact JSON serialization of `messages`.
    pub bytes: usize,
}

/// Private-key blocks are handled in their own pass before everything else: the env-style rule
/// would otherwise claim `PRIVATE_KEY=-----BEGIN` and leave the key body for nobody to match.
/// See [`redact_pem_blocks`].
static PEM_BEGIN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN [A-Z ]*PRIVATE KEY-----").expect("PEM BEGIN pattern is a valid regex")
});
static PEM_END_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----END [A-Z ]*PRIVATE KEY-----").expect("PEM END pattern is a valid regex")
});

/// Every other credential shape, as one alternation so each text is scanned once and a masked
/// value (which still looks like `sk-abc…wxyz`) is never re-masked by a later rule. In each
/// alternative the last capture group is the secret; the rest of the match (key name, flag,
/// `Bearer `) is kept. `(?-u:\b)` is an ASCII word boundary, as in JavaScript.
static SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives = [
        // Env-style `NAME = value` / `name: value`. Upper-case names ending in KEY are env
        // variables (`OPENAI_API_KEY`, `SESSION_KEY`); for any case only the unambiguous
        // words count, so `sessionKey: agent:main:main` or `primary key: id` stay readable,
        // while `db_password=…`, `accessToken: …` and `apiKey=…` are caught. A quote may close
        // the name, for Python dicts and JSON fields outside the list below
        // (`{'password': 'x'}`, `"db_password": "x"`).
        r#"(?-u:\b)(?:[A-Z0-9_]*KEY|[A-Za-z0-9_]*(?i:token|secret|password|passwd|api[-_]?key))(?-u:\b)["']?\s*[=:]\s*["']?([^\s"'\\]+)"#,
        // JSON fields.
        r#"(?i)"(?:apiKey|token|secret|password|passwd|accessToken|refreshToken)"\s*:\s*"([^"]+)""#,
        // CLI flags, value after a space or `=`.
        r#"(?i)--(?:api[-_]?key|hook[-_]?token|token|secret|password|passwd)(?:\s+|=)["']?([^\s"']+)"#,
        // Authorization header (Basic credentials are as secret as Bearer ones).
        r"(?i)Authorization\s*[:=]\s*(?:Bearer|Basic)\s+([A-Za-z0-9._\-+=/]+)",
        // Bare bearer token; the length floor keeps "Bearer of bad news" intact.
        r"(?i)(?-u:\b)Bearer\s+([A-Za-z0-9._\-+=]{18,})(?-u:\b)",
        // Provider-prefixed tokens. `sk-` needs 20 more chars (OpenClaw: 8) because real keys
        // are 32+ and shorter `sk-` words (`sk-learn-extras`) exist in prose.
        r"(?i)(?-u:\b)(sk-[A-Za-z0-9_-]{20,})(?-u:\b)",
        r"(?i)(?-u:\b)(ghp_[A-Za-z0-9]{20,})(?-u:\b)",
        r"(?i)(?-u:\b)(github_pat_[A-Za-z0-9_]{20,})(?-u:\b)",
        r"(?i)(?-u:\b)(xox[baprs]-[A-Za-z0-9-]{10,})(?-u:\b)",
        r"(?i)(?-u:\b)(xapp-[A-Za-z0-9-]{10,})(?-u:\b)",
        r"(?i)(?-u:\b)(gsk_[A-Za-z0-9_-]{10,})(?-u:\b)",
        r"(?i)(?-u:\b)(AIza[0-9A-Za-z_-]{20,})(?-u:\b)",
        r"(?i)(?-u:\b)(pplx-[A-Za-z0-9_-]{10,})(?-u:\b)",
        r"(?i)(?-u:\b)(npm_[A-Za-z0-9]{10,})(?-u:\b)",
        // Telegram bot tokens, also inside API URLs (`…/bot123456:AA…/sendMessage`).
        r"(?-u:\b)(?:bot)?([0-9]{6,}:[A-Za-z0-9_-]{20,})(?-u:\b)",
    ];
    let joined = alternatives
        .iter()
        .map(|alt| format!("(?:{alt})"))
        .collect::<Vec<_>>()
        .join("|");
    Regex::new(&joined).expect("credential patterns form a valid regex")
});

/// Object keys inside tool-call arguments whose string value is a credential whatever it looks
/// like (`{"password": "hunter2"}` matches no token shape). Suffix match, so `githubToken`,
/// `client_secret`, `x-api-key` count but `maxTokens` does not.
static SENSITIVE_KEY_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:api[-_]?key|token|secret|passw(?:or)?d|authorization)$")
        .expect("sensitive-key pattern is a valid regex")
});

/// Masks credentials in `text`. Returns `Cow::Borrowed` exactly when nothing changed, so callers
/// can use the variant as the "was redacted" signal.
pub fn redact_credentials(text: &str) -> Cow<'_, str> {
    let after_pem = redact_pem_blocks(text);
    // Collect into an Option first: the replacement borrows `after_pem`, which may be returned.
    let replaced: Option<String> = match SECRET_RE.replace_all(&after_pem, mask_captures) {
        Cow::Owned(s) => Some(s),
        Cow::Borrowed(_) => None,
    };
    let out = replaced.map_or(after_pem, Cow::Owned);
    match out {
        // A match can reproduce its input (`API_KEY=***`); that is not a redaction.
        Cow::Owned(s) if s == text => Cow::Borrowed(text),
        other => other,
    }
}

/// Replaces each private-key block by its BEGIN line, `…redacted…` and its END line. The two
/// lines are the matched markers, not "first and last line" as in OpenClaw, so a key written
/// on one line (or a body sharing the header's line) is not kept. A header with no END after it
/// (output cut off upstream) still loses the key-looking lines that follow it.
///
/// Hand-rolled rather than one lazy regex (`BEGIN(?s:.+?)END`) so the time stays linear: once a
/// search for END has failed, no later header can have one, so it is never searched for again.
fn redact_pem_blocks(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied_to = 0usize; // text[..copied_to] has been dealt with
    let mut end_exhausted = false;
    while let Some(begin) = PEM_BEGIN_RE.find_at(text, copied_to) {
        out.push_str(text.get(copied_to..begin.start()).unwrap_or_default());
        out.push_str(begin.as_str());
        out.push_str("\n…redacted…");
        let end = if end_exhausted {
            None
        } else {
            PEM_END_RE.find_at(text, begin.end())
        };
        copied_to = match end {
            Some(end) => {
                out.push('\n');
                out.push_str(end.as_str());
                end.end()
            }
            None => {
                end_exhausted = true;
                let rest = text.get(begin.end()..).unwrap_or_default();
                begin.end() + key_body_len(rest)
            }
        };
    }
    if copied_to == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(text.get(copied_to..).unwrap_or_default());
    Cow::Owned(out)
}

/// Byte length of the key material at the start of `rest` (what follows a BEGIN line that has
/// no END): on the header's own line, the run of base64 and `\` chars (a key quoted inside JSON
/// text is one line with `\n` escapes); if that run fills the line, then every following line
/// that is all base64, blank, or a `Name: value` header (`Proc-Type`, `DEK-Info`). Stops at the
/// first line of anything else, so prose after a truncated key survives; trailing line breaks
/// are left in place.
fn key_body_len(rest: &str) -> usize {
    fn is_key_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '\\')
    }
    // The first line is measured by its run of key chars, never by searching for its end: the
    // rest of the text can be one long line holding many headers, and scanning it once per
    // header would be quadratic.
    let run = rest.len() - rest.trim_start_matches(is_key_char).len();
    let after = rest.get(run..).unwrap_or_default();
    let line_break = if after.starts_with("\r\n") {
        2
    } else if after.starts_with('\n') {
        1
    } else {
        return run;
    };
    let mut consumed = run + line_break;
    let lines = rest
        .get(consumed..)
        .unwrap_or_default()
        .split_inclusive('\n');
    for line in lines {
        let content = line.trim_end_matches(['\n', '\r']);
        let is_base64 = content.chars().all(is_key_char);
        let is_header = content.split_once(": ").is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
        });
        if !(is_base64 || is_header) {
            break;
        }
        consumed += line.len();
    }
    let body = rest.get(..consumed).unwrap_or_default();
    body.trim_end_matches(['\n', '\r']).len()
}

/// Replacement for one [`SECRET_RE`] match: mask the last non-empty group, keep the rest.
fn mask_captures(caps: &Captures<'_>) -> String {
    let Some(whole) = caps.get(0) else {
        return String::new();
    };
    let secret = caps
        .iter()
        .skip(1)
        .flatten()
        .filter(|m| !m.is_empty())
        .last();
    let Some(secret) = secret else {
        return mask_secret(whole.as_str());
    };
    let text = whole.as_str();
    let from = secret.start().saturating_sub(whole.start());
    let to = secret.end().saturating_sub(whole.start());
    let head = text.get(..from).unwrap_or_default();
    let tail = text.get(to..).unwrap_or_default();
    format!("{head}{}{tail}", mask_secret(secret.as_str()))
}

/// `***` for short secrets, else the first 6 and last 4 chars around `…`. Counts chars, not
/// UTF-16 units, so a mask never splits a character (the secrets matched are ASCII anyway).
fn mask_secret(secret: &str) -> String {
    let len = secret.chars().count();
    if len < MASK_MIN_LEN {
        return "***".to_owned();
    }
    let head: String = secret.chars().take(MASK_KEEP_START).collect();
    let tail: String = secret.chars().skip(len - MASK_KEEP_END).collect();
    format!("{head}…{tail}")
}

/// Sanitises each message, then applies the byte cap. Never panics, whatever the JSON.
pub fn sanitize_history(mut messages: Vec<Value>) -> SanitizedHistory {
    // Flags cover every message passed in, including ones the byte cap drops next (as OpenClaw).
    let mut flags = Flags::default();
    for message in &mut messages {
        sanitize_message(message, &mut flags);
    }

    // Byte cap. Dropping oldest-first while over the cap keeps the longest suffix that fits, so
    // walk from the newest message backwards and serialize each message at most once; older
    // messages that will be dropped anyway are never serialized.
    let mut dropped = false;
    let bytes;
    if let Some(last) = messages.last() {
        let mut kept_bytes = 2usize.saturating_add(json_len(last));
        let mut first = messages.len() - 1;
        while first > 0 && kept_bytes <= HISTORY_MAX_BYTES {
            let next = kept_bytes
                .saturating_add(json_len(&messages[first - 1]))
                .saturating_add(1); // the comma
            if next > HISTORY_MAX_BYTES {
                break;
            }
            kept_bytes = next;
            first -= 1;
        }
        if kept_bytes > HISTORY_MAX_BYTES {
            // Even the newest message alone is too big.
            let mut placeholder = Map::new();
            placeholder.insert("role".into(), Value::from("assistant"));
            placeholder.insert("content".into(), Value::from(OVERSIZED_PLACEHOLDER));
            messages = vec![Value::Object(placeholder)];
            bytes = 2usize.saturating_add(json_len(&messages[0]));
            dropped = true;
        } else {
            messages.drain(..first);
            bytes = kept_bytes;
            dropped = first > 0;
        }
    } else {
        bytes = 2; // "[]"
    }

    SanitizedHistory {
        messages,
        truncated: dropped || flags.truncated,
        dropped_messages: dropped,
        content_truncated: flags.truncated,
        content_redacted: flags.redacted,
        bytes,
    }
}

#[derive(Debug, Default)]
struct Flags {
    truncated: bool,
    redacted: bool,
}

fn sanitize_message(message: &mut Value, flags: &mut Flags) {
    match message {
        Value::Object(obj) => {
            // Bookkeeping the caller has no use for. Not counted as truncation (DELIBERATE FIX:
            // OpenClaw counts it, which sets contentTruncated on nearly every assistant message
            // and so makes the flag meaningless). `shift_remove` keeps the key order stable.
            for key in ["details", "usage", "cost"] {
                obj.shift_remove(key);
            }
            // `errorMessage` is not in OpenClaw's list, but provider errors quote API keys
            // ("Incorrect API key provided: sk-…"), so it gets the same treatment as text.
            for key in ["text", "errorMessage"] {
                clean_string_field(obj, key, flags);
            }
            match obj.get_mut("content") {
                Some(Value::String(s)) => clean_string(s, flags),
                Some(Value::Array(blocks)) => {
                    for block in blocks {
                        sanitize_block(block, flags);
                    }
                }
                _ => {}
            }
        }
        // Not OpenClaw's shape, but a bare string is still text someone will read.
        Value::String(s) => clean_string(s, flags),
        _ => {}
    }
}

fn sanitize_block(block: &mut Value, flags: &mut Flags) {
    let obj = match block {
        Value::Object(obj) => obj,
        Value::String(s) => return clean_string(s, flags),
        _ => return,
    };
    let kind = obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();

    clean_string_field(obj, "text", flags);
    clean_string_field(obj, "partialJson", flags);

    match kind.as_str() {
        "thinking" => {
            clean_string_field(obj, "thinking", flags);
            // Opaque provider blob; dropping it loses nothing readable, so (unlike OpenClaw)
            // it does not count as truncation.
            obj.shift_remove("thinkingSignature");
        }
        "image" => {
            if let Some(data) = obj.shift_remove("data") {
                obj.insert("omitted".into(), Value::Bool(true));
                if let Value::String(b64) = &data {
                    obj.insert("bytes".into(), Value::from(b64.chars().count()));
                }
                flags.truncated = true;
            }
        }
        "toolCall" | "tool_call" | "toolUse" | "tool_use" | "functionCall" => {
            // Arguments are not cut (OpenClaw leaves tool payloads whole), but their string
            // leaves ARE redacted: credentials passed to tools (`curl -H "Authorization: …"`,
            // `{"password": …}`) are the most common way secrets reach a transcript.
            for key in ["arguments", "input"] {
                if let Some(args) = obj.get_mut(key) {
                    redact_json_leaves(args, flags);
                }
            }
        }
        _ => {}
    }
}

/// Redacts every string inside `value`; strings under credential-named keys are masked whole.
/// Iterative, so argument nesting depth cannot overflow the stack.
fn redact_json_leaves(value: &mut Value, flags: &mut Flags) {
    let mut stack: Vec<(&mut Value, bool)> = vec![(value, false)];
    while let Some((value, sensitive)) = stack.pop() {
        match value {
            Value::String(s) if sensitive && !s.is_empty() => {
                let masked = mask_secret(s);
                if masked != *s {
                    *s = masked;
                    flags.redacted = true;
                }
            }
            Value::String(s) => {
                if let Cow::Owned(redacted) = redact_credentials(s) {
                    *s = redacted;
                    flags.redacted = true;
                }
            }
            // A list under a credential-named key (`"tokens": […]` does not count, `"secret": […]`
            // does) is a list of credentials.
            Value::Array(items) => stack.extend(items.iter_mut().map(|v| (v, sensitive))),
            Value::Object(map) => stack.extend(
                map.iter_mut()
                    .map(|(k, v)| (v, SENSITIVE_KEY_RE.is_match(k))),
            ),
            _ => {}
        }
    }
}

fn clean_string_field(obj: &mut Map<String, Value>, key: &str, flags: &mut Flags) {
    if let Some(Value::String(s)) = obj.get_mut(key) {
        clean_string(s, flags);
    }
}

/// Redaction first (so a secret straddling the cut is still masked), then the length cap.
fn clean_string(s: &mut String, flags: &mut Flags) {
    let redacted = match redact_credentials(s) {
        Cow::Owned(r) => Some(r),
        Cow::Borrowed(_) => None,
    };
    if let Some(r) = redacted {
        *s = r;
        flags.redacted = true;
    }
    if let Some(cut) = truncate_text(s) {
        *s = cut;
        flags.truncated = true;
    }
}

/// `None` if `text` fits in [`HISTORY_TEXT_MAX_CHARS`] UTF-16 units; otherwise the text cut at
/// a char boundary plus [`TRUNCATION_SUFFIX`]. The whole result, suffix included, stays within
/// the limit (OpenClaw today appends the suffix after 4000 units and marks keeping the total
/// ≤ 4000 as LATER; we do the later behaviour so the limit is a real limit).
fn truncate_text(text: &str) -> Option<String> {
    // UTF-16 units never outnumber UTF-8 bytes, so short byte strings need no counting.
    if text.len() <= HISTORY_TEXT_MAX_CHARS {
        return None;
    }
    let mut units = 0usize;
    let mut over = false;
    for c in text.chars() {
        units += c.len_utf16();
        if units > HISTORY_TEXT_MAX_CHARS {
            over = true;
            break;
        }
    }
    if !over {
        return None;
    }
    let budget = HISTORY_TEXT_MAX_CHARS - TRUNCATION_SUFFIX_UNITS;
    let mut used = 0usize;
    let mut end = 0usize;
    for (i, c) in text.char_indices() {
        // Stopping before a char that would cross the budget is what keeps surrogate pairs
        // (astral chars, 2 units) whole.
        if used + c.len_utf16() > budget {
            break;
        }
        used += c.len_utf16();
        end = i + c.len_utf8();
    }
    let head = text.get(..end).unwrap_or_default();
    Some(format!("{head}{TRUNCATION_SUFFIX}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn serialized_len(messages: &[Value]) -> usize {
        serde_json::to_vec(messages).unwrap().len()
    }

    fn utf16_len(s: &str) -> usize {
        s.encode_utf16().count()
    }

    fn redact(s: &str) -> String {
        redact_credentials(s).into_owned()
    }

    #[test]
    fn suffix_unit_count_matches_constant() {
        assert_eq!(utf16_len(TRUNCATION_SUFFIX), TRUNCATION_SUFFIX_UNITS);
    }

    #[test]
    fn strips_bookkeeping_without_flagging_truncation() {
        let msg = json!({
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig=="},
                {"type": "text", "text": "hello"}
            ],
            "usage": {"input": 1, "output": 2, "cost": {"total": 0.1}},
            "cost": {"total": 0.1},
            "details": {"x": 1},
            "timestamp": 5
        });
        let out = sanitize_history(vec![msg]);
        assert_eq!(
            out.messages,
            vec![json!({
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "hello"}
                ],
                "timestamp": 5
            })]
        );
        assert!(!out.content_truncated);
        assert!(!out.truncated);
        assert!(!out.dropped_messages);
        assert!(!out.content_redacted);
        assert_eq!(out.bytes, serialized_len(&out.messages));
    }

    #[test]
    fn text_at_limit_is_untouched() {
        let text = "a".repeat(HISTORY_TEXT_MAX_CHARS);
        let out = sanitize_history(vec![json!({"role": "user", "content": text.clone()})]);
        assert_eq!(out.messages[0]["content"], json!(text));
        assert!(!out.content_truncated);
    }

    #[test]
    fn long_text_is_cut_within_limit_without_splitting_emoji() {
        // The body budget is 4000 - 14 = 3986 units. 3985 ASCII units then a 2-unit emoji:
        // the emoji would straddle the cut, so it is dropped whole.
        let budget = HISTORY_TEXT_MAX_CHARS - TRUNCATION_SUFFIX_UNITS;
        assert_eq!(budget, 3986);
        let text = format!("{}😀{}", "a".repeat(budget - 1), "b".repeat(100));
        assert!(utf16_len(&text) > HISTORY_TEXT_MAX_CHARS);
        let out = sanitize_history(vec![json!({"role": "user", "content": text})]);
        let got = out.messages[0]["content"].as_str().unwrap();
        assert_eq!(got, format!("{}\n…(truncated)…", "a".repeat(budget - 1)));
        assert_eq!(utf16_len(got), HISTORY_TEXT_MAX_CHARS - 1);
        assert!(out.content_truncated);
        assert!(out.truncated);
        assert!(!out.dropped_messages);

        // Emoji ending exactly at the budget is kept, and the result is exactly 4000 units.
        let text = format!("{}😀{}", "a".repeat(budget - 2), "b".repeat(100));
        let got = truncate_text(&text).unwrap();
        assert!(got.starts_with(&format!("{}😀\n…", "a".repeat(budget - 2))));
        assert_eq!(utf16_len(&got), HISTORY_TEXT_MAX_CHARS);
    }

    #[test]
    fn all_text_fields_are_capped() {
        let long = "x".repeat(5000);
        let msg = json!({
            "role": "assistant",
            "text": long,
            "content": [
                {"type": "text", "text": long},
                {"type": "thinking", "thinking": long},
                {"type": "toolCall", "id": "1", "name": "t", "arguments": {}, "partialJson": long}
            ]
        });
        let out = sanitize_history(vec![msg]);
        let m = &out.messages[0];
        for s in [
            &m["text"],
            &m["content"][0]["text"],
            &m["content"][1]["thinking"],
            &m["content"][2]["partialJson"],
        ] {
            let s = s.as_str().unwrap();
            assert!(s.ends_with(TRUNCATION_SUFFIX));
            assert_eq!(utf16_len(s), HISTORY_TEXT_MAX_CHARS);
        }
    }

    #[test]
    fn image_data_is_omitted_with_length() {
        let msg = json!({
            "role": "user",
            "content": [{"type": "image", "data": "QUJDRA==", "mimeType": "image/png"}]
        });
        let out = sanitize_history(vec![msg]);
        assert_eq!(
            out.messages[0]["content"][0],
            json!({"type": "image", "mimeType": "image/png", "omitted": true, "bytes": 8})
        );
        assert!(out.content_truncated);
        assert!(out.truncated);
        assert_eq!(out.bytes, serialized_len(&out.messages));
    }

    #[test]
    fn masking_rule() {
        assert_eq!(mask_secret("short"), "***");
        assert_eq!(mask_secret("a234567890123456Z"), "***"); // 17 chars
        assert_eq!(mask_secret("abcdef0123456789wxyz"), "abcdef…wxyz"); // 20 chars
        assert_eq!(mask_secret("abcdef01234567wxyz"), "abcdef…wxyz"); // exactly 18
    }

    #[test]
    fn redacts_env_style() {
        assert_eq!(
            redact("OPENAI_API_KEY=sk1234567890abcdefghijkl"),
            "OPENAI_API_KEY=sk1234…ijkl"
        );
        assert_eq!(
            redact("export GITHUB_TOKEN: short"),
            "export GITHUB_TOKEN: ***"
        );
        assert_eq!(redact("PASSWORD = \"hunter2\""), "PASSWORD = \"***\"");
        assert_eq!(redact("db_password=hunter2 next"), "db_password=*** next");
        assert_eq!(redact("Token: abc"), "Token: ***");
        assert_eq!(redact("apiKey=0123456789abcdefghij"), "apiKey=012345…ghij");
    }

    #[test]
    fn redacts_json_fields() {
        assert_eq!(
            redact(r#"{"apiKey": "abcdefghijklmnopqrstuvwxyz", "user": "bob"}"#),
            r#"{"apiKey": "abcdef…wxyz", "user": "bob"}"#
        );
        assert_eq!(
            redact(r#"{"refreshToken":"r1"}"#),
            r#"{"refreshToken":"***"}"#
        );
        assert_eq!(redact(r#"{"password": "p w d"}"#), r#"{"password": "***"}"#);
        // Fields outside the JSON list, and Python dict reprs, through the env-style rule.
        assert_eq!(
            redact(r#"{"db_password": "hunter2"}"#),
            r#"{"db_password": "***"}"#
        );
        assert_eq!(
            redact("{'api_key': 'abcdefghijklmnopqrstuvwxyz'}"),
            "{'api_key': 'abcdef…wxyz'}"
        );
    }

    #[test]
    fn redacts_cli_flags() {
        assert_eq!(
            redact("run --token abc123 --verbose"),
            "run --token *** --verbose"
        );
        assert_eq!(redact("run --api-key=abc123"), "run --api-key=***");
        assert_eq!(
            redact("openclaw --hook-token 'abcdefghijklmnopqrstuvwxyz'"),
            "openclaw --hook-token 'abcdef…wxyz'"
        );
        assert_eq!(redact("--passwd s3cret"), "--passwd ***");
        assert_eq!(redact("--secret=x"), "--secret=***");
    }

    #[test]
    fn redacts_bearer_tokens() {
        assert_eq!(
            redact("Authorization: Bearer abc.def-ghi_jkl"),
            "Authorization: Bearer ***"
        );
        assert_eq!(
            redact("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig'"),
            "curl -H 'Authorization: Bearer eyJhbG….sig'"
        );
        assert_eq!(
            redact("use Bearer abcdefghijklmnopqrstuv now"),
            "use Bearer abcdef…stuv now"
        );
        // Under 18 chars after a bare Bearer: not a token.
        assert_eq!(redact("Bearer shortvalue"), "Bearer shortvalue");
    }

    #[test]
    fn redacts_pem_blocks() {
        let pem = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabcdef==\n-----END RSA PRIVATE KEY-----\ndone";
        assert_eq!(
            redact(pem),
            "key:\n-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----\ndone"
        );
        let one_line = "-----BEGIN PRIVATE KEY-----MIIEabc-----END PRIVATE KEY-----";
        assert_eq!(
            redact(one_line),
            "-----BEGIN PRIVATE KEY-----\n…redacted…\n-----END PRIVATE KEY-----"
        );
        let cut_off = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA";
        assert_eq!(
            redact(cut_off),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n…redacted…"
        );
        let cut_then_prose = "-----BEGIN PRIVATE KEY-----\nMIIE\nProc-Type: 4,ENCRYPTED\n\nAAAA==\nThe key above is old.\nbye";
        assert_eq!(
            redact(cut_then_prose),
            "-----BEGIN PRIVATE KEY-----\n…redacted…\nThe key above is old.\nbye"
        );
        // Quoted inside JSON text, with `\n` escapes instead of line breaks.
        let quoted = r#"{"pem": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"}"#;
        assert_eq!(
            redact(quoted),
            "{\"pem\": \"-----BEGIN EC PRIVATE KEY-----\n…redacted…\n-----END EC PRIVATE KEY-----\\n\"}"
        );
        let quoted_cut = r#"{"pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQ\nAAAB", "ok": 1}"#;
        assert_eq!(
            redact(quoted_cut),
            "{\"pem\": \"-----BEGIN PRIVATE KEY-----\n…redacted…\", \"ok\": 1}"
        );
        // Certificates are public.
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
        assert_eq!(redact(cert), cert);
    }

    #[test]
    fn many_unterminated_pem_headers_stay_linear() {
        // A lazy BEGIN…END regex would rescan the rest of the text for every header.
        let text = "-----BEGIN PRIVATE KEY-----.".repeat(20_000);
        let out = redact(&text);
        assert_eq!(out.matches("…redacted…").count(), 20_000);
        assert!(!out.contains("-----END"));
    }

    #[test]
    fn redacts_prefixed_tokens() {
        let cases = [
            ("sk-proj-abcdefghijklmnopqrstuvwx", "sk-pro…uvwx"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_ab…6789"),
            ("github_pat_11ABCDEFG0abcdefghijklmnop", "github…mnop"),
            ("xoxb-123456789012-abcdefghij", "xoxb-1…ghij"),
            ("xapp-1-A0123456789", "xapp-1…6789"),
            ("xapp-1-A01234567", "***"),
            ("gsk_abcdefghijklmnopqrstuv", "gsk_ab…stuv"),
            ("AIzaSyA1234567890abcdefghijk", "AIzaSy…hijk"),
            ("pplx-abcdefghijklmnop", "pplx-a…mnop"),
            ("npm_abcdefghijklmnopqrstuvwxyz", "npm_ab…wxyz"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                redact(&format!("key is {input}.")),
                format!("key is {expected}.")
            );
        }
    }

    #[test]
    fn redacts_telegram_tokens() {
        assert_eq!(
            redact("token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw here"),
            "token 123456…Dsaw here"
        );
        assert_eq!(
            redact(
                "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe"
            ),
            "https://api.telegram.org/bot123456…Dsaw/getMe"
        );
    }

    #[test]
    fn prose_is_unchanged() {
        for text in [
            "the token expired",
            "I forgot my password yesterday, the secret is out",
            "Bearer of bad news",
            "risk-assessment and task-management are fine",
            "sk-learn-extras is a package",
            "primary key: id",
            "sessionKey: agent:main:main",
            "maxTokens: 4096, input_tokens=12",
            "passwordless login; tokens: 5",
            "at 12:30 we met 123456:short",
            "日本語のテキスト — no secrets here 😀",
        ] {
            assert!(
                matches!(redact_credentials(text), Cow::Borrowed(_)),
                "changed: {text} -> {}",
                redact(text)
            );
        }
    }

    #[test]
    fn masked_values_are_not_masked_again() {
        // One pass: the flag rule and the env rule both match here, only one masks.
        assert_eq!(
            redact("--api-key=sk-abcdefghijklmnopqrstuvwxyz"),
            "--api-key=sk-abc…wxyz"
        );
    }

    #[test]
    fn redaction_sets_flag_and_applies_before_truncation() {
        let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        // Secret straddles the 3986-unit cut: it must be masked before the text is cut.
        // Raw: 4022 units, the secret spanning units 3971..4011; masked: 3993 units.
        let text = format!("{} {secret} {}", "a".repeat(3970), "b".repeat(10));
        let out = sanitize_history(vec![json!({"role": "user", "content": text})]);
        let got = out.messages[0]["content"].as_str().unwrap();
        assert!(!got.contains("ghp_abcdefghij"));
        assert!(got.contains("ghp_ab…6789"));
        assert!(out.content_redacted);
        assert!(!out.content_truncated, "masked text fits again");

        let out = sanitize_history(vec![json!({"role": "user", "content": "plain"})]);
        assert!(!out.content_redacted);
    }

    #[test]
    fn tool_call_argument_leaves_are_redacted() {
        let msg = json!({
            "role": "assistant",
            "content": [{
                "type": "toolCall", "id": "c1", "name": "exec",
                "arguments": {
                    "command": "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz' x",
                    "env": {"password": "hunter2", "maxTokens": "4096", "secrets": ["a"]},
                    "keys": {"secret": ["s3cret", "abcdefghijklmnopqrstuvwxyz"]},
                    "list": ["ghp_abcdefghijklmnopqrstuvwxyz0123456789", 3, null]
                }
            }]
        });
        let out = sanitize_history(vec![msg]);
        let args = &out.messages[0]["content"][0]["arguments"];
        assert_eq!(
            args["command"],
            json!("curl -H 'Authorization: Bearer abcdef…wxyz' x")
        );
        assert_eq!(
            args["env"],
            json!({"password": "***", "maxTokens": "4096", "secrets": ["a"]})
        );
        assert_eq!(args["keys"], json!({"secret": ["***", "abcdef…wxyz"]}));
        assert_eq!(args["list"], json!(["ghp_ab…6789", 3, null]));
        assert!(out.content_redacted);
        assert!(!out.content_truncated);
    }

    #[test]
    fn byte_cap_drops_oldest_first() {
        let chunk = "y".repeat(3000);
        let messages: Vec<Value> = (0..40)
            .map(|i| json!({"role": "user", "content": chunk, "seq": i}))
            .collect();
        assert!(serialized_len(&messages) > HISTORY_MAX_BYTES);
        let out = sanitize_history(messages);
        assert!(out.dropped_messages);
        assert!(out.truncated);
        assert!(!out.content_truncated);
        assert!(out.bytes <= HISTORY_MAX_BYTES);
        assert_eq!(out.bytes, serialized_len(&out.messages));
        // Newest kept, oldest gone, contiguous.
        let seqs: Vec<i64> = out
            .messages
            .iter()
            .map(|m| m["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(*seqs.last().unwrap(), 39);
        assert!(seqs[0] > 0);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
        // Adding back the next older message would have broken the cap.
        let one_more = json!({"role": "user", "content": chunk, "seq": seqs[0] - 1});
        assert!(out.bytes + serde_json::to_vec(&one_more).unwrap().len() + 1 > HISTORY_MAX_BYTES);
    }

    #[test]
    fn oversized_single_message_becomes_placeholder() {
        // Tool-call arguments are never cut, so this message stays larger than the cap.
        let big = json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "1", "name": "write",
                         "arguments": {"body": "z".repeat(HISTORY_MAX_BYTES)}}]
        });
        let out = sanitize_history(vec![json!({"role": "user", "content": "hi"}), big]);
        assert_eq!(
            out.messages,
            vec![
                json!({"role": "assistant", "content": "[sessions_history omitted: message too large]"})
            ]
        );
        assert!(out.dropped_messages);
        assert!(out.truncated);
        assert_eq!(out.bytes, serialized_len(&out.messages));
    }

    #[test]
    fn empty_and_odd_inputs() {
        let out = sanitize_history(vec![]);
        assert_eq!(out.bytes, 2);
        assert!(!out.truncated);

        let odd = vec![
            json!(null),
            json!(42),
            json!("API_KEY=abcdefghijklmnopqrstuvwxyz"),
            json!({"role": 1, "content": {"weird": true}, "text": 7}),
            json!({"content": [null, 1, "--token abc", {"type": 5}, {"type": "image", "data": 9}]}),
        ];
        let out = sanitize_history(odd);
        assert_eq!(out.messages[2], json!("API_KEY=abcdef…wxyz"));
        assert_eq!(out.messages[4]["content"][2], json!("--token ***"));
        assert_eq!(
            out.messages[4]["content"][4],
            json!({"type": "image", "omitted": true})
        );
        assert_eq!(out.bytes, serialized_len(&out.messages));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "(sk-|ghp_|Bearer |API_KEY=|--token |[0-9]{6}:)[A-Za-z0-9_😀é-]{0,40}"
                .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("type".to_owned()),
                        Just("text".to_owned()),
                        Just("content".to_owned()),
                        Just("data".to_owned()),
                        Just("arguments".to_owned()),
                        Just("password".to_owned()),
                        "[a-z]{1,8}",
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_message() -> impl Strategy<Value = Value> {
        let block = prop_oneof![
            ".{0,50}".prop_map(|t| json!({"type": "text", "text": t})),
            ".{0,50}"
                .prop_map(|t| json!({"type": "thinking", "thinking": t, "thinkingSignature": "s"})),
            "[A-Za-z0-9+/]{0,80}"
                .prop_map(|d| json!({"type": "image", "data": d, "mimeType": "image/png"})),
            arb_json()
                .prop_map(|a| json!({"type": "toolCall", "id": "1", "name": "n", "arguments": a})),
            arb_json(),
        ];
        prop_oneof![
            (".{0,200}", 0usize..9000, any::<char>()).prop_map(|(s, n, c)| {
                let mut text = s;
                text.extend(std::iter::repeat_n(c, n));
                json!({"role": "user", "content": text, "usage": {"input": 1}})
            }),
            prop::collection::vec(block, 0..5)
                .prop_map(|blocks| json!({"role": "assistant", "content": blocks, "details": {}})),
            arb_json(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn redaction_never_panics(s in any::<String>()) {
            let out = redact_credentials(&s);
            if let Cow::Owned(o) = &out {
                prop_assert_ne!(o, &s);
            }
        }

        #[test]
        fn truncation_respects_limit(s in ".{0,100}", c in any::<char>(), n in 0usize..5000) {
            let mut text = s;
            text.extend(std::iter::repeat_n(c, n));
            match truncate_text(&text) {
                None => prop_assert!(utf16_len(&text) <= HISTORY_TEXT_MAX_CHARS),
                Some(cut) => {
                    prop_assert!(utf16_len(&cut) <= HISTORY_TEXT_MAX_CHARS);
                    prop_assert!(cut.ends_with(TRUNCATION_SUFFIX));
                    let body = &cut[..cut.len() - TRUNCATION_SUFFIX.len()];
                    prop_assert!(text.starts_with(body));
                }
            }
        }

        #[test]
        fn sanitize_never_panics_and_bytes_are_exact(
            messages in prop::collection::vec(arb_message(), 0..40)
        ) {
            let out = sanitize_history(messages);
            prop_assert_eq!(out.bytes, serialized_len(&out.messages));
            let is_placeholder = out.messages.len() == 1
                && out.messages[0]["content"] == json!(OVERSIZED_PLACEHOLDER);
            prop_assert!(out.bytes <= HISTORY_MAX_BYTES || is_placeholder);
            prop_assert_eq!(out.truncated, out.dropped_messages || out.content_truncated);
        }
    }
}
