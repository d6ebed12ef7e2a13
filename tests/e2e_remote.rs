//! End to end over `--connect`: a real `switchboard serve` process, and the real console
//! attached to it in a real terminal (tmux, 120×40), driven by keys and read back with
//! `capture-pane`. The sessions appear, a message typed in the console gets its agent's
//! reply, `/send off` takes effect, and when the gateway is killed and started again on the
//! same port the console says it is reconnecting, then resynced, and shows new messages.
//!
//! Nothing is timed: each step polls the screen (every 100 ms, up to a bound) for what it
//! expects. Without tmux the test says so and passes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
/// How long one step may take (debug builds on a busy machine).
const STEP: Duration = Duration::from_secs(30);
const TOKEN: &str = "e2e-remote-token-0123456789";
const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A shell-quoted path.
fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// `switchboard serve` on `bind` over the state in `dir`; killed when dropped.
struct Gateway {
    child: Child,
    addr: String,
    _stderr: mpsc::Receiver<String>,
}

impl Gateway {
    fn start(dir: &Path, bind: &str) -> Gateway {
        let mut child = Command::new(BIN)
            .args(["serve", "--bind", bind])
            .env("SWITCHBOARD_STATE_DIR", dir.join("server"))
            .env("SWITCHBOARD_CONFIG", dir.join("config.json5"))
            .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
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

/// One tmux server with one 120×40 session running a script; killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(script: &Path) -> Tmux {
        let tmux = Tmux {
            socket: format!("sb-e2e-remote-{}", std::process::id()),
        };
        let out = tmux.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "console",
            &format!("sh {}", q(script)),
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn capture(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "console"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success(), "send-keys {keys:?}");
    }

    fn type_text(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", "console", "-l", text]);
        assert!(out.status.success(), "send-keys -l {text:?}");
    }

    #[track_caller]
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            if start.elapsed() > STEP {
                panic!("timed out waiting for {what}; the screen was:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[track_caller]
    fn wait_for_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let socket = self
            .tmux(&["display-message", "-p", "#{socket_path}"])
            .stdout;
        let _ = self.tmux(&["kill-server"]);
        let socket = String::from_utf8_lossy(&socket).trim().to_string();
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// The header (first row).
fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or("")
}

/// The status line (second to last row of a 40-row screen).
fn status_line(screen: &str) -> &str {
    // Third to last row: the notice line and the hint bar are below it.
    screen.lines().nth(37).unwrap_or("")
}

/// The sessions pane's rows (the left column).
fn sessions_pane(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip(2)
        .take(33)
        .map(|l| l.chars().take(50).collect())
        .collect()
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
    if !tmux_available() {
        eprintln!("tmux is not installed: skipping this end-to-end test");
        return;
    }
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

    let script = dir.path().join("console.sh");
    std::fs::write(
        &script,
        format!(
            "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR RUST_LOG\n\
             export XDG_CONFIG_HOME={xdg} SWITCHBOARD_GATEWAY_TOKEN={TOKEN}\n\
             {bin} --state-dir {state} --connect {url}\n\
             echo \"EXITED $?\"\n\
             sleep 60\n",
            xdg = q(&dir.path().join("xdg")),
            bin = q(Path::new(BIN)),
            state = q(&client_state),
        ),
    )
    .expect("script");
    let t = Tmux::start(&script);

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
