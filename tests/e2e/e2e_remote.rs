//! End to end over `--connect`: a real `switchboard serve` process, and the real console
//! attached to it in a real terminal (tmux, 120×40), driven by keys and read back with
//! `capture-pane`. The sessions appear, a message typed in the console gets its agent's
//! reply, `/send off` takes effect, and when the gateway is killed and started again on the
//! same port the console says it is reconnecting, then resynced, and shows new messages.
//!
//! Nothing is timed: each step polls the screen (tests/common/tmux.rs, up to a bound) for
//! what it expects. Without tmux the test says so and passes.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use common::BIN;
use common::tmux::{STEP, Tmux, header, q, require_tmux, script, sessions_pane, status_line};

const TOKEN: &str = "e2e-remote-token-0123456789";
const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;

/// `switchboard serve` on `bind` over the state in `dir`; killed when dropped.
pub(crate) struct Gateway {
    child: Child,
    pub(crate) addr: String,
    _stderr: mpsc::Receiver<String>,
}

impl Gateway {
    fn start(dir: &Path, bind: &str) -> Gateway {
        Gateway::start_with(dir, &["serve", "--bind", bind])
    }

    /// `switchboard` with `args` (a `serve` command line) over the state in `dir`.
    fn start_with(dir: &Path, args: &[&str]) -> Gateway {
        Gateway::spawn(&dir.join("server"), &dir.join("config.json5"), TOKEN, args)
    }

    /// `switchboard` with `args` (a `serve` command line) on `state` with `config`, the
    /// gateway token `token`, once it prints its address.
    pub(crate) fn spawn(state: &Path, config: &Path, token: &str, args: &[&str]) -> Gateway {
        let mut child = Command::new(BIN)
            .args(args)
            .env("SWITCHBOARD_STATE_DIR", state)
            .env("SWITCHBOARD_CONFIG", config)
            .env("SWITCHBOARD_GATEWAY_TOKEN", token)
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
        let mut seen = Vec::new();
        let addr = loop {
            let line = rx
                .recv_timeout(STEP)
                .unwrap_or_else(|_| panic!("serve printed no address: {seen:?}"));
            if let Some(a) = line.split("listening on ws://").nth(1) {
                break a.trim().to_string();
            }
            seen.push(line);
        };
        Gateway {
            child,
            addr,
            _stderr: rx,
        }
    }

    /// Killed outright (SIGKILL): no goodbye to its clients.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `switchboard --connect <url> inject …` from outside the console (exit 0 required).
fn inject(client_state: &Path, url: &str, key: &str, text: &str) -> String {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(client_state)
        .args([
            "--connect",
            url,
            "inject",
            key,
            text,
            "--channel",
            "telegram",
        ])
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("inject runs");
    assert!(
        out.status.success(),
        "inject: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_remote_console_sends_changes_policy_and_survives_a_gateway_restart() {
    require_tmux!();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let gateway = Gateway::start(dir.path(), "127.0.0.1:0");
    let url = format!("ws://{}", gateway.addr);
    let client_state: PathBuf = dir.path().join("client");
    // A session before the console starts.
    assert_eq!(
        inject(&client_state, &url, "agent:main:main", "before").trim(),
        "re: before"
    );

    let command = format!(
        "{} --state-dir {} --connect {url}",
        q(Path::new(BIN)),
        q(&client_state)
    );
    let t = Tmux::start("remote", |scratch| {
        script(
            &format!("export SWITCHBOARD_GATEWAY_TOKEN={TOKEN}"),
            &command,
            &scratch.join("xdg"),
        )
    });

    // Attached: the header names the gateway and the link; the session is listed.
    t.wait_for(
        "the console attached, the session and its transcript",
        |s| {
            header(s).contains(&format!("{url} · connected v4"))
                && sessions_pane(s)
                    .iter()
                    .any(|l| l.contains("agent:main:main"))
                && s.contains("agent: re: before")
        },
    );
    // The round trip is measured.
    t.wait_for("a round-trip time in the header", |s| {
        header(s).contains(" ms · ")
    });

    // A message from the console: the agent's reply comes back through the gateway.
    t.keys(&["i"]);
    t.type_text("hello from afar");
    t.wait_for_text("│hello from afar");
    t.keys(&["Enter"]);
    t.wait_for_text("agent: re: hello from afar");

    // `/send off`: the engine's answer (in the transcript, and in the status line until the
    // session's own policy replaces it there), the session's policy overridden.
    t.type_text("/send off");
    t.wait_for_text("│/send off");
    t.keys(&["Enter"]);
    t.wait_for("the new policy on screen", |s| {
        s.contains("Send policy set to off")
            && (status_line(s).contains("Send policy set to off")
                || status_line(s).contains("send: deny"))
            && sessions_pane(s)
                .iter()
                .any(|l| l.contains("agent:main:main") && l.contains("deny*"))
    });
    t.keys(&["Escape"]);

    // The gateway dies: the console says it is reconnecting (and keeps drawing).
    let port = gateway.addr.clone();
    gateway.kill();
    t.wait_for("the header saying it reconnects", |s| {
        header(s).contains("reconnecting in ")
    });
    // Back on the same port, the same state: reconnected, and the console resynced.
    let _gateway = Gateway::start(dir.path(), &port);
    t.wait_for("the header saying it resynced", |s| {
        header(s).contains("connected v4") && header(s).contains("resynced")
    });
    // New messages arrive again (the subscription was renewed).
    inject(&client_state, &url, "agent:main:main", "after the restart");
    t.wait_for_text("agent: re: after the restart");
    // The policy set before the restart is still in force, as stored on the server.
    let screen = t.capture();
    assert!(
        sessions_pane(&screen)
            .iter()
            .any(|l| l.contains("agent:main:main") && l.contains("deny*")),
        "{screen}"
    );

    t.keys(&["q"]);
    let screen = t.wait_for_text("EXITED");
    assert!(screen.contains("EXITED 0"), "{screen}");
}

/// `serve --demo` gives a console attached from elsewhere live traffic: the rounds pane
/// of every session fills with exchanges (before, a remote console on a fresh `serve` was
/// empty: the demo's agents ran only inside the local `demo`). Keys: `a` (every session's
/// rounds).
#[test]
fn a_console_attached_to_serve_demo_shows_the_demo_rounds() {
    require_tmux!();
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::start_with(
        dir.path(),
        &[
            "serve",
            "--demo",
            "--demo-pace-ms",
            "300",
            "--bind",
            "127.0.0.1:0",
        ],
    );
    let url = format!("ws://{}", gateway.addr);
    let command = format!(
        "{} --state-dir {} --connect {url}",
        q(Path::new(BIN)),
        q(&dir.path().join("client"))
    );
    let t = Tmux::start("remote-demo", |scratch| {
        script(
            &format!("export SWITCHBOARD_GATEWAY_TOKEN={TOKEN}"),
            &command,
            &scratch.join("xdg"),
        )
    });
    t.wait_for("attached, the demo's sessions listed", |s| {
        header(s).contains(&format!("{url} · connected v4"))
            && sessions_pane(s)
                .iter()
                .any(|l| l.contains("Alice (Telegram)"))
    });
    t.keys(&["a"]);
    let screen = t.wait_for("the demo's exchanges in the rounds pane", |s| {
        s.contains("Rounds (all)") && s.contains(" round")
    });
    assert!(screen.contains(" → "), "requester → target:\n{screen}");
}
