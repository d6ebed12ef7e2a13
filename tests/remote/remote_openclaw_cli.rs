//! `switchboard --connect <openclaw> exchanges [--json]` and `exchanges show ID` as processes,
//! against a fake OpenClaw gateway on a real socket: it speaks 2026.9.6's handshake (its
//! captured `hello-ok`) and answers from the record captured in the ping-pong scenario
//! (`openclaw_record`), so the CLI goes through the whole link, the OpenClaw dialect and the
//! exchanges' backfill.

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_remote::rpc::{Rpc, RpcError};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use crate::common::BIN;
use crate::openclaw_record::{RecordGateway, scenario};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6"
);

/// The `hello-ok` a real 2026.9.6 gateway answered `connect` with.
fn hello_ok() -> Value {
    std::fs::read_to_string(format!("{FIXTURES}/protocol-frames.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["frame"]["payload"]["type"] == "hello-ok")
        .expect("a captured hello-ok")["frame"]["payload"]
        .clone()
}

/// Serve `gw` as an OpenClaw gateway on a free loopback port; its `ws://` address.
async fn serve(gw: Arc<RecordGateway>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let hello = hello_ok();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (gw, hello) = (gw.clone(), hello.clone());
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let challenge = json!({ "type": "event", "event": "connect.challenge",
                                        "payload": { "nonce": "nonce-1", "ts": 1795353000000i64 } });
                let _ = ws.send(Message::text(challenge.to_string())).await;
                while let Some(Ok(msg)) = ws.next().await {
                    let Message::Text(t) = msg else { continue };
                    let Ok(frame) = serde_json::from_str::<Value>(t.as_str()) else {
                        continue;
                    };
                    if frame["type"] != "req" {
                        continue;
                    }
                    let id = frame["id"].clone();
                    let method = frame["method"].as_str().unwrap_or_default().to_string();
                    let answer = if method == "connect" {
                        Ok(hello.clone())
                    } else {
                        gw.request(&method, frame["params"].clone()).await
                    };
                    let res = match answer {
                        Ok(payload) => {
                            json!({ "type": "res", "id": id, "ok": true, "payload": payload })
                        }
                        Err(RpcError::Refused(e)) => json!({ "type": "res", "id": id, "ok": false,
                                                             "error": { "code": e.code, "message": e.message } }),
                        Err(e) => json!({ "type": "res", "id": id, "ok": false,
                                          "error": { "code": "UNAVAILABLE", "message": e.to_string() } }),
                    };
                    if ws.send(Message::text(res.to_string())).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// The binary with `--connect url`, from a state folder of its own.
async fn client(url: &str, dir: &std::path::Path, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(dir)
        .args(["--connect", url, "--token", "test-token"])
        .args(args)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null());
    let run = tokio::task::spawn_blocking(move || c.output().expect("the binary runs"));
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the command ends")
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchanges_and_exchanges_show_work_over_an_openclaw_gateway() {
    let gw = Arc::new(scenario(&format!(
        "{FIXTURES}/exchanges/s2-telegram-pingpong"
    )));
    let url = serve(gw).await;
    let dir = tempfile::tempdir().unwrap();

    let list = stdout(&client(&url, dir.path(), &["exchanges", "--json"]).await);
    let page: Value = serde_json::from_str(&list).expect("JSON");
    let e = &page["exchanges"][0];
    assert_eq!(
        page["exchanges"].as_array().map(Vec::len),
        Some(1),
        "{page:#}"
    );
    assert_eq!(
        (
            &e["id"],
            &e["requester"],
            &e["target"],
            &e["rounds"],
            &e["endedReason"]
        ),
        (
            &json!("agent:work:s2#1"),
            &json!("agent:main:s2"),
            &json!("agent:work:s2"),
            &json!(5),
            &json!("reply_skip")
        ),
        "{page:#}"
    );

    let text = stdout(&client(&url, dir.path(), &["exchanges"]).await);
    assert!(
        text.contains("agent:main:s2 → agent:work:s2  5 round(s)  reply_skip  announce no_route  agent:work:s2#1"),
        "{text}"
    );

    let shown = stdout(&client(&url, dir.path(), &["exchanges", "show", "agent:work:s2#1"]).await);
    for want in [
        "agent:main:s2 → agent:work:s2",
        "Message: PING from main",
        "Round 1 · agent:work:s2 → agent:main:s2",
        "· 40 ms · tokens 30/5 · ok",
        "Round 5 · agent:work:s2 → agent:main:s2",
        "Ended: reply_skip",
        "Announce: no_route",
        "ANNOUNCE from work: exchange finished",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }
}
