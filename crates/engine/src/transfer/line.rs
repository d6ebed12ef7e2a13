//! Owns turning one transcript line's text into what is stored (`parse_raw_line`): the same
//! checks as `parse_line` and byte for byte the same text as encoding its parsed `Value`
//! (serde_json's compact form, fields in source order), without building that `Value`.
//!
//! Parsing into a `Value` (an ordered map and a `String` per key and value) and encoding it
//! again was most of a million-line import's time. `compact` makes the stored text in one
//! pass over the line, copying what the encoding would reproduce unchanged: whitespace between
//! tokens goes, strings without escapes and plain integers are copied, other numbers go
//! through serde_json's own number parser and encoder. Whatever it cannot be sure to encode
//! as the `Value` would be (an escape in a string, a duplicate key, deep nesting, a line that
//! is not valid, a message of the wrong shape) sends the line to `parse_line`, so the result
//! and every skip and its reason are exactly `parse_line`'s.

use std::ops::Range;

use serde_json::Number;

use super::SkipReason;
use super::parse_line;
use switchboard_store::{RawLine, notice};

/// A transcript line as stored, or why it is skipped (as `parse_line` decides).
pub(super) fn parse_raw_line(text: &[u8]) -> Result<RawLine, (SkipReason, String)> {
    if let Some(line) = std::str::from_utf8(text).ok().and_then(compact) {
        return Ok(line);
    }
    parse_line(text).map(|v| RawLine::from_value(&v))
}

/// Nesting deeper than this is left to serde_json, whose own limit (128) decides.
const MAX_DEPTH: usize = 100;

/// Keys of one object compared for duplicates; an object with more goes the slow way.
const MAX_KEYS: usize = 64;

/// Ranges into the output of what the stored columns and the shape check read.
#[derive(Default)]
struct Seen {
    kind: Option<Range<usize>>,
    id: Option<Range<usize>>,
    /// What the top-level `message` is, if present.
    message: Option<Shape>,
    role: Option<Range<usize>>,
    content: Option<Shape>,
    /// The line's `display` is the literal `true` (a shown notice, `notice::row_role`).
    display_true: bool,
    custom_type: Option<Range<usize>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Array,
    String,
    Other,
}

/// Where an object sits: the line itself, its `message`, or anywhere else.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Line,
    Message,
    Other,
}

struct Compactor<'a> {
    src: &'a [u8],
    pos: usize,
    out: Vec<u8>,
    /// The keys of the objects being read, innermost last (for the duplicate check).
    keys: Vec<&'a [u8]>,
    seen: Seen,
}

/// The stored line for `text` when it is a JSON object this pass can encode exactly as
/// serde_json encodes its `Value`, and a line `parse_line` accepts; `None` otherwise.
fn compact(text: &str) -> Option<RawLine> {
    let mut c = Compactor {
        src: text.as_bytes(),
        pos: 0,
        out: Vec::with_capacity(text.len()),
        keys: Vec::new(),
        seen: Seen::default(),
    };
    c.skip_ws();
    if c.peek()? != b'{' {
        return None;
    }
    c.object(1, Scope::Line)?;
    c.skip_ws();
    if c.pos != c.src.len() {
        return None;
    }
    let Compactor { out, seen, .. } = c;
    let text = String::from_utf8(out).ok()?;
    let part = |r: &Option<Range<usize>>| r.as_ref().and_then(|r| text.get(r.clone()));
    let kind = part(&seen.kind);
    if kind == Some("message") {
        // Only a well-shaped message is taken here: `parse_line` words the reasons.
        let role_ok = matches!(part(&seen.role), Some("user" | "assistant" | "toolResult"));
        let content_ok = matches!(seen.content, Some(Shape::String | Shape::Array));
        if seen.message != Some(Shape::Object) || !role_ok || !content_ok {
            return None;
        }
    }
    let role = if seen.message == Some(Shape::Object) {
        part(&seen.role)
    } else {
        None
    };
    let kind = kind.unwrap_or("unknown");
    let notice = notice::notice_shown(seen.display_true, part(&seen.custom_type));
    Some(RawLine {
        role: notice::row_role(kind, role, notice),
        kind: kind.to_string(),
        id: part(&seen.id).unwrap_or("").to_string(),
        text,
    })
}

impl<'a> Compactor<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// JSON's whitespace, the only kind serde_json skips; the encoding has none.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// One value at `depth`; `scope` is the object's, should the value be one.
    fn value(&mut self, depth: usize, scope: Scope) -> Option<Shape> {
        match self.peek()? {
            b'{' => self.object(depth + 1, scope).map(|()| Shape::Object),
            b'[' => self.array(depth + 1).map(|()| Shape::Array),
            b'"' => self.string().map(|_| Shape::String),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<Shape> {
        if !self.src[self.pos..].starts_with(word) {
            return None;
        }
        self.pos += word.len();
        self.out.extend_from_slice(word);
        Some(Shape::Other)
    }

    /// A string without escapes or control characters, which serde_json writes back as it
    /// is (it escapes only `"`, `\` and U+0000–U+001F). Returns its content.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.pos + 1;
        let rest = self.src.get(start..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.pos = start + len + 1;
        self.out.extend_from_slice(&self.src[start - 1..self.pos]);
        Some(&rest[..len])
    }

    /// A number as serde_json encodes it: a plain integer that fits its integer types is
    /// written back as it is; anything else (fraction, exponent, `-0`, a long one) is parsed
    /// and encoded by serde_json itself, so the float rules are its own.
    fn number(&mut self) -> Option<Shape> {
        let start = self.pos;
        let len = self.src[start..]
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(self.src.len() - start);
        let span = &self.src[start..start + len];
        self.pos = start + len;
        let digits = span.strip_prefix(b"-").unwrap_or(span);
        // Up to 18 digits fit both u64 and, negated, i64; no leading zero, not `-0`.
        let plain = !digits.is_empty()
            && digits.len() <= 18
            && digits.iter().all(u8::is_ascii_digit)
            && (digits[0] != b'0' || (digits.len() == 1 && digits.len() == span.len()));
        if plain {
            self.out.extend_from_slice(span);
            return Some(Shape::Other);
        }
        let number: Number = serde_json::from_slice(span).ok()?;
        serde_json::to_writer(&mut self.out, &number).ok()?;
        Some(Shape::Other)
    }

    /// Copy `byte` when it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() != Some(byte) {
            return false;
        }
        self.pos += 1;
        self.out.push(byte);
        true
    }

    /// Copy the bracket opening a container at `depth`; true when `close` follows at once.
    fn open(&mut self, depth: usize, close: u8) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.out.push(self.src[self.pos]);
        self.pos += 1;
        self.skip_ws();
        Some(self.eat(close))
    }

    /// After a member: true at the container's `close`, false after a comma.
    fn next_member(&mut self, close: u8) -> Option<bool> {
        self.skip_ws();
        if self.eat(b',') {
            return Some(false);
        }
        self.eat(close).then_some(true)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if self.open(depth, b']')? {
            return Some(());
        }
        loop {
            self.skip_ws();
            self.value(depth, Scope::Other)?;
            if self.next_member(b']')? {
                return Some(());
            }
        }
    }

    /// An object whose keys have no escapes and no duplicates (serde_json's map would keep
    /// the first's place and the last's value): keys compare as the bytes they are.
    fn object(&mut self, depth: usize, scope: Scope) -> Option<()> {
        if self.open(depth, b'}')? {
            return Some(());
        }
        let base = self.keys.len();
        loop {
            self.skip_ws();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            if self.keys.len() - base >= MAX_KEYS || self.keys[base..].contains(&key) {
                return None;
            }
            self.keys.push(key);
            self.skip_ws();
            if !self.eat(b':') {
                return None;
            }
            self.skip_ws();
            let at = self.out.len();
            let inner = match (scope, key) {
                (Scope::Line, b"message") => Scope::Message,
                _ => Scope::Other,
            };
            let shape = self.value(depth, inner)?;
            // A string's content, without its quotes.
            let content = (shape == Shape::String).then(|| at + 1..self.out.len() - 1);
            match (scope, key) {
                (Scope::Line, b"type") => self.seen.kind = content,
                (Scope::Line, b"id") => self.seen.id = content,
                (Scope::Line, b"message") => self.seen.message = Some(shape),
                (Scope::Message, b"role") => self.seen.role = content,
                (Scope::Message, b"content") => self.seen.content = Some(shape),
                (Scope::Line, b"customType") => self.seen.custom_type = content,
                (Scope::Line, b"display") => {
                    self.seen.display_true = self.out.get(at..) == Some(&b"true"[..]);
                }
                _ => {}
            }
            if self.next_member(b'}')? {
                self.keys.truncate(base);
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What the import stored before this encoder: the parsed line, encoded.
    fn reference(text: &str) -> Result<RawLine, (SkipReason, String)> {
        parse_line(text.as_bytes()).map(|v| RawLine::from_value(&v))
    }

    fn same(text: &str) {
        assert_eq!(parse_raw_line(text.as_bytes()), reference(text), "{text:?}");
    }

    #[test]
    fn the_fast_pass_takes_ordinary_lines() {
        for text in [
            r#"{"type": "message", "id": "a1", "parentId": null, "timestamp": "2026-01-01T00:00:00.000Z", "message": {"role": "user", "content": "hi", "timestamp": 1795343000010}}"#,
            r#"{"type":"message","id":"a2","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"cost":0.00031,"n":-3}}}"#,
            r#"{"type":"session","version":3,"id":"s","cwd":"/"}"#,
            r#"{"z":{},"a":[],"b":[[],{}],"c":true,"d":false,"e":null,"f":""}"#,
            r#"{"n":[0,-1,1.0,1e5,-0,12345678901234567890,123456789012345678,-123456789012345678]}"#,
            r#"{"message":"not an object","type":"custom"}"#,
            r#"{"message":{"role":7},"type":"custom"}"#,
            r#"{"type":"custom_message","customType":"run-failed-before-reply","content":"This turn ended before a reply: x","display":true,"details":{"runId":"r"},"id":"n1"}"#,
            r#"{"type":"custom_message","customType":"x","content":[{"type":"text","text":"y"}],"display":false}"#,
            r#"{"type":"custom_message","customType":"openclaw.runtime-context","content":"c","display":true}"#,
        ] {
            assert!(compact(text).is_some(), "{text}");
            same(text);
        }
    }

    #[test]
    fn anything_unusual_gets_the_same_result_the_slow_way() {
        for text in [
            r#"{"type":"message","id":"e","message":{"role":"user","content":"caf\u00e9 \n"}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"type":"message","message":{"role":"bot","content":"x"}}"#,
            r#"{"type":"message","message":{"role":"user","content":7}}"#,
            r#"{"type":"message","message":{"content":"x"}}"#,
            r#"{"type":"message","message":[]}"#,
            r#"{"type":"message"}"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"{"a":01}"#,
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1} x"#,
            r#"{"a":tru}"#,
            r#"{"a":"unterminated}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":1e400}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":--1}"#,
            r#"{"a":+1}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"#,
            "",
            "{\"a\":\u{7f}}",
        ] {
            same(text);
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        same(&deep);
        let wide = format!(
            "{{{}}}",
            (0..100)
                .map(|i| format!("\"k{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        same(&wide);
    }

    /// JSON values with the awkward parts: escapes, non-ASCII, every number form, repeated
    /// keys, nesting.
    fn json_text() -> impl Strategy<Value = String> {
        let ws = prop::sample::select(vec!["", " ", "\t", "\r\n", "  "]);
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| f.to_string()),
            "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
            "\"([a-z é😀]|\\\\[nt\"\\\\/]|\\\\u00e9|\\\\u0000){0,8}\"",
        ];
        let key = "\"([a-c]|\\\\u0061|é){1,2}\"";
        leaf.prop_recursive(4, 32, 6, move |inner| {
            let ws = ws.clone();
            prop_oneof![
                prop::collection::vec((inner.clone(), ws.clone()), 0..5).prop_map(|items| {
                    let body: Vec<String> = items.into_iter().map(|(v, w)| format!("{w}{v}")).collect();
                    format!("[{}]", body.join(","))
                }),
                prop::collection::vec((key, inner, ws), 0..5).prop_map(|items| {
                    let body: Vec<String> = items
                        .into_iter()
                        .map(|(k, v, w)| format!("{w}{k}{w}:{v}{w}"))
                        .collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_stored_line_is_what_the_parsed_value_encodes_to(
            body in json_text(),
            ty in prop::sample::select(vec!["\"message\"", "\"custom\"", "\"custom_message\"", "1"]),
            role in prop::sample::select(vec!["\"user\"", "\"toolResult\"", "\"x\"", "null"]),
            display in prop::sample::select(vec!["true", "false", "1", "\"true\"", "null"]),
        ) {
            let line = format!(
                "{{\"type\":{ty},\"id\":\"i\",\"message\":{{\"role\":{role},\"content\":{body}}},\"extra\":{body}}}"
            );
            prop_assert_eq!(parse_raw_line(line.as_bytes()), reference(&line));
            let notice = format!(
                "{{\"type\":{ty},\"customType\":{role},\"content\":{body},\"display\":{display}}}"
            );
            prop_assert_eq!(parse_raw_line(notice.as_bytes()), reference(&notice));
            let bare = format!("{{\"v\": {body} }}");
            prop_assert_eq!(parse_raw_line(bare.as_bytes()), reference(&bare));
            if let Ok(Value::Object(_)) = serde_json::from_str::<Value>(&body) {
                prop_assert_eq!(parse_raw_line(body.as_bytes()), reference(&body));
            }
        }
    }
}
