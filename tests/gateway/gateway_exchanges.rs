//! Exchanges over the gateway: `switchboard.exchanges`, `switchboard.exchange` and
//! `switchboard.traffic` answer over a real WebSocket what the engine answers in process, and
//! `RemoteApi` (what a `--connect` console uses) gets the same page, detail and traffic.

use crate::common;
use crate::gateway_support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::{ExchangesQuery, SessionsApi, ToolCall};

use gateway_support::*;

const ME: &str = "agent:main:main";
const WORK: &str = "agent:work:main";

fn bench() -> common::Bench {
    common::bench(json!({
        "session": { "agentToAgent": { "maxPingPongTurns": 1 } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [
                { "when": { "step": "reply" }, "reply": "thanks", "tokens": { "in": 5, "out": 2 } },
            ] },
            { "id": "work", "model": "scripted", "script": [
                { "when": { "step": "message" }, "reply": "done: {{text}}", "tokens": { "in": 9, "out": 4 } },
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
            ] },
        ] },
    }))
}

fn ok(res: &Value) -> &Value {
    assert_eq!(res["ok"], true, "{res}");
    &res["payload"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchanges_detail_and_traffic_round_trip_over_the_gateway() {
    let b = bench();
    let local = b.engine.start();
    let sent = local
        .call_tool(ToolCall {
            tool: "sessions_send".into(),
            params: json!({ "agentId": "work", "message": "file the report", "timeoutSeconds": 30 }),
            requester: ME.into(),
            sandboxed: false,
        })
        .await
        .expect("send");
    assert_eq!(sent.result["status"], "ok", "{}", sent.result);
    b.engine.idle().await;
    let gw = start(local.clone()).await;

    // The raw methods, as any client calls them.
    let (mut ws, hello) = connected(&gw.addr, &[]).await;
    let methods = hello["features"]["methods"].to_string();
    for m in [
        "switchboard.exchanges",
        "switchboard.exchange",
        "switchboard.traffic",
    ] {
        assert!(methods.contains(m), "{m} not offered: {methods}");
    }
    let page = call(
        &mut ws,
        "1",
        "switchboard.exchanges",
        json!({ "key": WORK, "limit": 10 }),
    )
    .await;
    let page = ok(&page);
    assert_eq!(page["more"], false);
    let list = page["exchanges"].as_array().expect("a list");
    assert_eq!(list.len(), 1, "{page}");
    assert_eq!(list[0]["requester"], ME);
    assert_eq!(list[0]["target"], WORK);
    assert_eq!(list[0]["rounds"], 2);
    assert_eq!(list[0]["endedReason"], "cap");
    assert_eq!(list[0]["announce"], "skipped");
    let id = list[0]["id"].as_str().expect("id").to_string();
    let detail = call(&mut ws, "2", "switchboard.exchange", json!({ "id": id })).await;
    let turns = ok(&detail)["turns"].as_array().expect("turns").clone();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["speaker"], WORK);
    assert_eq!(turns[0]["text"], "done: file the report");
    assert_eq!(turns[0]["tokensIn"], 9);
    assert_eq!(turns[1]["speaker"], ME);
    assert_eq!(turns[1]["tokensOut"], 2);
    let missing = call(
        &mut ws,
        "3",
        "switchboard.exchange",
        json!({ "id": "nope" }),
    )
    .await;
    assert_eq!(ok(&missing), &Value::Null);
    let bad = call(&mut ws, "4", "switchboard.exchange", json!({})).await;
    assert_eq!(bad["ok"], false, "{bad}");
    let traffic = call(&mut ws, "5", "switchboard.traffic", json!({ "since": 0 })).await;
    let counts = ok(&traffic)["counts"].as_array().expect("counts").clone();
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[0]["messages"], 3);

    // RemoteApi answers exactly what the engine answers.
    let mut options = LinkOptions::new(format!("ws://{}", gw.addr), Some(TOKEN.into()));
    options.connect_timeout = Duration::from_secs(5);
    let link = Link::connect(options)
        .await
        .expect("the gateway accepts the token");
    let remote: Arc<dyn SessionsApi> = RemoteApi::new(Arc::new(link));
    let q = ExchangesQuery {
        limit: 10,
        ..ExchangesQuery::default()
    };
    assert_eq!(
        remote.exchanges(q.clone()).await.expect("remote page"),
        local.exchanges(q).await.expect("local page")
    );
    assert_eq!(
        remote.exchange(&id).await.expect("remote detail"),
        local.exchange(&id).await.expect("local detail")
    );
    assert_eq!(remote.exchange("nope").await.expect("remote"), None);
    assert_eq!(
        remote.traffic(0).await.expect("remote traffic"),
        local.traffic(0).await.expect("local traffic")
    );
    gw.stop().await;
}
