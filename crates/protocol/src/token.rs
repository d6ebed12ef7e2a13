//! The gateway token: where it comes from (config, env, or a generated 0600 file) and its
//! constant-time check.

use std::io::{Read, Write};
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

/// The token file's name in the state folder.
pub const TOKEN_FILE: &str = "gateway-token";

/// More than any token we generate or a user would paste: a bigger file is not a token.
const MAX_TOKEN_FILE: u64 = 4096;

/// Why the token file cannot be used. Each message names the file and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error(
        "{0} is a symbolic link; the gateway token must be a plain file only you can read. \
Remove the link (rm {0}) and `switchboard serve` creates a new token file"
    )]
    Symlink(PathBuf),
    #[error(
        "{path} can be read or written by other users (mode {mode:04o}); the gateway token must \
be private. Fix it with: chmod 600 {path}"
    )]
    TooOpen { path: PathBuf, mode: u32 },
    #[error(
        "{0} is not a regular file; remove it and `switchboard serve` creates a new token file"
    )]
    NotAFile(PathBuf),
    #[error("{0} is larger than a gateway token ({MAX_TOKEN_FILE} bytes at most)")]
    TooLarge(PathBuf),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

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
    let path = state_dir.join(TOKEN_FILE);
    if let Some(t) = read_private(&path)? {
        return Ok((t, TokenSource::File(path)));
    }
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("cannot create {}", state_dir.display()))?;
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    match create_private(&path, &token) {
        Ok(()) => Ok((token, TokenSource::File(path))),
        // Another `serve` created it first (or something appeared there): use what is
        // there only if it passes the same checks.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match read_private(&path)? {
            Some(t) => Ok((t, TokenSource::File(path))),
            None => Err(anyhow::anyhow!(
                "{} is empty: remove it and `switchboard serve` creates a new token file",
                path.display()
            )),
        },
        Err(e) => Err(e).with_context(|| format!("cannot write {}", path.display())),
    }
}

/// The token in `path`, if the file exists and is not empty. A symbolic link (dangling or
/// not), anything but a regular file, or a file other users may read or write is refused:
/// a token written into or read through such a path is no longer this user's secret. The
/// file is opened without following links and checked on the opened descriptor, so it
/// cannot be swapped between the check and the read.
pub fn read_private(path: &Path) -> Result<Option<String>, TokenFileError> {
    let io = |source| TokenFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // NONBLOCK: opening a FIFO for reading must not wait for a writer.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(TokenFileError::Symlink(path.to_path_buf()));
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(TokenFileError::NotAFile(path.to_path_buf()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(TokenFileError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    if meta.len() > MAX_TOKEN_FILE {
        return Err(TokenFileError::TooLarge(path.to_path_buf()));
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE)
        .read_to_string(&mut text)
        .map_err(io)?;
    let t = text.trim();
    Ok((!t.is_empty()).then(|| t.to_string()))
}

/// Creates `path` holding `text`, readable by its owner only from the first instant (0600
/// at creation, not chmod after). `create_new` (O_EXCL) with O_NOFOLLOW: never written
/// through a link or into a file someone else prepared; `AlreadyExists` when anything is
/// there.
fn create_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
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
        assert_eq!(first.len(), 64);
        assert_eq!(first, again);
        let (configured, source) = resolve(Some("from-config"), dir.path()).expect("config");
        assert_eq!(
            (configured.as_str(), source),
            ("from-config", TokenSource::Config)
        );
    }

    #[cfg(unix)]
    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_can_read_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(TOKEN_FILE);
        std::fs::write(&path, "secret\n").expect("write");
        chmod(&path, 0o644);
        let e = resolve(None, dir.path()).expect_err("0644 refused");
        let message = format!("{e:#}");
        assert!(
            message.contains(&format!("chmod 600 {}", path.display())),
            "{message}"
        );
        assert!(message.contains("0644"), "{message}");
        // Nothing was written into it.
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "secret\n");
        chmod(&path, 0o600);
        assert_eq!(resolve(None, dir.path()).expect("fixed").0, "secret");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_token_path_is_refused_dangling_or_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(TOKEN_FILE);
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &path).expect("dangling link");
        let e = resolve(None, dir.path()).expect_err("dangling link refused");
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        assert!(!target.exists(), "nothing was created through the link");
        std::fs::write(&target, "secret\n").expect("target");
        chmod(&target, 0o600);
        let e = resolve(None, dir.path()).expect_err("link to a private file refused");
        assert!(
            format!("{e:#}").contains(&format!("rm {}", path.display())),
            "{e:#}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_folder_at_the_token_path_is_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(TOKEN_FILE);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        chmod(&path, 0o600);
        let e = read_private(&path).expect_err("a FIFO is refused");
        assert!(matches!(e, TokenFileError::NotAFile(_)), "{e}");
        std::fs::remove_file(&path).expect("rm");
        std::fs::create_dir(&path).expect("dir");
        chmod(&path, 0o700);
        let e = read_private(&path).expect_err("a folder is refused");
        assert!(matches!(e, TokenFileError::NotAFile(_)), "{e}");
    }
}
