//! The transcript pane's search (issue 14: < 20 ms over a 20,000-line loaded window): a
//! query compiled and its hits found over 20,000 lines of agent-like text, for a plain word,
//! a regex with alternation and classes, and a text that is not a valid regex (matched as
//! typed); plus a 120×40 frame with the search's hits on screen (drawing reads the hits found
//! once, it does not search). Run: `cargo bench --bench transcript`.

use std::time::Duration;

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::search::Search;
use switchboard_tui::state::{Focus, SessionRow, State, TRANSCRIPT_MAX, TranscriptLine};
use switchboard_tui::transcript::shown;
use switchboard_types::api::SessionKind;

const KEY: &str = "agent:main:main";

/// 20,000 lines of the kind a busy session holds: messages, replies, tool calls, results.
fn window() -> Vec<TranscriptLine> {
    let words = [
        "deploy", "release", "check", "the", "status", "of", "agent", "ops", "main", "error",
        "timeout", "retry", "queue", "message", "session", "reply", "spawned", "worker",
    ];
    (1..=TRANSCRIPT_MAX as i64)
        .map(|seq| {
            let n = seq as usize;
            let text: Vec<&str> = (0..24)
                .map(|i| words[(n * 7 + i * 13) % words.len()])
                .collect();
            let (role, text) = match n % 4 {
                0 => (
                    "tool",
                    format!(
                        "sessions_send({{\"sessionKey\":\"agent:ops:{n}\",\"message\":\"{}\"}})",
                        text.join(" ")
                    ),
                ),
                1 => (
                    "result",
                    format!("{{\"status\":\"ok\",\"reply\":\"{}\"}}", text.join(" ")),
                ),
                2 => ("user", text.join(" ")),
                _ => (
                    "assistant",
                    format!("{} #{n}\nsecond line {}", text.join(" "), text[3]),
                ),
            };
            TranscriptLine {
                seq,
                role,
                timestamp: 1_750_000_000_000 + seq * 1_000,
                from: "owner".into(),
                text,
            }
        })
        .collect()
}

fn main() {
    let lines = window();
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(5));
    for (name, query) in [
        ("word", "timeout"),
        ("regex", r"(deploy|retry)\s+\w+ #\d{3}"),
        ("invalid_regex_literal", "status of (agent"),
    ] {
        c.bench_function(&format!("transcript/search_20k_lines_{name}"), |b| {
            b.iter(|| {
                let mut s = Search::default();
                s.set_query(query);
                s.rescan(&lines, |l| shown(true, l));
                s.to_last();
                s.hits.len()
            })
        });
    }
    // A frame with a search in effect: hits are looked up per shown line, not found again.
    let mut state = State::new("/bench".into(), 1_750_000_000_000);
    state.width = 120;
    state.height = 40;
    state.sessions.rows = vec![SessionRow {
        key: KEY.into(),
        source: None,
        kind: SessionKind::Main,
        name: "main".into(),
        channel: "internal".into(),
        updated_at: 0,
        policy: switchboard_types::api::PolicySetting::Allow,
        policy_override: false,
        policy_detail: "default".into(),
        policy_words: "allow · default".into(),
        archived: false,
        named: false,
        preview: None,
    }];
    state.sessions.matching = 1;
    state.transcript.total = lines.len() as i64;
    state.transcript.lines = lines;
    state.transcript.key = Some(KEY.into());
    state.transcript.tools = true;
    state.focus = Focus::Transcript;
    state.transcript.view.search.set_query("timeout");
    state
        .transcript
        .view
        .search
        .rescan(&state.transcript.lines, |l| shown(true, l));
    state.transcript.view.search.to_last();
    let keymap = Keymap::defaults();
    let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    c.bench_function("transcript/frame_120x40_20k_lines_search_on", |b| {
        b.iter(|| {
            term.draw(|f| switchboard_tui::view::draw(f, &state, &keymap))
                .expect("draw");
        })
    });
    c.final_summary();
}
