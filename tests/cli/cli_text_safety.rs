//! Hostile text through the real binary: escape sequences, the 8-bit CSI, BiDi overrides and
//! zero-width characters in a message, a display name and an agent's reply never reach the
//! terminal raw from `inject`, `sessions list`, `sessions show` (or their `--json`), and a key
//! holding such characters is refused, so no look-alike session can be created.

use serde_json::Value;

use crate::common;

use common::CliBench;

const CONFIG: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { reply: "echo: {{text}}" },
    ] },
  ] },
}"#;

/// What issue 10 reproduced: window title (OSC 0), clipboard (OSC 52), clear screen, then a
/// carriage return and a backspace to overwrite; plus the 8-bit CSI, a right-to-left override,
/// a zero-width space and an invisible tag character.
const HOSTILE: &str = "x\u{1b}]0;PWNED\u{7}\u{1b}]52;c;ZWNobyBQV05FRA==\u{7}\u{1b}[2J\r\u{8}\
                       csi\u{9b}2J rlo\u{202e}txt.exe zw\u{200b}sp tag\u{e0041}";
const HOSTILE_NAME: &str = "\u{1b}]52;c;ZWNobyBQV05FRA==\u{7}name\u{202e}\u{200b}";

/// Characters that must never appear raw in output meant for a terminal.
fn raw_hostile(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| {
            matches!(
                c,
                '\u{1b}'
                    | '\u{7}'
                    | '\u{8}'
                    | '\r'
                    | '\u{9b}'
                    | '\u{202e}'
                    | '\u{200b}'
                    | '\u{e0041}'
            ) || c.is_control() && c != '\n'
        })
        .collect()
}

fn injected() -> CliBench {
    let b = CliBench::new(CONFIG);
    let out = b.run(&[
        "inject",
        "agent:main:main",
        HOSTILE,
        "--display-name",
        HOSTILE_NAME,
    ]);
    assert!(
        out.status.success(),
        "inject failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    // The agent's reply echoes the text: printed, but not raw.
    assert!(raw_hostile(&stdout).is_empty(), "inject stdout: {stdout:?}");
    assert!(raw_hostile(&stderr).is_empty(), "inject stderr: {stderr:?}");
    assert!(stdout.contains("echo: x^[]0;PWNED^G"), "{stdout:?}");
    b
}

#[test]
fn sessions_show_prints_hostile_text_visibly_not_raw() {
    let b = injected();
    let shown = b.ok(&["sessions", "show", "agent:main:main"]);
    assert!(raw_hostile(&shown).is_empty(), "{shown:?}");
    assert!(
        shown.contains("x^[]0;PWNED^G^[]52;c;ZWNobyBQV05FRA==^G^[[2J^M^H"),
        "{shown}"
    );
    assert!(
        shown.contains("csi\\u{9b}2J rlo\\u{202e}txt.exe zw\\u{200b}sp tag\\u{e0041}"),
        "{shown}"
    );
    assert!(shown.contains("name\\u{202e}\\u{200b}"), "{shown}");
}

#[test]
fn sessions_list_prints_hostile_names_visibly_not_raw() {
    let b = injected();
    let listed = b.ok(&["sessions", "list"]);
    assert!(raw_hostile(&listed).is_empty(), "{listed:?}");
    assert!(
        listed.contains("^[]52;c;ZWNobyBQV05FRA==^Gname\\u{202e}\\u{200b}"),
        "{listed}"
    );
}

#[test]
fn json_output_escapes_hostile_text_and_round_trips() {
    let b = injected();
    for args in [
        &["sessions", "list", "--json"][..],
        &["sessions", "show", "agent:main:main", "--json"][..],
        &[
            "tool",
            "sessions_history",
            r#"{"sessionKey":"agent:main:main"}"#,
        ][..],
    ] {
        let out = b.ok(args);
        assert!(raw_hostile(&out).is_empty(), "{args:?}: {out:?}");
        // The name holds U+202E; the messages (not in the list) also U+009B.
        assert!(out.contains("\\u202e"), "{out}");
        assert!(args[1] == "list" || out.contains("\\u009b"), "{out}");
        let v: Value = serde_json::from_str(&out).expect("valid JSON");
        // Parsed back, the text is exactly what was sent.
        match args[..2] {
            ["sessions", "list"] => assert_eq!(v[0]["displayName"], HOSTILE_NAME, "{v}"),
            ["sessions", "show"] => {
                assert_eq!(v["displayName"], HOSTILE_NAME, "{v}");
                assert_eq!(message_text(&v["messages"][0]), HOSTILE, "{v}");
            }
            _ => assert_eq!(message_text(&v["messages"][0]), HOSTILE, "{v}"),
        }
    }
}

fn message_text(m: &Value) -> &str {
    match &m["content"] {
        Value::String(s) => s,
        c => c[0]["text"].as_str().unwrap_or_default(),
    }
}

#[test]
fn keys_with_invisible_or_bidi_characters_are_refused() {
    let b = CliBench::new(CONFIG);
    b.ok(&["inject", "agent:main:main", "hello"]);
    for (key, what) in [
        ("agent:main:ma\u{200b}in", "U+200B"),
        ("agent:main:\u{202e}niam", "U+202E"),
        ("agent:main:x\u{1b}[2J", "U+001B"),
        ("agent:main:a\u{a0}b", "U+00A0"),
    ] {
        let out = b.run(&["inject", key, "hi"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{key:?}: {err}");
        assert!(err.contains(what), "{key:?}: {err}");
        assert!(err.contains("may not contain"), "{key:?}: {err}");
        assert!(raw_hostile(&err).is_empty(), "{err:?}");

        let out = b.run(&["sessions", "show", key]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "show {key:?}: {err}");
        assert!(err.contains(what), "{key:?}: {err}");

        let out = b.run(&["tool", "sessions_list", "{}", "--as", key]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "tool --as {key:?}: {err}");
        assert!(err.contains(what), "{key:?}: {err}");

        // An agent passing such a key gets an error result, not a session.
        let params = serde_json::json!({ "sessionKey": key, "message": "hi" }).to_string();
        let v = b.json(&["tool", "sessions_send", &params]);
        assert_eq!(v["status"], "error", "{v}");
        assert!(v["error"].as_str().is_some_and(|e| e.contains(what)), "{v}");
    }
    // Only the one real session exists: no look-alike was created.
    let rows = b.json(&["sessions", "list", "--json"]);
    let keys: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert_eq!(keys, ["agent:main:main"]);
}

#[test]
fn sessions_show_caps_a_huge_message() {
    let b = CliBench::new(CONFIG);
    // 100,000 characters: a single argument may not exceed 128 KiB on Linux.
    let big = "0123456789".repeat(10_000);
    b.ok(&["inject", "agent:main:main", &big, "--quiet"]);
    let shown = b.ok(&["sessions", "show", "agent:main:main"]);
    assert!(shown.len() < 20_000, "printed {} bytes", shown.len());
    assert!(
        shown.contains("… (96000 more characters; `sessions export` has all)"),
        "{}",
        &shown[..shown.len().min(2000)]
    );
    // The JSON form is for scripts and stays complete.
    let v = b.json(&["sessions", "show", "agent:main:main", "--json"]);
    assert!(v.to_string().contains(&big));
}

#[test]
fn sessions_export_to_stdout_escapes_hostile_text_and_stays_jsonl() {
    let b = injected();
    let out = b.ok(&["sessions", "export", "agent:main:main"]);
    assert!(raw_hostile(&out).is_empty(), "{out:?}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("every exported line is JSON"))
        .collect();
    // The values are unchanged: the hostile message reads back exactly as it was sent.
    let sent = lines.iter().any(|l| {
        l["message"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&l["message"]["content"]))
            .any(|c| c.as_str() == Some(HOSTILE) || c["text"].as_str() == Some(HOSTILE))
    });
    assert!(sent, "the hostile message is in the export: {out}");
}
