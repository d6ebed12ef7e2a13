//! `switchboard store check` (issue 28 item 4, on the SQLite store): a healthy folder checks
//! out (exit 0, as text and JSON), orphan transcript lines and a damaged database are found
//! (exit 1), and a folder that is not there is a clear error that creates nothing.

use crate::common::CliBench;

use serde_json::Value;

const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "ok" } ] } ] } }"#;

#[test]
fn a_healthy_store_checks_out_and_orphans_are_found() {
    let b = CliBench::new(CONFIG);
    b.ok(&["inject", "agent:main:main", "hello", "--quiet"]);
    let text = b.ok(&["store", "check"]);
    assert!(text.contains("integrity: ok"), "{text}");
    assert!(text.contains("1 session, "), "{text}");
    assert!(text.contains("orphan transcript lines: 0"), "{text}");
    let report: Value = serde_json::from_str(&b.ok(&["store", "check", "--json"])).expect("JSON");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["integrity"], serde_json::json!(["ok"]));
    assert_eq!(report["sessions"], 1);

    // Lines of a session that is not there (an import cut short leaves such).
    let db = b.state.join("switchboard.db");
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute(
        "INSERT INTO transcript (session_id, seq, entry_id, type, line) VALUES ('gone', 1, 'e', 'message', '{}')",
        [],
    )
    .expect("insert");
    drop(conn);
    let out = b.run(&["store", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("orphan transcript lines: 1"), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the store has problems"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_damaged_store_fails_the_check_and_a_missing_one_is_not_made() {
    let b = CliBench::new(CONFIG);
    for i in 0..50 {
        b.ok(&[
            "inject",
            &format!("agent:main:s{i}"),
            &"x".repeat(2000),
            "--quiet",
        ]);
    }
    // Fold the log in, then damage pages in the middle of the file.
    let db = b.state.join("switchboard.db");
    {
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("checkpoint");
    }
    let mut bytes = std::fs::read(&db).expect("read");
    let len = bytes.len();
    assert!(len > 64 * 1024, "{len}");
    for b in &mut bytes[len / 2..len / 2 + 8192] {
        *b = 0x5a;
    }
    std::fs::write(&db, &bytes).expect("write");
    let out = b.run(&["store", "check"]);
    assert_ne!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!said.contains("integrity: ok"), "{said}");

    let missing = CliBench::new(CONFIG);
    let out = missing.run(&["store", "check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no state folder at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!missing.state.exists());
}
