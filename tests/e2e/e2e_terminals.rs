//! End to end: the real binary on the terminals owners have (issue 14 item 7), in tmux.
//! `TERM=linux` gets ASCII borders and 16-colour codes, never 256-colour ones; `TERM=dumb`
//! is refused with exit 2; no terminal at all (stdin and stdout not a tty, as with
//! `ssh host switchboard demo` without -t) gives one clear line and exit 2; a flag emoji
//! leaves nothing behind when the selection moves to another session; Ctrl+L repaints
//! over whatever else wrote to the terminal.
//!
//! Each test has its own tmux server (tests/common/tmux.rs), killed when it ends. Nothing is
//! timed: each step polls the screen, up to a bound. Without tmux the tmux tests say so and
//! pass.

use crate::common;

use std::path::Path;
use std::process::Stdio;

use common::tmux::{Tmux, q, require_tmux, script, sgr_lists};
use common::{BIN, CliBench};

/// main answers `pong: <text>`.
const CONFIG: &str = r#"{
  agents: { list: [ { id: "main", default: true, model: "scripted", script: [ { reply: "pong: {{text}}" } ] } ] },
}"#;

/// The console on `bench`'s state, with `env` set first.
fn console(name: &str, bench: &CliBench, env: &str) -> Tmux {
    let command = format!(
        "{} --state-dir {} --config {}",
        q(Path::new(BIN)),
        q(&bench.state),
        q(&bench.config)
    );
    Tmux::start(name, |dir| script(env, &command, &dir.join("xdg")))
}

#[test]
fn term_linux_gets_ascii_borders_and_16_colours() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hi", "--quiet"]);
    let t = console("linux", &bench, "export TERM=linux");
    let screen = t.wait_for_text("Sessions 1/1");
    for c in ['─', '│', '┌', '┐', '└', '┘', '·', '…'] {
        assert!(!screen.contains(c), "{c:?} on a linux console:\n{screen}");
    }
    assert!(
        screen.contains("+ Sessions 1/1 -"),
        "ASCII borders:\n{screen}"
    );
    let escaped = t.capture_escaped();
    let lists = sgr_lists(&escaped);
    assert!(
        !lists
            .iter()
            .any(|l| l.contains("38;5") || l.contains("48;5") || l.contains("38;2")),
        "256-colour or truecolor codes on TERM=linux: {lists:?}"
    );
    // The focused pane's border is still coloured, in a colour the console has (bright
    // cyan is 96).
    assert!(
        lists
            .iter()
            .any(|l| l.split(';').any(|p| p == "96" || p == "36")),
        "no basic colour at all: {lists:?}"
    );
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}

#[test]
fn term_xterm_256color_keeps_unicode_borders() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hi", "--quiet"]);
    let t = console("xterm", &bench, "export TERM=xterm-256color");
    let screen = t.wait_for_text("Sessions 1/1");
    assert!(screen.contains("┌ Sessions 1/1 ─"), "{screen}");
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}

#[test]
fn term_dumb_is_refused_with_exit_2() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    let t = console("dumb", &bench, "export TERM=dumb");
    let screen = t.wait_for_text("EXITED");
    assert!(screen.contains("EXITED 2"), "{screen}");
    assert!(
        screen.contains(
            "switchboard: the console needs a terminal with cursor addressing; TERM=dumb"
        ),
        "{screen}"
    );
    // `demo` is refused the same way, before it starts anything.
    let demo = format!("{} demo", q(Path::new(BIN)));
    let t = Tmux::start("dumb-demo", |dir| {
        script("export TERM=dumb", &demo, &dir.join("xdg"))
    });
    let screen = t.wait_for_text("EXITED");
    assert!(screen.contains("EXITED 2"), "{screen}");
}

#[test]
fn no_terminal_gives_one_clear_line_and_exit_2() {
    let bench = CliBench::new(CONFIG);
    for args in [vec!["demo"], vec!["demo", "--pace-ms", "500"]] {
        let out = bench
            .command(&args)
            .env("TERM", "xterm-256color")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "switchboard: the console needs a terminal (with ssh, use ssh -t)",
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

/// True if `s` holds a regional indicator (half of a flag).
fn has_regional_indicator(s: &str) -> bool {
    s.chars().any(|c| ('\u{1F1E6}'..='\u{1F1FF}').contains(&c))
}

#[test]
fn a_flag_leaves_no_residue_when_the_selection_moves() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    // The flags' session first, then a plain one: the plain one is newest, on top.
    bench.ok(&[
        "inject",
        "agent:main:flags",
        "🇩🇪🇩🇪 Grüße 🇫🇷 aus 🇩🇪 Berlin 🇯🇵🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪🇩🇪 ZZEND",
        "--quiet",
    ]);
    bench.ok(&["inject", "agent:main:plain", "plain words only", "--quiet"]);
    let t = console("flags", &bench, "export TERM=xterm-256color");
    t.wait_for_text("plain words only");
    // Down to the flags' session, then back.
    t.keys(&["j"]);
    let flags = t.wait_for_text("Berlin");
    t.keys(&["k"]);
    let screen = t.wait_for("the plain session again", |s| {
        s.contains("plain words only") && !s.contains("Berlin")
    });
    assert!(
        !has_regional_indicator(&screen),
        "a flag's half stayed on screen after switching sessions:\n{screen}\n(before: {flags})"
    );
    assert!(
        !screen.contains("ZZEND"),
        "the flags' line is still on screen:\n{screen}"
    );
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}

#[test]
fn ctrl_l_repaints_over_what_else_wrote_to_the_terminal() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hi", "--quiet"]);
    let t = console("repaint", &bench, "export TERM=xterm-256color");
    t.wait_for_text("Sessions 1/1");
    // Another program writes over the console (a background job, `wall`).
    let tty = t.display("#{pane_tty}");
    std::fs::write(&tty, "\x1b[5;5HSTRAY-OUTPUT-XYZ\x1b[2;1H\x1b[2K")
        .expect("write to the pane's tty");
    t.wait_for_text("STRAY-OUTPUT-XYZ");
    t.keys(&["C-l"]);
    let screen = t.wait_for("the repaint", |s| {
        !s.contains("STRAY-OUTPUT-XYZ") && s.contains("Sessions 1/1")
    });
    assert!(
        screen
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("Sessions 1/1")),
        "{screen}"
    );
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}

/// Box-drawing and block characters, and the console's Unicode marks.
fn has_drawing(s: &str) -> bool {
    s.chars()
        .any(|c| ('\u{2500}'..='\u{259F}').contains(&c) || "●…→←·✗›▸▾".contains(c))
}

/// Resize the pane, then wait until the console has drawn itself at that size (its
/// sessions box's top right corner in the last column).
fn resize(t: &Tmux, w: u16, h: u16) {
    let out = t.tmux(&[
        "resize-window",
        "-t",
        common::tmux::SESSION,
        "-x",
        &w.to_string(),
        "-y",
        &h.to_string(),
    ]);
    assert!(
        out.status.success(),
        "resize-window: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.wait_for(&format!("the console at {w}x{h}"), |s| {
        s.lines().count() == h as usize
            && s.lines()
                .find(|l| l.contains("Sessions 1/1"))
                .is_some_and(|l| l.chars().count() == w as usize)
    });
}

/// Issue 26 item 7: after a resize, `q` leaves the shell's screen as it was, with no line
/// of the console on it (tmux 3.3a kept about 6: 4 keys, counting the resize as one).
#[test]
fn resize_then_quit_leaves_a_clean_shell_screen() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hi", "--quiet"]);
    let t = console("resize-quit", &bench, "export TERM=xterm-256color");
    t.wait_for_text("Sessions 1/1");
    resize(&t, 80, 24);
    resize(&t, 100, 30);
    t.keys(&["q"]);
    // The script prints the terminal's mode after the exit code.
    let screen = t.wait_for("the exit and the terminal's mode", |s| {
        s.contains("EXITED 0") && s.contains("STTY ")
    });
    assert_eq!(t.display("#{alternate_on}"), "0", "{screen}");
    assert!(
        !has_drawing(&screen) && !screen.contains("Switchboard"),
        "console lines stayed on the shell screen:\n{screen}"
    );
    common::tmux::assert_cooked(&screen);
}

/// Issue 26 item 7: a locale that is not UTF-8 (`LANG=C`) gets ASCII only, borders,
/// marks and agents' text alike, on a terminal TERM says draws Unicode.
#[test]
fn lang_c_draws_ascii_only() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "Grüße → ok…", "--quiet"]);
    let t = console(
        "lang-c",
        &bench,
        "export TERM=xterm-256color LANG=C LC_CTYPE=C\nunset LC_ALL",
    );
    let screen = t.wait_for_text("Gr??e");
    assert!(
        screen.is_ascii(),
        "a non-ASCII cell under LANG=C:\n{screen}"
    );
    assert!(
        screen.contains("+ Sessions 1/1 -"),
        "ASCII borders:\n{screen}"
    );
    assert!(
        screen.contains("Gr??e > ok~"),
        "the message in ASCII:\n{screen}"
    );
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
    // A UTF-8 locale draws as before.
    let t = console(
        "lang-utf8",
        &bench,
        "export TERM=xterm-256color LANG=C.UTF-8\nunset LC_ALL LC_CTYPE",
    );
    let screen = t.wait_for_text("Sessions 1/1");
    assert!(screen.contains("┌ Sessions 1/1 ─"), "{screen}");
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}

/// Issue 26 item 7: a key pressed with a resize is acted on at once. crossterm's default
/// input source (mio, edge-triggered) returned the resize and dropped the wake-up that said
/// a key was there too, so the key sat unread until the next one (1 time in 5 in the
/// navigation test). Twenty resizes, each with `?` in the same tmux command (the help
/// opens, then closes): each must take effect without another key.
#[test]
fn a_key_pressed_with_a_resize_is_not_held_back() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hi", "--quiet"]);
    let t = console("resize-keys", &bench, "export TERM=xterm-256color");
    t.wait_for_text("Sessions 1/1");
    let session = common::tmux::SESSION;
    for i in 0..20 {
        let (w, h) = if i % 2 == 0 {
            ("100", "30")
        } else {
            ("120", "40")
        };
        let out = t.tmux(&[
            "resize-window",
            "-t",
            session,
            "-x",
            w,
            "-y",
            h,
            ";",
            "send-keys",
            "-t",
            session,
            "?",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let open = i % 2 == 0;
        t.wait_for(
            &format!(
                "the help {} (round {i})",
                if open { "open" } else { "closed" }
            ),
            |s| {
                s.contains("Keys · ? or esc closes") == open
                    && s.lines().count() == h.parse().unwrap_or(0)
            },
        );
    }
    t.keys(&["q"]);
    t.wait_for_text("EXITED 0");
}
