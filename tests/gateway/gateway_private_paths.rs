//! A read-only client learns nothing of where the server keeps its files (issue "a gateway
//! that holds", item 10): `switchboard.status` answered a `readOnlyToken` connection with the
//! state folder's absolute path, and any text quoting a server path (a spawn announce naming
//! a transcript, a storage error naming its database) reached it verbatim. Against a real
//! `switchboard serve` with real WebSocket clients: the owner (gateway token) still sees the
//! paths, the read-only client sees `<server path>` in their place.

use crate::gateway_process;

use gateway_process::{TOKEN, Ws, call, challenge, open, recv, send, start_with_config};
use serde_json::json;

const READ_ONLY: &str = "read-only-token-0123456789";

async fn connect(addr: &str, token: &str, scopes: &[&str]) -> Ws {
    let mut ws = open(addr).await;
    challenge(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "req", "id": "c1", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "version": "0.1.0", "platform": "linux", "mode": "cli"},
            "role": "operator", "scopes": scopes, "caps": ["switchboard.v1"],
            "auth": {"token": token}
        }}),
    )
    .await;
    let hello = recv(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_client_gets_no_server_path_in_any_answer() {
    let config = format!("{{ gateway: {{ auth: {{ readOnlyToken: \"{READ_ONLY}\" }} }} }}");
    let gw = start_with_config(&config, &[]);
    let state = gw.dir.path().join("state");
    let state_text = state.display().to_string();
    let canonical = std::fs::canonicalize(&state).unwrap().display().to_string();

    // The owner: sees the state folder, and writes a message quoting a path inside it (as a
    // spawn announce quotes a transcript's).
    let mut owner = connect(&gw.addr, TOKEN, &["operator.admin", "operator.read"]).await;
    let status = call(&mut owner, "s", "switchboard.status", json!({})).await;
    assert_eq!(
        status["payload"]["attached"],
        state_text.as_str(),
        "{status}"
    );
    let key = "agent:main:main";
    let quoted = format!("transcript: {state_text}/switchboard.sqlite#abc");
    let sent = call(
        &mut owner,
        "m",
        "chat.send",
        json!({"sessionKey": key, "message": quoted, "idempotencyKey": "k1"}),
    )
    .await;
    assert_eq!(sent["ok"], true, "{sent}");

    // The read-only client: the same answers, no path of the server in any of them.
    let mut reader = connect(&gw.addr, READ_ONLY, &["operator.read"]).await;
    let mut seen = String::new();
    for (id, method, params) in [
        ("a", "switchboard.status", json!({})),
        ("b", "chat.history", json!({"sessionKey": key})),
        ("c", "switchboard.transcript", json!({"key": key})),
        ("d", "sessions.list", json!({})),
        ("e", "switchboard.sessions", json!({})),
    ] {
        let res = call(&mut reader, id, method, params).await;
        seen.push_str(&res.to_string());
        seen.push('\n');
    }
    assert!(
        !seen.contains(&state_text) && !seen.contains(&canonical),
        "the state folder reached a read-only client:\n{seen}"
    );
    assert!(
        seen.contains("\"attached\":\"<server path>\""),
        "status still answers: {seen}"
    );
    assert!(
        seen.contains("transcript: <server path>/switchboard.sqlite#abc"),
        "history still answers, the path hidden: {seen}"
    );
}
