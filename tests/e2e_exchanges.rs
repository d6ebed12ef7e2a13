//! End to end on `switchboard demo` in a real terminal (tmux): the owner finds the exchange
//! between the demo's two named agents (main asking ops in #incidents) in the rounds pane,
//! opens it with Enter, reads every round and how it ended, and closes it with Esc.
//! Nothing is timed: each step polls the screen (every 100 ms) for what it expects. Without
//! tmux the test says so and passes. (The harness is the one of tests/e2e_console.rs.)

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::BIN;

/// How long one step may take before the test fails (debug builds on a busy machine).
const STEP: Duration = Duration::from_secs(15);
/// Starting the demo seeds a dozen sessions and waits for their exchanges first.
const START: Duration = Duration::from_secs(90);

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One tmux server with one 120×40 session running a script; the server is killed on drop.
struct Tmux {
    socket: String,
    target: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Start a `sh` script in a detached 120×40 session; `script` gets a scratch folder
    /// that lives as long as the test and returns the script's body.
    fn start(name: &str, script: impl FnOnce(&Path) -> String) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "sb-e2e-{}-{}-{}",
            std::process::id(),
            name,
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script(dir.path())).expect("write the script");
        let tmux = Tmux {
            socket,
            target: "console".to_string(),
            _dir: dir,
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
            &format!("sh {}", q(&path)),
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
            // No user config: the same tmux everywhere.
            .args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The screen as plain text.
    fn capture(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", &self.target]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Press keys by tmux name (`Escape`, `Enter`, `q`, `C-c`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.target];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "send-keys {keys:?}");
    }

    /// A tmux format value of the pane (`#{alternate_on}`, `#{pane_pid}` …).
    fn display(&self, format: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", &self.target, format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The pane's processes (for a failure message).
    fn processes(&self) -> String {
        let pid = self.display("#{pane_pid}");
        Command::new("ps")
            .args(["-o", "pid,stat,etime,time,args", "--ppid", &pid, "-p", &pid])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Poll the screen until `done` holds; fail with the last screen after `limit`.
    #[track_caller]
    fn wait_for_within(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            if start.elapsed() > limit {
                panic!(
                    "timed out waiting for {what} after {limit:?}; alternate screen: {}, \
                     processes:\n{}\nthe screen was:\n{screen}",
                    self.display("#{alternate_on}"),
                    self.processes()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[track_caller]
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(what, STEP, done)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let socket = self.display("#{socket_path}");
        let _ = self.tmux(&["kill-server"]);
        // tmux leaves its socket file behind when killed.
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// A shell-quoted path.
fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The script around the console: an isolated environment, then after the console ends
/// the exit code and the terminal's mode, so both can be read on the screen.
fn script(env: &str, command: &str, xdg: &Path) -> String {
    format!(
        "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR RUST_LOG RUST_BACKTRACE\n\
         export XDG_CONFIG_HOME={xdg}\n\
         {env}\n\
         {command}\n\
         echo \"EXITED $?\"\n\
         echo \"STTY $(stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo|icrnl)$' | tr '\\n' ' ')\"\n\
         sleep 60\n",
        xdg = q(xdg),
    )
}

/// The console's frame is on screen.
fn console_shown(screen: &str) -> bool {
    screen.contains(" Switchboard · ") && screen.contains("┌ Sessions ")
}

/// The rounds pane's entry headers (`HH:MM requester → target · …`), top to bottom: the
/// right column of the screen, inside the pane's border.
fn entry_headers(screen: &str) -> Vec<String> {
    let re = regex::Regex::new(r"^\d\d:\d\d .+ → .+ · ").expect("regex");
    let mut in_rounds = false;
    let mut out = Vec::new();
    for line in screen.lines() {
        let right: String = line.chars().skip(50).collect();
        if right.contains("┌ Rounds (") {
            in_rounds = true;
            continue;
        }
        if in_rounds && right.starts_with('└') {
            break;
        }
        if in_rounds {
            let inner = right
                .trim_start_matches('│')
                .trim_end_matches('│')
                .to_string();
            if re.is_match(&inner) {
                out.push(inner);
            }
        }
    }
    out
}

#[test]
fn find_the_exchange_between_main_and_ops_open_it_and_read_how_it_ended() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipping this end-to-end test");
        return;
    }
    let t = Tmux::start("exchanges", |dir| {
        std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
        let env = format!(
            "export SWITCHBOARD_STATE_DIR={} TMPDIR={}",
            q(&dir.join("state")),
            q(&dir.join("tmp"))
        );
        let command = format!("{} demo --pace-ms 300", q(Path::new(BIN)));
        script(&env, &command, &dir.join("xdg"))
    });
    t.wait_for_within("the console", START, console_shown);
    // Every session's exchanges, the rounds pane focused (sessions → transcript → rounds).
    t.keys(&["a", "Tab", "Tab"]);
    // main asks ops in #incidents (`@ops …` from Alice); one that has ended.
    let wanted = |h: &str| {
        h.contains(" agent:main:") && h.contains("group:incidents ·") && !h.ends_with("running")
    };
    let screen = t.wait_for_within(
        "a finished exchange from main into #incidents",
        START,
        |s| s.contains("Rounds (all)") && entry_headers(s).iter().any(|h| wanted(h)),
    );
    // From the newest entry down: open each, until the view shows main asking ops. (New
    // exchanges arrive above; the cursor stays on its exchange, so `j` walks older ones.)
    let headers = entry_headers(&screen);
    t.keys(&["g"]);
    let mut found = None;
    for _ in 0..60 {
        t.keys(&["Enter"]);
        let view = t.wait_for("the exchange view", |s| {
            s.contains("┌ Exchange ")
                && s.contains("1 requester · 2 target")
                && !s.contains("loading the exchange")
        });
        let first = view
            .lines()
            .nth(2)
            .unwrap_or_default()
            .trim_matches('│')
            .trim()
            .to_string();
        if first.starts_with("agent:main:")
            && first.ends_with(" → agent:ops:slack:group:incidents")
            && (view.contains("Ended: ") || view.contains("↓"))
            && !view.contains("Still running")
        {
            found = Some(view);
            break;
        }
        t.keys(&["Escape"]);
        t.wait_for("the view closed", |s| !s.contains("┌ Exchange "));
        t.keys(&["j"]);
    }
    let view = found.unwrap_or_else(|| panic!("no exchange from main to ops among {headers:#?}"));
    // Every round with who spoke, and how it ended and why.
    assert!(view.contains("[1] requester agent:main:"), "{view}");
    assert!(
        view.contains("[2] target agent:ops:slack:group:incidents"),
        "{view}"
    );
    assert!(
        view.contains("Round 1 · agent:ops:slack:group:incidents → agent:main:"),
        "{view}"
    );
    assert!(
        view.contains("1 requester · 2 target · j/k scroll · esc close"),
        "{view}"
    );
    // Scrolled to the end: how it ended, and the announce.
    t.keys(&["G"]);
    let end = t.wait_for("how it ended", |s| {
        s.lines().any(|l| l.contains("│Ended: "))
    });
    let ended = end
        .lines()
        .find(|l| l.contains("│Ended: "))
        .unwrap_or_default()
        .to_string();
    assert!(
        [
            "cap reached",
            "REPLY_SKIP",
            "empty reply",
            "timed out",
            "blocked by send policy",
            "a run failed"
        ]
        .iter()
        .any(|r| ended.contains(r)),
        "a known ending: {ended}\n{end}"
    );
    // `2` selects the target in the sessions pane and closes the view.
    t.keys(&["2"]);
    let screen = t.wait_for("ops selected", |s| {
        !s.contains("┌ Exchange ") && s.contains("┌ agent:ops:slack:group:incidents ")
    });
    assert!(console_shown(&screen));
    t.keys(&["q"]);
    let done = t.wait_for("the shell after quitting", |s| s.contains("EXITED"));
    assert!(done.contains("EXITED 0"), "{done}");
}
