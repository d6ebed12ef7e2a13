//! The end-to-end harness: the real `switchboard` binary in a real terminal (one tmux server
//! per test, killed when the test ends, also on failure), driven by keys and read back with
//! `capture-pane`, plus the screen helpers several end-to-end tests share.
//!
//! Nothing is timed: every wait polls the screen (every 100 ms) up to a bound, and a wait
//! that runs out fails with the screen, the pane's processes and whether the alternate
//! screen is on, so a failure says what the console showed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long one step may take before the test fails (debug builds on a 2-core machine
/// running the other end-to-end tests at once). Polling, so a generous bound costs nothing
/// when things are quick.
pub const STEP: Duration = Duration::from_secs(30);
/// Starting the console or the demo (which seeds a dozen sessions and waits for their
/// exchanges first): seen past 30 s once on a loaded machine.
pub const START: Duration = Duration::from_secs(90);
/// How often a wait looks at the screen.
const POLL: Duration = Duration::from_millis(100);
/// The tmux session every test drives.
pub const SESSION: &str = "console";

/// Whether tmux can be run at all.
pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this run is CI's: `CI` set to anything but empty, `0` or `false` (GitHub Actions,
/// GitLab and most runners set `CI=true`).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// What a test that needs tmux does without it: under CI it fails saying so; elsewhere it
/// says it is skipped (the caller then returns, passing).
#[track_caller]
pub fn tmux_missing() {
    assert!(
        !under_ci(),
        "tmux is not installed and CI is set: the end-to-end tests cannot run (install tmux)"
    );
    eprintln!("tmux is not installed: skipping this end-to-end test");
}

/// Return early (passing) when tmux is missing, saying why; under CI (`CI=true`) fail
/// instead, so a runner without tmux cannot report the end-to-end tests green.
// Test binaries without a tmux test include this module too (through `mod common`).
#[allow(unused_macros)]
macro_rules! require_tmux {
    () => {
        if !$crate::common::tmux::tmux_available() {
            $crate::common::tmux::tmux_missing();
            return;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use require_tmux;

/// One tmux server with one 120×40 session running a `sh` script, and a scratch folder
/// that lives as long as the test; the server is killed on drop.
pub struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    /// Start a `sh` script in a detached 120×40 session; `script` gets the scratch folder
    /// and returns the script's body (usually [`script`]'s).
    pub fn start(name: &str, script: impl FnOnce(&Path) -> String) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        // Unique per process, test and call: tests run in parallel, each on its own server.
        let socket = format!(
            "sb-e2e-{}-{}-{}",
            std::process::id(),
            name,
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script(dir.path())).expect("write the script");
        let tmux = Tmux { socket, dir };
        let out = tmux.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            SESSION,
            &format!("sh {}", q(&path)),
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    /// `switchboard demo --pace-ms 300`, with `env` (shell lines) set first. Its log goes
    /// under `<scratch>/state`, its temporary state folder under `<scratch>/tmp`.
    pub fn demo(name: &str, env: &str) -> Tmux {
        Tmux::demo_paced(name, env, 300)
    }

    /// [`Tmux::demo`] with the traffic's pace, in milliseconds, set (60000 holds the traffic
    /// back for a minute, leaving the seed's sessions as it left them).
    pub fn demo_paced(name: &str, env: &str, pace_ms: u32) -> Tmux {
        Tmux::start(name, |dir| {
            // The demo's temporary state goes under TMPDIR: keep it in the scratch folder.
            std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
            let env = format!(
                "export SWITCHBOARD_STATE_DIR={} TMPDIR={}\n{env}",
                q(&dir.join("state")),
                q(&dir.join("tmp"))
            );
            let command = format!("{} demo --pace-ms {pace_ms}", q(Path::new(super::BIN)));
            script(&env, &command, &dir.join("xdg"))
        })
    }

    /// A scratch folder that lives as long as the test.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The state folder a demo started by [`Tmux::demo`] works in (a fresh one under the
    /// scratch TMPDIR), once it has its database.
    pub fn demo_state(&self) -> PathBuf {
        let tmp = self.dir().join("tmp");
        std::fs::read_dir(&tmp)
            .expect("the scratch TMPDIR")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("switchboard-demo-"))
                    && p.join("switchboard.db").exists()
            })
            .unwrap_or_else(|| panic!("no demo state folder in {}", tmp.display()))
    }

    /// Run tmux on this test's server.
    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            // No user config: the same tmux everywhere.
            .args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The screen as plain text.
    pub fn capture(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", SESSION]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen with its attributes as escape sequences (`capture-pane -e`).
    pub fn capture_escaped(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-e", "-t", SESSION]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Press keys by tmux name (`Escape`, `Enter`, `q`, `C-c`).
    #[track_caller]
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(
            out.status.success(),
            "send-keys {keys:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Type `text` literally.
    #[track_caller]
    pub fn type_text(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", SESSION, "-l", text]);
        assert!(
            out.status.success(),
            "send-keys -l {text:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A tmux format value of the pane (`#{alternate_on}`, `#{pane_pid}` …).
    pub fn display(&self, format: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", SESSION, format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The pane's processes (for a failure message).
    fn processes(&self) -> String {
        let pid = self.display("#{pane_pid}");
        if pid.is_empty() {
            return "(the pane is gone)".to_string();
        }
        Command::new("ps")
            .args(["-o", "pid,stat,etime,time,args", "--ppid", &pid, "-p", &pid])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Poll the screen until `done` holds and return that screen; fail with the last
    /// screen after `limit`.
    #[track_caller]
    pub fn wait_for_within(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
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
            std::thread::sleep(POLL);
        }
    }

    /// [`Tmux::wait_for_within`] one [`STEP`].
    #[track_caller]
    pub fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(what, STEP, done)
    }

    /// Wait until `text` is on screen.
    #[track_caller]
    pub fn wait_for_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Asked of the server, not of the console's session: a test may have killed that.
        let out = self.tmux(&["display-message", "-p", "#{socket_path}"]);
        let socket = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let _ = self.tmux(&["kill-server"]);
        // tmux leaves its socket file behind when killed.
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// A shell-quoted path.
pub fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The script around a command: an isolated environment (none of the user's switchboard,
/// colour or log settings), `env` (shell lines), the command, then after it ends its exit
/// code (`EXITED n`) and the terminal's mode (`STTY …`, see [`assert_cooked`]), so both can
/// be read on the screen; the shell then waits so the screen stays.
pub fn script(env: &str, command: &str, xdg: &Path) -> String {
    format!(
        "unset SWITCHBOARD_STATE_DIR SWITCHBOARD_CONFIG NO_COLOR COLORTERM RUST_LOG RUST_BACKTRACE\n\
         export XDG_CONFIG_HOME={xdg}\n\
         {env}\n\
         {command}\n\
         echo \"EXITED $?\"\n\
         echo \"STTY $(stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo|icrnl)$' | tr '\\n' ' ')\"\n\
         sleep 60\n",
        xdg = q(xdg),
    )
}

/// The `STTY` line [`script`] prints shows a cooked terminal (raw mode off).
#[track_caller]
pub fn assert_cooked(screen: &str) {
    let stty = screen
        .lines()
        .find(|l| l.starts_with("STTY "))
        .unwrap_or_default();
    for flag in ["icanon", "echo", "icrnl"] {
        assert!(
            stty.split_whitespace().any(|w| w == flag),
            "raw mode is off ({flag}): {stty}"
        );
    }
}

/// Row `y` of a screen.
pub fn row(screen: &str, y: usize) -> &str {
    screen.lines().nth(y).unwrap_or("")
}

/// The header (first row).
pub fn header(screen: &str) -> &str {
    row(screen, 0)
}

/// The status line (third to last row of a 40-row screen: the notice line and the hint
/// bar are below it).
pub fn status_line(screen: &str) -> &str {
    row(screen, 37)
}

/// The hint bar (last row).
pub fn hint_bar(screen: &str) -> &str {
    row(screen, 39)
}

/// The sessions pane's rows (the left column, under its title).
pub fn sessions_pane(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip(2)
        .take(33)
        .map(|l| l.chars().take(50).collect())
        .collect()
}

/// Whether some occurrence of `text` on the escaped screen is drawn reversed: the SGR
/// parameters since the last reset before it include 7.
pub fn reversed(escaped: &str, text: &str) -> bool {
    let sgr = regex::Regex::new(r"\x1b\[([0-9;:]*)m").expect("regex");
    escaped.match_indices(text).any(|(at, _)| {
        let mut on = false;
        for c in sgr.captures_iter(&escaped[..at]) {
            for p in c[1].split(';') {
                match p {
                    "" | "0" | "27" => on = false,
                    "7" => on = true,
                    _ => {}
                }
            }
        }
        on
    })
}

/// The console's frame is on screen.
pub fn console_shown(screen: &str) -> bool {
    screen.contains(" Switchboard · ") && screen.contains("┌ Sessions ")
}

/// Every SGR sequence's parameter list on an escaped screen (`\x1b[1;38;5;9m` →
/// `"1;38;5;9"`).
pub fn sgr_lists(escaped: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\x1b\[([0-9;:]*)m").expect("regex");
    re.captures_iter(escaped)
        .map(|c| c[1].to_string())
        .collect()
}
