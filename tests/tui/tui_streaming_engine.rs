//! A streamed reply through the real engine into the console (no terminal): a scripted
//! agent with `streamMs` reports its reply word by word; the console shows it growing as a
//! provisional line, then the stored line replaces it, once.

use crate::common;
use crate::common::screen::cells;

use serde_json::json;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_types::api::{SendRequest, Sender};

use common::console_driver::Driver;

const ME: &str = "agent:main:main";
const REPLY: &str = "one two three four five six seven eight";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_grows_in_the_console_and_is_replaced_by_its_line() {
    let b = common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [
                { "when": { "text": "stream" }, "reply": REPLY, "streamMs": 150 },
                { "reply": "ok" },
            ] },
        ] },
    }));
    let api = b.engine.start();
    let send = |text: &str| SendRequest {
        key: ME.to_string(),
        text: text.to_string(),
        from: Sender::owner(),
        idempotency_key: None,
    };
    api.send(send("hello")).await.expect("first send");
    let mut state = State::new("test".into(), 1_795_353_349_734);
    state.width = 120;
    state.height = 30;
    let mut d = Driver::new(api.clone(), state);
    d.until("the session and its first reply", |s| {
        s.transcript.lines.iter().any(|l| l.text == "ok")
    })
    .await;

    api.send(send("stream please")).await.expect("second send");
    d.until("part of the reply, streaming", |s| {
        s.transcript
            .streams
            .runs
            .values()
            .any(|r| r.live() && r.text.starts_with("one two") && r.text.len() < REPLY.len())
    })
    .await;
    let mid = cells(&d.console.state, &Keymap::defaults());
    assert!(mid.contains("agent: one two"), "{mid}");
    assert!(mid.contains("▍ streaming…"), "{mid}");
    // The running mark's column, then the new-activity column (` ` or `+`), then the kind.
    assert!(
        mid.contains("▍ main") || mid.contains("▍+main"),
        "the sessions list marks it: {mid}"
    );

    tokio::time::timeout(std::time::Duration::from_secs(60), b.engine.idle())
        .await
        .expect("the run ends");
    d.settle().await;
    let s = &d.console.state;
    assert!(
        s.transcript.streams.runs.is_empty(),
        "{:?}",
        s.transcript.streams.runs
    );
    assert_eq!(
        s.transcript.lines.last().map(|l| l.text.as_str()),
        Some(REPLY)
    );
    let done = cells(s, &Keymap::defaults());
    assert_eq!(done.matches(REPLY).count(), 1, "{done}");
    assert!(!done.contains("streaming…"), "{done}");
}
