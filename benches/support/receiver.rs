//! What the channel benches share: webhook deliveries queued in a store, and a webhook
//! receiver that answers every `POST` `200 {}` at once on kept-alive connections and counts
//! the requests and the distinct `Idempotency-Key`s (what a receiver that drops repeats by
//! the key would keep).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Queue `n` deliveries to webhook `bench` in `store`, each about as long as a chat reply.
pub async fn queue(store: &dyn switchboard_store::Store, n: usize) {
    use switchboard_store::{OutboxRow, OutboxStatus};
    for i in 0..n {
        store
            .insert_outbox(OutboxRow {
                created_at: 1,
                session_key: format!("hook:bench:c{i}"),
                kind: "reply".into(),
                channel: "webhook".into(),
                to: "bench".into(),
                text: format!("reply number {i}, about as long as a chat reply is"),
                status: OutboxStatus::Queued,
                ..OutboxRow::default()
            })
            .await
            .expect("queue");
    }
}

/// What the receiver saw.
#[derive(Clone, Default)]
pub struct Received {
    requests: Arc<AtomicUsize>,
    keys: Arc<Mutex<HashSet<String>>>,
}

impl Received {
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Distinct idempotency keys received.
    pub fn distinct(&self) -> usize {
        self.keys.lock().map(|k| k.len()).unwrap_or(0)
    }
}

/// Starts the receiver; its URL.
pub async fn start(received: Received) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(serve(s, received.clone()));
        }
    });
    url
}

async fn serve(mut s: tokio::net::TcpStream, received: Received) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        // One request: its head, then Content-Length bytes.
        let (head_end, length, key) = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let field = |name: &str| {
                    head.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_string())
                };
                let length = field("content-length:")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                break (i + 4, length, field("idempotency-key:"));
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_end + length {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        received.requests.fetch_add(1, Ordering::Relaxed);
        if let (Some(key), Ok(mut keys)) = (key, received.keys.lock()) {
            keys.insert(key);
        }
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        if s.write_all(answer).await.is_err() {
            return;
        }
    }
}
