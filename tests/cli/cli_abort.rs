//! `switchboard sessions abort`: over `--connect` against a real `switchboard serve` process
//! whose agent runs on the fake model server (`fake_model`) and never gets its answer, the
//! command stops the run and prints it; with nothing running it says so. Locally it says
//! that runs belong to the process that started them.

use crate::common;
use crate::fake_model;
use crate::gateway_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use fake_model::{Answer, Fake, text_reply};

const WAIT: Duration = Duration::from_secs(60);

/// `serve` on a free port, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(base_url: &str) -> String {
    json!({
        "agents": { "list": [ { "id": "main", "default": true, "model": "fake/test-model" } ] },
        "models": { "providers": { "fake": {
            "baseUrl": base_url, "api": "openai-completions", "maxRetries": 0,
        } } },
    })
    .to_string()
}

/// Starts `serve` on `bench`; its `ws://` address.
fn serve(bench: &common::CliBench) -> (Serve, String) {
    let mut child = bench
        .command(&["serve", "--bind", "127.0.0.1:0"])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = loop {
        let line = rx.recv_timeout(WAIT).expect("serve prints its address");
        if let Some(a) = line.split("listening on ").nth(1) {
            break a.trim().to_string();
        }
    };
    (Serve(child), url)
}

/// Runs the binary off the runtime's threads (the fake model answers on them).
async fn run(bench: &common::CliBench, args: &[&str]) -> Output {
    let mut c = bench.command(args);
    c.env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null());
    let out = tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || c.output()))
        .await
        .expect("the command ends")
        .expect("join")
        .expect("output");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_abort_over_connect_stops_the_run_and_prints_it() {
    let slow = Answer {
        delay: Duration::from_secs(120),
        ..text_reply("never seen", 1, 1)
    };
    let fake = Fake::start(vec![slow]).await;
    let bench = common::CliBench::new(&config(&fake.base_url));
    let (_serve, url) = serve(&bench);
    let token = std::fs::read_to_string(bench.state.join("gateway-token")).expect("token");
    let addr = url.trim_start_matches("ws://").to_string();
    let (mut ws, _) = gateway_support::connected_with(
        &addr,
        gateway_support::connect_params(token.trim(), &[], &["operator.admin"]),
    )
    .await;
    let sent = gateway_support::call(
        &mut ws,
        "1",
        "chat.send",
        json!({"sessionKey": "main", "message": "think hard", "idempotencyKey": "r1"}),
    )
    .await;
    let run_id = sent["payload"]["runId"]
        .as_str()
        .expect("runId")
        .to_string();
    tokio::time::timeout(WAIT, async {
        while fake.seen().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the model is asked");

    let out = run(&bench, &["--connect", &url, "sessions", "abort", "main"]).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("agent:main:main: aborted run {run_id}\n")
    );
    let out = run(
        &bench,
        &["--connect", &url, "sessions", "abort", "main", "--json"],
    )
    .await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v, json!({"key": "agent:main:main", "runIds": []}));
    let out = run(&bench, &["--connect", &url, "sessions", "abort", "main"]).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "agent:main:main: nothing was running\n"
    );
}

#[test]
fn sessions_abort_locally_says_where_runs_live() {
    let bench = common::CliBench::new(r#"{ agents: { list: [ { id: "main", default: true } ] } }"#);
    bench.ok(&["inject", "main", "hello"]);
    let out = bench.ok(&["sessions", "abort", "main"]);
    assert!(
        out.starts_with("agent:main:main: nothing was running in this process"),
        "{out}"
    );
    let missing = bench.run(&["sessions", "abort", "agent:main:ghost"]);
    assert!(!missing.status.success());
}
