//! Where the gateway token lives and where it goes, with real processes: `--connect` offers
//! the state folder's `gateway-token` only to a loopback port that folder's own running
//! `serve` listens on (a squatter on another port, or on the port of a `serve` killed with
//! -9, receives no token); `serve` refuses a token file others can read, or a symlink.

use crate::gateway_process;

use std::process::Command;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use gateway_process::{BIN, Gateway, bounded, start_with_token};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// A fake gateway on `listener`: it sends a challenge and records every text frame and
/// every raw byte it is sent, and refuses each `connect`.
fn squatter(listener: TcpListener) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let challenge = json!({"type": "event", "event": "connect.challenge",
                                       "payload": {"nonce": "n", "ts": 1}});
                let _ = ws.send(Message::text(challenge.to_string())).await;
                while let Some(Ok(msg)) = ws.next().await {
                    if let Message::Text(t) = msg {
                        record.lock().expect("lock").push(t.to_string());
                        let no = json!({"type": "res", "id": "connect", "ok": false,
                                        "error": {"code": "INVALID_REQUEST", "message": "no"}});
                        let _ = ws.send(Message::text(no.to_string())).await;
                    }
                }
            });
        }
    });
    seen
}

/// The binary on `state` with `--connect url <args>`, no token in its environment.
fn client(state: &std::path::Path, url: &str, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(state)
        .args(["--connect", url])
        .args(args)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN");
    tokio::task::block_in_place(|| bounded(c))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn token_of(g: &Gateway) -> String {
    std::fs::read_to_string(g.state().join("gateway-token"))
        .expect("serve generated a token")
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatter_on_a_loopback_port_gets_no_token_and_our_serve_still_does() {
    let g = start_with_token(&[], None);
    let token = token_of(&g);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let fake = format!("ws://{}", listener.local_addr().expect("addr"));
    let seen = squatter(listener);

    let out = client(&g.state(), &fake, &["sessions", "list"]);
    let seen = seen.lock().expect("lock").clone();
    assert!(
        seen.iter().all(|f| !f.contains(&token)),
        "the squatter received the token: {seen:?}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("Pass --token TOKEN or set $SWITCHBOARD_GATEWAY_TOKEN"),
        "{err}"
    );
    assert!(
        err.contains("no `switchboard serve` of the state folder"),
        "{err}"
    );

    // The folder's own gateway is still reached without --token.
    let ours = format!("ws://{}", g.addr);
    let out = client(&g.state(), &ours, &["sessions", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "[]");
    // `localhost` is the same machine and the same port.
    let port = g.addr.rsplit(':').next().expect("port");
    let out = client(
        &g.state(),
        &format!("ws://localhost:{port}"),
        &["sessions", "list"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_of_a_killed_serve_is_not_trusted() {
    let mut g = start_with_token(&[], None);
    let token = token_of(&g);
    g.kill_hard();
    // Its port is free to take.
    let listener = TcpListener::bind(&g.addr)
        .await
        .expect("take the dead serve's port");
    let seen = squatter(listener);
    let out = client(
        &g.state(),
        &format!("ws://{}", g.addr),
        &["sessions", "list"],
    );
    let seen = seen.lock().expect("lock").clone();
    assert!(
        seen.iter().all(|f| !f.contains(&token)),
        "the squatter received the token: {seen:?}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Pass --token"),
        "{}",
        text(&out.stderr)
    );
    // The dead gateway's record is still there: its free lock is what told.
    let records = std::fs::read_dir(g.state().join("gateways")).expect("records");
    assert_eq!(records.count(), 1, "kill -9 leaves the record");
}

#[test]
fn a_clean_exit_removes_the_record() {
    let mut g = start_with_token(&[], None);
    let dir = g.state().join("gateways");
    let records = || std::fs::read_dir(&dir).expect("records").count();
    assert_eq!(records(), 1);
    assert!(g.terminate().success());
    assert_eq!(records(), 0, "SIGTERM removes the record");
}

/// `serve` on `state` (no token in config or environment) to its end.
fn serve(state: &std::path::Path) -> std::process::Output {
    let config = state.with_file_name("config.json5");
    std::fs::write(&config, "{}").expect("config");
    let mut c = Command::new(BIN);
    c.args(["serve", "--bind", "127.0.0.1:0"])
        .env("SWITCHBOARD_STATE_DIR", state)
        .env("SWITCHBOARD_CONFIG", &config)
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN");
    bounded(c)
}

#[cfg(unix)]
#[test]
fn serve_refuses_a_token_file_others_can_read_or_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("state");
    let path = state.join("gateway-token");
    std::fs::write(&path, "old-token\n").expect("token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = serve(&state);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("chmod 600 {}", path.display())),
        "{err}"
    );

    std::fs::remove_file(&path).expect("rm");
    let elsewhere = dir.path().join("planted");
    std::os::unix::fs::symlink(&elsewhere, &path).expect("dangling symlink");
    let out = serve(&state);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert!(err.contains(&format!("rm {}", path.display())), "{err}");
    assert!(!elsewhere.exists(), "no token was written through the link");
}

#[cfg(unix)]
#[test]
fn a_client_refuses_a_token_file_others_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let g = start_with_token(&[], None);
    let path = g.state().join("gateway-token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(g.state())
        .args(["--connect", &format!("ws://{}", g.addr), "sessions", "list"])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN");
    let out = bounded(c);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("chmod 600"),
        "{}",
        text(&out.stderr)
    );
}
