//! Token usage on OpenClaw's session rows: a turn on a model that streams its usage last (a
//! chunk with empty `choices`, as OpenAI and the OpenClaw peer's fake model send it) shows
//! in `sessions.describe` and `sessions.list` as `inputTokens`, `outputTokens` and
//! `totalTokens`, with `contextTokens` (and the list's `defaults.contextTokens`) from the
//! model's configured `contextWindow`: what OpenClaw's TUI footer reads ("tokens 135/128k").

use crate::common;
use crate::fake_model;
use crate::gateway_support;

use std::time::Duration;

use serde_json::{Value, json};

use fake_model::{Fake, streamed_text};
use gateway_support::*;

fn ok(res: &Value) -> &Value {
    assert_eq!(res["ok"], true, "{res}");
    &res["payload"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_s_streamed_usage_and_the_model_s_window_reach_the_rows() {
    let fake = Fake::start(vec![streamed_text(
        &["Hel", "lo."],
        Duration::ZERO,
        Some((130, 5)),
    )])
    .await;
    // The provider block as OpenClaw's config writes it (every field of a model entry).
    let b = common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/fake-1" },
            { "id": "work", "model": "fake/unlisted" },
        ] },
        "models": { "providers": { "fake": {
            "baseUrl": fake.base_url, "api": "openai-completions", "maxRetries": 0,
            "models": [{
                "id": "fake-1", "name": "Fake deterministic model", "reasoning": false,
                "input": ["text"], "cost": { "input": 0, "output": 0 },
                "contextWindow": 128000, "maxTokens": 4096,
            }],
        } } },
    }));
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    let (_, waited) = send_and_wait(&mut ws, "main", "hi", "run-u").await;
    assert_eq!(ok(&waited)["status"], "ok", "{waited}");
    // The engine asked for the usage chunk.
    assert_eq!(
        fake.seen()[0].body["stream_options"],
        json!({"include_usage": true})
    );

    let described = call(
        &mut ws,
        "3",
        "sessions.describe",
        json!({"key": "agent:main:main"}),
    )
    .await;
    let row = &ok(&described)["session"];
    let tokens = |r: &Value| {
        [
            "inputTokens",
            "outputTokens",
            "totalTokens",
            "contextTokens",
        ]
        .map(|f| r[f].as_u64())
    };
    assert_eq!(
        tokens(row),
        [Some(130), Some(5), Some(135), Some(128_000)],
        "{row}"
    );
    assert_eq!(
        (row["modelProvider"].as_str(), row["model"].as_str()),
        (Some("fake"), Some("fake-1"))
    );

    // The owner's `/status` card has the context line OpenClaw's has.
    let status = call(
        &mut ws,
        "st",
        "chat.send",
        json!({"sessionKey": "main", "message": "/status", "idempotencyKey": "st-1"}),
    )
    .await;
    let card = ok(&status)["reply"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(card.contains("📚 Context: 135/128k (0%)"), "{card}");

    let listed = call(&mut ws, "4", "sessions.list", json!({"agentId": "main"})).await;
    let list = ok(&listed);
    assert_eq!(list["defaults"]["contextTokens"], 128_000, "{list}");
    assert_eq!(tokens(&list["sessions"][0]), tokens(row));

    // A model the config lists no window for: no `contextTokens` (OpenClaw would guess).
    let created = call(
        &mut ws,
        "5",
        "sessions.create",
        json!({"key": "agent:work:main", "agentId": "work"}),
    )
    .await;
    ok(&created);
    let described = call(
        &mut ws,
        "6",
        "sessions.describe",
        json!({"key": "agent:work:main"}),
    )
    .await;
    let row = &ok(&described)["session"];
    assert_eq!(row["model"], "unlisted", "{row}");
    assert!(row.get("contextTokens").is_none(), "{row}");
}
