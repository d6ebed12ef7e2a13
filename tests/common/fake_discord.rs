//! A local fake of Discord's REST API for sending messages
//! (https://discord.com/developers/docs/resources/message#create-message), for the Discord
//! channel's tests: `POST <root>/channels/<id>/messages` with `Authorization: Bot <token>`,
//! answered in Discord's shapes. It records each message, refuses content over 2,000
//! characters (400, code 50035), answers a repeated `nonce` with `enforce_nonce` by the message
//! it already made (as Discord does), `401` for a wrong token, `404` (10003) for channel
//! `404`, and the next answers can be scripted `429` with `retry_after`. It also answers
//! `GET /gateway/bot` with its gateway's URL, opens DM channels (`POST /users/@me/channels`),
//! and can limit each channel to one message per window with Discord's rate-limit headers
//! (`limit_each_channel`), answering a send inside a spent window with a 429 it counts as a
//! violation.
//!
//! Its gateway (https://discord.com/developers/docs/events/gateway) is a WebSocket server on
//! a second port speaking the documented opcodes: HELLO, HEARTBEAT_ACK, IDENTIFY → READY (with
//! `resume_gateway_url` pointing back at itself) or close 4004 for a wrong token, dispatches of
//! scripted MESSAGE_CREATEs with increasing `s`, RESUME → the missed dispatches replayed and
//! RESUMED, op 7 RECONNECT or a dropped socket on demand (with a message dispatched in between,
//! which the client only gets by resuming), and a mode in which a connection stops ACKing.

#![allow(dead_code)] // each test file uses part of it

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::fake_telegram::{Post, read_post};

/// A message the fake accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub content: String,
    pub id: String,
}

/// The bot's user id on the fake (mention it as `<@BOT_ID>`).
pub const BOT_ID: &str = "900000000000000001";

/// A command for the live gateway connection.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Command {
    /// Send op 7 RECONNECT.
    Reconnect,
    /// Drop the socket without a close frame.
    Drop,
}

#[derive(Default)]
struct State {
    posted: Vec<Posted>,
    /// `(channel, nonce)` → the message made for it.
    nonces: HashMap<(String, String), String>,
    rate_limited: VecDeque<f64>,
    next_id: u64,
    /// Each channel takes one message per this window (`limit_each_channel`).
    window: Option<Duration>,
    /// Channel → when its window reopens.
    spent_until: HashMap<String, Instant>,
    /// Sends that came inside a spent window.
    violations: usize,
    /// User id → their DM channel.
    dm_channels: HashMap<String, String>,
    gateway: Gateway,
}

/// The gateway's side of the state.
#[derive(Default)]
struct Gateway {
    /// Every MESSAGE_CREATE's `d`; the i-th is dispatched with `s = i + 2` (READY is 1).
    log: Vec<Value>,
    sessions: Vec<String>,
    connections: usize,
    /// Connections open now, and the most open at once.
    open: usize,
    max_open: usize,
    identifies: usize,
    resumes: usize,
    /// Connection number whose heartbeats go unanswered.
    deaf: Option<usize>,
    /// The live connection's next command, with the log length it must not dispatch past.
    command: Option<(usize, Command, usize)>,
    heartbeat_ms: u64,
    /// A resume replays the last dispatch the client had as well (which it must not record
    /// twice).
    replay_one_seen: bool,
    /// Close codes sent.
    closes: Vec<u16>,
    /// The app has not enabled the privileged MESSAGE CONTENT intent: an IDENTIFY asking for
    /// it is closed 4014, as Discord does.
    no_message_content: bool,
}

#[derive(Clone)]
pub struct FakeDiscord {
    /// `http://127.0.0.1:<port>/api/v10`: the `apiRoot` to configure.
    pub api_root: String,
    /// `ws://127.0.0.1:<port>`: its gateway (`GET /gateway/bot` answers it too).
    pub gateway_url: String,
    token: String,
    state: Arc<Mutex<State>>,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl FakeDiscord {
    pub async fn start(token: &str) -> FakeDiscord {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let gateway = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let gateway_addr = gateway.local_addr().expect("addr");
        let fake = FakeDiscord {
            api_root: format!("http://{addr}/api/v10"),
            gateway_url: format!("ws://{gateway_addr}"),
            token: token.to_string(),
            state: Arc::new(Mutex::new(State {
                next_id: 1_100_000_000_000_000_000,
                gateway: Gateway {
                    heartbeat_ms: 1000,
                    ..Gateway::default()
                },
                ..State::default()
            })),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
        };
        let serving = fake.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = gateway.accept().await {
                tokio::spawn(serving.clone().gateway_connection(sock));
            }
        });
        let serving = fake.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let fake = serving.clone();
                tokio::spawn(async move {
                    let Some(post) = read_post(&mut sock).await else {
                        return;
                    };
                    let (status, body, extra) = fake.answer(&post);
                    let extra: String =
                        extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
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

    /// Each channel takes one message per `window`, said in Discord's headers; a send inside
    /// a spent window is a 429 and a violation.
    pub fn limit_each_channel(&self, window: Duration) {
        self.state().window = Some(window);
    }

    pub fn violations(&self) -> usize {
        self.state().violations
    }

    fn answer(&self, post: &Post) -> (u16, String, Vec<(String, String)>) {
        if post.header("authorization") == Some(&format!("Bot {}", self.token)) {
            if post.path == "/api/v10/gateway/bot" {
                let body = json!({"url": self.gateway_url, "shards": 1,
                    "session_start_limit": {"total": 1000, "remaining": 999,
                                            "reset_after": 0, "max_concurrency": 1}});
                return (200, body.to_string(), Vec::new());
            }
            if post.path == "/api/v10/users/@me/channels" {
                let user = post.body["recipient_id"].as_str().unwrap_or_default();
                return match self.state().dm_channels.get(user) {
                    Some(id) => (200, json!({"id": id, "type": 1}).to_string(), Vec::new()),
                    None => (
                        400,
                        json!({"message": "Cannot send messages to this user", "code": 50007})
                            .to_string(),
                        Vec::new(),
                    ),
                };
            }
        }
        let (status, body) = self.answer_post(post);
        let Some(window) = self.state().window else {
            return (status, body, Vec::new());
        };
        let headers = vec![
            ("X-RateLimit-Bucket".to_string(), "fakebucket".to_string()),
            ("X-RateLimit-Limit".to_string(), "1".to_string()),
            ("X-RateLimit-Remaining".to_string(), "0".to_string()),
            (
                "X-RateLimit-Reset-After".to_string(),
                format!("{:.3}", window.as_secs_f64()),
            ),
        ];
        (status, body, headers)
    }

    fn answer_post(&self, post: &Post) -> (u16, String) {
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
        if let Some(window) = s.window {
            let now = Instant::now();
            if s.spent_until.get(channel).is_some_and(|until| *until > now) {
                s.violations += 1;
                return (
                    429,
                    json!({"message": "You are being rate limited.",
                           "retry_after": window.as_secs_f64(), "global": false})
                    .to_string(),
                );
            }
            s.spent_until.insert(channel.to_string(), now + window);
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

/// The gateway's side: scripted messages, and the live connection's behaviour.
impl FakeDiscord {
    fn wake(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// Heartbeat interval HELLO asks for (1,000 ms unless set; before the client connects).
    pub fn heartbeat_every(&self, ms: u64) {
        self.state().gateway.heartbeat_ms = ms;
    }

    fn next_id(&self) -> String {
        let mut s = self.state();
        s.next_id += 1;
        s.next_id.to_string()
    }

    fn push(&self, d: Value) {
        self.state().gateway.log.push(d);
        self.wake();
    }

    fn message(
        &self,
        guild: Option<&str>,
        channel: &str,
        author: (&str, &str),
        text: &str,
    ) -> Value {
        let mentions: Vec<Value> = if text.contains(&format!("<@{BOT_ID}>")) {
            vec![json!({"id": BOT_ID, "username": "switchboard", "bot": true})]
        } else {
            Vec::new()
        };
        let mut d = json!({
            "id": self.next_id(),
            "channel_id": channel,
            "author": {"id": author.0, "username": author.1.to_lowercase(),
                       "global_name": author.1},
            "content": text,
            "mentions": mentions,
            "type": 0,
        });
        if let Some(g) = guild {
            d["guild_id"] = json!(g);
            d["member"] = json!({"nick": null, "roles": []});
        }
        d
    }

    /// A message in guild `guild`'s channel `channel` from user `(id, name)`.
    pub fn guild_message(&self, guild: &str, channel: &str, author: (&str, &str), text: &str) {
        let d = self.message(Some(guild), channel, author, text);
        self.push(d);
    }

    /// Thread `thread` opened in guild `guild`'s channel `parent` (THREAD_CREATE).
    pub fn thread_created(&self, guild: &str, thread: &str, parent: &str) {
        // `_event`: dispatched as this event rather than a MESSAGE_CREATE (and left out).
        self.push(
            json!({"_event": "THREAD_CREATE", "id": thread, "parent_id": parent,
                         "guild_id": guild, "type": 11, "name": "a thread"}),
        );
    }

    /// A direct message from user `(id, name)` in their DM channel `dm_channel`.
    pub fn direct(&self, dm_channel: &str, author: (&str, &str), text: &str) {
        self.state()
            .dm_channels
            .insert(author.0.to_string(), dm_channel.to_string());
        let d = self.message(None, dm_channel, author, text);
        self.push(d);
    }

    /// Send op 7 on the live connection; `missed`, a guild message dispatched after it (so
    /// the client gets it only by resuming).
    pub fn reconnect_missing(
        &self,
        guild: &str,
        channel: &str,
        author: (&str, &str),
        missed: &str,
    ) {
        self.command_missing(Command::Reconnect, guild, channel, author, missed);
    }

    /// Drop the live connection's socket (no close frame), with `missed` as in
    /// `reconnect_missing`.
    pub fn drop_missing(&self, guild: &str, channel: &str, author: (&str, &str), missed: &str) {
        self.command_missing(Command::Drop, guild, channel, author, missed);
    }

    fn command_missing(
        &self,
        command: Command,
        guild: &str,
        channel: &str,
        author: (&str, &str),
        missed: &str,
    ) {
        let d = self.message(Some(guild), channel, author, missed);
        self.command(command, Some(d));
    }

    /// Give `command` to the live connection, with `missed` logged after what it dispatches.
    fn command(&self, command: Command, missed: Option<Value>) {
        let mut s = self.state();
        let live = s.gateway.connections;
        let upto = s.gateway.log.len();
        s.gateway.command = Some((live, command, upto));
        s.gateway.log.extend(missed);
        drop(s);
        self.wake();
    }

    /// Send op 7 on the live connection, having forgotten its session: the client's RESUME
    /// is answered with op 9 (`d: false`), and it must IDENTIFY anew.
    pub fn reconnect_forgetting_the_session(&self) {
        self.state().gateway.sessions.clear();
        self.command(Command::Reconnect, None);
    }

    /// Each resume replays the last message the client had too (at-least-once, as a client
    /// must expect).
    pub fn replay_one_seen_on_resume(&self) {
        self.state().gateway.replay_one_seen = true;
    }

    /// The bot's app has MESSAGE CONTENT INTENT off in the Developer Portal.
    pub fn disallow_message_content(&self) {
        self.state().gateway.no_message_content = true;
    }

    /// The live connection stops answering heartbeats.
    pub fn stop_acking(&self) {
        let mut s = self.state();
        s.gateway.deaf = Some(s.gateway.connections);
    }

    pub fn identifies(&self) -> usize {
        self.state().gateway.identifies
    }

    pub fn resumes(&self) -> usize {
        self.state().gateway.resumes
    }

    /// The most gateway connections open at once.
    pub fn max_open(&self) -> usize {
        self.state().gateway.max_open
    }

    pub fn connections(&self) -> usize {
        self.state().gateway.connections
    }

    /// Close codes the gateway sent.
    pub fn closes(&self) -> Vec<u16> {
        self.state().gateway.closes.clone()
    }

    /// One gateway connection, from HELLO to its end.
    async fn gateway_connection(self, sock: tokio::net::TcpStream) {
        let Ok(mut ws) = tokio_tungstenite::accept_async(sock).await else {
            return;
        };
        let mut changed = self.changed.subscribe();
        let (me, heartbeat) = {
            let mut s = self.state();
            s.gateway.connections += 1;
            s.gateway.open += 1;
            s.gateway.max_open = s.gateway.max_open.max(s.gateway.open);
            (s.gateway.connections, s.gateway.heartbeat_ms)
        };
        let _open = OpenConnection(self.state.clone());
        let send = |v: Value| Frame::Text(v.to_string().into());
        if ws
            .send(send(
                json!({"op": 10, "d": {"heartbeat_interval": heartbeat}}),
            ))
            .await
            .is_err()
        {
            return;
        }
        // Dispatched so far (log entries); `None` until READY or RESUMED.
        let mut cursor: Option<usize> = None;
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(Ok(Frame::Text(text))) = frame else {
                        match frame {
                            Some(Ok(_)) => continue,
                            _ => return,
                        }
                    };
                    let Ok(payload) = serde_json::from_str::<Value>(&text) else { return };
                    match payload["op"].as_u64() {
                        Some(1) => {
                            let deaf = self.state().gateway.deaf == Some(me);
                            if !deaf && ws.send(send(json!({"op": 11}))).await.is_err() {
                                return;
                            }
                        }
                        Some(2) => {
                            if payload["d"]["token"].as_str() != Some(&self.token) {
                                self.close(&mut ws, 4004, "Authentication failed.").await;
                                return;
                            }
                            let asks_content =
                                payload["d"]["intents"].as_u64().unwrap_or(0) & (1 << 15) != 0;
                            if asks_content && self.state().gateway.no_message_content {
                                self.close(&mut ws, 4014, "Disallowed intent(s).").await;
                                return;
                            }
                            let (session, upto) = {
                                let mut s = self.state();
                                s.gateway.identifies += 1;
                                let id = format!("session-{me}");
                                s.gateway.sessions.push(id.clone());
                                (id, s.gateway.log.len())
                            };
                            let ready = json!({"op": 0, "s": 1, "t": "READY", "d": {
                                "v": 10, "session_id": session,
                                "resume_gateway_url": self.gateway_url,
                                "user": {"id": BOT_ID, "username": "switchboard", "bot": true},
                                "guilds": []}});
                            if ws.send(send(ready)).await.is_err() {
                                return;
                            }
                            cursor = Some(upto);
                        }
                        Some(6) => {
                            let d = &payload["d"];
                            let known = d["session_id"].as_str().is_some_and(|id| {
                                self.state().gateway.sessions.iter().any(|s| s == id)
                            });
                            if d["token"].as_str() != Some(&self.token) {
                                self.close(&mut ws, 4004, "Authentication failed.").await;
                                return;
                            }
                            if !known {
                                let _ = ws.send(send(json!({"op": 9, "d": false}))).await;
                                continue;
                            }
                            self.state().gateway.resumes += 1;
                            // Everything after the client's last `s` (message i has s = i + 2).
                            let seq = d["seq"].as_u64().unwrap_or(1) as usize;
                            let seen = usize::from(self.state().gateway.replay_one_seen);
                            cursor = Some(seq.saturating_sub(1 + seen));
                            if !self.dispatch(&mut ws, &mut cursor, None).await {
                                return;
                            }
                            let resumed = json!({"op": 0, "t": "RESUMED", "d": {},
                                "s": cursor.unwrap_or(0) + 1});
                            if ws.send(send(resumed)).await.is_err() {
                                return;
                            }
                        }
                        _ => {}
                    }
                }
                woke = changed.changed() => {
                    if woke.is_err() {
                        return;
                    }
                    let command = {
                        let mut s = self.state();
                        match s.gateway.command {
                            Some((conn, c, upto)) if conn == me => {
                                s.gateway.command = None;
                                Some((c, upto))
                            }
                            _ => None,
                        }
                    };
                    if let Some((command, upto)) = command {
                        if !self.dispatch(&mut ws, &mut cursor, Some(upto)).await {
                            return;
                        }
                        match command {
                            Command::Reconnect => {
                                let _ = ws.send(send(json!({"op": 7, "d": null}))).await;
                                // Nothing more on this connection: the client resumes elsewhere.
                                cursor = None;
                            }
                            Command::Drop => return,
                        }
                        continue;
                    }
                    if !self.dispatch(&mut ws, &mut cursor, None).await {
                        return;
                    }
                }
            }
        }
    }

    /// Send the log past `cursor` (up to `upto`) as MESSAGE_CREATEs; false when the socket
    /// is gone.
    async fn dispatch(
        &self,
        ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        cursor: &mut Option<usize>,
        upto: Option<usize>,
    ) -> bool {
        let Some(from) = *cursor else {
            return true;
        };
        let pending: Vec<Value> = {
            let s = self.state();
            let end = upto.unwrap_or(s.gateway.log.len()).min(s.gateway.log.len());
            s.gateway
                .log
                .get(from..end)
                .map(<[Value]>::to_vec)
                .unwrap_or_default()
        };
        for (i, mut d) in pending.into_iter().enumerate() {
            let s = from + i + 2;
            let t = d
                .as_object_mut()
                .and_then(|o| o.remove("_event"))
                .and_then(|e| e.as_str().map(str::to_string))
                .unwrap_or_else(|| "MESSAGE_CREATE".into());
            let event = json!({"op": 0, "t": t, "s": s, "d": d});
            if ws
                .send(Frame::Text(event.to_string().into()))
                .await
                .is_err()
            {
                return false;
            }
            *cursor = Some(from + i + 1);
        }
        true
    }

    async fn close(
        &self,
        ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        code: u16,
        reason: &str,
    ) {
        self.state().gateway.closes.push(code);
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: reason.to_string().into(),
        };
        let _ = ws.close(Some(frame)).await;
    }
}

/// Counts a gateway connection as open until it ends.
struct OpenConnection(Arc<Mutex<State>>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.lock() {
            s.gateway.open -= 1;
        }
    }
}
