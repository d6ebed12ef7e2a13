//! The command line over `--connect`: a real `switchboard serve` process and the real
//! binary as its client. Commands that use the API behave as they do locally; commands that
//! need a local state folder say so (exit 2); an unreachable or refusing gateway is a clear
//! error (exit 1), at once.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const WAIT: Duration = Duration::from_secs(60);
const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;

/// A running `serve` on a free port, its state folder holding the generated token.
struct Gateway {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    _stderr: mpsc::Receiver<String>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", dir.path().join("config.json5"))
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = loop {
        let line = rx.recv_timeout(WAIT).expect("serve prints its address");
        if let Some(a) = line.split("listening on ").nth(1) {
            break a.trim().to_string();
        }
    };
    Gateway {
        child,
        url,
        dir,
        _stderr: rx,
    }
}

impl Gateway {
    /// The binary with `--connect`, from a folder of its own (no local state), with the
    /// token given as `token` (None: none at all).
    fn client(&self, token: Option<&str>, args: &[&str]) -> Output {
        let elsewhere = self.dir.path().join("client");
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(&elsewhere)
            .args(["--connect", &self.url])
            .args(args)
            .env_remove("SWITCHBOARD_STATE_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
            .stdin(Stdio::null());
        if let Some(t) = token {
            c.env("SWITCHBOARD_GATEWAY_TOKEN", t);
        }
        bounded(c)
    }

    fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state").join("gateway-token"))
            .expect("serve generated a token")
            .trim()
            .to_string()
    }
}

/// Runs a command; more than `WAIT` is a hang and fails the test.
fn bounded(mut c: Command) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let id = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(WAIT) {
        Ok(out) => out.expect("output"),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("the command hung");
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn commands_run_on_the_gateways_engine() {
    let g = start();
    let t = g.token();
    let token = Some(t.as_str());
    let reply = ok(&g.client(
        token,
        &[
            "inject",
            "agent:main:main",
            "hello",
            "--channel",
            "telegram",
        ],
    ));
    assert_eq!(reply.trim(), "re: hello");

    let rows: Value =
        serde_json::from_str(&ok(&g.client(token, &["sessions", "list", "--json"]))).expect("json");
    let keys: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert_eq!(keys, ["agent:main:main"]);

    ok(&g.client(
        token,
        &["sessions", "patch", "main", "--send-policy", "off"],
    ));
    let shown: Value = serde_json::from_str(&ok(
        &g.client(token, &["sessions", "show", "agent:main:main", "--json"])
    ))
    .expect("json");
    assert_eq!(shown["sendPolicyEffective"]["policy"], "deny", "{shown}");
    let texts: Vec<String> = shown["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert!(texts.iter().any(|m| m.contains("re: hello")), "{texts:?}");

    let history: Value = serde_json::from_str(&ok(&g.client(
        token,
        &["tool", "sessions_history", r#"{"sessionKey": "main"}"#],
    )))
    .expect("json");
    assert!(history.to_string().contains("re: hello"), "{history}");

    // Bad input is still exit 2 through the gateway.
    let unknown = g.client(token, &["tool", "no_such_tool"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert!(text(&unknown.stderr).contains("unknown tool"));
}

#[test]
fn local_only_commands_say_so() {
    let g = start();
    let t = g.token();
    for args in [
        &["sessions", "export", "main"][..],
        &["config", "check"][..],
        &["import-openclaw", "/nonexistent"][..],
        &["demo"][..],
        &["serve"][..],
    ] {
        let out = g.client(Some(&t), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("works on a local state folder only"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_refusing_or_missing_gateway_is_a_clear_error() {
    let g = start();
    let wrong = g.client(Some("not-the-token"), &["sessions", "list"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        text(&wrong.stderr).contains("unauthorized"),
        "{}",
        text(&wrong.stderr)
    );
    let none = g.client(None, &["sessions", "list"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        text(&none.stderr).contains("pass --token"),
        "{}",
        text(&none.stderr)
    );

    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let mut c = Command::new(BIN);
    c.args(["--connect", &format!("ws://{free}"), "sessions", "list"])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN");
    let gone = bounded(c);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        text(&gone.stderr).contains("cannot reach"),
        "{}",
        text(&gone.stderr)
    );
}

#[test]
fn a_loopback_gateway_token_is_read_from_the_state_folder() {
    let g = start();
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(g.dir.path().join("state"))
        .args(["--connect", &g.url, "sessions", "list", "--json"])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .env_remove("SWITCHBOARD_STATE_DIR");
    let out = bounded(c);
    assert_eq!(ok(&out).trim(), "[]");
}
