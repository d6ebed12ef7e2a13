//! End to end with several sources (issue 27): the local state folder and two real
//! `switchboard serve` processes in one real console (tmux, 120×40), attached with
//! `--connect team=… --connect lab=…`. The merged sessions pane shows every source's rows with
//! the source column, the same key on two sources as two rows; the header names each source;
//! `O` shows one source only; a message typed into one source's session reaches only that
//! source; and when one gateway dies its rows stay (greyed) while the header and a notice say
//! it is reconnecting.

use crate::common;

use std::path::Path;
use std::process::Command;

use crate::e2e_remote::Gateway;
use common::BIN;
use common::tmux::{Tmux, header, q, require_tmux, script, sessions_pane};

const TOKEN: &str = "e2e-sources-token-0123456789";
const CONFIG: &str = r#"{ localSource: "home", agents: { list: [ { id: "main", default: true,
  model: "scripted", script: [ { reply: "re: {{text}}" } ] } ] } }"#;

/// `switchboard serve` on its own state folder under `dir/name`; killed when dropped.
fn gateway(dir: &Path, name: &str) -> Gateway {
    Gateway::spawn(
        &dir.join(name),
        &dir.join("config.json5"),
        TOKEN,
        &["serve", "--bind", "127.0.0.1:0"],
    )
}

/// `switchboard <args>` on the client's state folder and config (exit 0 required).
fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("SWITCHBOARD_STATE_DIR", dir.join("client"))
        .env("SWITCHBOARD_CONFIG", dir.join("config.json5"))
        .env("SWITCHBOARD_TOKEN_TEAM", TOKEN)
        .env("SWITCHBOARD_TOKEN_LAB", TOKEN)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn two_gateways_and_the_local_folder_in_one_console() {
    require_tmux!();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let team = gateway(dir.path(), "team");
    let lab = gateway(dir.path(), "lab");
    let (team_url, lab_url) = (format!("ws://{}", team.addr), format!("ws://{}", lab.addr));
    let connect = |args: &[&str]| -> Vec<String> {
        let mut v = vec![
            "--connect".to_string(),
            format!("team={team_url}"),
            "--connect".to_string(),
            format!("lab={lab_url}"),
        ];
        v.extend(args.iter().map(|a| a.to_string()));
        v
    };
    // The same key on home and team; a session of lab's own.
    let args = connect(&["inject", "home/agent:main:main", "at home"]);
    run(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let args = connect(&["inject", "team/agent:main:main", "at work"]);
    run(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let args = connect(&["inject", "lab/agent:main:lab-only", "in the lab"]);
    run(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    let command = format!(
        "{} --connect team={team_url} --connect lab={lab_url}",
        q(Path::new(BIN))
    );
    let env = format!(
        "export SWITCHBOARD_STATE_DIR={} SWITCHBOARD_CONFIG={} SWITCHBOARD_TOKEN_TEAM={TOKEN} SWITCHBOARD_TOKEN_LAB={TOKEN}",
        q(&dir.path().join("client")),
        q(&dir.path().join("config.json5"))
    );
    let t = Tmux::start("sources", |scratch| {
        script(&env, &command, &scratch.join("xdg"))
    });

    // Every source in the header, every row with its source.
    let screen = t.wait_for("three sources merged", |s| {
        let rows = sessions_pane(s);
        header(s).contains("home ●")
            && header(s).contains("team ●")
            && header(s).contains("lab ●")
            && rows
                .iter()
                .any(|l| l.contains("home ") && l.contains("agent:main:main"))
            && rows
                .iter()
                .any(|l| l.contains("team ") && l.contains("agent:main:main"))
            && rows
                .iter()
                .any(|l| l.contains("lab ") && l.contains("agent:main:lab-only"))
    });
    assert!(
        sessions_pane(&screen).iter().any(|l| l.contains("src")),
        "the source column:\n{screen}"
    );

    // `O`: home only (1 key), then team (2), then lab, then all.
    t.keys(&["O"]);
    t.wait_for("home's sessions only", |s| {
        s.contains("[home]")
            && !sessions_pane(s)
                .iter()
                .any(|l| l.contains("team ") || l.contains("lab "))
    });
    t.keys(&["O"]);
    let screen = t.wait_for("team's sessions only", |s| {
        s.contains("[team]") && sessions_pane(s).iter().any(|l| l.contains("team "))
    });
    assert!(
        !sessions_pane(&screen).iter().any(|l| l.contains("home ")),
        "{screen}"
    );
    // Write into team's agent:main:main (the only row now): only team records it.
    t.wait_for_text("┌ team/agent:main:main ");
    t.keys(&["i"]);
    t.type_text("only for the team");
    t.keys(&["Enter"]);
    t.wait_for_text("agent: re: only for the team");
    t.keys(&["Escape"]);
    let team_show = run(
        dir.path(),
        &connect(&["sessions", "show", "team/agent:main:main"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(team_show.contains("only for the team"), "{team_show}");
    let home_show = run(
        dir.path(),
        &connect(&["sessions", "show", "home/agent:main:main"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(!home_show.contains("only for the team"), "{home_show}");
    // Back to every source.
    t.keys(&["O", "O"]);
    t.wait_for("every source again", |s| {
        !s.contains("[lab]") && !s.contains("[team]")
    });

    // lab dies: its rows stay, the header says it reconnects, a notice names it.
    drop(lab);
    let screen = t.wait_for("lab reconnecting, its row kept", |s| {
        header(s).contains("lab ◌ reconnecting")
            && sessions_pane(s)
                .iter()
                .any(|l| l.contains("agent:main:lab-only"))
    });
    assert!(
        screen.contains("source lab: lost, reconnecting"),
        "the notice:\n{screen}"
    );
    drop(team);
    t.keys(&["q"]);
    let screen = t.wait_for_text("EXITED");
    assert!(screen.contains("EXITED 0"), "{screen}");
}

/// A gateway taken out of the config while the console runs: its rows leave, the header
/// says it was removed and a notice names it; the other sources go on.
#[test]
fn a_gateway_removed_from_the_config_leaves_the_running_console() {
    require_tmux!();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let team = gateway(dir.path(), "team");
    let lab = gateway(dir.path(), "lab");
    let with = |gateways: &str| {
        format!(
            r#"{{ localSource: "home", gateways: [{gateways}], agents: {{ list: [ {{ id: "main",
  default: true, model: "scripted", script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }} }}"#
        )
    };
    let team_entry = format!(
        r#"{{ name: "team", url: "ws://{}", tokenEnv: "TEAM_TOKEN" }}"#,
        team.addr
    );
    let lab_entry = format!(
        r#"{{ name: "lab", url: "ws://{}", tokenEnv: "LAB_TOKEN" }}"#,
        lab.addr
    );
    let config = dir.path().join("client-config.json5");
    std::fs::write(&config, with(&format!("{team_entry}, {lab_entry}"))).expect("config");
    let inject = |key: &str| {
        let out = Command::new(BIN)
            .args(["inject", key, "hello"])
            .env("SWITCHBOARD_STATE_DIR", dir.path().join("client"))
            .env("SWITCHBOARD_CONFIG", &config)
            .env("TEAM_TOKEN", TOKEN)
            .env("LAB_TOKEN", TOKEN)
            .output()
            .expect("inject");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    inject("team/agent:main:t1");
    inject("lab/agent:main:l1");

    let env = format!(
        "export SWITCHBOARD_STATE_DIR={} SWITCHBOARD_CONFIG={} TEAM_TOKEN={TOKEN} LAB_TOKEN={TOKEN}",
        q(&dir.path().join("client")),
        q(&config)
    );
    let t = Tmux::start("sources-config", |scratch| {
        script(&env, &q(Path::new(BIN)), &scratch.join("xdg"))
    });
    t.wait_for("both gateways' rows", |s| {
        let rows = sessions_pane(s);
        rows.iter().any(|l| l.contains("agent:main:t1"))
            && rows.iter().any(|l| l.contains("agent:main:l1"))
    });
    // lab leaves the config.
    std::fs::write(&config, with(&team_entry)).expect("config without lab");
    let screen = t.wait_for("lab removed", |s| {
        header(s).contains("lab ✗ removed")
            && !sessions_pane(s).iter().any(|l| l.contains("agent:main:l1"))
    });
    assert!(
        screen.contains("source lab: removed from the config"),
        "the notice:\n{screen}"
    );
    assert!(
        sessions_pane(&screen)
            .iter()
            .any(|l| l.contains("agent:main:t1")),
        "{screen}"
    );
    drop((team, lab));
    t.keys(&["q"]);
    let screen = t.wait_for_text("EXITED");
    assert!(screen.contains("EXITED 0"), "{screen}");
}
