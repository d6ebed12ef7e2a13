//! What operators expect of `switchboard serve` (issue 28 item 5), on real processes:
//! `/metrics` in Prometheus' text format (on the gateway's port with `--metrics`, on a port of
//! its own with `--metrics-bind`, 404 without either) counting connections, requests by
//! method, answers by outcome, events sent and the engine's runs; `/readyz` saying ready while
//! the store answers; `backup --out` taken while the gateway serves and writes; and
//! `--log-format json` writing one JSON object per line.

use crate::gateway_process::{self, BIN, WAIT, recv, send, start_with_config};

use std::process::Command;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;

/// One HTTP request to `addr`, its whole answer.
async fn http(addr: &str, request: &str) -> String {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    tokio::time::timeout(WAIT, tcp.read_to_string(&mut answer))
        .await
        .expect("answered and closed")
        .expect("read");
    answer
}

async fn get(addr: &str, path: &str) -> String {
    http(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).await
}

/// The value of a series (`name{labels}` as written) in a scrape.
fn series(scrape: &str, name: &str) -> Option<f64> {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
async fn metrics_on_the_gateway_port_count_what_happened() {
    let gw = start_with_config(CONFIG, &["--metrics"]);
    let mut ws = gateway_process::connected(&gw.addr).await;
    send(
        &mut ws,
        json!({"type": "req", "id": "1", "method": "chat.send",
               "params": {"sessionKey": "agent:main:main", "message": "hi",
                          "idempotencyKey": "7b3c0c5e-1111-4d1a-9f00-000000000001"}}),
    )
    .await;
    send(
        &mut ws,
        json!({"type": "req", "id": "2", "method": "no.such.method", "params": {}}),
    )
    .await;
    // The run's end, seen in the history.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        send(
            &mut ws,
            json!({"type": "req", "id": "h", "method": "chat.history",
                   "params": {"sessionKey": "agent:main:main", "limit": 10}}),
        )
        .await;
        let mut answer = Value::Null;
        while let Ok(frame) = recv(&mut ws).await {
            if frame["id"] == "h" {
                answer = frame;
                break;
            }
        }
        if answer.to_string().contains("re: hi") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    let scrape = loop {
        let answer = get(&gw.addr, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(
            answer.contains("Content-Type: text/plain; version=0.0.4"),
            "{answer}"
        );
        let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
        if series(body, "switchboard_runs_total{status=\"ok\"}").is_some() {
            break body.to_string();
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        series(&scrape, "switchboard_connections"),
        Some(1.0),
        "{scrape}"
    );
    assert!(
        series(&scrape, "switchboard_requests_total{method=\"chat.send\"}") >= Some(1.0),
        "{scrape}"
    );
    // A method nobody serves is counted as `other`, not as a series of its own.
    assert!(
        series(&scrape, "switchboard_requests_total{method=\"other\"}") >= Some(1.0),
        "{scrape}"
    );
    assert!(!scrape.contains("no.such.method"), "{scrape}");
    assert!(
        series(&scrape, "switchboard_responses_total{outcome=\"ok\"}") >= Some(1.0),
        "{scrape}"
    );
    assert!(
        scrape.contains("switchboard_store_write_seconds_bucket"),
        "{scrape}"
    );
    assert!(
        scrape.contains("switchboard_store_read_seconds_count"),
        "{scrape}"
    );
    assert!(
        series(&scrape, "switchboard_messages_total") >= Some(2.0),
        "{scrape}"
    );
    // Readiness asks the store.
    let ready = get(&gw.addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    assert!(ready.contains(r#""ready":true"#), "{ready}");
}

#[tokio::test]
async fn metrics_are_off_unless_asked_and_may_have_a_port_of_their_own() {
    let plain = start_with_config(CONFIG, &[]);
    let answer = get(&plain.addr, "/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(answer.contains("--metrics"), "{answer}");

    // A port of its own: metrics there, not on the gateway's port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("addr");
    let gw = start_with_config(CONFIG, &["--metrics-bind", &port.to_string()]);
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains(&format!("metrics on http://{port}/metrics"))),
        "{:?}",
        gw.said
    );
    // Readiness first: its store read is what the scrape then shows (nothing else has read
    // or written since the recorder was installed).
    let ready = get(&port.to_string(), "/readyz").await;
    assert!(ready.contains(r#""ready":true"#), "{ready}");
    let there = get(&port.to_string(), "/metrics").await;
    assert!(there.starts_with("HTTP/1.1 200 OK\r\n"), "{there}");
    assert!(there.contains("switchboard_store_read_seconds"), "{there}");
    let other = get(&port.to_string(), "/").await;
    assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
    let gateway_port = get(&gw.addr, "/metrics").await;
    assert!(
        gateway_port.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{gateway_port}"
    );
}

/// `switchboard <args>` on `state` (exit code and output).
fn run(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("SWITCHBOARD_STATE_DIR", state)
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("runs")
}

#[tokio::test]
async fn a_backup_taken_while_the_gateway_writes_is_whole_and_consistent() {
    let gw = start_with_config(CONFIG, &[]);
    let state = gw.state();
    let mut ws = gateway_process::connected(&gw.addr).await;
    // Writes keep coming while the backups are taken.
    let writer = tokio::spawn(async move {
        for i in 0..200 {
            send(
                &mut ws,
                json!({"type": "req", "id": format!("s{i}"), "method": "chat.send",
                       "params": {"sessionKey": format!("agent:main:s{}", i % 20), "message": format!("m{i}"),
                                  "idempotencyKey": format!("7b3c0c5e-1111-4d1a-9f00-{i:012}")}}),
            )
            .await;
        }
        ws
    });
    let out = tempfile::tempdir().expect("dir");
    let mut last = 0u64;
    for n in 0..3 {
        let file = out.path().join(format!("b{n}.db"));
        let done = run(&state, &["backup", "--out", file.to_str().expect("utf-8")]);
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        let said = String::from_utf8_lossy(&done.stdout);
        assert!(said.starts_with("backed up "), "{said}");
        // The copy opens as a state folder of its own, and checks out.
        let restored = out.path().join(format!("r{n}"));
        std::fs::create_dir_all(&restored).expect("dir");
        std::fs::copy(&file, restored.join("switchboard.db")).expect("copy");
        let list = run(&restored, &["sessions", "list", "--json"]);
        assert!(
            list.status.success(),
            "{}",
            String::from_utf8_lossy(&list.stderr)
        );
        let rows: Value = serde_json::from_slice(&list.stdout).expect("JSON");
        let count = rows["sessions"].as_array().map_or(0, Vec::len) as u64;
        assert!(count >= last, "a later backup holds at least as much");
        last = count;
        let conn = rusqlite::Connection::open(&file).expect("open the copy");
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("check");
        assert_eq!(check, "ok");
        assert!(!out.path().join(format!("b{n}.db.partial")).exists());
    }
    let _ws = writer.await.expect("writer");
    // An existing file is not replaced without --force; no state folder is a clear error.
    let file = out.path().join("b0.db");
    let again = run(&state, &["backup", "--out", file.to_str().expect("utf-8")]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let forced = run(
        &state,
        &["backup", "--out", file.to_str().expect("utf-8"), "--force"],
    );
    assert!(forced.status.success());
    let nowhere = run(
        &out.path().join("no-such-state"),
        &[
            "backup",
            "--out",
            out.path().join("x.db").to_str().expect("utf-8"),
        ],
    );
    assert_eq!(nowhere.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).contains("no state folder at"),
        "{}",
        String::from_utf8_lossy(&nowhere.stderr)
    );
    assert!(!out.path().join("no-such-state").exists());
}

#[test]
fn log_format_json_writes_one_json_object_per_line() {
    let state = tempfile::tempdir().expect("dir");
    let sb = |args: &[&str]| {
        Command::new(BIN)
            .args(["--log-format", "json"])
            .args(args)
            .env("SWITCHBOARD_STATE_DIR", state.path())
            .env_remove("SWITCHBOARD_CONFIG")
            .output()
            .expect("runs")
    };
    let done = sb(&["inject", "agent:main:main", "hi", "--quiet"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    // A failure is logged (`command failed`), quoting what was typed.
    let failed = sb(&["sessions", "show", "agent:main:nope\u{202e}"]);
    assert!(!failed.status.success());
    let log = std::fs::read_to_string(state.path().join("logs/switchboard.log")).expect("log");
    let lines: Vec<&str> = log.lines().collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{l}");
        assert!(!l.contains('\u{202e}'), "look-alikes escaped: {l}");
    }
}

/// systemd's readiness protocol on a real `serve`: READY=1 once it listens, WATCHDOG=1 while
/// the engine answers (`WATCHDOG_USEC` set), STOPPING=1 when SIGTERM asks it to stop.
#[test]
fn serve_speaks_systemds_notify_protocol() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().expect("dir");
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket.set_read_timeout(Some(WAIT)).expect("timeout");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let mut cmd = gateway_process::serve_command(dir.path(), &dir.path().join("config.json5"));
    cmd.env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "200000");
    let mut launched = gateway_process::launch(cmd);
    let mut said = Vec::new();
    let mut buf = [0u8; 512];
    let mut next = |said: &mut Vec<String>| {
        let n = socket.recv(&mut buf).expect("a notification");
        let text = String::from_utf8_lossy(&buf[..n]).trim_end().to_string();
        said.push(text.clone());
        text
    };
    assert_eq!(next(&mut said), "READY=1");
    assert_eq!(next(&mut said), "WATCHDOG=1", "{said:?}");
    let pid = launched.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .is_ok_and(|s| s.success())
    );
    loop {
        if next(&mut said) == "STOPPING=1" {
            break;
        }
    }
    let status = launched.child.wait().expect("exit");
    assert!(status.success(), "{status:?}");
}

/// The unit in contrib/ passes `systemd-analyze verify` (with ExecStart pointing at this
/// build, since /usr/local/bin/switchboard is not installed here).
#[test]
fn the_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/switchboard.service"
    ))
    .expect("the unit");
    for wanted in [
        "Type=notify",
        "WatchdogSec=",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
    ] {
        assert!(unit.contains(wanted), "{wanted}");
    }
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").is_err(),
            "systemd-analyze is missing under CI"
        );
        eprintln!("note: systemd-analyze not found; the unit was only read");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("switchboard.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/switchboard", BIN)).expect("write");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze runs");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `/readyz` asks the store: one that fails makes the gateway not ready (503, `failing:
/// ["store"]`), and ready again when it answers; `/healthz` stays live throughout.
#[tokio::test]
async fn readiness_follows_the_store() {
    use crate::common::fake_api::{Data, FakeApi};
    use std::sync::Arc;
    let fake = Arc::new(FakeApi::new(Data::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(switchboard_server::run(
        listener,
        fake.clone(),
        switchboard_server::Options::new("t".into()),
        async move {
            let _ = stopped.await;
        },
    ));
    let ready = get(&addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    fake.fail_status(Some(switchboard_types::api::ApiError::storage(
        "disk I/O error",
    )));
    let not = get(&addr, "/readyz").await;
    assert!(
        not.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{not}"
    );
    assert!(
        not.contains(r#""ready":false,"failing":["store"]"#),
        "{not}"
    );
    let live = get(&addr, "/healthz").await;
    assert!(live.starts_with("HTTP/1.1 200 OK\r\n"), "{live}");
    fake.fail_status(None);
    let back = get(&addr, "/readyz").await;
    assert!(back.starts_with("HTTP/1.1 200 OK\r\n"), "{back}");
}
