//! A reply longer than Telegram takes in one message (4,096 characters, counted in UTF-16
//! code units) goes as several, cut where a reader would: at a blank line, else a line end,
//! else a space, else anywhere between characters. Nothing is lost or added: the parts put
//! back together are the text.

/// Telegram's limit for one message's text.
pub const MAX_MESSAGE: usize = 4096;

/// `text` in parts of at most `limit` UTF-16 code units each (`limit` at least 2, so a
/// surrogate pair always fits). An empty text is one empty part.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(2);
    let mut parts = Vec::new();
    let mut rest = text;
    while utf16_len(rest) > limit {
        let cut = cut_at(rest, limit);
        parts.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    parts.push(rest.to_string());
    parts
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The byte index to cut `text` at: the end of the last separator within `limit` units, else
/// the last character boundary within it.
fn cut_at(text: &str, limit: usize) -> usize {
    let mut units = 0;
    let mut fits = 0;
    for (i, c) in text.char_indices() {
        if units + c.len_utf16() > limit {
            break;
        }
        units += c.len_utf16();
        fits = i + c.len_utf8();
    }
    let head = &text[..fits];
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = head.rfind(separator) {
            let end = at + separator.len();
            // A cut that leaves a tiny first part is worse than one mid-word.
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

    #[test]
    fn a_long_reply_is_cut_at_blank_lines_then_lines_then_spaces() {
        let para = "word ".repeat(500);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let parts = split(&text, MAX_MESSAGE);
        assert_eq!(parts.concat(), text);
        assert!(parts.len() >= 2);
        assert!(
            parts[0].ends_with("\n\n"),
            "cut at the blank line: {:?}",
            &parts[0][parts[0].len() - 10..]
        );
        assert!(parts.iter().all(|p| utf16_len(p) <= MAX_MESSAGE));
    }

    #[test]
    fn a_100_kb_message_goes_in_parts_of_at_most_4096() {
        let text = "x".repeat(100 * 1024);
        let parts = split(&text, MAX_MESSAGE);
        assert_eq!(parts.len(), 25);
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn emoji_are_never_cut_in_half() {
        let text = "😀".repeat(3000); // two UTF-16 units each
        let parts = split(&text, MAX_MESSAGE);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| utf16_len(p) <= MAX_MESSAGE));
    }

    proptest! {
        #[test]
        fn parts_fit_and_add_up_to_the_text(text in "\\PC{0,3000}", limit in 2usize..300) {
            let parts = split(&text, limit);
            prop_assert_eq!(parts.concat(), text.clone());
            prop_assert!(parts.iter().all(|p| utf16_len(p) <= limit));
            prop_assert!(parts.len() == 1 || parts.iter().all(|p| !p.is_empty()));
        }
    }
}
