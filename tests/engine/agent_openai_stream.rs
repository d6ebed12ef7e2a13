//! Streamed replies from the `openai` backend, against the in-process fake server
//! (`fake_model`) and through the real engine: deltas reported in order before the reply is
//! written once, whole; tool calls whose arguments come in pieces; usage from the stream or
//! counted; every way a stream goes wrong failing the run with what happened; the idle
//! timeout that does not cut a long healthy stream; `stream: false`; `config check`.
//!
//! Real time (the engine's writer thread does not mix with a paused clock); waits bounded.

use crate::common;
use crate::fake_model;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_store_sqlite::runs::RunRow;
use switchboard_types::api::{EngineEvent, LineRole, TranscriptQuery};
use tokio::sync::broadcast;

use fake_model::{Answer, Fake, answer, streamed_text, text_reply};

const KEY: &str = "agent:main:main";

/// A config whose `main` agent runs `fake/test-model` on the fake server (streaming is on
/// by default).
fn config(base_url: &str, provider_extra: Value) -> Value {
    let mut provider = json!({ "baseUrl": base_url, "api": "openai-completions", "maxRetries": 2 });
    if let (Value::Object(p), Value::Object(extra)) = (&mut provider, provider_extra) {
        p.extend(extra);
    }
    json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/test-model" },
        ] },
        "models": { "providers": { "fake": provider } },
    })
}

/// One `data:` event of a chat completion chunk with `delta` (and a finish reason).
fn chunk(delta: Value, finish: Option<&str>) -> String {
    let ev = json!({
        "id": "s1", "object": "chat.completion.chunk", "model": "m",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
    });
    format!("data: {ev}\n\n")
}

/// A streamed answer made of these raw events, sent back to back.
fn stream_of(events: Vec<String>) -> Answer {
    Answer {
        chunks: events.into_iter().map(|e| (Duration::ZERO, e)).collect(),
        ..answer(200, "")
    }
}

/// Sends `text` into the main session, waits for the engine to settle, returns the newest run.
async fn send_and_settle(b: &common::Bench, text: &str) -> RunRow {
    let runs = fake_model::send_and_wait(&b.engine, KEY, text).await;
    runs.into_iter().next().expect("a run")
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

fn drain(rx: &mut broadcast::Receiver<EngineEvent>) -> Vec<EngineEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(broadcast::error::TryRecvError::Lagged(n)) => panic!("lost {n} events"),
            Err(_) => return out,
        }
    }
}

/// The run's reply deltas as (step, offset, delta), in the order they came.
fn deltas_of(events: &[EngineEvent], run_id: &str) -> Vec<(u32, usize, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ReplyDelta {
                run_id: r,
                step,
                offset,
                delta,
                ..
            } if r == run_id => Some((*step, *offset, delta.clone())),
            _ => None,
        })
        .collect()
}

/// Asserts the run failed and returns its error as the user reads it.
fn failed(run: &RunRow) -> String {
    assert_eq!(run.status.as_str(), "error", "{run:?}");
    run.error.clone().expect("an error text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_arrives_as_deltas_in_order_and_is_written_once_whole() {
    let pieces = ["Hel", "lo, ", "wörld", " — streamed", "!"];
    let mut answer = streamed_text(&pieces, Duration::from_millis(20), Some((12, 4)));
    // A thinking model's reasoning is not part of the reply.
    answer.chunks.insert(
        0,
        (
            Duration::ZERO,
            chunk(json!({ "reasoning_content": "let me think" }), None),
        ),
    );
    let fake = Fake::start(vec![answer]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let mut rx = b.engine.events().subscribe();
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    let whole: String = pieces.concat();
    assert_eq!(run.reply.as_deref(), Some(whole.as_str()));
    assert_eq!((run.tokens_in, run.tokens_out), (Some(12), Some(4)));

    let events = drain(&mut rx);
    let deltas = deltas_of(&events, &run.run_id);
    let mut offset = 0;
    let expected: Vec<(u32, usize, String)> = pieces
        .iter()
        .map(|p| {
            let d = (1, offset, p.to_string());
            offset += p.len();
            d
        })
        .collect();
    assert_eq!(deltas, expected);
    // Every delta comes before the reply's transcript line, which carries the whole text.
    let appended = events
        .iter()
        .position(|e| matches!(e, EngineEvent::MessageAppended { line, .. } if line.to_string().contains(&whole)))
        .expect("the reply's line is appended");
    let last_delta = events
        .iter()
        .rposition(|e| matches!(e, EngineEvent::ReplyDelta { .. }))
        .unwrap();
    assert!(last_delta < appended, "{events:?}");

    let lines = lines(&b).await;
    let replies: Vec<&String> = lines
        .iter()
        .filter(|(r, _)| *r == LineRole::Assistant)
        .map(|(_, t)| t)
        .collect();
    assert_eq!(replies, [&whole], "one line, whole: {lines:?}");

    let body = &fake.seen()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({ "include_usage": true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_tool_calls_with_arguments_in_pieces_run_through_the_engine() {
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut part = json!({ "index": index, "function": { "arguments": args } });
        if let Some(id) = id {
            part["id"] = json!(id);
            part["type"] = json!("function");
        }
        if let Some(name) = name {
            part["function"]["name"] = json!(name);
        }
        chunk(json!({ "tool_calls": [part] }), None)
    };
    // Two calls, their argument pieces interleaved; no usage chunk (counted instead).
    let tools = stream_of(vec![
        chunk(json!({ "role": "assistant", "content": null }), None),
        call(0, Some("call_a"), Some("sessions_list"), ""),
        call(0, None, None, "{\"lim"),
        call(1, Some("call_b"), Some("agents_list"), "{"),
        call(0, None, None, "it\": 5}"),
        call(1, None, None, "}"),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]);
    let fake = Fake::start(vec![
        tools,
        streamed_text(&["Two ", "tools ran."], Duration::ZERO, Some((30, 6))),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let mut rx = b.engine.events().subscribe();
    let run = send_and_settle(&b, "look around").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("Two tools ran."));
    // Step 1 counted (4 argument pieces, input unknown), step 2 from its usage chunk.
    assert_eq!((run.tokens_in, run.tokens_out), (Some(30), Some(10)));

    let lines = lines(&b).await;
    for expected in ["sessions_list({\"limit\":5})", "agents_list({})"] {
        assert!(
            lines.contains(&(LineRole::Tool, expected.to_string())),
            "{expected}: {lines:?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|(r, t)| *r == LineRole::Result && t.contains(KEY)),
        "{lines:?}"
    );

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let messages = seen[1].body["messages"].as_array().unwrap();
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the assembled assistant message goes back to the model");
    assert_eq!(
        assistant["tool_calls"],
        json!([
            { "id": "call_a", "type": "function",
              "function": { "name": "sessions_list", "arguments": "{\"limit\": 5}" } },
            { "id": "call_b", "type": "function",
              "function": { "name": "agents_list", "arguments": "{}" } },
        ])
    );
    let answered: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ["call_a", "call_b"]);

    // The reply's text came in the second model call.
    let deltas = deltas_of(&drain(&mut rx), &run.run_id);
    assert_eq!(
        deltas,
        [(2, 0, "Two ".to_string()), (2, 4, "tools ran.".to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_split_across_writes_crlf_lines_and_keep_alives_are_read_as_one_reply() {
    let first = chunk(json!({ "content": "Grüße, " }), None);
    let (head, tail) = first.split_at(first.find("Gr").unwrap() + 2);
    let second = chunk(json!({ "content": "world" }), None).replace('\n', "\r\n");
    let pause = Duration::from_millis(15);
    let fake = Fake::start(vec![Answer {
        chunks: vec![
            (Duration::ZERO, ": keep-alive\n\n".to_string()),
            (pause, head.to_string()),
            (pause, tail.to_string()),
            (
                pause,
                "event: ping\ndata: not json, not ours\n\n".to_string(),
            ),
            (pause, second),
            (pause, chunk(json!({}), Some("stop"))),
            (pause, "data: [DONE]\n\n".to_string()),
        ],
        ..answer(200, "")
    }])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let mut rx = b.engine.events().subscribe();
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("Grüße, world"));
    let deltas = deltas_of(&drain(&mut rx), &run.run_id);
    let offset = "Grüße, ".len();
    assert_eq!(
        deltas,
        [
            (1, 0, "Grüße, ".to_string()),
            (1, offset, "world".to_string())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_usage_chunk_output_tokens_are_counted_from_the_chunks() {
    let fake = Fake::start(vec![streamed_text(
        &["one ", "two ", "three"],
        Duration::ZERO,
        None,
    )])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "count").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("one two three"));
    assert_eq!((run.tokens_in, run.tokens_out), (Some(0), Some(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_in_the_middle_fails_the_run_is_not_retried_and_the_session_goes_on() {
    let cut = Answer {
        truncate: true,
        ..streamed_text(
            &["a", "b", "c", "d", "e", "f", "g", "h"],
            Duration::ZERO,
            Some((1, 8)),
        )
    };
    let fake = Fake::start(vec![
        cut,
        streamed_text(&["back ", "again"], Duration::ZERO, None),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let run = send_and_settle(&b, "hi").await;
    let error = failed(&run);
    // 11 events in all (8 pieces, finish, usage, [DONE]); the cut leaves the first 5.
    assert!(
        error.contains("the stream ended before [DONE] or a finish_reason"),
        "{error}"
    );
    assert!(error.contains("after 5 events"), "{error}");
    assert!(error.contains("provider \"fake\""), "{error}");
    assert_eq!(fake.seen().len(), 1, "a stream that began is not retried");

    let run = send_and_settle(&b, "still there?").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("back again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_line_that_is_not_json_fails_the_run_quoting_it() {
    let fake = Fake::start(vec![stream_of(vec![
        chunk(json!({ "content": "fine so far" }), None),
        "data: {\"choices\": [oops\n\n".to_string(),
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_string(),
    ])])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let error = failed(&send_and_settle(&b, "hi").await);
    assert!(error.contains("a data line is not JSON"), "{error}");
    assert!(error.contains("{\"choices\": [oops"), "{error}");
    assert!(error.contains("after 2 events"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_inside_the_stream_fails_the_run_with_the_servers_message() {
    let fake = Fake::start(vec![
        stream_of(vec![
            chunk(json!({ "content": "Once upon" }), None),
            format!(
                "data: {}\n\n",
                json!({ "error": { "message": "model overloaded mid-stream", "type": "server_error" } })
            ),
        ]),
        stream_of(vec![
            chunk(json!({ "content": "x" }), None),
            "event: error\ndata: upstream went away\n\n".to_string(),
        ]),
    ])
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let error = failed(&send_and_settle(&b, "hi").await);
    assert!(
        error.contains("the server sent an error: model overloaded mid-stream"),
        "{error}"
    );
    assert!(error.contains("after 2 events"), "{error}");

    let error = failed(&send_and_settle(&b, "again").await);
    assert!(
        error.contains("the server sent an error: upstream went away"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_streamed_reply_is_recorded_whole() {
    // 1024 pieces of 1 KiB, each telling its number, so order and loss would show.
    let pieces: Vec<String> = (0..1024).map(|i| format!("{i:04}").repeat(256)).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let fake = Fake::start(vec![streamed_text(&refs, Duration::ZERO, None)]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let mut rx = b.engine.events().subscribe();
    let run = send_and_settle(&b, "write a lot").await;
    assert_eq!(run.status.as_str(), "ok", "{:?}", run.error);
    let whole = pieces.concat();
    assert_eq!(whole.len(), 1 << 20);
    assert!(
        run.reply.as_deref() == Some(whole.as_str()),
        "the reply differs"
    );
    assert_eq!(run.tokens_out, Some(1024));
    let lines = lines(&b).await;
    assert!(
        lines.contains(&(LineRole::Assistant, whole.clone())),
        "the transcript holds the whole reply"
    );
    let deltas = deltas_of(&drain(&mut rx), &run.run_id);
    assert_eq!(deltas.len(), 1024);
    assert_eq!(deltas[1023].1, whole.len() - 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_past_the_cap_fails_clearly() {
    // 5 MiB in 1 KiB pieces: the cap is passed by the piece after the 4096th.
    let kib = "y".repeat(1 << 10);
    let pieces = vec![kib.as_str(); 5 << 10];
    let fake = Fake::start(vec![streamed_text(&pieces, Duration::ZERO, None)]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let error = failed(&send_and_settle(&b, "too much").await);
    assert!(error.contains("larger than 4 MiB"), "{error}");
    assert!(error.contains("after 4097 events"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_seconds_bounds_gaps_between_chunks_not_a_long_healthy_stream() {
    // Six pieces 400 ms apart: longer than timeoutSeconds in all, never silent that long.
    let pieces = ["s", "l", "o", "w", "l", "y"];
    let fake = Fake::start(vec![
        streamed_text(&pieces, Duration::from_millis(400), None),
        Answer {
            chunks: vec![
                (Duration::ZERO, chunk(json!({ "content": "then " }), None)),
                (
                    Duration::from_secs(30),
                    chunk(json!({ "content": "silence" }), None),
                ),
            ],
            ..answer(200, "")
        },
    ])
    .await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "timeoutSeconds": 1, "maxRetries": 0 }),
    ));
    let run = send_and_settle(&b, "take your time").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("slowly"));

    let error = failed(&send_and_settle(&b, "and now?").await);
    assert!(
        error.contains("timed out: no data for 1 s (timeoutSeconds)"),
        "{error}"
    );
    assert!(error.contains("after 1 events"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_false_sends_a_plain_request_and_takes_a_plain_answer() {
    let fake = Fake::start(vec![text_reply("plain and whole", 5, 3)]).await;
    let b = common::bench(config(&fake.base_url, json!({ "stream": false })));
    let mut rx = b.engine.events().subscribe();
    let run = send_and_settle(&b, "hi").await;
    assert_eq!(run.status.as_str(), "ok", "{run:?}");
    assert_eq!(run.reply.as_deref(), Some("plain and whole"));
    assert_eq!((run.tokens_in, run.tokens_out), (Some(5), Some(3)));
    let body = &fake.seen()[0].body;
    assert!(body.get("stream").is_none(), "{body}");
    assert!(body.get("stream_options").is_none(), "{body}");
    assert!(deltas_of(&drain(&mut rx), &run.run_id).is_empty());
}

#[test]
fn config_check_takes_stream_as_a_bool_only() {
    let good = common::CliBench::new(
        r#"{
  agents: { list: [ { id: "main", default: true, model: "local/m" } ] },
  models: { providers: {
    local: { baseUrl: "http://127.0.0.1:1/v1", api: "openai-completions", stream: false },
  } },
}"#,
    );
    let out = good.command(&["config", "check"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bad = common::CliBench::new(
        r#"{
  agents: { list: [ { id: "main", default: true, model: "local/m" } ] },
  models: { providers: {
    local: { baseUrl: "http://127.0.0.1:1/v1",
             stream: "yes" },
  } },
}"#,
    );
    let out = bad.command(&["config", "check"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":5: models.providers.local.stream"), "{err}");
    assert!(err.contains("expected true or false"), "{err}");
}
