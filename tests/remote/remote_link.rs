//! `remote::Link` against a scripted gateway (a real WebSocket server in this process whose
//! every frame the test writes): the `connect` it sends (client, role, scopes, caps, token,
//! the device signer's signature over the challenge's nonce), events passed on in order and
//! a skipped `seq` reported as a resync, OpenClaw's two-answer `agent` request, a request
//! nobody answers timing out, a pending call failing at once when the connection drops, a
//! redial the gateway refuses being final, one it refuses for now (a lockout) being tried
//! again after the wait it names, and a gateway that stops answering the health probe being
//! treated as gone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_protocol::{ClientInfo, DeviceAuth};
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_remote::{DeviceSigner, Link, LinkOptions};
use switchboard_types::api::LinkState;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

type Ws = WebSocketStream<TcpStream>;

const HANG: Duration = Duration::from_secs(30);

fn hello() -> Value {
    json!({"type": "res", "id": "connect", "ok": true, "payload": {
        "type": "hello-ok", "protocol": 4, "server": {"version": "test"},
        "features": {"methods": ["health"], "events": []}, "snapshot": {},
        "policy": {"maxPayload": 1_000_000, "maxBufferedBytes": 1_000_000, "tickIntervalMs": 30_000}
    }})
}

async fn put(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.expect("send");
}

/// The next request frame (None: the client went away).
async fn take(ws: &mut Ws) -> Option<Value> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).ok(),
            Some(Ok(_)) => continue,
            _ => return None,
        }
    }
}

/// Challenge, then the client's `connect` (returned), answered by `answer`.
async fn handshake(ws: &mut Ws, answer: Value) -> Value {
    put(
        ws,
        json!({"type": "event", "event": "connect.challenge",
               "payload": {"nonce": "nonce-42", "ts": 1_700_000_000_000u64}}),
    )
    .await;
    let connect = take(ws).await.expect("connect");
    put(ws, answer).await;
    connect
}

/// A gateway whose accepted connections are handed to the test, one by one.
async fn gateway() -> (String, mpsc::UnboundedReceiver<Ws>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            if let Ok(ws) = tokio_tungstenite::accept_async(tcp).await
                && tx.send(ws).is_err()
            {
                return;
            }
        }
    });
    (url, rx)
}

/// Answers every request (health probes included) with `{}` until the client leaves.
async fn answer_all(mut ws: Ws) {
    while let Some(req) = take(&mut ws).await {
        put(
            &mut ws,
            json!({"type": "res", "id": req["id"], "ok": true, "payload": {}}),
        )
        .await;
    }
}

struct Signer(Mutex<Option<String>>);

impl DeviceSigner for Signer {
    fn sign(
        &self,
        client: &ClientInfo,
        role: &str,
        scopes: &[String],
        token: Option<&str>,
        nonce: &str,
        ts: u64,
    ) -> DeviceAuth {
        *self.0.lock().expect("lock") = Some(format!(
            "{}|{role}|{}|{}|{nonce}|{ts}",
            client.id,
            scopes.join(","),
            token.unwrap_or_default()
        ));
        DeviceAuth {
            id: "dev".into(),
            public_key: "pk".into(),
            signature: "sig".into(),
            signed_at: ts,
            nonce: nonce.into(),
            extra: serde_json::Map::new(),
        }
    }
}

fn options(url: &str) -> LinkOptions {
    let mut o = LinkOptions::new(url, Some("tok".into()));
    o.connect_timeout = Duration::from_secs(5);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_says_who_it_is_and_events_arrive_in_order() {
    let (url, mut conns) = gateway().await;
    let signer = Arc::new(Signer(Mutex::new(None)));
    let mut o = options(&url);
    o.device = Some(signer.clone());
    let server = tokio::spawn(async move {
        let mut ws = conns.recv().await.expect("a connection");
        let connect = handshake(&mut ws, hello()).await;
        (ws, connect)
    });
    let link = Link::connect(o).await.expect("connected");
    let (mut ws, connect) = server.await.expect("server");
    let p = &connect["params"];
    assert_eq!(connect["method"], "connect");
    assert_eq!(
        (p["client"]["id"].as_str(), p["client"]["mode"].as_str()),
        (Some("cli"), Some("cli"))
    );
    assert_eq!(p["role"], "operator");
    assert_eq!(
        p["scopes"],
        json!(["operator.read", "operator.write", "operator.admin"])
    );
    assert_eq!(p["caps"], json!(["switchboard.v1"]));
    assert_eq!(p["auth"]["token"], "tok");
    assert_eq!(p["device"]["nonce"], "nonce-42");
    assert_eq!(
        signer.0.lock().expect("lock").as_deref(),
        Some("cli|operator|operator.read,operator.write,operator.admin|tok|nonce-42|1700000000000")
    );
    assert!(matches!(
        &*link.state().borrow(),
        LinkState::Connected { protocol: 4, server, .. } if server == "openclaw test"
    ));

    let mut events = link.events();
    for seq in [1, 2, 4] {
        put(
            &mut ws,
            json!({"type": "event", "event": "e", "payload": {"n": seq}, "seq": seq}),
        )
        .await;
    }
    let mut got = Vec::new();
    while got.len() < 4 {
        got.push(
            tokio::time::timeout(HANG, events.recv())
                .await
                .expect("an event")
                .expect("open"),
        );
    }
    let e = |n: u64| WireEvent::Event {
        event: "e".into(),
        payload: json!({"n": n}),
    };
    // 3 never came: a resync signal before 4.
    assert_eq!(got, [e(1), e(2), WireEvent::Reconnected, e(4)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_answer_of_a_two_answer_request_and_a_timeout() {
    let (url, mut conns) = gateway().await;
    tokio::spawn(async move {
        let mut ws = conns.recv().await.expect("a connection");
        handshake(&mut ws, hello()).await;
        while let Some(req) = take(&mut ws).await {
            match req["method"].as_str() {
                Some("agent") => {
                    put(
                        &mut ws,
                        json!({"type": "res", "id": req["id"], "ok": true,
                                        "payload": {"status": "accepted"}}),
                    )
                    .await;
                    put(
                        &mut ws,
                        json!({"type": "res", "id": req["id"], "ok": true,
                                        "payload": {"status": "ok", "text": "done"}}),
                    )
                    .await;
                }
                Some("slow") => {} // never answered
                _ => {
                    put(
                        &mut ws,
                        json!({"type": "res", "id": req["id"], "ok": false,
                                        "error": {"code": "INVALID_REQUEST", "message": "nope"}}),
                    )
                    .await;
                }
            }
        }
    });
    let mut o = options(&url);
    o.request_timeout = Duration::from_millis(300);
    let link = Link::connect(o).await.expect("connected");
    assert_eq!(
        link.request_final("agent", json!({})).await.expect("final"),
        json!({"status": "ok", "text": "done"})
    );
    assert_eq!(
        link.request("agent", json!({})).await.expect("first"),
        json!({"status": "accepted"})
    );
    assert_eq!(
        link.request("slow", json!({})).await,
        Err(RpcError::Timeout(300))
    );
    match link.request("other", json!({})).await {
        Err(RpcError::Refused(e)) => assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("INVALID_REQUEST", "nope")
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_fails_pending_calls_and_a_refused_redial_is_final() {
    let (url, mut conns) = gateway().await;
    let (asked_tx, mut asked) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut ws = conns.recv().await.expect("a connection");
        handshake(&mut ws, hello()).await;
        // The first real request is left pending; then the connection drops.
        while let Some(req) = take(&mut ws).await {
            if req["method"] == "pending" {
                let _ = asked_tx.send(());
                break;
            }
            put(
                &mut ws,
                json!({"type": "res", "id": req["id"], "ok": true, "payload": {}}),
            )
            .await;
        }
        drop(ws);
        // The redial is refused: the token was revoked.
        let mut ws = conns.recv().await.expect("a redial");
        handshake(
            &mut ws,
            json!({"type": "res", "id": "connect", "ok": false,
                   "error": {"code": "INVALID_REQUEST", "message": "unauthorized: token revoked"}}),
        )
        .await;
        // Nothing more is dialled.
        assert!(
            tokio::time::timeout(Duration::from_secs(2), conns.recv())
                .await
                .is_err(),
            "a refused link does not dial again"
        );
    });
    let link = Link::connect(options(&url)).await.expect("connected");
    let pending = tokio::spawn({
        let link = link.clone();
        async move { link.request("pending", json!({})).await }
    });
    asked.recv().await.expect("asked");
    let failed = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("the pending call fails at once")
        .expect("task");
    assert!(
        matches!(failed, Err(RpcError::Unavailable(_))),
        "{failed:?}"
    );
    let mut state = link.state();
    let s = tokio::time::timeout(
        HANG,
        state.wait_for(|s| matches!(s, LinkState::Failed { .. })),
    )
    .await
    .expect("the link gives up")
    .expect("open")
    .clone();
    assert!(
        matches!(&s, LinkState::Failed { message: reason } if reason.contains("token revoked")),
        "{s:?}"
    );
    match link.request("x", json!({})).await {
        Err(RpcError::Unavailable(m)) => assert!(m.contains("token revoked"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redial_refused_for_now_is_tried_again_after_the_wait_it_names() {
    let (url, mut conns) = gateway().await;
    let server = tokio::spawn(async move {
        let mut ws = conns.recv().await.expect("a connection");
        handshake(&mut ws, hello()).await;
        drop(ws);
        // Locked out (by someone else's failures) twice, as our gateway words it.
        for _ in 0..2 {
            let mut ws = conns.recv().await.expect("a redial");
            handshake(
                &mut ws,
                json!({"type": "res", "id": "connect", "ok": false,
                       "error": {"code": "INVALID_REQUEST",
                                 "message": "too many failed attempts; retry in 1 s"}}),
            )
            .await;
        }
        let mut ws = conns.recv().await.expect("a third redial");
        handshake(&mut ws, hello()).await;
        answer_all(ws).await;
    });
    let link = Link::connect(options(&url)).await.expect("connected");
    let mut state = link.state();
    let mut seen = Vec::new();
    let connected_again = tokio::time::timeout(HANG, async {
        loop {
            state.changed().await.expect("the link lives");
            let s = state.borrow_and_update().clone();
            seen.push(s.clone());
            match s {
                LinkState::Connected { resynced: true, .. } => return,
                LinkState::Failed { message: reason } => panic!("gave up: {reason}"),
                _ => {}
            }
        }
    })
    .await;
    assert!(connected_again.is_ok(), "never connected again: {seen:?}");
    // The wait the gateway named was honoured (shown in the header as the next retry).
    assert!(
        seen.iter().any(
            |s| matches!(s, LinkState::Reconnecting { retry_in_ms, message: reason, .. }
            if *retry_in_ms >= 1000 && reason.contains("too many failed attempts"))
        ),
        "{seen:?}"
    );
    assert_eq!(
        link.request("health", json!({})).await.expect("served"),
        json!({})
    );
    drop(link);
    let _ = tokio::time::timeout(HANG, server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_stops_answering_is_treated_as_gone() {
    let (url, mut conns) = gateway().await;
    tokio::spawn(async move {
        let mut ws = conns.recv().await.expect("a connection");
        handshake(&mut ws, hello()).await;
        // Reads, never answers, keeps the socket open: a half-open connection.
        while take(&mut ws).await.is_some() {}
        // The link dials again: this one behaves.
        if let Some(mut ws) = conns.recv().await {
            handshake(&mut ws, hello()).await;
            answer_all(ws).await;
        }
    });
    let mut o = options(&url);
    o.ping_every = Duration::from_millis(100);
    let link = Link::connect(o).await.expect("connected");
    let mut state = link.state();
    let s = tokio::time::timeout(
        HANG,
        state.wait_for(|s| matches!(s, LinkState::Reconnecting { .. })),
    )
    .await
    .expect("the silence is noticed")
    .expect("open")
    .clone();
    assert!(
        matches!(&s, LinkState::Reconnecting { message: reason, .. } if reason.contains("stopped answering")),
        "{s:?}"
    );
    tokio::time::timeout(
        HANG,
        state.wait_for(|s| matches!(s, LinkState::Connected { resynced: true, .. })),
    )
    .await
    .expect("back")
    .expect("open");
}
