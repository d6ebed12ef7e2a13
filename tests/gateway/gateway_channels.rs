//! Issue 29: the generic webhook channel end to end, with real processes and sockets. A
//! message POSTed to `serve`'s `/hooks/<name>` is answered by the agent and the reply is
//! POSTed, signed, to a local receiver; a 429 with Retry-After is waited out; 500s until the
//! last attempt fail the delivery, which `deliveries --failed` lists and `deliveries retry`
//! sends (both run over `--connect`, through the gateway's API); a 401 stops that channel (said in the log and by `deliveries`) and not the
//! others; a `serve` killed with deliveries in flight, restarted, sends every one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::receiver::{Answer, Receiver};
use crate::gateway_process::{self, Gateway, WAIT};

const SECRET: &str = "hook-secret-0123456789";

fn config(receivers: &[(&str, &Receiver)], attempts: u32, timeout_seconds: u64) -> String {
    let hooks: serde_json::Map<String, Value> = receivers
        .iter()
        .map(|(name, r)| {
            (
                name.to_string(),
                json!({
                    "url": r.url,
                    "secret": SECRET,
                    "timeoutSeconds": timeout_seconds,
                    "retry": { "attempts": attempts, "minDelayMs": 50, "maxDelayMs": 100, "jitter": false },
                }),
            )
        })
        .collect();
    json!({
        "agents": { "list": [ { "id": "main", "default": true, "model": "scripted",
            "script": [ { "reply": "re: {{text}}" } ] } ] },
        "channels": { "webhook": hooks },
    })
    .to_string()
}

/// A raw HTTP POST to the gateway; (status code, body).
fn post(addr: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to serve");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n\
Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

fn say(g: &Gateway, conversation: &str, text: &str) {
    let (code, body) = post(
        &g.addr,
        "/hooks/ops",
        Some(&format!("Bearer {SECRET}")),
        &json!({ "text": text, "conversation": conversation }).to_string(),
    );
    assert_eq!(code, 202, "{body}");
}

/// `switchboard <args>` on the gateway's state folder and config; stdout.
fn cli(g: &Gateway, args: &[&str]) -> String {
    gateway_process::run_cli(g.dir.path(), args)
}

fn deliveries(g: &Gateway) -> Vec<Value> {
    let out = cli(g, &["deliveries", "--json"]);
    serde_json::from_str::<Value>(&out)
        .expect("deliveries --json")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until `pred` holds for the deliveries (bounded by `WAIT`: only a hang fails).
fn wait_deliveries(g: &Gateway, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let rows = deliveries(g);
        if pred(&rows) {
            return rows;
        }
        assert!(std::time::Instant::now() < until, "{what}: {rows:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn log_text(g: &Gateway) -> String {
    std::fs::read_to_string(g.log()).unwrap_or_default()
}

#[test]
fn a_hook_message_is_answered_and_the_reply_delivered_signed_to_the_receiver() {
    let receiver = Receiver::start();
    let g = gateway_process::start_with_config(&config(&[("ops", &receiver)], 3, 10), &[]);
    assert!(
        g.said
            .iter()
            .any(|l| l.contains("channels up: webhook:ops")),
        "serve says which channels are up: {:?}",
        g.said
    );
    // Refused: no secret, a wrong one, an unknown hook (the same answer), bad JSON.
    let hello = json!({ "text": "hello", "conversation": "c1" }).to_string();
    assert_eq!(post(&g.addr, "/hooks/ops", None, &hello).0, 401);
    assert_eq!(
        post(&g.addr, "/hooks/ops", Some("Bearer nope"), &hello).0,
        401
    );
    assert_eq!(
        post(
            &g.addr,
            "/hooks/other",
            Some(&format!("Bearer {SECRET}")),
            &hello
        )
        .0,
        401
    );
    let (code, body) = post(
        &g.addr,
        "/hooks/ops",
        Some(&format!("Bearer {SECRET}")),
        "{nope",
    );
    assert_eq!(code, 400, "{body}");
    // Hostile: a body past the bound, no length: refused from the head, the body unread.
    let auth = format!("Bearer {SECRET}");
    let raw = |head: &str| {
        let mut s = TcpStream::connect(&g.addr).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        s.write_all(head.as_bytes()).expect("send");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    };
    let big = raw(&format!(
        "POST /hooks/ops HTTP/1.1\r\nAuthorization: {auth}\r\nContent-Length: 70000\r\n\r\n{{"
    ));
    assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    let no_length = raw(&format!(
        "POST /hooks/ops HTTP/1.1\r\nAuthorization: {auth}\r\n\r\n"
    ));
    assert!(no_length.starts_with("HTTP/1.1 411"), "{no_length}");
    assert!(receiver.received().is_empty());

    let (code, body) = post(
        &g.addr,
        "/hooks/ops",
        Some(&format!("Bearer {SECRET}")),
        &hello,
    );
    assert_eq!(code, 202, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON answer");
    assert!(
        answer["key"]
            .as_str()
            .unwrap_or_default()
            .contains("hook:ops:c1"),
        "{answer}"
    );

    let got = receiver.wait_for(1, WAIT);
    let request = &got[0];
    assert_eq!(request.method, "POST");
    let signature = request.header("X-Switchboard-Signature").expect("signed");
    assert!(
        switchboard_channels::webhook::verify(SECRET, &request.body, signature),
        "the signature is the body's HMAC-SHA256 with the secret"
    );
    let payload = request.json();
    assert_eq!(payload["text"], "re: hello");
    assert_eq!(payload["hook"], "ops");
    assert!(
        payload["sessionKey"]
            .as_str()
            .unwrap_or_default()
            .contains("hook:ops:c1")
    );
    assert_eq!(
        request.header("Idempotency-Key"),
        payload["idempotencyKey"].as_str()
    );
    let rows = wait_deliveries(&g, "the delivery is recorded sent", |rows| {
        rows.first().is_some_and(|r| r["status"] == "sent")
    });
    assert_eq!(rows[0]["attempt"], 1);
    assert_eq!(rows[0]["channel"], "webhook");
    // The secret is nowhere in the log.
    assert!(!log_text(&g).contains(SECRET));
}

#[test]
fn a_429_is_waited_out_for_its_retry_after_then_the_delivery_is_sent() {
    let receiver = Receiver::start();
    receiver.script(vec![Answer::retry_after(1)], None);
    let g = gateway_process::start_with_config(&config(&[("ops", &receiver)], 3, 10), &[]);
    say(&g, "c1", "hello");
    let got = receiver.wait_for(2, WAIT);
    // The channel's wait, not the 50 ms backoff: the retry came no sooner than it said.
    assert!(
        got[1].at.duration_since(got[0].at) >= Duration::from_millis(950),
        "retried after {:?}",
        got[1].at.duration_since(got[0].at)
    );
    assert_eq!(
        got[0].header("Idempotency-Key"),
        got[1].header("Idempotency-Key"),
        "one delivery, two attempts"
    );
    let rows = wait_deliveries(&g, "sent on the second attempt", |rows| {
        rows.first().is_some_and(|r| r["status"] == "sent")
    });
    assert_eq!(rows[0]["attempt"], 2);
}

#[test]
fn five_hundreds_until_the_last_attempt_fail_it_and_retry_id_sends_it_over_connect() {
    let receiver = Receiver::start();
    receiver.script(Vec::new(), Some(Answer::status(500)));
    let g = gateway_process::start_with_config(&config(&[("ops", &receiver)], 3, 10), &[]);
    say(&g, "c1", "hello");
    let rows = wait_deliveries(&g, "failed after 3 attempts", |rows| {
        rows.first().is_some_and(|r| r["status"] == "failed")
    });
    assert_eq!(rows[0]["attempt"], 3);
    assert_eq!(receiver.received().len(), 3);
    let error = rows[0]["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("500") && error.contains("gave up after 3 attempts"),
        "{error}"
    );
    let failed = gateway_process::remote_cli(&g, &["deliveries", "--failed"]);
    let id = rows[0]["id"].to_string();
    assert!(
        failed.contains("failed") && failed.contains("500"),
        "{failed}"
    );
    assert!(
        failed.lines().nth(1).is_some_and(|l| l.starts_with(&id)),
        "{failed}"
    );

    receiver.script(Vec::new(), Some(Answer::ok()));
    let said = gateway_process::remote_cli(&g, &["deliveries", "retry", &id]);
    assert!(said.contains("queued again"), "{said}");
    receiver.wait_for(4, WAIT);
    wait_deliveries(&g, "sent after retry ID", |rows| {
        rows.first().is_some_and(|r| r["status"] == "sent")
    });
    assert!(gateway_process::remote_cli(&g, &["deliveries", "--failed", "--json"]).trim() == "[]");
}

#[test]
fn a_401_stops_that_channel_says_so_and_the_others_keep_sending() {
    let ops = Receiver::start();
    ops.script(Vec::new(), Some(Answer::status(401)));
    let alerts = Receiver::start();
    let g = gateway_process::start_with_config(
        &config(&[("ops", &ops), ("alerts", &alerts)], 3, 10),
        &[],
    );
    say(&g, "c1", "first");
    let rows = wait_deliveries(&g, "held: its channel stopped", |rows| {
        rows.first().is_some_and(|r| {
            r["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("channel webhook:ops stopped"))
        })
    });
    assert_eq!(rows[0]["status"], "retrying");
    assert_eq!(
        rows[0]["attempt"], 0,
        "a stopped channel's wait is no attempt"
    );
    let table = cli(&g, &["deliveries"]);
    assert!(
        table.contains("channel webhook:ops stopped: HTTP 401"),
        "{table}"
    );
    // A second message on the stopped channel is not sent at all.
    say(&g, "c2", "second");
    wait_deliveries(&g, "the second is held too", |rows| {
        rows.len() == 2 && rows.iter().all(|r| r["status"] == "retrying")
    });
    assert_eq!(
        ops.received().len(),
        1,
        "one refused request, then the channel is stopped"
    );
    // The other hook still sends.
    let (code, body) = post(
        &g.addr,
        "/hooks/alerts",
        Some(&format!("Bearer {SECRET}")),
        &json!({ "text": "ping", "conversation": "a1" }).to_string(),
    );
    assert_eq!(code, 202, "{body}");
    assert_eq!(alerts.wait_for(1, WAIT)[0].json()["text"], "re: ping");
    let log = log_text(&g);
    assert!(
        log.contains("channel stopped") && log.contains("webhook:ops"),
        "the log says which channel stopped and why"
    );
}

#[test]
fn a_serve_killed_with_deliveries_in_flight_sends_every_one_after_a_restart() {
    const N: usize = 12;
    let receiver = Receiver::start();
    // Every request hangs: the deliveries are `sending` when serve dies.
    receiver.script(Vec::new(), Some(Answer::Hang));
    let mut g = gateway_process::start_with_config(&config(&[("ops", &receiver)], 5, 60), &[]);
    for i in 0..N {
        say(&g, &format!("c{i}"), &format!("m{i}"));
    }
    receiver.wait_for(N, WAIT);
    let rows = deliveries(&g);
    assert_eq!(rows.len(), N);
    assert!(rows.iter().all(|r| r["status"] == "sending"), "{rows:#?}");
    // kill -9: nothing recorded after the receiver got them.
    let _ = Command::new("kill")
        .args(["-9", &g.pid().to_string()])
        .status();
    assert!(g.wait_exit(WAIT).is_some());

    receiver.script(Vec::new(), Some(Answer::ok()));
    let root = g.dir.path().to_path_buf();
    let restarted = gateway_process::launch(gateway_process::serve_command(
        &root,
        &root.join("config.json5"),
    ));
    let mut restarted = restarted;
    let rows = wait_deliveries(&g, "every delivery sent after the restart", |rows| {
        rows.len() == N && rows.iter().all(|r| r["status"] == "sent")
    });
    // At least once: each was received twice (the dead attempt and the new one), under one
    // idempotency key per delivery, so a receiver honouring it sees each once.
    let got = receiver.received();
    assert_eq!(receiver.distinct_keys(), N, "every delivery, none lost");
    assert_eq!(got.len(), 2 * N, "the ones in flight were sent again, once");
    assert!(rows.iter().all(|r| r["attempt"] == 2));
    let _ = restarted.child.kill();
    let _ = restarted.child.wait();
}
