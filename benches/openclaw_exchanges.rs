//! Exchanges rebuilt from an OpenClaw gateway (issue 25 item 1): `OpenClawApi`'s backfill
//! against a fake gateway holding 1,000 sessions and 10,000 inter-session turns (500 pairs,
//! five exchanges each of four forwarded turns, the last one ended by a hidden REPLY_SKIP),
//! answering `sessions.list` and `chat.history` in process (no socket: the figure is our
//! side's work). It measures
//! - the backfill: a fresh API's first `exchanges()` (lists every session, reads each one's
//!   history eight at a time, rebuilds). Target < 3 s.
//! - the UI during it: the longest gap a task ticking every millisecond on the same runtime
//!   saw while a backfill ran (printed; the console's UI task is such a task). Target < 16 ms.
//! - a live round: a forwarded line and its reply pushed as `session.message` events, until
//!   the exchange's round event comes out (the book holding the 10,000 turns).
//!
//! Run: `cargo bench --bench openclaw_exchanges`.

#[path = "../tests/remote/openclaw_record.rs"]
mod openclaw_record;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use openclaw_record::{RecordGateway, forwarded, reply};
use serde_json::{Value, json};
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_types::api::{EngineEvent, ExchangesQuery, SessionsApi, StreamItem};

const PAIRS: usize = 500;
const EXCHANGES_PER_PAIR: usize = 5;
const T0: i64 = 1_700_000_000_000;

/// 1,000 sessions (500 requester/target pairs), 10,000 forwarded turns with their replies.
fn gateway() -> Arc<RecordGateway> {
    let gw = RecordGateway::default();
    for p in 0..PAIRS {
        let (r, t) = (format!("agent:main:r{p}"), format!("agent:work:t{p}"));
        let (mut rm, mut tm): (Vec<Value>, Vec<Value>) = (Vec::new(), Vec::new());
        let (mut rs, mut ts) = (0i64, 0i64);
        for x in 0..EXCHANGES_PER_PAIR {
            let at = T0 + (p * 1000 + x * 100) as i64;
            let id = format!("{p}-{x}");
            ts += 1;
            tm.push(forwarded(ts, at, Some(&r), &format!("task {id}")));
            ts += 1;
            tm.push(reply(
                ts,
                at + 10,
                &format!("t1-{id}"),
                &format!("t says {id} 1"),
            ));
            rs += 1;
            rm.push(forwarded(rs, at + 20, Some(&t), &format!("t says {id} 1")));
            rs += 1;
            rm.push(reply(
                rs,
                at + 30,
                &format!("r2-{id}"),
                &format!("r says {id} 2"),
            ));
            ts += 1;
            tm.push(forwarded(ts, at + 40, Some(&r), &format!("r says {id} 2")));
            ts += 1;
            tm.push(reply(
                ts,
                at + 50,
                &format!("t3-{id}"),
                &format!("t says {id} 3"),
            ));
            rs += 1;
            rm.push(forwarded(rs, at + 60, Some(&t), &format!("t says {id} 3")));
            // r's REPLY_SKIP, hidden by chat.history: its number is skipped.
            rs += 1;
        }
        let updated = T0 + (p * 1000) as i64;
        gw.add(
            json!({ "key": r, "updatedAt": updated, "sessionId": format!("sr{p}") }),
            &json!({ "messages": rm, "totalMessages": rs }),
        );
        gw.add(
            json!({ "key": t, "updatedAt": updated, "sessionId": format!("st{p}") }),
            &json!({ "messages": tm, "totalMessages": ts }),
        );
    }
    gw.sort();
    Arc::new(gw)
}

fn query() -> ExchangesQuery {
    ExchangesQuery {
        limit: 100,
        ..ExchangesQuery::default()
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let gw = gateway();

    // One backfill, checked, with a ticking task beside it.
    rt.block_on(async {
        let api = OpenClawApi::new(gw.clone());
        let running = Arc::new(AtomicBool::new(true));
        let worst = Arc::new(AtomicU64::new(0));
        let ticker = {
            let (running, worst) = (running.clone(), worst.clone());
            tokio::spawn(async move {
                let mut last = Instant::now();
                while running.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let gap = last.elapsed().as_micros() as u64;
                    worst.fetch_max(gap, Ordering::SeqCst);
                    last = Instant::now();
                }
            })
        };
        let started = Instant::now();
        let page = api.exchanges(query()).await.expect("exchanges");
        let took = started.elapsed();
        running.store(false, Ordering::SeqCst);
        let _ = ticker.await;
        assert_eq!(page.exchanges.len(), 100);
        assert!(page.more);
        let traffic = api.traffic(0).await.expect("traffic");
        let turns: u32 = traffic.iter().map(|t| t.messages - t.exchanges).sum();
        assert_eq!(turns as usize, PAIRS * EXCHANGES_PER_PAIR * 4);
        eprintln!(
            "openclaw backfill: {} sessions, {turns} inter-session turns: {took:?}; \
             longest 1 ms tick meanwhile: {:.1} ms",
            PAIRS * 2,
            worst.load(Ordering::SeqCst) as f64 / 1000.0
        );
    });

    let mut g = c.benchmark_group("openclaw_exchanges");
    g.sample_size(10);
    g.bench_function("backfill 1,000 sessions, 10,000 turns", |b| {
        b.iter(|| {
            rt.block_on(async {
                let api = OpenClawApi::new(gw.clone());
                api.exchanges(query()).await.expect("exchanges")
            })
        })
    });

    // A live round into the full book.
    let api = OpenClawApi::new(gw.clone());
    let mut events = rt.block_on(async {
        let events = api.subscribe();
        api.exchanges(query()).await.expect("exchanges");
        events
    });
    let mut n = 0i64;
    g.bench_function("live round to its event, 10,000 turns held", |b| {
        b.iter(|| {
            rt.block_on(async {
                n += 1;
                let key = "agent:work:t0";
                let seq = 1_000 + 2 * n;
                let at = T0 + 10_000_000 + n * 100;
                gw.push(
                    "session.message",
                    json!({ "sessionKey": key, "messageSeq": seq,
                            "message": forwarded(seq, at, Some("agent:main:r0"), &format!("live {n}")) }),
                );
                gw.push(
                    "session.message",
                    json!({ "sessionKey": key, "messageSeq": seq + 1,
                            "message": reply(seq + 1, at + 5, &format!("live-{n}"), "ok") }),
                );
                loop {
                    match events.next().await {
                        StreamItem::Event(e) => {
                            if matches!(e.event, EngineEvent::ExchangeRound { .. }) {
                                break;
                            }
                        }
                        StreamItem::Missed(_) => {}
                        StreamItem::Closed => panic!("closed"),
                    }
                }
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
