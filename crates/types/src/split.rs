//! A message longer than a chat takes in one (Telegram: 4,096 UTF-16 units; Discord: 2,000
//! characters) goes as several, cut where a reader would: at a blank line, else a line end,
//! else a space, else anywhere between characters. Nothing is lost or added: the parts put
//! back together are the text.

/// `text` in parts of at most `limit` units each, a character weighing `units(c)` (at most 2;
/// `limit` is raised to 2 so any character fits). An empty text is one empty part.
pub fn split(text: &str, limit: usize, units: impl Fn(char) -> usize) -> Vec<String> {
    let limit = limit.max(2);
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().map(&units).sum::<usize>() > limit {
        let cut = cut_at(rest, limit, &units);
        parts.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    parts.push(rest.to_string());
    parts
}

/// The byte index to cut `text` at: the end of the last separator within `limit` units (if
/// that leaves the first part at least half full), else the last character boundary within.
fn cut_at(text: &str, limit: usize, units: &impl Fn(char) -> usize) -> usize {
    let mut used = 0;
    let mut fits = 0;
    for (i, c) in text.char_indices() {
        if used + units(c) > limit {
            break;
        }
        used += units(c);
        fits = i + c.len_utf8();
    }
    let head = &text[..fits];
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = head.rfind(separator) {
            let end = at + separator.len();
            if end > fits / 2 {
                return end;
            }
        }
    }
    fits.max(text.chars().next().map_or(0, char::len_utf8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utf16(c: char) -> usize {
        c.len_utf16()
    }

    #[test]
    fn a_long_text_is_cut_at_blank_lines_then_lines_then_spaces() {
        let para = "word ".repeat(500);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let parts = split(&text, 4096, utf16);
        assert_eq!(parts.concat(), text);
        assert!(parts[0].ends_with("\n\n"));
        assert!(parts.iter().all(|p| p.encode_utf16().count() <= 4096));
    }

    #[test]
    fn a_100_kb_message_goes_in_parts_and_emoji_are_never_cut() {
        let text = "x".repeat(100 * 1024);
        assert_eq!(split(&text, 4096, utf16).len(), 25);
        let emoji = "😀".repeat(3000);
        let parts = split(&emoji, 4096, utf16);
        assert_eq!(parts.concat(), emoji);
        let by_chars = split(&emoji, 2000, |_| 1);
        assert_eq!(
            by_chars
                .iter()
                .map(|p| p.chars().count())
                .collect::<Vec<_>>(),
            [2000, 1000]
        );
    }

    proptest! {
        #[test]
        fn parts_fit_and_add_up_to_the_text(text in "\\PC{0,3000}", limit in 2usize..300) {
            let parts = split(&text, limit, utf16);
            prop_assert_eq!(parts.concat(), text.clone());
            prop_assert!(parts.iter().all(|p| p.encode_utf16().count() <= limit));
            prop_assert!(parts.len() == 1 || parts.iter().all(|p| !p.is_empty()));
        }
    }
}
