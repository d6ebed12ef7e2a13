//! End to end on `switchboard demo` in a real terminal (tmux), issue 26 item 1: from the
//! traffic view the owner drills down, k9s-style: the busiest pair → its exchanges → the
//! newest one, how it ended, in 3 keys (`v` `Enter` `Enter`; the brief allows 5), with the
//! header's breadcrumb saying where; then Esc walks back one level at a time. From a session's
//! row, `x` lists its exchanges.
//!
//! Nothing is timed: each step polls the screen (tests/common/tmux.rs) for what it expects.
//! Each key waits for the screen it leads to (an Esc sent right after another reads as Alt).
//! Without tmux the test says so and passes.

use crate::common;

use common::tmux::{START, Tmux, console_shown, require_tmux};

/// The header line (the breadcrumb while drilled down).
fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or_default()
}

#[test]
fn busiest_pair_to_its_exchange_and_how_it_ended_in_3_keys_then_esc_walks_back() {
    require_tmux!();
    let t = Tmux::demo("drill", "");
    t.wait_for_within("the console", START, console_shown);

    // Key 1: the traffic view, the busiest pair on top with the cursor on it.
    t.keys(&["v"]);
    t.wait_for_within("pairs in the traffic view", START, |s| {
        s.contains("┌ Traffic · by session")
            && s.contains(" → ")
            && !s.contains("no agent-to-agent")
    });
    // Key 2: that pair's exchanges, newest first, the breadcrumb naming the pair.
    t.keys(&["Enter"]);
    let list = t.wait_for("the pair's exchanges", |s| {
        header(s).contains(" Switchboard · Traffic › ")
            && s.contains("┌ Exchanges · ")
            && s.contains(" exchange")
            && !s.contains("loading exchanges")
    });
    let crumb = header(&list).trim().to_string();
    assert!(crumb.contains(" → "), "the pair in the breadcrumb: {crumb}");
    // Key 3: the newest exchange; how it ended shows at once (or once it ends: the view
    // reloads on the engine's events).
    t.keys(&["Enter"]);
    let view = t.wait_for_within("how the exchange ended", START, |s| {
        s.contains("┌ Exchange ")
            && s.lines().any(|l| {
                l.contains("│Ended: ") || l.contains("│Refused") || l.contains("│Not sent")
            })
    });
    let top = header(&view).trim();
    assert!(
        top.starts_with(crumb.as_str()) && top.ends_with('…') && top.len() > crumb.len(),
        "the exchange's id after the pair: {top}\n(list: {crumb})"
    );
    assert!(view.contains("Message:"), "{view}");

    // Esc: the list, the traffic view, the panes, one level each.
    t.keys(&["Escape"]);
    let back = t.wait_for("back to the list", |s| {
        !s.contains("┌ Exchange ") && s.contains("┌ Exchanges · ")
    });
    assert_eq!(header(&back).trim(), crumb);
    t.keys(&["Escape"]);
    t.wait_for("back to the traffic view", |s| {
        s.contains("┌ Traffic · by session") && !header(s).contains("›")
    });
    t.keys(&["Escape"]);
    t.wait_for("back to the panes", console_shown);

    // From a session's row: `x` lists its exchanges (the demo opens on main's chat with
    // Alice, which asks ops in #incidents).
    t.keys(&["x"]);
    let list = t.wait_for("the session's exchanges", |s| {
        header(s).contains(" Switchboard · Sessions › ") && s.contains("┌ Exchanges · ")
    });
    assert!(header(&list).contains(" · exchanges"), "{}", header(&list));
    t.keys(&["Escape"]);
    t.wait_for("back to the panes", |s| {
        console_shown(s) && !s.contains("┌ Exchanges · ")
    });
    t.keys(&["q"]);
    let done = t.wait_for("the shell after quitting", |s| s.contains("EXITED"));
    assert!(done.contains("EXITED 0"), "{done}");
}
