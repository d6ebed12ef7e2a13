//! Direct-message pairing (OpenClaw's `dmPolicy: "pairing"`, its default): a sender a
//! channel does not know gets a short code instead of an answer, and the owner lets them in
//! with `switchboard pairing approve <channel> <code>`. What the stores keep of it and what the
//! channels and commands exchange.

use serde::{Deserialize, Serialize};

/// The letters a code is made of: upper case, without the ones read as others (0 O 1 I).
pub const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// A code's length.
pub const CODE_LEN: usize = 8;

/// How long a code can be approved, in ms (an hour, as OpenClaw's).
pub const CODE_TTL_MS: i64 = 60 * 60 * 1000;

/// Pending requests a channel holds at once; more senders are not answered until one is
/// approved or expires (3, as OpenClaw's), so a flood of strangers costs a few messages.
pub const PENDING_MAX: u32 = 3;

/// One sender of one channel: waiting with a code, or approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pairing {
    /// `telegram`, `discord`, ….
    pub channel: String,
    /// The channel's id of the sender (Telegram's user id, Discord's user id).
    pub sender: String,
    /// How the sender called themselves when they asked.
    pub display_name: Option<String>,
    pub code: String,
    /// When the code was given (ms since the epoch).
    pub requested_at: i64,
    /// When the code stops being approvable.
    pub expires_at: i64,
    /// When the owner approved it (`None`: waiting).
    pub approved_at: Option<i64>,
}

/// A channel's question about a sender not on its allow-list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingRequest {
    pub channel: String,
    pub sender: String,
    pub display_name: Option<String>,
}

/// The answer: what the channel does with the sender's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum PairingAnswer {
    /// Approved earlier: the message is taken as any allowed sender's.
    Approved,
    /// A new code for this sender: the channel tells them it (once per code).
    New { code: String, expires_at: i64 },
    /// A code was given already and has not expired: the message is dropped unanswered.
    Waiting,
    /// The channel holds `PENDING_MAX` codes already: dropped unanswered.
    Full,
}

/// A fresh code from `random` bytes (one letter per byte; the alphabet's 32 letters divide
/// 256, so every letter is equally likely).
pub fn code_from(random: [u8; CODE_LEN]) -> String {
    random
        .iter()
        .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
        .collect()
}

/// A code as the owner typed it: trimmed, upper case.
pub fn typed_code(code: &str) -> String {
    code.trim().to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_use_only_unambiguous_upper_case_letters() {
        let code = code_from([0, 8, 13, 31, 32, 255, 100, 7]);
        assert_eq!(code.len(), CODE_LEN);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        assert!(!code.contains(['0', 'O', '1', 'I']), "{code}");
        assert_eq!(typed_code(" abcd2345\n"), "ABCD2345");
    }
}
