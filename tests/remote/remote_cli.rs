//! The command line over `--connect`: a real `switchboard serve` process and the real
//! binary as its client. Commands that use the API behave as they do locally; commands that
//! need a local state folder say so (exit 2); an unreachable or refusing gateway is a clear
//! error (exit 1), at once.

use crate::common;
use crate::gateway_process;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use gateway_process::bounded;
use serde_json::Value;
use switchboard_types::api::{
    AgentInfo, ApiError, EventStream, KeyPurpose, PatchRequest, PatchResult, PolicySetting,
    ResolvedKey, RunResult, SendReceipt, SendRequest, Sender, SessionDetail, SessionsApi,
    SessionsPage, SessionsQuery, Status, ToolCall, ToolResult, TranscriptPage, TranscriptQuery,
    WorkId,
};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const WAIT: Duration = Duration::from_secs(60);
const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;

/// A running `serve` on a free port, its state folder holding the generated token.
struct Gateway {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    _stderr: mpsc::Receiver<String>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Gateway {
    start_with(|_| Vec::new())
}

/// `start`, with more `serve` arguments, made from the gateway's temporary folder.
fn start_with(extra: impl FnOnce(&std::path::Path) -> Vec<String>) -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json5"), CONFIG).expect("config");
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .args(extra(dir.path()))
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", dir.path().join("config.json5"))
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
    Gateway {
        child,
        url,
        dir,
        _stderr: rx,
    }
}

impl Gateway {
    /// The binary with `--connect`, from a folder of its own (no local state), with the
    /// token given as `token` (None: none at all).
    fn client(&self, token: Option<&str>, args: &[&str]) -> Output {
        let elsewhere = self.dir.path().join("client");
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(&elsewhere)
            .args(["--connect", &self.url])
            .args(args)
            .env_remove("SWITCHBOARD_STATE_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
            .stdin(Stdio::null());
        if let Some(t) = token {
            c.env("SWITCHBOARD_GATEWAY_TOKEN", t);
        }
        bounded(c)
    }

    /// `client`, dialling `url` instead, with `before` given ahead of the command.
    fn client_at(&self, url: &str, before: &[&str], args: &[&str]) -> Output {
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(self.dir.path().join("client"))
            .args(["--connect", url])
            .args(before)
            .args(args)
            .env_remove("SWITCHBOARD_STATE_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .env("SWITCHBOARD_GATEWAY_TOKEN", self.token())
            .stdin(Stdio::null());
        bounded(c)
    }

    fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state").join("gateway-token"))
            .expect("serve generated a token")
            .trim()
            .to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn commands_run_on_the_gateways_engine() {
    let g = start();
    let t = g.token();
    let token = Some(t.as_str());
    let reply = ok(&g.client(
        token,
        &[
            "inject",
            "agent:main:main",
            "hello",
            "--channel",
            "telegram",
        ],
    ));
    assert_eq!(reply.trim(), "re: hello");

    let rows: Value =
        serde_json::from_str(&ok(&g.client(token, &["sessions", "list", "--json"]))).expect("json");
    let keys: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert_eq!(keys, ["agent:main:main"]);

    ok(&g.client(
        token,
        &["sessions", "patch", "main", "--send-policy", "off"],
    ));
    let shown: Value = serde_json::from_str(&ok(
        &g.client(token, &["sessions", "show", "agent:main:main", "--json"])
    ))
    .expect("json");
    assert_eq!(shown["sendPolicyEffective"]["policy"], "deny", "{shown}");
    let texts: Vec<String> = shown["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert!(texts.iter().any(|m| m.contains("re: hello")), "{texts:?}");

    let history: Value = serde_json::from_str(&ok(&g.client(
        token,
        &["tool", "sessions_history", r#"{"sessionKey": "main"}"#],
    )))
    .expect("json");
    assert!(history.to_string().contains("re: hello"), "{history}");

    // Bad input is still exit 2 through the gateway.
    let unknown = g.client(token, &["tool", "no_such_tool"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert!(text(&unknown.stderr).contains("unknown tool"));
}

#[test]
fn local_only_commands_say_so() {
    let g = start();
    let t = g.token();
    for args in [
        &["sessions", "export", "main"][..],
        &["config", "check"][..],
        &["import-openclaw", "/nonexistent"][..],
        &["demo"][..],
        &["serve"][..],
    ] {
        let out = g.client(Some(&t), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("works on a local state folder only"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_refusing_or_missing_gateway_is_a_clear_error() {
    let g = start();
    let wrong = g.client(Some("not-the-token"), &["sessions", "list"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        text(&wrong.stderr).contains("unauthorized"),
        "{}",
        text(&wrong.stderr)
    );
    let none = g.client(None, &["sessions", "list"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        text(&none.stderr).contains("Pass --token"),
        "{}",
        text(&none.stderr)
    );

    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let mut c = Command::new(BIN);
    c.args(["--connect", &format!("ws://{free}"), "sessions", "list"])
        .env("SWITCHBOARD_GATEWAY_TOKEN", "some-token");
    let gone = bounded(c);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        text(&gone.stderr).contains("cannot reach"),
        "{}",
        text(&gone.stderr)
    );
}

#[test]
fn a_loopback_gateway_token_is_read_from_the_state_folder() {
    let g = start();
    let mut c = Command::new(BIN);
    c.arg("--state-dir")
        .arg(g.dir.path().join("state"))
        .args(["--connect", &g.url, "sessions", "list", "--json"])
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .env_remove("SWITCHBOARD_STATE_DIR");
    let out = bounded(c);
    assert_eq!(ok(&out).trim(), "[]");
}

/// An engine's API that counts the page and per-session calls made on it.
struct Counting {
    inner: std::sync::Arc<dyn switchboard_types::api::SessionsApi>,
    pages: AtomicU64,
    details: AtomicU64,
}

#[async_trait::async_trait]
impl SessionsApi for Counting {
    async fn status(&self) -> Result<Status, ApiError> {
        self.inner.status().await
    }
    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        self.pages.fetch_add(1, Ordering::SeqCst);
        self.inner.sessions(query).await
    }
    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        self.details.fetch_add(1, Ordering::SeqCst);
        self.inner.session(key).await
    }
    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        self.inner.transcript(query).await
    }
    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        self.inner.resolve_key(raw, purpose).await
    }
    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        self.inner.send(request).await
    }
    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        self.inner.wait_run(run_id, limit).await
    }
    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        self.inner.wait_work(work, limit).await
    }
    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        self.inner.still_running(work).await
    }
    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
        self.inner.call_tool(call).await
    }
    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        self.inner.patch(request).await
    }
    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        self.inner.delete(key).await
    }
    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        self.inner.agents().await
    }
    fn subscribe(&self) -> EventStream {
        self.inner.subscribe()
    }
}

/// `sessions list` over a slow link must not pay one round trip per row: the page itself
/// carries what the list prints. Counted at the gateway's API (an in-process `server::run`
/// over a real engine, dialled by the real binary); the printed rows are the owner's
/// `sessions_list` entries with their effective policy, as the per-row lookups gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_list_is_one_request_per_page() {
    const TOKEN: &str = "counting-token";
    let b = common::bench(serde_json::json!({
        "agents": { "list": [ { "id": "main", "default": true, "model": "scripted",
            "script": [ { "reply": "ok" } ] } ] },
    }));
    let local = b.engine.start();
    let keys = [
        "agent:main:main",
        "agent:main:telegram:group:42",
        "agent:main:dm-1",
        "cron:nightly",
    ];
    for key in keys {
        local
            .send(SendRequest {
                key: key.into(),
                text: "hello".into(),
                from: Sender::owner(),
                idempotency_key: None,
            })
            .await
            .expect("send");
    }
    local
        .patch(PatchRequest {
            key: "agent:main:dm-1".into(),
            send_policy: Some(PolicySetting::Deny),
        })
        .await
        .expect("patch");
    tokio::time::timeout(WAIT, b.engine.idle())
        .await
        .expect("idle");

    // What each row printed before: the owner's entry with its effective policy.
    let page = local
        .sessions(SessionsQuery {
            limit: 50,
            ..SessionsQuery::default()
        })
        .await
        .expect("page");
    let mut expected = Vec::new();
    for row in &page.rows {
        let d = local
            .session(&row.key)
            .await
            .expect("detail")
            .expect("exists");
        let mut v = d.entry;
        v["sendPolicyEffective"] = d.row.policy.to_json();
        expected.push(v);
    }
    assert_eq!(expected.len(), keys.len());

    let counting = Arc::new(Counting {
        inner: local.clone(),
        pages: AtomicU64::new(0),
        details: AtomicU64::new(0),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api: Arc<dyn SessionsApi> = counting.clone();
    tokio::spawn(switchboard_server::run(
        listener,
        api,
        switchboard_server::Options::new(TOKEN.into()),
        async move {
            let _ = stopped.await;
        },
    ));
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let client = |args: &'static [&'static str]| {
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(elsewhere.path())
            .args(["--connect", &url])
            .args(args)
            .env_remove("SWITCHBOARD_STATE_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
            .stdin(Stdio::null());
        c
    };

    let json = client(&["sessions", "list", "--json"]);
    let out = tokio::task::spawn_blocking(move || bounded(json))
        .await
        .expect("join");
    let printed: Value = serde_json::from_str(&ok(&out)).expect("json");
    assert_eq!(printed, Value::Array(expected));
    assert_eq!(counting.pages.load(Ordering::SeqCst), 1, "one page asked");
    assert_eq!(
        counting.details.load(Ordering::SeqCst),
        0,
        "no request per row"
    );

    let table = client(&["sessions", "list"]);
    let out = tokio::task::spawn_blocking(move || bounded(table))
        .await
        .expect("join");
    let printed = ok(&out);
    for key in keys {
        assert!(printed.contains(key), "{key} listed: {printed}");
    }
    assert!(
        printed
            .lines()
            .any(|l| l.contains("agent:main:dm-1") && l.contains("deny*")),
        "the override shows: {printed}"
    );
    assert_eq!(counting.pages.load(Ordering::SeqCst), 2);
    assert_eq!(counting.details.load(Ordering::SeqCst), 0);
    let _ = stop.send(());
}

/// `--connect wss://localhost:PORT --tls-ca cert.pem` against `serve --tls-cert --tls-key`
/// (a self-signed certificate for "localhost"): commands work; without `--tls-ca` the
/// certificate is not trusted, and the command says so (exit 1) instead of hanging.
#[test]
fn wss_with_the_gateways_certificate_works_and_without_it_is_a_clear_error() {
    let g = start_with(|dir| {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        std::fs::write(dir.join("cert.pem"), made.cert.pem()).expect("write cert");
        std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).expect("key");
        ["--tls-cert", "cert.pem", "--tls-key", "key.pem"]
            .iter()
            .map(|a| match *a {
                "cert.pem" | "key.pem" => dir.join(a).display().to_string(),
                other => other.to_string(),
            })
            .collect()
    });
    assert!(
        g.url.starts_with("wss://"),
        "serve announces wss://: {}",
        g.url
    );
    let port = g
        .url
        .rsplit(':')
        .next()
        .expect("port")
        .trim_end_matches('/');
    let url = format!("wss://localhost:{port}");
    let ca = g.dir.path().join("cert.pem");
    let ca = ca.to_str().expect("utf8");

    let reply = ok(&g.client_at(
        &url,
        &["--tls-ca", ca],
        &["inject", "agent:main:main", "hello over tls"],
    ));
    assert_eq!(reply.trim(), "re: hello over tls");
    let listed = ok(&g.client_at(&url, &["--tls-ca", ca], &["sessions", "list"]));
    assert!(listed.contains("agent:main:main"), "{listed}");

    let untrusted = g.client_at(&url, &[], &["sessions", "list"]);
    assert_eq!(
        untrusted.status.code(),
        Some(1),
        "{}",
        text(&untrusted.stderr)
    );
    let err = text(&untrusted.stderr);
    assert!(err.contains("certificate"), "names the certificate: {err}");
    assert!(err.contains("--tls-ca"), "says how to trust it: {err}");
    assert!(
        !err.contains("is `switchboard serve` running"),
        "not mistaken for an absent gateway: {err}"
    );
    assert!(untrusted.stdout.is_empty(), "{}", text(&untrusted.stdout));
}
