//! End to end: the composer as an editor in the real binary (`switchboard demo` in tmux).
//! A two-line message is typed, the cursor keys go back to fix a word in its first line,
//! Enter sends it, and the stored transcript (read by `switchboard sessions show --json`
//! from the demo's own state folder, while the demo runs) holds the corrected text with its
//! newline; Ctrl+C then clears a draft without quitting, and a second one quits.
//!
//! Each test has its own tmux server (tests/common/tmux.rs; killed on drop, also on
//! failure). Nothing is timed: each step polls the screen, up to a limit. Without tmux the
//! test says so and passes.

use crate::common;

use std::process::Command;

use common::BIN;
use common::tmux::{START, Tmux, console_shown, hint_bar, require_tmux};

/// The session the composer writes to, from its title.
fn composer_target(screen: &str) -> Option<String> {
    let at = screen.find("Write to ")? + "Write to ".len();
    let rest = &screen[at..];
    Some(rest[..rest.find(' ')?].to_string())
}

#[test]
fn a_multi_line_message_fixed_with_cursor_keys_is_stored_as_fixed() {
    require_tmux!();
    let t = Tmux::demo("composer", "");
    t.wait_for_within("the console", START, console_shown);
    t.keys(&["i"]);
    // The composer names the selected session; pressed before the first page of sessions
    // arrives, it says "no session" until one is selected.
    let screen = t.wait_for("the composer on a session", |s| {
        hint_bar(s).contains("enter send")
            && composer_target(s).is_some_and(|k| k.starts_with("agent:"))
    });
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
    let screen = t.wait_for("the fixed first line", |s| {
        s.contains("│the deploy is fixed") && s.contains("│thanks") && s.contains("line 1/2")
    });
    // The terminal's own cursor sits right after the `d` just typed (input methods and
    // screen readers follow it): column of `│` + 1 + len("the deploy is fixed").
    let row = screen
        .lines()
        .position(|l| l.contains("│the deploy is fixed"))
        .expect("the first line's row");
    let bar = screen
        .lines()
        .nth(row)
        .and_then(|l| l.find('│'))
        .expect("the box's border");
    let at = t.display("#{cursor_flag} #{cursor_x} #{cursor_y}");
    assert_eq!(
        at.trim(),
        format!("1 {} {row}", bar + 1 + "the deploy is fixed".len()),
        "{screen}"
    );
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
        .env("XDG_CONFIG_HOME", t.dir().join("xdg"))
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
