//! End to end: the real `switchboard` console in a real terminal (tmux) shows a reply as it
//! streams (a scripted agent with `streamMs`): a provisional `agent:` line with `▍ streaming…`
//! and the session marked `▍` in the list, then the stored line in its place, once.
//!
//! Its own tmux server (tests/common/tmux.rs), killed when the test ends. Nothing is timed:
//! each step polls the screen (up to a bound). Without tmux the test says so and passes.

use crate::common;

use std::path::Path;

use common::tmux::{START, Tmux, q, require_tmux, script};
use common::{BIN, CliBench};

/// Eight words, 400 ms after each: several seconds of streaming to catch on screen.
const CONFIG: &str = r#"{
  agents: { list: [ { id: "main", default: true, model: "scripted", script: [
    { when: { text: "stream" }, reply: "alpha bravo charlie delta echo foxtrot golf hotel", streamMs: 400 },
    { reply: "pong: {{text}}" },
  ] } ] },
}"#;
const REPLY: &str = "alpha bravo charlie delta echo foxtrot golf hotel";

#[test]
fn a_streamed_reply_grows_on_screen_then_stands_as_one_line() {
    require_tmux!();
    let bench = CliBench::new(CONFIG);
    bench.ok(&["inject", "agent:main:main", "hello", "--quiet"]);
    let command = format!(
        "{} --state-dir {} --config {}",
        q(Path::new(BIN)),
        q(&bench.state),
        q(&bench.config)
    );
    let t = Tmux::start("stream", |dir| script("", &command, &dir.join("xdg")));
    t.wait_for_within("the console with the session", START, |s| {
        s.contains("┌ Sessions ") && s.contains("agent: pong: hello")
    });
    t.keys(&["i"]);
    t.type_text("please stream");
    t.wait_for("the composer", |s| s.contains("│please stream"));
    t.keys(&["Enter"]);

    // Mid-way: part of the reply, the cursor and the indicator; the session marked.
    let mid = t.wait_for("the reply streaming", |s| {
        s.contains("agent: alpha bravo") && s.contains("▍ streaming…")
    });
    assert!(!mid.contains(REPLY), "the whole reply already: {mid}");
    assert!(
        mid.lines().any(|l| l.starts_with("│▍ main")),
        "the sessions list marks the session: {mid}"
    );

    // Done: the stored line, once, and no indicator.
    let done = t.wait_for("the stored reply", |s| {
        s.contains(REPLY) && !s.contains("streaming…")
    });
    assert_eq!(done.matches(REPLY).count(), 1, "{done}");
    assert!(!done.contains('▍'), "{done}");
}
