//! End to end: the owner's third task on `switchboard demo` in a real terminal (tmux): open
//! the traffic view with `v`, see the demo's loop (main → ops #incidents, which always ends at
//! the ping-pong cap) marked, stop it with `S` `y`, and check with `switchboard sessions show`
//! on the demo's state folder that main sends nothing more into #incidents afterwards (its
//! next attempt is refused by the send policy).
//!
//! Nothing is timed: each step polls (every 100 ms, with a generous limit) for what it
//! expects. Without tmux the test says so and passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::BIN;
use serde_json::Value;

const STEP: Duration = Duration::from_secs(30);
/// Starting the demo seeds a dozen sessions first; on a loaded machine this is slow.
const START: Duration = Duration::from_secs(90);
const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:slack:group:incidents";

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One tmux server with one 120×40 session running a script; killed on drop.
struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn start(script: impl FnOnce(&Path) -> String) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "sb-e2e-traffic-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script(dir.path())).expect("write the script");
        let t = Tmux { socket, dir };
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
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
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

    #[track_caller]
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {what}; the screen was:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The demo's own state folder (a temporary one under the scratch TMPDIR).
fn demo_state(tmp: &Path) -> Option<PathBuf> {
    std::fs::read_dir(tmp)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("switchboard-demo-"))
                && p.join("switchboard.db").exists()
        })
}

/// `sessions show KEY --json` on the demo's state, read while the demo runs.
fn show(state: &Path, key: &str) -> Value {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .args(["sessions", "show", key, "--json", "--messages", "200"])
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("switchboard runs");
    assert!(
        out.status.success(),
        "sessions show {key}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The timestamps of messages from `from` recorded in `session`.
fn messages_from(shown: &Value, from: &str) -> Vec<i64> {
    shown["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["provenance"]["sourceSessionKey"] == from)
                .filter_map(|m| m["timestamp"].as_i64())
                .collect()
        })
        .unwrap_or_default()
}

/// The screen's text with the box borders dropped and every line joined by one space, so a
/// prompt wrapped over several rows reads as one sentence.
fn flat(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.trim().trim_matches('│').trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn text_of(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[test]
fn demo_loop_spotted_in_the_traffic_view_and_stopped_in_two_keys() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipping this end-to-end test");
        return;
    }
    let t = Tmux::start(|dir| {
        std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
        format!(
            "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR RUST_LOG RUST_BACKTRACE\n\
             export XDG_CONFIG_HOME={xdg} SWITCHBOARD_STATE_DIR={state} TMPDIR={tmp}\n\
             {bin} demo --pace-ms 300\n\
             echo \"EXITED $?\"\n\
             sleep 60\n",
            xdg = q(&dir.join("xdg")),
            state = q(&dir.join("state")),
            tmp = q(&dir.join("tmp")),
            bin = q(Path::new(BIN)),
        )
    });
    t.wait_for("the console", START, |s| s.contains("┌ Sessions "));
    let state = demo_state(&t.dir.path().join("tmp")).expect("the demo's state folder");

    // The traffic view: main → ops #incidents ends at the cap every time: a likely loop.
    t.keys(&["v"]);
    let pair = format!("{MAIN} → {OPS}");
    let screen = t.wait_for("the loop marked in the traffic view", STEP, |s| {
        s.lines().any(|l| l.contains("LOOP") && l.contains(&pair))
    });
    assert!(screen.contains("┌ Traffic · by session"), "{screen}");

    // Put the cursor on that pair: S names the selected pair, n cancels. Rows re-sort as
    // traffic flows (the cursor stays on its pair), so each try starts again from the top
    // (g) and goes a few rows down: the loop is among the busiest pairs.
    let prompt = format!("stop {pair}?");
    let mut found = false;
    for attempt in 0..30 {
        t.keys(&["g"]);
        for _ in 0..attempt % 6 {
            t.keys(&["j"]);
        }
        t.keys(&["S"]);
        let s = t.wait_for("the confirmation", STEP, |s| {
            flat(s).contains("y to confirm, n to cancel")
        });
        if flat(&s).contains(&prompt) {
            found = true;
            break;
        }
        t.keys(&["n"]);
        t.wait_for("the prompt to go", STEP, |s| {
            !flat(s).contains("y to confirm, n to cancel")
        });
    }
    assert!(found, "the cursor reached {pair}");
    t.keys(&["y"]);
    t.wait_for("the undo hint", STEP, |s| {
        flat(s).contains(&format!(
            "stopped: /send off on {OPS}; undo: /send inherit there (or u here)"
        ))
    });

    // The engine stored the stop; from then on nothing from main arrives in #incidents.
    let start = Instant::now();
    let stopped_at = loop {
        let shown = show(&state, OPS);
        if shown["sendPolicy"] == "deny" {
            break chrono::Utc::now().timestamp_millis();
        }
        assert!(start.elapsed() < STEP, "the stop was not stored: {shown}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // main's next "@ops …" (every 16 demo messages) is refused by #incidents' policy.
    let start = Instant::now();
    loop {
        let main = show(&state, MAIN);
        let refused_later = main["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["role"] == "assistant"
                    && m["timestamp"].as_i64().is_some_and(|ts| ts > stopped_at)
                    && text_of(m).starts_with("Asked ops in #incidents")
                    && text_of(m).contains("send blocked by session policy")
            })
        });
        if refused_later {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "main never tried #incidents again after the stop"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let late: Vec<i64> = messages_from(&show(&state, OPS), MAIN)
        .into_iter()
        .filter(|ts| *ts > stopped_at)
        .collect();
    assert!(
        late.is_empty(),
        "messages from main reached #incidents after the stop: {late:?}"
    );
    let screen = t.wait_for("the pair shown stopped", STEP, |s| {
        s.lines()
            .any(|l| l.contains("STOPPED") && l.contains(&pair))
    });
    assert!(!flat(&screen).contains(&prompt), "{screen}");

    t.keys(&["q"]);
    t.wait_for("the demo to end", STEP, |s| s.contains("EXITED 0"));
}
