//! The send-policy command line, through the real binary: `sessions patch --send-policy`,
//! the effective policy in `sessions show` / `sessions list` (human and `--json`), and the
//! errors for a bad value, a missing flag and an unknown session.

use crate::common;

use common::CliBench;

use serde_json::Value;

const CONFIG: &str = "{
  session: {
    sendPolicy: {
      rules: [ { match: { channel: 'discord', chatType: 'group' }, action: 'deny' } ],
      default: 'allow',
    },
  },
}";

type Bench = CliBench;

fn new_bench() -> Bench {
    CliBench::new(CONFIG)
}

const GROUP: &str = "agent:main:discord:group:42";

fn setup() -> Bench {
    let b = new_bench();
    b.ok(&[
        "inject",
        GROUP,
        "standup in 5",
        "--channel",
        "discord",
        "--chat-type",
        "group",
    ]);
    b.ok(&[
        "inject",
        "agent:main:main",
        "hello",
        "--channel",
        "telegram",
    ]);
    assert!(b.state.join("switchboard.db").exists());
    b
}

/// The `send policy` line of `sessions show`.
fn policy_line(show: &str) -> String {
    show.lines()
        .find(|l| l.starts_with("send policy "))
        .unwrap_or_else(|| panic!("no send policy line in:\n{show}"))
        .to_string()
}

#[test]
fn show_explains_the_effective_policy() {
    let b = setup();
    let show = b.ok(&["sessions", "show", GROUP]);
    assert_eq!(
        policy_line(&show),
        "send policy      deny, from rule 1 (channel=discord chatType=group)"
    );
    let show = b.ok(&["sessions", "show", "agent:main:main"]);
    assert_eq!(
        policy_line(&show),
        "send policy      allow, from default (session.sendPolicy.default)"
    );

    let v = b.json(&["sessions", "show", GROUP, "--json"]);
    assert_eq!(
        v["sendPolicyEffective"],
        serde_json::json!({
            "policy": "deny",
            "source": "rule",
            "rule": 1,
            "match": "channel=discord chatType=group",
            "detail": "rule 1 (channel=discord chatType=group)"
        })
    );
    assert!(v.get("sendPolicy").is_none(), "no override yet: {v}");
    assert!(v["messages"].is_array(), "messages still last: {v}");
}

#[test]
fn patch_sets_and_removes_the_override() {
    let b = setup();
    let out = b.ok(&[
        "sessions",
        "patch",
        "agent:main:main",
        "--send-policy",
        "deny",
    ]);
    assert_eq!(
        out.trim(),
        "agent:main:main: send policy override set to deny; effective: deny, from override (set on this session)"
    );
    let show = b.ok(&["sessions", "show", "agent:main:main"]);
    assert_eq!(
        policy_line(&show),
        "send policy      deny, from override (set on this session)"
    );
    let v = b.json(&["sessions", "show", "agent:main:main", "--json"]);
    assert_eq!(v["sendPolicy"], "deny");
    assert_eq!(v["sendPolicyEffective"]["policy"], "deny");
    assert_eq!(v["sendPolicyEffective"]["source"], "override");

    // An override allow beats the deny rule; `on` is accepted as allow, any case.
    let out = b.ok(&["sessions", "patch", GROUP, "--send-policy", "ON"]);
    assert!(
        out.contains("override set to allow; effective: allow, from override"),
        "{out}"
    );

    // The list marks overrides with `*`.
    let list = b.ok(&["sessions", "list"]);
    let header = list.lines().next().unwrap();
    assert!(header.contains(" POLICY "), "{list}");
    let line_of = |key: &str| {
        list.lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} not listed:\n{list}"))
            .to_string()
    };
    assert!(line_of(GROUP).contains(" allow* "), "{list}");
    assert!(line_of("agent:main:main").contains(" deny* "), "{list}");

    // inherit removes it: the config decides again.
    let out = b.ok(&["sessions", "patch", GROUP, "--send-policy", "inherit"]);
    assert_eq!(
        out.trim(),
        format!(
            "{GROUP}: send policy override removed (the config decides); effective: deny, from rule 1 (channel=discord chatType=group)"
        )
    );
    let v = b.json(&["sessions", "show", GROUP, "--json"]);
    assert!(v.get("sendPolicy").is_none(), "override removed: {v}");
    assert_eq!(v["sendPolicyEffective"]["source"], "rule");

    let rows = b.json(&["sessions", "list", "--json"]);
    let row = |key: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("{key} not in {rows}"))
            .clone()
    };
    assert_eq!(row(GROUP)["sendPolicyEffective"]["policy"], "deny");
    assert_eq!(row(GROUP)["sendPolicyEffective"]["source"], "rule");
    assert_eq!(
        row("agent:main:main")["sendPolicyEffective"]["source"],
        "override"
    );
    let list = b.ok(&["sessions", "list"]);
    assert!(
        list.lines()
            .any(|l| l.contains(GROUP) && l.contains(" deny ")),
        "{list}"
    );
}

#[test]
fn patch_json_output() {
    let b = setup();
    let v = b.json(&[
        "sessions",
        "patch",
        GROUP,
        "--send-policy",
        "allow",
        "--json",
    ]);
    assert_eq!(v["key"], GROUP);
    assert_eq!(v["sendPolicy"], "allow");
    assert_eq!(v["sendPolicyEffective"]["source"], "override");
    let v = b.json(&[
        "sessions",
        "patch",
        GROUP,
        "--send-policy",
        "inherit",
        "--json",
    ]);
    assert_eq!(v["sendPolicy"], Value::Null);
    assert_eq!(v["sendPolicyEffective"]["policy"], "deny");
}

#[test]
fn bad_values_and_unknown_sessions_are_errors() {
    let b = setup();
    let out = b.run(&["sessions", "patch", GROUP, "--send-policy", "maybe"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("allow, deny or inherit"), "{err}");

    let out = b.run(&["sessions", "patch", GROUP]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--send-policy allow|deny|inherit"), "{err}");

    let out = b.run(&[
        "sessions",
        "patch",
        "agent:main:nope",
        "--send-policy",
        "deny",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no session found: agent:main:nope"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // Nothing changed.
    let v = b.json(&["sessions", "show", GROUP, "--json"]);
    assert!(v.get("sendPolicy").is_none(), "{v}");
}

#[test]
fn patch_help_has_an_example() {
    let b = new_bench();
    let help = b.ok(&["sessions", "patch", "--help"]);
    assert!(
        help.contains("switchboard sessions patch agent:main:discord:group:42 --send-policy deny"),
        "{help}"
    );
    assert!(help.contains("allow|deny|inherit"), "{help}");
}

/// The narrower stop: `--agent-sends off` refuses agent-to-agent sends into the session
/// (saying why) while the session's own replies still go to its channel; `inherit` lifts it.
/// (`--send-policy deny` stops both: its test is above.)
#[test]
fn agent_sends_off_stops_sends_into_the_session_but_not_its_replies() {
    const ROOM: &str = "agent:main:telegram:group:7";
    let b = CliBench::new(
        "{ agents: { list: [ { id: 'main', default: true, model: 'scripted', \
         script: [ { reply: 're: {{text}}' } ] } ] }, \
         tools: { sessions: { visibility: 'all' } } }",
    );
    let room = [
        "inject",
        ROOM,
        "hi",
        "--channel",
        "telegram",
        "--chat-type",
        "group",
    ];
    b.ok(&room);
    b.ok(&[
        "inject",
        "agent:main:main",
        "hello",
        "--channel",
        "telegram",
    ]);
    let queued = || -> i64 {
        let db = rusqlite::Connection::open(b.state.join("switchboard.db")).expect("db");
        db.query_row(
            "SELECT count(*) FROM outbox WHERE session_key = ?1",
            [ROOM],
            |r| r.get(0),
        )
        .expect("count")
    };
    let before = queued();
    assert!(before > 0, "the room's reply went to its channel");

    let said = b.ok(&["sessions", "patch", ROOM, "--agent-sends", "off"]);
    assert!(
        said.contains("agent-to-agent sends into it stopped"),
        "{said}"
    );
    let send =
        serde_json::json!({"sessionKey": ROOM, "message": "ping", "timeoutSeconds": 0}).to_string();
    let refused = b.json(&["tool", "sessions_send", &send, "--as", "agent:main:main"]);
    assert_eq!(refused["status"], "forbidden", "{refused}");
    let why = refused["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("agent-to-agent sends into it are stopped"),
        "{refused}"
    );
    let shown = b.json(&["sessions", "show", ROOM, "--json"]);
    assert_eq!(shown["agentSendPolicy"], "deny", "{shown}");

    // A person in the room still gets the agent's answer.
    b.ok(&room);
    assert_eq!(
        queued(),
        before + 1,
        "the reply to the room is still queued"
    );

    let said = b.ok(&["sessions", "patch", ROOM, "--agent-sends", "inherit"]);
    assert!(said.contains("follow its send policy again"), "{said}");
    let sent = b.json(&["tool", "sessions_send", &send, "--as", "agent:main:main"]);
    assert_ne!(sent["status"], "forbidden", "{sent}");

    // The wider stop holds the room's replies back too, and the transcript says so beside
    // the reply (before, the reply read as if the room had seen it).
    let notices = |shown: &Value| -> Vec<String> {
        shown["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter(|m| m["role"] == "custom")
                    .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(notices(&b.json(&["sessions", "show", ROOM, "--json"])).is_empty());
    b.ok(&["sessions", "patch", ROOM, "--send-policy", "deny"]);
    let before = queued();
    b.ok(&room);
    assert_eq!(queued(), before, "nothing queued for the room");
    let said = notices(&b.json(&["sessions", "show", ROOM, "--json"]));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("This reply was not delivered to the chat: "),
        "{said:?}"
    );
}
