//! Telegram's limit for one message (4,096 characters, counted in UTF-16 code units): a longer
//! reply goes as several, cut by `switchboard_types::split` where a reader would.

/// Telegram's limit for one message's text.
pub const MAX_MESSAGE: usize = 4096;

/// `text` in parts of at most `limit` UTF-16 code units each; the parts concatenated are the
/// text.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    switchboard_types::split::split(text, limit, char::len_utf16)
}
