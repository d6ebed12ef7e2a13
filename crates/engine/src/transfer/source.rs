//! Owns reading an import source safely: files are opened only when they lie inside the
//! folder being imported, are not symlinks and are regular files; lines are read with a cap
//! on their length, so no input makes the import buffer without bound.
//!
//! A path is resolved (`canonicalize`), checked, and opened with `O_NOFOLLOW`, so its last
//! component cannot be swapped for a symlink in between. A folder higher up swapped for a
//! symlink in that instant (someone who can write inside the source folder, racing the
//! import) is caught on Linux by asking the kernel where the opened descriptor really is
//! (`/proc/self/fd`); elsewhere, or without `/proc`, that narrow race remains.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use super::error::SkipReason;

/// The folder an import may read inside (canonical, so comparisons are by real location).
pub(crate) struct SourceRoot {
    canonical: PathBuf,
}

/// Why a file was not opened, or that there is none.
pub(crate) enum Refused {
    Missing,
    Skip(SkipReason, String),
}

impl SourceRoot {
    pub(crate) fn new(dir: &Path) -> io::Result<SourceRoot> {
        Ok(SourceRoot {
            canonical: fs::canonicalize(dir)?,
        })
    }

    /// Open `path` for reading if it is a regular file inside the root and not a symlink.
    pub(crate) fn open(&self, path: &Path) -> io::Result<Result<(File, Metadata), Refused>> {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Refused::Missing)),
            Err(e) => return Err(e),
        };
        if meta.file_type().is_symlink() {
            return Ok(Err(Refused::Skip(
                SkipReason::Symlink,
                "it is a symlink; only files inside the folder are read".into(),
            )));
        }
        let real = match fs::canonicalize(path) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Refused::Missing)),
            Err(e) => return Err(e),
        };
        if !real.starts_with(&self.canonical) {
            return Ok(Err(Refused::Skip(
                SkipReason::OutsideFolder,
                format!(
                    "it is outside {}; only files inside the folder are read",
                    self.canonical.display()
                ),
            )));
        }
        if !meta.file_type().is_file() {
            return Ok(Err(not_regular(&meta)));
        }
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // NONBLOCK: should a FIFO take the file's place, opening it must not wait for a
            // writer (reads of regular files ignore the flag).
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
        }
        let file = match options.open(&real) {
            Ok(f) => f,
            Err(e) if is_symlink_refusal(&e) => {
                return Ok(Err(Refused::Skip(
                    SkipReason::Symlink,
                    "it became a symlink while being opened".into(),
                )));
            }
            Err(e) => return Err(e),
        };
        if let Some(opened) = opened_path(&file)
            && !opened.starts_with(&self.canonical)
        {
            return Ok(Err(Refused::Skip(
                SkipReason::OutsideFolder,
                "it moved outside the folder while being opened".into(),
            )));
        }
        // What was opened, not what the name pointed to a moment ago.
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Ok(Err(not_regular(&meta)));
        }
        Ok(Ok((file, meta)))
    }
}

/// Where an open file really is, when the platform can say.
fn opened_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

fn not_regular(meta: &Metadata) -> Refused {
    Refused::Skip(
        SkipReason::NotRegularFile,
        format!(
            "it is {}, not a regular file",
            super::atomic::describe(meta.file_type())
        ),
    )
}

fn is_symlink_refusal(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// One read of `read_line_capped`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// End of input.
    Eof,
    /// A line (without its `\n`) is in the buffer.
    Text,
    /// A line longer than the cap was read past; the buffer is empty. `bytes` counts it
    /// without its `\n`.
    TooLong { bytes: u64 },
}

/// Read one line into `buf` (cleared first), keeping at most `cap` bytes of it: a longer
/// line is consumed in the reader's own chunks and dropped, so memory stays under
/// `cap` + one chunk however long the line.
pub(crate) fn read_line_capped<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut bytes: u64 = 0;
    let mut too_long = false;
    let mut seen_any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (seen_any, too_long) {
                (false, _) => Line::Eof,
                (true, false) => Line::Text,
                (true, true) => Line::TooLong { bytes },
            });
        }
        seen_any = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let (content, used) = match newline {
            Some(i) => (&available[..i], i + 1),
            None => (available, available.len()),
        };
        bytes += content.len() as u64;
        if !too_long {
            if buf.len() + content.len() > cap {
                too_long = true;
                buf.clear();
                buf.shrink_to(cap.min(1 << 16));
            } else {
                buf.extend_from_slice(content);
            }
        }
        reader.consume(used);
        if newline.is_some() {
            return Ok(if too_long {
                Line::TooLong { bytes }
            } else {
                Line::Text
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn lines(input: &[u8], cap: usize, chunk: usize) -> Vec<(Line, Vec<u8>)> {
        let mut r = BufReader::with_capacity(chunk, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = read_line_capped(&mut r, &mut buf, cap).unwrap();
            if l == Line::Eof {
                return out;
            }
            out.push((l, buf.clone()));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_says_where_an_open_file_is() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(real.join("sub")).unwrap();
        fs::write(real.join("sub/t.jsonl"), b"{}").unwrap();
        let root = SourceRoot::new(&real.join("sub")).unwrap();
        let (file, _) = match root.open(&real.join("sub/t.jsonl")).unwrap() {
            Ok(opened) => opened,
            Err(_) => panic!("a file inside the root is opened"),
        };
        // Renamed away after opening: the descriptor's real place is what counts.
        fs::rename(real.join("sub/t.jsonl"), real.join("t.jsonl")).unwrap();
        let at = opened_path(&file).unwrap();
        assert_eq!(at, real.join("t.jsonl"));
        assert!(!at.starts_with(&root.canonical));
    }

    #[test]
    fn long_lines_are_dropped_and_the_next_ones_read() {
        let mut input = b"short\n".to_vec();
        input.extend(vec![b'a'; 1000]);
        input.extend(b"\n12345\n123456\nlast");
        for chunk in [1, 3, 8, 64, 4096] {
            let got = lines(&input, 5, chunk);
            assert_eq!(
                got,
                [
                    (Line::Text, b"short".to_vec()),
                    (Line::TooLong { bytes: 1000 }, vec![]),
                    (Line::Text, b"12345".to_vec()),
                    (Line::TooLong { bytes: 6 }, vec![]),
                    (Line::Text, b"last".to_vec()),
                ],
                "chunk {chunk}"
            );
        }
        assert_eq!(lines(b"", 5, 8), []);
        assert_eq!(lines(b"\n", 5, 8), [(Line::Text, vec![])]);
    }
}
