//! Issue 29 on several nodes: two `serve` nodes on one PostgreSQL database drain one outbox
//! (each claims rows with `FOR UPDATE SKIP LOCKED`), and every delivery reaches the
//! receiver exactly once however the claims interleave.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::common::pg;
use crate::common::receiver::Receiver;
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
        let body = json!({ "text": conversation, "conversation": conversation }).to_string();
        let mut s = TcpStream::connect(&self.serve.addr).expect("connect");
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
    let until = std::time::Instant::now() + WAIT;
    loop {
        let rows = cluster.rows(db, "SELECT status, count(*) FROM outbox GROUP BY status");
        if rows == vec![vec!["sent".to_string(), N.to_string()]] {
            break;
        }
        assert!(std::time::Instant::now() < until, "{rows:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let got_now = receiver.received();
    assert_eq!(got_now.len(), N, "no delivery sent twice: {}", got.len());
    let mut keys: Vec<String> = got_now
        .iter()
        .filter_map(|r| r.header("Idempotency-Key").map(str::to_string))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), N);
    let attempts = cluster.rows(db, "SELECT DISTINCT attempt FROM outbox");
    assert_eq!(
        attempts,
        vec![vec!["1".to_string()]],
        "each sent at its first attempt"
    );
}
