//! The console's frame cost (DESIGN §4): with 100,000 sessions and a 1,000,000-message
//! transcript open, drawing a 120×40 frame, and reloading what a burst of events dirtied.
//!
//! It reuses the state folder that `cargo bench --bench store` builds and caches (run that
//! first; it takes about 20 s once). Run: `cargo bench --bench console`.

use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard::config::Config;
use switchboard::engine::Engine;
use switchboard::tui::action::{Action, Intent};
use switchboard::tui::keymap::Keymap;
use switchboard::tui::state::State;
use switchboard::tui::update::Console;

fn cached_state() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-state/store-v2-100k-sessions-1m-lines");
    dir.join("switchboard.db").exists().then_some(dir)
}

fn main() {
    let Some(dir) = cached_state() else {
        eprintln!(
            "console bench: run `cargo bench --bench store` first (it builds the 100,000-session state)"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let engine = Engine::open(&dir, Config::default()).expect("open");
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let mut state = State::new(dir.display().to_string(), 1_795_353_349_734);
    state.width = 120;
    state.height = 40;
    let mut console = Console::new(engine, state, tx);
    // The 1,000,000-message transcript is agent:main:main: select it.
    if let Some(i) = console
        .state
        .sessions
        .iter()
        .position(|r| r.key == "agent:main:main")
    {
        for _ in 0..i {
            console.update(Action::Intent(Intent::Down));
        }
        console.refresh();
    }
    assert_eq!(console.state.selected_key(), Some("agent:main:main"));
    let keymap = Keymap::defaults();
    let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(5));
    c.bench_function("console/frame_120x40_100k_sessions_1m_transcript", |b| {
        b.iter(|| {
            term.draw(|f| switchboard::tui::view::draw(f, &console.state, &keymap))
                .expect("draw");
        })
    });
    c.bench_function("console/reload_sessions_and_transcript", |b| {
        b.iter(|| {
            console.update(Action::Lagged);
            console.refresh();
        })
    });
    // A second of demo traffic at 100 events/s arriving in one batch: apply them, reload what
    // they dirtied, draw. Input waiting behind this batch waits this long at most.
    let burst: Vec<switchboard::engine::events::EngineEvent> = (0..100)
        .map(
            |n| switchboard::engine::events::EngineEvent::MessageAppended {
                key: format!("agent:main:dm-{}", n % 7),
                session_id: "x".into(),
                seq: n,
                line: serde_json::json!({ "type": "message" }),
            },
        )
        .collect();
    c.bench_function("console/100_events_then_frame", |b| {
        b.iter(|| {
            for e in &burst {
                console.update(Action::Engine(Box::new(e.clone())));
            }
            console.refresh();
            term.draw(|f| switchboard::tui::view::draw(f, &console.state, &keymap))
                .expect("draw");
        })
    });
    c.final_summary();
}
