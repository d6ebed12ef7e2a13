//! The store under stress a user can cause: two processes on one state folder, a writer
//! killed mid-stream, a database from a newer build, a state folder that cannot be created.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::inbound::Inbound;
use switchboard_types::api::{SessionsApi, ToolCall};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// An empty config beside the state folder, so the user's own config never leaks in.
fn empty_config(state: &Path) -> std::path::PathBuf {
    let path = state.with_extension("config.json5");
    if !path.exists() {
        std::fs::write(&path, "{}").unwrap();
    }
    path
}

fn switchboard(state: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("SWITCHBOARD_STATE_DIR", state)
        .env("SWITCHBOARD_CONFIG", empty_config(state))
        .env_remove("RUST_BACKTRACE");
    crate::common::store_env(&mut c, state);
    c
}

/// `sessions_history` of `key` as its own agent, through `SessionsApi` (as a front end asks).
async fn history(engine: &Engine, key: &str) -> Value {
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    let call = ToolCall {
        tool: "sessions_history".into(),
        params: json!({"sessionKey": key, "limit": 1000}),
        requester: key.into(),
        sandboxed: false,
    };
    api.call_tool(call).await.unwrap().result
}

/// Every message text in a session, oldest first, read as the owner's agent would.
async fn texts(engine: &Engine, key: &str) -> Vec<String> {
    let r = history(engine, key).await;
    r["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages in {r}"))
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_and_an_embedded_engine_write_one_folder() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // The "console": an engine open in this process for the whole test.
    let engine = crate::common::open_engine(&state, Config::default()).unwrap();
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let state = state.clone();
            std::thread::spawn(move || {
                for i in 0..15 {
                    let out = switchboard(&state)
                        .args(["inject", "agent:main:main", &format!("{name}{i}")])
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "inject failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for i in 0..15 {
        engine
            .record_inbound(
                &engine.requester_key("main").unwrap(),
                &format!("c{i}"),
                &Inbound::default(),
            )
            .await
            .unwrap();
    }
    for w in writers {
        w.join().unwrap();
    }
    let got = texts(&engine, "agent:main:main").await;
    assert_eq!(
        got.len(),
        45,
        "every write from every process landed: {got:?}"
    );
    for prefix in ["a", "b", "c"] {
        let mine: Vec<_> = got
            .iter()
            .filter(|t| t.starts_with(prefix))
            .cloned()
            .collect();
        let expected: Vec<_> = (0..15).map(|i| format!("{prefix}{i}")).collect();
        assert_eq!(mine, expected, "each writer's messages stay in order");
    }
    // The transcript is one chain: every line's parentId is the previous line's id.
    let r = history(&engine, "main").await;
    let seqs: Vec<i64> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["__openclaw"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=45).collect::<Vec<_>>(),
        "sequence numbers are dense"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_loses_no_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // A shell loop of injects that reports each acknowledged one; killed mid-stream, with
    // an inject very likely in flight.
    let script = format!(
        "i=0; while [ $i -lt 400 ]; do i=$((i+1)); \"{BIN}\" inject agent:main:main \"m$i\" 2>/dev/null && echo \"ack $i\"; done"
    );
    let mut child = {
        let mut c = Command::new("bash");
        c.args(["-c", &script])
            .env("SWITCHBOARD_STATE_DIR", &state)
            .env("SWITCHBOARD_CONFIG", empty_config(&state))
            .stdout(Stdio::piped());
        crate::common::store_env(&mut c, &state);
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c.spawn().unwrap()
    };
    let stdout = child.stdout.take().unwrap();
    let mut acked = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("ack ") {
            acked.push(n.parse::<u32>().unwrap());
        }
        if acked.len() == 25 {
            let pgid = child.id() as libc::pid_t;
            assert!(pgid > 1);
            // SAFETY: signals only the process group this test created for the loop.
            let rc = unsafe { libc::killpg(pgid, libc::SIGKILL) };
            assert_eq!(rc, 0);
            break;
        }
    }
    let _ = child.wait();
    let engine =
        crate::common::open_engine(&state, Config::default()).expect("the store reopens cleanly");
    let got = texts(&engine, "agent:main:main").await;
    for n in &acked {
        assert!(
            got.contains(&format!("m{n}")),
            "acknowledged m{n} is missing: {got:?}"
        );
    }
    // At most the one in-flight inject may have landed beyond the acknowledged ones.
    assert!(
        got.len() <= acked.len() + 1,
        "{} stored, {} acked",
        got.len(),
        acked.len()
    );
    // And the store still takes writes.
    let out = switchboard(&state)
        .args(["inject", "agent:main:main", "after the crash"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn a_database_from_a_newer_build_is_refused_untouched() {
    if crate::common::on_postgres("a_database_from_a_newer_build_is_refused_untouched") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = &dir.path().join("state");
    let out = switchboard(state)
        .args(["inject", "main", "hello"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let db = state.join("switchboard.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let out = switchboard(state)
        .args(["sessions", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("newer Switchboard"), "{err}");
    assert!(
        err.contains(&state.display().to_string()),
        "names the folder: {err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing was written");
}

#[test]
fn a_state_folder_that_cannot_be_created_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let state = file.join("state");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").unwrap();
    let out = Command::new(BIN)
        .env("SWITCHBOARD_STATE_DIR", &state)
        .env("SWITCHBOARD_CONFIG", &config)
        .args(["inject", "main", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&state.display().to_string()), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_corrupt_config_is_reported_with_its_path_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("bad.json5");
    std::fs::write(
        &config,
        "{ session: { scope: \"per-sender\", }\n  tools: {\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .env("SWITCHBOARD_STATE_DIR", &state)
        .args(["--config", config.to_str().unwrap(), "inject", "main", "x"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json5"), "{err}");
    assert!(
        !state.join("switchboard.db").exists(),
        "no database was created"
    );
}

#[test]
fn tool_input_errors_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["tool", "no_such_tool"],
        vec!["tool", "sessions_history", "{not json"],
        vec!["tool", "sessions_history", "[1,2]"],
        vec!["tool", "sessions_history", "{}"],
        vec!["tool", "sessions_list", "{\"limit\": \"ten\"}"],
    ] {
        let out = switchboard(&dir.path().join("state"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = switchboard(&dir.path().join("state"))
        .args(["tool", "sessions_history", "{}"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("sessionKey required"));
}

#[test]
fn tool_reads_parameters_from_stdin_and_results_are_json_with_status() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = switchboard(&dir.path().join("state"))
        .args(["tool", "sessions_history", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(br#"{"sessionKey": "agent:work:doesnotexist"}"#)
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "an error result is still a result"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"], "No session found: agent:work:doesnotexist");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("{\n  \""), "two-space pretty JSON: {text}");
}
