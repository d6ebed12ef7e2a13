//! Limits on JSON5 text checked before the json5 parser sees it: a size cap, and a nesting
//! depth cap found by one linear scan that knows JSON5's strings and comments.
//!
//! The json5 crate is a recursive (pest) parser: about 7,000 levels overflow the stack and
//! abort the process, and 30,000 unclosed `[` cost it seconds and gigabytes. A config or a
//! keymap is a few kilobytes and under 10 levels deep, so both caps are far from real files.

use std::io::Read;
use std::path::Path;

/// The deepest nesting of `{ }` and `[ ]` accepted; serde_json's own recursion limit for
/// tool parameters is the same, so one number holds for every JSON input.
pub const MAX_DEPTH: usize = 128;

/// The largest config or keymap file read: 16 times the largest one shipped (the demo
/// config, 16 KB). A real one is a few kilobytes; checking a hostile file this size with
/// every problem located takes under a second (a release build, this 2-core VM).
pub const MAX_BYTES: usize = 256 << 10;

/// Why a text was refused, with the 1-based line (and column) where that became clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextLimit {
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for TextLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn too_large(bytes: usize) -> TextLimit {
    TextLimit {
        line: None,
        message: format!(
            "the file is larger than 256 KiB ({bytes} bytes); a config or keymap is a few kilobytes"
        ),
    }
}

/// Checks `src` against [`MAX_BYTES`] and [`MAX_DEPTH`] in one pass, in time linear in its
/// length, whatever it holds (the text need not be valid JSON5).
pub fn check(src: &str) -> Result<(), TextLimit> {
    if src.len() > MAX_BYTES {
        return Err(too_large(src.len()));
    }
    match deepest_point(src, MAX_DEPTH) {
        None => Ok(()),
        Some((line, column)) => Err(TextLimit {
            line: Some(line),
            message: format!(
                "nested more than {MAX_DEPTH} levels deep at column {column} (count of open {{ and [); \
                 a config is rarely more than 10 deep"
            ),
        }),
    }
}

/// Reads a text file of at most [`MAX_BYTES`] without reading more than that into memory.
/// The outer error is the file's (missing, unreadable, not UTF-8); the inner is the size cap.
pub fn read_capped(path: &Path) -> std::io::Result<Result<String, TextLimit>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > MAX_BYTES {
        let total = std::fs::metadata(path)
            .map(|m| m.len() as usize)
            .unwrap_or(bytes.len());
        return Ok(Err(too_large(total)));
    }
    String::from_utf8(bytes)
        .map(Ok)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Where the scan is: JSON5 source, a comment, or a string.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Code,
    LineComment,
    BlockComment,
    /// Inside a string opened by this quote; `escaped` after a backslash.
    Str {
        quote: char,
        escaped: bool,
    },
}

/// JSON5's line terminators: they end a line comment, and a string cannot hold one unescaped.
fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// The (line, column) of the first `{` or `[` that opens level `max + 1`, if any. Brackets in
/// strings and comments do not count. An unescaped line break ends a string (JSON5 allows
/// none, so the parser stops there too); an unbalanced closer is ignored. Both only ever count
/// more, never less, than the parser would descend.
fn deepest_point(src: &str, max: usize) -> Option<(usize, usize)> {
    let mut mode = Mode::Code;
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut column = 0usize;
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        mode = match mode {
            Mode::Code => match c {
                '{' | '[' => {
                    depth += 1;
                    if depth > max {
                        return Some((line, column));
                    }
                    Mode::Code
                }
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    Mode::Code
                }
                '"' | '\'' => Mode::Str {
                    quote: c,
                    escaped: false,
                },
                '/' if chars.peek() == Some(&'/') => {
                    chars.next();
                    column += 1;
                    Mode::LineComment
                }
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    column += 1;
                    Mode::BlockComment
                }
                _ => Mode::Code,
            },
            Mode::LineComment if is_line_terminator(c) => Mode::Code,
            Mode::LineComment => Mode::LineComment,
            Mode::BlockComment if c == '*' && chars.peek() == Some(&'/') => {
                chars.next();
                column += 1;
                Mode::Code
            }
            Mode::BlockComment => Mode::BlockComment,
            // A backslash escapes one character, a line break included (a continued line).
            Mode::Str {
                quote,
                escaped: true,
            } => Mode::Str {
                quote,
                escaped: false,
            },
            Mode::Str { quote, .. } if c == '\\' => Mode::Str {
                quote,
                escaped: true,
            },
            Mode::Str { quote, .. } if c == quote || is_line_terminator(c) => Mode::Code,
            str_mode @ Mode::Str { .. } => str_mode,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_error(src: &str) -> Option<(usize, usize)> {
        deepest_point(src, 3)
    }

    #[test]
    fn counts_open_brackets_of_both_kinds() {
        assert_eq!(depth_error("{a:[{b:[]}]}"), Some((1, 8)));
        assert_eq!(depth_error("{a:[{b:1}]}"), None);
        assert_eq!(
            depth_error("[[[]],[[]],[[]]]"),
            None,
            "siblings do not add up"
        );
        assert_eq!(depth_error("{\n a: [\n  [\n   [1]]]}"), Some((4, 4)));
    }

    #[test]
    fn brackets_in_strings_do_not_count() {
        assert_eq!(depth_error(r#"{ a: "[[[[{{{{", b: '[[[[' }"#), None);
        assert_eq!(depth_error(r#"{ a: "\"[[[[", b: 'it\'s [[[[' }"#), None);
        assert_eq!(depth_error(r#"{ a: "\\", b: [[[1]]] }"#), Some((1, 17)));
        // A continued line stays in the string.
        assert_eq!(depth_error("{ a: 'x\\\n[[[[' }"), None);
        // An unescaped line break ends a string (the parser refuses it there too).
        assert_eq!(depth_error("{ a: 'x\n[[[[' }"), Some((2, 3)));
    }

    #[test]
    fn brackets_in_comments_do_not_count() {
        assert_eq!(depth_error("// [[[[\n{ a: 1 }"), None);
        assert_eq!(depth_error("{ /* [[[[ { */ a: 1 }"), None);
        assert_eq!(depth_error("{ /* * / [[[[ **/ a: 1 }"), None);
        assert_eq!(depth_error("{ a: 1 } // [[[[\r[[[["), Some((1, 21)));
        // A quote inside a comment opens no string.
        assert_eq!(depth_error("// it's\n[[[["), Some((2, 4)));
        // A slash alone is not a comment.
        assert_eq!(depth_error("{ a: 1 / [[[["), Some((1, 12)));
    }

    #[test]
    fn unbalanced_closers_do_not_hide_depth() {
        assert_eq!(depth_error("]]]][[[["), Some((1, 8)));
    }

    #[test]
    fn huge_inputs_are_refused_quickly() {
        let deep = "[".repeat(30_000);
        let err = check(&deep).unwrap_err();
        assert_eq!(err.line, Some(1));
        assert!(
            err.message
                .contains("nested more than 128 levels deep at column 129")
        );
        let big = format!("// {}", "x".repeat(MAX_BYTES));
        assert!(
            check(&big)
                .unwrap_err()
                .message
                .contains("larger than 256 KiB")
        );
        assert_eq!(check(&"[".repeat(MAX_DEPTH)), Ok(()));
    }
}
