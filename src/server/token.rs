//! The gateway token: where it comes from (config, env, or a generated 0600 file) and its
//! constant-time check.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where the token in force came from, for the start-up message (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Config,
    Env,
    File(PathBuf),
}

/// The environment variable that carries the token when the config has none.
pub const TOKEN_ENV: &str = "SWITCHBOARD_GATEWAY_TOKEN";

/// The token: the config's, else the environment's, else the one in `<state>/gateway-token`
/// (generated on first use, readable by this user only).
pub fn resolve(config_token: Option<&str>, state_dir: &Path) -> Result<(String, TokenSource)> {
    if let Some(t) = config_token.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok((t.to_string(), TokenSource::Config));
    }
    if let Ok(t) = std::env::var(TOKEN_ENV) {
        let t = t.trim();
        if !t.is_empty() {
            return Ok((t.to_string(), TokenSource::Env));
        }
    }
    let path = state_dir.join("gateway-token");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let t = text.trim();
        if !t.is_empty() {
            return Ok((t.to_string(), TokenSource::File(path)));
        }
    }
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("cannot create {}", state_dir.display()))?;
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    write_private(&path, &token).with_context(|| format!("cannot write {}", path.display()))?;
    Ok((token, TokenSource::File(path)))
}

/// Writes `text` to a file only its owner can read (0600 from creation, not chmod after).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// Equality whose time does not depend on where two tokens first differ, so a client cannot
/// find the token a byte at a time by timing refusals. The length is not secret.
pub fn same_token(offered: &str, expected: &str) -> bool {
    let (a, b) = (offered.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, &byte) in b.iter().enumerate() {
        diff |= usize::from(byte ^ a.get(i).copied().unwrap_or(!byte));
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_token_compares_whole_strings() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
        assert!(!same_token("abcd", "abc"));
        assert!(!same_token("", "abc"));
    }

    #[test]
    fn a_generated_token_is_private_and_stable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, source) = resolve(None, dir.path()).expect("generated");
        let path = dir.path().join("gateway-token");
        assert_eq!(source, TokenSource::File(path.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, _) = resolve(None, dir.path()).expect("read back");
        assert_eq!(first, again);
        let (configured, source) = resolve(Some("from-config"), dir.path()).expect("config");
        assert_eq!(
            (configured.as_str(), source),
            ("from-config", TokenSource::Config)
        );
    }
}
