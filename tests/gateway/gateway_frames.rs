//! Frames agree end to end, with a real `switchboard serve` process: a session holding a
//! ~10 MB message (whose JSON escaping doubles it) is read over `--connect … sessions show`
//! and through the remote API with its text cut and marked; no frame the gateway sends is
//! over the `maxPayload` it advertised; the link stays up throughout (no reconnect), and a
//! request over that limit is refused by the client without dropping the link.

use crate::gateway_process;

use std::process::Command;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use gateway_process::{BIN, WAIT, bounded, start_with_token};
use serde_json::{Value, json};
use switchboard_remote::rpc::{Rpc, RpcError};
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::{LinkState, SessionsApi, TranscriptQuery};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const KEY: &str = "agent:main:main";
const MARKER: &str = "…(truncated)…";

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A raw client that reads frames of any size (to measure what the gateway sends).
async fn raw_client(addr: &str, token: &str) -> (Ws, u64) {
    let tcp = TcpStream::connect(addr).await.expect("tcp");
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (mut ws, _) =
        tokio_tungstenite::client_async_with_config(format!("ws://{addr}/"), tcp, Some(config))
            .await
            .expect("ws");
    next_text(&mut ws).await; // the challenge
    let connect = gateway_process::connect_req(token, None);
    ws.send(Message::text(connect.to_string()))
        .await
        .expect("connect");
    let hello: Value = serde_json::from_str(&next_text(&mut ws).await).expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    let max = hello["payload"]["policy"]["maxPayload"]
        .as_u64()
        .expect("maxPayload");
    (ws, max)
}

async fn next_text(ws: &mut Ws) -> String {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
        {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// Sends a request and returns the text of its answer, checking every frame on the way
/// against `max`.
async fn call(ws: &mut Ws, max: u64, id: &str, method: &str, params: Value) -> String {
    let req = json!({"type": "req", "id": id, "method": method, "params": params});
    ws.send(Message::text(req.to_string())).await.expect("send");
    loop {
        let text = next_text(ws).await;
        assert!(
            text.len() as u64 <= max,
            "a frame of {} bytes, over the advertised maxPayload {max}",
            text.len()
        );
        let v: Value = serde_json::from_str(&text).expect("json");
        if v["type"] == "res" && v["id"] == id {
            return text;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_message_is_read_remotely_cut_and_marked_on_a_link_that_stays_up() {
    let g = start_with_token(&[], None);
    let token = std::fs::read_to_string(g.state().join("gateway-token"))
        .expect("token")
        .trim()
        .to_string();
    let (mut ws, max) = raw_client(&g.addr, &token).await;
    // Quotes and newlines: each escapes to two bytes, so the message's JSON is ~20 MB, and
    // an answer holding it as text and as the stored message ~40 MB.
    let big = "\"\n".repeat(5_000_000);
    let sent = call(
        &mut ws,
        max,
        "s",
        "chat.send",
        json!({"sessionKey": KEY, "message": big, "idempotencyKey": "big-1"}),
    )
    .await;
    assert!(sent.contains("\"ok\":true"), "{sent}");
    drop(big);

    // OpenClaw's history: within the frame limit, the message cut and marked.
    let history = call(
        &mut ws,
        max,
        "h",
        "chat.history",
        json!({"sessionKey": KEY}),
    )
    .await;
    let history: Value = serde_json::from_str(&history).expect("json");
    assert_eq!(history["ok"], true, "{history}");
    let shown = history.to_string();
    assert!(
        shown.contains(MARKER),
        "{} bytes: {}",
        shown.len(),
        &shown[shown.len().saturating_sub(3000)..]
    );
    // Our own transcript method, as the console and `sessions show` ask it.
    let page = call(
        &mut ws,
        max,
        "t",
        "switchboard.transcript",
        json!({"key": KEY, "limit": 50, "tools": true, "raw": true}),
    )
    .await;
    assert!(page.contains(MARKER));

    // The CLI over --connect (it failed with "Message too long: 40002907 > 16777216").
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(g.state())
        .args([
            "--connect",
            &format!("ws://{}", g.addr),
            "sessions",
            "show",
            KEY,
            "--json",
        ])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN");
    let out = tokio::task::block_in_place(|| bounded(c));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(MARKER));

    // The remote API: the page arrives, cut, and the link never dropped.
    let mut options = LinkOptions::new(format!("ws://{}", g.addr), Some(token));
    options.connect_timeout = Duration::from_secs(30);
    let link = Link::connect(options).await.expect("link");
    let rpc: std::sync::Arc<dyn Rpc> = std::sync::Arc::new(link.clone());
    let api = RemoteApi::new(rpc);
    let page = api
        .transcript(TranscriptQuery {
            key: KEY.into(),
            before: None,
            limit: 50,
            tools: true,
            raw: true,
            bare: false,
        })
        .await
        .expect("the transcript is read");
    let first = page.lines.first().expect("the message");
    assert!(first.text.ends_with(MARKER), "{}", first.text.len());

    // A request over the gateway's limit is refused here; the link stays up.
    let huge = "x".repeat(usize::try_from(max).expect("max") + 1);
    let refused = link
        .request("chat.send", json!({"sessionKey": KEY, "message": huge}))
        .await;
    match refused {
        Err(RpcError::Refused(e)) => assert!(e.message.contains("maxPayload"), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        link.request("health", json!({}))
            .await
            .expect("still served"),
        json!({"ok": true})
    );
    assert!(
        matches!(
            &*link.state().borrow(),
            LinkState::Connected {
                resynced: false,
                ..
            }
        ),
        "the link never reconnected: {:?}",
        link.state().borrow()
    );
}
