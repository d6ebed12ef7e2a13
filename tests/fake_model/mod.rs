//! An in-process fake OpenAI-compatible server for tests and benches: a tokio listener with a
//! minimal HTTP/1.1 responder. Answers are scripted per test (in order; the last repeats),
//! plain JSON or a server-sent-event stream written chunk by chunk with pauses; every request
//! is recorded, and the server counts requests in flight at once and requests whose client
//! went away before the answer (a cancelled run drops its HTTP request).

#![allow(dead_code)] // each test file uses part of it

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Sends `text` into `key` as an outside message, waits (bounded) until the engine is idle,
/// and returns that session's runs, newest first.
pub async fn send_and_wait(
    engine: &switchboard_engine::Engine,
    key: &str,
    text: &str,
) -> Vec<switchboard_store_sqlite::runs::RunRow> {
    const HANG: Duration = Duration::from_secs(60);
    let api = engine.start();
    tokio::time::timeout(
        HANG,
        api.send(switchboard_types::api::SendRequest {
            key: key.to_string(),
            text: text.to_string(),
            from: switchboard_types::api::Sender::default(),
            idempotency_key: None,
        }),
    )
    .await
    .expect("the send ends")
    .expect("the send is recorded");
    tokio::time::timeout(HANG, engine.idle())
        .await
        .expect("the run ends");
    engine
        .runs_of(&switchboard_types::key::SessionKey::from_canonical(key), 10)
        .await
        .unwrap()
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The whole body (ignored when `chunks` is not empty).
    pub body: String,
    /// Wait this long before answering (a slow server). A client that closes its connection
    /// meanwhile is counted in `Fake::dropped`.
    pub delay: Duration,
    /// Send only half the body, then close (a cut connection).
    pub truncate: bool,
    /// A streamed body: each chunk written after its pause, as `text/event-stream`.
    pub chunks: Vec<(Duration, String)>,
}

pub fn answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![],
        body: body.to_string(),
        delay: Duration::ZERO,
        truncate: false,
        chunks: vec![],
    }
}

pub fn ok(body: Value) -> Answer {
    answer(200, &body.to_string())
}

pub fn text_reply(text: &str, prompt: u64, completion: u64) -> Answer {
    ok(json!({
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{ "index": 0, "finish_reason": "stop",
                      "message": { "role": "assistant", "content": text } }],
        "usage": { "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion },
    }))
}

pub fn tool_reply(calls: Value) -> Answer {
    ok(json!({
        "id": "c2", "object": "chat.completion", "model": "m",
        "choices": [{ "index": 0, "finish_reason": "tool_calls",
                      "message": { "role": "assistant", "content": null, "tool_calls": calls } }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 },
    }))
}

pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
}

/// A streamed text reply: one `chat.completion.chunk` event per piece, each after `pause`,
/// then a usage chunk (when given) and `data: [DONE]`.
pub fn streamed_text(pieces: &[&str], pause: Duration, usage: Option<(u64, u64)>) -> Answer {
    let mut chunks: Vec<(Duration, String)> = pieces
        .iter()
        .map(|p| {
            let ev = json!({
                "id": "s1", "object": "chat.completion.chunk", "model": "m",
                "choices": [{ "index": 0, "delta": { "content": p }, "finish_reason": null }],
            });
            (pause, format!("data: {ev}\n\n"))
        })
        .collect();
    let fin = json!({
        "id": "s1", "object": "chat.completion.chunk", "model": "m",
        "choices": [{ "index": 0, "delta": {}, "finish_reason": "stop" }],
    });
    chunks.push((Duration::ZERO, format!("data: {fin}\n\n")));
    if let Some((prompt, completion)) = usage {
        let u = json!({
            "id": "s1", "object": "chat.completion.chunk", "model": "m", "choices": [],
            "usage": { "prompt_tokens": prompt, "completion_tokens": completion,
                       "total_tokens": prompt + completion },
        });
        chunks.push((Duration::ZERO, format!("data: {u}\n\n")));
    }
    chunks.push((Duration::ZERO, "data: [DONE]\n\n".to_string()));
    Answer {
        chunks,
        ..answer(200, "")
    }
}

/// A request as the fake server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Value,
}

/// The fake server: answers in order; once the script is used up, the last answer repeats.
pub struct Fake {
    pub base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    /// When each streamed chunk was written (flushed to the socket), in order.
    chunk_times: Arc<Mutex<Vec<Instant>>>,
}

impl Fake {
    pub async fn start(script: Vec<Answer>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = Fake {
            base_url: format!("http://{addr}/v1"),
            seen: Arc::new(Mutex::new(Vec::new())),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: Arc::new(AtomicUsize::new(0)),
            dropped: Arc::new(AtomicUsize::new(0)),
            chunk_times: Arc::new(Mutex::new(Vec::new())),
        };
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let (recorded, in_flight, max_in_flight, dropped) = (
            fake.seen.clone(),
            fake.in_flight.clone(),
            fake.max_in_flight.clone(),
            fake.dropped.clone(),
        );
        let times = fake.chunk_times.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (recorded, script) = (recorded.clone(), script.clone());
                let (in_flight, max_in_flight, dropped) =
                    (in_flight.clone(), max_in_flight.clone(), dropped.clone());
                let times = times.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    recorded.lock().unwrap().push(req);
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    max_in_flight.fetch_max(now, Ordering::SeqCst);
                    let answer = {
                        let mut s = script.lock().unwrap();
                        if s.len() > 1 {
                            s.pop_front().unwrap()
                        } else {
                            s.front().cloned().unwrap()
                        }
                    };
                    let mut finishing = Finishing::new(&in_flight);
                    if !respond(&mut sock, &answer, &times, &mut finishing).await {
                        dropped.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        fake
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The most requests that were being answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// When each streamed chunk was written since the last call, oldest first.
    pub fn take_chunk_times(&self) -> Vec<Instant> {
        std::mem::take(&mut *self.chunk_times.lock().unwrap())
    }

    /// Requests whose client closed the connection before the whole answer was written.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// Waits `d`, or less if the client goes away; false when it did.
async fn pause(sock: &mut tokio::net::TcpStream, d: Duration) -> bool {
    if d.is_zero() {
        return true;
    }
    let mut probe = [0u8; 64];
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        n = sock.read(&mut probe) => !matches!(n, Ok(0) | Err(_)),
    }
}

/// Counts a request in flight until its answer's last bytes go out. Not after: a client
/// may read them, free its place and send its next request before this task runs again, and
/// the two would be counted at once though the client never had them both going.
struct Finishing<'a> {
    in_flight: Option<&'a AtomicUsize>,
}

impl<'a> Finishing<'a> {
    fn new(in_flight: &'a AtomicUsize) -> Finishing<'a> {
        Finishing {
            in_flight: Some(in_flight),
        }
    }

    /// The last write is next: the request no longer counts.
    fn now(&mut self) {
        if let Some(n) = self.in_flight.take() {
            n.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// Writes the answer; false when the client went away first.
async fn respond(
    sock: &mut tokio::net::TcpStream,
    answer: &Answer,
    times: &Mutex<Vec<Instant>>,
    finishing: &mut Finishing<'_>,
) -> bool {
    if !pause(sock, answer.delay).await {
        return false;
    }
    let streamed = !answer.chunks.is_empty();
    let mut head = if streamed {
        format!(
            "HTTP/1.1 {} X\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n",
            answer.status
        )
    } else {
        format!(
            "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            answer.status,
            answer.body.len()
        )
    };
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if sock.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    if streamed {
        let n = answer.chunks.len();
        // `truncate` cuts a stream after half its chunks.
        let upto = if answer.truncate { n / 2 } else { n };
        for (i, (d, chunk)) in answer.chunks[..upto].iter().enumerate() {
            if !pause(sock, *d).await {
                return false;
            }
            if i + 1 == upto {
                finishing.now();
            }
            // Taken before the write, so a reader as fast as the write is not timed below 0.
            times.lock().unwrap().push(Instant::now());
            if sock.write_all(chunk.as_bytes()).await.is_err() {
                return false;
            }
            let _ = sock.flush().await;
        }
    } else {
        let body = answer.body.as_bytes();
        let sent = if answer.truncate {
            &body[..body.len() / 2]
        } else {
            body
        };
        finishing.now();
        if sock.write_all(sent).await.is_err() {
            return false;
        }
    }
    let _ = sock.shutdown().await;
    true
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers.get("content-length")?.parse().ok()?;
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).ok()?;
    Some(Seen {
        path,
        headers,
        body,
    })
}

/// What a responder function decides from a request body.
pub type Responder = dyn Fn(&Value) -> Answer + Send + Sync;

impl Fake {
    /// A server that answers each request with `respond(body)`: for exchanges where several
    /// sessions call the model at once, so a fixed order of answers would race.
    pub async fn start_fn(respond_with: impl Fn(&Value) -> Answer + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = Fake {
            base_url: format!("http://{addr}/v1"),
            seen: Arc::new(Mutex::new(Vec::new())),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: Arc::new(AtomicUsize::new(0)),
            dropped: Arc::new(AtomicUsize::new(0)),
            chunk_times: Arc::new(Mutex::new(Vec::new())),
        };
        let respond_with: Arc<Responder> = Arc::new(respond_with);
        let recorded = fake.seen.clone();
        let times = fake.chunk_times.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (recorded, respond_with) = (recorded.clone(), respond_with.clone());
                let times = times.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    let answer = respond_with(&req.body);
                    recorded.lock().unwrap().push(req);
                    // This fake does not count requests in flight.
                    let unused = AtomicUsize::new(1);
                    respond(&mut sock, &answer, &times, &mut Finishing::new(&unused)).await;
                });
            }
        });
        fake
    }
}

/// The text of the last message of a request body (a string content), or "".
pub fn last_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The system message of a request body, or "".
pub fn system_text(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .filter(|_| body["messages"][0]["role"] == "system")
        .unwrap_or_default()
        .to_string()
}
