//! A provider's `headers` values are secrets as much as its `apiKey` (issue "a gateway that
//! holds", item 10): an `Authorization` or proxy token in `models.providers.<id>.headers`,
//! quoted back by a server (a debugging proxy echoing the request, an "invalid token …"
//! error), used to reach the run's error and so stderr, the log file and the transcript,
//! where the `apiKey` was already redacted. Through the real binary against the fake
//! OpenAI-compatible server.

use crate::common;
use crate::fake_model;

use common::CliBench;
use fake_model::{Fake, answer};

const BEARER: &str = "tok-SECRET-4b1d9e77aa";
const PROXY: &str = "proxy-SECRET-99887766";
const KEY: &str = "sk-SECRET-key-0c3f5e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_quoted_back_by_the_server_reach_no_output_log_or_transcript() {
    // A 500 (retried once, so the retry's log line is exercised too), then a 401; both quote
    // the request's credentials back, the token also without its scheme.
    let echo = format!(
        "{{\"error\":{{\"message\":\"upstream saw Authorization: Bearer {BEARER}, X-Proxy-Token: {PROXY}, key {KEY}; token {BEARER} is invalid\"}}}}"
    );
    let fake = Fake::start(vec![answer(500, &echo), answer(401, &echo)]).await;
    let config = format!(
        r#"{{
  agents: {{ list: [ {{ id: "main", default: true, model: "fake/test-model" }} ] }},
  models: {{ providers: {{ fake: {{
    baseUrl: "{}", api: "openai-completions", maxRetries: 1, apiKey: "{KEY}",
    headers: {{ Authorization: "Bearer {BEARER}", "X-Proxy-Token": "{PROXY}" }},
  }} }} }},
}}"#,
        fake.base_url
    );
    let b = CliBench::new(&config);
    let out = {
        let cmd = b.command(&["inject", "agent:main:main", "hello"]);
        tokio::task::spawn_blocking(move || {
            let mut cmd = cmd;
            cmd.env("RUST_LOG", "debug").output().unwrap()
        })
        .await
        .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(fake.seen().len() >= 2, "the request was made and retried");
    let log = std::fs::read_to_string(b.state.join("logs/switchboard.log")).unwrap_or_default();
    let transcript = String::from_utf8_lossy(
        &b.command(&["sessions", "export", "agent:main:main"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    let everything = format!("{stdout}\n{stderr}\n{log}\n{transcript}");
    // The error did go out, with the secrets named instead of shown.
    assert!(
        everything.contains("<headers.Authorization>")
            && everything.contains("<headers.X-Proxy-Token>"),
        "stdout: {stdout}\nstderr: {stderr}\ntranscript: {transcript}"
    );
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("the log", &log),
        ("the transcript", &transcript),
    ] {
        for secret in [BEARER, PROXY, KEY] {
            assert!(!text.contains(secret), "{secret} in {what}: {text}");
        }
    }
}

/// Printing a provider (`{:?}` in a log line or an error) shows neither its key nor its
/// header values: `Debug` is written to redact them.
#[test]
fn a_provider_printed_for_debugging_shows_no_secret() {
    let provider: switchboard_config::ModelProvider = serde_json::from_value(serde_json::json!({
        "baseUrl": "http://127.0.0.1:1/v1",
        "apiKey": KEY,
        "headers": { "Authorization": format!("Bearer {BEARER}") },
    }))
    .unwrap();
    let shown = format!("{provider:?} {provider:#?}");
    assert!(!shown.contains(KEY) && !shown.contains(BEARER), "{shown}");
    assert!(
        shown.contains("Authorization") && shown.contains("<redacted>"),
        "{shown}"
    );
}
