//! `import-openclaw` through the real binary on hostile or unlucky OpenClaw folders (issue
//! "a gateway that holds", item 10): a database whose `session_nodes` is a view over an endless
//! recursive query used to hang the import forever; an `openclaw-agent.sqlite` or
//! `sessions.json` that is a FIFO or a folder used to be passed over without a word. Every
//! run here is bounded: a hang fails the test instead of blocking it.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::CliBench;
use rusqlite::Connection;

/// Far longer than any of these imports takes; only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6-state")
}

fn db_of(root: &Path, agent: &str) -> PathBuf {
    root.join(format!("agents/{agent}/agent/openclaw-agent.sqlite"))
}

/// A writable copy of the fixture's agent databases.
fn fixture_copy(into: &Path) -> PathBuf {
    let root = into.join("openclaw");
    for agent in ["main", "work"] {
        let db = db_of(&root, agent);
        fs::create_dir_all(db.parent().unwrap()).unwrap();
        fs::copy(db_of(&fixture(), agent), &db).unwrap();
    }
    root
}

/// Run `import-openclaw root`, killing it (and failing) if it has not ended within `HANG`.
fn import_bounded(b: &CliBench, root: &Path) -> Output {
    let mut child = b
        .command(&["import-openclaw", root.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "import-openclaw hung (killed after {HANG:?}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sessions_here(b: &CliBench) -> usize {
    let out = b.run(&["sessions", "export", "agent:work:s1"]);
    usize::from(out.status.success())
}

/// Apply `sql` to `main`'s database in a fixture copy, import the copy, and check the import
/// stopped (exit 1) naming that file and saying `why`, with nothing imported (every
/// database is checked before anything is written).
fn refused_after(sql: &str, why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let db = db_of(&root, "main");
    Connection::open(&db).unwrap().execute_batch(sql).unwrap();
    let b = CliBench::new("{}");
    let out = import_bounded(&b, &root);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&db.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains(why), "says {why:?}: {err}");
    assert_eq!(sessions_here(&b), 0);
}

#[test]
fn a_view_over_an_endless_query_is_refused_naming_the_file_instead_of_hanging() {
    // The table becomes a view with the same columns whose rows never end.
    refused_after(
        "DROP TABLE session_nodes;
         CREATE VIEW session_nodes AS
           WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
           SELECT 'agent:main:k' || n AS session_key, 's' || n AS current_session_id,
                  '{}' AS entry_json FROM r;",
        "session_nodes is a view, not a table",
    );
}

#[test]
fn a_generated_column_is_refused_naming_the_file() {
    refused_after(
        "DROP TABLE session_nodes;
         CREATE TABLE session_nodes (session_key TEXT PRIMARY KEY, current_session_id TEXT,
           entry_json TEXT GENERATED ALWAYS AS (printf('%.*c', 1000000, 'x')) VIRTUAL);",
        "session_nodes computes column entry_json on read",
    );
}

#[test]
fn a_fifo_or_a_folder_where_a_state_file_belongs_is_reported_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    // `work`'s database is a FIFO (nothing ever writes into it: opening it to read would
    // block forever); a third agent's is a folder; a fourth has a legacy sessions.json that
    // is a FIFO.
    let fifo = db_of(&root, "work");
    fs::remove_file(&fifo).unwrap();
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let folder = db_of(&root, "third");
    fs::create_dir_all(&folder).unwrap();
    let index = root.join("agents/fourth/sessions/sessions.json");
    fs::create_dir_all(index.parent().unwrap()).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&index)
            .status()
            .unwrap()
            .success()
    );

    let b = CliBench::new("{}");
    let out = import_bounded(&b, &root);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "the rest is imported: {err}");
    for (path, why) in [
        (&fifo, "it is a named pipe (FIFO), not a regular file"),
        (&folder, "it is a folder, not a regular file"),
        (&index, "it is a named pipe (FIFO), not a regular file"),
    ] {
        let said = format!("{}: not read: {why}", path.display());
        assert!(err.contains(&said), "wants {said:?} in: {err}");
    }
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        summary.contains("3 files that are not regular files"),
        "{summary}"
    );
}
