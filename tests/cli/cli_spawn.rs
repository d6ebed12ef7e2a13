//! Sub-agents through the real binary: `inject` waits for a spawned child and its announce;
//! a process that dies between a child's end and its announce delivers it on the next start,
//! exactly once; a child killed mid-run is announced as failed after the restart.

use crate::common;

use std::time::Duration;

use common::CliBench;
use serde_json::{Value, json};

const CONFIG: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", subagents: { allowAgents: ["work"] }, script: [
      { when: { step: "message", text: "/^delegate (.*)$/" },
        tools: [{ name: "sessions_spawn", args: { task: "$1", agentId: "work", label: "helper" } }],
        reply: "spawned {{result.childSessionKey}}" },
      { when: { step: "subagent-announce" }, reply: "noted" },
      { reply: "main: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "subagent", text: "slow" }, delayMs: 5000, reply: "slow result" },
      { when: { step: "subagent" }, reply: "RESULT for {{text}}", tokens: { in: 10, out: 5 } },
    ] },
  ] },
}"#;

fn announces(b: &CliBench) -> Vec<String> {
    let h: Value = b.json(&[
        "tool",
        "sessions_history",
        &json!({ "sessionKey": "agent:main:main", "limit": 100 }).to_string(),
    ]);
    h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provenance"]["sourceTool"] == "subagent_announce")
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn inject_waits_for_the_child_and_its_announce() {
    let b = CliBench::new(CONFIG);
    let out = b.run(&["inject", "agent:main:main", "delegate count the files"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("spawned agent:work:subagent:"),
        "{stdout}"
    );
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("↳ agent:main:main spawned agent:work:subagent:"),
        "{progress}"
    );
    assert!(
        progress.contains("sub-agent announce to agent:main:main: no_route"),
        "{progress}"
    );
    let a = announces(&b);
    assert_eq!(a.len(), 1);
    assert!(a[0].starts_with("Sub-agent \"helper\" finished.\nStatus: completed\nResult: RESULT for count the files\n"), "{}", a[0]);
}

#[test]
fn an_announce_interrupted_by_a_crash_is_delivered_once_on_the_next_start() {
    let b = CliBench::new(CONFIG);
    // Dies right after the announce is decided and persisted, before it is delivered.
    let out = b
        .command(&["inject", "agent:main:main", "delegate the job"])
        .env("SWITCHBOARD_FAILPOINT", "spawn-before-announce")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(86),
        "the failpoint stops the process"
    );
    let db = b.state.join("switchboard.db");
    let state = |col: &str| -> String {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(&format!("SELECT {col} FROM spawns"), [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap()
    };
    assert_eq!(
        (state("status"), state("announce_state")),
        ("ended".into(), "pending".into())
    );
    // Read the store directly: any command (even `tool sessions_history`) is a start that
    // resumes, and may deliver the announce before its own read.
    let delivered = || -> i64 {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM transcript WHERE line LIKE '%\"sourceTool\":\"subagent_announce\"%'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(delivered(), 0, "not delivered before the crash");
    // Any later start delivers it: here, an unrelated message.
    b.ok(&["inject", "agent:main:main", "hello", "--quiet"]);
    assert_eq!(delivered(), 1);
    assert_eq!(announces(&b).len(), 1);
    assert_eq!(state("status"), "done");
    // And never again.
    b.ok(&["inject", "agent:main:main", "hello again", "--quiet"]);
    b.ok(&["tool", "sessions_list"]);
    assert_eq!(announces(&b).len(), 1);
}

#[test]
fn a_child_killed_mid_run_is_announced_as_failed_after_the_restart() {
    let b = CliBench::new(CONFIG);
    let mut child = b
        .command(&["inject", "agent:main:main", "delegate slow work", "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let db = b.state.join("switchboard.db");
    let running = || {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT count(*) FROM spawns WHERE status = 'running'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .is_ok_and(|n| n == 1)
    };
    let mut waited = 0;
    while !running() {
        assert!(waited < 300, "the child never started");
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    b.ok(&["inject", "agent:main:main", "are you there", "--quiet"]);
    let a = announces(&b);
    assert_eq!(a.len(), 1, "{a:?}");
    assert!(
        a[0].contains("\nStatus: failed: the engine stopped while this run was in progress\n"),
        "{}",
        a[0]
    );
}
