//! `RemoteApi` over a real `Link` to a real gateway (`server::run` in this process, a real
//! socket, a real engine on disk): every method answers exactly as the engine itself does;
//! a wrong token and an unreachable gateway fail at once with a clear reason; a gateway that
//! goes away and comes back on the same port is reconnected to, calls meanwhile fail fast,
//! and subscribers are told to reload.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_remote::{DialError, Link, LinkOptions, RemoteApi};
use switchboard_server as server;
use switchboard_types::api::{
    ApiError, KeyPurpose, LinkState, PatchRequest, PolicySetting, SendRequest, Sender, SessionsApi,
    SessionsQuery, StreamItem, ToolCall, TranscriptQuery,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const TOKEN: &str = "remote-test-token";
const HANG: Duration = Duration::from_secs(30);

fn config() -> serde_json::Value {
    json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "reply": "re: {{text}}" } ] },
            { "id": "work", "model": "scripted", "script": [ { "reply": "ok" } ] },
        ] },
    })
}

/// A gateway on `listener` in front of `api`; dropping (or firing) the sender stops it.
fn serve(listener: TcpListener, api: Arc<dyn SessionsApi>) -> oneshot::Sender<()> {
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server::run(
        listener,
        api,
        server::Options::new(TOKEN.into()),
        async move {
            let _ = stopped.await;
        },
    ));
    stop
}

fn options(addr: std::net::SocketAddr, token: &str) -> LinkOptions {
    let mut o = LinkOptions::new(format!("ws://{addr}"), Some(token.into()));
    o.connect_timeout = Duration::from_secs(5);
    o.ping_every = Duration::from_millis(200);
    o
}

async fn remote(addr: std::net::SocketAddr) -> Arc<RemoteApi> {
    let link = Link::connect(options(addr, TOKEN))
        .await
        .expect("the gateway accepts the token");
    RemoteApi::new(Arc::new(link))
}

use crate::common::owner;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_answers_as_the_engine_does() {
    let b = common::bench(config());
    let local = b.engine.start();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _stop = serve(listener, local.clone());
    let remote = remote(addr).await;

    // Some state, made through the remote API.
    let receipt = remote
        .send(SendRequest {
            key: "agent:main:main".into(),
            text: "hello".into(),
            from: Sender {
                channel: Some("telegram".into()),
                sender: Some("alice".into()),
                ..Sender::default()
            },
            idempotency_key: None,
        })
        .await
        .expect("send");
    assert!(receipt.created);
    let run_id = receipt.run_id.clone().expect("a run answers");
    let remote_run = remote.wait_run(&run_id, HANG).await.expect("wait_run");
    assert_eq!(remote_run.status.as_str(), "ok");
    assert_eq!(remote_run.reply, "re: hello");
    assert_eq!(
        remote_run,
        local.wait_run(&run_id, HANG).await.expect("local")
    );
    assert!(remote.wait_work(receipt.work, HANG).await.expect("work"));
    assert!(local.wait_work(receipt.work, HANG).await.expect("work"));
    assert_eq!(
        remote.still_running(receipt.work).await.expect("still"),
        local.still_running(receipt.work).await.expect("still")
    );
    local
        .send(owner("agent:work:main", "ping"))
        .await
        .expect("local send");
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("idle");

    assert_eq!(
        remote.status().await.expect("status"),
        local.status().await.expect("status")
    );
    let q = SessionsQuery {
        limit: 50,
        count: true,
        ..SessionsQuery::default()
    };
    let page = remote.sessions(q.clone()).await.expect("sessions");
    assert_eq!(page.rows.len(), 2);
    assert_eq!(page, local.sessions(q).await.expect("sessions"));
    for key in ["agent:main:main", "agent:nope:main"] {
        assert_eq!(
            remote.session(key).await.expect("session"),
            local.session(key).await.expect("session"),
            "{key}"
        );
    }
    let tq = TranscriptQuery {
        key: "agent:main:main".into(),
        limit: 100,
        tools: true,
        raw: true,
        ..TranscriptQuery::default()
    };
    let page = remote.transcript(tq.clone()).await.expect("transcript");
    assert_eq!(page.lines.len(), 2, "{page:?}");
    assert_eq!(page, local.transcript(tq).await.expect("transcript"));
    for (raw, purpose) in [
        ("main", KeyPurpose::Requester),
        ("agent:main:main", KeyPurpose::Existing),
        ("agent:ghost:main", KeyPurpose::Existing),
        ("current", KeyPurpose::Inbound),
    ] {
        assert_eq!(
            remote.resolve_key(raw, purpose).await,
            local.resolve_key(raw, purpose).await,
            "{raw}"
        );
    }
    assert_eq!(
        remote.agents().await.expect("agents"),
        local.agents().await.expect("agents")
    );
    let tool = |name: &str| ToolCall {
        tool: name.into(),
        params: json!({"limit": 10}),
        requester: "agent:main:main".into(),
        sandboxed: false,
    };
    assert_eq!(
        remote
            .call_tool(tool("sessions_list"))
            .await
            .expect("tool")
            .result,
        local
            .call_tool(tool("sessions_list"))
            .await
            .expect("tool")
            .result
    );
    // Bad input keeps its kind across the wire (the CLI's exit 2 depends on it).
    let unknown = remote.call_tool(tool("no_such_tool")).await;
    assert!(matches!(unknown, Err(ApiError::BadInput(_))), "{unknown:?}");
    assert_eq!(unknown, local.call_tool(tool("no_such_tool")).await);

    let deny = PatchRequest {
        key: "agent:work:main".into(),
        send_policy: Some(PolicySetting::Deny),
    };
    let patched = remote.patch(deny.clone()).await.expect("patch");
    assert_eq!(patched.send_policy.map(|p| p.as_str()), Some("deny"));
    assert_eq!(patched, local.patch(deny).await.expect("patch"));
    let row = local
        .session("agent:work:main")
        .await
        .expect("session")
        .expect("exists");
    assert_eq!(row.row.policy.policy.as_str(), "deny");

    assert!(remote.delete("agent:work:main").await.expect("delete"));
    assert!(!local.delete("agent:work:main").await.expect("delete"));
    assert!(!remote.delete("agent:work:main").await.expect("delete"));
    assert_eq!(remote.session("agent:work:main").await.expect("gone"), None);

    let link = remote.link().expect("a remote API has a link");
    assert_eq!(link.target, format!("ws://{addr}"));
    assert!(
        matches!(&*link.state.borrow(), LinkState::Connected { protocol: 4, server, .. } if server.starts_with("switchboard ")),
        "{:?}",
        link.state.borrow()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_with_the_gateways_reason() {
    let b = common::bench(config());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _stop = serve(listener, b.engine.start());
    let err = tokio::time::timeout(HANG, Link::connect(options(addr, "wrong")))
        .await
        .expect("no hang")
        .err()
        .expect("refused");
    assert!(matches!(err, DialError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("unauthorized"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_fails_at_once() {
    // A port that was free a moment ago: nothing listens there.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr");
    let err = tokio::time::timeout(HANG, Link::connect(options(addr, TOKEN)))
        .await
        .expect("no hang")
        .err()
        .expect("nothing listens");
    assert!(matches!(err, DialError::Transient(_)), "{err:?}");
    assert!(err.to_string().contains("cannot reach"), "{err}");
}

/// Polls `state` until `want` holds (bounded).
async fn until_state(
    state: &mut tokio::sync::watch::Receiver<LinkState>,
    what: &str,
    want: impl Fn(&LinkState) -> bool,
) -> LinkState {
    tokio::time::timeout(HANG, state.wait_for(|s| want(s)))
        .await
        .unwrap_or_else(|_| panic!("link never {what}"))
        .expect("link alive")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_is_reconnected_and_subscribers_reload() {
    let b = common::bench(config());
    let local = b.engine.start();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = serve(listener, local.clone());
    let remote = remote(addr).await;
    let mut events = remote.subscribe();
    let mut state = remote.link().expect("link").state;
    until_state(&mut state, "measured a round trip", |s| {
        matches!(
            s,
            LinkState::Connected {
                rtt_ms: Some(_),
                ..
            }
        )
    })
    .await;
    // Whatever came before the drop (a gateway without event support answers the
    // subscription with a gap) is not what this test is about.
    while events.try_next().is_some() {}

    let _ = stop.send(());
    let s = until_state(&mut state, "noticed the drop", |s| {
        matches!(s, LinkState::Reconnecting { .. })
    })
    .await;
    let LinkState::Reconnecting {
        attempt,
        retry_in_ms,
        ..
    } = s
    else {
        unreachable!()
    };
    assert!(attempt >= 1 && retry_in_ms <= 6000, "{s:?}");
    // While away, a call fails fast instead of hanging.
    let away = tokio::time::timeout(Duration::from_secs(5), remote.status())
        .await
        .expect("a call while disconnected answers at once");
    assert!(matches!(away, Err(ApiError::Unavailable(_))), "{away:?}");

    // The same port again, the same engine.
    let listener = loop {
        match TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let _stop = serve(listener, local.clone());
    until_state(&mut state, "reconnected", |s| {
        matches!(s, LinkState::Connected { resynced: true, .. })
    })
    .await;
    let missed = tokio::time::timeout(HANG, async {
        loop {
            if let StreamItem::Missed(n) = events.next().await {
                return n;
            }
        }
    })
    .await
    .expect("the subscriber is told to reload");
    assert_eq!(missed, 0, "how many is unknown after a reconnect");
    assert_eq!(
        remote.status().await.expect("works again"),
        local.status().await.expect("status")
    );
}

/// Every engine event reaches a remote subscriber, in order, exactly as a local subscriber
/// sees it (the gateway's `switchboard.subscribe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_subscriber_sees_the_engines_events_in_order() {
    let b = common::bench(config());
    let local = b.engine.start();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _stop = serve(listener, local.clone());
    let remote = remote(addr).await;
    let mut far = remote.subscribe();
    let mut near = local.subscribe();
    // Made after `subscribe()`: its events must not be missed.
    let receipt = remote
        .send(owner("agent:main:main", "one"))
        .await
        .expect("send");
    assert!(remote.wait_work(receipt.work, HANG).await.expect("work"));
    let mut seen_near = Vec::new();
    while let Some(item) = near.try_next() {
        match item {
            StreamItem::Event(e) => seen_near.push(e),
            other => panic!("local stream: {other:?}"),
        }
    }
    assert!(
        seen_near.iter().any(|e| matches!(
            &e.event,
            switchboard_types::api::EngineEvent::RunEnded { .. }
        )),
        "{seen_near:?}"
    );
    let mut seen_far = Vec::new();
    while seen_far.len() < seen_near.len() {
        match tokio::time::timeout(HANG, far.next())
            .await
            .expect("events arrive")
        {
            StreamItem::Event(e) => seen_far.push(e),
            other => panic!("remote stream: {other:?} after {seen_far:?}"),
        }
    }
    assert_eq!(seen_far, seen_near);
}
