//! Storage failures keep their kind on the way to the user: busy, disk full, read-only and
//! damaged are four different messages, each saying what to do. And a state folder this
//! user can only read still answers `sessions list`, `show` and `export`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use switchboard_store_sqlite::{Storage, StorageError};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

fn command(state: &Path, config: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("RUST_BACKTRACE");
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn storage() -> (tempfile::TempDir, Storage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    (dir, storage)
}

fn insert_meta(storage: &Storage, value: String) -> Result<(), StorageError> {
    storage.write_blocking(move |c| {
        c.execute(
            "INSERT INTO meta (name, value) VALUES (?1, ?2)",
            [uuid_like(), value.clone()],
        )?;
        Ok(())
    })
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("test-{}", N.fetch_add(1, Ordering::Relaxed))
}

#[test]
fn a_lock_held_past_the_timeout_is_reported_busy() {
    let (dir, storage) = storage();
    // The writer waits 200 ms instead of 30 s, so the test is quick.
    storage
        .write_blocking(|c| Ok(c.busy_timeout(Duration::from_millis(200))?))
        .unwrap();
    let other = rusqlite::Connection::open(dir.path().join("switchboard.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = insert_meta(&storage, "x".into()).unwrap_err();
    other.execute_batch("ROLLBACK").unwrap();
    assert!(matches!(err, StorageError::Locked(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("busy") && text.contains("try again"),
        "{text}"
    );
    assert!(!text.contains("damaged"), "{text}");
    // Once the lock is gone, writes work again.
    insert_meta(&storage, "y".into()).unwrap();
}

#[test]
fn a_full_disk_is_reported_as_such() {
    let (_dir, storage) = storage();
    // The database may not grow past its current size: SQLite's own SQLITE_FULL.
    storage
        .write_blocking(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            c.pragma_update(None, "max_page_count", pages)?;
            Ok(())
        })
        .unwrap();
    let err = insert_meta(&storage, "x".repeat(1_000_000)).unwrap_err();
    assert!(matches!(err, StorageError::DiskFull(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("full") && text.contains("Free some space"),
        "{text}"
    );
}

#[test]
fn a_database_that_refuses_writes_is_reported_read_only() {
    let (_dir, storage) = storage();
    storage
        .write_blocking(|c| Ok(c.pragma_update(None, "query_only", "ON")?))
        .unwrap();
    let err = insert_meta(&storage, "x".into()).unwrap_err();
    assert!(matches!(err, StorageError::ReadOnly(_)), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
}

fn folder_with_a_session() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").unwrap();
    let out = command(
        &state,
        &config,
        &["inject", "agent:main:main", "hello there"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    (dir, state, config)
}

#[test]
fn a_damaged_database_is_reported_with_what_to_do() {
    let (_dir, state, config) = folder_with_a_session();
    std::fs::write(state.join("switchboard.db"), vec![0x5a; 64 * 1024]).unwrap();
    for args in [&["sessions", "list"][..], &["inject", "main", "x"][..]] {
        let out = command(&state, &config, args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("stored data is damaged"), "{args:?}: {err}");
        assert!(err.contains("backup"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Run as a user who cannot write `state` (root ignores file modes, so as `nobody`).
fn as_reader(c: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        c.uid(65534).gid(65534);
    }
    c
}

/// Everything under `path` loses its write bits; folders stay enterable by everyone.
fn make_read_only(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).unwrap();
    if meta.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            make_read_only(&e.unwrap().path());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o555)).unwrap();
    } else {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
}

#[test]
fn a_read_only_state_folder_can_still_be_listed_shown_and_exported() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, state, config) = folder_with_a_session();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A dead instance's lock file and a log folder are there too, as they would be.
    make_read_only(&state);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();

    let out = as_reader(&mut command(&state, &config, &["sessions", "list"]))
        .output()
        .unwrap();
    assert!(out.status.success(), "list: {}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("agent:main:main"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let out = as_reader(&mut command(
        &state,
        &config,
        &["sessions", "show", "agent:main:main"],
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "show: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello there"));

    let target = out_dir.join("main.jsonl");
    let out = as_reader(&mut command(
        &state,
        &config,
        &[
            "sessions",
            "export",
            "agent:main:main",
            "--out",
            target.to_str().unwrap(),
        ],
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "export: {}", stderr(&out));
    let exported = std::fs::read_to_string(&target).unwrap();
    assert!(exported.contains("hello there"), "{exported}");

    // A command that writes says why it cannot, and what to do.
    let out = as_reader(&mut command(&state, &config, &["inject", "main", "x"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("read-only"), "{err}");
    assert!(!err.contains("damaged"), "{err}");

    let after: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "nothing was added to the folder");
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `None` where mounting is not permitted (not root, or no CAP_SYS_ADMIN).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

#[test]
fn a_real_full_disk_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mnt) = Tmpfs::mount(&dir.path().join("mnt"), "1m") else {
        eprintln!("skipped: this machine does not allow mounting a tmpfs");
        return;
    };
    let state = mnt.0.join("state");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").unwrap();
    let big = "y".repeat(100_000);
    let mut failure = None;
    for i in 0..30 {
        let out = command(
            &state,
            &config,
            &["inject", &format!("agent:main:s{i}"), &big],
        )
        .output()
        .unwrap();
        if !out.status.success() {
            failure = Some(out);
            break;
        }
    }
    let out = failure.expect("a 1 MB disk fills up");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("disk holding the state folder is full"),
        "{err}"
    );
    assert!(
        !err.contains("damaged") && !err.contains("panicked"),
        "{err}"
    );
}
