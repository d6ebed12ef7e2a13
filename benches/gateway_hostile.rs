//! The gateway against hostile and unlucky clients (issue 23's figures), measured on a real
//! `switchboard serve` process (the release binary) on loopback:
//! 1. memory: 1,000 clients subscribed to everything that stop reading, plus 4 senders, for
//!    `HOSTILE_SECS` (default 60): idle, peak and after-they-leave RSS;
//! 2. log: a connect flood (failed handshakes, wrong tokens, 1 MB connect params) for
//!    `HOSTILE_SECS`: how much the log grew;
//! 3. CPU after a lagged client is closed: a client pipelines heavy reads and never reads;
//!    how long until the process is idle again;
//! 4. SIGTERM with stuck clients: how long until the process exits.
//!
//! Run: `cargo bench --bench gateway_hostile` (`HOSTILE_SECS=10` for a quick look).

#[path = "support/serve_process.rs"]
mod serve_process;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

type Ws = WebSocketStream<TcpStream>;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const TOKEN: &str = "bench-token-0123456789";

struct Serve {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve() -> Serve {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(
        &config,
        r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
             script: [ { reply: "re: {{text}}" } ] } ] } }"#,
    )
    .expect("config");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--max-connections",
            "4000",
        ])
        .env("SWITCHBOARD_STATE_DIR", dir.path().join("state"))
        .env("SWITCHBOARD_CONFIG", &config)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let addr = serve_process::listening_addr(&mut child);
    Serve { child, addr, dir }
}

/// CPU time (user + system) of `pid` so far, in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn log_bytes(s: &Serve) -> u64 {
    let dir = s.dir.path().join("state").join("logs");
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

async fn next_json(ws: &mut Ws) -> Option<Value> {
    loop {
        match ws.next().await? {
            Ok(Message::Text(t)) => return serde_json::from_str(t.as_str()).ok(),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
}

async fn connect(addr: &str, token: &str) -> Option<Ws> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}"), tcp)
        .await
        .ok()?;
    next_json(&mut ws).await?;
    let req = json!({"type":"req","id":"c","method":"connect","params":{
        "minProtocol":3,"maxProtocol":4,
        "client":{"id":"cli","version":"bench","platform":"linux","mode":"cli"},
        "role":"operator","scopes":["operator.read","operator.write","operator.admin"],
        "caps": ["switchboard.v1"], "auth":{"token":token}}});
    ws.send(Message::text(req.to_string())).await.ok()?;
    let hello = next_json(&mut ws).await?;
    (hello["ok"] == true).then_some(ws)
}

async fn request(ws: &mut Ws, id: &str, method: &str, params: Value) -> Option<Value> {
    let req = json!({"type":"req","id":id,"method":method,"params":params});
    ws.send(Message::text(req.to_string())).await.ok()?;
    loop {
        let frame = next_json(ws).await?;
        if frame["type"] == "res" && frame["id"] == id {
            return Some(frame);
        }
    }
}

/// 4 senders, each `chat.send`ing 16 KiB messages into its session until `until`; the
/// number of sends answered.
async fn senders(addr: &str, until: Instant) -> usize {
    let mut senders = tokio::task::JoinSet::new();
    for k in 0..4 {
        let addr = addr.to_string();
        senders.spawn(async move {
            let Some(mut ws) = connect(&addr, TOKEN).await else {
                return 0;
            };
            let text = "y".repeat(16 * 1024);
            let mut sent = 0;
            while Instant::now() < until {
                let key = format!("agent:main:load{k}");
                let params = json!({"sessionKey": key, "message": text});
                if request(&mut ws, &format!("x{sent}"), "chat.send", params)
                    .await
                    .is_none()
                {
                    break;
                }
                sent += 1;
            }
            sent
        });
    }
    let mut sends = 0;
    while let Some(n) = senders.join_next().await {
        sends += n.unwrap_or(0);
    }
    sends
}

/// 1,000 clients subscribed to everything that stop reading, 4 senders for `secs`. Idle is
/// measured after a 10 s warm-up of the same senders alone (the database's page cache and
/// the engine's caches fill to their bounds then), so "after" compares like with like.
async fn memory(secs: u64) {
    let s = serve();
    let pid = s.child.id();
    let cold = serve_process::rss_mib(pid);
    senders(&s.addr, Instant::now() + Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = serve_process::rss_mib(pid);
    let mut readers = Vec::new();
    for _ in 0..1000 {
        let Some(mut ws) = connect(&s.addr, TOKEN).await else {
            continue;
        };
        let _ = request(&mut ws, "s", "switchboard.subscribe", json!({})).await;
        let _ = request(&mut ws, "o", "sessions.subscribe", json!({})).await;
        for k in 0..4 {
            let key = format!("agent:main:load{k}");
            let _ = request(
                &mut ws,
                "m",
                "sessions.messages.subscribe",
                json!({"key": key}),
            )
            .await;
        }
        readers.push(ws); // never read again
    }
    let connected = readers.len();
    let until = Instant::now() + Duration::from_secs(secs);
    let load = tokio::spawn({
        let addr = s.addr.clone();
        async move { senders(&addr, until).await }
    });
    let mut peak = idle;
    while Instant::now() < until {
        peak = peak.max(serve_process::rss_mib(pid));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let sends = load.await.unwrap_or(0);
    peak = peak.max(serve_process::rss_mib(pid));
    drop(readers);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = serve_process::rss_mib(pid);
    println!(
        "memory: {connected} non-reading subscribers + 4 senders ({sends} sends of 16 KiB) for \
         {secs} s: RSS cold {cold:.0} MB, idle after warm-up {idle:.0} MB, peak {peak:.0} MB, \
         5 s after they left {after:.0} MB ({:+.0} % of idle)",
        (after - idle) / idle * 100.0
    );
}

/// A connect flood for `secs`: how much the log grows.
async fn log_flood(secs: u64) {
    let s = serve();
    let before = log_bytes(&s);
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..12 {
        let addr = s.addr.clone();
        tasks.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                match t % 3 {
                    0 => {
                        if let Ok(mut tcp) = TcpStream::connect(&addr).await {
                            let _ = tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
                        }
                    }
                    1 => {
                        let _ = connect(&addr, "wrong-token").await;
                    }
                    _ => {
                        let Ok(tcp) = TcpStream::connect(&addr).await else {
                            continue;
                        };
                        let Ok((mut ws, _)) =
                            tokio_tungstenite::client_async(format!("ws://{addr}"), tcp).await
                        else {
                            continue;
                        };
                        let _ = next_json(&mut ws).await;
                        let req = json!({"type":"req","id":"c","method":"connect","params":{
                            "minProtocol": "A".repeat(1_000_000), "maxProtocol": 4}});
                        let _ = ws.send(Message::text(req.to_string())).await;
                        let _ = next_json(&mut ws).await;
                    }
                }
            }
            n
        });
    }
    let mut attempts = 0;
    while let Some(n) = tasks.join_next().await {
        attempts += n.unwrap_or(0);
    }
    let grown = log_bytes(&s).saturating_sub(before);
    println!(
        "log: {attempts} hostile connects in {secs} s grew the log by {:.2} MB",
        grown as f64 / 1e6
    );
}

/// Heavy sessions, then a client that pipelines reads and never reads: how long the
/// process stays busy after the client is ended as lagged.
async fn lagged_cpu() {
    let s = serve();
    let pid = s.child.id();
    let mut w = connect(&s.addr, TOKEN).await.expect("writer");
    let big = "x".repeat(1_000_000);
    for i in 0..40 {
        let params = json!({"sessionKey": format!("agent:main:big{}", i % 20), "message": big});
        request(&mut w, &format!("b{i}"), "chat.send", params)
            .await
            .expect("send");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut hog = connect(&s.addr, TOKEN).await.expect("hog");
    let started = Instant::now();
    let feeding = tokio::spawn(async move {
        for i in 0..100_000 {
            let req = json!({"type":"req","id":format!("h{i}"),"method":"chat.history",
                             "params":{"sessionKey": format!("agent:main:big{}", i % 20)}});
            if hog.feed(Message::text(req.to_string())).await.is_err() {
                break;
            }
        }
        let _ = hog.flush().await;
    });
    // Wait for the lag verdict in the log, then watch the CPU in 250 ms windows.
    let log = s.dir.path().join("state/logs/switchboard.log");
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("lagged")
    {
        if started.elapsed() > Duration::from_secs(120) {
            println!("lagged: no lag verdict in 120 s");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let verdict = Instant::now();
    let idle_at = loop {
        let a = cpu_s(pid);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let busy = (cpu_s(pid) - a) / 0.25;
        if busy < 0.05 {
            break verdict.elapsed();
        }
        if verdict.elapsed() > Duration::from_secs(600) {
            break verdict.elapsed();
        }
    };
    feeding.abort();
    println!(
        "lagged: a client pipelining 100,000 history reads of 2 MB sessions is ended; the \
         process is idle (< 5 % of a core) {:.2} s after the lag verdict",
        idle_at.as_secs_f64()
    );
}

/// SIGTERM with clients that stopped reading and have full queues.
async fn sigterm() {
    let mut s = serve();
    let pid = s.child.id();
    let mut w = connect(&s.addr, TOKEN).await.expect("writer");
    let big = "z".repeat(500_000);
    let mut stuck = Vec::new();
    // Five clients with ~20 MB each sent their way (the kernel's socket buffers take some):
    // within both budgets, so none is ended as lagged and all are stuck when the signal comes.
    for _ in 0..5 {
        if let Some(mut ws) = connect(&s.addr, TOKEN).await {
            let _ = request(
                &mut ws,
                "o",
                "sessions.messages.subscribe",
                json!({"key": "agent:main:stuck"}),
            )
            .await;
            stuck.push(ws);
        }
    }
    for i in 0..20 {
        let params = json!({"sessionKey": "agent:main:stuck", "message": big});
        let _ = request(&mut w, &format!("t{i}"), "chat.send", params).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = request(&mut w, "st", "status", json!({}))
        .await
        .unwrap_or_default();
    let held = held["payload"]["gateway"].clone();
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let t = Instant::now();
    loop {
        if let Ok(Some(_)) = s.child.try_wait() {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "sigterm: {} stuck clients (gateway holding {held}); SIGTERM to exit {:.2} s",
        stuck.len(),
        t.elapsed().as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument names the parts to run.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    let secs: u64 = std::env::var("HOSTILE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        if wants("memory") {
            memory(secs).await;
        }
        if wants("log") {
            log_flood(secs).await;
        }
        if wants("lagged") {
            lagged_cpu().await;
        }
        if wants("sigterm") {
            sigterm().await;
        }
    });
}
