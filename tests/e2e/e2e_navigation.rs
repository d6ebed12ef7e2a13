//! End to end: zoom and the command line in the real `switchboard demo`, in a real terminal
//! (tmux) made 80×24, where the transcript otherwise has 8 rows: `2` `z` (2 keys) zooms the
//! transcript over every row but the header and the three status lines, `z` (1 key) puts the
//! layout back, and `:` `t` `r` Tab `f` Tab Enter (7 keys, the first Tab showing the two
//! candidates) opens the traffic view. Nothing is timed: each step polls the screen
//! (tests/common/tmux.rs, up to a limit). Without tmux the test says so and passes.

use crate::common;

use common::tmux::{SESSION, START, Tmux, console_shown, require_tmux, row};

/// The box drawn from row `top` to row `bottom` across the whole 80 columns.
fn full_width_box(screen: &str, top: usize, bottom: usize) -> bool {
    let (t, b) = (row(screen, top), row(screen, bottom));
    t.starts_with("┌ ")
        && t.ends_with('┐')
        && t.chars().count() == 80
        && b.starts_with('└')
        && b.ends_with('┘')
        && b.chars().count() == 80
}

#[test]
fn zoom_in_two_keys_back_in_one_and_traffic_from_the_command_line_in_seven() {
    require_tmux!();
    let t = Tmux::demo("navigation", "");
    t.wait_for_within("the console", START, console_shown);
    let out = t.tmux(&["resize-window", "-t", SESSION, "-x", "80", "-y", "24"]);
    assert!(
        out.status.success(),
        "resize-window: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Drawn again at the new size: the panes' right edge at column 80, the hint bar on the
    // last row.
    t.wait_for("the console at 80×24", |s| {
        console_shown(s)
            && s.lines()
                .filter(|l| l.ends_with('┐'))
                .all(|l| l.chars().count() == 80)
            && row(s, 23).starts_with(" ? help")
    });

    // 2: the transcript's keys in the hint bar; z: the transcript alone, rows 1 to 20 (the
    // header above, status, notice and hints below).
    t.keys(&["2"]);
    t.wait_for("the transcript focused", |s| {
        row(s, 23).contains("t show/hide tool calls")
    });
    t.keys(&["z"]);
    let zoomed = t.wait_for("the transcript zoomed", |s| {
        !s.contains("┌ Sessions") && !s.contains("┌ Rounds") && full_width_box(s, 1, 20)
    });
    assert!(row(&zoomed, 1).starts_with("┌ agent:"), "{zoomed}");
    assert!(row(&zoomed, 19).contains("tools:"), "{zoomed}");

    // z: the three panes again.
    t.keys(&["z"]);
    t.wait_for("the layout restored", |s| {
        s.contains("┌ Sessions") && s.contains("┌ Rounds")
    });

    // : t r Tab: two candidates under the line; f Tab Enter: the traffic view.
    t.keys(&[":", "t", "r", "Tab"]);
    let typing = t.wait_for("the candidates", |s| {
        row(s, 22).contains(":traffic  :transcript") && row(s, 23).starts_with(":tra")
    });
    assert!(
        typing.contains("tools:off"),
        "the letters typed after : fired nothing (t would show tool calls):\n{typing}"
    );
    t.keys(&["f", "Tab"]);
    t.wait_for("the completed command", |s| {
        row(s, 23).starts_with(":traffic")
    });
    t.keys(&["Enter"]);
    t.wait_for("the traffic view", |s| s.contains("┌ Traffic"));

    t.keys(&["q"]);
    t.wait_for("the shell back", |s| s.contains("EXITED 0"));
}
