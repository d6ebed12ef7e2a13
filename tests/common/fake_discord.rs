//! A local fake of Discord's REST API for sending messages
//! (https://discord.com/developers/docs/resources/message#create-message), for the Discord
//! channel's tests: `POST <root>/channels/<id>/messages` with `Authorization: Bot <token>`,
//! answered in Discord's shapes. It records each message, refuses content over 2,000
//! characters (400, code 50035), answers a repeated `nonce` with `enforce_nonce` by the message
//! it already made (as Discord does), `401` for a wrong token, `404` (10003) for channel
//! `404`, and the next answers can be scripted `429` with `retry_after`.

#![allow(dead_code)] // each test file uses part of it

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::fake_telegram::{Post, read_post};

/// A message the fake accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub content: String,
    pub id: String,
}

#[derive(Default)]
struct State {
    posted: Vec<Posted>,
    /// `(channel, nonce)` → the message made for it.
    nonces: HashMap<(String, String), String>,
    rate_limited: VecDeque<f64>,
    next_id: u64,
}

#[derive(Clone)]
pub struct FakeDiscord {
    /// `http://127.0.0.1:<port>/api/v10`: the `apiRoot` to configure.
    pub api_root: String,
    token: String,
    state: Arc<Mutex<State>>,
}

impl FakeDiscord {
    pub async fn start(token: &str) -> FakeDiscord {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = FakeDiscord {
            api_root: format!("http://{addr}/api/v10"),
            token: token.to_string(),
            state: Arc::new(Mutex::new(State {
                next_id: 1_100_000_000_000_000_000,
                ..State::default()
            })),
        };
        let serving = fake.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let fake = serving.clone();
                tokio::spawn(async move {
                    let Some(post) = read_post(&mut sock).await else {
                        return;
                    };
                    let (status, body) = fake.answer(&post);
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(body.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        fake
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state")
    }

    /// The next sends are answered 429 with these `retry_after` seconds, in order.
    pub fn rate_limit_next(&self, retry_after: impl IntoIterator<Item = f64>) {
        self.state().rate_limited.extend(retry_after);
    }

    pub fn posted(&self) -> Vec<Posted> {
        self.state().posted.clone()
    }

    fn answer(&self, post: &Post) -> (u16, String) {
        let mut s = self.state();
        if post.header("authorization") != Some(&format!("Bot {}", self.token)) {
            return (
                401,
                json!({"message": "401: Unauthorized", "code": 0}).to_string(),
            );
        }
        if let Some(after) = s.rate_limited.pop_front() {
            return (
                429,
                json!({"message": "You are being rate limited.", "retry_after": after,
                       "global": false})
                .to_string(),
            );
        }
        let channel = post
            .path
            .strip_prefix("/api/v10/channels/")
            .and_then(|rest| rest.strip_suffix("/messages"));
        let Some(channel) = channel else {
            return (
                404,
                json!({"message": "404: Not Found", "code": 0}).to_string(),
            );
        };
        if channel == "404" {
            return (
                404,
                json!({"message": "Unknown Channel", "code": 10003}).to_string(),
            );
        }
        let content = post.body["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if content.is_empty() || content.chars().count() > 2000 {
            return (
                400,
                json!({"message": "Invalid Form Body", "code": 50035}).to_string(),
            );
        }
        let nonce = post.body["nonce"].as_str().map(str::to_string);
        if let (Some(n), Some(true)) = (&nonce, post.body["enforce_nonce"].as_bool())
            && let Some(id) = s.nonces.get(&(channel.to_string(), n.clone()))
        {
            return (200, json!({"id": id, "channel_id": channel}).to_string());
        }
        s.next_id += 1;
        let id = s.next_id.to_string();
        if let Some(n) = nonce {
            s.nonces.insert((channel.to_string(), n), id.clone());
        }
        s.posted.push(Posted {
            channel: channel.to_string(),
            content: content.clone(),
            id: id.clone(),
        });
        (
            200,
            json!({"id": id, "channel_id": channel, "content": content}).to_string(),
        )
    }
}
