//! The write-ahead log stays bounded while another process keeps the database open (a
//! console), and what the commands wrote reaches the database file itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

const CONFIG: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [ { reply: "got: {{text}}" } ] },
  ] },
}"#;

fn inject(state: &Path, config: &Path, key: &str, text: &str) {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .args(["inject", key, text])
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn wal_len(state: &Path) -> u64 {
    std::fs::metadata(state.join("switchboard.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// A console's reads: a connection open all along, reading every few milliseconds.
fn start_reader(
    db: PathBuf,
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        while !stop.load(Ordering::Relaxed) {
            if !pause.load(Ordering::Relaxed) {
                let _: i64 = conn
                    .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
                    .unwrap();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

#[test]
fn the_log_stays_small_and_reaches_the_database_while_a_reader_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, CONFIG).unwrap();
    inject(&state, &config, "agent:main:s0", "first");
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    let reader = start_reader(state.join("switchboard.db"), stop.clone(), pause.clone());
    // 40 commands, each writing about 100 KB (the message and the reply quoting it): 4 MB
    // of log if nothing were copied back.
    let text = "x".repeat(50_000);
    let mut peak = 0;
    for i in 1..=40 {
        inject(&state, &config, &format!("agent:main:s{i}"), &text);
        peak = peak.max(wal_len(&state));
    }
    assert!(
        peak < 1024 * 1024,
        "the log reached {peak} bytes while a reader was open"
    );
    // With the reader idle (still open), one more command leaves everything in the file.
    pause.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(50));
    inject(&state, &config, "agent:main:s41", "last");
    let copy = dir.path().join("copy.db");
    std::fs::copy(state.join("switchboard.db"), &copy).unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let sessions: i64 = conn
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 42, "the database file alone holds every session");
}
