//! End to end: the owner's third task on `switchboard demo` in a real terminal (tmux): open
//! the traffic view with `v`, see the demo's loop (main → ops #incidents, which always ends at
//! the ping-pong cap) marked, stop it with `S` `y`, and check with `switchboard sessions show`
//! on the demo's state folder that main sends nothing more into #incidents afterwards (its
//! next attempt is refused by the send policy).
//!
//! Nothing is timed: each step polls (tests/common/tmux.rs, with a generous limit) for what
//! it expects. Without tmux the test says so and passes.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::BIN;
use common::tmux::{START, STEP, Tmux, require_tmux};
use serde_json::Value;

const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:slack:group:incidents";

/// `sessions show KEY --json` on the demo's state, read while the demo runs.
fn show(state: &Path, key: &str) -> Value {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .args(["sessions", "show", key, "--json", "--messages", "200"])
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("switchboard runs");
    assert!(
        out.status.success(),
        "sessions show {key}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The timestamps of messages from `from` recorded in `session`.
fn messages_from(shown: &Value, from: &str) -> Vec<i64> {
    shown["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["provenance"]["sourceSessionKey"] == from)
                .filter_map(|m| m["timestamp"].as_i64())
                .collect()
        })
        .unwrap_or_default()
}

/// The screen's text with the box borders dropped and every line joined by one space, so a
/// prompt wrapped over several rows reads as one sentence.
fn flat(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.trim().trim_matches('│').trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn text_of(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[test]
fn demo_loop_spotted_in_the_traffic_view_and_stopped_in_two_keys() {
    require_tmux!();
    let t = Tmux::demo("traffic", "");
    t.wait_for_within("the console", START, |s| s.contains("┌ Sessions "));
    let state = t.demo_state();

    // The traffic view: main → ops #incidents ends at the cap every time: a likely loop.
    t.keys(&["v"]);
    // The row names the two as the sessions pane does (main's chat with Alice, #incidents);
    // the prompt and the note name the keys the stop writes to.
    let pair = format!("{MAIN} → {OPS}");
    let row = "Alice (Telegram) → #incidents";
    let screen = t.wait_for("the loop marked in the traffic view", |s| {
        s.lines().any(|l| l.contains("LOOP") && l.contains(row))
    });
    assert!(screen.contains("┌ Traffic · by session"), "{screen}");

    // Put the cursor on that pair: S names the selected pair, n cancels. Rows re-sort as
    // traffic flows (the cursor stays on its pair), so each try starts again from the top
    // (g) and goes a few rows down: the loop is among the busiest pairs.
    let prompt = format!("stop {pair}?");
    let mut found = false;
    for attempt in 0..30 {
        t.keys(&["g"]);
        for _ in 0..attempt % 6 {
            t.keys(&["j"]);
        }
        t.keys(&["S"]);
        let s = t.wait_for("the confirmation", |s| flat(s).contains("· n: cancel."));
        if flat(&s).contains(&prompt) {
            found = true;
            break;
        }
        t.keys(&["n"]);
        t.wait_for("the prompt to go", |s| !flat(s).contains("· n: cancel."));
    }
    assert!(found, "the cursor reached {pair}");
    t.keys(&["y"]);
    t.wait_for("the undo hint", |s| {
        flat(s).contains(&format!(
            "stopped: /send off on {OPS}; undo: /send inherit there (or u here)"
        ))
    });

    // The engine stored the stop; from then on nothing from main arrives in #incidents.
    let start = Instant::now();
    let stopped_at = loop {
        let shown = show(&state, OPS);
        if shown["sendPolicy"] == "deny" {
            break chrono::Utc::now().timestamp_millis();
        }
        assert!(start.elapsed() < STEP, "the stop was not stored: {shown}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // main's next "@ops …" (every 16 demo messages) is refused by #incidents' policy.
    let start = Instant::now();
    loop {
        let main = show(&state, MAIN);
        let refused_later = main["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["role"] == "assistant"
                    && m["timestamp"].as_i64().is_some_and(|ts| ts > stopped_at)
                    && text_of(m).starts_with("Asked ops in #incidents")
                    && text_of(m).contains("send blocked by session policy")
            })
        });
        if refused_later {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "main never tried #incidents again after the stop"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let late: Vec<i64> = messages_from(&show(&state, OPS), MAIN)
        .into_iter()
        .filter(|ts| *ts > stopped_at)
        .collect();
    assert!(
        late.is_empty(),
        "messages from main reached #incidents after the stop: {late:?}"
    );
    let screen = t.wait_for("the pair shown stopped", |s| {
        s.lines().any(|l| l.contains("STOPPED") && l.contains(row))
    });
    assert!(!flat(&screen).contains(&prompt), "{screen}");

    t.keys(&["q"]);
    t.wait_for("the demo to end", |s| s.contains("EXITED 0"));
}

/// The narrower stop on the demo's loop: `S` says what `y` would also stop, `a` stops only
/// the agents' sends into #incidents (the session's stored `agentSendPolicy`, its send policy
/// untouched, so ops still answers the people there), and `u` lets them again. Keys: v, a few
/// j to the pair, S, a, u.
#[test]
fn demo_loop_stopped_for_agents_only_and_undone() {
    require_tmux!();
    let t = Tmux::demo("narrow", "");
    t.wait_for_within("the console", START, |s| s.contains("┌ Sessions "));
    let state = t.demo_state();
    t.keys(&["v"]);
    // The row names the sessions; the prompt names the keys the stop writes to.
    let pair = format!("{MAIN} → {OPS}");
    let row = "Alice (Telegram) → #incidents";
    t.wait_for("the loop marked in the traffic view", |s| {
        s.lines().any(|l| l.contains("LOOP") && l.contains(row))
    });
    let prompt = format!("stop {pair}?");
    let mut found = None;
    for attempt in 0..30 {
        t.keys(&["g"]);
        for _ in 0..attempt % 6 {
            t.keys(&["j"]);
        }
        t.keys(&["S"]);
        let s = t.wait_for("the confirmation", |s| flat(s).contains("· n: cancel."));
        if flat(&s).contains(&prompt) {
            found = Some(flat(&s));
            break;
        }
        t.keys(&["n"]);
        t.wait_for("the prompt to go", |s| !flat(s).contains("· n: cancel."));
    }
    let asked = found.expect("the cursor reached the pair");
    assert!(asked.contains("a: agent sends only"), "{asked}");
    assert!(asked.contains("holds its replies to its chat"), "{asked}");
    t.keys(&["a"]);
    t.wait_for("the narrower stop's note", |s| {
        flat(s).contains(&format!(
            "stopped: agent sends into {OPS}; their replies go on"
        ))
    });
    let start = Instant::now();
    loop {
        let shown = show(&state, OPS);
        if shown["agentSendPolicy"] == "deny" {
            assert_ne!(
                shown["sendPolicy"], "deny",
                "the send policy is untouched: {shown}"
            );
            break;
        }
        assert!(start.elapsed() < STEP, "the stop was not stored: {shown}");
        std::thread::sleep(Duration::from_millis(200));
    }
    t.keys(&["u"]);
    t.wait_for("the undo's note", |s| {
        flat(s).contains(&format!("undone: agent sends into {OPS} allowed again"))
    });
    let start = Instant::now();
    while show(&state, OPS)["agentSendPolicy"] == "deny" {
        assert!(start.elapsed() < STEP, "the undo was not stored");
        std::thread::sleep(Duration::from_millis(200));
    }
    t.keys(&["q"]);
    t.wait_for("the demo to end", |s| s.contains("EXITED 0"));
}
