//! Several `serve` nodes on one PostgreSQL database, each with a state folder of its own (as
//! on separate hosts), issue 28 item 2: a send through one is read and its events are seen
//! through another; a node `kill -9`ed mid-exchange is taken over by exactly one survivor
//! once its lease runs out (the exchange ends `interrupted` once, its run closed once, its
//! lane free again); a node paused past its lease is fenced when it comes back (its late
//! reply is refused, and it stops); clients fail over.

use crate::common::pg;
use crate::gateway_process::{self, Launched, TOKEN, call};

use std::sync::Arc;
use std::time::Duration;

use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::{EngineEvent, SessionsApi, Step, StreamItem};

/// main asks work; work's reply round is slow, so a node can die (or stop) inside it.
const CONFIG: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 2 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "message", text: "/^ask (\\S+) (.*)/" },
        tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2" } }],
        reply: "asked $1" },
      { when: { step: "reply" }, reply: "main hears: {{text}}" },
      { reply: "main got: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "reply", text: "slow" }, delayMs: 8000, reply: "work slowly: {{text}}" },
      { when: { step: "message" }, reply: "work: {{text}}" },
      { when: { step: "reply" }, reply: "work again: {{text}}" },
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
    ] },
  ] },
}"#;

/// Generous: a take-over comes a lease (5 s) after the death, plus a look (1 s), plus the
/// survivor's own first lease of standing.
const HANG: Duration = Duration::from_secs(60);

/// One node: its own folder (state, config), the shared database.
struct Node {
    _root: tempfile::TempDir,
    serve: Launched,
}

impl Node {
    fn start(url: &str) -> Node {
        Node::start_with(url, &[])
    }

    fn start_with(url: &str, extra: &[&str]) -> Node {
        Node::start_config(url, CONFIG, extra)
    }

    fn start_config(url: &str, config_text: &str, extra: &[&str]) -> Node {
        let root = tempfile::tempdir().expect("temp dir");
        let config = root.path().join("config.json5");
        std::fs::write(&config, config_text).expect("config");
        let mut cmd = gateway_process::serve_command(root.path(), &config);
        cmd.args(extra).env("SWITCHBOARD_STORE", url);
        Node {
            serve: gateway_process::launch(cmd),
            _root: root,
        }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.serve.addr)
    }

    /// A new `serve` on this node's folder (after a kill).
    fn restart(&mut self, url: &str) {
        let config = self._root.path().join("config.json5");
        let mut cmd = gateway_process::serve_command(self._root.path(), &config);
        cmd.env("SWITCHBOARD_STORE", url);
        self.serve = gateway_process::launch(cmd);
    }

    /// The lock files in this node's `instances/`.
    fn lock_files(&self) -> Vec<String> {
        std::fs::read_dir(self._root.path().join("state/instances"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn kill_hard(&mut self) {
        let _ = self.serve.child.kill();
        let _ = self.serve.child.wait();
    }

    fn signal(&self, name: &str) {
        let pid = self.serve.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args([name, &pid])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "kill {name} {pid}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

async fn attach(target: String) -> (Arc<Link>, Arc<dyn SessionsApi>) {
    let mut options = LinkOptions::new(target, Some(TOKEN.into()));
    options.ping_every = Duration::from_millis(200);
    let link = Arc::new(Link::connect(options).await.expect("attached"));
    let api: Arc<dyn SessionsApi> = RemoteApi::new(link.clone());
    (link, api)
}

/// Wait for the first event `pick` accepts.
async fn wait_event<T>(
    events: &mut switchboard_types::api::EventStream,
    mut pick: impl FnMut(&EngineEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(HANG, async {
        loop {
            match events.next().await {
                StreamItem::Event(e) => {
                    if let Some(found) = pick(&e.event) {
                        return found;
                    }
                }
                StreamItem::Missed(_) => {}
                StreamItem::Closed => panic!("the event stream closed"),
            }
        }
    })
    .await
    .expect("the event in time")
}

/// The database's answer to `sql`, one row of one column.
fn one(cluster: &pg::Cluster, url: &str, sql: &str) -> String {
    let rows = cluster.rows(pg::database_of(url), sql);
    rows.first()
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or_default()
}

/// Until `sql` answers `want` (bounded by `HANG`).
async fn until(cluster: &pg::Cluster, url: &str, sql: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let got = one(cluster, url, sql);
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{sql}: {got}, waited for {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The slow reply run of `work` has started (seen through `events`, a stream on another
/// node than the one running it: relayed across nodes). Its run id.
async fn slow_reply_started(events: &mut switchboard_types::api::EventStream) -> String {
    wait_event(events, |e| match e {
        EngineEvent::RunStarted {
            run_id, key, step, ..
        } if key == "agent:work:main" && *step == Step::Reply => Some(run_id.clone()),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_one_database_and_a_dead_nodes_exchange_ends_once_on_a_survivor() {
    let Some(cluster) = pg::cluster_or_skip("three_nodes_share_one_database") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let mut a = Node::start(&url);
    let b = Node::start(&url);
    let c = Node::start(&url);

    // A client on a and b (failing over), an observer on b, a third on c.
    let (link, via_a) = attach(format!("{},{}", a.url(), b.url())).await;
    let (_b_link, on_b) = attach(b.url()).await;
    let (_c_link, on_c) = attach(c.url()).await;
    let mut b_events = on_b.subscribe();

    // Written through a, read through c.
    let r = via_a
        .send(crate::common::owner("agent:work:main", "hello from a"))
        .await
        .expect("send through a");
    assert!(via_a.wait_work(r.work, HANG).await.expect("work"));
    let seen_on_c = crate::common::transcript_texts(on_c.as_ref(), "agent:work:main").await;
    assert!(
        seen_on_c.iter().any(|t| t == "work: hello from a"),
        "{seen_on_c:?}"
    );

    // An exchange through a; b's subscribers see its runs as they start.
    via_a
        .send(crate::common::owner("agent:main:main", "ask work slow job"))
        .await
        .expect("send the exchange through a");
    let slow = slow_reply_started(&mut b_events).await;

    // a dies inside work's reply round.
    let mut state = via_a.link().expect("a link").state;
    a.kill_hard();
    // The client moves to b.
    crate::remote_failover::until_resynced(&mut state).await;
    assert_eq!(
        switchboard_remote::rpc::Rpc::target(link.as_ref()),
        b.url(),
        "on b now"
    );

    // A survivor takes a over once its lease has run out: b's subscribers hear of it
    // (from b itself, or relayed from c).
    let recovered = wait_event(&mut b_events, |e| match e {
        EngineEvent::Recovered { runs, exchanges } if runs.contains(&slow) => {
            Some(exchanges.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(recovered.len(), 1, "the exchange a ran: {recovered:?}");
    let db = |sql: &str| one(cluster, &url, sql);
    assert_eq!(
        db("SELECT count(*) FROM runs WHERE status = 'running'"),
        "0"
    );
    assert_eq!(
        db(&format!(
            "SELECT status FROM flows WHERE flow_id = '{}'",
            recovered[0]
        )),
        "interrupted"
    );
    assert_eq!(
        db(&format!(
            "SELECT status || ':' || coalesce(error, '') FROM runs WHERE run_id = '{slow}'"
        )),
        format!("error:{}", switchboard_store::line::INTERRUPTED)
    );
    // a is forgotten; b and c stand.
    assert_eq!(db("SELECT count(*) FROM nodes"), "2");
    // a started again on its folder: a new node, and the dead one's lock file gone (another
    // node took it over, so only a's own folder could remove it).
    assert_eq!(a.lock_files().len(), 1, "{:?}", a.lock_files());
    a.restart(&url);
    assert_eq!(a.lock_files().len(), 1, "{:?}", a.lock_files());
    assert_eq!(db("SELECT count(*) FROM nodes"), "3");

    // The lane a held is free: a send into work through c runs now.
    let r = on_c
        .send(crate::common::owner(
            "agent:work:main",
            "after the take-over",
        ))
        .await
        .expect("send through c");
    assert!(on_c.wait_work(r.work, HANG).await.expect("work"));
    // And through the failed-over client.
    let r = via_a
        .send(crate::common::owner("agent:work:main", "through b now"))
        .await
        .expect("send after the failover");
    assert!(via_a.wait_work(r.work, HANG).await.expect("work"));

    // Exactly once: one interruption line, no late reply, nothing lost.
    let lines = crate::common::transcript_texts(on_b.as_ref(), "agent:work:main").await;
    let interrupted = lines
        .iter()
        .filter(|t| t.contains("engine stopped"))
        .count();
    assert_eq!(interrupted, 1, "{lines:?}");
    assert!(
        !lines.iter().any(|t| t.starts_with("work slowly")),
        "{lines:?}"
    );
    for want in [
        "hello from a",
        "work: hello from a",
        "after the take-over",
        "work: after the take-over",
        "through b now",
        "work: through b now",
    ] {
        assert_eq!(
            lines.iter().filter(|t| *t == want).count(),
            1,
            "{want}: {lines:?}"
        );
    }
    // `store check` shows the three leases that stand, nothing stale.
    let check = std::process::Command::new(gateway_process::BIN)
        .args(["store", "check", "--json"])
        .env("SWITCHBOARD_STORE", &url)
        .env("SWITCHBOARD_STATE_DIR", b._root.path().join("state"))
        .output()
        .expect("store check");
    assert!(check.status.success(), "{check:?}");
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).expect("json");
    let leases = &report["leases"];
    assert_eq!(
        leases["nodes"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    assert!(
        leases["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|n| n["expiresInMs"].as_i64().is_some_and(|ms| ms > 0)),
        "{report}"
    );
    assert_eq!(leases["staleLanes"], 0, "{report}");
    assert_eq!(leases["ownerlessRuns"], 0, "{report}");
    // No second Recovered for that run, whoever looks next.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        db(&format!(
            "SELECT count(*) FROM runs WHERE run_id = '{slow}' AND status = 'error'"
        )),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_past_its_lease_is_fenced_and_stops() {
    let Some(cluster) = pg::cluster_or_skip("a_node_paused_past_its_lease_is_fenced") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let mut a = Node::start(&url);
    let b = Node::start(&url);
    let (_a_link, on_a) = attach(a.url()).await;
    let (_b_link, on_b) = attach(b.url()).await;
    let mut b_events = on_b.subscribe();
    on_a.send(crate::common::owner("agent:main:main", "ask work slow job"))
        .await
        .expect("send the exchange through a");
    let slow = slow_reply_started(&mut b_events).await;

    // a stops answering (a long pause, a cut-off) past its lease: b takes it over.
    a.signal("-STOP");
    until(
        cluster,
        &url,
        &format!("SELECT status FROM runs WHERE run_id = '{slow}'"),
        "error",
    )
    .await;
    // a comes back, its slow reply now due: refused, and a stops.
    a.signal("-CONT");
    let status = tokio::time::timeout(HANG, async {
        loop {
            if let Some(status) = a.serve.child.try_wait().expect("wait") {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("a stops once it finds its lease lost");
    assert!(!status.success(), "{status:?}");
    let said: Vec<String> = a.serve.stderr.try_iter().collect();
    assert!(
        said.iter().any(|l| l.contains("lost its lease")),
        "{said:?}"
    );
    let lines = crate::common::transcript_texts(on_b.as_ref(), "agent:work:main").await;
    assert!(
        !lines.iter().any(|t| t.starts_with("work slowly")),
        "the fenced node's late reply was written: {lines:?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|t| t.contains("engine stopped"))
            .count(),
        1,
        "{lines:?}"
    );
}

/// A wrong-token connect to `addr`; the refusal's message.
async fn refused(addr: &str) -> String {
    use crate::common::ws::{recv, send};
    let mut ws = gateway_process::open(addr).await;
    recv(&mut ws).await.expect("challenge");
    send(&mut ws, gateway_process::connect_req("wrong", None)).await;
    let answer = recv(&mut ws).await.expect("an answer");
    assert_eq!(answer["ok"], false, "{answer}");
    answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The failed-connect count is the database's: a guesser spreading its tries over two nodes
/// meets the limit (5 an address a minute) as on one; each node alone saw only 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_connects_are_counted_across_nodes() {
    let Some(cluster) = pg::cluster_or_skip("failed_connects_are_counted_across_nodes") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let a = Node::start(&url);
    let b = Node::start(&url);
    for addr in [
        &a.serve.addr,
        &b.serve.addr,
        &a.serve.addr,
        &b.serve.addr,
        &a.serve.addr,
    ] {
        let message = refused(addr).await;
        assert!(message.contains("unauthorized"), "{message}");
    }
    let message = refused(&b.serve.addr).await;
    assert!(
        message.starts_with("too many failed attempts; retry in "),
        "b saw 3 failures but the nodes together 6: {message}"
    );
    // The right token still gets in.
    let (_link, api) = attach(b.url()).await;
    api.status().await.expect("the owner is admitted");
}

/// An idempotency key is the database's: a retry through another node records nothing more
/// and gets the first send's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_is_honoured_by_every_node() {
    let Some(cluster) = pg::cluster_or_skip("an_idempotency_key_is_honoured_by_every_node") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let a = Node::start(&url);
    let b = Node::start(&url);
    let (_a_link, on_a) = attach(a.url()).await;
    let (_b_link, on_b) = attach(b.url()).await;
    let mut send = crate::common::owner("agent:work:main", "once only");
    send.idempotency_key = Some("retry-7".into());
    let first = on_a.send(send.clone()).await.expect("send through a");
    assert!(on_a.wait_work(first.work, HANG).await.expect("work"));
    let again = on_b.send(send).await.expect("the retry through b");
    // The first send's answer (the session exists by now: not created again).
    assert_eq!(
        (&again.key, again.seq, &again.run_id),
        (&first.key, first.seq, &first.run_id)
    );
    let texts = crate::common::transcript_texts(on_b.as_ref(), "agent:work:main").await;
    assert_eq!(
        texts.iter().filter(|t| *t == "once only").count(),
        1,
        "{texts:?}"
    );
}

/// `GET path` on `addr`; the whole answer.
async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    tokio::time::timeout(HANG, tcp.read_to_string(&mut answer))
        .await
        .expect("answered and closed")
        .expect("read");
    answer
}

/// Until `/readyz` on `addr` answers `status` (bounded by `HANG`).
async fn until_ready(addr: &str, status: &str) -> String {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let answer = http_get(addr, "/readyz").await;
        if answer.starts_with(&format!("HTTP/1.1 {status}")) {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never said {status}: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Until `/metrics` on `addr` says `switchboard_node_lease <value>` (bounded by `HANG`).
async fn until_lease(addr: &str, value: &str) {
    let deadline = tokio::time::Instant::now() + HANG;
    let want = format!("switchboard_node_lease {value}\n");
    loop {
        let scrape = http_get(addr, "/metrics").await;
        if scrape.contains(&want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {want:?} in /metrics: {scrape}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The database goes away for longer than a lease: the node says not ready, keeps its
/// clients' sends failing fast, and, when the database is back, renews its lease (nobody
/// took it over), is ready again and loses nothing it acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_rides_out_a_database_restart_longer_than_its_lease() {
    let Some(cluster) = pg::private_cluster_or_skip("a_node_rides_out_a_database_restart") else {
        return;
    };
    let url = pg::fresh_database(&cluster);
    let a = Node::start_with(&url, &["--metrics"]);
    let (_link, api) = attach(a.url()).await;
    let r = api
        .send(crate::common::owner("agent:work:main", "before"))
        .await
        .expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
    until_ready(&a.serve.addr, "200").await;
    until_lease(&a.serve.addr, "1").await;

    cluster.stop();
    let answer = until_ready(&a.serve.addr, "503").await;
    assert!(answer.contains(r#""ready":false"#), "{answer}");
    let err = api
        .send(crate::common::owner("agent:work:main", "while down"))
        .await
        .expect_err("the database is down");
    assert!(err.to_string().contains("cannot be reached"), "{err}");
    // Past the lease: lapsing.
    until_lease(&a.serve.addr, "0").await;

    cluster.start();
    until_ready(&a.serve.addr, "200").await;
    until_lease(&a.serve.addr, "1").await;
    let r = api
        .send(crate::common::owner("agent:work:main", "after"))
        .await
        .expect("send after the restart");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
    let texts = crate::common::transcript_texts(api.as_ref(), "agent:work:main").await;
    assert_eq!(
        texts,
        ["before", "work: before", "after", "work: after"],
        "nothing acknowledged lost, nothing refused written"
    );
}

/// HAProxy in front of `nodes` with contrib/haproxy.cfg's settings (its checks every 2 s
/// made quicker), on a free port; `None` where it is not installed and not required.
struct Balancer {
    child: std::process::Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Balancer {
    fn start(nodes: &[&Node]) -> Option<Balancer> {
        let bin = [
            "/usr/sbin/haproxy",
            "/usr/bin/haproxy",
            "/usr/local/sbin/haproxy",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file());
        let Some(bin) = bin else {
            assert!(!pg::required(), "haproxy is required here (CI=true)");
            eprintln!("skipping: no haproxy");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let sample = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/haproxy.cfg"),
        )
        .expect("contrib/haproxy.cfg");
        // The sample as shipped, with this test's addresses and quicker checks.
        let mut config: Vec<String> = sample
            .lines()
            .filter(|l| !l.trim_start().starts_with("server "))
            .map(|l| {
                l.replace("bind :18789", &format!("bind 127.0.0.1:{port}"))
                    .replace("inter 2s", "inter 200ms")
            })
            .collect();
        for (i, node) in nodes.iter().enumerate() {
            config.push(format!("    server node-{i} {}", node.serve.addr));
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, config.join("\n") + "\n").expect("write the config");
        let child = std::process::Command::new(bin)
            .args(["-db", "-f"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start haproxy");
        Some(Balancer {
            child,
            addr: format!("127.0.0.1:{port}"),
            _dir: dir,
        })
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An OpenClaw-style client (protocol frames, `chat.send`, `chat.history`) over the
/// balancer: connected and answered `hello-ok`, or `None` while the balancer has no node up.
async fn openclaw_client(addr: &str) -> Option<gateway_process::Ws> {
    use crate::common::ws::{recv, send};
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let url = format!("ws://{addr}/");
    let tcp = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp).await.ok()?;
    recv(&mut ws).await.ok()?;
    send(&mut ws, gateway_process::connect_req(TOKEN, None)).await;
    let hello = recv(&mut ws).await.ok()?;
    (hello["ok"] == true).then_some(ws)
}

/// Until `chat.history` of agent:work:main shows the message and work's reply.
async fn until_replied(ws: &mut gateway_process::Ws) {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let history = call(
            ws,
            "4",
            "chat.history",
            serde_json::json!({"sessionKey": "agent:work:main", "limit": 20}),
        )
        .await;
        assert_eq!(history["ok"], true, "{history}");
        let text = history["payload"]["messages"].to_string();
        if text.contains("through the balancer") && text.contains("work: through the balancer") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the exchange never showed: {history}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// OpenClaw's clients behind a TCP load balancer: connected through HAProxy to one of two
/// nodes, they send; the node they are on dies; they reconnect through the balancer, land on
/// the other node and read what they sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openclaw_clients_behind_a_tcp_load_balancer_move_to_a_surviving_node() {
    let Some(cluster) = pg::cluster_or_skip("openclaw_clients_behind_a_tcp_load_balancer") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let mut nodes = [Node::start(&url), Node::start(&url)];
    let Some(balancer) = Balancer::start(&[&nodes[0], &nodes[1]]) else {
        return;
    };
    let connect = || async {
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            if let Some(ws) = openclaw_client(&balancer.addr).await {
                return ws;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no node through the balancer"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let mut ws = connect().await;
    let sent = call(
        &mut ws,
        "1",
        "chat.send",
        serde_json::json!({"sessionKey": "agent:work:main", "message": "through the balancer",
                           "idempotencyKey": "7b3c0c5e-2222-4d1a-9f00-000000000001"}),
    )
    .await;
    assert_eq!(sent["ok"], true, "{sent}");
    // Answered before the node goes (a run cut short is closed in error, not replayed).
    until_replied(&mut ws).await;
    // Which node it is on (nothing in the protocol says): node 0 paused a moment, does
    // the connection still answer?
    nodes[0].signal("-STOP");
    let answered = tokio::time::timeout(
        Duration::from_secs(2),
        call(&mut ws, "2", "status", serde_json::json!({})),
    )
    .await
    .is_ok();
    nodes[0].signal("-CONT");
    let on = if answered { 1 } else { 0 };
    drop(ws);
    nodes[on].kill_hard();
    let mut ws = connect().await;
    until_replied(&mut ws).await;
}

/// libfaketime's library (Debian's `libfaketime`), `None` where it is not installed and not
/// required.
fn faketime() -> Option<&'static str> {
    let lib = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/faketime/libfaketimeMT.so.1",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).is_file());
    if lib.is_none() {
        assert!(!pg::required(), "libfaketime is required here (CI=true)");
        eprintln!("skipping: no libfaketime");
    }
    lib
}

/// Leases are dated by the database's clock: a node whose clock is three hours ahead of the
/// other's is neither taken for dead by it nor takes it for dead, and both serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_whose_clocks_disagree_by_hours_keep_their_leases() {
    let Some(cluster) = pg::cluster_or_skip("nodes_whose_clocks_disagree") else {
        return;
    };
    let Some(lib) = faketime() else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let ahead = {
        let root = tempfile::tempdir().expect("temp dir");
        let config = root.path().join("config.json5");
        std::fs::write(&config, CONFIG).expect("config");
        let mut cmd = gateway_process::serve_command(root.path(), &config);
        cmd.env("SWITCHBOARD_STORE", &url)
            .env("LD_PRELOAD", lib)
            .env("FAKETIME", "+3h")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Node {
            serve: gateway_process::launch(cmd),
            _root: root,
        }
    };
    let behind = Node::start(&url);
    let (_a, on_ahead) = attach(ahead.url()).await;
    let (_b, on_behind) = attach(behind.url()).await;
    let r = on_ahead
        .send(crate::common::owner("agent:work:main", "from the future"))
        .await
        .expect("send through the node ahead");
    assert!(on_ahead.wait_work(r.work, HANG).await.expect("work"));
    // The skew is real: the node ahead dates what it writes three hours on.
    let db = |sql: &str| one(cluster, &url, sql);
    let skew_ms: i64 =
        db("SELECT max(started_at) - (extract(epoch FROM now()) * 1000)::bigint FROM runs")
            .parse()
            .expect("a number");
    assert!(
        skew_ms > 2 * 3600 * 1000,
        "the node's clock is not ahead: {skew_ms} ms"
    );

    // Longer than a lease, and than a node's own lease of standing before it judges.
    tokio::time::sleep(2 * switchboard_store_postgres::LEASE_TTL).await;
    assert_eq!(
        db("SELECT count(*) FROM nodes"),
        "2",
        "a node was taken for dead"
    );
    let r = on_behind
        .send(crate::common::owner("agent:work:main", "from now"))
        .await
        .expect("send through the node behind");
    assert!(on_behind.wait_work(r.work, HANG).await.expect("work"));
    let texts = crate::common::transcript_texts(on_ahead.as_ref(), "agent:work:main").await;
    for want in [
        "from the future",
        "work: from the future",
        "from now",
        "work: from now",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    assert!(
        !texts.iter().any(|t| t.contains("engine stopped")),
        "nothing was interrupted: {texts:?}"
    );
}

/// Telegram allows one poller per bot: across nodes on one database one node polls (it holds
/// the bot's lane), and when it dies another takes the poll over and the messages go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_polls_telegram_and_another_takes_over_when_it_dies() {
    use crate::common::fake_telegram::FakeTelegram;
    let Some(cluster) = pg::cluster_or_skip("one_node_polls_telegram") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let bot = "777:nodes-test";
    let fake = FakeTelegram::start(bot).await;
    let config = CONFIG
        .trim_end()
        .trim_end_matches('}')
        .trim_end_matches(|c: char| c == ',' || c.is_whitespace())
        .to_string()
        + &format!(
            r#", channels: {{ telegram: {{ botToken: "{bot}", apiRoot: "{}", dmPolicy: "open" }} }} }}"#,
            fake.api_root
        );
    let mut nodes = [
        Node::start_config(&url, &config, &[]),
        Node::start_config(&url, &config, &[]),
    ];
    let lane = "SELECT owner FROM lanes WHERE session_key = 'channel:telegram:777'";
    let deadline = tokio::time::Instant::now() + HANG;
    let poller = loop {
        let owner = one(cluster, &url, lane);
        if !owner.is_empty() {
            break owner;
        }
        assert!(tokio::time::Instant::now() < deadline, "nobody polls");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let answered = |api: Arc<dyn SessionsApi>, text: &'static str| async move {
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            let texts = crate::common::transcript_texts(api.as_ref(), "agent:main:main").await;
            if texts.iter().any(|t| t == &format!("main got: {text}")) {
                return texts;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{text} not answered: {texts:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (_link, api) = attach(nodes[0].url()).await;
    fake.direct(42, "Ann", "first");
    answered(api, "first").await;
    assert_eq!(fake.max_polling(), 1, "two nodes polled at once");

    // The poller dies; the other node takes the poll over once the lease runs out.
    let dead = nodes
        .iter()
        .position(|n| n.lock_files().contains(&format!("{poller}.lock")))
        .expect("the poller is one of the nodes");
    nodes[dead].kill_hard();
    let (_survivor_link, survivor) = attach(nodes[1 - dead].url()).await;
    fake.direct(42, "Ann", "second");
    let texts = answered(survivor, "second").await;
    assert_eq!(
        texts.iter().filter(|t| *t == "first").count(),
        1,
        "{texts:?}"
    );
    assert_eq!(
        texts.iter().filter(|t| *t == "second").count(),
        1,
        "{texts:?}"
    );
    assert_ne!(one(cluster, &url, lane), poller, "the survivor polls now");
}

/// Discord's gateway, one connection per bot: across nodes on one database one node holds the
/// gateway (the bot's lane, `channel:discord:<bot id>`), and when it dies another connects and
/// the messages go on, never two connections at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_holds_discords_gateway_and_another_takes_over_when_it_dies() {
    use crate::common::fake_discord::FakeDiscord;
    let Some(cluster) = pg::cluster_or_skip("one_node_holds_discords_gateway") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    // A token's first part is its bot's id in base64 ("123456789012345678").
    let token = "MTIzNDU2Nzg5MDEyMzQ1Njc4.nodes.test";
    let fake = FakeDiscord::start(token).await;
    let config = CONFIG
        .trim_end()
        .trim_end_matches('}')
        .trim_end_matches(|c: char| c == ',' || c.is_whitespace())
        .to_string()
        + &format!(
            r#", channels: {{ discord: {{ token: "{token}", apiRoot: "{}",
                 guilds: {{ "*": {{ requireMention: false }} }} }} }} }}"#,
            fake.api_root
        );
    let mut nodes = [
        Node::start_config(&url, &config, &[]),
        Node::start_config(&url, &config, &[]),
    ];
    let lane = "SELECT owner FROM lanes WHERE session_key = 'channel:discord:123456789012345678'";
    let until = async |what: &str, check: &dyn Fn() -> bool| {
        let deadline = tokio::time::Instant::now() + HANG;
        while !check() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    until("nobody holds the gateway", &|| {
        !one(cluster, &url, lane).is_empty()
    })
    .await;
    let holder = one(cluster, &url, lane);
    until("the holder never connected", &|| fake.identifies() == 1).await;
    let key = "agent:main:discord:channel:100";
    let answered = |api: Arc<dyn SessionsApi>, text: &'static str| async move {
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            let texts = crate::common::transcript_texts(api.as_ref(), key).await;
            if texts.iter().any(|t| t == &format!("main got: {text}")) {
                return texts;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{text} not answered: {texts:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (_link, api) = attach(nodes[0].url()).await;
    fake.guild_message("10", "100", ("42", "Ann"), "first");
    answered(api, "first").await;

    // The holder dies; the other node connects once the lease runs out.
    let dead = nodes
        .iter()
        .position(|n| n.lock_files().contains(&format!("{holder}.lock")))
        .expect("the holder is one of the nodes");
    nodes[dead].kill_hard();
    until("the survivor never connected", &|| fake.identifies() == 2).await;
    let (_survivor_link, survivor) = attach(nodes[1 - dead].url()).await;
    fake.guild_message("10", "100", ("42", "Ann"), "second");
    let texts = answered(survivor, "second").await;
    for text in ["first", "second"] {
        assert_eq!(texts.iter().filter(|t| *t == text).count(), 1, "{texts:?}");
    }
    assert_eq!(fake.max_open(), 1, "two nodes held the gateway at once");
    assert_ne!(
        one(cluster, &url, lane),
        holder,
        "the survivor holds it now"
    );
}
