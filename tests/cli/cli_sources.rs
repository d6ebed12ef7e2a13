//! Several sources from the command line (issue 27): two real `switchboard serve` processes
//! and the local state folder, named with `--connect NAME=URL` / `--token NAME=TOKEN` /
//! `$SWITCHBOARD_TOKEN_<NAME>` or the config's `gateways`. Lists carry a SOURCE column and a
//! `source` field, the same key on several sources is listed once per source, a reference
//! reaches its own source only, a source that refuses the token is named and left out while
//! the others are listed, and names or places given twice are usage errors.

use crate::common::CliBench;
use crate::gateway_process::{self, Gateway, TOKEN, bounded};

use std::process::{Command, Output};

use serde_json::Value;

const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] },
  tools: { agentToAgent: { enabled: true }, sessions: { visibility: "all" } } }"#;

fn url(g: &Gateway) -> String {
    format!("{}://{}", g.scheme, g.addr)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The local folder (with its own sessions) and two gateways (`home`, `team`), each with
/// `agent:main:main` and a session only it has.
struct Three {
    local: CliBench,
    home: Gateway,
    team: Gateway,
}

impl Three {
    fn new() -> Three {
        let local = CliBench::new(CONFIG);
        let home = gateway_process::start_with_config(CONFIG, &[]);
        let team = gateway_process::start_with_config(CONFIG, &[]);
        let three = Three { local, home, team };
        three.ok(&[], &["inject", "agent:main:main", "hi local"]);
        three.ok(&[], &["inject", "agent:main:discord:group:1", "only local"]);
        for (g, n) in [(&three.home, "home"), (&three.team, "team")] {
            let key = format!("agent:main:discord:group:only-{n}");
            three.ok(
                &["--connect", &url(g)],
                &["inject", "agent:main:main", &format!("hi {n}")],
            );
            three.ok(
                &["--connect", &url(g)],
                &["inject", &key, &format!("only {n}")],
            );
        }
        three
    }

    /// The binary on the local folder, `before` ahead of the command; no token from the
    /// test's own environment.
    fn command(&self, before: &[&str], args: &[&str]) -> Command {
        let mut all: Vec<&str> = before.to_vec();
        all.extend(args);
        let mut c = self.local.command(&all);
        c.env_remove("SWITCHBOARD_GATEWAY_TOKEN")
            .env_remove("SWITCHBOARD_TOKEN_HOME")
            .env_remove("SWITCHBOARD_TOKEN_TEAM")
            .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN);
        c
    }

    fn run(&self, before: &[&str], args: &[&str]) -> Output {
        bounded(self.command(before, args))
    }

    #[track_caller]
    fn ok(&self, before: &[&str], args: &[&str]) -> String {
        let out = self.run(before, args);
        assert!(
            out.status.success(),
            "{before:?} {args:?}: {:?} {}",
            out.status.code(),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// `--connect home=… --connect team=…`, home's token on the command line, team's in
    /// `$SWITCHBOARD_TOKEN_TEAM` (never the plain `$SWITCHBOARD_GATEWAY_TOKEN`, which a
    /// named gateway is not offered when there are several).
    fn named(&self, team_token: &str, args: &[&str]) -> Output {
        let (home, team) = (url(&self.home), url(&self.team));
        let home_arg = format!("home={home}");
        let team_arg = format!("team={team}");
        let token_arg = format!("home={TOKEN}");
        let mut c = self.command(
            &[
                "--connect",
                &home_arg,
                "--connect",
                &team_arg,
                "--token",
                &token_arg,
            ],
            args,
        );
        c.env_remove("SWITCHBOARD_GATEWAY_TOKEN")
            .env("SWITCHBOARD_TOKEN_TEAM", team_token);
        bounded(c)
    }

    #[track_caller]
    fn named_json(&self, args: &[&str]) -> Value {
        let out = self.named(TOKEN, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out.stdout)))
    }
}

fn keys(rows: &Value) -> Vec<(String, String)> {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap_or("-").to_string(),
                r["key"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

fn has(rows: &[(String, String)], source: &str, key: &str) -> bool {
    rows.iter().any(|(s, k)| s == source && k == key)
}

/// The messages' texts of a `sessions show --json`.
fn said(show: &Value) -> String {
    show["messages"].to_string()
}

#[test]
fn three_sources_list_show_and_inject_each_on_its_own() {
    let t = Three::new();

    // Every source's rows, each with its source; the same key once per source, as
    // `source/key` (what every command takes back).
    let rows = keys(&t.named_json(&["sessions", "list", "--json"]));
    for source in ["local", "home", "team"] {
        assert!(
            has(&rows, source, &format!("{source}/agent:main:main")),
            "{source}: {rows:?}"
        );
    }
    assert!(
        has(&rows, "local", "local/agent:main:discord:group:1"),
        "{rows:?}"
    );
    assert!(
        has(&rows, "home", "home/agent:main:discord:group:only-home"),
        "{rows:?}"
    );
    assert!(
        has(&rows, "team", "team/agent:main:discord:group:only-team"),
        "{rows:?}"
    );
    assert_eq!(rows.len(), 6, "{rows:?}");

    // The table: SOURCE first, the key bare beside it.
    let out = t.named(TOKEN, &["sessions", "list"]);
    let table = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let header = table.lines().next().expect("a header");
    assert!(
        header.starts_with("SOURCE ") && header.contains(" KEY "),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("team ")
            && l.contains(" agent:main:discord:group:only-team ")
            && !l.contains("team/")),
        "{table}"
    );
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains(" agent:main:main "))
            .count(),
        3,
        "the same key on three sources is three rows: {table}"
    );

    // `sessions show` reads the source the reference names.
    let show = t.named_json(&["sessions", "show", "team/agent:main:main", "--json"]);
    assert_eq!(show["source"], "team", "{show}");
    assert!(
        said(&show).contains("hi team") && !said(&show).contains("hi home"),
        "{show}"
    );
    let table = text(
        &t.named(TOKEN, &["sessions", "show", "home/agent:main:main"])
            .stdout,
    );
    assert!(
        table.contains("hi home") && !table.contains("hi team"),
        "{table}"
    );

    // A key on several sources, bare, is refused with the references to choose from.
    let out = t.named(TOKEN, &["sessions", "show", "agent:main:main"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("team/agent:main:main") && err.contains("home/agent:main:main"),
        "{err}"
    );
    // A key one source alone has is found there.
    let show = t.named_json(&[
        "sessions",
        "show",
        "agent:main:discord:group:only-team",
        "--json",
    ]);
    assert_eq!(show["source"], "team", "{show}");

    // `inject team/…` lands on team only; its reply is printed as for one source.
    let out = t.named(TOKEN, &["inject", "team/agent:main:main", "x marks team"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("re: x marks team"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("recorded in team/agent:main:main"),
        "where it landed is said with its source: {}",
        text(&out.stderr)
    );
    let team = t.ok(
        &["--connect", &url(&t.team)],
        &["sessions", "show", "agent:main:main", "--json"],
    );
    assert!(team.contains("x marks team"), "{team}");
    let home = t.ok(
        &["--connect", &url(&t.home)],
        &["sessions", "show", "agent:main:main", "--json"],
    );
    assert!(!home.contains("x marks team"), "{home}");
    let local = t.ok(&[], &["sessions", "show", "agent:main:main", "--json"]);
    assert!(!local.contains("x marks team"), "{local}");

    // A patch reaches its own source only, and says which.
    let patched = t.named_json(&[
        "sessions",
        "patch",
        "home/agent:main:main",
        "--send-policy",
        "deny",
        "--json",
    ]);
    assert_eq!(patched["key"], "home/agent:main:main", "{patched}");
    let policy = |before: &[&str]| -> Value {
        let show: Value =
            serde_json::from_str(&t.ok(before, &["sessions", "show", "agent:main:main", "--json"]))
                .expect("json");
        show["sendPolicyEffective"]["policy"].clone()
    };
    assert_eq!(policy(&["--connect", &url(&t.home)]), "deny");
    assert_eq!(policy(&["--connect", &url(&t.team)]), "allow");
    assert_eq!(policy(&[]), "allow");

    // Exchanges merge too: one on team, listed with its source, found by its bare id.
    let send = r#"{"sessionKey": "agent:main:discord:group:only-team", "message": "ping"}"#;
    t.ok(
        &["--connect", &url(&t.team)],
        &["tool", "sessions_send", send, "--as", "agent:main:main"],
    );
    let page = t.named_json(&["exchanges", "--json"]);
    let list = page["exchanges"].as_array().expect("exchanges");
    assert_eq!(list.len(), 1, "{page}");
    assert_eq!(list[0]["source"], "team", "{page}");
    let id = list[0]["id"].as_str().expect("id").to_string();
    let bare = id.strip_prefix("team/").expect("the id names its source");
    let table = text(&t.named(TOKEN, &["exchanges"]).stdout);
    let header = table.lines().next().expect("a header");
    assert!(header.starts_with("SOURCE "), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("team ") && l.ends_with(bare)),
        "{table}"
    );
    let shown = t.named_json(&["exchanges", "show", &bare[..8], "--json"]);
    assert_eq!(shown["summary"]["id"], id.as_str(), "{shown}");
    assert_eq!(shown["summary"]["source"], "team", "{shown}");

    // One plain --connect is as it always was: bare keys, no source.
    let one: Value = serde_json::from_str(&t.ok(
        &["--connect", &url(&t.home)],
        &["sessions", "list", "--json"],
    ))
    .expect("json");
    let rows = keys(&one);
    assert!(has(&rows, "-", "agent:main:main"), "{rows:?}");
}

#[test]
fn a_source_refusing_its_token_is_named_and_the_others_are_listed() {
    let t = Three::new();
    let out = t.named("not-the-token", &["sessions", "list", "--json"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rows: Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = keys(&rows);
    assert!(has(&rows, "local", "local/agent:main:main"), "{rows:?}");
    assert!(has(&rows, "home", "home/agent:main:main"), "{rows:?}");
    assert!(rows.iter().all(|(s, _)| s != "team"), "{rows:?}");
    assert!(
        err.contains("source team") && err.contains("refused"),
        "the notice names the source and why: {err}"
    );

    // `gateways` reports each as it stands, table and JSON.
    let out = t.named("not-the-token", &["gateways", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    let by_name = |n: &str| {
        list.as_array()
            .and_then(|l| l.iter().find(|g| g["name"] == n))
            .cloned()
            .unwrap_or_else(|| panic!("no {n}: {list}"))
    };
    assert_eq!(by_name("local")["state"], "ready", "{list}");
    assert_eq!(by_name("local")["kind"], "local", "{list}");
    let home = by_name("home");
    assert_eq!(home["state"], "connected", "{list}");
    assert_eq!(home["kind"], "gateway", "{list}");
    assert_eq!(home["target"], url(&t.home), "{list}");
    assert!(
        home["server"]
            .as_str()
            .is_some_and(|s| s.starts_with("switchboard ")),
        "{list}"
    );
    let team = by_name("team");
    assert_eq!(team["state"], "refused", "{list}");
    assert!(
        team["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused")),
        "{list}"
    );
    let table = text(&t.named("not-the-token", &["gateways"]).stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("team ") && l.contains(" refused ")),
        "{table}"
    );
}

#[test]
fn names_and_places_given_twice_are_usage_errors() {
    let local = CliBench::new(CONFIG);
    let run = |args: &[&str]| {
        let mut c = local.command(args);
        c.env_remove("SWITCHBOARD_GATEWAY_TOKEN");
        bounded(c)
    };
    for (args, said) in [
        (
            vec![
                "--connect",
                "a=ws://127.0.0.1:1",
                "--connect",
                "a=ws://127.0.0.1:2",
            ],
            "two sources are named \"a\"",
        ),
        (
            vec![
                "--connect",
                "a=ws://127.0.0.1:1",
                "--connect",
                "b=WS://127.0.0.1:1/",
            ],
            "the same place",
        ),
        // The local folder is `local` unless the config says otherwise.
        (
            vec!["--connect", "local=ws://127.0.0.1:1"],
            "two sources are named \"local\"",
        ),
        (
            vec!["--connect", "Team=ws://127.0.0.1:1"],
            "may use only a-z",
        ),
        (
            vec![
                "--connect",
                "ws://127.0.0.1:1",
                "--connect",
                "b=ws://127.0.0.1:2",
            ],
            "name each one",
        ),
        (
            vec![
                "--connect",
                "a=ws://127.0.0.1:1",
                "--connect",
                "b=ws://127.0.0.1:2",
                "--token",
                "secret",
            ],
            "--token NAME=TOKEN",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["sessions", "list"]);
        let out = run(&all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
}

#[test]
fn the_configs_gateways_are_the_sources_with_their_tokens() {
    let home = gateway_process::start_with_config(CONFIG, &[]);
    // The token file relative to the config's folder; the other gateway's variable unset.
    let config = format!(
        r#"{{ localSource: "mine", gateways: [
  {{ name: "home", url: "{}", tokenFile: "home.token" }},
  {{ name: "oc", url: "ws://127.0.0.1:9", tokenEnv: "SWITCHBOARD_TEST_UNSET_TOKEN" }},
] }}"#,
        url(&home)
    );
    let bench = CliBench::new(&config);
    let token_file = bench.config.with_file_name("home.token");
    std::fs::write(&token_file, TOKEN).expect("token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }
    let mut c = bench.command(&["gateways", "--json"]);
    c.env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .env_remove("SWITCHBOARD_TEST_UNSET_TOKEN");
    let out = bounded(c);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    let states: Vec<(String, String)> = list
        .as_array()
        .expect("rows")
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap_or("").to_string(),
                g["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // The local folder is not made yet: listed as missing, named as the config says.
    assert_eq!(
        states,
        [
            ("mine", "missing"),
            ("home", "connected"),
            ("oc", "no token")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
        "{list}"
    );
    let oc = &list[2]["message"];
    assert!(
        oc.as_str()
            .is_some_and(|m| m.contains("gateways[1].tokenEnv")),
        "the missing token names the config field: {list}"
    );
}
