//! A local fake of Telegram's Bot API (https://core.telegram.org/bots/api), for the Telegram
//! channel's tests: `POST /bot<token>/<method>` with a JSON body, answered in the API's shapes
//! (`{"ok": true, "result": …}` or `{"ok": false, "error_code", "description", "parameters"}`).
//! It serves `getMe`, `getUpdates` (long polling: updates from `offset` on, those before it
//! confirmed and dropped; waits up to `timeout` seconds for one) and `sendMessage` (recorded;
//! over 4,096 characters refused as Telegram does). A wrong token is 401; the next answers of
//! `sendMessage` can be scripted (429 with `retry_after`, 500, 401, a body that is not JSON).
//! Real sockets, a minimal HTTP/1.1 responder, one request per connection.

#![allow(dead_code)] // each test file uses part of it

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// The bot the fake is.
pub const BOT_ID: i64 = 7_000_001;
pub const BOT_USERNAME: &str = "switchboard_test_bot";

/// A message the fake accepted from the bot.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub chat_id: i64,
    pub thread: Option<i64>,
    pub text: String,
    pub message_id: i64,
}

/// A scripted answer to the next `sendMessage`.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// 429 Too Many Requests with `retry_after` seconds.
    RateLimited(u64),
    /// 500 with Telegram's shape.
    Server,
    /// 401: the token was revoked.
    Revoked,
    /// 502 from a proxy in front: HTML, not JSON.
    NotJson,
    /// 400: the chat is gone (or the bot was never in it): the message is given up.
    ChatNotFound,
    /// Answered as usual: so that a later call is the one that fails.
    Pass,
}

#[derive(Default)]
struct State {
    /// Updates not yet confirmed, in order.
    updates: VecDeque<Value>,
    /// Every update ever queued, for `replay`.
    history: Vec<Value>,
    next_update: i64,
    next_message: i64,
    sent: Vec<Sent>,
    failures: VecDeque<Failure>,
    /// Every method called, in order.
    calls: Vec<String>,
    /// The token is refused from now on (`revoke`).
    revoked: bool,
    /// `getUpdates` calls being answered now, and the most at once: Telegram answers a second
    /// poller of one bot with 409.
    polling: usize,
    max_polling: usize,
    /// `setWebhook`'s URL and secret while a webhook is set (then `getUpdates` is refused
    /// with 409, as Telegram does, and updates are pushed instead).
    webhook: Option<(String, String)>,
    /// Where pushes really go (`route_webhook_to`): the webhook URL's origin replaced, as a
    /// reverse proxy in front of the gateway would.
    push_origin: Option<String>,
    /// A pusher task is running.
    pushing: bool,
}

/// The fake server. Cheap to clone; it stops when the test's runtime does.
#[derive(Clone)]
pub struct FakeTelegram {
    /// `http://127.0.0.1:<port>`: the `apiRoot` to configure.
    pub api_root: String,
    pub token: String,
    state: Arc<Mutex<State>>,
    arrived: Arc<Notify>,
}

impl FakeTelegram {
    /// Listen on a free loopback port for bot `token`.
    pub async fn start(token: &str) -> FakeTelegram {
        FakeTelegram::start_on(token, "127.0.0.1:0").await
    }

    /// Listen on `addr` (a port a test kept free: Telegram coming back where it was).
    pub async fn start_on(token: &str, addr: &str) -> FakeTelegram {
        let listener = TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = FakeTelegram {
            api_root: format!("http://{addr}"),
            token: token.to_string(),
            state: Arc::new(Mutex::new(State {
                next_update: 100,
                next_message: 1,
                ..State::default()
            })),
            arrived: Arc::new(Notify::new()),
        };
        let serving = fake.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let fake = serving.clone();
                tokio::spawn(async move { fake.serve(sock).await });
            }
        });
        fake
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state")
    }

    /// A person writes `text` in a direct chat with the bot.
    pub fn direct(&self, user_id: i64, first_name: &str, text: &str) -> i64 {
        self.push(json!({
            "from": {"id": user_id, "is_bot": false, "first_name": first_name},
            "chat": {"id": user_id, "type": "private", "first_name": first_name},
            "text": text,
        }))
    }

    /// A person writes `text` in group `chat_id`, naming the bot when `mention`.
    pub fn group(&self, chat_id: i64, user_id: i64, text: &str, mention: bool) -> i64 {
        let (text, entities) = if mention {
            let handle = format!("@{BOT_USERNAME}");
            let length = handle.encode_utf16().count();
            (
                format!("{handle} {text}"),
                json!([{"type": "mention", "offset": 0, "length": length}]),
            )
        } else {
            (text.to_string(), json!([]))
        };
        self.push(json!({
            "from": {"id": user_id, "is_bot": false, "first_name": "Member"},
            "chat": {"id": chat_id, "type": "supergroup", "title": "Team"},
            "text": text,
            "entities": entities,
        }))
    }

    /// Queue an update carrying `message` (its id and date filled in); its update id.
    pub fn push(&self, mut message: Value) -> i64 {
        let id = {
            let mut s = self.state();
            let update_id = s.next_update;
            s.next_update += 1;
            let message_id = s.next_message;
            s.next_message += 1;
            message["message_id"] = json!(message_id);
            message["date"] = json!(1_700_000_000);
            let update = json!({"update_id": update_id, "message": message});
            s.history.push(update.clone());
            s.updates.push_back(update);
            update_id
        };
        self.arrived.notify_waiters();
        id
    }

    /// Queue again every update ever queued, as if none had been confirmed (a bot that died
    /// after reading a batch and before its next poll confirmed it).
    pub fn replay(&self) {
        let mut s = self.state();
        let history = s.history.clone();
        s.updates = history.into_iter().collect();
        drop(s);
        self.arrived.notify_waiters();
    }

    /// The webhook set (URL, secret), if any.
    pub fn webhook(&self) -> Option<(String, String)> {
        self.state().webhook.clone()
    }

    /// A webhook set by some other program before the test (`getUpdates` refused until
    /// `deleteWebhook`).
    pub fn preset_webhook(&self, url: &str, secret: &str) {
        self.state().webhook = Some((url.to_string(), secret.to_string()));
    }

    /// Push updates to `origin` (`http://host:port`) followed by the webhook URL's path.
    pub fn route_webhook_to(&self, origin: &str) {
        self.state().push_origin = Some(origin.to_string());
        self.arrived.notify_waiters();
    }

    /// Pushes queued updates to the webhook while one is set, one at a time, as Telegram
    /// does: an update not answered 2xx is sent again (after a pause) before the next.
    async fn push_loop(self) {
        let http = switchboard::channels::http_client().expect("client");
        loop {
            let next = {
                let s = self.state();
                match (&s.webhook, &s.push_origin, s.updates.front()) {
                    (Some((url, secret)), Some(origin), Some(update)) => {
                        let path = url
                            .split_once("://")
                            .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
                            .unwrap_or_else(|| "/".into());
                        Some((format!("{origin}{path}"), secret.clone(), update.clone()))
                    }
                    (None, _, _) => return,
                    _ => None,
                }
            };
            let Some((to, secret, update)) = next else {
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(100),
                    self.arrived.notified(),
                )
                .await;
                continue;
            };
            let answered = http
                .post(&to)
                .header("X-Telegram-Bot-Api-Secret-Token", &secret)
                .json(&update)
                .send()
                .await
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if answered {
                self.state().updates.pop_front();
            } else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }

    /// Queue a raw update (malformed ones included).
    pub fn push_raw(&self, update: Value) {
        self.state().updates.push_back(update);
        self.arrived.notify_waiters();
    }

    /// The answers the next `sendMessage` calls get, in order, before normal ones again.
    pub fn fail_next(&self, failures: impl IntoIterator<Item = Failure>) {
        self.state().failures.extend(failures);
    }

    /// Refuse the token from now on (every method answers 401).
    pub fn revoke(&self) {
        self.state().revoked = true;
    }

    /// What the bot sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.state().sent.clone()
    }

    /// The methods called, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    /// Updates not confirmed yet (an `offset` past them confirms them).
    pub fn pending(&self) -> usize {
        self.state().updates.len()
    }

    async fn serve(&self, mut sock: tokio::net::TcpStream) {
        let Some(Post { path, body, .. }) = read_post(&mut sock).await else {
            return;
        };
        let (status, answer) = self.answer(&path, &body).await;
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            429 => "Too Many Requests",
            502 => "Bad Gateway",
            _ => "Internal Server Error",
        };
        let kind = if status == 502 {
            "text/html"
        } else {
            "application/json"
        };
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            answer.len()
        );
        let _ = sock.write_all(head.as_bytes()).await;
        let _ = sock.write_all(answer.as_bytes()).await;
        let _ = sock.shutdown().await;
    }

    async fn answer(&self, path: &str, body: &Value) -> (u16, String) {
        let Some((token, method)) = path
            .strip_prefix("/bot")
            .and_then(|rest| rest.split_once('/'))
        else {
            return error(404, "Not Found", None);
        };
        self.state().calls.push(method.to_string());
        if token != self.token || self.state().revoked {
            return error(401, "Unauthorized", None);
        }
        match method {
            "getMe" => ok(
                json!({"id": BOT_ID, "is_bot": true, "first_name": "Test bot",
                                 "username": BOT_USERNAME}),
            ),
            "getUpdates" if self.state().webhook.is_some() => error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use \
                 deleteWebhook to delete the webhook first",
                None,
            ),
            "getUpdates" => self.get_updates(body).await,
            "setWebhook" => {
                let url = body["url"].as_str().unwrap_or_default().to_string();
                let secret = body["secret_token"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let start = {
                    let mut s = self.state();
                    s.webhook = Some((url, secret));
                    !std::mem::replace(&mut s.pushing, true)
                };
                if start {
                    let pusher = self.clone();
                    tokio::spawn(async move {
                        pusher.clone().push_loop().await;
                        pusher.state().pushing = false;
                    });
                }
                ok(json!(true))
            }
            "deleteWebhook" => {
                self.state().webhook = None;
                ok(json!(true))
            }
            "sendMessage" => self.send_message(body),
            _ => error(404, "Not Found: method not found", None),
        }
    }

    /// The most `getUpdates` calls that were being answered at once.
    pub fn max_polling(&self) -> usize {
        self.state().max_polling
    }

    async fn get_updates(&self, body: &Value) -> (u16, String) {
        {
            let mut s = self.state();
            s.polling += 1;
            s.max_polling = s.max_polling.max(s.polling);
        }
        let answer = self.poll_answer(body).await;
        self.state().polling -= 1;
        answer
    }

    async fn poll_answer(&self, body: &Value) -> (u16, String) {
        let offset = body["offset"].as_i64();
        let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(50));
        let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
        let deadline = tokio::time::Instant::now() + wait;
        // The offset confirms what is before it when the request is made (as Telegram does),
        // not when a long poll returns.
        if let Some(offset) = offset {
            let mut s = self.state();
            while s
                .updates
                .front()
                .and_then(|u| u["update_id"].as_i64())
                .is_some_and(|id| id < offset)
            {
                s.updates.pop_front();
            }
        }
        loop {
            let notified = self.arrived.notified();
            {
                let s = self.state();
                if !s.updates.is_empty() || tokio::time::Instant::now() >= deadline {
                    let batch: Vec<Value> = s.updates.iter().take(limit).cloned().collect();
                    return ok(json!(batch));
                }
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }

    fn send_message(&self, body: &Value) -> (u16, String) {
        let mut s = self.state();
        let scripted = match s.failures.pop_front() {
            None | Some(Failure::Pass) => None,
            Some(Failure::RateLimited(secs)) => Some(error(
                429,
                &format!("Too Many Requests: retry after {secs}"),
                Some(json!({"retry_after": secs})),
            )),
            Some(Failure::Server) => Some(error(500, "Internal Server Error", None)),
            Some(Failure::Revoked) => Some(error(401, "Unauthorized", None)),
            Some(Failure::NotJson) => {
                Some((502, "<html><body>502 Bad Gateway</body></html>".into()))
            }
            Some(Failure::ChatNotFound) => Some(error(400, "Bad Request: chat not found", None)),
        };
        if let Some(answer) = scripted {
            return answer;
        }
        let Some(chat_id) = body["chat_id"].as_i64() else {
            return error(400, "Bad Request: chat_id is empty", None);
        };
        let text = body["text"].as_str().unwrap_or_default();
        if text.is_empty() {
            return error(400, "Bad Request: message text is empty", None);
        }
        if text.encode_utf16().count() > 4096 {
            return error(400, "Bad Request: message is too long", None);
        }
        let message_id = s.next_message;
        s.next_message += 1;
        let thread = body["message_thread_id"].as_i64();
        s.sent.push(Sent {
            chat_id,
            thread,
            text: text.to_string(),
            message_id,
        });
        ok(json!({"message_id": message_id, "date": 1_700_000_000,
                  "chat": {"id": chat_id, "type": "private"}, "text": text}))
    }
}

fn ok(result: Value) -> (u16, String) {
    (200, json!({"ok": true, "result": result}).to_string())
}

fn error(code: u16, description: &str, parameters: Option<Value>) -> (u16, String) {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (code, body.to_string())
}

/// One request as the fakes read it.
pub struct Post {
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`null` when there is none or it is not JSON).
    pub body: Value,
}

impl Post {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request: its path, headers and JSON body.
pub async fn read_post(sock: &mut tokio::net::TcpStream) -> Option<Post> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_len = loop {
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if data.len() > 64 * 1024 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_len]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    while data.len() < head_len + length {
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = serde_json::from_slice(&data[head_len..head_len + length]).unwrap_or(Value::Null);
    Some(Post {
        path,
        headers,
        body,
    })
}
