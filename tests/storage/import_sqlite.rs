//! Import of OpenClaw's current state (2026.6 and later: one SQLite database per agent),
//! against a real OpenClaw 2026.9.6 state (`tests/fixtures/openclaw-2026.9.6-state/`, with the
//! gateway's recorded tool results in `expected/`) and a copy taken while that gateway ran
//! (`tests/fixtures/openclaw-2026.9.6-live/`, with its `-wal`). Damaged variants are made from
//! copies of the fixture; the source is checked to be byte-for-byte unchanged after imports.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::{Value, json};
use switchboard_config::{Config, Visibility};
use switchboard_engine::Engine;
use switchboard_engine::tools::ToolContext;
use switchboard_engine::transfer::{ImportReport, SkipReason, TransferError};
use switchboard_types::key::SessionKey;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6-state")
}

fn live_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6-live")
}

fn db_of(root: &Path, agent: &str) -> PathBuf {
    root.join(format!("agents/{agent}/agent/openclaw-agent.sqlite"))
}

fn config() -> Config {
    let mut c = Config::default();
    c.tools.sessions.visibility = Visibility::All;
    c.tools.agent_to_agent.enabled = true;
    c
}

fn open(state: &Path) -> Engine {
    switchboard::state_folder::open_engine(state, config()).unwrap()
}

fn ctx(engine: &Engine, requester: &str) -> ToolContext {
    ToolContext::new(engine.requester_key(requester).unwrap(), false)
}

fn key(s: &str) -> SessionKey {
    SessionKey::from_canonical(s)
}

async fn has_session(engine: &Engine, k: &str) -> bool {
    engine.store().get(&key(k)).await.unwrap().is_some()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for item in fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        let target = to.join(item.file_name());
        if item.file_type().unwrap().is_dir() {
            copy_dir(&item.path(), &target);
        } else {
            fs::copy(item.path(), target).unwrap();
        }
    }
}

/// A writable copy of the fixture's agents (the databases only).
fn fixture_copy(into: &Path) -> PathBuf {
    let root = into.join("state");
    copy_dir(&fixture().join("agents"), &root.join("agents"));
    root
}

/// Every file under `dir` with its bytes: to prove an import wrote nothing there.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in fs::read_dir(&d).unwrap() {
            let item = item.unwrap();
            if item.file_type().unwrap().is_dir() {
                stack.push(item.path());
            } else {
                out.insert(item.path(), fs::read(item.path()).unwrap());
            }
        }
    }
    out
}

/// (session_key, current_session_id, entry_json) of every node, read with SQLite directly.
fn nodes(db: &Path) -> Vec<(String, String, String)> {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c
        .prepare("SELECT session_key, current_session_id, entry_json FROM session_nodes ORDER BY session_key")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The `event_json` rows of one transcript, in seq order (compressed rows have none).
fn event_lines(db: &Path, session_id: &str) -> Vec<String> {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c
        .prepare("SELECT event_json FROM transcript_events WHERE session_id = ?1 AND event_json IS NOT NULL ORDER BY seq")
        .unwrap();
    stmt.query_map([session_id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

async fn export_lines(engine: &Engine, k: &str) -> Vec<String> {
    let (_, out) = engine.export_session_jsonl(k, Vec::new()).await.unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// (role, text) of each message of a `sessions_history` result.
fn message_texts(v: &Value) -> Vec<(String, String)> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or("").to_string(), text)
        })
        .collect()
}

fn expected(name: &str) -> Value {
    let text = fs::read_to_string(fixture().join(format!("expected/{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every session of `db` is imported with its entry (every field) and its lines in order.
async fn assert_same_as_rows(engine: &Engine, db: &Path) -> usize {
    let mut lines = 0;
    for (k, sid, entry_json) in nodes(db) {
        let s = engine
            .store()
            .get(&key(&k))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{k} not imported"));
        assert_eq!(s.entry.session_id, sid, "{k}");
        let source: Value = serde_json::from_str(&entry_json).unwrap();
        let stored = serde_json::to_value(&s.entry).unwrap();
        for (field, value) in source.as_object().unwrap() {
            assert_eq!(stored.get(field), Some(value), "{k}: entry field {field}");
        }
        let rows = event_lines(db, &sid);
        let got: Vec<Value> = export_lines(engine, &k)
            .await
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let want: Vec<Value> = rows
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got, want, "{k}: transcript lines in seq order");
        lines += rows.len();
    }
    lines
}

#[tokio::test]
async fn imports_the_real_2026_9_6_state_whole_and_writes_nothing_there() {
    let before = snapshot(&fixture());
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine.import_openclaw(&fixture()).await.unwrap();
    assert_eq!(report.sessions_imported, 18, "{report:#?}");
    assert_eq!(report.skipped, BTreeMap::new(), "{report:#?}");
    assert_eq!(report.warnings, Vec::<String>::new());
    let mut lines = 0;
    for agent in ["main", "work"] {
        lines += assert_same_as_rows(&engine, &db_of(&fixture(), agent)).await;
    }
    assert_eq!(lines, 118 + 63);
    assert_eq!(report.lines_imported, lines);
    // The spawned child and the archived session keep what makes them so.
    let s12 = engine
        .store()
        .get(&key("agent:work:s12"))
        .await
        .unwrap()
        .unwrap();
    assert!(s12.entry.archived_at.is_some());
    let g42 = engine
        .store()
        .get(&key("agent:main:discord:group:g-42"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g42.kind.as_str(), "group");
    assert_eq!(
        snapshot(&fixture()),
        before,
        "the source folder was written"
    );

    // Again: everything is already there.
    let again = engine.import_openclaw(&fixture()).await.unwrap();
    assert_eq!(again.sessions_imported, 0);
    assert_eq!(again.sessions_present, 18);
}

#[tokio::test]
async fn one_agent_folder_is_accepted() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine
        .import_openclaw(&fixture().join("agents/work/agent"))
        .await
        .unwrap();
    assert_eq!(report.sessions_imported, 7, "{report:#?}");
    assert_same_as_rows(&engine, &db_of(&fixture(), "work")).await;
    assert!(!has_session(&engine, "agent:main:main").await);
}

/// Fields of our `sessions_list` rows that equal the gateway's for the same state; the
/// others (h-shape's part of issue 15) are printed, not asserted.
#[tokio::test]
async fn sessions_list_matches_the_gateway_on_the_fields_both_have() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    engine.import_openclaw(&fixture()).await.unwrap();
    let want = expected("sessions_list-default");
    let got = engine
        .call_tool("sessions_list", &json!({}), &ctx(&engine, "main"))
        .await
        .unwrap();
    let rows = |v: &Value| -> BTreeMap<String, Value> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["key"].as_str().unwrap().to_string(), r.clone()))
            .collect()
    };
    let (want_rows, got_rows) = (rows(&want["result"]), rows(&got));
    assert_eq!(
        got_rows.keys().collect::<Vec<_>>(),
        want_rows.keys().collect::<Vec<_>>(),
        "the same 17 unarchived sessions"
    );
    let mut differing: BTreeMap<String, usize> = BTreeMap::new();
    for (k, want) in &want_rows {
        let got = &got_rows[k];
        for (field, value) in want.as_object().unwrap() {
            let Some(ours) = got.get(field) else { continue };
            if ours != value {
                *differing.entry(field.clone()).or_default() += 1;
                eprintln!("{k}.{field}: gateway {value} / ours {ours}");
            }
        }
        for field in ["key", "sessionId", "agentId", "updatedAt", "label", "kind"] {
            assert_eq!(got.get(field), want.get(field), "{k}.{field}");
        }
    }
    eprintln!("fields differing from the gateway: {differing:?}");
}

/// Our history of an imported session carries the gateway's messages, in its order.
#[tokio::test]
async fn sessions_history_matches_the_gateway_messages() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    engine.import_openclaw(&fixture()).await.unwrap();
    for name in [
        "sessions_history-pingpong-target-includeTools",
        "sessions_history-pingpong-requester-includeTools",
        "sessions_history-skip-target-includeTools",
        "sessions_history-spawned-child-includeTools",
    ] {
        let want = expected(name);
        let k = want["args"]["sessionKey"].as_str().unwrap();
        let got = engine
            .call_tool(
                "sessions_history",
                &json!({"sessionKey": k, "includeTools": true, "includeSilent": true}),
                &ctx(&engine, "main"),
            )
            .await
            .unwrap();
        let (want_msgs, got_msgs) = (message_texts(&want["result"]), message_texts(&got));
        // Every message the gateway returned is in ours, in the same order (ours may still
        // hold silent replies the gateway hides: that is h-shape's part).
        let mut at = 0;
        for m in &want_msgs {
            // By text: 2026.9.6 returns inter-session inputs as role "assistant" without
            // their preamble, where ours keep the stored role "user" (h-shape's part).
            let found = got_msgs[at..].iter().position(|g| g.1.ends_with(&m.1));
            let Some(i) = found else {
                panic!("{name}: gateway message {m:?} not found in order in ours: {got_msgs:#?}");
            };
            at += i + 1;
        }
        assert_eq!(got["sessionKey"], want["result"]["sessionKey"], "{name}");
    }
}

#[tokio::test]
async fn a_copy_taken_while_the_gateway_ran_is_read_with_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("live");
    copy_dir(&live_fixture(), &source);
    let before = snapshot(&source);
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine.import_openclaw(&source).await.unwrap();
    // 6 sessions in the database file, the 7th (s12) only in the WAL.
    assert_eq!(report.sessions_imported, 7, "{report:#?}");
    assert!(
        engine
            .store()
            .get(&key("agent:work:s12"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        report.warnings.iter().any(|w| w.contains("private copy")),
        "{report:#?}"
    );
    assert_eq!(report.lines_imported, 63);
    // Nothing was written or created beside the source: no -shm, same bytes.
    assert_eq!(snapshot(&source), before);
}

#[tokio::test]
async fn a_gateway_holding_uncheckpointed_rows_is_read_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let db = db_of(&root, "work");
    // The "gateway": WAL mode, no checkpoints, one committed new session and one not yet.
    let gateway = Connection::open(&db).unwrap();
    let mode: String = gateway
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    gateway
        .execute_batch("PRAGMA wal_autocheckpoint=0")
        .unwrap();
    let add = |k: &str, sid: &str| {
        format!(
            "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at)
               VALUES ('{k}', '{sid}', '{{\"sessionId\":\"{sid}\",\"updatedAt\":1795439999999}}', 1795439999999);
             INSERT INTO session_windows (session_id, session_key, created_at, updated_at)
               VALUES ('{sid}', '{k}', 1, 1);
             INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES
               ('{sid}', 0, '{{\"type\":\"session\",\"version\":4,\"id\":\"{sid}\"}}', 1),
               ('{sid}', 1, '{{\"type\":\"message\",\"id\":\"m1\",\"message\":{{\"role\":\"user\",\"content\":\"in the wal\"}}}}', 1);"
        )
    };
    gateway
        .execute_batch(&add("agent:work:walonly", "wal-only-1"))
        .unwrap();
    gateway.execute_batch("BEGIN").unwrap();
    gateway
        .execute_batch(&add("agent:work:uncommitted", "uncommitted-1"))
        .unwrap();
    assert!(db.with_extension("sqlite-wal").exists());
    let wal_before = fs::read(db.with_extension("sqlite-wal")).unwrap();
    let db_before = fs::read(&db).unwrap();

    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine
        .import_openclaw(&root.join("agents/work/agent"))
        .await
        .unwrap();
    assert_eq!(report.sessions_imported, 8, "{report:#?}");
    assert_eq!(
        export_lines(&engine, "agent:work:walonly").await.len(),
        2,
        "the committed rows still in the WAL"
    );
    assert!(
        engine
            .store()
            .get(&key("agent:work:uncommitted"))
            .await
            .unwrap()
            .is_none(),
        "an open transaction is not seen"
    );
    assert_eq!(fs::read(&db).unwrap(), db_before);
    assert_eq!(
        fs::read(db.with_extension("sqlite-wal")).unwrap(),
        wal_before
    );
    gateway.execute_batch("ROLLBACK").unwrap();
}

#[tokio::test]
async fn a_locked_database_fails_clearly_with_nothing_imported() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let holder = Connection::open(db_of(&root, "work")).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let err = tokio::time::timeout(Duration::from_secs(60), engine.import_openclaw(&root))
        .await
        .expect("the import gives up on a lock within 60 s")
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TransferError::OpenClawDb { .. }), "{err:?}");
    assert!(msg.contains("locked") && msg.contains("work"), "{msg}");
    // Checked before writing: not even agent main's sessions came in.
    assert!(!has_session(&engine, "agent:main:main").await);
    holder.execute_batch("ROLLBACK").unwrap();
}

#[tokio::test]
async fn a_newer_schema_version_is_refused_with_nothing_imported() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    Connection::open(db_of(&root, "work"))
        .unwrap()
        .execute_batch("PRAGMA user_version = 24")
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let err = engine.import_openclaw(&root).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("24") && msg.contains("23"), "{msg}");
    assert!(!has_session(&engine, "agent:main:main").await);
}

#[tokio::test]
async fn missing_tables_and_columns_are_named() {
    for (sql, named) in [
        ("DROP TABLE transcript_events", "transcript_events"),
        (
            "ALTER TABLE session_nodes DROP COLUMN entry_json",
            "entry_json",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = fixture_copy(dir.path());
        let c = Connection::open(db_of(&root, "main")).unwrap();
        // Indexes and triggers naming the column go first, as a schema change would do.
        c.execute_batch(
            "DROP TRIGGER session_nodes_canonical_pending_after_update;
             DROP TRIGGER session_nodes_entry_valid_after_entry_update;",
        )
        .unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        let state = tempfile::tempdir().unwrap();
        let engine = open(state.path());
        let err = engine.import_openclaw(&root).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(named) && msg.contains("main"), "{msg}");
        assert!(
            engine
                .store()
                .get(&key("agent:work:s1"))
                .await
                .unwrap()
                .is_none()
        );
    }
}

#[tokio::test]
async fn a_truncated_database_never_gives_half_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let intact = fixture();
    let db = db_of(&root, "main");
    let len = fs::metadata(&db).unwrap().len();
    for keep in [len / 2, len / 8, 4096, 50] {
        let f = fs::OpenOptions::new().write(true).open(&db).unwrap();
        f.set_len(keep).unwrap();
        drop(f);
        let state = tempfile::tempdir().unwrap();
        let engine = open(state.path());
        match engine.import_openclaw(&root).await {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("main/agent/openclaw-agent.sqlite"), "{msg}");
                assert!(
                    engine
                        .store()
                        .get(&key("agent:work:s1"))
                        .await
                        .unwrap()
                        .is_none()
                );
            }
            Ok(report) => {
                // Whatever came in is whole: its lines equal the intact database's rows.
                let skipped = report.skipped(SkipReason::UnreadableRows)
                    + report.skipped(SkipReason::UnreadableEntry);
                let mut imported = 0;
                for (k, sid, _) in nodes(&db_of(&intact, "main")) {
                    if engine.store().get(&key(&k)).await.unwrap().is_none() {
                        continue;
                    }
                    imported += 1;
                    let want: Vec<Value> = event_lines(&db_of(&intact, "main"), &sid)
                        .iter()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect();
                    let got: Vec<Value> = export_lines(&engine, &k)
                        .await
                        .iter()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect();
                    assert_eq!(got, want, "{keep} bytes kept: {k}");
                }
                assert_eq!(imported + skipped, 11, "{keep} bytes kept: {report:#?}");
            }
        }
    }
}

/// Make one agent database of a fixture copy, apply `sql`, import the copy.
async fn import_altered(sql: &str) -> (tempfile::TempDir, Engine, ImportReport, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let c = Connection::open(db_of(&root, "main")).unwrap();
    c.execute_batch(sql).unwrap();
    drop(c);
    let state = dir.path().join("switchboard");
    let engine = open(&state);
    let report = engine.import_openclaw(&root).await.unwrap();
    (dir, engine, report, root)
}

#[tokio::test]
async fn an_entry_that_is_not_json_skips_that_session_only() {
    let (_dir, engine, report, _) = import_altered(
        "UPDATE session_nodes SET entry_json = '{\"sessionId\": broken' WHERE session_key = 'agent:main:s3'",
    )
    .await;
    assert_eq!(report.sessions_imported, 17, "{report:#?}");
    assert_eq!(report.skipped(SkipReason::UnreadableEntry), 1);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("agent:main:s3") && w.contains("not JSON")),
        "{report:#?}"
    );
    assert!(
        engine
            .store()
            .get(&key("agent:main:s3"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn missing_transcript_rows_are_said() {
    let (_dir, engine, report, root) = import_altered(
        "DELETE FROM transcript_events WHERE session_id =
           (SELECT current_session_id FROM session_nodes WHERE session_key = 'agent:main:s1');
         DELETE FROM transcript_events WHERE seq = 3 AND session_id =
           (SELECT current_session_id FROM session_nodes WHERE session_key = 'agent:main:s2');",
    )
    .await;
    assert_eq!(report.sessions_imported, 18, "{report:#?}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("agent:main:s1") && w.contains("no transcript rows")),
        "{report:#?}"
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("1 seq numbers missing")),
        "{report:#?}"
    );
    // s1 has only a synthesised header; s2 the rows that are there, in order.
    let s1 = export_lines(&engine, "agent:main:s1").await;
    assert_eq!(s1.len(), 1);
    assert!(s1[0].contains("\"type\":\"session\""));
    let sid = engine
        .store()
        .get(&key("agent:main:s2"))
        .await
        .unwrap()
        .unwrap()
        .entry
        .session_id;
    assert_eq!(
        export_lines(&engine, "agent:main:s2").await,
        event_lines(&db_of(&root, "main"), &sid)
    );
}

#[tokio::test]
async fn a_50_mb_event_and_a_compressed_one_are_skipped_and_counted() {
    let big = format!(
        "{{\"type\":\"custom\",\"data\":\"{}\"}}",
        "x".repeat(50 << 20)
    );
    let (_dir, engine, report, root) = import_altered(&format!(
        "PRAGMA ignore_check_constraints = 1;
         INSERT INTO transcript_events (session_id, seq, event_json, created_at)
           SELECT current_session_id, 1000, '{big}', 1 FROM session_nodes WHERE session_key = 'agent:main:main';
         INSERT INTO transcript_events (session_id, seq, event_zstd, event_utf8_bytes, navigation_json, created_at)
           SELECT current_session_id, 1001, x'28b52ffd', 10, '{{}}', 1 FROM session_nodes WHERE session_key = 'agent:main:main';
         INSERT INTO transcript_events (session_id, seq, event_json, created_at)
           SELECT current_session_id, 1002, '{{\"type\":\"custom\",\"after\":true}}', 1 FROM session_nodes WHERE session_key = 'agent:main:main';"
    ))
    .await;
    assert_eq!(report.sessions_imported, 18, "{report:#?}");
    assert_eq!(report.skipped(SkipReason::LineTooLong), 1, "{report:#?}");
    assert_eq!(report.skipped(SkipReason::CompressedLine), 1, "{report:#?}");
    let lines = export_lines(&engine, "agent:main:main").await;
    let rows = event_lines(
        &db_of(&root, "main"),
        &nodes(&db_of(&root, "main"))
            .into_iter()
            .find(|n| n.0 == "agent:main:main")
            .unwrap()
            .1,
    );
    // All text rows but the 50 MB one (the compressed row has no event_json).
    assert_eq!(lines.len(), rows.len() - 1);
    assert!(lines.last().unwrap().contains("\"after\":true"));
}

#[tokio::test]
async fn lock_files_named_sqlite_are_not_taken_for_databases() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    for name in [
        "openclaw-agent.sqlite.generation-lock.sqlite",
        "openclaw-agent.sqlite.reindex-lock.sqlite",
    ] {
        fs::write(root.join("agents/main/agent").join(name), b"lock").unwrap();
    }
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(report.sessions_imported, 18, "{report:#?}");
    assert!(report.warnings.is_empty(), "{report:#?}");
}

#[tokio::test]
async fn both_layouts_in_one_folder_import_both_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let legacy =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-legacy/agents");
    for agent in ["main", "work"] {
        copy_dir(
            &legacy.join(agent).join("sessions"),
            &root.join("agents").join(agent).join("sessions"),
        );
    }
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine.import_openclaw(&root).await.unwrap();
    // 18 from SQLite; the legacy s2 and s6 keys of both agents: s2 exists in SQLite too.
    assert!(
        report.warnings.iter().any(|w| w.contains("both layouts")),
        "{report:#?}"
    );
    // work:s6 is new; the other three legacy keys are here already under another sessionId
    // (OpenClaw started them afresh), so the merge leaves them and says why.
    assert_eq!(report.sessions_imported, 18 + 1, "{report:#?}");
    assert_eq!(report.skipped(SkipReason::OtherSession), 3, "{report:#?}");
    assert!(
        engine
            .store()
            .get(&key("agent:main:s6"))
            .await
            .unwrap()
            .is_some()
    );
    // A key in both keeps its SQLite (newer) transcript.
    assert_same_as_rows(&engine, &db_of(&root, "work")).await;
}

#[tokio::test]
async fn a_symlinked_database_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let elsewhere = dir.path().join("elsewhere.sqlite");
    let db = db_of(&root, "work");
    fs::rename(&db, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &db).unwrap();
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(report.sessions_imported, 11, "{report:#?}");
    assert_eq!(report.skipped(SkipReason::Symlink), 1, "{report:#?}");
}

// Re-importing a SQLite state after its owner kept using OpenClaw (issue 15, item 2): the
// same merge as a legacy folder's (tests/storage/import_merge.rs), on copies of the real fixture.

const S1: &str = "agent:work:s1";
/// A time after every `updatedAt` of the fixture (and of anything done here while testing).
const LATER: i64 = 1_895_440_000_000;

/// Every session of the fixture as the store holds it: entry and lines.
async fn store_state(engine: &Engine, root: &Path) -> BTreeMap<String, (Value, Vec<String>)> {
    let mut out = BTreeMap::new();
    for agent in ["main", "work"] {
        for (k, _, _) in nodes(&db_of(root, agent)) {
            let s = engine.store().get(&key(&k)).await.unwrap().unwrap();
            let entry = serde_json::to_value(&s.entry).unwrap();
            out.insert(k.clone(), (entry, export_lines(engine, &k).await));
        }
    }
    out
}

/// OpenClaw continuing session `k` of agent work in the copy's database: one more event
/// (the next seq, a new line id) and, with `entry_at`, its entry moved on to that time with
/// a new label.
fn openclaw_continues(root: &Path, k: &str, id: &str, text: &str, entry_at: Option<i64>) {
    let c = Connection::open(db_of(root, "work")).unwrap();
    c.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at)
         SELECT current_session_id,
                (SELECT max(seq) + 1 FROM transcript_events e WHERE e.session_id = n.current_session_id),
                json_object('type', 'message', 'id', ?2, 'parentId', NULL,
                            'timestamp', '2030-01-24T00:00:00.000Z',
                            'message', json_object('role', 'user', 'content', ?3)),
                1895440000000
           FROM session_nodes n WHERE session_key = ?1",
        rusqlite::params![k, id, text],
    )
    .unwrap();
    if let Some(at) = entry_at {
        c.execute(
            "UPDATE session_nodes
                SET entry_json = json_set(entry_json, '$.updatedAt', ?2, '$.label', 'renamed in openclaw'),
                    updated_at = ?2
              WHERE session_key = ?1",
            rusqlite::params![k, at],
        )
        .unwrap();
    }
}

/// The texts of session `k`'s messages as `sessions_history` shows them.
async fn history(engine: &Engine, k: &str) -> Vec<String> {
    let got = engine
        .call_tool(
            "sessions_history",
            &json!({"sessionKey": k}),
            &ctx(engine, "main"),
        )
        .await
        .unwrap();
    message_texts(&got).into_iter().map(|m| m.1).collect()
}

fn counts(r: &ImportReport) -> (usize, usize, usize, usize, usize) {
    (
        r.sessions_imported,
        r.sessions_updated,
        r.sessions_present,
        r.lines_appended,
        r.entries_updated,
    )
}

/// A fixture copy imported once into a fresh store.
async fn imported_copy() -> (tempfile::TempDir, PathBuf, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let engine = open(&dir.path().join("switchboard"));
    let first = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(first.sessions_imported, 18, "{first:#?}");
    (dir, root, engine)
}

#[tokio::test]
async fn a_second_sqlite_import_in_a_row_changes_nothing() {
    let (_dir, root, engine) = imported_copy().await;
    let before = store_state(&engine, &root).await;
    let again = engine.import_openclaw(&root).await.unwrap();
    assert!(again.changed_nothing(), "{again:#?}");
    assert_eq!(counts(&again), (0, 0, 18, 0, 0), "{again:#?}");
    assert!(again.conflicts.is_empty(), "{again:#?}");
    assert_eq!(again.warnings, Vec::<String>::new());
    assert_eq!(store_state(&engine, &root).await, before);
}

#[tokio::test]
async fn events_added_in_openclaw_are_appended_and_its_newer_entry_applied() {
    let (_dir, root, engine) = imported_copy().await;
    openclaw_continues(&root, S1, "f0000001", "still there?", Some(LATER));
    let report = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(counts(&report), (0, 1, 17, 1, 1), "{report:#?}");
    assert!(report.conflicts.is_empty(), "{report:#?}");
    assert_eq!(report.warnings, Vec::<String>::new());
    // The store holds exactly the source's entries and rows again, the new one last.
    assert_same_as_rows(&engine, &db_of(&root, "work")).await;
    let s1 = engine.store().get(&key(S1)).await.unwrap().unwrap();
    assert_eq!(
        history(&engine, S1).await.last().map(String::as_str),
        Some("still there?")
    );
    assert_eq!(s1.entry.label.as_deref(), Some("renamed in openclaw"));
    assert_eq!(s1.entry.updated_at, LATER);

    // An event alone (the entry as it was) is seen too: the transcript's stamp moved on.
    openclaw_continues(&root, S1, "f0000002", "and now?", None);
    let report = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(counts(&report), (0, 1, 17, 1, 0), "{report:#?}");
    assert_eq!(
        history(&engine, S1).await.last().map(String::as_str),
        Some("and now?")
    );

    // Then nothing is new.
    let before = store_state(&engine, &root).await;
    let again = engine.import_openclaw(&root).await.unwrap();
    assert!(again.changed_nothing(), "{again:#?}");
    assert_eq!(counts(&again), (0, 0, 18, 0, 0), "{again:#?}");
    assert_eq!(store_state(&engine, &root).await, before);
}

#[tokio::test]
async fn a_session_continued_here_and_in_openclaw_is_a_conflict_and_kept_as_is() {
    let (_dir, root, engine) = imported_copy().await;
    engine
        .store()
        .append_message(
            &key(S1),
            json!({"role": "user", "content": "said in switchboard"}),
        )
        .await
        .unwrap();
    let here = export_lines(&engine, S1).await;
    let label = engine
        .store()
        .get(&key(S1))
        .await
        .unwrap()
        .unwrap()
        .entry
        .label;
    openclaw_continues(&root, S1, "f0000001", "said in openclaw", Some(LATER));
    // Another session continued only there still comes in.
    openclaw_continues(
        &root,
        "agent:work:s2",
        "f0000002",
        "only there",
        Some(LATER),
    );
    let report = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:#?}");
    assert!(
        report.conflicts[0].starts_with("agent:work:s1:")
            && report.conflicts[0].contains("continued on both sides"),
        "{report:#?}"
    );
    assert_eq!(counts(&report), (0, 1, 16, 1, 1), "{report:#?}");
    assert_eq!(export_lines(&engine, S1).await, here);
    assert_eq!(
        engine
            .store()
            .get(&key(S1))
            .await
            .unwrap()
            .unwrap()
            .entry
            .label,
        label
    );
    assert_eq!(
        history(&engine, S1).await.last().map(String::as_str),
        Some("said in switchboard")
    );
    assert_eq!(
        history(&engine, "agent:work:s2")
            .await
            .last()
            .map(String::as_str),
        Some("only there")
    );

    // Still a conflict the next time: nothing was forgotten.
    let again = engine.import_openclaw(&root).await.unwrap();
    assert_eq!(again.conflicts.len(), 1, "{again:#?}");
    assert_eq!(export_lines(&engine, S1).await, here);
}

#[tokio::test]
async fn an_entry_changed_here_is_kept_and_the_new_events_still_come_in() {
    let (_dir, root, engine) = imported_copy().await;
    engine
        .store()
        .patch(&key(S1), |e| {
            e.send_policy = Some("deny".into());
            Ok(())
        })
        .await
        .unwrap();
    openclaw_continues(&root, S1, "f0000001", "from openclaw", Some(LATER));
    let report = engine.import_openclaw(&root).await.unwrap();
    assert!(report.conflicts.is_empty(), "{report:#?}");
    assert_eq!(counts(&report), (0, 1, 17, 1, 0), "{report:#?}");
    let w = report.warnings.join("\n");
    assert!(
        w.contains("agent:work:s1") && w.contains("changed here"),
        "{w}"
    );
    let s1 = engine.store().get(&key(S1)).await.unwrap().unwrap();
    assert_eq!(s1.entry.send_policy.as_deref(), Some("deny"));
    assert_ne!(s1.entry.label.as_deref(), Some("renamed in openclaw"));
    assert_eq!(
        history(&engine, S1).await.last().map(String::as_str),
        Some("from openclaw")
    );
}

#[test]
fn the_command_imports_a_2026_9_6_state_folder() {
    let bench = common::CliBench::new("{}");
    let out = bench.run(&["import-openclaw", fixture().to_str().unwrap()]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(
        stdout.trim(),
        "imported 18 new sessions (181 lines); updated 0 (0 lines appended, 0 entries replaced); 0 unchanged; 0 conflicts",
        "{stderr}"
    );
    // Again: the merge finds nothing new, and says so.
    let again = bench.run(&["import-openclaw", fixture().to_str().unwrap()]);
    let (stdout2, stderr2) = (
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr),
    );
    assert!(again.status.success(), "{stdout2}{stderr2}");
    assert_eq!(
        stdout2.trim(),
        "imported 0 new sessions (0 lines); updated 0 (0 lines appended, 0 entries replaced); 18 unchanged; 0 conflicts\nnothing changed",
        "{stderr2}"
    );
    assert!(!stderr2.contains("warning"), "{stderr2}");
    let out = bench.run(&["sessions", "export", "agent:work:s2"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("PINGPONG work as Agent 2"));
}

/// The engine reads OpenClaw's SQLite state only through the reader it is given
/// (`Engine::with_openclaw_dbs`): one built over a bare `Store` refuses that layout by name,
/// before writing anything, instead of reaching for a database library of its own.
#[tokio::test]
async fn an_engine_without_a_sqlite_reader_refuses_that_layout_clearly() {
    use std::sync::Arc;
    use switchboard_engine::instance::Instance;
    use switchboard_store_sqlite::{SqliteStore, Storage};

    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let state = tempfile::tempdir().unwrap();
    let storage = Storage::open(state.path()).unwrap();
    let engine = Engine::new(
        config(),
        Arc::new(SqliteStore::new(storage)),
        state.path(),
        Instance::unclaimed(),
    );
    let err = engine.import_openclaw(&root).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TransferError::OpenClawDb { .. }), "{err:?}");
    assert!(
        msg.contains("openclaw-agent.sqlite") && msg.contains("without a reader"),
        "{msg}"
    );
    assert!(!has_session(&engine, "agent:main:main").await);
}
