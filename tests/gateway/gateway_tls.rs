//! wss:// end to end: `switchboard serve --tls-cert --tls-key` with a self-signed certificate
//! for "localhost", dialled with `remote::tls::connector` (trusting that certificate, or not);
//! unusable TLS files refuse to start; a client stalled before TLS completes is dropped.

use crate::gateway_process;
use crate::gateway_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gateway_process::{
    BIN, TOKEN, WAIT, challenge, connect_req, open_with, recv, scopes, send, start,
};
use serde_json::json;
use switchboard_protocol::ClientInfo;
use switchboard_protocol::device::DeviceIdentity;
use switchboard_remote::tls::connector;
use tokio::io::AsyncReadExt;

/// A self-signed certificate for "localhost" and its key, as PEM files in `dir`.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write key");
    (cert, key)
}

fn port(addr: &str) -> &str {
    addr.rsplit(':').next().expect("port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_the_certificate_gets_hello_ok_over_wss() {
    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let gw = start(&[
        "--tls-cert",
        cert.to_str().expect("utf8"),
        "--tls-key",
        key.to_str().expect("utf8"),
    ]);
    assert_eq!(gw.scheme, "wss", "serve announces wss://");
    let url = format!("wss://localhost:{}/", port(&gw.addr));
    let tls = connector(Some(&cert)).expect("connector");
    let mut ws = open_with(&gw.addr, &url, Some(tls))
        .await
        .expect("TLS and WebSocket handshakes");
    let (nonce, ts) = challenge(&mut ws).await;
    // A signed device too: the whole OpenClaw handshake, over TLS.
    let identity = DeviceIdentity::generate().expect("key");
    let client: ClientInfo =
        serde_json::from_value(connect_req(TOKEN, None)["params"]["client"].clone())
            .expect("client");
    let device = identity.sign(&client, "operator", &scopes(), TOKEN, &nonce, ts);
    send(
        &mut ws,
        connect_req(TOKEN, Some(serde_json::to_value(device).expect("json"))),
    )
    .await;
    let hello = recv(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["type"], "hello-ok");
    send(
        &mut ws,
        json!({"type": "req", "id": "l", "method": "sessions.list", "params": {}}),
    )
    .await;
    let listed = recv(&mut ws).await.expect("list");
    assert_eq!(listed["id"], "l");
    assert_eq!(listed["ok"], true, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_ca_fails_with_a_certificate_error() {
    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let gw = start(&[
        "--tls-cert",
        cert.to_str().expect("utf8"),
        "--tls-key",
        key.to_str().expect("utf8"),
    ]);
    let url = format!("wss://localhost:{}/", port(&gw.addr));
    let tls = connector(None).expect("connector");
    let err = open_with(&gw.addr, &url, Some(tls))
        .await
        .expect_err("a self-signed certificate is not trusted by default");
    let text = err.to_string();
    assert!(
        text.contains("certificate") && text.contains("UnknownIssuer"),
        "{text}"
    );
    // Nor does a name other than the certificate's pass, even with the CA.
    let url = format!("wss://127.0.0.1:{}/", port(&gw.addr));
    let err = open_with(&gw.addr, &url, Some(connector(Some(&cert)).expect("c")))
        .await
        .expect_err("wrong name");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_ws_client_gets_no_challenge_from_a_tls_gateway() {
    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let gw = start(&[
        "--tls-cert",
        cert.to_str().expect("utf8"),
        "--tls-key",
        key.to_str().expect("utf8"),
    ]);
    let url = format!("ws://{}/", gw.addr);
    assert!(open_with(&gw.addr, &url, None).await.is_err());
}

/// `serve` with these arguments exits 2 with a message containing every `says`.
fn refuses(args: &[&str], says: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").expect("config");
    let out = Command::new(BIN)
        .arg("serve")
        .args(args)
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", &config)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: {s:?} not in {err}");
    }
}

#[test]
fn unusable_tls_files_are_refused_at_start_with_exit_2() {
    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let (other_cert, _) = {
        let d = files.path().join("other");
        std::fs::create_dir(&d).expect("mkdir");
        self_signed(&d)
    };
    let garbage = files.path().join("garbage.pem");
    std::fs::write(&garbage, "hello\n").expect("write");
    let missing = files.path().join("missing.pem");
    let p = |p: &Path| p.to_str().expect("utf8").to_string();
    let bind = ["--bind", "127.0.0.1:0"];
    let run = |cert: &str, key: &str, says: &[&str]| {
        let args: Vec<&str> = bind
            .iter()
            .copied()
            .chain(["--tls-cert", cert, "--tls-key", key])
            .collect();
        refuses(&args, says);
    };
    run(
        &p(&missing),
        &p(&key),
        &["cannot read the TLS certificate", "missing.pem"],
    );
    run(
        &p(&cert),
        &p(&missing),
        &["cannot read the TLS key", "missing.pem"],
    );
    run(
        &p(&garbage),
        &p(&key),
        &["garbage.pem", "no PEM CERTIFICATE"],
    );
    run(
        &p(&cert),
        &p(&garbage),
        &["garbage.pem", "no PEM PRIVATE KEY"],
    );
    run(&p(&key), &p(&key), &["key.pem", "no PEM CERTIFICATE"]);
    run(&p(&other_cert), &p(&key), &["cannot be used together"]);
    // One without the other is a usage error too.
    refuses(&["--tls-cert", &p(&cert)], &["--tls-key"]);
}

#[test]
fn a_non_loopback_bind_is_allowed_with_tls() {
    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, "{}").expect("config");
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", "0.0.0.0:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", &config)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let listening = loop {
        match rx.recv_timeout(WAIT) {
            Ok(line) if line.contains("listening on wss://0.0.0.0:") => break true,
            Ok(line) => seen.push(line),
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(listening, "{seen:?}");
}

/// In-process, to set a short handshake timeout: a client that opens TCP and never starts
/// TLS is disconnected, and the gateway keeps serving others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stalled_before_tls_is_dropped() {
    use switchboard_config::Config;

    use switchboard_server::{self as server, Options};

    let files = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(files.path());
    let acceptor = switchboard_protocol::tls::acceptor(&cert, &key).expect("acceptor");
    let engine =
        switchboard::state_folder::open_engine(files.path(), Config::default()).expect("engine");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let gateway = tokio::spawn(server::run_with_tls(
        listener,
        engine.start(),
        Options {
            max_payload: 1 << 20,
            handshake_timeout: Duration::from_millis(200),
            ..Options::new(TOKEN.into())
        },
        Some(acceptor),
        async {
            let _ = stop_rx.await;
        },
    ));
    let mut silent = tokio::net::TcpStream::connect(&addr).await.expect("tcp");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut buf))
        .await
        .expect("the gateway drops a silent client instead of waiting forever");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    let url = format!("wss://localhost:{}/", port(&addr));
    let mut ws = open_with(&addr, &url, Some(connector(Some(&cert)).expect("c")))
        .await
        .expect("a prompt client still gets in");
    challenge(&mut ws).await;
    send(&mut ws, connect_req(TOKEN, None)).await;
    assert_eq!(recv(&mut ws).await.expect("hello")["ok"], true);
    let _ = stop_tx.send(());
    tokio::time::timeout(WAIT, gateway)
        .await
        .expect("gateway stops")
        .expect("gateway task");
}

/// The same bound without TLS: a TCP client that never sends the WebSocket upgrade is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stalled_before_the_websocket_upgrade_is_dropped() {
    use switchboard_config::Config;

    use switchboard_server::Options;

    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        switchboard::state_folder::open_engine(dir.path(), Config::default()).expect("engine");
    let gateway = gateway_support::start_with(
        engine.start(),
        Options {
            max_payload: 1 << 20,
            handshake_timeout: Duration::from_millis(200),
            ..Options::new(TOKEN.into())
        },
    )
    .await;
    let mut silent = tokio::net::TcpStream::connect(&gateway.addr)
        .await
        .expect("tcp");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut buf))
        .await
        .expect("the gateway drops a silent client instead of waiting forever");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    gateway.stop().await;
}
