//! The agent-to-agent commands through the real binary: `tool sessions_send` waits for the
//! whole exchange so `sessions_history` afterwards shows it, `inject` starts a run and prints
//! the reply, the owner's `/send` (and a non-owner's, which is just a message), and a process
//! killed in the middle of a ping-pong exchange (no run left "running", nothing lost).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_types::key::SessionKey;

use crate::common;

use common::CliBench;

const CONFIG: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 2 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "message", text: "/^ask (\\S+) (.*)/" },
        tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2" } }],
        reply: "asked $1" },
      { when: { step: "reply" }, reply: "main hears: {{text}}" },
      { reply: "main got: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "message", text: "slow" }, delayMs: 500, reply: "work slowly: {{text}}" },
      { when: { step: "reply", text: "slow" }, delayMs: 4000, reply: "work slowly: {{text}}" },
      { when: { step: "message" }, reply: "work: {{text}}" },
      { when: { step: "reply" }, reply: "work again: {{text}}" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
  ] },
}"#;

struct Bench(CliBench);

impl std::ops::Deref for Bench {
    type Target = CliBench;
    fn deref(&self) -> &CliBench {
        &self.0
    }
}

impl Bench {
    fn new() -> Bench {
        Bench(CliBench::new(CONFIG))
    }

    fn texts(&self, key: &str, include_tools: bool) -> Vec<(String, String)> {
        let h = self.json(&[
            "tool",
            "sessions_history",
            // Silent replies too: these tests read back every step of an exchange.
            &json!({ "sessionKey": key, "includeTools": include_tools, "includeSilent": true })
                .to_string(),
            "--as",
            key,
        ]);
        h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = m["content"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                (m["role"].as_str().unwrap().to_string(), text)
            })
            .collect()
    }
}

#[test]
fn tool_sessions_send_waits_for_the_exchange_so_history_shows_all_of_it() {
    let b = Bench::new();
    b.ok(&["inject", "agent:work:main", "hello", "--quiet"]);
    let r = b.json(&[
        "tool",
        "sessions_send",
        r#"{"sessionKey": "agent:work:main", "message": "PING"}"#,
        "--as",
        "agent:main:main",
    ]);
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["reply"], "work: PING");
    // Both rounds of the loop (maxPingPongTurns 2) are in the transcripts already.
    let me = b.texts("agent:main:main", false);
    assert_eq!(
        me,
        [
            ("user".to_string(), "work: PING".to_string()),
            (
                "assistant".to_string(),
                "main hears: work: PING".to_string()
            ),
        ]
    );
    let work = b.texts("agent:work:main", false);
    let tail: Vec<&str> = work.iter().skip(2).map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        tail,
        [
            "PING",
            "work: PING",
            "main hears: work: PING",
            "work again: main hears: work: PING",
            "ANNOUNCE_SKIP"
        ]
    );
}

#[test]
fn inject_runs_the_agent_prints_its_reply_and_records_its_tool_calls() {
    let b = Bench::new();
    let out = b.run(&[
        "inject",
        "agent:main:main",
        "ask work status please",
        "--channel",
        "telegram",
        "--sender",
        "alice",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "asked work\n");
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("→ agent:main:main sends to agent:work:main"),
        "{progress}"
    );
    assert!(
        progress.contains("round 1 · agent:work:main: work: status please"),
        "{progress}"
    );
    assert!(
        progress.contains("reply-back loop ended: cap"),
        "{progress}"
    );
    assert!(progress.contains("announce skipped"), "{progress}");
    // The tool call and its result are recorded in OpenClaw's shapes.
    let all = b.json(&[
        "tool",
        "sessions_history",
        r#"{"sessionKey": "agent:main:main", "includeTools": true}"#,
    ]);
    let messages = all["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find(|m| m["content"][0]["type"] == "toolCall")
        .expect("a toolCall message");
    assert_eq!(call["content"][0]["name"], "sessions_send");
    assert_eq!(
        call["content"][0]["arguments"],
        json!({ "agentId": "work", "message": "status please" })
    );
    let result = messages
        .iter()
        .find(|m| m["role"] == "toolResult")
        .expect("a toolResult message");
    assert_eq!(result["toolCallId"], call["content"][0]["id"]);
    // sessions_history drops `details` (as OpenClaw does); the text holds the result JSON.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["status"], "ok");
    assert_eq!(text["reply"], "work: status please");
    // The reply to a telegram message went to the outbox for telegram.
    let show = b.ok(&["sessions", "show", "agent:main:main"]);
    assert!(show.contains("asked work"), "{show}");
    // `sessions show` prints a tool call as every front end does (`name(args)`), and with
    // --tools its result.
    let show = b.ok(&["sessions", "show", "agent:main:main", "--tools"]);
    // Each line after its local time, labelled as the console labels it.
    assert!(
        show.contains(
            "  agent: sessions_send({\"agentId\":\"work\",\"message\":\"status please\"})\n"
        ),
        "{show}"
    );
    assert!(show.contains("  ← sessions_send {"), "{show}");
}

#[test]
fn the_owners_send_command_sets_the_policy_and_a_strangers_is_just_a_message() {
    let b = Bench::new();
    let key = "agent:main:telegram:group:7";
    b.ok(&["inject", key, "hi", "--channel", "telegram", "--quiet"]);
    assert_eq!(
        b.ok(&["inject", key, "/send off", "--owner"]),
        "⚙️ Send policy set to off.\n"
    );
    let show = b.ok(&["sessions", "show", key]);
    assert!(show.contains("deny, from override"), "{show}");
    // Not the owner: the agent just sees a message, the policy does not change.
    assert_eq!(
        b.ok(&["inject", key, "/send on", "--quiet"]),
        "main got: /send on\n"
    );
    assert!(
        b.ok(&["sessions", "show", key])
            .contains("deny, from override")
    );
    // The owner's /send on works on a denied session (it undoes /send off).
    assert_eq!(
        b.ok(&["inject", key, "/SEND on", "--owner"]),
        "⚙️ Send policy set to on.\n"
    );
    assert!(
        b.ok(&["sessions", "show", key])
            .contains("allow, from override")
    );
    assert_eq!(
        b.ok(&["inject", key, "/send inherit", "--owner"]),
        "⚙️ Send policy set to inherit.\n"
    );
    assert!(!b.ok(&["sessions", "show", key]).contains("from override"));
    assert_eq!(
        b.ok(&["inject", key, "/send maybe", "--owner"]),
        "⚙️ Usage: /send on|off|inherit\n"
    );
    // "/send on please" is not a command at all.
    assert_eq!(
        b.ok(&["inject", key, "/send on please", "--owner", "--quiet"]),
        "main got: /send on please\n"
    );
}

#[test]
fn a_process_killed_mid_exchange_leaves_no_run_running_and_loses_nothing() {
    let b = Bench::new();
    b.ok(&["inject", "agent:work:main", "hello", "--quiet"]);
    // main asks work; work's reply-back round takes 4 s, and we kill the process inside it.
    let mut child = b
        .command(&["inject", "agent:main:main", "ask work slow job", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let db = b.state.join("switchboard.db");
    let running_reply = || -> bool {
        let Ok(conn) = rusqlite::Connection::open(&db) else {
            return false;
        };
        conn.query_row(
            "SELECT count(*) FROM runs WHERE step = 'reply' AND status = 'running' AND session_key = 'agent:work:main'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false)
    };
    let mut waited = 0;
    while !running_reply() {
        assert!(
            waited < 300,
            "the exchange never reached work's reply round"
        );
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    // SIGKILL: no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();

    let config: Config = switchboard_config::load::parse_str(CONFIG).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let engine = switchboard::state_folder::open_engine(&b.state, config).unwrap();
        let work = SessionKey::from_canonical("agent:work:main");
        let runs = engine.runs_of(&work, 10).await.unwrap();
        assert!(
            runs.iter().all(|r| r.status.as_str() != "running"),
            "{runs:?}"
        );
        // Interrupted by the crash: a failure (nobody aborted it), with why.
        let interrupted: Vec<_> = runs
            .iter()
            .filter(|r| r.status.as_str() == "error")
            .collect();
        assert_eq!(interrupted.len(), 1, "{runs:?}");
        assert_eq!(interrupted[0].step.as_str(), "reply");
        assert!(
            interrupted[0]
                .error
                .as_deref()
                .unwrap()
                .contains("engine stopped")
        );
        let main_runs = engine
            .runs_of(&SessionKey::from_canonical("agent:main:main"), 10)
            .await
            .unwrap();
        assert!(
            main_runs.iter().all(|r| r.status.as_str() != "running"),
            "{main_runs:?}"
        );
    });
    // Everything committed before the kill is still there, in order, then the interrupted
    // round as a failed turn (no text; its `errorMessage` says the engine stopped).
    let work = b.texts("agent:work:main", false);
    let tail: Vec<&str> = work.iter().skip(2).map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        tail,
        [
            "slow job",
            "work slowly: slow job",
            "main hears: work slowly: slow job",
            ""
        ]
    );
    // The folder works normally afterwards.
    assert_eq!(
        b.ok(&["inject", "agent:work:main", "still there?", "--quiet"]),
        "work: still there?\n"
    );
}

/// A command waiting for a long turn is never silent: it says on stderr what it still waits
/// for (here every second instead of every 30 s), and still prints the reply in the end.
#[test]
fn a_long_wait_says_what_it_is_waiting_for() {
    let b = CliBench::new(
        r#"{ agents: { list: [ { id: "main", default: true, model: "scripted", script: [
             { delayMs: 2500, reply: "done at last" } ] } ] } }"#,
    );
    let out = b
        .command(&["inject", "agent:main:main", "take your time"])
        .env("SWITCHBOARD_WAIT_REPORT_SECS", "1")
        .output()
        .expect("run inject");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done at last");
    let report = stderr
        .lines()
        .find(|l| l.starts_with("still waiting: "))
        .unwrap_or_else(|| panic!("no report of the wait: {stderr}"));
    assert!(
        report.contains("still running") && report.contains("on agent:main:main"),
        "{report}"
    );
}
