//! Copying to the owner's clipboard with OSC 52 (`ESC ] 52 ; c ; <base64> BEL`): works over
//! SSH and in tmux (with `set-clipboard on`), needs no clipboard tool on the machine. The
//! loop writes the sequence to the terminal; `update` only decides what to copy.

use base64::Engine as _;

/// The most copied at once: terminals drop (or choke on) longer OSC 52 payloads.
pub const COPY_MAX_BYTES: usize = 100 * 1024;

/// `text` cut to `COPY_MAX_BYTES` at a character boundary, and whether it was cut.
pub fn capped(text: &str) -> (&str, bool) {
    if text.len() <= COPY_MAX_BYTES {
        return (text, false);
    }
    let mut end = COPY_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// The escape sequence that puts `text` on the clipboard.
pub fn osc52(text: &str) -> String {
    format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_carries_the_text_in_base64() {
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_boundary() {
        let long = "é".repeat(COPY_MAX_BYTES);
        let (cut, was_cut) = capped(&long);
        assert!(was_cut);
        assert!(cut.len() <= COPY_MAX_BYTES && cut.len() >= COPY_MAX_BYTES - 1);
    }
}
