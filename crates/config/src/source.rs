//! The config file's JSON5 text as json5 reads it: the value, where each key path was written
//! (problems are reported by path and line), the literal of each non-finite number (`NaN`,
//! `Infinity`, which `serde_json::Value` cannot hold), and syntax errors in words.
//!
//! json5 gives positions only with its errors. Lines therefore come from two places: a key
//! the parser hands over borrowed is a slice of the text, so its offset is its line (one pass,
//! while the value is built); a path with no such key (an array element, a key written with
//! escapes) is found by walking the text to it again and asking for a type its value does not
//! have, which json5 refuses at the value's first token. Those walks are few and capped.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;

use json5::ErrorCode;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Walks back to the text for a path's line at most this many times per file; past it a
/// problem is pinned to the nearest ancestor whose key was seen (a hostile file with hundreds
/// of problems at array elements must not cost hundreds of parses).
const MAX_LINE_WALKS: usize = 32;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// `agents.list[1].id`; a key that is not a plain name is quoted (`models.providers["a.b"]`) so
/// the path stays unambiguous.
pub(super) fn format_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
            Seg::Key(k) if is_plain_key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Key(k) => out.push_str(&format!("[{k:?}]")),
        }
    }
    out
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$')
}

/// Whether the text holds no value at all (only whitespace and comments): the defaults apply.
/// Exactly then does the text followed by `null` parse.
pub(super) fn is_blank(src: &str) -> bool {
    json5::from_str::<IgnoredAny>(&format!("{src}\nnull")).is_ok()
}

/// A parsed config text.
pub(super) struct Source<'a> {
    src: &'a str,
    /// The value, non-finite numbers as null.
    pub value: Value,
    /// formatted path → the literal written where the value holds null for a non-finite number
    pub non_finite: HashMap<String, &'static str>,
    /// formatted path → 1-based line of its key, for keys json5 handed over as slices
    key_lines: HashMap<String, usize>,
    /// byte offset of each line's start
    line_starts: Vec<usize>,
    walks_left: Cell<usize>,
}

impl<'a> Source<'a> {
    pub(super) fn parse(src: &'a str) -> Result<Source<'a>, json5::Error> {
        // The whole text first, as `from_str` checks it (trailing text included); the walk
        // below then only builds.
        json5::from_str::<IgnoredAny>(src)?;
        let mut source = Source {
            src,
            value: Value::Null,
            non_finite: HashMap::new(),
            key_lines: HashMap::new(),
            line_starts: std::iter::once(0)
                .chain(src.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
            walks_left: Cell::new(MAX_LINE_WALKS),
        };
        let mut offsets = HashMap::new();
        let mut de = json5::Deserializer::from_str(src);
        let value = Build {
            src,
            path: Vec::new(),
            non_finite: &mut source.non_finite,
            offsets: &mut offsets,
        }
        .deserialize(&mut de)?;
        source.value = value;
        source.key_lines = offsets
            .into_iter()
            .map(|(path, offset)| (path, source.line_at(offset)))
            .collect();
        Ok(source)
    }

    /// 1-based line of a byte offset.
    fn line_at(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    /// The source line of `segs`, or of its nearest ancestor present in the source (a missing
    /// key is reported where its object is); the file's first token for the root.
    pub(super) fn line_of(&self, segs: &[Seg]) -> Option<usize> {
        let present = present_depth(&self.value, segs);
        for n in (0..=present).rev() {
            let prefix = &segs[..n];
            if let Some(line) = self.key_lines.get(&format_path(prefix)) {
                return Some(*line);
            }
            if let Some(line) = self.walk_to(prefix) {
                return Some(line);
            }
        }
        None
    }

    /// The line where the value at `segs` starts, found by asking json5 for a type that value
    /// does not have.
    fn walk_to(&self, segs: &[Seg]) -> Option<usize> {
        let left = self.walks_left.get();
        if left == 0 {
            return None;
        }
        self.walks_left.set(left - 1);
        let null = node_at(&self.value, segs).is_none_or(Value::is_null);
        let mut de = json5::Deserializer::from_str(self.src);
        let err = Seek { segs, null }.deserialize(&mut de).err()?;
        err.position().map(|p| p.line + 1)
    }
}

/// How many leading steps of `segs` exist in `value`.
fn present_depth(value: &Value, segs: &[Seg]) -> usize {
    let mut node = value;
    for (n, seg) in segs.iter().enumerate() {
        match step(node, seg) {
            Some(next) => node = next,
            None => return n,
        }
    }
    segs.len()
}

fn node_at<'v>(value: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
    segs.iter().try_fold(value, step)
}

fn step<'v>(node: &'v Value, seg: &Seg) -> Option<&'v Value> {
    match (seg, node) {
        (Seg::Key(k), Value::Object(m)) => m.get(k),
        (Seg::Index(i), Value::Array(a)) => a.get(*i),
        _ => None,
    }
}

/// Builds the value, noting non-finite numbers and the offset of every borrowed key.
struct Build<'s, 'm> {
    src: &'s str,
    path: Vec<Seg>,
    non_finite: &'m mut HashMap<String, &'static str>,
    offsets: &'m mut HashMap<String, usize>,
}

impl Build<'_, '_> {
    fn child(&mut self, seg: Seg) -> Build<'_, '_> {
        let mut path = self.path.clone();
        path.push(seg);
        Build {
            src: self.src,
            path,
            non_finite: self.non_finite,
            offsets: self.offsets,
        }
    }

    /// A repeated key's earlier value is replaced: so are its notes.
    fn forget_under(&mut self, path: &str) {
        let under = |p: &String| {
            p == path
                || p.strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        };
        self.non_finite.retain(|p, _| !under(p));
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON5 value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        if let Some(n) = serde_json::Number::from_f64(v) {
            return Ok(Value::Number(n));
        }
        let literal = if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        self.non_finite.insert(format_path(&self.path), literal);
        Ok(Value::Null)
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(Seg::Index(items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key { src: self.src })? {
            let mut path = self.path.clone();
            path.push(Seg::Key(key.text.clone()));
            let formatted = format_path(&path);
            self.forget_under(&formatted);
            match key.offset {
                Some(offset) => self.offsets.insert(formatted, offset),
                None => self.offsets.remove(&formatted),
            };
            let value = map.next_value_seed(self.child(Seg::Key(key.text.clone())))?;
            out.insert(key.text, value);
        }
        Ok(Value::Object(out))
    }
}

/// A key, and its offset in the text when json5 hands it over as a slice of it.
struct KeyText {
    text: String,
    offset: Option<usize>,
}

struct Key<'s> {
    src: &'s str,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = KeyText;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<KeyText, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = KeyText;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<KeyText, E> {
        let start = self.src.as_ptr() as usize;
        let at = v.as_ptr() as usize;
        let offset = (at >= start && at <= start + self.src.len()).then(|| at - start);
        Ok(KeyText {
            text: v.to_string(),
            offset,
        })
    }

    fn visit_str<E>(self, v: &str) -> Result<KeyText, E> {
        Ok(KeyText {
            text: v.to_string(),
            offset: None,
        })
    }
}

/// Walks to a path and asks for a type its value does not have (null where it is not null, a
/// bool where it is), so json5 fails at that value's first token with its position.
struct Seek<'p> {
    segs: &'p [Seg],
    null: bool,
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match (self.segs.is_empty(), self.null) {
            (true, false) => d.deserialize_unit(Refuse),
            (true, true) => d.deserialize_bool(Refuse),
            (false, _) => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the path's container")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.segs.split_first() else {
            return Err(de::Error::custom("not an object"));
        };
        while let Some(key) = map.next_key::<String>()? {
            if &key == want {
                map.next_value_seed(Seek {
                    segs: rest,
                    null: self.null,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.segs.split_first() else {
            return Err(de::Error::custom("not an array"));
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Seek {
            segs: rest,
            null: self.null,
        })?;
        Ok(())
    }
}

/// Accepts nothing.
struct Refuse;

impl Visitor<'_> for Refuse {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("nothing")
    }
}

/// A syntax error's line and message: where json5 stopped, in words; a missing comma is
/// reported at the end of the line it belongs to.
pub(super) fn syntax_error(src: &str, e: &json5::Error) -> (Option<usize>, String) {
    let what = match e.code() {
        Some(code) => describe(code).to_string(),
        None => e.to_string(),
    };
    let Some(pos) = e.position() else {
        return (None, format!("syntax error: {what}"));
    };
    if e.code() == Some(ErrorCode::ExpectedComma)
        && let Some((line, column)) = end_before(src, pos.line, pos.column)
        && line < pos.line + 1
    {
        return (
            Some(line),
            format!(
                "syntax error at column {column}: {what} (is a comma missing before line {}?)",
                pos.line + 1
            ),
        );
    }
    let hint = if e.code() == Some(ErrorCode::ExpectedComma) {
        " (is a comma missing?)"
    } else {
        ""
    };
    (
        Some(pos.line + 1),
        format!("syntax error at column {}: {what}{hint}", pos.column + 1),
    )
}

/// The 1-based line and column just after the last non-blank character before a 0-based
/// position: where a missing comma belongs.
fn end_before(src: &str, line: usize, column: usize) -> Option<(usize, usize)> {
    let line_start = src
        .split_inclusive('\n')
        .take(line)
        .map(str::len)
        .sum::<usize>();
    let offset = src[line_start..]
        .char_indices()
        .nth(column)
        .map_or(src.len(), |(i, _)| line_start + i);
    let before = src.get(..offset)?.trim_end();
    let line_no = before.matches('\n').count() + 1;
    let last_line = before.rsplit('\n').next().unwrap_or(before);
    Some((line_no, last_line.chars().count() + 1))
}

fn describe(code: ErrorCode) -> &'static str {
    use ErrorCode::*;
    match code {
        EofParsingArray => "the file ends inside an array (a `]` is missing)",
        EofParsingObject => "the file ends inside an object (a `}` is missing)",
        EofParsingString => "a string is not closed (a closing quote is missing)",
        EofParsingComment => "a `/*` comment is not closed",
        EofParsingEscapeSequence => "the file ends inside an escape sequence",
        EofParsingValue | EofParsingBool | EofParsingNull | EofParsingNumber
        | EofParsingIdentifier => "the file ends where a value was expected",
        ExpectedBool
        | ExpectedNull
        | ExpectedNumber
        | ExpectedString
        | ExpectedStringOrObject
        | ExpectedValue => "expected a value",
        ExpectedClosingBrace => "expected `}`",
        ExpectedClosingBracket => "expected `]`",
        ExpectedOpeningBrace => "expected `{`",
        ExpectedOpeningBracket => "expected `[`",
        ExpectedColon => "expected `:` after a key",
        ExpectedComma => "expected a comma",
        ExpectedComment => "expected a comment after `/`",
        ExpectedIdentifier | InvalidKey => "expected a key (a name or a quoted string)",
        InvalidBytes => "the text is not valid",
        InvalidEscapeSequence => "invalid escape sequence in a string",
        LeadingZero => "a number cannot start with 0",
        LineTerminatorInString => "a string is not closed before the end of its line",
        OverflowParsingNumber => "a number is too large",
        TrailingCharacters => "more text after the end of the value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(src: &str, path: &[Seg]) -> Option<usize> {
        Source::parse(src).expect("parses").line_of(path)
    }

    fn k(name: &str) -> Seg {
        Seg::Key(name.into())
    }

    #[test]
    fn finds_nested_keys_and_array_elements() {
        let src = "{\n  agents: {\n    list: [\n      { id: 'main' },\n      {\n        id: \"work\",\n        subagents: { allowAgents: ['*'] },\n      },\n    ],\n  },\n}\n";
        let list = [k("agents"), k("list")];
        let at = |rest: &[Seg]| line(src, &[&list[..], rest].concat());
        assert_eq!(line(src, &[k("agents")]), Some(2));
        assert_eq!(at(&[]), Some(3));
        assert_eq!(at(&[Seg::Index(0)]), Some(4));
        assert_eq!(at(&[Seg::Index(0), k("id")]), Some(4));
        assert_eq!(at(&[Seg::Index(1)]), Some(5));
        assert_eq!(at(&[Seg::Index(1), k("id")]), Some(6));
        assert_eq!(
            at(&[Seg::Index(1), k("subagents"), k("allowAgents")]),
            Some(7)
        );
        assert_eq!(
            at(&[
                Seg::Index(1),
                k("subagents"),
                k("allowAgents"),
                Seg::Index(0)
            ]),
            Some(7)
        );
        // A missing element is reported where its array is.
        assert_eq!(at(&[Seg::Index(2)]), Some(3));
        // The root: the file's first token, after comments.
        assert_eq!(line("// a\n\n  { a: 1 }", &[]), Some(3));
    }

    #[test]
    fn comments_and_braces_inside_strings_do_not_count() {
        let src = "// top { comment\n{\n  /* block\n     key: { } */\n  a: \"}{ // not a comment\",\n  'b': 'it\\'s', // c: 1\n  c: [1, /* x */ 2,\n      3],\n}";
        assert_eq!(line(src, &[k("a")]), Some(5));
        assert_eq!(line(src, &[k("b")]), Some(6));
        assert_eq!(line(src, &[k("c")]), Some(7));
        assert_eq!(line(src, &[k("c"), Seg::Index(1)]), Some(7));
        assert_eq!(line(src, &[k("c"), Seg::Index(2)]), Some(8));
        // Not a key (inside a comment): the root's line.
        assert_eq!(line(src, &[k("key")]), Some(2));
    }

    #[test]
    fn escaped_keys_and_continued_lines() {
        let src = "{\n  \"x\\u0041\": 'line one \\\nline two',\n  'q\"k': 1,\n  next: 2,\n}";
        assert_eq!(line(src, &[k("xA")]), Some(2));
        assert_eq!(line(src, &[k("q\"k")]), Some(4));
        assert_eq!(line(src, &[k("next")]), Some(5));
    }

    #[test]
    fn a_repeated_key_is_where_its_last_value_is() {
        assert_eq!(line("{a: 1,\n a: 2}", &[k("a")]), Some(2));
        // A value on the line after its key: the key's line.
        assert_eq!(line("{\n a:\n  [1],\n}", &[k("a")]), Some(2));
    }

    #[test]
    fn non_finite_numbers_are_named_by_path() {
        let source = Source::parse("{a: {b: [1, NaN]}, c: -Infinity, d: Infinity}").expect("ok");
        assert_eq!(source.non_finite.get("a.b[1]"), Some(&"NaN"));
        assert_eq!(source.non_finite.get("c"), Some(&"-Infinity"));
        assert_eq!(source.non_finite.get("d"), Some(&"Infinity"));
        assert_eq!(source.value["a"]["b"][1], Value::Null);
        // A repeated key's finite value replaces the earlier non-finite one.
        let again = Source::parse("{a: NaN, a: 1}").expect("ok");
        assert!(again.non_finite.is_empty());
    }

    #[test]
    fn blank_text_is_only_whitespace_and_comments() {
        assert!(is_blank(""));
        assert!(is_blank("  \n\t"));
        assert!(is_blank("// only a comment"));
        assert!(is_blank("  // only a comment\n/* and this */ "));
        assert!(!is_blank("/* unterminated"));
        assert!(!is_blank("{}"));
        assert!(!is_blank("null"));
        assert!(!is_blank("}}]] {[ 'unterminated"));
    }

    #[test]
    fn syntax_errors_say_where_and_what() {
        let err = |src: &str| {
            let e = Source::parse(src).err().expect("a syntax error");
            syntax_error(src, &e)
        };
        let (line, message) = err("{\n  a: 'x'\n  b: 2\n}");
        assert_eq!(line, Some(2));
        assert_eq!(
            message,
            "syntax error at column 9: expected a comma (is a comma missing before line 3?)"
        );
        let (line, message) = err("{a: 1 b: 2}");
        assert_eq!(line, Some(1));
        assert_eq!(
            message,
            "syntax error at column 7: expected a comma (is a comma missing?)"
        );
        let (line, message) = err("{\n  a: 'open\n");
        assert_eq!(line, Some(2));
        assert!(message.contains("not closed"), "{message}");
        let (_, message) = err("{\n  a: [1, 2,\n");
        assert!(message.contains("ends"), "{message}");
        let (line, message) = err("{a: 1} x");
        assert_eq!(line, Some(1));
        assert!(message.contains("after the end"), "{message}");
    }

    #[test]
    fn line_walks_are_capped() {
        // Every element is an object with no key: each lookup needs a walk; past the cap the
        // array's own line answers.
        let src = format!("{{\n list: [\n{}]}}", "{},\n".repeat(100));
        let source = Source::parse(&src).expect("ok");
        let el = |i| vec![k("list"), Seg::Index(i)];
        assert_eq!(source.line_of(&el(0)), Some(3));
        for i in 1..MAX_LINE_WALKS {
            assert_eq!(source.line_of(&el(i)), Some(3 + i));
        }
        assert_eq!(source.line_of(&el(99)), Some(2));
    }
}
