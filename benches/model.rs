//! Model backends (issue 13), against the in-process fake OpenAI-compatible server of the tests
//! (`tests/fake_model`), which answers at once:
//!
//! - `http_alone`: one chat-completion request sent with reqwest and its JSON parsed, nothing
//!   else: what the model costs the engine from the outside (loopback TCP + HTTP + JSON). The
//!   request is a real one of `model_turn` (tools and a full history window), so both send
//!   and parse the same bytes.
//! - `scripted_turn`: an inbound message answered by a scripted agent (the engine, no model).
//! - `model_turn`: the same message answered by an agent on the fake server (one model call).
//! - `model_turn_with_tool`: a turn whose model calls `sessions_list` once, then answers (two
//!   model calls, one tool call recorded as two transcript lines).
//!
//! The engine's own overhead per model call is `model_turn − http_alone` (and, per call,
//! `(model_turn_with_tool − 2 × http_alone)` with a tool call in between).
//!
//! - `concurrent_200`: 200 sessions each get a message at once, the model takes 200 ms per
//!   answer; until all 200 replies are recorded. Prints the process's thread count at the peak:
//!   runs are tasks, not threads.
//!
//! - `delta_to_console`: a reply streamed by the fake server in 2 ms steps; per delta, the time
//!   from the server writing its chunk to the console's `update` having taken it into its
//!   state, along the app's own path (engine event → API subscription → channel → `update`).
//!
//! Run: `cargo bench --bench model`.

#[path = "../tests/fake_model/mod.rs"]
mod fake_model;

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use fake_model::{Answer, Fake, call, streamed_text, text_reply, tool_reply};
use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::inbound::Inbound;
use switchboard_tui::action::Action;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::{EngineEvent, SendRequest, Sender, StreamItem};
use switchboard_types::key::SessionKey;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn config(base_url: &str, provider_extra: Value) -> Config {
    let mut provider = json!({ "baseUrl": base_url, "api": "openai-completions", "maxRetries": 0 });
    if let (Value::Object(p), Value::Object(extra)) = (&mut provider, provider_extra) {
        p.extend(extra);
    }
    serde_json::from_value(json!({
        "tools": { "sessions": { "visibility": "all" } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/m", "systemPrompt": "Be brief." },
            { "id": "plain", "model": "scripted", "script": [ { "reply": "scripted: {{text}}" } ] },
        ] },
        "models": { "providers": { "fake": provider } },
    }))
    .expect("config")
}

/// One inbound message into `key`, waited until its run ended; panics on a failed run (a
/// bench must not time errors).
async fn turn(engine: &Engine, key: &SessionKey) {
    let got = engine
        .receive(key, "hello", &Inbound::default())
        .await
        .expect("receive");
    let outcome = got.run.expect("a run").wait().await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
}

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:").map(|n| n.trim().to_string()))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn bench_turns(c: &mut Criterion) {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(vec![text_reply(
        "Hello from the model.",
        20,
        5,
    )]));
    let tooling = rt.block_on(Fake::start(vec![
        tool_reply(json!([call("c1", "sessions_list", "{\"limit\": 5}")])),
        text_reply("There are a few sessions.", 30, 6),
    ]));
    let dir = tempfile::tempdir().expect("dir");
    let engine =
        switchboard::state_folder::open_engine(dir.path(), config(&fake.base_url, json!({})))
            .expect("engine");
    let dir2 = tempfile::tempdir().expect("dir");
    let engine2 =
        switchboard::state_folder::open_engine(dir2.path(), config(&tooling.base_url, json!({})))
            .expect("engine");
    let me = SessionKey::from_canonical("agent:main:main");
    let plain = SessionKey::from_canonical("agent:plain:main");
    // The engine's TLS set-up (rustls with ring): reqwest is built without a default
    // crypto provider, so `Client::new()` would panic.
    let tls =
        switchboard_protocol::tls_client::config(switchboard_protocol::tls_client::web_roots())
            .expect("tls");
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .expect("http client");
    let url = format!("{}/chat/completions", fake.base_url);
    // The baseline sends what a model turn sends: the request of a turn with a full history
    // window (the tools, 40 history messages), as the fake server received it.
    for _ in 0..30 {
        rt.block_on(turn(&engine, &me));
    }
    let body = fake.seen().pop().expect("a request").body;

    let mut g = c.benchmark_group("model");
    g.sample_size(50).measurement_time(Duration::from_secs(6));
    g.bench_function("http_alone", |b| {
        b.iter(|| {
            rt.block_on(async {
                let r: Value = http
                    .post(&url)
                    .json(&body)
                    .send()
                    .await
                    .expect("send")
                    .json()
                    .await
                    .expect("json");
                assert!(r.get("choices").is_some());
            })
        })
    });
    g.bench_function("scripted_turn", |b| {
        b.iter(|| rt.block_on(turn(&engine, &plain)))
    });
    g.bench_function("model_turn", |b| b.iter(|| rt.block_on(turn(&engine, &me))));
    g.bench_function("model_turn_with_tool", |b| {
        b.iter(|| rt.block_on(turn(&engine2, &me)))
    });
    g.finish();
}

fn bench_concurrent(c: &mut Criterion) {
    const RUNS: usize = 200;
    let rt = runtime();
    let slow = Answer {
        delay: Duration::from_millis(200),
        ..text_reply("Slowly, from the model.", 20, 5)
    };
    let fake = rt.block_on(Fake::start(vec![slow]));
    let dir = tempfile::tempdir().expect("dir");
    let engine = switchboard::state_folder::open_engine(
        dir.path(),
        config(&fake.base_url, json!({ "maxConcurrent": RUNS })),
    )
    .expect("engine");
    let keys: Vec<SessionKey> = (0..RUNS)
        .map(|i| SessionKey::from_canonical(format!("agent:main:c{i}")))
        .collect();
    let mut peak_threads = 0;
    let mut g = c.benchmark_group("model");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    g.bench_function("concurrent_200", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut set = JoinSet::new();
                for k in &keys {
                    let (engine, k) = (engine.clone(), k.clone());
                    set.spawn(async move { turn(&engine, &k).await });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                peak_threads = peak_threads.max(threads());
                while let Some(r) = set.join_next().await {
                    r.expect("a run");
                }
            })
        })
    });
    g.finish();
    println!(
        "concurrent_200: the fake saw at most {} requests at once; the process had at most {} threads",
        fake.max_in_flight(),
        peak_threads
    );
}

fn bench_delta_to_console(c: &mut Criterion) {
    const PIECES: usize = 20;
    let rt = runtime();
    let pieces: Vec<String> = (0..PIECES).map(|i| format!("word{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let fake = rt.block_on(Fake::start(vec![streamed_text(
        &refs,
        Duration::from_millis(2),
        Some((10, PIECES as u64)),
    )]));
    let dir = tempfile::tempdir().expect("dir");
    let engine = switchboard::state_folder::open_engine(
        dir.path(),
        config(&fake.base_url, json!({ "stream": true })),
    )
    .expect("engine");
    // The engine's tasks start on this runtime.
    let _entered = rt.enter();
    let api = engine.start();
    let mut console = Console::new(State::new("bench".into(), 0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Action>();
    let mut events = api.subscribe();
    // As the app does: one task turns the subscription into actions on a channel.
    rt.spawn(async move {
        loop {
            let action = match events.next().await {
                StreamItem::Event(e) => Action::Engine(Box::new(e.event)),
                StreamItem::Missed(_) => Action::Lagged,
                StreamItem::Closed => return,
            };
            if tx.send(action).is_err() {
                return;
            }
        }
    });
    let mut worst = Duration::ZERO;
    let mut all: Vec<Duration> = Vec::new();
    let mut g = c.benchmark_group("model");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    g.bench_function("delta_to_console", |b| {
        b.iter_custom(|iters| {
            let mut latencies: Vec<Duration> = Vec::new();
            while (latencies.len() as u64) < iters {
                let _ = fake.take_chunk_times();
                let mut taken: Vec<Instant> = Vec::with_capacity(PIECES);
                rt.block_on(async {
                    api.send(SendRequest {
                        key: "agent:main:main".into(),
                        text: "stream please".into(),
                        from: Sender::default(),
                        idempotency_key: None,
                    })
                    .await
                    .expect("send");
                    while taken.len() < PIECES {
                        let action = rx.recv().await.expect("events");
                        let delta = matches!(
                            &action,
                            Action::Engine(e) if matches!(**e, EngineEvent::ReplyDelta { .. })
                        );
                        let _ = console.update(action);
                        if delta {
                            taken.push(Instant::now());
                        }
                    }
                    engine.idle().await;
                    // Drain what the end of the run sent, so the next turn starts clean.
                    while let Ok(a) = rx.try_recv() {
                        let _ = console.update(a);
                    }
                });
                let written = fake.take_chunk_times();
                for (w, t) in written.iter().zip(&taken) {
                    latencies.push(t.saturating_duration_since(*w));
                }
            }
            latencies.truncate(iters as usize);
            for l in &latencies {
                worst = worst.max(*l);
            }
            all.extend(latencies.iter().copied());
            latencies.iter().sum()
        })
    });
    g.finish();
    all.sort();
    if !all.is_empty() {
        let pct = |p: f64| all[((all.len() - 1) as f64 * p) as usize];
        println!(
            "delta_to_console over {} deltas: median {:?}, p99 {:?}, worst {:?}",
            all.len(),
            pct(0.5),
            pct(0.99),
            worst
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_turns(&mut c);
    bench_concurrent(&mut c);
    bench_delta_to_console(&mut c);
    c.final_summary();
}
