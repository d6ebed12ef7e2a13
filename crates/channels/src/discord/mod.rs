//! The Discord channel (docs/ARCHITECTURE.md, "Channels: Discord"): REST sending with
//! Discord's rate-limit buckets (`rest.rs`, `buckets.rs`), the gateway WebSocket that
//! brings messages in (`gateway.rs`, its payloads in `events.rs`), and OpenClaw's rules for
//! who may talk to the bot and where a message goes (`access.rs`). The binary records what
//! the gateway hands over in the engine.

pub mod access;
pub mod buckets;
pub mod events;
pub mod gateway;
pub mod rest;

pub use rest::{DEFAULT_API_ROOT, Discord, GatewayUrlError, MAX_MESSAGE};

/// The bot's user id, read from its token (the token's first part is the id in base64), or
/// failing that a hash of the token: it names the bot in lanes and idempotency keys, never
/// the secret.
pub fn bot_id_of_token(token: &str) -> String {
    use base64::Engine as _;
    let first = token.trim().split('.').next().unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(first.trim_end_matches('='))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|id| !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()));
    decoded.unwrap_or_else(|| {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(token.trim().as_bytes());
        format!("token-{}", &hex::encode(hash)[..16])
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_names_its_bot_and_never_shows() {
        // "123456789012345678" in base64, as Discord's tokens begin.
        assert_eq!(
            super::bot_id_of_token("MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.secret"),
            "123456789012345678"
        );
        let other = super::bot_id_of_token("discord-test-token");
        assert!(
            other.starts_with("token-") && !other.contains("discord"),
            "{other}"
        );
    }
}
