//! Owns the folders an export creates: each is checked to be a real folder (never a symlink
//! written through), and every folder an export created is removed again when it fails, so a
//! failed `sessions export --all` leaves the disk as it found it. A folder that existed
//! before is never removed, and a created one is removed only while empty (`remove_dir`), so
//! nothing but the export's own empty folders can go.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::atomic;
use super::error::TransferError;

/// A folder of the export layout must be a real folder, not a symlink to somewhere else.
pub(super) fn check_real_folder(folder: &Path) -> Result<(), TransferError> {
    match fs::symlink_metadata(folder) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(m) => Err(TransferError::UnsafeTarget {
            path: folder.to_path_buf(),
            reason: format!(
                "it is {}, not a folder; an export never writes through one",
                atomic::describe(m.file_type())
            ),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(TransferError::Io {
            op: "inspect",
            path: folder.to_path_buf(),
            source,
        }),
    }
}

/// The folders one export created, newest last. Dropped without `keep`, it removes them
/// newest first (the export failed); each only if still empty, so a file someone else put
/// there meanwhile keeps its folder.
#[derive(Default)]
pub(super) struct NewFolders {
    created: Vec<PathBuf>,
    kept: bool,
}

impl NewFolders {
    /// Create `root` (a path the user chose, with any missing parents) and the layout's
    /// `folder` below it, one level at a time, each a real folder; remember which were new.
    pub(super) fn make(&mut self, root: &Path, folder: &Path) -> Result<(), TransferError> {
        // The missing part of `root` itself, outermost first.
        let mut missing = Vec::new();
        let mut at = Some(root);
        while let Some(p) = at {
            match fs::symlink_metadata(p) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(p.to_path_buf()),
                Err(source) => {
                    return Err(TransferError::Io {
                        op: "inspect",
                        path: p.to_path_buf(),
                        source,
                    });
                }
            }
            at = p.parent();
        }
        for p in missing.into_iter().rev() {
            self.create(&p)?;
        }
        let mut at = root.to_path_buf();
        for part in folder
            .strip_prefix(root)
            .unwrap_or(Path::new(""))
            .components()
        {
            at.push(part);
            self.create(&at)?;
        }
        Ok(())
    }

    fn create(&mut self, path: &Path) -> Result<(), TransferError> {
        match fs::create_dir(path) {
            Ok(()) => {
                self.created.push(path.to_path_buf());
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => check_real_folder(path),
            Err(source) => Err(TransferError::Io {
                op: "create",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Whether this export created `folder`.
    pub(super) fn is_new(&self, folder: &Path) -> bool {
        self.created.iter().any(|c| c == folder)
    }

    /// The export succeeded: its folders stay.
    pub(super) fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for NewFolders {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        for path in self.created.iter().rev() {
            // Ours and empty, or left alone: remove_dir never removes contents.
            if let Err(e) = fs::remove_dir(path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a folder a failed export created");
            }
        }
    }
}
