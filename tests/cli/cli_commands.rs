//! Issue 26, item 8 (the commands): read-only commands never create a state folder, every
//! `--help` lists what exists and shows only what applies, `exchanges` has a header, filters
//! and short ids with its notes on stderr, `sessions show` shows local times and senders,
//! and counts agree with their nouns.

use std::process::Output;

use crate::common;

use common::CliBench;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A mistyped `--state-dir` on `sessions list` created the whole folder tree and said
/// "No sessions yet" with exit 0. Every command that only reads now says there is no state
/// folder there, how to make one, exits 1 and leaves nothing behind; one that writes still
/// makes the folder.
#[test]
fn read_only_commands_never_create_a_state_folder() {
    let b = CliBench::new("{}");
    for args in [
        &["sessions", "list"][..],
        &["sessions", "list", "--json"],
        &["sessions", "show", "agent:main:main"],
        &["sessions", "export", "agent:main:main"],
        &["exchanges"],
        &["exchanges", "--json"],
        &["exchanges", "show", "0193"],
    ] {
        let out = b.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        let want = format!("no state folder at {}", b.state.display());
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(
            err.contains("switchboard --state-dir"),
            "says how to make one: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
        assert!(!b.state.exists(), "{args:?} created {}", b.state.display());
    }
    // A folder without a database is not a state folder either (and stays as it was).
    std::fs::create_dir_all(&b.state).unwrap();
    let out = b.run(&["sessions", "list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&b.state).unwrap().count(),
        0,
        "nothing written"
    );
    std::fs::remove_dir(&b.state).unwrap();

    b.ok(&["inject", "agent:main:main", "/send off", "--owner"]);
    assert!(
        b.state.join("switchboard.db").is_file(),
        "a writing command makes it"
    );
    assert!(b.ok(&["sessions", "list"]).contains("agent:main:main"));
}

/// The subcommands `help` lists in its "Commands:" section (without `help` itself).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Issue 26: `tool --help` listed 3 of 5 tools, subcommand help interleaved the global
/// options with the command's own, `--json` had no description in `sessions show` and
/// `exchanges show`, `demo --help` leaked "the ticker's deadline arithmetic panics",
/// `serve --help` offered `--connect`, and some commands had no example. This walks every
/// command's `--help`.
#[test]
fn every_help_lists_what_exists_and_only_what_applies() {
    let b = CliBench::new("{}");
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = Vec::new();
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = b.ok(&args);
        let name = if path.is_empty() {
            "switchboard".to_string()
        } else {
            path.join(" ")
        };
        assert!(!help.to_lowercase().contains("panic"), "{name}: {help}");
        assert!(help.contains("Example"), "{name} has no example:\n{help}");
        if !path.is_empty() && !["keys", "config"].contains(&path[0].as_str()) {
            // The command's own options first; the global ones under their own heading.
            let (own, global) = help
                .split_once("Global options:")
                .unwrap_or_else(|| panic!("{name}: no global options heading:\n{help}"));
            assert!(!own.contains("--state-dir"), "{name} interleaves:\n{help}");
            assert!(global.contains("--state-dir"), "{name}:\n{help}");
        }
        for sub in subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        seen.push((name, help));
    }
    let help_of = |name: &str| {
        seen.iter()
            .find(|(n, _)| n == name)
            .map(|(_, h)| h.clone())
            .unwrap_or_else(|| {
                panic!(
                    "no help for {name}: {:?}",
                    seen.iter().map(|s| &s.0).collect::<Vec<_>>()
                )
            })
    };
    assert!(seen.len() >= 17, "walked {} commands", seen.len());
    let tool = help_of("tool");
    for t in [
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "agents_list",
    ] {
        assert!(tool.contains(t), "tool --help misses {t}:\n{tool}");
    }
    for local in [
        "serve",
        "demo",
        "config init",
        "keys",
        "import-openclaw",
        "sessions export",
    ] {
        let h = help_of(local);
        assert!(!h.contains("--connect"), "{local} offers --connect:\n{h}");
    }
    // Options a command has no use for are not offered: `keys` reads only the keymap file,
    // `config` only config files.
    for (name, absent) in [
        ("keys", &["--state-dir", "--config", "--connect"][..]),
        ("config init", &["--state-dir", "--connect"]),
        ("config check", &["--state-dir", "--connect"]),
    ] {
        let h = help_of(name);
        for option in absent {
            assert!(!h.contains(option), "{name} offers {option}:\n{h}");
        }
    }
    for remote in ["sessions list", "exchanges", "tool", "inject"] {
        assert!(
            help_of(remote).contains("--connect"),
            "{remote} works over --connect"
        );
    }
    for name in ["sessions show", "exchanges show", "exchanges"] {
        let h = help_of(name);
        let json = h
            .lines()
            .position(|l| l.trim_start().starts_with("--json"))
            .expect("--json");
        let described = h.lines().nth(json).is_some_and(|l| l.trim() != "--json")
            || h.lines()
                .nth(json + 1)
                .is_some_and(|l| l.starts_with("          "));
        assert!(described, "{name}: --json has no description:\n{h}");
    }
    // Hidden in help, the remote options are still refused with a clear message.
    let out = b.run(&["serve", "--connect", "ws://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("local state folder only"),
        "{}",
        stderr(&out)
    );
}

const EXCHANGES: &str = r#"{
  session: { agentToAgent: { maxPingPongTurns: 1 } },
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "reply" }, reply: "REPLY_SKIP" },
    ] },
    { id: "ops", model: "scripted", script: [
      { when: { step: "message" }, reply: "ops heard: {{text}}" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
    { id: "quiet", model: "scripted", script: [] },
  ] },
}"#;

/// Two sends main → ops (done) and one refused main → quiet.
fn three_exchanges() -> CliBench {
    let b = CliBench::new(EXCHANGES);
    for text in ["first", "second"] {
        b.ok(&[
            "tool",
            "sessions_send",
            &format!(r#"{{"agentId": "ops", "message": "{text}", "timeoutSeconds": 30}}"#),
            "--as",
            "agent:main:main",
        ]);
    }
    b.ok(&["inject", "agent:quiet:main", "/send off", "--owner"]);
    b.ok(&[
        "tool",
        "sessions_send",
        r#"{"sessionKey": "agent:quiet:main", "message": "psst"}"#,
        "--as",
        "agent:main:main",
    ]);
    b
}

fn ids(page: &serde_json::Value) -> Vec<String> {
    page["exchanges"]
        .as_array()
        .expect("exchanges")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect()
}

/// Issue 26: `exchanges` had no header row, no filters, printed "(more: raise --limit)" on
/// stdout and took whole ids only.
#[test]
fn exchanges_has_a_header_filters_short_ids_and_notes_on_stderr() {
    let b = three_exchanges();
    let all = b.json(&["exchanges", "--json"]);
    let all_ids = ids(&all);
    assert_eq!(all_ids.len(), 3, "{all}");

    // A header row; the note about more on stderr, never in the table.
    let out = b.run(&["exchanges", "--limit", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.starts_with("STARTED "), "{table}");
    assert!(!table.contains("more"), "{table}");
    assert!(stderr(&out).contains("raise --limit"), "{}", stderr(&out));

    // --status (the exchange model's statuses, as a closed set).
    let refused = b.json(&["exchanges", "--status", "refused", "--json"]);
    assert_eq!(ids(&refused), vec![all_ids[0].clone()], "{refused}");
    let done = b.json(&["exchanges", "--status", "done", "--json"]);
    assert_eq!(ids(&done), all_ids[1..].to_vec(), "{done}");
    let bad = b.run(&["exchanges", "--status", "finished"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("running"),
        "lists the choices: {}",
        stderr(&bad)
    );
    // --status with --limit: the limit counts matches, and `more` is exact.
    let one = b.json(&["exchanges", "--status", "done", "--limit", "1", "--json"]);
    assert_eq!(ids(&one), vec![all_ids[1].clone()]);
    assert_eq!(one["more"], true, "{one}");

    // --from / --to: the requester and the target, exactly.
    let to_ops = b.json(&["exchanges", "--to", "agent:ops:main", "--json"]);
    assert_eq!(ids(&to_ops), all_ids[1..].to_vec(), "{to_ops}");
    let pair = b.json(&[
        "exchanges",
        "--from",
        "agent:main:main",
        "--to",
        "agent:quiet:main",
        "--json",
    ]);
    assert_eq!(ids(&pair), vec![all_ids[0].clone()], "{pair}");
    let none = b.run(&["exchanges", "--from", "agent:ops:main"]);
    assert!(none.status.success());
    assert!(stdout(&none).is_empty(), "{}", stdout(&none));
    assert!(
        stderr(&none).contains("no agent-to-agent exchanges match"),
        "{}",
        stderr(&none)
    );

    // --since: an age or a time.
    assert_eq!(
        ids(&b.json(&["exchanges", "--since", "1h", "--json"])).len(),
        3
    );
    assert_eq!(
        ids(&b.json(&["exchanges", "--since", "2999-01-01T00:00:00Z", "--json"])).len(),
        0
    );
    assert_eq!(
        ids(&b.json(&["exchanges", "--since", "2000-01-01T00:00:00Z", "--json"])).len(),
        3
    );
    let bad = b.run(&["exchanges", "--since", "yesterday-ish"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("RFC 3339"), "{}", stderr(&bad));

    // A unique start of an id shows that exchange; a shared one lists the candidates.
    let id = &all_ids[1];
    let unique = &id[..id.len() - 1];
    let shown = b.ok(&["exchanges", "show", unique]);
    assert!(shown.contains("Message: second"), "{shown}");
    let common: String = all_ids[0]
        .chars()
        .zip(all_ids[1].chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let out = b.run(&["exchanges", "show", &common]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    for want in [&all_ids[0], &all_ids[1]] {
        assert!(stderr(&out).contains(want.as_str()), "{}", stderr(&out));
    }
    assert!(
        stderr(&out).contains("give more of the id"),
        "{}",
        stderr(&out)
    );
}

/// `hh:mm:ss` five hours ahead of UTC (the zone `TZ=XYZ-5` names), as the date and time
/// `sessions show` prints.
fn in_utc_plus_5(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms + 5 * 3_600_000)
        .expect("a time")
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// Issue 26: `sessions show` printed `updatedAt` as epoch milliseconds, no time per message,
/// and "user:" where the console shows who sent it.
#[test]
fn sessions_show_prints_local_times_and_the_senders_the_console_shows() {
    let b = CliBench::new(
        r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
             script: [ { when: { step: "message" }, reply: "heard: {{text}}" } ] } ] } }"#,
    );
    let key = "agent:main:telegram:direct:42";
    b.ok(&[
        "inject",
        key,
        "hello",
        "--channel",
        "telegram",
        "--sender",
        "alice",
        "--quiet",
    ]);
    let v = b.json(&["sessions", "show", key, "--json"]);
    let updated = v["updatedAt"].as_i64().expect("updatedAt");
    let times: Vec<i64> = v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["timestamp"].as_i64().expect("timestamp"))
        .collect();
    assert_eq!(times.len(), 2, "{v}");

    let out = b
        .command(&["sessions", "show", key])
        .env("TZ", "XYZ-5")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        !shown.contains(&updated.to_string()),
        "epoch ms shown:\n{shown}"
    );
    let updated_line = shown
        .lines()
        .find(|l| l.starts_with("updatedAt"))
        .expect("updatedAt");
    assert!(updated_line.contains(&in_utc_plus_5(updated)), "{shown}");
    assert!(
        updated_line.ends_with("ago)") || updated_line.ends_with("(just now)"),
        "{shown}"
    );
    let want = [
        format!("{}  alice: hello", in_utc_plus_5(times[0])),
        format!("{}  agent: heard: hello", in_utc_plus_5(times[1])),
    ];
    for w in &want {
        assert!(shown.lines().any(|l| l == w), "missing {w:?}:\n{shown}");
    }
    assert!(!shown.contains("user:"), "{shown}");
}

/// With no command and no terminal, the overview only reads: a folder not made yet is
/// reported as such, and left unmade.
#[test]
fn the_overview_off_a_terminal_makes_no_state_folder() {
    let b = CliBench::new("{}");
    let out = b.run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("not made yet"), "{}", stdout(&out));
    assert!(stdout(&out).contains("Sessions: 0"), "{}", stdout(&out));
    assert!(!b.state.exists(), "the overview made {}", b.state.display());
    b.ok(&["inject", "agent:main:main", "/send off", "--owner"]);
    assert!(b.ok(&[]).contains("Sessions: 1"));
}
