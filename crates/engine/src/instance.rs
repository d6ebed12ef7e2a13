//! This engine instance's identity on a state folder, and whether another instance that left
//! runs open is still alive: each instance holds an exclusive lock on its own file for as
//! long as it lives, and the operating system drops the lock when the process dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

const DIR: &str = "instances";

pub struct Instance {
    id: String,
    /// The lock file, held (and locked) until the instance is dropped; `None` for an
    /// instance that only reads and claims nothing.
    held: Option<(PathBuf, File)>,
}

impl Instance {
    /// Register a new instance on `state_dir`. The file is locked under a temporary name and
    /// only then renamed to `<id>.lock`, so a `.lock` file that can be locked is always a
    /// dead instance's, never one still being claimed.
    pub fn claim(state_dir: &Path) -> std::io::Result<Instance> {
        let dir = state_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(format!("{id}.lock"));
        let partial = dir.join(format!("{id}{PARTIAL}"));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&partial)?;
        let locked = file.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => e,
            TryLockError::WouldBlock => std::io::Error::other("a fresh instance file is locked"),
        });
        if let Err(e) = locked.and_then(|()| std::fs::rename(&partial, &path)) {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        Ok(Instance {
            id,
            held: Some((path, file)),
        })
    }

    /// An instance that holds no lock file: for reading a folder this user cannot write.
    /// It never owns runs, so nobody needs to tell whether it is alive.
    pub fn unclaimed() -> Instance {
        Instance {
            id: uuid::Uuid::new_v4().simple().to_string(),
            held: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether instance `owner` on `state_dir` still runs. Unsure counts as alive: closing a
    /// live instance's runs would be worse than leaving a dead one's open a while longer.
    pub fn is_alive(state_dir: &Path, owner: &str) -> bool {
        if owner.contains(['/', '\\', '.']) {
            return true;
        }
        let path = state_dir.join(DIR).join(format!("{owner}.lock"));
        match lock_state(&path) {
            // Gone: its owner released it on the way out, or a sweep found it dead.
            LockState::Missing => false,
            LockState::Held => true,
            // Its lock was free, so its process is gone. The file is left to `sweep`, which
            // runs after recovery has closed this owner's runs.
            LockState::Free => false,
        }
    }

    /// Whether instance `owner` ran on this state folder and its process is gone (its lock
    /// file is there and free). False when unsure, or when it was never here (another host's).
    pub fn is_dead_here(state_dir: &Path, owner: &str) -> bool {
        if owner.contains(['/', '\\', '.']) {
            return false;
        }
        let path = state_dir.join(DIR).join(format!("{owner}.lock"));
        matches!(lock_state(&path), LockState::Free)
    }

    /// Every instance of this folder whose process is gone (its lock file free): what a
    /// `kill -9` leaves until `sweep`.
    pub fn dead_here(state_dir: &Path) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(state_dir.join(DIR)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".lock")?
                    .to_string();
                matches!(lock_state(&entry.path()), LockState::Free).then_some(name)
            })
            .collect()
    }

    /// Delete the lock files of `owners` that are still free (dead instances whose work was
    /// taken over): only those, since a file is all that tells another process an instance
    /// of this host died, when the store's leases have not run out yet.
    pub fn sweep_these(state_dir: &Path, owners: &[String]) -> usize {
        owners
            .iter()
            .filter(|owner| Instance::is_dead_here(state_dir, owner))
            .filter(|owner| {
                let path = state_dir.join(DIR).join(format!("{owner}.lock"));
                std::fs::remove_file(path).is_ok()
            })
            .count()
    }

    /// Delete the lock files of dead instances (their lock is free): what `kill -9` leaves.
    /// Call after recovery has closed the runs those instances left open. Returns how many
    /// files were removed.
    pub fn sweep(state_dir: &Path) -> usize {
        let dir = state_dir.join(DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = entry.path();
            let stale = if name.ends_with(".lock") {
                matches!(lock_state(&path), LockState::Free)
            } else if name.ends_with(PARTIAL) {
                // A claim takes microseconds between creating and renaming: an old one
                // whose lock is free was cut short by a kill.
                let old = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > PARTIAL_GRACE);
                old && matches!(lock_state(&path), LockState::Free)
            } else {
                false
            };
            if stale && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// The suffix of a lock file not yet locked and renamed into place.
const PARTIAL: &str = ".lock.new";

/// How old an unfinished claim must be before a sweep may remove it.
const PARTIAL_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

enum LockState {
    Missing,
    /// Locked by a live process, or unknown (counts as alive).
    Held,
    Free,
}

fn lock_state(path: &Path) -> LockState {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LockState::Missing,
        Err(_) => return LockState::Held,
    };
    match file.try_lock() {
        // Our own probe's lock ends when `file` closes.
        Ok(()) => LockState::Free,
        Err(_) => LockState::Held,
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some((path, _)) = &self.held {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_instance_is_alive_and_a_dropped_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = Instance::claim(dir.path()).expect("claim");
        let id = a.id().to_string();
        assert!(Instance::is_alive(dir.path(), &id));
        drop(a);
        assert!(!Instance::is_alive(dir.path(), &id));
        assert!(!Instance::is_alive(dir.path(), "never-existed"));
    }

    #[test]
    fn a_left_over_unlocked_file_counts_as_dead() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(DIR)).expect("dir");
        std::fs::write(dir.path().join(DIR).join("crashed.lock"), b"").expect("file");
        assert!(!Instance::is_alive(dir.path(), "crashed"));
    }

    #[test]
    fn a_sweep_removes_dead_lock_files_and_keeps_live_ones_and_fresh_claims() {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = Instance::claim(dir.path()).expect("claim");
        let instances = dir.path().join(DIR);
        std::fs::write(instances.join("dead.lock"), b"").expect("file");
        // A claim in progress (created, not yet renamed) is left alone.
        std::fs::write(instances.join(format!("young{PARTIAL}")), b"").expect("file");
        assert_eq!(Instance::sweep(dir.path()), 1);
        let mut left: Vec<String> = std::fs::read_dir(&instances)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![format!("{}.lock", live.id()), format!("young{PARTIAL}")]
        );
        assert!(Instance::is_alive(dir.path(), live.id()));
    }
}
