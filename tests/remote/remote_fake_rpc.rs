//! `RemoteApi` over a scripted `Rpc` (no socket): the requests it makes (method names and
//! params in the API's own serde shapes), how gateway errors come back as API errors, how
//! wire events become the subscriber's stream (events, gaps, reconnects), that a call made
//! after `subscribe()` waits for the subscription, and how long waits are sliced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_protocol::{ErrorShape, HelloOk};
use switchboard_remote::RemoteApi;
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_types::api::{
    ApiError, EngineEvent, LinkState, Sequenced, SessionsApi, SessionsQuery, StreamItem, WorkId,
};
use tokio::sync::{Notify, broadcast, watch};

type Answer = Box<dyn Fn(&str, &Value) -> Result<Value, RpcError> + Send + Sync>;

/// Records every request and answers it with `answer`; `switchboard.subscribe` is held
/// until `release` is notified when `hold` is set; `waitRun`/`waitWork` take as long as
/// they were asked to (on tokio's clock).
struct FakeRpc {
    log: Mutex<Vec<(String, Value)>>,
    answer: Answer,
    events: broadcast::Sender<WireEvent>,
    state: watch::Sender<LinkState>,
    hold: bool,
    release: Notify,
    waits_take_their_time: bool,
}

impl FakeRpc {
    fn new(answer: Answer) -> FakeRpc {
        FakeRpc {
            log: Mutex::new(Vec::new()),
            answer,
            events: broadcast::channel(64).0,
            state: watch::channel(LinkState::Connecting { attempt: 1 }).0,
            hold: false,
            release: Notify::new(),
            waits_take_their_time: false,
        }
    }

    fn methods(&self) -> Vec<String> {
        self.log
            .lock()
            .expect("log")
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }
}

#[async_trait]
impl Rpc for FakeRpc {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.log
            .lock()
            .expect("log")
            .push((method.to_string(), params.clone()));
        if method == "switchboard.subscribe" && self.hold {
            self.release.notified().await;
        }
        if self.waits_take_their_time
            && let Some(ms) = params.get("timeoutMs").and_then(Value::as_u64)
        {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        (self.answer)(method, &params)
    }

    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request(method, params).await
    }

    fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.events.subscribe()
    }

    fn hello(&self) -> Option<HelloOk> {
        None
    }

    fn state(&self) -> watch::Receiver<LinkState> {
        self.state.subscribe()
    }

    fn target(&self) -> String {
        "ws://fake:1".into()
    }
}

fn shape(code: &str, message: &str) -> ErrorShape {
    ErrorShape {
        code: code.into(),
        message: message.into(),
        extra: serde_json::Map::new(),
    }
}

#[tokio::test]
async fn calls_carry_the_api_types_and_errors_keep_their_kind() {
    let rpc = Arc::new(FakeRpc::new(Box::new(|m, p| match m {
        "switchboard.sessions" => Ok(json!({
            "rows": [], "offset": p["offset"], "matching": 0, "total": 7
        })),
        "switchboard.session" => Err(RpcError::Refused(shape("NOT_FOUND", "no such session"))),
        "switchboard.agents" => Err(RpcError::Timeout(30_000)),
        "switchboard.delete" => Ok(json!({"deleted": "not a bool"})),
        _ => Err(RpcError::Unavailable("down".into())),
    })));
    let api = RemoteApi::new(rpc.clone());
    let q = SessionsQuery {
        text: "ops".into(),
        offset: 5,
        limit: 10,
        ..SessionsQuery::default()
    };
    let page = api.sessions(q.clone()).await.expect("sessions");
    assert_eq!((page.total, page.offset), (7, 5));
    let sent = rpc.log.lock().expect("log")[0].clone();
    assert_eq!(sent.0, "switchboard.sessions");
    assert_eq!(sent.1, serde_json::to_value(&q).expect("json"));

    assert_eq!(
        api.session("k").await,
        Err(ApiError::NotFound("no such session".into()))
    );
    assert!(matches!(api.agents().await, Err(ApiError::Unavailable(m)) if m.contains("30000 ms")));
    assert_eq!(
        api.status().await,
        Err(ApiError::Unavailable("down".into()))
    );
    // An answer of the wrong shape is the gateway's fault, named, not a panic.
    assert!(
        matches!(api.delete("k").await, Err(ApiError::Unavailable(m)) if m.contains("deleted"))
    );
    let link = api.link().expect("a link");
    assert_eq!(link.target, "ws://fake:1");
}

fn sequenced(seq: u64) -> Value {
    serde_json::to_value(Sequenced {
        seq,
        event: EngineEvent::SessionDeleted {
            key: format!("k{seq}"),
        },
    })
    .expect("json")
}

#[tokio::test]
async fn wire_events_become_the_subscribers_stream() {
    let rpc = Arc::new(FakeRpc::new(Box::new(|_, _| Ok(json!({"seq": null})))));
    let api = RemoteApi::new(rpc.clone());
    let mut stream = api.subscribe();
    let _second = api.subscribe();
    let ev = |event: &str, payload: Value| WireEvent::Event {
        event: event.into(),
        payload,
    };
    for w in [
        ev("switchboard.event", sequenced(1)),
        ev("tick", json!({})),
        ev("switchboard.gap", json!({"missed": 3})),
        ev("switchboard.event", sequenced(5)),
        WireEvent::Reconnected,
        // A restarted gateway numbers from 1 again: not a gap.
        ev("switchboard.event", sequenced(1)),
        ev("switchboard.event", json!({"seq": "garbage"})),
    ] {
        rpc.events.send(w).expect("a listener");
    }
    let mut got = Vec::new();
    for _ in 0..6 {
        let item = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an item");
        got.push(match item {
            StreamItem::Event(e) => format!("event {}", e.seq),
            StreamItem::Missed(n) => format!("missed {n}"),
            StreamItem::Closed => "closed".into(),
        });
    }
    assert_eq!(
        got,
        [
            "event 1", "missed 3", "event 5", "missed 0", "event 1", "missed 1"
        ]
    );
    // One subscription on the wire however many subscribers.
    let subs = rpc
        .methods()
        .iter()
        .filter(|m| *m == "switchboard.subscribe")
        .count();
    assert_eq!(subs, 1);
}

#[tokio::test]
async fn a_call_after_subscribe_waits_for_the_subscription() {
    let mut fake = FakeRpc::new(Box::new(|m, _| match m {
        "switchboard.status" => Ok(json!({"attached": "x", "sessions": 1})),
        _ => Ok(json!({"seq": 4})),
    }));
    fake.hold = true;
    let rpc = Arc::new(fake);
    let api = RemoteApi::new(rpc.clone());
    let _stream = api.subscribe();
    let status = tokio::spawn({
        let api = api.clone();
        async move { api.status().await }
    });
    // Let everything that can run, run: the status request must not have gone out.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(rpc.methods(), ["switchboard.subscribe"]);
    rpc.release.notify_one();
    let s = status.await.expect("task").expect("status");
    assert_eq!(s.sessions, 1);
    assert_eq!(
        rpc.methods(),
        ["switchboard.subscribe", "switchboard.status"]
    );
}

#[tokio::test(start_paused = true)]
async fn long_waits_are_asked_in_slices_and_an_early_answer_ends_them() {
    let mut fake = FakeRpc::new(Box::new(|m, _| match m {
        "switchboard.waitRun" => Ok(json!({
            "runId": "r", "status": "running", "reply": "", "error": null
        })),
        _ => Ok(json!({"done": false})),
    }));
    fake.waits_take_their_time = true;
    let rpc = Arc::new(fake);
    let api = RemoteApi::new(rpc.clone());
    let r = api
        .wait_run("r", Duration::from_secs(50))
        .await
        .expect("wait");
    assert_eq!(r.status.as_str(), "running");
    let asked: Vec<u64> = rpc
        .log
        .lock()
        .expect("log")
        .iter()
        .map(|(_, p)| p["timeoutMs"].as_u64().expect("ms"))
        .collect();
    assert_eq!(asked, [20_000, 20_000, 10_000]);

    // A gateway that answers at once (a run it does not execute) is asked once, not in a
    // busy loop for the whole limit.
    let quick = Arc::new(FakeRpc::new(Box::new(|_, _| Ok(json!({"done": false})))));
    let api = RemoteApi::new(quick.clone());
    assert!(
        !api.wait_work(WorkId(1), Duration::from_secs(600))
            .await
            .expect("wait")
    );
    assert_eq!(quick.methods(), ["switchboard.waitWork"]);
    // No panic on an absurd limit.
    assert!(!api.wait_work(WorkId(1), Duration::MAX).await.expect("wait"));
}
