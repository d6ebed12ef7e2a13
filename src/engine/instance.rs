//! This engine instance's identity on a state folder, and whether another instance that left
//! runs open is still alive: each instance holds an exclusive lock on its own file for as
//! long as it lives, and the operating system drops the lock when the process dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

const DIR: &str = "instances";

pub struct Instance {
    id: String,
    path: PathBuf,
    /// Held (and locked) until the instance is dropped.
    _file: File,
}

impl Instance {
    /// Register a new instance on `state_dir`.
    pub fn claim(state_dir: &Path) -> std::io::Result<Instance> {
        let dir = state_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(format!("{id}.lock"));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)?;
        file.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => e,
            TryLockError::WouldBlock => std::io::Error::other("a fresh instance file is locked"),
        })?;
        Ok(Instance {
            id,
            path,
            _file: file,
        })
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
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) => return true,
        };
        match file.try_lock() {
            Ok(()) => {
                // Dead: its lock was free. Tidy its file away.
                let _ = std::fs::remove_file(&path);
                false
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(_)) => true,
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
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
}
