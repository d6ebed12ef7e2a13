//! Exchanges kept and navigable (issue 14 item 2), through `SessionsApi` on a real engine:
//! sends refused by the target's send policy and sends stopped by the chain limit are
//! entries of their own; pages over many exchanges return each once, newest first; one
//! exchange has every round with speaker, times and tokens, how it ended and its announce;
//! traffic counts per pair and minute.
//!
//! Flows cross the storage writer thread, so these run on real time; nothing asserts on it.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::store::SessionInit;
use switchboard_types::api::{
    ExchangesQuery, PatchRequest, PolicySetting, SendRequest, Sender, SessionsApi, ToolCall,
};
use switchboard_types::key::SessionKey;
use tempfile::TempDir;

const ME: &str = "agent:main:s2";
/// A turn as compared: round, speaker, listener, text, tokens in and out.
type Turn<'a> = (u32, &'a str, &'a str, &'a str, Option<u64>, Option<u64>);
const WORK: &str = "agent:work:s2";

struct Bench {
    engine: Engine,
    api: Arc<dyn SessionsApi>,
    dir: TempDir,
}

fn bench(config: Value) -> Bench {
    let config: Config = serde_json::from_value(config).expect("test config is valid");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine opens");
    Bench {
        api: Arc::new(engine.clone()),
        engine,
        dir,
    }
}

/// `main` and `work` talking: `work` answers the message and every reply round, `main`
/// answers every round, each turn with its own token counts; the announce says "summary".
fn two_agents(turns: u32) -> Bench {
    bench(json!({
        "session": { "agentToAgent": { "maxPingPongTurns": turns } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [
                { "when": { "step": "reply" }, "reply": "main says more (round {{round}})",
                  "tokens": { "in": 20, "out": 7 } },
            ] },
            { "id": "work", "model": "scripted", "script": [
                { "when": { "step": "message" }, "reply": "work got: {{text}}",
                  "tokens": { "in": 11, "out": 3 } },
                { "when": { "step": "reply" }, "reply": "work again (round {{round}})",
                  "tokens": { "in": 30, "out": 9 } },
                { "when": { "step": "announce" }, "reply": "summary of the talk" },
            ] },
        ] },
    }))
}

impl Bench {
    async fn session(&self, raw: &str) {
        self.engine
            .store()
            .ensure(&SessionKey::from_canonical(raw), SessionInit::default())
            .await
            .expect("session");
    }

    async fn send_as(&self, requester: &str, params: Value) -> Value {
        let call = ToolCall {
            tool: "sessions_send".into(),
            params,
            requester: requester.into(),
            sandboxed: false,
        };
        self.api.call_tool(call).await.expect("tool runs").result
    }

    async fn all(&self, key: Option<&str>) -> Vec<switchboard_types::api::ExchangeSummary> {
        let page = self
            .api
            .exchanges(ExchangesQuery {
                key: key.map(str::to_string),
                limit: 100,
                ..ExchangesQuery::default()
            })
            .await
            .expect("exchanges");
        assert!(!page.more);
        page.exchanges
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_by_the_targets_policy_is_an_entry_of_its_own() {
    let b = two_agents(0);
    b.session(ME).await;
    b.session(WORK).await;
    b.api
        .patch(PatchRequest {
            key: WORK.into(),
            send_policy: Some(PolicySetting::Deny),
        })
        .await
        .expect("patch");
    let r = b
        .send_as(ME, json!({ "sessionKey": WORK, "message": "let me in" }))
        .await;
    assert_eq!(r["status"], "forbidden", "{r}");
    b.engine.idle().await;
    let list = b.all(None).await;
    assert_eq!(list.len(), 1, "{list:?}");
    let e = &list[0];
    assert_eq!(e.kind.as_str(), "refused");
    assert_eq!((e.requester.as_str(), e.target.as_str()), (ME, WORK));
    assert_eq!(e.message, "let me in");
    assert_eq!(e.status.as_str(), "refused");
    assert_eq!(e.ended_reason.map(|r| r.as_str()), Some("policy"));
    assert_eq!(e.rounds, 0);
    assert!(e.detail.contains("does not accept sends"), "{}", e.detail);
    // It is one of each session's exchanges, and opens in full (no turns, no announce).
    assert_eq!(b.all(Some(WORK)).await.len(), 1);
    assert_eq!(b.all(Some(ME)).await.len(), 1);
    let d = b.api.exchange(&e.id).await.expect("read").expect("exists");
    assert!(d.turns.is_empty());
    assert_eq!(d.announce, None);
    let traffic = b.api.traffic(0).await.expect("traffic");
    assert_eq!(traffic.len(), 1);
    assert_eq!(
        (
            traffic[0].exchanges,
            traffic[0].refused,
            traffic[0].messages
        ),
        (1, 1, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stopped_by_the_chain_limit_is_an_entry_of_its_own() {
    let forward = |to: &str| {
        json!([{ "when": { "step": "message" },
                 "tools": [{ "name": "sessions_send", "args": { "sessionKey": to, "message": "pass it on", "timeoutSeconds": 0 } }],
                 "reply": "forwarded" }])
    };
    let b = bench(json!({
        "session": { "agentToAgent": { "maxPingPongTurns": 0, "maxChainHops": 4 } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "a", "default": true, "model": "scripted", "script": forward("agent:b:main") },
            { "id": "b", "model": "scripted", "script": forward("agent:c:main") },
            { "id": "c", "model": "scripted", "script": forward("agent:a:main") },
        ] },
    }));
    for k in ["agent:a:main", "agent:b:main", "agent:c:main"] {
        b.session(k).await;
    }
    b.api
        .send(SendRequest {
            key: "agent:a:main".into(),
            text: "start the chain".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .expect("send");
    b.engine.idle().await;
    let list = b.all(None).await;
    let kinds: Vec<(&str, &str, &str)> = list
        .iter()
        .map(|e| (e.kind.as_str(), e.requester.as_str(), e.target.as_str()))
        .collect();
    // Newest first: b's fifth send (stopped), then the four that ran.
    assert_eq!(
        kinds,
        [
            ("chain", "agent:b:main", "agent:c:main"),
            ("send", "agent:a:main", "agent:b:main"),
            ("send", "agent:c:main", "agent:a:main"),
            ("send", "agent:b:main", "agent:c:main"),
            ("send", "agent:a:main", "agent:b:main"),
        ]
    );
    let stopped = &list[0];
    assert_eq!(stopped.status.as_str(), "refused");
    assert_eq!(stopped.ended_reason.map(|r| r.as_str()), Some("chain"));
    assert_eq!(stopped.message, "pass it on");
    assert!(
        stopped
            .detail
            .contains("5 sends > session.agentToAgent.maxChainHops 4"),
        "{}",
        stopped.detail
    );
    let traffic = b.api.traffic(0).await.expect("traffic");
    let chain: u32 = traffic.iter().map(|t| t.chain_stopped).sum();
    let exchanges: u32 = traffic.iter().map(|t| t.exchanges).sum();
    assert_eq!((chain, exchanges), (1, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchange_in_full_has_every_round_with_speaker_times_and_tokens() {
    let b = two_agents(2);
    b.session(ME).await;
    b.session(WORK).await;
    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": WORK, "message": "hello work", "timeoutSeconds": 30 }),
        )
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    b.engine.idle().await;
    let list = b.all(None).await;
    assert_eq!(list.len(), 1);
    let s = &list[0];
    assert_eq!(s.kind.as_str(), "send");
    assert_eq!(s.status.as_str(), "done");
    assert_eq!(s.rounds, 3);
    assert_eq!(s.ended_reason.map(|r| r.as_str()), Some("cap"));
    assert!(
        s.detail.contains("maxPingPongTurns reached"),
        "{}",
        s.detail
    );
    assert_eq!(s.announce.map(|a| a.as_str()), Some("no_route"));
    assert!(s.ended_at.is_some_and(|e| e >= s.started_at));

    let d = b.api.exchange(&s.id).await.expect("read").expect("exists");
    let turns: Vec<Turn> = d
        .turns
        .iter()
        .map(|t| {
            (
                t.round,
                t.speaker.as_str(),
                t.listener.as_str(),
                t.text.as_str(),
                t.tokens_in,
                t.tokens_out,
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            (1, WORK, ME, "work got: hello work", Some(11), Some(3)),
            (2, ME, WORK, "main says more (round 2)", Some(20), Some(7)),
            (3, WORK, ME, "work again (round 3)", Some(30), Some(9)),
        ]
    );
    for t in &d.turns {
        assert_eq!(t.status.as_str(), "ok");
        assert!(t.started_at >= s.started_at);
        assert!(t.ended_at.is_some_and(|e| e >= t.started_at), "{t:?}");
    }
    let a = d.announce.expect("the announce ran");
    assert_eq!(a.outcome.as_str(), "no_route");
    assert_eq!(a.text.as_deref(), Some("summary of the talk"));
    assert!(a.detail.contains("no channel route"), "{}", a.detail);

    // Traffic: one exchange, its message and three answers, at the cap.
    let t = b.api.traffic(0).await.expect("traffic");
    assert_eq!(t.len(), 1);
    assert_eq!((t[0].requester.as_str(), t[0].target.as_str()), (ME, WORK));
    assert_eq!((t[0].exchanges, t[0].messages, t[0].capped), (1, 4, 1));
    assert_eq!(t[0].minute % 60_000, 0);
    // Since after it: nothing.
    let later = s.started_at + 60_001;
    assert!(b.api.traffic(later).await.expect("traffic").is_empty());
    // Something that does not exist is `None`, not an error.
    assert_eq!(
        b.api.exchange("no-such-exchange").await.expect("read"),
        None
    );
}

/// 100,000 exchanges (written straight into the table, many in the same millisecond):
/// paging through them returns each once, newest first; one session's pages hold exactly
/// its exchanges, as requester or target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_over_many_exchanges_returns_each_once_in_order() {
    let b = two_agents(0);
    let n = 100_000usize;
    if crate::common::test_store_url(b.dir.path()).is_some() {
        // The same rows as the SQLite branch below, made by the server in one statement.
        crate::common::store_exec(
            b.dir.path(),
            &format!(
                "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id,
                                    status, owner, started_at, kind)
                 SELECT 'x' || lpad(((i * 7919) % {n})::text, 6, '0'), 'c',
                     CASE i % 4 WHEN 0 THEN 'agent:main:a' WHEN 1 THEN 'agent:work:b'
                          ELSE 'agent:main:c' END,
                     CASE i % 4 WHEN 0 THEN 'agent:work:b' WHEN 1 THEN 'agent:main:a'
                          WHEN 2 THEN 'agent:work:d' ELSE 'agent:main:c' END,
                     'm', 'r', 'done', 'o', 1700000000000 + i / 10, 'send'
                 FROM generate_series(0, {}) AS i",
                n - 1
            ),
        );
    } else {
        let mut c = rusqlite::Connection::open(b.dir.path().join("switchboard.db")).expect("db");
        let tx = c.transaction().expect("tx");
        {
            let mut ins = tx
                .prepare(
                    "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id,
                                        status, owner, started_at, kind)
                     VALUES (?1, 'c', ?2, ?3, 'm', 'r', 'done', 'o', ?4, 'send')",
                )
                .expect("prepare");
            for i in 0..n {
                // Pairs rotate over four sessions; ten exchanges share each millisecond.
                let (req, tgt) = match i % 4 {
                    0 => ("agent:main:a", "agent:work:b"),
                    1 => ("agent:work:b", "agent:main:a"),
                    2 => ("agent:main:c", "agent:work:d"),
                    _ => ("agent:main:c", "agent:main:c"),
                };
                ins.execute(rusqlite::params![
                    format!("x{:06}", (i * 7919) % n),
                    req,
                    tgt,
                    1_700_000_000_000i64 + (i / 10) as i64
                ])
                .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    for (key, expected) in [
        (None, n),
        (Some("agent:main:a"), n / 2),
        (Some("agent:main:c"), n / 2),
    ] {
        let mut seen = HashSet::new();
        let mut last: Option<(i64, String)> = None;
        let mut before = None;
        let mut pages = 0;
        loop {
            let page = b
                .api
                .exchanges(ExchangesQuery {
                    key: key.map(str::to_string),
                    before: before.clone(),
                    since: None,
                    limit: 1000,
                })
                .await
                .expect("page");
            pages += 1;
            for e in &page.exchanges {
                let here = (e.started_at, e.id.clone());
                if let Some(prev) = &last {
                    assert!(&here < prev, "out of order: {here:?} after {prev:?}");
                }
                if let Some(k) = key {
                    assert!(e.requester == k || e.target == k);
                }
                assert!(seen.insert(e.id.clone()), "{} twice", e.id);
                last = Some(here);
            }
            before = page.exchanges.last().map(|e| e.id.clone());
            if !page.more {
                break;
            }
        }
        assert_eq!(seen.len(), expected, "{key:?}");
        assert_eq!(pages, expected.div_ceil(1000), "{key:?}");
    }
    // `since` keeps only the newest: the last 1,000 milliseconds hold 10,000 exchanges.
    let page = b
        .api
        .exchanges(ExchangesQuery {
            since: Some(1_700_000_000_000 + (n / 10) as i64 - 1000),
            limit: 1000,
            ..ExchangesQuery::default()
        })
        .await
        .expect("page");
    assert!(page.more);
    assert_eq!(page.exchanges.len(), 1000);
}
