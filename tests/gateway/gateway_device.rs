//! Device identity on the gateway, over a real socket to a real `switchboard serve`: a good
//! signature is let in; a bad one, a replayed one (another connection's nonce) and an id that
//! is not the key's hash are refused with OpenClaw's error shape and the connection closes.

use crate::gateway_process;

use gateway_process::{TOKEN, Ws, challenge, connect_req, open, recv, scopes, send, start};
use serde_json::{Value, json};
use switchboard_protocol::ClientInfo;
use switchboard_protocol::device::DeviceIdentity;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The `client` object `connect_req` sends.
fn client() -> ClientInfo {
    serde_json::from_value(connect_req(TOKEN, None)["params"]["client"].clone())
        .expect("client info")
}

fn signed(identity: &DeviceIdentity, nonce: &str, ts: u64) -> Value {
    let device = identity.sign(&client(), "operator", &scopes(), TOKEN, nonce, ts);
    serde_json::to_value(device).expect("device json")
}

/// Sends `connect` with `device` and expects a refusal naming the device signature, then
/// the close.
async fn refused(ws: &mut Ws, device: Value, why: &str) {
    send(ws, connect_req(TOKEN, Some(device))).await;
    let res = recv(ws).await.expect("an error response");
    assert_eq!(res["type"], "res");
    assert_eq!(res["id"], "c1");
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    let message = res["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("device signature invalid") && message.contains(why),
        "{message}"
    );
    let closed = recv(ws).await.expect_err("closed after the refusal");
    assert_eq!(closed.map(|c| c.0), Some(CloseCode::Policy));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correctly_signed_device_gets_hello_ok_and_can_call() {
    let gw = start(&[]);
    let identity = DeviceIdentity::generate().expect("key");
    let mut ws = open(&gw.addr).await;
    let (nonce, ts) = challenge(&mut ws).await;
    send(
        &mut ws,
        connect_req(TOKEN, Some(signed(&identity, &nonce, ts))),
    )
    .await;
    let res = recv(&mut ws).await.expect("hello");
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["type"], "hello-ok");
    send(
        &mut ws,
        json!({"type": "req", "id": "h", "method": "health", "params": {}}),
    )
    .await;
    let res = recv(&mut ws).await.expect("health");
    assert_eq!(res["id"], "h");
    assert_eq!(res["ok"], true, "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_signature_is_refused() {
    let gw = start(&[]);
    let identity = DeviceIdentity::generate().expect("key");
    let mut ws = open(&gw.addr).await;
    let (nonce, ts) = challenge(&mut ws).await;
    // Signed for a role other than the one requested: a valid signature over other bytes.
    let device = identity.sign(&client(), "node", &scopes(), TOKEN, &nonce, ts);
    refused(
        &mut ws,
        serde_json::to_value(device).expect("json"),
        "signature",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_captured_on_one_connection_is_refused_on_another() {
    let gw = start(&[]);
    let identity = DeviceIdentity::generate().expect("key");
    let mut first = open(&gw.addr).await;
    let (nonce, ts) = challenge(&mut first).await;
    let captured = signed(&identity, &nonce, ts);
    send(&mut first, connect_req(TOKEN, Some(captured.clone()))).await;
    assert_eq!(recv(&mut first).await.expect("hello")["ok"], true);

    let mut second = open(&gw.addr).await;
    let (other_nonce, _) = challenge(&mut second).await;
    assert_ne!(other_nonce, nonce);
    refused(&mut second, captured, "nonce").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_id_that_is_not_the_keys_hash_is_refused() {
    let gw = start(&[]);
    let identity = DeviceIdentity::generate().expect("key");
    let impostor = DeviceIdentity::generate().expect("key");
    let mut ws = open(&gw.addr).await;
    let (nonce, ts) = challenge(&mut ws).await;
    let mut device = signed(&identity, &nonce, ts);
    device["id"] = json!(impostor.id());
    refused(&mut ws, device, "identity mismatch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_signature_is_refused() {
    let gw = start(&[]);
    let identity = DeviceIdentity::generate().expect("key");
    let mut ws = open(&gw.addr).await;
    let (nonce, ts) = challenge(&mut ws).await;
    let day = 24 * 60 * 60 * 1000;
    refused(&mut ws, signed(&identity, &nonce, ts - day), "expired").await;
}
