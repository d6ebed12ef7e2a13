//! Text safety: the one rule for which characters may reach a human's terminal (or a JSON
//! reader) raw, the visible form of the others, and the check that keeps them out of session
//! keys. Every human-facing output (console, `sessions list/show`, `inject`'s reply and
//! progress, printed errors, the log file) goes through [`safe_text`] or [`safe_line`]; JSON
//! for scripts goes through [`write_json`].
//!
//! Agent and user text is hostile input: an ESC or an 8-bit CSI (U+009B) would let it retitle
//! the window, write the clipboard (OSC 52) or clear the screen; `\r` and backspace overwrite
//! what was printed before; BiDi overrides reorder what is shown; zero-width characters make
//! two different strings (two different sessions) look identical.

use std::borrow::Cow;
use std::fmt;
use std::io;

/// The invisible (zero-width or blank, "default ignorable") and BiDi-control characters shown
/// escaped, beyond the controls (`char::is_control`: C0, DEL, C1). The set follows Unicode's
/// Bidi_Control and Default_Ignorable_Code_Point properties, minus what ordinary text needs:
/// - kept raw: U+FE0E/U+FE0F (text/emoji presentation selectors: in nearly every emoji
///   sequence, and they change only how the previous character is drawn), and combining marks
///   (visible accents, width 0 but attached to a visible base).
/// - escaped although emoji use it: U+200D (zero-width joiner). The issue asks for it, and in a
///   key or a name it is exactly the invisible difference we must show; an emoji family then
///   shows as its members joined by `\u{200d}`, which is legible.
/// - U+2028/U+2029 (line/paragraph separators): some terminals and most JSON-in-JS readers
///   treat them as line breaks, so they could forge lines the way `\n` can in a one-line field.
/// - the tag block U+E0000..U+E0FFF (and the variation selectors supplement inside it): tag
///   characters render as nothing and are the known way to smuggle hidden instructions to
///   and from models ("ASCII smuggling"), so the owner must see them.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // soft hyphen
    (0x034F, 0x034F),   // combining grapheme joiner
    (0x061C, 0x061C),   // Arabic letter mark (BiDi)
    (0x115F, 0x1160),   // Hangul choseong/jungseong fillers (blank)
    (0x17B4, 0x17B5),   // Khmer inherent vowels (invisible)
    (0x180B, 0x180F),   // Mongolian variation selectors, vowel separator U+180E
    (0x200B, 0x200F),   // ZWSP, ZWNJ, ZWJ, LRM, RLM
    (0x2028, 0x2029),   // line and paragraph separators
    (0x202A, 0x202E),   // BiDi embeddings and overrides (LRE, RLE, PDF, LRO, RLO)
    (0x2060, 0x206F),   // word joiner, invisible operators, BiDi isolates 2066-2069, deprecated
    (0x3164, 0x3164),   // Hangul filler (blank)
    (0xFE00, 0xFE0D),   // variation selectors 1-14 (see above for 15 and 16)
    (0xFEFF, 0xFEFF),   // zero-width no-break space / BOM
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler (blank)
    (0xFFF9, 0xFFFB),   // interlinear annotation controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol formatting (invisible)
    (0xE0000, 0xE0FFF), // tags and variation selectors supplement
];

/// True for a character that must never reach a terminal or a reader raw: a control (C0,
/// DEL, C1 including U+009B, the 8-bit CSI), a BiDi control, or an invisible character.
pub fn is_unsafe(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    let u = c as u32;
    // Everything in the table is at or above U+00AD: plain ASCII and Latin-1 text stays fast.
    u >= 0xAD && INVISIBLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
}

/// What kind of unsafe character `c` is, for error messages.
pub fn describe(c: char) -> &'static str {
    let u = c as u32;
    match u {
        0x1B => "an escape character",
        0x9B => "an 8-bit control sequence introducer",
        _ if c.is_control() => "a control character",
        0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069 => "a BiDi control",
        _ if is_unsafe(c) => "an invisible character",
        _ if c.is_whitespace() && c != ' ' => "a space other than U+0020",
        _ => "a character",
    }
}

/// `U+202E`, for messages that name a character.
pub fn code_point(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

/// Whether line breaks survive ([`safe_text`]) or are shown as `^J` ([`safe_line`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    Keep,
    Escape,
}

/// Text for a multi-line view: `\n` (and `\r\n`) stay line breaks, a tab becomes four spaces
/// (the console's cells cannot hold a tab), every other unsafe character its visible form.
pub fn safe_text(s: &str) -> Cow<'_, str> {
    escape(s, Lines::Keep)
}

/// Text for one line (a table cell, a key, a name, a log field): as [`safe_text`], and a line
/// break is shown as `^J`, so nothing can start a line that looks like output of its own.
pub fn safe_line(s: &str) -> Cow<'_, str> {
    escape(s, Lines::Escape)
}

/// The one escaping routine behind [`safe_text`] and [`safe_line`]. The visible forms: C0
/// controls and DEL in caret notation (`^[` for ESC, `^G` for BEL, `^M` for a lone `\r`,
/// `^?` for DEL; what `cat -v` and the console always showed), everything else as `\u{202e}`
/// (Rust's notation, lowercase hex). The output contains no unsafe character, so applying
/// it twice changes nothing more. A literal `\u{..}` or `^[` typed as text looks the same as
/// an escaped one; that is harmless (it cannot drive the terminal) and escaping backslashes
/// too would make every path and regex unreadable.
pub fn escape(s: &str, lines: Lines) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) || c == '\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' if lines == Lines::Keep => out.push('\n'),
            '\r' if lines == Lines::Keep && chars.peek() == Some(&'\n') => {}
            '\t' => out.push_str("    "),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if is_unsafe(c) => {
                use fmt::Write;
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The first character a session key may not contain, with its position (in characters).
/// Keys are identities: beyond [`is_unsafe`], a space other than U+0020 (a no-break space, an
/// ideographic space) would make a key that prints like another one.
pub fn forbidden_in_key(key: &str) -> Option<(usize, char)> {
    key.chars()
        .enumerate()
        .find(|&(_, c)| is_unsafe(c) || (c.is_whitespace() && c != ' '))
}

/// A serde_json formatter that also writes every [`is_unsafe`] character as `\uXXXX`
/// (serde_json itself escapes only C0): DEL, C1 (U+009B), BiDi and invisible characters. The
/// output is still plain JSON and parses back to the same strings.
#[derive(Debug, Clone)]
pub struct SafeJson<F> {
    inner: F,
}

impl<F> SafeJson<F> {
    pub fn new(inner: F) -> SafeJson<F> {
        SafeJson { inner }
    }
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeJson<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if !is_unsafe(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    // The layout is the inner formatter's (the pretty one indents).
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_value(w)
    }
}

/// Write `value` as JSON (indented when `pretty`) with every unsafe character escaped.
pub fn write_json<W: io::Write, T: serde::Serialize + ?Sized>(
    writer: W,
    value: &T,
    pretty: bool,
) -> serde_json::Result<()> {
    if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            writer,
            SafeJson::new(serde_json::ser::PrettyFormatter::new()),
        );
        value.serialize(&mut ser)
    } else {
        let mut ser = serde_json::Serializer::with_formatter(
            writer,
            SafeJson::new(serde_json::ser::CompactFormatter),
        );
        value.serialize(&mut ser)
    }
}

/// [`write_json`] into a string.
pub fn to_json_string<T: serde::Serialize + ?Sized>(
    value: &T,
    pretty: bool,
) -> serde_json::Result<String> {
    let mut out = Vec::new();
    write_json(&mut out, value, pretty)?;
    // The serializer writes UTF-8 only (and after escaping, ASCII wherever it escaped).
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// A writer for JSON text (JSONL) bound for a terminal: DEL and every [`is_unsafe`] character
/// above ASCII (C1 such as U+009B, BiDi, invisible) becomes `\uXXXX`. In valid JSON such a
/// character can only stand inside a string, where the escape means the same character, so
/// the output parses to the same values; ASCII (including the layout's `\n`) passes as is.
/// Bytes are held back only while a character is split across two writes.
pub struct SafeJsonText<W: io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: io::Write> SafeJsonText<W> {
    pub fn new(inner: W) -> SafeJsonText<W> {
        SafeJsonText {
            inner,
            pending: Vec::new(),
        }
    }

    fn write_str(&mut self, text: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in text.char_indices() {
            // ASCII controls other than DEL can only be the layout (`\n`) in valid JSON.
            if (c.is_ascii() && c != '\u{7f}') || !is_unsafe(c) {
                continue;
            }
            self.inner.write_all(&text.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(self.inner, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        self.inner.write_all(&text.as_bytes()[start..])
    }
}

impl<W: io::Write> io::Write for SafeJsonText<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut pending = std::mem::take(&mut self.pending);
        let mut rest: &[u8] = &pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.write_str(text)?;
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `valid_up_to` bytes are UTF-8 by the error's own account.
                    self.write_str(std::str::from_utf8(good).unwrap_or_default())?;
                    match e.error_len() {
                        // Not UTF-8 at all: shown as U+FFFD, never as a raw 8-bit byte.
                        Some(n) => {
                            self.inner.write_all("\u{fffd}".as_bytes())?;
                            rest = &bad[n..];
                        }
                        // A character cut by the end of this write: wait for the rest.
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let len = pending.len();
        pending.drain(..len - keep);
        self.pending = pending;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            // A truncated character at the very end: shown as U+FFFD.
            self.pending.clear();
            self.inner.write_all("\u{fffd}".as_bytes())?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "x\u{1b}]0;PWNED\u{7}\u{1b}]52;c;ZWNobyBQV05FRA==\u{7}\u{1b}[2J\r\u{8}\
                           \u{9b}2J \u{202e}evil\u{202c} zw\u{200b}sp \u{2066}iso\u{2069} \u{feff}\
                           tag\u{e0041} del\u{7f} ls\u{2028}";

    fn raw_unsafe(s: &str) -> Vec<char> {
        s.chars().filter(|&c| is_unsafe(c) && c != '\n').collect()
    }

    #[test]
    fn controls_bidi_and_invisible_characters_are_shown_visibly() {
        let shown = safe_line(HOSTILE);
        assert!(raw_unsafe(&shown).is_empty(), "{shown:?}");
        assert!(shown.contains("x^[]0;PWNED^G^[]52;c;"), "{shown}");
        assert!(shown.contains("^[[2J^M^H\\u{9b}2J"), "{shown}");
        assert!(shown.contains("\\u{202e}evil\\u{202c}"), "{shown}");
        assert!(
            shown.contains("zw\\u{200b}sp \\u{2066}iso\\u{2069} \\u{feff}"),
            "{shown}"
        );
        assert!(shown.contains("tag\\u{e0041} del^? ls\\u{2028}"), "{shown}");
    }

    #[test]
    fn line_breaks_survive_only_in_multi_line_text() {
        assert_eq!(safe_text("a\nb\r\nc\rd\te"), "a\nb\nc^Md    e");
        assert_eq!(safe_line("a\nb\r\nc"), "a^Jb^M^Jc");
    }

    #[test]
    fn ordinary_text_is_untouched_and_escaping_is_idempotent() {
        for s in [
            "plain ascii",
            "Grüße, 日本語, emoji ❤\u{fe0f} and accents e\u{301}",
        ] {
            assert!(matches!(safe_text(s), Cow::Borrowed(_)), "{s}");
        }
        let once = safe_text(HOSTILE).into_owned();
        assert_eq!(safe_text(&once), once);
    }

    #[test]
    fn json_escapes_the_same_characters_and_round_trips() {
        let v = serde_json::json!({ "text": HOSTILE, "emoji": "❤\u{fe0f}", HOSTILE: 1 });
        for pretty in [false, true] {
            let out = to_json_string(&v, pretty).expect("json");
            assert!(raw_unsafe(&out).is_empty(), "{out:?}");
            assert!(out.contains("\\u009b") && out.contains("\\u202e"), "{out}");
            // Outside the BMP: a surrogate pair, as JSON requires.
            assert!(out.contains("\\udb40\\udc41"), "{out}");
            assert!(out.contains("❤\u{fe0f}"), "{out}");
            let back: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
            assert_eq!(back, v);
        }
        let pretty = to_json_string(&serde_json::json!({"a": [1]}), true).expect("json");
        assert_eq!(pretty, "{\n  \"a\": [\n    1\n  ]\n}");
    }

    #[test]
    fn keys_refuse_unsafe_characters_and_odd_spaces() {
        assert_eq!(forbidden_in_key("agent:main:main"), None);
        assert_eq!(forbidden_in_key("agent:main:a b"), None);
        assert_eq!(
            forbidden_in_key("agent:main:ma\u{200b}in"),
            Some((13, '\u{200b}'))
        );
        assert_eq!(forbidden_in_key("a\u{a0}b"), Some((1, '\u{a0}')));
        assert_eq!(describe('\u{202e}'), "a BiDi control");
        assert_eq!(describe('\u{200b}'), "an invisible character");
        assert_eq!(code_point('\u{9b}'), "U+009B");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Strings rich in the characters that matter (controls, C1, BiDi, invisible, tags,
        /// line breaks), mixed with anything else.
        fn hostile() -> impl Strategy<Value = String> {
            let special = prop::sample::select(vec![
                '\u{0}',
                '\u{7}',
                '\u{8}',
                '\t',
                '\n',
                '\r',
                '\u{1b}',
                '\u{7f}',
                '\u{85}',
                '\u{9b}',
                '\u{ad}',
                '\u{200b}',
                '\u{200d}',
                '\u{200e}',
                '\u{2028}',
                '\u{202e}',
                '\u{2066}',
                '\u{feff}',
                '\u{fe0f}',
                '\u{e0041}',
                '\u{a0}',
                'a',
                ':',
                '\\',
                '^',
            ]);
            prop::collection::vec(prop_oneof![special, any::<char>()], 0..40)
                .prop_map(|v| v.into_iter().collect())
        }

        proptest! {
            #[test]
            fn nothing_unsafe_survives_and_json_round_trips(s in hostile()) {
                let line = safe_line(&s);
                prop_assert!(!line.chars().any(is_unsafe), "{:?}", line);
                let text = safe_text(&s);
                prop_assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{:?}", text);
                prop_assert_eq!(safe_line(&line), line.clone());
                prop_assert_eq!(safe_text(&text), text.clone());
                let v = serde_json::json!({ "k": s });
                for pretty in [false, true] {
                    let out = to_json_string(&v, pretty).expect("json");
                    prop_assert!(!out.chars().any(|c| is_unsafe(c) && c != '\n'), "{:?}", out);
                    let back: serde_json::Value = serde_json::from_str(&out).expect("valid");
                    prop_assert_eq!(&back, &v);
                }
            }

            #[test]
            fn canonical_keys_never_hold_unsafe_characters(s in hostile(), agent in hostile()) {
                let scheme = crate::key::KeyScheme::default();
                if let Ok(key) = scheme.canonicalize(&s, &agent) {
                    prop_assert!(forbidden_in_key(key.as_str()).is_none(), "{:?}", key);
                }
            }
        }
    }

    #[test]
    fn json_text_for_a_terminal_escapes_unsafe_characters_and_still_parses() {
        use std::io::Write;
        let value = serde_json::json!({"text": HOSTILE, "name": "caf\u{e9} \u{1f600}"});
        let line = serde_json::to_string(&value).expect("json") + "\n";
        // Written one byte at a time, so characters are split across writes.
        let mut out = SafeJsonText::new(Vec::new());
        for b in line.as_bytes() {
            out.write_all(std::slice::from_ref(b)).expect("write");
        }
        out.flush().expect("flush");
        let text = String::from_utf8(out.inner).expect("utf-8");
        assert!(raw_unsafe(&text).is_empty(), "{text:?}");
        assert!(
            text.contains("\\u009b") && text.contains("\\u202e"),
            "{text}"
        );
        assert!(
            text.contains("caf\u{e9} \u{1f600}"),
            "safe text is kept as is: {text}"
        );
        let back: serde_json::Value = serde_json::from_str(text.trim_end()).expect("still JSON");
        assert_eq!(back, value);
    }
}
