//! Several `serve` nodes on one PostgreSQL database (issue 28): real processes (this build's
//! binary), each with a state folder of its own, and real WebSocket clients in this process.
//!
//! - fan-out: N clients subscribed to `sessions.changed`, spread over the nodes; one
//!   `sessions.patch` through the first node; the time from sending it to the last client
//!   (on every node) reading its event. Once with 3 nodes × 1,000 clients, once with one node
//!   × 3,000 (what a node more costs);
//! - acknowledged sends per second (`chat.send`, 16 connections) through 1 node and spread
//!   over 3, and each node's memory;
//! - failover: `kill -9` of a node inside an exchange, the time until a survivor has taken
//!   it over (its lease row gone, its runs closed), restarted, 50 times round the nodes; then
//!   every acknowledged message present once and no announce twice.
//!
//! Needs PostgreSQL's server programs (Debian's `postgresql`): a throwaway cluster is started
//! as the tests start theirs (fsync off: figures of the nodes, not of a disk). Run:
//! `cargo bench --bench nodes` (`NODES_KILLS=10` for a shorter failover run).

#[path = "support/serve_process.rs"]
mod serve_process;

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

type Ws = WebSocketStream<TcpStream>;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const TOKEN: &str = "bench-token-0123456789";

/// main asks work; work's reply round takes a while (a kill lands inside it), and its
/// announce says which job it was (counted for duplicates).
const CONFIG: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 1 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "message", text: "/^ask (\\S+) (.*)/" },
        tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2", timeoutSeconds: 0 } }],
        reply: "asked $1" },
      { when: { step: "reply" }, reply: "main hears: {{text}}" },
      { reply: "main got: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "message" }, delayMs: 1500, reply: "work: {{text}}" },
      { when: { step: "reply" }, delayMs: 1000, reply: "work again: {{text}}" },
      { when: { step: "announce" }, reply: "announce {{text}}" },
    ] },
  ] },
}"#;

/// A `serve` process on the shared database.
struct Node {
    child: Child,
    addr: String,
    root: std::path::PathBuf,
    url: String,
    extra: Vec<String>,
}

impl Node {
    fn start(root: &std::path::Path, url: &str, extra: &[&str]) -> Node {
        std::fs::create_dir_all(root).expect("node folder");
        let config = root.join("config.json5");
        std::fs::write(&config, CONFIG).expect("config");
        let mut child = Command::new(BIN)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .env("SWITCHBOARD_STATE_DIR", root.join("state"))
            .env("SWITCHBOARD_CONFIG", &config)
            .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
            .env("SWITCHBOARD_STORE", url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let addr = serve_process::listening_addr(&mut child);
        Node {
            child,
            addr,
            root: root.to_path_buf(),
            url: url.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.kill_hard();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        *self = Node::start(&self.root.clone(), &self.url.clone(), &extra);
    }

    /// Resident memory, in MiB.
    fn rss_mib(&self) -> f64 {
        serve_process::rss_mib(self.child.id())
    }

    /// The node's id: the name of the lock file its process holds in `instances/`.
    fn id(&self) -> Option<String> {
        std::fs::read_dir(self.root.join("state/instances"))
            .ok()?
            .flatten()
            .filter(|e| std::fs::File::open(e.path()).is_ok_and(|f| f.try_lock().is_err()))
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".lock")
                    .map(str::to_string)
            })
            .next()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        match ws.next().await.expect("socket open").expect("frame") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).expect("json"),
            _ => continue,
        }
    }
}

async fn connect(addr: &str) -> Ws {
    let tcp = TcpStream::connect(addr).await.expect("dial");
    tcp.set_nodelay(true).expect("nodelay");
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}"), tcp)
        .await
        .expect("upgrade");
    let challenge = next_json(&mut ws).await;
    assert_eq!(challenge["event"], "connect.challenge");
    let req = json!({"type":"req","id":"c","method":"connect","params":{
        "minProtocol":3,"maxProtocol":4,
        "client":{"id":"cli","version":"bench","platform":"linux","mode":"cli"},
        "role":"operator","scopes":["operator.read","operator.write","operator.admin"],
        "auth":{"token":TOKEN}}});
    ws.send(Message::text(req.to_string())).await.expect("send");
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["ok"], true, "{hello}");
    ws
}

async fn call(ws: &mut Ws, id: &str, method: &str, params: Value) -> Value {
    let req = json!({"type":"req","id":id,"method":method,"params":params});
    ws.send(Message::text(req.to_string())).await.expect("send");
    loop {
        let f = next_json(ws).await;
        if f["type"] == "res" && f["id"] == id {
            return f;
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `clients` subscribers spread over `nodes`; `rounds` patches through the first node; the
/// time from sending each patch to the last subscriber reading its event.
fn fan_out(rt: &Runtime, nodes: &[Node], clients: usize, rounds: usize) -> Vec<Duration> {
    const WAVE: usize = 25;
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut keep = Vec::new();
    for wave in (0..clients).step_by(WAVE) {
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(WAVE);
        let these = wave..(wave + WAVE).min(clients);
        let dialled = these.len();
        for i in these {
            let addr = nodes[i % nodes.len()].addr.clone();
            let (ready, got) = (ready_tx.clone(), got_tx.clone());
            keep.push(rt.spawn(async move {
                let mut ws = connect(&addr).await;
                call(&mut ws, &format!("s{i}"), "sessions.subscribe", json!({})).await;
                let _ = ready.send(()).await;
                while let Some(Ok(m)) = ws.next().await {
                    if let Message::Text(t) = m
                        && t.as_str().contains("\"sessions.changed\"")
                        && t.as_str().contains("agent:main:fanout")
                    {
                        let _ = got.send((i, Instant::now()));
                    }
                }
            }));
        }
        drop(ready_tx);
        rt.block_on(async {
            for _ in 0..dialled {
                ready_rx.recv().await.expect("client ready");
            }
        });
    }
    let mut times = Vec::new();
    rt.block_on(async {
        let mut publisher = connect(&nodes[0].addr).await;
        let made = call(
            &mut publisher,
            "m",
            "chat.send",
            json!({"sessionKey": "agent:main:fanout", "message": "hello",
                   "idempotencyKey": "fan-out-session"}),
        )
        .await;
        assert_eq!(made["ok"], true, "{made}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        while got_rx.try_recv().is_ok() {}
        for round in 0..rounds {
            let policy = if round % 2 == 0 {
                json!("deny")
            } else {
                Value::Null
            };
            let t0 = Instant::now();
            let patched = call(
                &mut publisher,
                &format!("p{round}"),
                "sessions.patch",
                json!({"key": "agent:main:fanout", "sendPolicy": policy}),
            )
            .await;
            assert_eq!(patched["ok"], true, "{patched}");
            let mut seen = vec![false; clients];
            let (mut left, mut last) = (clients, t0);
            while left > 0 {
                let (i, at) = tokio::time::timeout(Duration::from_secs(30), got_rx.recv())
                    .await
                    .expect("every client got the event")
                    .expect("channel");
                if !seen[i] {
                    seen[i] = true;
                    left -= 1;
                    last = last.max(at);
                }
            }
            times.push(last - t0);
            tokio::time::sleep(Duration::from_millis(300)).await;
            while got_rx.try_recv().is_ok() {}
        }
    });
    for task in keep {
        task.abort();
    }
    times.sort();
    times
}

/// Acknowledged `chat.send`s per second over 16 connections spread over `nodes`.
fn sends_per_second(rt: &Runtime, nodes: &[Node], total: usize) -> f64 {
    const CONNECTIONS: usize = 16;
    rt.block_on(async {
        let mut tasks = Vec::new();
        let started = Instant::now();
        for c in 0..CONNECTIONS {
            let addr = nodes[c % nodes.len()].addr.clone();
            tasks.push(tokio::spawn(async move {
                let mut ws = connect(&addr).await;
                for n in 0..total / CONNECTIONS {
                    let r = call(
                        &mut ws,
                        &format!("{c}-{n}"),
                        "chat.send",
                        json!({"sessionKey": format!("agent:main:load-{c}-{}", n % 8),
                               "message": format!("m{n}"),
                               "idempotencyKey": format!("load-{}-{c}-{n}", started.elapsed().as_nanos())}),
                    )
                    .await;
                    assert_eq!(r["ok"], true, "{r}");
                }
            }));
        }
        for t in tasks {
            t.await.expect("sender");
        }
        (total / CONNECTIONS * CONNECTIONS) as f64 / started.elapsed().as_secs_f64()
    })
}

/// One column of one row of `sql`.
fn one(cluster: &pg::Cluster, db: &str, sql: &str) -> String {
    cluster
        .rows(db, sql)
        .first()
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or_default()
}

/// `kills` times: an exchange through a node, that node killed inside it, the time until a
/// survivor took it over, the node restarted. Then the tally.
fn failover(rt: &Runtime, cluster: &pg::Cluster, url: &str, nodes: &mut [Node], kills: usize) {
    let db = pg::database_of(url).to_string();
    let mut times = Vec::new();
    let mut acknowledged = Vec::new();
    // The survivors judge others only after a lease of their own standing.
    std::thread::sleep(Duration::from_secs(6));
    for k in 0..kills {
        let v = k % nodes.len();
        let job = format!("job-{k}");
        let sent = rt.block_on(async {
            let mut ws = connect(&nodes[v].addr).await;
            call(
                &mut ws,
                "x",
                "chat.send",
                json!({"sessionKey": format!("agent:main:fo-{}", k % 5),
                       "message": format!("ask work {job}"),
                       "idempotencyKey": format!("failover-{k}")}),
            )
            .await
        });
        assert_eq!(sent["ok"], true, "{sent}");
        acknowledged.push((k % 5, format!("ask work {job}")));
        // Somewhere inside the exchange (work's turns take 1.5 s and 1 s).
        std::thread::sleep(Duration::from_millis(300 + (k as u64 * 397) % 2500));
        let id = nodes[v].id().expect("the node's id");
        nodes[v].kill_hard();
        let killed = Instant::now();
        loop {
            let gone = one(
                cluster,
                &db,
                &format!(
                    "SELECT (SELECT count(*) FROM nodes WHERE id = '{id}')
                          + (SELECT count(*) FROM runs WHERE owner = '{id}' AND status = 'running')
                          + (SELECT count(*) FROM flows WHERE owner = '{id}' AND status = 'running')"
                ),
            );
            if gone == "0" {
                break;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "never taken over"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        times.push(killed.elapsed());
        nodes[v].restart();
        // The restarted node stands a lease before it judges others; the others already do.
    }
    // Let the last exchanges finish.
    let settled = Instant::now();
    while one(
        cluster,
        &db,
        "SELECT (SELECT count(*) FROM runs WHERE status = 'running')
              + (SELECT count(*) FROM flows WHERE status = 'running')",
    ) != "0"
    {
        assert!(
            settled.elapsed() < Duration::from_secs(120),
            "work never settled"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut lost = 0;
    for (session, text) in &acknowledged {
        let n = one(
            cluster,
            &db,
            &format!(
                "SELECT count(*) FROM transcript t JOIN sessions s ON s.session_id = t.session_id
                 WHERE s.key = 'agent:main:fo-{session}' AND t.line LIKE '%{text}\"%'"
            ),
        );
        if n != "1" {
            lost += 1;
            eprintln!("{text} in agent:main:fo-{session}: {n} times");
        }
    }
    // Each exchange announces at most once: one announce run, one delivery.
    let duplicates = one(
        cluster,
        &db,
        "SELECT (SELECT count(*) FROM (SELECT flow_id FROM runs WHERE step = 'announce'
                  AND flow_id IS NOT NULL GROUP BY flow_id HAVING count(*) > 1) r)
              + (SELECT count(*) FROM (SELECT flow_id FROM outbox WHERE flow_id IS NOT NULL
                  GROUP BY flow_id HAVING count(*) > 1) o)",
    );
    let announced = one(
        cluster,
        &db,
        "SELECT count(*) FROM runs WHERE step = 'announce' AND status = 'ok'",
    );
    let outcomes = cluster.rows(
        &db,
        "SELECT status, count(*) FROM flows GROUP BY status ORDER BY status",
    );
    times.sort();
    println!(
        "nodes/failover  {kills} kills: taken over after median {:?}  p90 {:?}  max {:?}; \
         acknowledged messages missing or doubled: {lost}; announces made {announced}, \
         doubled {duplicates}; exchanges by outcome: {outcomes:?}",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        times[times.len() - 1],
    );
}

fn main() {
    let cluster = match pg::cluster() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nodes bench: no PostgreSQL ({e}); apt-get install postgresql");
            return;
        }
    };
    let rt = Runtime::new().expect("runtime");
    let root = tempfile::tempdir().expect("temp dir");
    let kills: usize = std::env::var("NODES_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);

    // One node, 3,000 clients.
    let url = pg::fresh_database(cluster);
    {
        let one_node = [Node::start(
            &root.path().join("solo"),
            &url,
            &["--max-connections", "3200"],
        )];
        let times = fan_out(&rt, &one_node, 3000, 15);
        println!(
            "nodes/fan_out 1 node x 3000 clients: median {:?}  p90 {:?}  max {:?}  (node RSS {:.0} MiB)",
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            times[times.len() - 1],
            one_node[0].rss_mib()
        );
        let rate = sends_per_second(&rt, &one_node, 4000);
        println!("nodes/sends 1 node: {rate:.0} acknowledged chat.send/s");
    }

    // Three nodes, 1,000 clients each, on a fresh database.
    let url = pg::fresh_database(cluster);
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| Node::start(&root.path().join(format!("n{i}")), &url, &[]))
        .collect();
    let times = fan_out(&rt, &nodes, 3000, 15);
    let rss: Vec<String> = nodes
        .iter()
        .map(|n| format!("{:.0}", n.rss_mib()))
        .collect();
    println!(
        "nodes/fan_out 3 nodes x 1000 clients: median {:?}  p90 {:?}  max {:?}  (node RSS {} MiB)",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        times[times.len() - 1],
        rss.join(" / ")
    );
    let rate = sends_per_second(&rt, &nodes, 4000);
    println!("nodes/sends 3 nodes: {rate:.0} acknowledged chat.send/s");
    let backends = one(
        cluster,
        pg::database_of(&url),
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
    );
    println!("nodes/database connections with 3 nodes: {backends}");

    failover(&rt, cluster, &url, &mut nodes, kills);
}
