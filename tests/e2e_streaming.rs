//! End to end: the real `switchboard` console in a real terminal (tmux) shows a reply as it
//! streams (a scripted agent with `streamMs`): a provisional `agent:` line with `▍ streaming…`
//! and the session marked `▍` in the list, then the stored line in its place, once.
//!
//! Its own tmux server (`tmux -L <unique socket>`), killed when the test ends. Nothing is
//! timed: each step polls the screen (every 50 ms, up to a bound). Without tmux the test says
//! so and passes.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{BIN, CliBench};

const STEP: Duration = Duration::from_secs(30);
const START: Duration = Duration::from_secs(90);

/// Eight words, 400 ms after each: several seconds of streaming to catch on screen.
const CONFIG: &str = r#"{
  agents: { list: [ { id: "main", default: true, model: "scripted", script: [
    { when: { text: "stream" }, reply: "alpha bravo charlie delta echo foxtrot golf hotel", streamMs: 400 },
    { reply: "pong: {{text}}" },
  ] } ] },
}"#;
const REPLY: &str = "alpha bravo charlie delta echo foxtrot golf hotel";

struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        let dir = tempfile::tempdir().expect("temp dir");
        let xdg = dir.path().join("xdg");
        let script = format!(
            "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR RUST_LOG RUST_BACKTRACE\n\
             export XDG_CONFIG_HOME={}\n{command}\nsleep 60\n",
            q(&xdg)
        );
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script).expect("write the script");
        let t = Tmux {
            socket: format!("sb-e2e-stream-{}", std::process::id()),
            _dir: dir,
        };
        let out = t.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "console",
            &format!("sh {}", q(&path)),
        ]);
        assert!(out.status.success(), "tmux new-session");
        t
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
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            if start.elapsed() > limit {
                panic!("timed out waiting for {what} after {limit:?}; the screen was:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let out = self.tmux(&["display-message", "-p", "#{socket_path}"]);
        let socket = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let _ = self.tmux(&["kill-server"]);
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

#[test]
fn a_streamed_reply_grows_on_screen_then_stands_as_one_line() {
    let tmux_ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !tmux_ok {
        eprintln!("tmux is not installed: skipping this end-to-end test");
        return;
    }
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hello", "--quiet"]);
    let t = Tmux::start(&format!(
        "{} --state-dir {} --config {}",
        q(Path::new(BIN)),
        q(&bench.state),
        q(&bench.config)
    ));
    t.wait_for("the console with the session", START, |s| {
        s.contains("┌ Sessions ") && s.contains("agent: pong: hello")
    });
    t.keys(&["i"]);
    t.type_text("please stream");
    t.wait_for("the composer", STEP, |s| s.contains("│please stream"));
    t.keys(&["Enter"]);

    // Mid-way: part of the reply, the cursor and the indicator; the session marked.
    let mid = t.wait_for("the reply streaming", STEP, |s| {
        s.contains("agent: alpha bravo") && s.contains("▍ streaming…")
    });
    assert!(!mid.contains(REPLY), "the whole reply already: {mid}");
    assert!(
        mid.lines().any(|l| l.starts_with("│▍ main")),
        "the sessions list marks the session: {mid}"
    );

    // Done: the stored line, once, and no indicator.
    let done = t.wait_for("the stored reply", STEP, |s| {
        s.contains(REPLY) && !s.contains("streaming…")
    });
    assert_eq!(done.matches(REPLY).count(), 1, "{done}");
    assert!(!done.contains('▍'), "{done}");
}
