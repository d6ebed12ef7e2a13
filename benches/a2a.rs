//! Agent-to-agent throughput and latency (DESIGN §4, issue 3), with instant scripted agents:
//!
//! - `sends_across_sessions`: 1,000 concurrent `sessions_send` calls, each from its own
//!   requester to its own target (so lanes run in parallel), waited for their reply; the
//!   exchange after it (announce) included when `…_until_idle`.
//! - `sends_fire_and_forget_accepted`: the same with `timeoutSeconds: 0`, until every call
//!   has its `accepted` (each exchange durably recorded first).
//! - `send_5_rounds_announce`: one send with the default 5 ping-pong turns and the announce,
//!   until the engine is idle (the agents take no time, so all of it is engine overhead).
//! - `one_turn`: an inbound message answered by its session's agent.
//! - `storage_floor_*`: no agents, no runs: only the transcript appends a waited send makes
//!   (the inbound message with the reply in one commit, then the announce's reply in a second
//!   one), for 1,000 targets at once. The ceiling the database puts on `sends_*`.
//!
//! Run: `cargo bench --bench a2a`.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use serde_json::json;
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::inbound::Inbound;
use switchboard_engine::store::SessionInit;
use switchboard_engine::tools::ToolContext;
use switchboard_store_sqlite::queries::NewLine;
use switchboard_types::key::SessionKey;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

const PAIRS: usize = 1_000;

fn engine(turns: u32, dir: &std::path::Path) -> Engine {
    let config = json!({
        "session": { "agentToAgent": { "maxPingPongTurns": turns } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [
                { "when": { "step": "reply" }, "reply": "main says {{round}}" },
            ] },
            { "id": "work", "model": "scripted", "script": [
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
                { "reply": "work says {{round}}" },
            ] },
        ] },
    });
    let config: Config = serde_json::from_value(config).expect("config");
    switchboard::state_folder::open_engine(dir, config).expect("engine")
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn key(s: String) -> SessionKey {
    SessionKey::from_canonical(s)
}

fn bench_sends(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(0, dir.path());
    rt.block_on(async {
        for i in 0..PAIRS {
            for k in [format!("agent:main:s{i}"), format!("agent:work:s{i}")] {
                engine
                    .store()
                    .ensure(&key(k), SessionInit::default())
                    .await
                    .expect("session");
            }
        }
    });
    let mut g = c.benchmark_group("a2a");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(PAIRS as u64));
    for (name, timeout, until_idle) in [
        ("sends_across_sessions_waited_1000", 30, false),
        ("sends_across_sessions_until_idle_1000", 30, true),
        ("sends_fire_and_forget_accepted_1000", 0, false),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                timed_rounds(
                    iters,
                    || {
                        rt.block_on(async {
                            for_all_pairs(|i| {
                                let engine = engine.clone();
                                async move {
                                    let ctx =
                                        ToolContext::new(key(format!("agent:main:s{i}")), false);
                                    let params = json!({
                                        "sessionKey": format!("agent:work:s{i}"),
                                        "message": "ping",
                                        "timeoutSeconds": timeout,
                                    });
                                    let r = engine
                                        .call_tool("sessions_send", &params, &ctx)
                                        .await
                                        .expect("send");
                                    let expected = if timeout == 0 { "accepted" } else { "ok" };
                                    assert_eq!(r["status"], expected, "{r}");
                                }
                            })
                            .await;
                            if until_idle {
                                engine.idle().await;
                            }
                        })
                    },
                    // Let the untimed tail (announces) finish before the next round.
                    || rt.block_on(engine.idle()),
                )
            })
        });
    }
    // The storage floor: the same 1,000 targets, each given what a waited send appends to it
    // (two lines in one commit, then one line in the next), with nothing else going on.
    for (name, second) in [
        ("storage_floor_one_commit_per_target_1000", false),
        ("storage_floor_two_commits_per_target_1000", true),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let round = || {
                    rt.block_on(for_all_pairs(|i| {
                        let store = engine.store().clone();
                        async move {
                            let target = key(format!("agent:work:s{i}"));
                            let lines = vec![floor_line("user", i), floor_line("assistant", i)];
                            store.append(&target, lines).await.expect("append");
                            if second {
                                let line = vec![floor_line("assistant", i)];
                                store.append(&target, line).await.expect("append");
                            }
                        }
                    }))
                };
                timed_rounds(iters, round, || ())
            })
        });
    }
    g.finish();
}

/// Time `iters` runs of `round`, each followed by an untimed `after`.
fn timed_rounds(iters: u64, mut round: impl FnMut(), mut after: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t = Instant::now();
        round();
        total += t.elapsed();
        after();
    }
    total
}

/// Run `task(i)` for every pair at once, each on its own task, and wait for all of them.
async fn for_all_pairs<F, Fut>(task: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = JoinSet::new();
    for i in 0..PAIRS {
        set.spawn(task(i));
    }
    while let Some(r) = set.join_next().await {
        r.expect("task");
    }
}

/// A transcript message about the size of a send's (about 400 bytes once stored).
fn floor_line(role: &str, i: usize) -> NewLine {
    NewLine::message(json!({
        "role": role,
        "content": [{ "type": "text", "text": format!("message {i} of the storage floor bench") }],
        "timestamp": 1_795_353_349_734_i64,
        "provenance": {
            "kind": "inter_session",
            "sourceSessionKey": format!("agent:main:s{i}"),
            "sourceChannel": "webchat",
            "sourceTool": "sessions_send",
        },
        "api": "scripted",
        "provider": "switchboard",
        "model": "scripted/work",
        "stopReason": "stop",
    }))
}

fn bench_latency(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(5, dir.path());
    let (me, work) = (key("agent:main:a".into()), key("agent:work:b".into()));
    rt.block_on(async {
        for k in [&me, &work] {
            engine
                .store()
                .ensure(k, SessionInit::default())
                .await
                .expect("session");
        }
    });
    let mut g = c.benchmark_group("a2a");
    g.sample_size(30).measurement_time(Duration::from_secs(6));
    g.bench_function("send_5_rounds_announce", |b| {
        b.iter(|| {
            rt.block_on(async {
                let ctx = ToolContext::new(me.clone(), false);
                let params = json!({ "sessionKey": work.as_str(), "message": "ping" });
                let r = engine
                    .call_tool("sessions_send", &params, &ctx)
                    .await
                    .expect("send");
                assert_eq!(r["status"], "ok");
                engine.idle().await;
            })
        })
    });
    g.bench_function("one_turn", |b| {
        b.iter(|| {
            rt.block_on(async {
                let got = engine
                    .receive(&me, "hello", &Inbound::default())
                    .await
                    .expect("receive");
                let outcome = got.run.expect("a run").wait().await;
                assert!(outcome.error.is_none());
            })
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_sends(&mut c);
    bench_latency(&mut c);
    c.final_summary();
}
