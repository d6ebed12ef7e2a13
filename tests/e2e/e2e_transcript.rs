//! End to end: searching a transcript in the real `switchboard demo`, in a real terminal
//! (tmux, 120×40): pick #eng-standup, focus its transcript, `/` and a word, Enter; the
//! counter shows on the indicator line, `n` wraps to the first hit, and the hit's text is
//! drawn reversed (read back with `capture-pane -e`). Nothing is timed: each step polls the
//! screen (tests/common/tmux.rs, up to a limit). Without tmux the test says so and passes.

use crate::common;

use common::tmux::{START, Tmux, console_shown, require_tmux, reversed};

#[test]
fn search_the_demo_transcript_jump_with_n_and_see_the_hit_highlighted() {
    require_tmux!();
    let t = Tmux::demo("transcript", "");
    t.wait_for_within("the console", START, console_shown);
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
