//! Issue 29 on several nodes: two `serve` nodes on one PostgreSQL database drain one outbox
//! (each claims rows with `FOR UPDATE SKIP LOCKED`), and every delivery reaches the
//! receiver exactly once however the claims interleave. A console attached to `serve` sees
//! each delivery's states as they change (`deliveryUpdated` events).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::common::pg;
use crate::common::receiver::{Answer, Receiver};
use crate::gateway_process::{self, Launched, WAIT};

const SECRET: &str = "hook-secret-0123456789";

fn config(receiver: &Receiver) -> String {
    json!({
        "agents": { "list": [ { "id": "main", "default": true, "model": "scripted",
            "script": [ { "reply": "re: {{text}}" } ] } ] },
        "channels": { "webhook": { "ops": { "url": receiver.url, "secret": SECRET,
            "retry": { "minDelayMs": 50, "maxDelayMs": 100 } } } },
    })
    .to_string()
}

struct Node {
    root: tempfile::TempDir,
    serve: Launched,
}

impl Node {
    fn start(url: &str, config: &str) -> Node {
        let root = tempfile::tempdir().expect("temp dir");
        let path = root.path().join("config.json5");
        std::fs::write(&path, config).expect("config");
        let mut cmd = gateway_process::serve_command(root.path(), &path);
        cmd.env("SWITCHBOARD_STORE", url);
        Node {
            serve: gateway_process::launch(cmd),
            root,
        }
    }

    fn hook(&self, conversation: &str) {
        hook(&self.serve.addr, conversation);
    }
}

/// A message POSTed to `/hooks/ops` of the gateway at `addr`, accepted.
fn hook(addr: &str, conversation: &str) {
    let body = json!({ "text": conversation, "conversation": conversation }).to_string();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(
        s,
        "POST /hooks/ops HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SECRET}\r\n\
Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.serve.child.kill();
        let _ = self.serve.child.wait();
        let _ = &self.root;
    }
}

#[test]
fn two_nodes_draining_one_outbox_send_each_delivery_once() {
    let Some(cluster) =
        pg::cluster_or_skip("two_nodes_draining_one_outbox_send_each_delivery_once")
    else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let receiver = Receiver::start();
    let config = config(&receiver);
    let a = Node::start(&url, &config);
    let b = Node::start(&url, &config);
    const N: usize = 60;
    for i in 0..N {
        let node = if i % 2 == 0 { &a } else { &b };
        node.hook(&format!("c{i}"));
    }
    let got = receiver.wait_for(N, WAIT);
    let db = pg::database_of(&url);
    // Every row sent, by one of the two nodes' claims, once.
    until_all_sent(cluster, db, N);
    let got_now = receiver.received();
    assert_eq!(got_now.len(), N, "no delivery sent twice: {}", got.len());
    assert_eq!(receiver.distinct_keys(), N);
    let attempts = cluster.rows(db, "SELECT DISTINCT attempt FROM outbox");
    assert_eq!(
        attempts,
        vec![vec!["1".to_string()]],
        "each sent at its first attempt"
    );
}

/// What a console attached over the gateway is told of one delivery: sending, retrying (the
/// 500), sending again, sent with the receiver's message id.
/// Waits (bounded by `WAIT`) until the `n` outbox rows of database `db` are all `sent`.
fn until_all_sent(cluster: &pg::Cluster, db: &str, n: usize) {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let rows = cluster.rows(db, "SELECT status, count(*) FROM outbox GROUP BY status");
        if rows == vec![vec!["sent".to_string(), n.to_string()]] {
            return;
        }
        assert!(std::time::Instant::now() < until, "{rows:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_attached_to_serve_sees_each_state_of_a_delivery() {
    use switchboard_remote::{Link, LinkOptions, RemoteApi};
    use switchboard_types::api::{EngineEvent, OutboxStatus, SessionsApi, StreamItem};

    let receiver = Receiver::start();
    receiver.script(
        vec![Answer::status(500)],
        Some(Answer::Status(
            200,
            Vec::new(),
            r#"{"messageId":"rx-1"}"#.into(),
        )),
    );
    let g = gateway_process::start_with_config(&config(&receiver), &[]);
    let link = Arc::new(
        Link::connect(LinkOptions::new(
            format!("ws://{}", g.addr),
            Some(gateway_process::TOKEN.into()),
        ))
        .await
        .expect("attached"),
    );
    let api: Arc<dyn SessionsApi> = RemoteApi::new(link.clone());
    let mut events = api.subscribe();
    let addr = g.addr.clone();
    tokio::task::spawn_blocking(move || hook(&addr, "c1"))
        .await
        .expect("posted");
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, async {
        loop {
            match events.next().await {
                StreamItem::Event(e) => {
                    if let EngineEvent::DeliveryUpdated {
                        status, message_id, ..
                    } = e.event
                    {
                        seen.push((status, message_id));
                        if status == OutboxStatus::Sent {
                            return;
                        }
                    }
                }
                StreamItem::Missed(_) => {}
                StreamItem::Closed => panic!("the event stream closed"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no sent event; seen {seen:?}"));
    assert_eq!(
        seen,
        vec![
            (OutboxStatus::Sending, None),
            (OutboxStatus::Retrying, None),
            (OutboxStatus::Sending, None),
            (OutboxStatus::Sent, Some("rx-1".to_string())),
        ]
    );
}

/// A node `kill -9`ed with deliveries in flight on PostgreSQL: once its lease runs out, the
/// survivor takes it over, its claims with it, and sends every one (at least once: the
/// receiver got each twice, under one idempotency key).
#[test]
fn a_node_killed_mid_drain_is_taken_over_and_every_delivery_sent() {
    let Some(cluster) = pg::cluster_or_skip("a_node_killed_mid_drain_is_taken_over") else {
        return;
    };
    const N: usize = 8;
    let url = pg::fresh_database(cluster);
    let receiver = Receiver::start();
    receiver.script(vec![Answer::Hang; N], Some(Answer::ok()));
    let config = config(&receiver);
    let mut a = Node::start(&url, &config);
    for i in 0..N {
        a.hook(&format!("c{i}"));
    }
    receiver.wait_for(N, WAIT);
    let _b = Node::start(&url, &config);
    let _ = a.serve.child.kill();
    let _ = a.serve.child.wait();
    let db = pg::database_of(&url);
    until_all_sent(cluster, db, N);
    let got = receiver.received();
    assert_eq!(receiver.distinct_keys(), N, "none lost");
    assert_eq!(
        got.len(),
        2 * N,
        "each in flight at the kill sent again, once"
    );
}
