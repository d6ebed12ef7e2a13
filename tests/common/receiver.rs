//! A local HTTP receiver for the outbound webhook channel: a real socket on 127.0.0.1 that
//! records every request (method, path, headers, body, when) and answers each with the next
//! scripted answer (200 once the script is used up), so tests can make a channel answer
//! 429 with Retry-After, 500, 401, or hang.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// This status, with these extra headers and body.
    Status(u16, Vec<(String, String)>, String),
    /// Read the request, never answer (until the sender gives up or dies).
    Hang,
}

impl Answer {
    pub fn ok() -> Answer {
        Answer::Status(200, Vec::new(), "{}".into())
    }
    pub fn status(code: u16) -> Answer {
        Answer::Status(code, Vec::new(), format!("status {code}"))
    }
    pub fn retry_after(secs: u64) -> Answer {
        Answer::Status(
            429,
            vec![("Retry-After".into(), secs.to_string())],
            "slow down".into(),
        )
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Answer>,
    /// Answered once the script is used up.
    then: Option<Answer>,
    received: Vec<Request>,
}

/// The receiver; it stops accepting when dropped (its thread ends with the process).
pub struct Receiver {
    pub url: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let url = format!("http://{}/deliveries", listener.local_addr().expect("addr"));
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        Receiver { url, state }
    }

    /// Answer the next requests with `answers`, in order, then with `then` (200 if none).
    pub fn script(&self, answers: Vec<Answer>, then: Option<Answer>) {
        let mut s = self.state.0.lock().unwrap();
        s.script = answers.into();
        s.then = then;
    }

    pub fn received(&self) -> Vec<Request> {
        self.state.0.lock().unwrap().received.clone()
    }

    /// How many distinct `Idempotency-Key`s came (what a receiver dropping repeats keeps).
    pub fn distinct_keys(&self) -> usize {
        let mut keys: Vec<String> = self
            .received()
            .iter()
            .filter_map(|r| r.header("Idempotency-Key").map(str::to_string))
            .collect();
        keys.sort();
        keys.dedup();
        keys.len()
    }

    /// Waits until `n` requests arrived (panics after `wait`, which only a hang reaches).
    pub fn wait_for(&self, n: usize, wait: Duration) -> Vec<Request> {
        let (lock, cv) = &*self.state;
        let until = Instant::now() + wait;
        let mut s = lock.lock().unwrap();
        while s.received.len() < n {
            let left = until.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{} of {n} requests arrived: {:?}",
                s.received.len(),
                s.received
                    .iter()
                    .map(|r| String::from_utf8_lossy(&r.body).into_owned())
                    .collect::<Vec<_>>()
            );
            s = cv.wait_timeout(s, left).unwrap().0;
        }
        s.received.clone()
    }
}

fn serve(mut stream: TcpStream, state: &Arc<(Mutex<State>, Condvar)>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let answer = {
        let (lock, cv) = &**state;
        let mut s = lock.lock().unwrap();
        s.received.push(Request {
            method,
            path,
            headers,
            body,
            at: Instant::now(),
        });
        cv.notify_all();
        let then = s.then.clone().unwrap_or_else(Answer::ok);
        s.script.pop_front().unwrap_or(then)
    };
    match answer {
        Answer::Hang => {
            // Held open until the sender closes it or dies.
            let _ = stream.read(&mut chunk);
        }
        Answer::Status(code, extra, body) => {
            let mut out = format!(
                "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (n, v) in extra {
                out.push_str(&format!("{n}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            let _ = stream.write_all(out.as_bytes());
        }
    }
}
