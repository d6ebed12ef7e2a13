//! End to end: the composer as an editor in the real binary (`switchboard demo` in tmux).
//! A two-line message is typed, the cursor keys go back to fix a word in its first line,
//! Enter sends it, and the stored transcript (read by `switchboard sessions show --json`
//! from the demo's own state folder, while the demo runs) holds the corrected text with its
//! newline; Ctrl+C then clears a draft without quitting, and a second one quits.
//!
//! Each test has its own tmux server (killed on drop, also on failure). Nothing is timed:
//! each step polls the screen (every 100 ms, up to a limit). Without tmux the test says so
//! and passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::BIN;

const STEP: Duration = Duration::from_secs(15);
/// The demo seeds a dozen sessions before the console settles; generous, as it only polls.
const START: Duration = Duration::from_secs(90);

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// One tmux server with a 120×40 session running the demo; killed on drop.
struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn demo() -> Tmux {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("tmp")).expect("tmp");
        let script = format!(
            "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR RUST_LOG RUST_BACKTRACE\n\
             export XDG_CONFIG_HOME={xdg} SWITCHBOARD_STATE_DIR={state} TMPDIR={tmp}\n\
             {bin} demo --pace-ms 300\n\
             echo \"EXITED $?\"\n\
             sleep 60\n",
            xdg = q(&dir.path().join("xdg")),
            state = q(&dir.path().join("state")),
            tmp = q(&dir.path().join("tmp")),
            bin = q(Path::new(BIN)),
        );
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script).expect("write the script");
        let t = Tmux {
            socket: format!("sb-e2e-composer-{}", std::process::id()),
            dir,
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
    fn wait_for_within(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() <= limit,
                "timed out waiting for {what} after {limit:?}; the screen was:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[track_caller]
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(what, STEP, done)
    }

    /// The demo's state folder (a fresh one under the scratch TMPDIR).
    fn demo_state(&self) -> PathBuf {
        std::fs::read_dir(self.dir.path().join("tmp"))
            .expect("the scratch TMPDIR")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("switchboard-demo-"))
            })
            .expect("the demo's state folder")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

fn hint_bar(screen: &str) -> &str {
    screen.lines().nth(39).unwrap_or("")
}

/// The session the composer writes to, from its title.
fn composer_target(screen: &str) -> Option<String> {
    let at = screen.find("Write to ")? + "Write to ".len();
    let rest = &screen[at..];
    Some(rest[..rest.find(' ')?].to_string())
}

#[test]
fn a_multi_line_message_fixed_with_cursor_keys_is_stored_as_fixed() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipping this end-to-end test");
        return;
    }
    let t = Tmux::demo();
    t.wait_for_within("the console", START, |s| {
        s.contains(" Switchboard · ") && s.contains("┌ Sessions ")
    });
    t.keys(&["i"]);
    let screen = t.wait_for("the composer", |s| hint_bar(s).contains("enter send"));
    let key = composer_target(&screen).expect("the composer names its session");

    // Two lines (Alt+Enter between them), a typo in the first.
    t.type_text("the deploy is fixde");
    t.keys(&["M-Enter"]);
    t.type_text("thanks");
    t.wait_for("both lines in the box", |s| {
        s.contains("│the deploy is fixde") && s.contains("│thanks") && s.contains("line 2/2")
    });
    // Up to the first line (the cursor is not on it, so not history), to its end, one left,
    // delete the stray `d`, one right, and type it where it belongs.
    t.keys(&["Up", "End", "Left", "BSpace", "Right", "d"]);
    t.wait_for("the fixed first line", |s| {
        s.contains("│the deploy is fixed") && s.contains("│thanks") && s.contains("line 1/2")
    });
    t.keys(&["Enter"]);
    t.wait_for("the message in the transcript, on two lines", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines
            .windows(2)
            .any(|w| w[0].contains("owner: the deploy is fixed") && w[1].contains("thanks"))
    });
    // Sent: the box is empty and one line high again.
    let screen = t.capture();
    assert!(!screen.contains("line 1/2"), "{screen}");

    // The stored transcript, read from the demo's state by the CLI.
    let show = Command::new(BIN)
        .env_remove("SWITCHBOARD_CONFIG")
        .env("XDG_CONFIG_HOME", t.dir.path().join("xdg"))
        .arg("--state-dir")
        .arg(t.demo_state())
        .args(["sessions", "show", &key, "--messages", "200", "--json"])
        .output()
        .expect("switchboard sessions show");
    let stored = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.status.success(),
        "{stored}{}",
        String::from_utf8_lossy(&show.stderr)
    );
    assert!(
        stored.contains(r"the deploy is fixed\nthanks"),
        "the corrected text with its newline in {key}:\n{stored}"
    );
    assert!(!stored.contains("fixde"), "{stored}");

    // Ctrl+C clears a draft and keeps the console; a second one quits.
    t.type_text("never mind");
    t.wait_for("the draft", |s| s.contains("│never mind"));
    t.keys(&["C-c"]);
    t.wait_for("the draft cleared", |s| {
        !s.contains("│never mind") && s.contains("draft cleared")
    });
    t.keys(&["C-c"]);
    t.wait_for("the program ended", |s| s.contains("EXITED 0"));
}
