//! `switchboard backup`: a consistent copy of a state folder's database, taken with SQLite's
//! online backup API while the folder is in use (a serving gateway, a console). The copy is
//! made in one step, so it is one snapshot of the source (in WAL mode writers go on meanwhile
//! and a step never restarts), written to a temporary file beside the destination, checked
//! (`PRAGMA quick_check`, the sessions counted), made durable, and only then renamed into
//! place: a backup that is there is whole.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::error::StorageError;

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    pub sessions: u64,
    pub lines: u64,
    pub bytes: u64,
}

/// Copy `<state_dir>/switchboard.db` to `out` (which must not exist).
pub fn backup(state_dir: &Path, out: &Path) -> Result<BackupReport, StorageError> {
    let source = state_dir.join(crate::DB_FILE);
    if !source.exists() {
        return Err(StorageError::Open {
            path: source,
            message: "no database here (is this a state folder?)".into(),
        });
    }
    let src = Connection::open_with_flags(
        &source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StorageError::Open {
        path: source.clone(),
        message: e.to_string(),
    })?;
    src.busy_timeout(crate::error::BUSY_TIMEOUT)
        .map_err(|e| StorageError::Sqlite(e.to_string()))?;
    let partial = partial_path(out);
    // A partial file from an interrupted run is ours to replace.
    let _ = std::fs::remove_file(&partial);
    let result = copy_and_check(&src, &partial);
    match result {
        Ok(report) => {
            std::fs::rename(&partial, out).map_err(|e| StorageError::Open {
                path: out.to_path_buf(),
                message: e.to_string(),
            })?;
            sync_dir(out);
            Ok(report)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

fn copy_and_check(src: &Connection, partial: &Path) -> Result<BackupReport, StorageError> {
    let mut dst = Connection::open(partial).map_err(|e| StorageError::Open {
        path: partial.to_path_buf(),
        message: e.to_string(),
    })?;
    {
        let copy = rusqlite::backup::Backup::new(src, &mut dst).map_err(sqlite)?;
        // Every page in one step: one snapshot, never restarted by a concurrent writer.
        copy.step(-1).map_err(sqlite)?;
    }
    // The copy carries the source's WAL mode; a backup file is one self-contained file.
    dst.pragma_update(None, "journal_mode", "DELETE")
        .map_err(sqlite)?;
    let check: String = dst
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(sqlite)?;
    if check != "ok" {
        return Err(StorageError::Sqlite(format!(
            "the copy does not check out: {check}"
        )));
    }
    let count = |table: &str| -> Result<u64, StorageError> {
        let n: i64 = dst
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(sqlite)?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let (sessions, lines) = (count("sessions")?, count("transcript")?);
    drop(dst);
    let file = std::fs::File::open(partial).map_err(|e| StorageError::Open {
        path: partial.to_path_buf(),
        message: e.to_string(),
    })?;
    file.sync_all().map_err(|e| StorageError::Open {
        path: partial.to_path_buf(),
        message: e.to_string(),
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(BackupReport {
        sessions,
        lines,
        bytes,
    })
}

fn sqlite(e: rusqlite::Error) -> StorageError {
    StorageError::Sqlite(e.to_string())
}

/// `<out>.partial`, beside it (a rename within one folder is atomic).
fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// The rename is durable once the folder is synced.
fn sync_dir(out: &Path) {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
}
