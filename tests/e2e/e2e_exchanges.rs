//! End to end on `switchboard demo` in a real terminal (tmux): the owner finds the exchange
//! between the demo's two named agents (main asking ops in #incidents) in the rounds pane,
//! opens it with Enter, reads every round and how it ended, and closes it with Esc.
//! Nothing is timed: each step polls the screen (every 100 ms) for what it expects. Without
//! tmux the test says so and passes. (The harness is tests/common/tmux.rs.)

use crate::common;

use common::tmux::{START, Tmux, console_shown, require_tmux};

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
    require_tmux!();
    let t = Tmux::demo("exchanges", "");
    t.wait_for_within("the console", START, console_shown);
    // Every session's exchanges, the rounds pane focused (sessions → transcript → rounds).
    t.keys(&["a", "Tab", "Tab"]);
    // main asks ops in #incidents (`@ops …` from Alice); one that has ended. The rows name
    // the sessions as the sessions pane does: one of main's sessions (Alice's chat is "Alice
    // (Telegram)"; the nightly report's is its name) into #incidents, not support's visitors
    // (`agent:…visitor-8812`), which the view below tells apart by key.
    let wanted = |h: &str| {
        let h = h.trim_end();
        h.contains(" → #incidents ·")
            && !h.contains("visitor")
            && !h.contains("support")
            && !h.ends_with("running")
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
        // The top line names the pair; the numbered lines give the keys.
        if view.contains("[1] requester agent:main:")
            && view.contains("[2] target agent:ops:slack:group:incidents")
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
