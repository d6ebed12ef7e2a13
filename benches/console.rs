//! The console's frame cost (DESIGN §4): with 100,000 sessions and a 1,000,000-message
//! transcript open, drawing a 120×40 frame; a reload through the API; a burst of events
//! (which only mark work and ask for loads); and a keypress with a page request in flight
//! (the UI never waits for it).
//!
//! It reuses the state folder that `cargo bench --bench store` builds and caches (run that
//! first; it takes about 20 s once). Run: `cargo bench --bench console`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard_config::Config;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::Effect;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::{EngineEvent, SessionsApi};

fn cached_state() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-state/store-v2-100k-sessions-1m-lines");
    dir.join("switchboard.db").exists().then_some(dir)
}

/// Carry out `effects` against `api` and hand the results to the console, until it wants
/// nothing more (loads only: the bench sends nothing).
fn settle(
    rt: &tokio::runtime::Runtime,
    api: &Arc<dyn SessionsApi>,
    c: &mut Console,
    effects: Vec<Effect>,
) {
    let mut effects = effects;
    loop {
        effects.extend(c.refresh());
        if effects.is_empty() {
            return;
        }
        for e in std::mem::take(&mut effects) {
            let action = match e {
                Effect::LoadSessions { generation, query } => Action::SessionsLoaded {
                    generation,
                    result: Box::new(rt.block_on(api.sessions(query))),
                },
                Effect::LoadTranscript { generation, query } => Action::TranscriptLoaded {
                    generation,
                    key: query.key.clone(),
                    result: Box::new(rt.block_on(api.transcript(query))),
                },
                _ => continue,
            };
            effects.extend(c.update(action));
        }
    }
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
    let engine = switchboard::state_folder::open_engine(&dir, Config::default()).expect("open");
    let api: Arc<dyn SessionsApi> = Arc::new(engine);
    let mut state = State::new(dir.display().to_string(), 1_795_353_349_734);
    state.width = 120;
    state.height = 40;
    let mut console = Console::new(state);
    settle(&rt, &api, &mut console, Vec::new());
    // The 1,000,000-message transcript is agent:main:main: select it.
    if let Some(i) = console
        .state
        .sessions
        .rows
        .iter()
        .position(|r| r.key == "agent:main:main")
    {
        for _ in 0..i {
            let effects = console.update(Action::Intent(Intent::Down));
            settle(&rt, &api, &mut console, effects);
        }
    }
    assert_eq!(
        console.state.sessions.selected_key(),
        Some("agent:main:main")
    );
    assert_eq!(
        console.state.transcript.key.as_deref(),
        Some("agent:main:main")
    );
    let keymap = Keymap::defaults();
    let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(5));
    c.bench_function("console/frame_120x40_100k_sessions_1m_transcript", |b| {
        b.iter(|| {
            term.draw(|f| switchboard_tui::view::draw(f, &console.state, &keymap))
                .expect("draw");
        })
    });
    // What a lag costs end to end: the page and the transcript asked for, answered by the
    // engine through the API, applied (off the UI task in the app).
    c.bench_function("console/reload_sessions_and_transcript", |b| {
        b.iter(|| {
            let effects = console.update(Action::Lagged);
            settle(&rt, &api, &mut console, effects);
        })
    });
    // A second of demo traffic at 100 events/s arriving in one batch: apply them, work out
    // the loads they call for, draw. Input waiting behind this batch waits this long at most.
    // The loads are handed to the runner in the app (a task spawn each); here they are
    // dropped, so they stay in flight, as a slow engine's would.
    let burst: Vec<EngineEvent> = (0..100)
        .map(|n| EngineEvent::MessageAppended {
            key: format!("agent:main:dm-{}", n % 7),
            session_id: "x".into(),
            seq: n,
            line: serde_json::json!({ "type": "message" }),
        })
        .collect();
    let mut burst_console = Console::new(console.state.clone());
    c.bench_function("console/100_events_then_frame", |b| {
        b.iter(|| {
            for e in &burst {
                let _ = burst_console.update(Action::Engine(Box::new(e.clone())));
            }
            let _ = burst_console.refresh();
            term.draw(|f| switchboard_tui::view::draw(f, &burst_console.state, &keymap))
                .expect("draw");
        })
    });
    // A key while the page (and transcript) it asked for are never answered: the selection
    // moves, loads are asked for, and the frame is drawn without waiting for any of them.
    let mut waiting = Console::new(console.state.clone());
    let _ = waiting.refresh();
    let mut down = true;
    c.bench_function(
        "console/keypress_to_frame_with_a_page_request_in_flight",
        |b| {
            b.iter(|| {
                let intent = if down { Intent::Down } else { Intent::Up };
                down = !down;
                let _ = waiting.update(Action::Intent(intent));
                let _ = waiting.refresh();
                term.draw(|f| switchboard_tui::view::draw(f, &waiting.state, &keymap))
                    .expect("draw");
            })
        },
    );
    assert!(
        waiting.pending(),
        "the loads stayed in flight during the measurement"
    );
    c.final_summary();
}
