//! Text made cell-stable: every character the console draws must take the same number of
//! columns in ratatui's buffer and in the terminal, or a frame diff leaves residue (a stray
//! `🇪` after switching sessions). ratatui measures grapheme clusters; terminals disagree about
//! some of them. The clusters whose width terminals disagree on are rewritten here into text
//! whose width is the plain sum of its characters' widths.

use std::borrow::Cow;

/// Regional indicators (the halves of a flag: 🇩 + 🇪 = 🇩🇪). ratatui counts a pair as one
/// 2-column cell, tmux and many terminals as two 1- or 2-column characters.
fn regional_letter(c: char) -> Option<char> {
    let u = c as u32;
    (0x1F1E6..=0x1F1FF)
        .contains(&u)
        .then(|| char::from(b'A' + (u - 0x1F1E6) as u8))
}

/// `text` with its width made unambiguous: a flag becomes its country code in brackets
/// (`[DE]`), a lone regional indicator its letter in brackets, and an emoji-presentation
/// selector (U+FE0F, which widens `❤` to 2 columns in ratatui but not in every terminal) is
/// dropped. Everything else is unchanged (and borrowed when nothing changes).
pub fn stable(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c == '\u{FE0F}' || regional_letter(c).is_some())
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{FE0F}' {
            continue;
        }
        match regional_letter(c) {
            Some(a) => {
                out.push('[');
                out.push(a);
                if let Some(b) = chars.peek().copied().and_then(regional_letter) {
                    chars.next();
                    out.push(b);
                }
                out.push(']');
            }
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

    /// The width ratatui gives (grapheme clusters) equals the sum of the characters' widths
    /// (what a terminal advances by), for the cases terminals disagree on.
    #[test]
    fn stable_text_is_as_wide_as_its_characters() {
        for raw in [
            "🇩🇪 hallo",
            "a🇩b",
            "❤\u{FE0F} ok",
            "日本語",
            "é\u{301}",
            "plain",
        ] {
            let s = stable(raw);
            let by_chars: usize = s.chars().map(|c| c.width().unwrap_or(0)).sum();
            assert_eq!(s.width(), by_chars, "{raw:?} -> {s:?}");
        }
        assert_eq!(stable("🇩🇪 hallo"), "[DE] hallo");
        assert_eq!(stable("a🇩b"), "a[D]b");
        assert!(matches!(stable("plain"), Cow::Borrowed(_)));
    }
}
