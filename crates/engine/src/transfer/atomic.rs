//! Owns writing export files safely: a fresh temporary beside the target (never a symlink
//! followed), published whole by a rename or not at all, and removed after any failure.
//!
//! - The target is inspected without following it: an existing regular file, symlink or
//!   dangling symlink is replaced only with `Overwrite::Replace`; anything else (folder,
//!   device, FIFO, socket) is always refused, since replacing a device node with a file is
//!   never what an export meant.
//! - The temporary is `.<name>.<random>.partial` in the target's folder (so the rename stays
//!   on one file system), created with `O_CREAT|O_EXCL|O_NOFOLLOW`: a file or symlink planted
//!   at a guessable name is never written through.
//! - Publishing: `Replace` renames over the target, which replaces a symlink itself rather
//!   than what it points to. `Refuse` hard-links the temporary to the target, which fails
//!   atomically when anything appeared there meanwhile, then drops the temporary name; on a
//!   file system without hard links it falls back to check-then-rename.
//! - The file is fsynced before it is published and the folder after, so a published export
//!   survives a power cut. Until `publish`, dropping a `StagedFile` deletes the temporary, so
//!   a failed export (disk full, a read error) leaves nothing behind and a retry works.

use std::fs::{self, File, FileType, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::error::TransferError;

/// Whether an export may replace a file that is already at its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Refuse any existing target (the default; `--force` not given).
    #[default]
    Refuse,
    /// Replace an existing regular file or symlink (`--force`).
    Replace,
}

/// Longest part of the target's name kept in the temporary's name, so that
/// `.<name>.<32 hex>.partial` stays under the usual 255-byte name limit.
const NAME_PART_MAX: usize = 160;

/// A file being written under a temporary name, to be published under its target's name.
pub(crate) struct StagedFile {
    target: PathBuf,
    temp: PathBuf,
    overwrite: Overwrite,
    file: Option<File>,
    published: bool,
}

impl StagedFile {
    /// Check the target and create the temporary beside it.
    pub(crate) fn create(target: &Path, overwrite: Overwrite) -> Result<StagedFile, TransferError> {
        check_target(target, overwrite)?;
        let name = target
            .file_name()
            .ok_or_else(|| TransferError::UnsafeTarget {
                path: target.to_path_buf(),
                reason: "it does not name a file".into(),
            })?;
        let mut stem = name.to_string_lossy().into_owned();
        if stem.len() > NAME_PART_MAX {
            let mut cut = NAME_PART_MAX;
            while !stem.is_char_boundary(cut) {
                cut -= 1;
            }
            stem.truncate(cut);
        }
        let temp =
            folder_of(target).join(format!(".{stem}.{}.partial", uuid::Uuid::new_v4().simple()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        no_follow(&mut options);
        // Named by the target: the temporary's name means nothing to the user.
        let file = options.open(&temp).map_err(|source| TransferError::Io {
            op: "create",
            path: target.to_path_buf(),
            source,
        })?;
        Ok(StagedFile {
            target: target.to_path_buf(),
            temp,
            overwrite,
            file: Some(file),
            published: false,
        })
    }

    /// The open temporary, for writing (until `seal`).
    pub(crate) fn file(&mut self) -> Result<&mut File, TransferError> {
        self.file.as_mut().ok_or_else(|| TransferError::Io {
            op: "write",
            path: self.temp.clone(),
            source: io::Error::other("the file was already sealed"),
        })
    }

    /// Flush the contents to disk and close the file (many staged files may wait for
    /// `publish` without holding a descriptor each).
    pub(crate) fn seal(&mut self) -> Result<(), TransferError> {
        if let Some(file) = self.file.take() {
            file.sync_all().map_err(|source| TransferError::Io {
                op: "write",
                path: self.target.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Seal, then give the file its target's name. The folder is not synced here: call
    /// `sync_folder` once per folder after publishing.
    pub(crate) fn publish(mut self) -> Result<(), TransferError> {
        self.seal()?;
        match self.overwrite {
            Overwrite::Replace => {
                // Again, right before the rename: a folder or device may have appeared.
                check_target(&self.target, Overwrite::Replace)?;
                fs::rename(&self.temp, &self.target).map_err(|source| TransferError::Io {
                    op: "write",
                    path: self.target.clone(),
                    source,
                })?;
            }
            Overwrite::Refuse => match fs::hard_link(&self.temp, &self.target) {
                Ok(()) => {
                    // The export is in place; a leftover temporary name is only untidy.
                    if let Err(e) = fs::remove_file(&self.temp) {
                        tracing::warn!(path = %self.temp.display(), error = %e, "cannot remove an export's temporary name");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(TransferError::WouldOverwrite {
                        path: self.target.clone(),
                    });
                }
                Err(_) => {
                    // No hard links here (some file systems): the best that rename offers.
                    check_target(&self.target, Overwrite::Refuse)?;
                    fs::rename(&self.temp, &self.target).map_err(|source| TransferError::Io {
                        op: "write",
                        path: self.target.clone(),
                        source,
                    })?;
                }
            },
        }
        self.published = true;
        Ok(())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.published {
            self.file = None;
            // Ours: created with O_EXCL. Unlinking a name never follows a symlink.
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Write `target` through a `StagedFile`: `fill` writes the contents; on any error nothing
/// is left behind and the target is untouched.
pub(crate) fn write_file<T>(
    target: &Path,
    overwrite: Overwrite,
    fill: impl FnOnce(&mut dyn io::Write) -> Result<T, TransferError>,
) -> Result<T, TransferError> {
    let mut staged = StagedFile::create(target, overwrite)?;
    let value = fill_staged(&mut staged, fill)?;
    staged.publish()?;
    sync_folder(folder_of(target))?;
    Ok(value)
}

/// Run `fill` on a buffered writer over the staged file, then flush it.
pub(crate) fn fill_staged<T>(
    staged: &mut StagedFile,
    fill: impl FnOnce(&mut dyn io::Write) -> Result<T, TransferError>,
) -> Result<T, TransferError> {
    // Errors name the target (what the user asked for); the temporary is gone by then.
    let target = staged.target.clone();
    let mut out = io::BufWriter::with_capacity(1 << 16, staged.file()?);
    let value = fill(&mut out).map_err(|e| match e {
        TransferError::Write(source) => TransferError::Io {
            op: "write",
            path: target.clone(),
            source,
        },
        other => other,
    })?;
    io::Write::flush(&mut out).map_err(|source| TransferError::Io {
        op: "write",
        path: target,
        source,
    })?;
    Ok(value)
}

/// Make the names published in `folder` durable.
pub(crate) fn sync_folder(folder: &Path) -> Result<(), TransferError> {
    let sync = |folder: &Path| File::open(folder)?.sync_all();
    match sync(folder) {
        Ok(()) => Ok(()),
        // Some platforms and file systems cannot sync a folder; the data itself is synced.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        Err(source) => Err(TransferError::Io {
            op: "sync",
            path: folder.to_path_buf(),
            source,
        }),
    }
}

/// The folder a target lives in (`.` for a bare file name).
pub(crate) fn folder_of(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// May an export be published at `target`? Looks at the name itself, never through it.
pub(crate) fn check_target(target: &Path, overwrite: Overwrite) -> Result<(), TransferError> {
    let meta = match fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(TransferError::Io {
                op: "inspect",
                path: target.to_path_buf(),
                source,
            });
        }
    };
    let kind = meta.file_type();
    if !kind.is_file() && !kind.is_symlink() {
        return Err(TransferError::UnsafeTarget {
            path: target.to_path_buf(),
            reason: format!(
                "it is {}, not a regular file; an export never replaces one, even with --force",
                describe(kind)
            ),
        });
    }
    match overwrite {
        Overwrite::Replace => Ok(()),
        Overwrite::Refuse => Err(TransferError::WouldOverwrite {
            path: target.to_path_buf(),
        }),
    }
}

/// "a folder", "a character device" …: what a non-regular file is, for messages.
pub(crate) fn describe(kind: FileType) -> &'static str {
    if kind.is_dir() {
        return "a folder";
    }
    if kind.is_symlink() {
        return "a symlink";
    }
    if kind.is_file() {
        return "a regular file";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// Never open through a symlink in the last component (belt and braces with `O_EXCL`).
fn no_follow(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    #[cfg(not(unix))]
    let _ = options;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A fill that writes part of the file and then fails, as a full disk would.
    fn failing_fill(out: &mut dyn Write) -> Result<(), TransferError> {
        out.write_all(&[b'x'; 100_000])
            .map_err(TransferError::Write)?;
        Err(TransferError::Write(io::Error::new(
            io::ErrorKind::StorageFull,
            "No space left on device",
        )))
    }

    #[test]
    fn a_failed_write_leaves_nothing_and_a_retry_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("main.jsonl");
        for overwrite in [Overwrite::Refuse, Overwrite::Replace] {
            let err = write_file(&target, overwrite, failing_fill).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("No space left on device"), "{msg}");
            assert!(
                msg.contains(&target.display().to_string()),
                "names the file: {msg}"
            );
            assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
        }
        write_file(&target, Overwrite::Refuse, |out| {
            out.write_all(b"{}\n").map_err(TransferError::Write)
        })
        .unwrap();
        assert_eq!(entries(dir.path()), ["main.jsonl"]);
        assert_eq!(fs::read(&target).unwrap(), b"{}\n");

        // A failure while replacing leaves the old contents in place.
        write_file(&target, Overwrite::Replace, failing_fill).unwrap_err();
        assert_eq!(entries(dir.path()), ["main.jsonl"]);
        assert_eq!(fs::read(&target).unwrap(), b"{}\n");
    }

    #[test]
    fn a_staged_file_dropped_before_publishing_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.jsonl");
        let mut staged = StagedFile::create(&target, Overwrite::Refuse).unwrap();
        staged.file().unwrap().write_all(b"half").unwrap();
        staged.seal().unwrap();
        assert_eq!(entries(dir.path()).len(), 1);
        drop(staged);
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn publishing_without_replace_loses_no_race() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.jsonl");
        let staged = StagedFile::create(&target, Overwrite::Refuse).unwrap();
        // Someone else writes the target between the check and the publish.
        fs::write(&target, b"theirs").unwrap();
        let err = staged.publish().unwrap_err();
        assert!(
            matches!(err, TransferError::WouldOverwrite { .. }),
            "{err:?}"
        );
        assert_eq!(fs::read(&target).unwrap(), b"theirs");
        assert_eq!(entries(dir.path()), ["a.jsonl"]);
    }

    #[test]
    fn a_long_name_still_fits() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(format!("{}.jsonl", "é".repeat(120)));
        write_file(&target, Overwrite::Refuse, |out| {
            out.write_all(b"x").map_err(TransferError::Write)
        })
        .unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"x");
    }
}
