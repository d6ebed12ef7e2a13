//! Where this state folder's own `serve` listens: each running gateway keeps a record in
//! `<state>/gateways/`, locked for as long as it lives, so `--connect` offers the folder's
//! token only to a port that this folder's gateway is really listening on.
//!
//! A record is created under a temporary name, locked, filled and only then renamed into
//! place (as `engine::instance` does), so a record whose lock can be taken is always a dead
//! gateway's (`kill -9`, a crash) and never one still being written: the operating system
//! drops the lock with the process, whatever the file says. A clean exit removes it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The folder of records in the state folder.
pub const DIR: &str = "gateways";
const SUFFIX: &str = ".json";
const PARTIAL: &str = ".json.new";
/// A record is a few dozen bytes; anything bigger is not one of ours.
const MAX_RECORD: u64 = 4096;

/// What a running gateway says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The address it is bound to (an unspecified IP listens on loopback too).
    pub addr: SocketAddr,
    /// `ws` or `wss`.
    pub scheme: String,
    pub pid: u32,
    /// Its token is the state folder's `gateway-token` (not the config's or the
    /// environment's), so that file is the one to offer it.
    pub token_file: bool,
}

impl Record {
    /// Whether a client dialling `to` (a loopback address) reaches this gateway: the same
    /// port, and the same address or the unspecified one of its family (nobody else can
    /// bind a more specific address on that port then). Another user may well listen on
    /// `[::1]:P` while we hold `127.0.0.1:P`, so the family counts.
    pub fn serves(&self, to: SocketAddr) -> bool {
        let ip = self.addr.ip();
        to.ip().is_loopback()
            && self.addr.port() == to.port()
            && (ip == to.ip() || (ip.is_unspecified() && ip.is_ipv4() == to.ip().is_ipv4()))
    }
}

/// A live gateway's record, held (locked) until dropped, then removed.
pub struct Listening {
    path: PathBuf,
    _lock: File,
}

impl Listening {
    /// Records `record` in `state_dir`, replacing nothing: each gateway has its own file.
    /// Dead gateways' records are removed on the way.
    pub fn record(state_dir: &Path, record: &Record) -> std::io::Result<Listening> {
        let dir = state_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        sweep(&dir);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let partial = dir.join(format!("{id}{PARTIAL}"));
        let path = dir.join(format!("{id}{SUFFIX}"));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = options.open(&partial)?;
        let written = (|| {
            file.try_lock().map_err(|e| match e {
                TryLockError::Error(e) => e,
                TryLockError::WouldBlock => std::io::Error::other("a fresh record is locked"),
            })?;
            let text = serde_json::to_vec(record).map_err(std::io::Error::other)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&partial, &path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        Ok(Listening { path, _lock: file })
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The records of gateways on `state_dir` that are running now (their lock is held). A
/// record that cannot be read or checked is left out: unsure means no token is offered.
pub fn live(state_dir: &Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(state_dir.join(DIR)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(SUFFIX) && !n.ends_with(PARTIAL))
        })
        .filter_map(|e| read_live(&e.path()))
        .collect()
}

/// The live gateways of `state_dir` that a client dialling any of `addrs` reaches (a host
/// name such as `localhost` may resolve to several; the dialler may take any): `None` unless
/// every one of them is served by a live record, so the token never goes where we do not
/// listen.
pub fn own_for_all(state_dir: &Path, addrs: &[SocketAddr]) -> Option<Vec<Record>> {
    if addrs.is_empty() {
        return None;
    }
    let live = live(state_dir);
    addrs
        .iter()
        .map(|a| live.iter().find(|r| r.serves(*a)).cloned())
        .collect()
}

fn read_live(path: &Path) -> Option<Record> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    match file.try_lock_shared() {
        // Nobody holds it: its gateway is gone. (Our probe's lock ends with `file`.)
        Ok(()) => return None,
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(_)) => return None,
    }
    let mut text = Vec::new();
    file.take(MAX_RECORD).read_to_end(&mut text).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Removes the records of dead gateways (lock free) in `dir`. Unfinished records are left
/// alone: one being written right now looks the same until it is renamed.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_record = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(SUFFIX) && !n.ends_with(PARTIAL));
        if !is_record {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(addr: &str) -> Record {
        Record {
            addr: addr.parse().expect("addr"),
            scheme: "ws".into(),
            pid: std::process::id(),
            token_file: true,
        }
    }

    fn to(addr: &str) -> Vec<SocketAddr> {
        vec![addr.parse().expect("addr")]
    }

    #[test]
    fn a_held_record_is_live_and_a_dropped_or_stale_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = Listening::record(dir.path(), &record("127.0.0.1:4100")).expect("record");
        assert_eq!(
            own_for_all(dir.path(), &to("127.0.0.1:4100")),
            Some(vec![record("127.0.0.1:4100")])
        );
        assert_eq!(own_for_all(dir.path(), &to("127.0.0.1:4101")), None);
        // What `kill -9` leaves: the file, with nobody holding its lock.
        let stale = dir.path().join(DIR).join(format!("dead{SUFFIX}"));
        std::fs::write(
            &stale,
            serde_json::to_vec(&record("127.0.0.1:4102")).expect("json"),
        )
        .expect("write");
        assert_eq!(own_for_all(dir.path(), &to("127.0.0.1:4102")), None);
        drop(held);
        assert_eq!(live(dir.path()), Vec::new());
        // The next gateway's start removes the stale file.
        let _next = Listening::record(dir.path(), &record("[::]:4103")).expect("record");
        assert!(!stale.exists());
        assert!(own_for_all(dir.path(), &to("[::1]:4103")).is_some());
    }

    #[test]
    fn only_the_address_family_and_port_we_hold_count() {
        assert!(!record("192.0.2.1:4100").serves("127.0.0.1:4100".parse().expect("a")));
        assert!(record("0.0.0.0:4100").serves("127.0.0.1:4100".parse().expect("a")));
        assert!(!record("0.0.0.0:4100").serves("192.0.2.1:4100".parse().expect("a")));
        // Someone else may hold [::1]:4100 while we hold 127.0.0.1:4100.
        assert!(!record("127.0.0.1:4100").serves("[::1]:4100".parse().expect("a")));
        assert!(!record("127.0.0.1:4100").serves("127.0.0.2:4100".parse().expect("a")));
        let dir = tempfile::tempdir().expect("tempdir");
        let _held = Listening::record(dir.path(), &record("127.0.0.1:4100")).expect("record");
        let localhost: Vec<SocketAddr> = vec![
            "127.0.0.1:4100".parse().expect("a"),
            "[::1]:4100".parse().expect("a"),
        ];
        assert_eq!(own_for_all(dir.path(), &localhost), None);
    }
}
