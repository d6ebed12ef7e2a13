//! `switchboard serve` as a real process and a real WebSocket client (ws:// or wss://) for
//! the device-identity and TLS tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
pub const TOKEN: &str = "test-token-0123456789";
pub const WAIT: Duration = Duration::from_secs(60);

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A running `serve`; killed when dropped.
pub struct Gateway {
    child: Child,
    /// `host:port` as printed.
    pub addr: String,
    /// `ws` or `wss`, as printed.
    pub scheme: String,
    _stderr: mpsc::Receiver<String>,
    pub dir: tempfile::TempDir,
}

impl Gateway {
    /// The process id of `serve` (for `kill` and `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The gateway's log file.
    pub fn log(&self) -> std::path::PathBuf {
        self.dir
            .path()
            .join("state")
            .join("logs")
            .join("switchboard.log")
    }

    /// Waits for the process to exit (`None` if it is still running after `wait`).
    pub fn wait_exit(&mut self, wait: Duration) -> Option<std::process::ExitStatus> {
        let until = std::time::Instant::now() + wait;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `start`, with `config` as the config file's text.
pub fn start_with_config(config_text: &str, extra: &[&str]) -> Gateway {
    start_with(config_text, None, extra)
}

/// `serve --bind 127.0.0.1:0 <extra>` with the test token, in a fresh state folder.
pub fn start(extra: &[&str]) -> Gateway {
    start_with("{}", None, extra)
}

/// `start` with this config (JSON5 text), and under `ulimit -n <descriptors>` when given.
pub fn start_with(config_text: &str, descriptors: Option<u32>, extra: &[&str]) -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(&config, config_text).expect("config");
    let mut cmd = serve_command(dir.path(), &config);
    cmd.args(extra);
    if let Some(n) = descriptors {
        // The same command under `ulimit -n n`: sh is given its arguments and environment.
        let mut sh = Command::new("sh");
        sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), BIN])
            .args(cmd.get_args());
        for (key, value) in cmd.get_envs() {
            match value {
                Some(v) => sh.env(key, v),
                None => sh.env_remove(key),
            };
        }
        sh.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd = sh;
    }
    let (child, scheme, addr, stderr) = launch(cmd);
    Gateway {
        child,
        addr,
        scheme,
        _stderr: stderr,
        dir,
    }
}

/// `serve --bind 127.0.0.1:0` on `<root>/state` with `config` and the test token (no
/// failpoint inherited from the test's environment).
pub fn serve_command(root: &std::path::Path, config: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .env("SWITCHBOARD_STATE_DIR", root.join("state"))
        .env("SWITCHBOARD_CONFIG", config)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .env_remove("SWITCHBOARD_FAILPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Spawn a `serve` command and wait for its listening line: the child, its scheme and
/// `host:port` as printed, and its stderr lines (read on a thread so the pipe never fills).
pub fn launch(mut cmd: Command) -> (Child, String, String, mpsc::Receiver<String>) {
    let mut child = cmd.spawn().expect("spawn serve");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let (scheme, addr) = loop {
        let line = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no listening line; stderr so far: {seen:?}"));
        if let Some(rest) = line.split("listening on ").nth(1)
            && let Some((scheme, addr)) = rest.trim().split_once("://")
        {
            break (scheme.to_string(), addr.to_string());
        }
        seen.push(line);
    };
    (child, scheme, addr, rx)
}

/// A WebSocket to `url` (`ws://` or `wss://`) over a fresh TCP connection to `addr`.
pub async fn open_with(
    addr: &str,
    url: &str,
    connector: Option<Connector>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let tcp = TcpStream::connect(addr).await.expect("tcp connect");
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async_tls_with_config(url, tcp, None, connector),
    )
    .await
    .expect("handshake within the wait")?;
    Ok(ws)
}

pub async fn open(addr: &str) -> Ws {
    open_with(addr, &format!("ws://{addr}/"), None)
        .await
        .expect("ws handshake")
}

/// The next text frame as JSON, or `Err` with the close frame when the server closed.
pub async fn recv(ws: &mut Ws) -> Result<Value, Option<(CloseCode, String)>> {
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("server answers within the wait");
        match msg {
            Some(Ok(Message::Text(t))) => {
                return Ok(serde_json::from_str(t.as_str()).expect("server sends JSON"));
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(frame.map(|f| (f.code, f.reason.to_string())));
            }
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.expect("send");
}

/// The `connect` request OpenClaw's Python client sends, `device` included when given.
pub fn connect_req(token: &str, device: Option<Value>) -> Value {
    let mut params = json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "cli", "version": "0.1.0", "platform": "linux", "mode": "cli",
                   "displayName": "test"},
        "role": "operator", "scopes": scopes(),
        "auth": {"token": token}
    });
    if let Some(d) = device {
        params["device"] = d;
    }
    json!({"type": "req", "id": "c1", "method": "connect", "params": params})
}

pub fn scopes() -> Vec<String> {
    vec!["operator.admin".into(), "operator.read".into()]
}

/// The challenge's `(nonce, ts)`.
pub async fn challenge(ws: &mut Ws) -> (String, u64) {
    let c = recv(ws).await.expect("challenge");
    assert_eq!(c["event"], "connect.challenge", "{c}");
    let nonce = c["payload"]["nonce"].as_str().expect("nonce").to_string();
    let ts = c["payload"]["ts"].as_u64().expect("ts");
    (nonce, ts)
}
