//! The `openai` backend against an in-process fake OpenAI-compatible server (a tokio
//! listener with a minimal HTTP/1.1 responder, answers scripted per test, every request
//! recorded; `fake_model`), driven through the real engine: a plain reply, a tool call round trip, bad
//! tool arguments and unknown tools, the step limit, retries on 500 and 429, a server that
//! is down, the API key from config and from the environment, and `config check`.
//!
//! Real time (the engine's writer thread does not mix with a paused clock); waits bounded.

use crate::common;
use crate::fake_model;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_store_sqlite::runs::RunRow;
use switchboard_types::api::{LineRole, SendRequest, Sender, TranscriptQuery};
use switchboard_types::key::SessionKey;

use fake_model::{Answer, Fake, answer, call, text_reply, tool_reply};

const HANG: Duration = Duration::from_secs(60);
const KEY: &str = "agent:main:main";

/// A config whose `main` agent runs `fake/test-model` on the fake server.
fn config(base_url: &str, provider_extra: Value) -> Value {
    let mut provider = json!({ "baseUrl": base_url, "api": "openai-completions", "maxRetries": 2 });
    if let (Value::Object(p), Value::Object(extra)) = (&mut provider, provider_extra) {
        p.extend(extra);
    }
    json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/test-model",
              "systemPrompt": "You are the main agent." },
        ] },
        "models": { "providers": { "fake": provider } },
    })
}

/// Sends `text` into the main session, waits for the engine to settle, returns the run.
async fn send_and_settle(b: &common::Bench, text: &str) -> RunRow {
    let runs = fake_model::send_and_wait(&b.engine, KEY, text).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

async fn lines(b: &common::Bench) -> Vec<(LineRole, String)> {
    let api = b.engine.start();
    api.transcript(TranscriptQuery {
        key: KEY.to_string(),
        limit: 1000,
        tools: true,
        ..TranscriptQuery::default()
    })
    .await
    .expect("transcript")
    .lines
    .into_iter()
    .map(|l| (l.role, l.text))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_reply_is_recorded_with_its_usage() {
    let fake = Fake::start(vec![text_reply("Hello from the model.", 21, 7)]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "hi there").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("Hello from the model."));
    assert_eq!((run.tokens_in, run.tokens_out), (Some(21), Some(7)));
    let lines = lines(&b).await;
    assert!(
        lines.contains(&(LineRole::Assistant, "Hello from the model.".to_string())),
        "{lines:?}"
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    let body = &seen[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][0]["content"], "You are the main agent.");
    assert_eq!(
        body["messages"][1],
        json!({ "role": "user", "content": "hi there" })
    );
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "agents_list"
        ]
    );
    assert_eq!(
        body["tools"][2]["function"]["parameters"]["required"],
        json!(["sessionKey", "message"])
    );
    assert!(
        !seen[0].headers.contains_key("authorization"),
        "no key configured"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trip_runs_sessions_list_through_the_engine() {
    let fake = Fake::start(vec![
        tool_reply(json!([call("call_1", "sessions_list", "{\"limit\": 5}")])),
        text_reply("There is one session.", 30, 6),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "how many sessions?").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("There is one session."));
    // Usage adds up over both model calls.
    assert_eq!((run.tokens_in, run.tokens_out), (Some(40), Some(11)));
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let second = seen[1].body["messages"].as_array().unwrap();
    let assistant = &second[second.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    let tool = &second[second.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    let keys: Vec<&str> = result["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("a sessions_list result: {result}"))
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&KEY), "{result}");
    // The engine recorded the call and its result in the transcript.
    let lines = lines(&b).await;
    assert!(
        lines.contains(&(LineRole::Tool, "sessions_list({\"limit\":5})".to_string())),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|(r, t)| *r == LineRole::Result && t.contains(KEY)),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_and_unknown_tools_come_back_to_the_model_as_errors() {
    let fake = Fake::start(vec![
        tool_reply(json!([
            call("bad", "sessions_history", "{\"sessionKey\": "),
            call("nope", "rm_rf", "{}"),
        ])),
        text_reply("Sorry, I will try again later.", 1, 1),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "read history").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("Sorry, I will try again later."));
    let seen = fake.seen();
    let messages = seen[1].body["messages"].as_array().unwrap();
    let results: Vec<Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["status"], "error");
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["status"], "error");
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("unknown tool \"rm_rf\""),
        "{}",
        results[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_stops_calling_tools_hits_the_step_limit() {
    let fake = Fake::start(vec![tool_reply(json!([call("c", "agents_list", "{}")]))]).await;
    let b = common::bench(config(&fake.base_url, json!({ "maxSteps": 3 })));
    let run = send_and_settle(&b, "loop forever").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap();
    assert!(error.contains("step limit"), "{error}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 3, "exactly maxSteps model calls");
    assert_eq!(
        seen[2].body["tool_choice"], "none",
        "the last call may not use tools"
    );
    assert!(seen[0].body.get("tool_choice").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_is_retried_then_the_reply_lands() {
    let fake = Fake::start(vec![
        answer(500, "{\"error\":\"overloaded\"}"),
        text_reply("after a retry", 1, 1),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("after a retry"));
    assert_eq!(fake.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_is_honoured_and_retries_run_out_with_a_clear_error() {
    let fake = Fake::start(vec![Answer {
        headers: vec![("retry-after".into(), "0".into())],
        ..answer(429, "{\"error\":{\"message\":\"rate limited, slow down\"}}")
    }])
    .await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "maxRetries": 3, "apiKey": "sk-secret-123" }),
    ));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap();
    assert!(error.contains("429"), "{error}");
    assert!(error.contains("rate limited, slow down"), "{error}");
    assert!(error.contains("after 4 attempts"), "{error}");
    assert!(
        !error.contains("sk-secret-123"),
        "the key never shows: {error}"
    );
    assert_eq!(fake.seen().len(), 4, "one try and three retries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_fails_the_run_clearly_and_the_session_stays_usable() {
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let b = common::bench(config(
        &format!("http://127.0.0.1:{port}/v1"),
        json!({ "maxRetries": 1 }),
    ));
    let run = send_and_settle(&b, "anyone?").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap();
    assert!(error.contains("could not connect"), "{error}");
    assert!(error.contains("provider \"fake\""), "{error}");
    // The session still takes messages, and each gets its own (failed) run.
    let api = b.engine.start();
    api.send(SendRequest {
        key: KEY.to_string(),
        text: "still there?".to_string(),
        from: Sender::default(),
        idempotency_key: None,
    })
    .await
    .expect("a second send is recorded");
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("the run ends");
    let runs = b
        .engine
        .runs_of(&SessionKey::from_canonical(KEY), 10)
        .await
        .unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let lines = lines(&b).await;
    assert!(
        lines.contains(&(LineRole::User, "still there?".to_string())),
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|(r, _)| *r == LineRole::Error).count(),
        2,
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_goes_in_a_bearer_header_from_config_or_the_environment() {
    let fake = Fake::start(vec![text_reply("ok", 1, 1)]).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "apiKey": "sk-from-config", "headers": { "X-Org": "team-7" } }),
    ));
    send_and_settle(&b, "hi").await;
    let seen = fake.seen();
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-from-config");
    assert_eq!(seen[0].headers["x-org"], "team-7");

    // Setting a variable here would race with other tests reading the environment, so the
    // test uses one nobody sets, then one the test process already has.
    let unset = "SWITCHBOARD_TEST_OPENAI_KEY_NEVER_SET";
    assert!(std::env::var_os(unset).is_none());
    let fake = Fake::start(vec![text_reply("ok", 1, 1)]).await;
    let b = common::bench(config(&fake.base_url, json!({ "apiKeyEnv": unset })));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    assert!(run.error.as_deref().unwrap().contains(unset), "{run:?}");
    assert!(fake.seen().is_empty(), "no request without the key");

    let (var, value) = std::env::vars()
        .find(|(_, v)| !v.is_empty() && v.bytes().all(|c| c.is_ascii_graphic()))
        .expect("the test process has some environment variable");
    let b = common::bench(config(&fake.base_url, json!({ "apiKeyEnv": var })));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(
        fake.seen()[0].headers["authorization"],
        format!("Bearer {value}")
    );
    assert!(
        !run.reply.unwrap_or_default().contains(&value),
        "the key is not echoed into the reply"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_quoting_the_key_back_does_not_put_it_in_the_error_or_the_transcript() {
    const KEY_TEXT: &str = "sk-live-5f3a9c0d2b7e41aa";
    let fake = Fake::start(vec![answer(
        401,
        &json!({ "error": { "message": format!("Incorrect API key provided: {KEY_TEXT}") } })
            .to_string(),
    )])
    .await;
    let b = common::bench(config(&fake.base_url, json!({ "apiKey": KEY_TEXT })));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap_or_default();
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(
        error.contains("Incorrect API key provided: <apiKey>"),
        "{error}"
    );
    assert!(!error.contains(KEY_TEXT), "{error}");
    for (_, text) in lines(&b).await {
        assert!(!text.contains(KEY_TEXT), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slower_than_timeout_seconds_fails_the_run_as_timed_out() {
    let fake = Fake::start(vec![Answer {
        delay: Duration::from_secs(30),
        ..text_reply("too late", 1, 1)
    }])
    .await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "timeoutSeconds": 1, "maxRetries": 0 }),
    ));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    assert!(
        run.error.as_deref().unwrap().contains("timed out"),
        "{run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_or_garbled_response_fails_the_run_with_what_was_wrong() {
    let fake = Fake::start(vec![Answer {
        truncate: true,
        ..text_reply("cut short", 1, 1)
    }])
    .await;
    let b = common::bench(config(&fake.base_url, json!({ "maxRetries": 0 })));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    assert!(
        run.error
            .as_deref()
            .unwrap()
            .contains("reading the response failed"),
        "{run:?}"
    );

    let fake = Fake::start(vec![answer(200, "<html>proxy login</html>")]).await;
    let b = common::bench(config(&fake.base_url, json!({ "maxRetries": 0 })));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap();
    assert!(error.contains("not JSON"), "{error}");
    assert!(error.contains("<html>proxy login</html>"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_reply_is_recorded_whole() {
    let big = "x".repeat(1 << 20);
    let fake = Fake::start(vec![text_reply(&big, 1, 1)]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "write a lot").await;
    assert_eq!(run.status.as_str(), "ok", "{:?}", run.error);
    assert_eq!(run.reply.map(|r| r.len()), Some(big.len()));
}

#[test]
fn config_check_explains_a_provider_that_cannot_be_used() {
    let bench = common::CliBench::new(
        r#"{
  agents: { list: [
    { id: "main", default: true, model: "ghost/llama" },
    { id: "work", model: "anth/claude" },
  ] },
  models: { providers: {
    anth: { baseUrl: "https://example.invalid", api: "anthropic-messages" },
    local: { baseUrl: "http://127.0.0.1:1/v1", apiKeyEnv: "SWITCHBOARD_TEST_SURELY_UNSET_KEY" },
  } },
}"#,
    );
    let out = bench
        .command(&["config", "check"])
        .env_remove("SWITCHBOARD_TEST_SURELY_UNSET_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("provider \"ghost\", which models.providers does not define"),
        "{err}"
    );
    assert!(
        err.contains("api \"anthropic-messages\" has no backend"),
        "{err}"
    );
    assert!(
        err.contains("SWITCHBOARD_TEST_SURELY_UNSET_KEY is not set"),
        "{err}"
    );
    assert!(err.contains("3 problems"), "{err}");
}

/// The model client speaks TLS with the web roots (rustls with `ring`, set up by us since
/// reqwest 0.13 brings no provider of its own): a server whose certificate no public root
/// signed is refused at the handshake with a clear error, not a panic or a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_server_no_public_root_vouches_for_fails_at_the_handshake() {
    let files = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let acceptor = switchboard_protocol::tls::acceptor(&cert, &key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = handshakes.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(tcp).await;
            });
        }
    });
    let b = common::bench(config(
        &format!("https://localhost:{port}/v1"),
        json!({ "maxRetries": 0 }),
    ));
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    let error = run.error.unwrap();
    assert!(error.contains("provider \"fake\""), "{error}");
    assert!(
        error.contains("certificate"),
        "the reason is named: {error}"
    );
    assert!(
        handshakes.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the client reached the server: {error}"
    );
}
