//! Bounded input through the real binary: out-of-range tool parameters are refused with exit 2
//! before anything is sent, stdin that is not UTF-8 is unusable input (exit 2), deeply nested
//! JSON (tool parameters, the config, the keymap) is refused with a message instead of
//! overflowing the stack, and config numbers outside their range are reported with line and path.

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::json;

use crate::common;

use common::CliBench;

const CONFIG: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 0 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [ { reply: "main got: {{text}}" } ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "message" }, reply: "work: {{text}}" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
  ] },
}"#;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The texts of `key`'s transcript, oldest first.
fn texts(b: &CliBench, key: &str) -> Vec<String> {
    let h = b.json(&[
        "tool",
        "sessions_history",
        &json!({ "sessionKey": key }).to_string(),
        "--as",
        key,
    ]);
    h["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect())
                .unwrap_or_default()
        })
        .collect()
}

fn run_with_stdin(b: &CliBench, args: &[&str], input: &[u8]) -> Output {
    let mut child = b
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

#[test]
fn a_huge_send_timeout_is_refused_before_anything_is_sent() {
    let b = CliBench::new(CONFIG);
    b.ok(&["inject", "agent:work:main", "hello", "--quiet"]);
    let before = texts(&b, "agent:work:main");
    for timeout in ["1e20", "-1", "3601", "18446744073709551616"] {
        let params = format!(
            r#"{{"sessionKey":"agent:work:main","message":"hi","timeoutSeconds":{timeout}}}"#
        );
        let out = b.run(&["tool", "sessions_send", &params]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{timeout}: {err}");
        assert!(
            err.contains("timeoutSeconds") && err.contains("0 to 3600"),
            "{timeout}: the message names the field and its range: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(
        texts(&b, "agent:work:main"),
        before,
        "nothing reached the target"
    );
    // The top of the range still works.
    let r = b.json(&[
        "tool",
        "sessions_send",
        r#"{"sessionKey":"agent:work:main","message":"hi","timeoutSeconds":3600}"#,
    ]);
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["reply"], "work: hi");
}

#[test]
fn a_huge_spawn_timeout_is_refused_before_a_child_exists() {
    let b = CliBench::new(CONFIG);
    let out = b.run(&[
        "tool",
        "sessions_spawn",
        r#"{"task":"t","runTimeoutSeconds":1e300}"#,
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("runTimeoutSeconds") && err.contains("0 to 86400"),
        "{err}"
    );
    let list = b.json(&["tool", "sessions_list", "{}"]);
    assert_eq!(list["count"], 0, "no child session was created: {list}");
}

#[test]
fn a_huge_active_minutes_lists_everything_instead_of_crashing() {
    let b = CliBench::new(CONFIG);
    b.ok(&["inject", "agent:work:main", "hello", "--quiet"]);
    let list = b.json(&["tool", "sessions_list", r#"{"activeMinutes":1e20}"#]);
    let keys: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert!(keys.contains(&"agent:work:main"), "{list}");
    let out = b.run(&["sessions", "list", "--active", "18446744073709551615"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn stdin_that_is_not_utf8_is_unusable_input() {
    let b = CliBench::new(CONFIG);
    let out = run_with_stdin(
        &b,
        &["tool", "sessions_list", "-"],
        b"{\"limit\": \xff\xfe 5}",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("UTF-8"), "{err}");
    // The same parameters as valid UTF-8 work.
    let out = run_with_stdin(&b, &["tool", "sessions_list", "-"], b"{\"limit\": 5}");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn deeply_nested_tool_parameters_are_unusable_input() {
    let b = CliBench::new(CONFIG);
    let deep = format!(
        "{{\"sessionKey\":\"main\",\"message\":\"hi\",\"x\":{}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let out = run_with_stdin(&b, &["tool", "sessions_send", "-"], deep.as_bytes());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("recursion limit"), "{err}");
}

/// A config whose `session` value is `depth` arrays deep, starting on line 3.
fn deep_config(depth: usize, closed: bool) -> String {
    let close = if closed {
        "]".repeat(depth)
    } else {
        String::new()
    };
    format!(
        "{{\n  tools: {{}},\n  session: {}{close}\n}}\n",
        "[".repeat(depth)
    )
}

#[test]
fn a_config_nested_7000_deep_is_refused_by_every_command() {
    for (what, text) in [
        ("7,000 deep", deep_config(7_000, true)),
        ("30,000 unclosed", deep_config(30_000, false)),
    ] {
        let b = CliBench::new(&text);
        let out = b.run(&["config", "check"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("config.json5:3: ") && err.contains("nested more than 128 levels deep"),
            "{what}: the problem has its line and says what is wrong: {err}"
        );
        let out = b.run(&["sessions", "list"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("nested more than 128 levels deep"),
            "{what}: {err}"
        );
    }
}

#[test]
fn a_config_larger_than_the_cap_is_refused_without_parsing() {
    let mut text = String::from("{\n  // ");
    text.push_str(&"x".repeat(5 << 20));
    text.push_str("\n}\n");
    let b = CliBench::new(&text);
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("larger than 256 KiB"), "{err}");
}

#[test]
fn config_numbers_outside_their_range_are_reported_with_line_and_path() {
    let b = CliBench::new(
        "{\n  session: {\n    agentToAgent: {\n      maxChainHops: 4294967295,\n    },\n  },\n}\n",
    );
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("config.json5:4: session.agentToAgent.maxChainHops: ")
            && err.contains("from 1 to 100"),
        "{err}"
    );
    // Any command refuses the config rather than running with it.
    let out = b.run(&["sessions", "list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn a_demo_pace_beyond_ten_minutes_is_a_usage_error() {
    let b = CliBench::new(CONFIG);
    let out = b.run(&["demo", "--pace-ms", "18446744073709551615"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--pace-ms") && err.contains("0..=600000"),
        "{err}"
    );
}
