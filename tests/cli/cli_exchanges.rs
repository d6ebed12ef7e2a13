//! `switchboard exchanges` and `exchanges show ID` on a state folder: after a waited send
//! with a reply-back round and a send refused by policy, the list shows both (newest first),
//! `--session` narrows it, `--json` is the API's page, and `show` prints every turn, how the
//! exchange ended and the announce; an unknown id is an error naming it.

use crate::common;

use common::CliBench;

const CONFIG: &str = r#"{
  session: { agentToAgent: { maxPingPongTurns: 1 } },
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "reply" }, reply: "REPLY_SKIP" },
    ] },
    { id: "ops", model: "scripted", script: [
      { when: { step: "message" }, reply: "ops heard: {{text}}", tokens: { in: 12, out: 4 } },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
    { id: "quiet", model: "scripted", script: [] },
  ] },
}"#;

#[test]
fn exchanges_lists_and_shows_what_agents_said() {
    let b = CliBench::new(CONFIG);
    b.ok(&[
        "tool",
        "sessions_send",
        r#"{"agentId": "ops", "message": "status?", "timeoutSeconds": 30}"#,
        "--as",
        "agent:main:main",
    ]);
    b.ok(&["inject", "agent:quiet:main", "hello", "--owner"]);
    b.ok(&[
        "sessions",
        "patch",
        "agent:quiet:main",
        "--send-policy",
        "deny",
    ]);
    let refused = b.json(&[
        "tool",
        "sessions_send",
        r#"{"sessionKey": "agent:quiet:main", "message": "psst"}"#,
        "--as",
        "agent:main:main",
    ]);
    assert_eq!(refused["status"], "forbidden", "{refused}");

    let list = b.ok(&["exchanges"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows: {list}");
    let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words(lines[0]).starts_with("STARTED FROM → TO ROUNDS ENDED ANNOUNCE ID"),
        "{list}"
    );
    assert!(
        words(lines[1]).contains("agent:main:main → agent:quiet:main 0 refused by policy -"),
        "{list}"
    );
    assert!(
        words(lines[2]).contains("agent:main:main → agent:ops:main 2 reply_skip skipped"),
        "{list}"
    );
    let ops = b.ok(&["exchanges", "--session", "agent:ops:main"]);
    assert_eq!(ops.lines().count(), 2, "{ops}");

    let page = b.json(&["exchanges", "--json", "--limit", "1"]);
    assert_eq!(page["more"], true);
    assert_eq!(page["exchanges"][0]["kind"], "refused");
    let all = b.json(&["exchanges", "--json"]);
    let id = all["exchanges"][1]["id"].as_str().expect("id").to_string();

    let shown = b.ok(&["exchanges", "show", &id]);
    for want in [
        "agent:main:main → agent:ops:main",
        "Message: status?",
        "Round 1 · agent:ops:main → agent:main:main",
        "send · done · 2 rounds · started ",
        "tokens 12/4 · ok",
        "  ops heard: status?",
        "Round 2 · agent:main:main → agent:ops:main",
        "  REPLY_SKIP",
        "Ended: reply_skip · agent:main:main replied REPLY_SKIP in round 2",
        "Announce: skipped · the target chose to stay silent",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
    let detail = b.json(&["exchanges", "show", &id, "--json"]);
    assert_eq!(detail["turns"].as_array().map(Vec::len), Some(2));

    let out = b.run(&["exchanges", "show", "no-such-id"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no exchange no-such-id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
