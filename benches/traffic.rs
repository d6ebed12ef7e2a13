//! The traffic view's frame cost (issue 14: < 2 ms per frame over 100,000 exchanges in the
//! last hour): the console is fed 100,000 exchanges (each a `ExchangeStarted` and a `ExchangeRound`,
//! every tenth ending at the ping-pong cap) spread over the last hour, with the view open;
//! then one frame is timed: one more event through `Console::update`, `refresh` (which orders
//! the pairs) and `view::draw` at 120×40. With 1,000 and with 10,000 pairs of sessions.
//!
//! Run: `cargo bench --bench traffic`.

use std::time::Duration;

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::EngineEvent;

const EXCHANGES: usize = 100_000;
const START: i64 = 1_795_353_296_000;
const HOUR_MS: i64 = 3_600_000;

fn key(agent: usize, n: usize) -> String {
    format!("agent:a{agent}:webchat:direct:visitor-{n}")
}

/// The pair of exchange `i` among `pairs` pairs (10 agents; requester and target differ).
fn pair(i: usize, pairs: usize) -> (String, String) {
    let p = i % pairs;
    let side = (pairs as f64).sqrt().ceil() as usize;
    let (r, t) = (p / side, p % side);
    (key(r % 10, r), key((t + 5) % 10, t + 100_000))
}

fn started(i: usize, pairs: usize) -> EngineEvent {
    let (requester, target) = pair(i, pairs);
    EngineEvent::ExchangeStarted {
        exchange_id: format!("flow-{i}"),
        chain_id: format!("chain-{i}"),
        hop: 1,
        requester,
        target,
        message: "hello".into(),
        run_id: format!("run-{i}"),
        unattributed: false,
    }
}

fn round(i: usize, pairs: usize) -> EngineEvent {
    let (requester, target) = pair(i, pairs);
    EngineEvent::ExchangeRound {
        exchange_id: format!("flow-{i}"),
        round: 1,
        speaker: target,
        listener: requester,
        run_id: format!("run-{i}-1"),
        text: "hi".into(),
        status: switchboard_types::api::RunStatus::Ok,
    }
}

/// A console with the traffic view open after `EXCHANGES` exchanges over the last hour.
fn fed(pairs: usize) -> Console {
    let mut state = State::new("bench".into(), START - HOUR_MS);
    state.width = 120;
    state.height = 40;
    let mut c = Console::new(state);
    c.update(Action::Intent(Intent::ToggleTraffic));
    for i in 0..EXCHANGES {
        c.state.now_ms = START - HOUR_MS + (i as i64 * HOUR_MS) / EXCHANGES as i64 + 1;
        c.update(Action::Engine(Box::new(started(i, pairs))));
        c.update(Action::Engine(Box::new(round(i, pairs))));
        if i % 10 == 0 {
            c.update(Action::Engine(Box::new(EngineEvent::ExchangeLoopEnded {
                exchange_id: format!("flow-{i}"),
                reason: switchboard_types::api::ExchangeEnd::Cap,
                rounds: 5,
                detail: String::new(),
            })));
        }
        c.update(Action::Engine(Box::new(EngineEvent::ExchangeEnded {
            exchange_id: format!("flow-{i}"),
            status: switchboard_types::api::ExchangeStatus::Done,
            reason: switchboard_types::api::ExchangeEnd::Cap,
        })));
    }
    c.state.now_ms = START;
    let _ = c.refresh();
    c
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let keymap = Keymap::defaults();
    for pairs in [1_000, 10_000] {
        let mut c = fed(pairs);
        let table = &c.state.traffic.sessions;
        let total: u32 = table.pairs.iter().map(|p| p.hour.messages).sum();
        eprintln!(
            "traffic bench: {pairs} pairs wanted, {} kept, {total} messages in the hour",
            table.pairs.len()
        );
        let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
        let mut i = EXCHANGES;
        criterion.bench_function(
            &format!("traffic/one event + totals + draw, 100k exchanges, {pairs} pairs"),
            |b| {
                b.iter(|| {
                    i += 1;
                    c.update(Action::Engine(Box::new(round(i, pairs))));
                    let _ = c.refresh();
                    term.draw(|f| switchboard_tui::view::draw(f, &c.state, &keymap))
                        .expect("draw");
                })
            },
        );
        // The parts: the model alone (event, expiry check, ordering), and the drawing alone.
        criterion.bench_function(
            &format!("traffic/one event + totals, 100k exchanges, {pairs} pairs"),
            |b| {
                b.iter(|| {
                    i += 1;
                    c.update(Action::Engine(Box::new(round(i, pairs))));
                    let _ = c.refresh();
                })
            },
        );
        criterion.bench_function(&format!("traffic/draw 120x40, {pairs} pairs"), |b| {
            b.iter(|| {
                term.draw(|f| switchboard_tui::view::draw(f, &c.state, &keymap))
                    .expect("draw");
            })
        });
    }
    criterion.final_summary();
}
