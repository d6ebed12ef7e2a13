//! `switchboard store copy` (issue 28 item 4) and `store check` on PostgreSQL, through the real
//! binary: a seeded SQLite state (long transcripts, runs, an exchange, a spawn, outbox rows,
//! idempotency keys, an import mark, a run of a deleted session, odd text) copied to
//! PostgreSQL and back reads the same everywhere; a copy killed inside a session's
//! transaction resumes and verifies; foreign data and a copy onto itself are refused; the
//! check on PostgreSQL finds an orphan line and a seq gap.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{BIN, CliBench, on_postgres, pg, ws};

const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "ok 🦀" } ] } ] } }"#;

/// The sessions the seed makes (emoji in a key: byte order on both sides).
const KEYS: [&str; 3] = ["agent:main:alpha", "agent:main:beta", "agent:main:émoji🦀"];

fn db(state: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(state.join("switchboard.db")).expect("open the store")
}

/// Append `n` message lines to `key`'s transcript, the first with NUL and emoji escaped
/// as JSON keeps them, and one of about a megabyte when `huge`.
fn add_lines(state: &Path, key: &str, n: usize, huge: bool) {
    let mut c = db(state);
    let (sid, last): (String, i64) = c
        .query_row(
            "SELECT s.session_id, max(t.seq) FROM sessions s JOIN transcript t
             ON t.session_id = s.session_id WHERE s.key = ?1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the session");
    let tx = c.transaction().expect("tx");
    for i in 1..=n {
        let text = match i {
            1 => "NUL \\u0000 here, emoji 🦀👩‍👩‍👧, accents é".to_string(),
            2 if huge => "x".repeat(1_000_000),
            _ => format!("line {i}"),
        };
        let line = format!(
            r#"{{"type":"message","id":"l{i}","parentId":null,"timestamp":"2026-11-28T04:00:00.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1795839835379}}}}"#
        );
        tx.execute(
            "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
             VALUES (?1, ?2, ?3, 'message', 'user', ?4)",
            rusqlite::params![sid, last + i as i64, format!("l{i}"), line],
        )
        .expect("line");
    }
    tx.commit().expect("commit");
}

/// A state with something in every table the engine keeps.
fn seed(b: &CliBench, lines: usize) {
    for key in KEYS {
        b.ok(&["inject", key, "hello", "--quiet"]);
    }
    add_lines(&b.state, KEYS[0], lines, true);
    add_lines(&b.state, KEYS[2], 50, false);
    let now = switchboard_types::api::time::now_ms();
    db(&b.state)
        .execute_batch(&format!(
            "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status,
                                owner, started_at, ended_at, kind, detail)
             VALUES ('f1', 'c1', 'agent:main:alpha', 'agent:main:beta', 'ping 🦀', 'r-f1',
                     'done', 'gone-owner', 1000, 2000, 'send', 'max turns');
             INSERT INTO spawns (child_key, requester, run_id, agent_id, task, label, cleanup,
                                 mode, status, outcome, started_at, ended_at)
             VALUES ('agent:main:beta', 'agent:main:alpha', 'r-s1', 'main',
                     'task with NUL ' || char(0) || ' inside', 'kid', 'keep', 'run', 'done',
                     'completed', 1000, 2000);
             INSERT INTO outbox (created_at, session_key, kind, channel, recipient, text, status)
             VALUES (1, 'agent:main:alpha', 'reply', 'telegram', 'u1', 'hi 🦀', 'queued'),
                    (2, 'agent:main:alpha', 'announce', 'telegram', 'u1', 'done', 'queued');
             INSERT INTO idempotency_keys (key, session_key, message_hash, seq, created_at)
             VALUES ('idem-live', 'agent:main:alpha', 'h1', 1, {now}),
                    ('idem-expired', 'agent:main:alpha', 'h2', 1, 1);
             INSERT INTO import_marks VALUES ('agent:main:beta', 'sid-b', '/x.jsonl', 10, 20,
                                              'a', 'b', 2);
             INSERT INTO pairings (channel, sender, display_name, code, requested_at,
                                   expires_at, approved_at)
             VALUES ('telegram', '77', 'Zed', 'ABCD2345', 1, 3600001, NULL),
                    ('telegram', '78', NULL, 'EFGH6789', 1, 3600001, 2);
             INSERT INTO runs (run_id, session_key, agent_id, step, status, owner, started_at)
             VALUES ('r-gone', 'agent:main:deleted', 'main', 'message', 'ok', 'o', 1);"
        ))
        .expect("seed");
}

/// `switchboard` with `args` on the store `--store` names (a state folder of its own for
/// logs and locks).
fn on_store(dir: &Path, store: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.arg("--state-dir").arg(dir).args(args);
    c.env_remove("SWITCHBOARD_STORE")
        .env_remove("SWITCHBOARD_CONFIG");
    if let Some(url) = store {
        c.args(["--store", url]);
    }
    c.output().expect("runs")
}

#[track_caller]
fn ok_json(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// What the engine answers about every session (list and each history), with the store's
/// location (which names the folder or server) left out.
fn answers(dir: &Path, store: Option<&str>) -> Vec<Value> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("transcriptPath");
                m.remove("sessionFile");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut all = vec![ok_json(on_store(
        dir,
        store,
        &["sessions", "list", "--json"],
    ))];
    for key in KEYS {
        all.push(ok_json(on_store(
            dir,
            store,
            &[
                "sessions",
                "show",
                key,
                "--json",
                "--messages",
                "200",
                "--tools",
            ],
        )));
    }
    all.iter_mut().for_each(strip);
    all
}

fn copy(from: &str, to: &str, extra: &[&str]) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.args(["store", "copy", "--from", from, "--to", to])
        .args(extra)
        .env_remove("SWITCHBOARD_STORE");
    crate::common::bounded(c)
}

/// SQLite -> PostgreSQL -> a fresh SQLite folder: both copies verify, every list and history
/// answer is the same on all three, and the transcripts are the same rows byte for byte.
#[test]
fn a_state_goes_to_postgres_and_back_unchanged() {
    if on_postgres("a_state_goes_to_postgres_and_back_unchanged") {
        return;
    }
    let Some(cluster) = pg::cluster_or_skip("a_state_goes_to_postgres_and_back_unchanged") else {
        return;
    };
    let b = CliBench::new(CONFIG);
    seed(&b, 3000);
    let url = pg::fresh_database(cluster);
    let back = tempfile::tempdir().expect("tempdir");
    let back_state = back.path().join("state");
    let source = b.state.to_str().expect("utf-8 path");

    let there = ok_json(copy(source, &url, &["--json"]));
    assert_eq!(there["ok"], true, "{there}");
    assert_eq!(there["copied"], 3, "{there}");
    assert_eq!(
        there["counts"]["idempotencyKeys"]["destination"], 1,
        "{there}"
    );
    assert_eq!(there["counts"]["runs"]["destination"], 4, "{there}");
    assert_eq!(there["counts"]["pairings"]["destination"], 2, "{there}");
    let home = tempfile::tempdir().expect("tempdir");
    let pg_home = home.path().join("pg");
    let returned = ok_json(copy(&url, back_state.to_str().expect("utf-8"), &["--json"]));
    assert_eq!(returned["ok"], true, "{returned}");
    for table in [
        "sessions",
        "transcriptLines",
        "runs",
        "exchanges",
        "spawns",
        "outbox",
        "importMarks",
        "idempotencyKeys",
        "pairings",
    ] {
        assert_eq!(
            there["counts"][table]["source"], returned["counts"][table]["destination"],
            "{table}: {there} {returned}"
        );
    }

    // The kinds go with the key scheme they were computed under: nothing to recompute.
    let basis: String = db(&b.state)
        .query_row(
            "SELECT value FROM meta WHERE name = 'kind_basis'",
            [],
            |r| r.get(0),
        )
        .expect("the source's kind basis");
    assert_eq!(
        cluster.sql(
            pg::database_of(&url),
            "SELECT value FROM meta WHERE name = 'kind_basis'"
        ),
        basis
    );

    let original = answers(&b.state, None);
    assert_eq!(original, answers(&pg_home, Some(&url)), "on PostgreSQL");
    assert_eq!(original, answers(&back_state, None), "back on SQLite");

    let rows = |state: &Path| -> Vec<(String, i64, String)> {
        let c = db(state);
        let mut s = c
            .prepare("SELECT session_id, seq, line FROM transcript ORDER BY session_id, seq")
            .expect("prepare");
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    let (a, z) = (rows(&b.state), rows(&back_state));
    assert_eq!(a.len(), z.len());
    assert!(a == z, "the transcripts differ after the round trip");
    assert!(a.iter().any(|(_, _, l)| l.len() > 1_000_000));
}

/// Run a copy from `b`'s state to `to` that holds inside its fourth session's transaction
/// (after that session's first 1,000 lines); `while_held` looks at the destination then; the
/// copy is killed with SIGKILL.
fn copy_killed_in_fourth_session(b: &CliBench, to: &str, while_held: impl FnOnce()) {
    let mut child = Command::new(BIN)
        .args(["store", "copy", "--from"])
        .arg(&b.state)
        .args(["--to", to])
        .env("SWITCHBOARD_COPY_HOLD_AFTER", "3")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("holding") {
                let _ = tx.send(());
            }
        }
    });
    let held = rx.recv_timeout(ws::WAIT);
    if held.is_ok() {
        while_held();
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    held.expect("the copy reaches its hold");
}

/// Six sessions of a header, a message, a reply and 2,500 lines.
fn six_long_sessions() -> CliBench {
    let b = CliBench::new(CONFIG);
    for i in 0..6 {
        let key = format!("agent:main:s{i}");
        b.ok(&["inject", &key, "hello", "--quiet"]);
        add_lines(&b.state, &key, 2500, false);
    }
    b
}

/// A copy to PostgreSQL killed inside a session's transaction leaves the sessions before it
/// whole and nothing of that one; run again, it resumes, verifies, and no line is there twice.
#[test]
fn a_copy_killed_midway_resumes_and_verifies() {
    if on_postgres("a_copy_killed_midway_resumes_and_verifies") {
        return;
    }
    let Some(cluster) = pg::cluster_or_skip("a_copy_killed_midway_resumes_and_verifies") else {
        return;
    };
    let b = six_long_sessions();
    let url = pg::fresh_database(cluster);
    let dbname = pg::database_of(&url).to_string();
    copy_killed_in_fourth_session(&b, &url, || {
        // The fourth session's first 1,000 lines are written in a transaction still open,
        // and no reader sees them: only the three sessions before it, whole.
        assert_eq!(
            cluster.sql(
                &dbname,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                 AND state = 'idle in transaction'"
            ),
            "1"
        );
        assert_eq!(
            cluster.sql(&dbname, "SELECT count(*) FROM transcript"),
            (3 * 2503).to_string()
        );
    });
    assert_eq!(cluster.sql(&dbname, "SELECT count(*) FROM sessions"), "3");
    assert_eq!(
        cluster.sql(&dbname, "SELECT count(*) FROM transcript"),
        (3 * 2503).to_string()
    );
    let home = tempfile::tempdir().expect("tempdir");
    let check = on_store(home.path(), Some(&url), &["store", "check", "--json"]);
    let report: Value = serde_json::from_slice(&check.stdout).expect("JSON");
    assert_eq!(report["orphanLines"], 0, "{report}");
    assert_eq!(report["ok"], true, "{report}");

    let again = ok_json(copy(b.state.to_str().expect("utf-8"), &url, &["--json"]));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["resumed"], 3, "{again}");
    assert_eq!(again["copied"], 3, "{again}");
    assert_eq!(
        cluster.sql(&dbname, "SELECT count(*) FROM transcript"),
        (6 * 2503).to_string()
    );
}

/// The same into a SQLite folder: the killed transaction is rolled back from the log at the
/// next open; the rerun resumes and verifies.
#[test]
fn a_copy_to_sqlite_killed_midway_resumes_and_verifies() {
    if on_postgres("a_copy_to_sqlite_killed_midway_resumes_and_verifies") {
        return;
    }
    let b = six_long_sessions();
    let to = tempfile::tempdir().expect("tempdir");
    let dest = to.path().join("copy");
    let dest_str = dest.to_str().expect("utf-8");
    copy_killed_in_fourth_session(&b, dest_str, || {});
    let check = on_store(&dest, None, &["store", "check", "--json"]);
    let report: Value = serde_json::from_slice(&check.stdout).expect("JSON");
    assert_eq!(report["sessions"], 3, "{report}");
    assert_eq!(report["transcriptLines"], 3 * 2503, "{report}");
    assert_eq!(report["ok"], true, "{report}");

    let again = ok_json(copy(
        b.state.to_str().expect("utf-8"),
        dest_str,
        &["--json"],
    ));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["resumed"], 3, "{again}");
    assert_eq!(
        again["counts"]["transcriptLines"]["destination"],
        6 * 2503,
        "{again}"
    );
}

/// A destination holding data of its own is refused (it names what it holds and --force);
/// --force keeps its session and names it; a store is never copied onto itself; a source
/// at a newer schema is refused.
#[test]
fn foreign_data_and_the_store_itself_are_refused() {
    if on_postgres("foreign_data_and_the_store_itself_are_refused") {
        return;
    }
    let a = CliBench::new(CONFIG);
    a.ok(&["inject", "agent:main:shared", "from a", "--quiet"]);
    a.ok(&["inject", "agent:main:only-a", "from a", "--quiet"]);
    let other = CliBench::new(CONFIG);
    other.ok(&["inject", "agent:main:shared", "from the other", "--quiet"]);
    let (from, to) = (
        a.state.to_str().expect("utf-8"),
        other.state.to_str().expect("utf-8"),
    );

    // Progress on stderr and the verdict on stdout; none of the progress with --json.
    let fresh = other.state.parent().expect("dir").join("fresh-copy");
    let fresh = fresh.to_str().expect("utf-8");
    let plain = copy(from, fresh, &[]);
    assert!(plain.status.success());
    let (said, out) = (
        String::from_utf8_lossy(&plain.stderr),
        String::from_utf8_lossy(&plain.stdout),
    );
    assert!(said.contains("copying: 2 of 2 sessions"), "{said}");
    assert!(out.contains("copied 2 sessions of 2"), "{out}");
    assert!(
        out.contains("verified: counts match, 2 sessions compared"),
        "{out}"
    );
    let quiet = copy(from, fresh, &["--json"]);
    assert!(quiet.status.success());
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("copying"));

    let refused = copy(from, to, &[]);
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("already holds other data (1 sessions"),
        "{said}"
    );
    assert!(said.contains("--force"), "{said}");
    assert_eq!(
        db(&other.state)
            .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
            .expect("count"),
        1,
        "nothing written"
    );

    let forced = copy(from, to, &["--force", "--json"]);
    assert_eq!(forced.status.code(), Some(1), "the kept session differs");
    let report: Value = serde_json::from_slice(&forced.stdout).expect("JSON");
    assert_eq!(report["copied"], 1, "{report}");
    assert_eq!(
        report["keptKeys"],
        serde_json::json!(["agent:main:shared"]),
        "{report}"
    );
    assert_eq!(report["countsOk"], true, "{report}");
    assert_eq!(
        report["mismatches"][0]["key"], "agent:main:shared",
        "{report}"
    );

    let itself = copy(from, from, &[]);
    assert_eq!(itself.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&itself.stderr).contains("is the source itself"),
        "{}",
        String::from_utf8_lossy(&itself.stderr)
    );

    // An unreachable destination fails at once, naming it without the password.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = dead.local_addr().expect("addr").port();
    drop(dead);
    let unreachable = copy(
        from,
        &format!("postgres://me:secret@127.0.0.1:{port}/x"),
        &[],
    );
    assert_ne!(unreachable.status.code(), Some(0));
    let said = String::from_utf8_lossy(&unreachable.stderr);
    assert!(said.contains("cannot be reached"), "{said}");
    assert!(!said.contains("secret"), "{said}");

    db(&a.state)
        .execute_batch("PRAGMA user_version = 999")
        .expect("bump");
    let newer = copy(
        from,
        other
            .state
            .parent()
            .expect("dir")
            .join("fresh")
            .to_str()
            .expect("utf-8"),
        &[],
    );
    assert_ne!(newer.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&newer.stderr).contains("newer Switchboard"),
        "{}",
        String::from_utf8_lossy(&newer.stderr)
    );
}

/// `store check` on PostgreSQL: a healthy copy checks out; an orphan line and a seq gap are
/// found, the gap's session named, exit 1.
#[test]
fn store_check_on_postgres_finds_an_orphan_and_a_gap() {
    if on_postgres("store_check_on_postgres_finds_an_orphan_and_a_gap") {
        return;
    }
    let Some(cluster) = pg::cluster_or_skip("store_check_on_postgres_finds_an_orphan_and_a_gap")
    else {
        return;
    };
    let b = CliBench::new(CONFIG);
    seed(&b, 20);
    let url = pg::fresh_database(cluster);
    ok_json(copy(b.state.to_str().expect("utf-8"), &url, &["--json"]));
    let home = tempfile::tempdir().expect("tempdir");
    let healthy = ok_json(on_store(
        home.path(),
        Some(&url),
        &["store", "check", "--json"],
    ));
    assert_eq!(healthy["store"], "postgresql", "{healthy}");
    assert_eq!(healthy["ok"], true, "{healthy}");
    assert_eq!(healthy["sessions"], 3, "{healthy}");
    assert_eq!(healthy["ofDeletedSessions"]["runs"], 1, "{healthy}");
    assert_eq!(healthy["countDrift"], serde_json::json!([]), "{healthy}");

    let dbname = pg::database_of(&url);
    cluster.sql(
        dbname,
        "INSERT INTO transcript (session_id, seq, entry_id, type, line) VALUES ('gone', 0, 'e', 'message', '{}');
         DELETE FROM transcript WHERE seq = 5 AND session_id =
           (SELECT session_id FROM sessions WHERE key = 'agent:main:alpha')",
    );
    let out = on_store(home.path(), Some(&url), &["store", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("orphan transcript lines: 1"), "{text}");
    assert!(
        text.contains("transcripts with a gap or a line out of place: 1 (agent:main:alpha)"),
        "{text}"
    );
    let report: Value = serde_json::from_slice(
        &on_store(home.path(), Some(&url), &["store", "check", "--json"]).stdout,
    )
    .expect("JSON");
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["brokenSeq"]["keys"],
        serde_json::json!(["agent:main:alpha"])
    );

    // The check changes nothing: a database at another schema is reported, not migrated,
    // and an empty one gets no tables.
    cluster.sql(dbname, "UPDATE schema_version SET version = 1");
    let out = on_store(home.path(), Some(&url), &["store", "check"]);
    assert_ne!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("at schema 1"), "{said}");
    assert!(said.contains("start switchboard on it once"), "{said}");
    assert_eq!(
        cluster.sql(dbname, "SELECT version FROM schema_version"),
        "1"
    );
    let empty = pg::fresh_database(cluster);
    let out = on_store(home.path(), Some(&empty), &["store", "check"]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        cluster.sql(
            pg::database_of(&empty),
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ),
        "0"
    );
}

/// The verification reads both sides: a line changed in the destination after a copy is
/// named by session and checksum, a line missing by the line counts, and the rerun exits 1.
#[test]
fn a_destination_that_differs_fails_the_verification_naming_the_session() {
    if on_postgres("a_destination_that_differs_fails_the_verification_naming_the_session") {
        return;
    }
    let b = CliBench::new(CONFIG);
    seed(&b, 20);
    let to = tempfile::tempdir().expect("tempdir");
    let dest = to.path().join("copy");
    let (from, dest_str) = (
        b.state.to_str().expect("utf-8"),
        dest.to_str().expect("utf-8"),
    );
    assert_eq!(ok_json(copy(from, dest_str, &["--json"]))["ok"], true);
    let sid = |key: &str| -> String {
        db(&dest)
            .query_row(
                "SELECT session_id FROM sessions WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .expect("sid")
    };
    let (alpha, beta) = (sid(KEYS[0]), sid(KEYS[1]));
    db(&dest)
        .execute_batch(&format!(
            "UPDATE transcript SET line = replace(line, 'line 7', 'line 8') WHERE session_id = '{alpha}' AND seq = 9;
             DELETE FROM transcript WHERE session_id = '{beta}' AND seq = 2;"
        ))
        .expect("tamper");
    let out = copy(from, dest_str, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["mismatchesTotal"], 2, "{report}");
    assert_eq!(report["mismatches"][0]["key"], KEYS[0], "{report}");
    let what = report["mismatches"][0]["what"].as_str().unwrap_or_default();
    assert!(what.starts_with("checksum differs"), "{report}");
    assert_eq!(report["mismatches"][1]["key"], KEYS[1], "{report}");
    assert_eq!(
        report["mismatches"][1]["what"], "transcript: 3 lines in the source, 2 in the destination",
        "{report}"
    );
    assert_eq!(report["countsOk"], false, "{report}");
}
