//! End to end: searching a transcript in the real `switchboard demo`, in a real terminal
//! (tmux, 120×40): pick #eng-standup, focus its transcript, `/` and a word, Enter; the
//! counter shows on the indicator line, `n` wraps to the first hit, and the hit's text is
//! drawn reversed (read back with `capture-pane -e`). Nothing is timed: each step polls the
//! screen (every 100 ms, up to a limit). Without tmux the test says so and passes.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::BIN;

const STEP: Duration = Duration::from_secs(15);
/// The demo seeds its sessions first; on a loaded 2-core machine this can take a while.
const START: Duration = Duration::from_secs(90);

/// One tmux server running one 120×40 session; killed on drop.
struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(script: impl FnOnce(&Path) -> String) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "sb-e2e-transcript-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("run.sh");
        std::fs::write(&path, script(dir.path())).expect("write the script");
        let t = Tmux { socket, _dir: dir };
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

    fn capture_escaped(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-e", "-t", "console"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success(), "send-keys {keys:?}");
    }

    fn type_text(&self, text: &str) {
        assert!(
            self.tmux(&["send-keys", "-t", "console", "-l", text])
                .status
                .success()
        );
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
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// Whether some occurrence of `text` on the escaped screen is drawn reversed: the SGR
/// parameters since the last reset before it include 7.
fn reversed(escaped: &str, text: &str) -> bool {
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

#[test]
fn search_the_demo_transcript_jump_with_n_and_see_the_hit_highlighted() {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
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
    t.wait_for_within("the console", START, |s| {
        s.contains(" Switchboard · ") && s.contains("┌ Sessions ")
    });
    // Pick #eng-standup with the filter, keep the filter (Enter), focus the transcript.
    t.keys(&["/"]);
    t.type_text("standup");
    t.keys(&["Enter"]);
    t.wait_for("#eng-standup selected", |s| {
        s.contains("┌ agent:ops:discord:group:eng-standup ")
    });
    t.keys(&["Tab"]);
    // Two standups (the demo posts one per round), so `n` has somewhere to go.
    t.wait_for_within("two standup messages", START, |s| {
        s.matches("rate limiter").count() >= 2
    });
    // Search: the box on the indicator line, then the counter (the newest hit current).
    t.keys(&["/"]);
    t.wait_for("the search box", |s| s.contains("│/▏"));
    t.type_text("rate limiter");
    t.keys(&["Enter"]);
    let counter = regex::Regex::new(r"/rate limiter  (\d+)/(\d+)").expect("regex");
    let screen = t.wait_for("the counter at the newest of two or more hits", |s| {
        counter
            .captures(s)
            .is_some_and(|c| c[1] == c[2] && c[2].parse::<u32>().is_ok_and(|n| n >= 2))
    });
    assert!(screen.contains("n/N next/prev"), "{screen}");
    // `n` from the newest wraps to the first.
    t.keys(&["n"]);
    t.wait_for("n wrapped to the first hit", |s| {
        counter
            .captures(s)
            .is_some_and(|c| &c[1] == "1" && c[2].parse::<u32>().is_ok_and(|n| n >= 2))
    });
    let escaped = t.capture_escaped();
    assert!(
        reversed(&escaped, "rate limiter"),
        "the hit is drawn reversed:\n{escaped:?}"
    );
    assert!(
        !reversed(&escaped, "flaky checkout"),
        "only the hit is reversed:\n{escaped:?}"
    );
    t.keys(&["q"]);
    t.wait_for("the shell back", |s| s.contains("EXITED 0"));
}
