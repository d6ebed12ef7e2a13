//! Discord's gateway, the inbound side (https://discord.com/developers/docs/events/gateway),
//! over `tokio-tungstenite` (docs/ARCHITECTURE.md, "Channels: Discord", says why not
//! `twilight-gateway`): connect, HELLO, heartbeats every `heartbeat_interval` (the first
//! after a random part of it), IDENTIFY with the intents the channel needs, READY (the
//! session, its resume URL, the bot's user), each dispatch's `s` kept, MESSAGE_CREATE handed
//! to the handler. A connection that ends is resumed (op 6 on `resume_gateway_url` with the
//! last `s`, so Discord replays what was missed): on a missed HEARTBEAT_ACK, op 7 RECONNECT,
//! op 9 INVALID SESSION with `d: true`, a dropped socket or a close code Discord lets resume.
//! op 9 with `d: false` (and closes 4007/4009) start a new session after a pause. A close
//! Discord means as final (4004 authentication failed, 4014 disallowed intents, …) stops
//! the channel with the reason. Reconnects after a connection that never got going wait
//! by backoff (`backon`). Frames are bounded (`MAX_MESSAGE`); nothing is queued: a message
//! is handed over before the next frame is read.

use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;
pub use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message as Frame};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::events::{Hello, Message, Payload, Ready, User, intents, op};

/// The largest gateway message read (READY of a bot in many guilds is the largest payload
/// the intents asked bring; far below this).
pub const MAX_MESSAGE: usize = 4 << 20;
const MAX_FRAME: usize = 1 << 20;

/// Gateway API version and encoding, as the URL asks.
const QUERY: &str = "v=10&encoding=json";

/// How long a connection (TCP, TLS, WebSocket) and HELLO may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Heartbeat intervals outside this are taken at its bounds (a hostile HELLO must not spin
/// the loop or silence it).
const MIN_HEARTBEAT: Duration = Duration::from_millis(50);
const MAX_HEARTBEAT: Duration = Duration::from_secs(600);

/// The close code that keeps the session resumable (1000 and 1001 end it, per Discord).
const CLOSE_TO_RESUME: u16 = 4000;

/// What the gateway needs.
#[derive(Clone)]
pub struct GatewayOptions {
    pub token: String,
    /// `wss://gateway.discord.gg` (from `GET /gateway/bot`) or a configured one.
    pub url: String,
    /// TLS for `wss://` (rustls with ring, the process's roots); `None`: tungstenite's own.
    pub connector: Option<Connector>,
    pub intents: u64,
}

impl std::fmt::Debug for GatewayOptions {
    // Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayOptions")
            .field("url", &self.url)
            .field("intents", &self.intents)
            .finish_non_exhaustive()
    }
}

impl GatewayOptions {
    pub fn new(token: &str, url: &str, connector: Option<Connector>) -> GatewayOptions {
        GatewayOptions {
            token: token.trim().to_string(),
            url: url.trim().to_string(),
            connector,
            intents: intents::ASKED,
        }
    }
}

/// What the gateway hands over.
#[async_trait]
pub trait Handler: Send + Sync {
    /// READY: the bot's own user (its id tells its own messages and mentions).
    async fn ready(&self, me: &User);
    /// One MESSAGE_CREATE (a resumed session may hand over one already seen: the handler
    /// records by the message's id). `Err`: not recorded (the store away): the connection is
    /// resumed from before it, so Discord sends it again.
    async fn message(&self, me: &User, message: Message) -> Result<(), String>;
    /// A thread the bot can see, and the channel it is in (THREAD_CREATE, THREAD_UPDATE,
    /// THREAD_LIST_SYNC, the threads of GUILD_CREATE).
    async fn thread(&self, thread: &str, parent: &str) {
        let _ = (thread, parent);
    }
}

/// The pause before resuming to have a message the handler could not record sent again.
const UNRECORDED_PAUSE: Duration = Duration::from_secs(2);

/// A close Discord means as final: the channel stops, saying which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fatal {
    /// 4004.
    AuthenticationFailed,
    /// 4014: a privileged intent not enabled for the bot.
    DisallowedIntents,
    /// 4013.
    InvalidIntents,
    /// 4010, 4011: this bot needs sharding (2,500 guilds and more), not built here.
    Sharding,
    /// 4012.
    InvalidApiVersion,
}

impl Fatal {
    pub fn from_close(code: u16) -> Option<Fatal> {
        Some(match code {
            4004 => Fatal::AuthenticationFailed,
            4014 => Fatal::DisallowedIntents,
            4013 => Fatal::InvalidIntents,
            4010 | 4011 => Fatal::Sharding,
            4012 => Fatal::InvalidApiVersion,
            _ => return None,
        })
    }

    /// What the owner reads in the log, with what to do.
    pub fn explain(self) -> &'static str {
        match self {
            Fatal::AuthenticationFailed => {
                "Discord refused the bot's token (close 4004): set channels.discord.token (or \
                 $DISCORD_BOT_TOKEN) to the token of the Developer Portal's Bot page"
            }
            Fatal::DisallowedIntents => {
                "Discord refused the intents (close 4014): enable MESSAGE CONTENT INTENT in the \
                 Developer Portal (your application → Bot → Privileged Gateway Intents)"
            }
            Fatal::InvalidIntents => "Discord refused the intents as invalid (close 4013)",
            Fatal::Sharding => {
                "Discord asks this bot to shard (close 4010/4011: it is in too many guilds); \
                 sharding is not built here"
            }
            Fatal::InvalidApiVersion => "Discord refused the gateway's API version (close 4012)",
        }
    }
}

/// Why the gateway stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Asked,
    Refused(Fatal),
}

/// The session a resume continues.
#[derive(Debug, Clone)]
struct Session {
    id: String,
    resume_url: String,
    me: User,
}

/// How one connection ended.
#[derive(Debug)]
enum End {
    Asked,
    Fatal(Fatal),
    Again {
        /// The session may be resumed.
        resume: bool,
        /// The connection got as far as READY or RESUMED.
        healthy: bool,
        /// Wait this long first (op 9's pause before a new IDENTIFY).
        pause: Option<Duration>,
        why: String,
    },
}

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// Run the gateway until `stop` resolves or Discord closes for good.
pub async fn run(
    options: &GatewayOptions,
    handler: &dyn Handler,
    stop: impl std::future::Future<Output = ()>,
) -> Stopped {
    let mut stop = std::pin::pin!(stop);
    let mut session: Option<Session> = None;
    let mut seq: Option<u64> = None;
    let mut pauses = backoff();
    loop {
        let end = connection(options, handler, &mut session, &mut seq, stop.as_mut()).await;
        let (resume, healthy, pause, why) = match end {
            End::Asked => return Stopped::Asked,
            End::Fatal(fatal) => return Stopped::Refused(fatal),
            End::Again {
                resume,
                healthy,
                pause,
                why,
            } => (resume, healthy, pause, why),
        };
        if !resume {
            session = None;
            seq = None;
        }
        tracing::info!(%why, resume = session.is_some(), "Discord gateway: reconnecting");
        if healthy {
            pauses = backoff();
        }
        let wait = match (pause, healthy) {
            (Some(p), _) => Some(p),
            (None, true) => None,
            (None, false) => Some(pauses.next().unwrap_or(Duration::from_secs(60))),
        };
        if let Some(wait) = wait {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.as_mut() => return Stopped::Asked,
            }
        }
    }
}

/// Reconnect pauses after connections that never got going: 1 s doubling to a minute.
fn backoff() -> impl Iterator<Item = Duration> {
    backon::BackoffBuilder::build(
        backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(60))
            .with_jitter()
            .without_max_times(),
    )
}

/// `base` with the version and encoding asked.
fn with_query(base: &str) -> String {
    if base.contains('?') {
        return base.to_string();
    }
    format!("{}/?{QUERY}", base.trim_end_matches('/'))
}

/// A thread channel's id and its parent's, from a channel object.
fn thread_of(channel: &serde_json::Value) -> Option<(&str, &str)> {
    let id = channel.get("id")?.as_str()?;
    let parent = channel.get("parent_id")?.as_str()?;
    Some((id, parent))
}

/// A fraction in [0, 1) (the first heartbeat's jitter, op 9's pause).
fn random_fraction() -> f64 {
    f64::from(getrandom::u32().unwrap_or(u32::MAX / 2)) / (f64::from(u32::MAX) + 1.0)
}

/// One connection, from the dial to its end.
async fn connection(
    options: &GatewayOptions,
    handler: &dyn Handler,
    session: &mut Option<Session>,
    seq: &mut Option<u64>,
    mut stop: Pin<&mut impl std::future::Future<Output = ()>>,
) -> End {
    let again = |why: String| End::Again {
        resume: true,
        healthy: false,
        pause: None,
        why,
    };
    let base = session
        .as_ref()
        .map_or(options.url.as_str(), |s| s.resume_url.as_str());
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_FRAME));
    let dial = tokio_tungstenite::connect_async_tls_with_config(
        with_query(base),
        Some(config),
        false,
        options.connector.clone(),
    );
    let mut ws = tokio::select! {
        dialed = tokio::time::timeout(CONNECT_TIMEOUT, dial) => match dialed {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return again(format!("cannot connect: {e}")),
            Err(_) => return again("cannot connect: timed out".into()),
        },
        _ = stop.as_mut() => return End::Asked,
    };
    let hello = tokio::select! {
        hello = tokio::time::timeout(CONNECT_TIMEOUT, read_hello(&mut ws)) => match hello {
            Ok(Ok(h)) => h,
            Ok(Err(end)) => return end,
            Err(_) => return again("no HELLO".into()),
        },
        _ = stop.as_mut() => return End::Asked,
    };
    let interval =
        Duration::from_millis(hello.heartbeat_interval).clamp(MIN_HEARTBEAT, MAX_HEARTBEAT);
    let greeting = match session.as_ref() {
        Some(s) => json!({"op": op::RESUME, "d": {
            "token": options.token, "session_id": s.id, "seq": *seq }}),
        None => json!({"op": op::IDENTIFY, "d": {
            "token": options.token,
            "intents": options.intents,
            "properties": {"os": std::env::consts::OS, "browser": "switchboard",
                           "device": "switchboard"},
        }}),
    };
    if let Err(e) = send(&mut ws, &greeting).await {
        return again(format!("cannot identify: {e}"));
    }
    let mut live = Live {
        ws,
        handler,
        session,
        seq,
        healthy: false,
        awaiting_ack: false,
    };
    // The first beat after a random part of the interval, so many clients do not beat at once.
    let mut next_beat = Instant::now() + interval.mul_f64(random_fraction());
    loop {
        tokio::select! {
            _ = stop.as_mut() => {
                live.close(1000).await;
                return End::Asked;
            }
            _ = tokio::time::sleep_until(next_beat) => {
                if live.awaiting_ack {
                    // A zombie connection (Discord's word): close it and resume.
                    live.close(CLOSE_TO_RESUME).await;
                    return live.again(true, "no HEARTBEAT_ACK");
                }
                if let Err(e) = live.beat().await {
                    return live.again(true, &format!("cannot send a heartbeat: {e}"));
                }
                next_beat += interval;
            }
            frame = live.ws.next() => {
                if let Some(end) = live.frame(frame).await {
                    return end;
                }
            }
        }
    }
}

/// The first payload must be HELLO.
async fn read_hello(ws: &mut Ws) -> Result<Hello, End> {
    loop {
        let again = |why: String| End::Again {
            resume: true,
            healthy: false,
            pause: None,
            why,
        };
        match ws.next().await {
            Some(Ok(Frame::Text(text))) => {
                let payload: Payload = serde_json::from_str(&text)
                    .map_err(|e| again(format!("not a gateway payload: {e}")))?;
                if payload.op != op::HELLO {
                    return Err(again(format!("op {} before HELLO", payload.op)));
                }
                return serde_json::from_value(payload.d)
                    .map_err(|e| again(format!("a HELLO without its interval: {e}")));
            }
            Some(Ok(Frame::Close(frame))) => return Err(closed(frame, false)),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(again(format!("connection lost: {e}"))),
            None => return Err(again("connection closed".into())),
        }
    }
}

async fn send(ws: &mut Ws, payload: &Value) -> Result<(), tungstenite::Error> {
    ws.send(Frame::Text(payload.to_string().into())).await
}

/// How a close frame from Discord ends the connection.
fn closed(frame: Option<CloseFrame>, healthy: bool) -> End {
    let code = frame.as_ref().map(|f| u16::from(f.code)).unwrap_or(1005);
    if let Some(fatal) = Fatal::from_close(code) {
        return End::Fatal(fatal);
    }
    let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
    End::Again {
        // 4007 (invalid seq) and 4009 (session timed out): a new session.
        resume: !matches!(code, 4007 | 4009),
        healthy,
        pause: None,
        why: format!("closed by Discord ({code} {reason})"),
    }
}

/// A connection past HELLO.
struct Live<'a> {
    ws: Ws,
    handler: &'a dyn Handler,
    session: &'a mut Option<Session>,
    seq: &'a mut Option<u64>,
    healthy: bool,
    awaiting_ack: bool,
}

impl Live<'_> {
    fn again(&self, resume: bool, why: &str) -> End {
        End::Again {
            resume,
            healthy: self.healthy,
            pause: None,
            why: why.to_string(),
        }
    }

    async fn close(&mut self, code: u16) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "".into(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ws.close(Some(frame))).await;
    }

    async fn beat(&mut self) -> Result<(), tungstenite::Error> {
        self.awaiting_ack = true;
        send(&mut self.ws, &json!({"op": op::HEARTBEAT, "d": *self.seq})).await
    }

    /// Handle one frame; `Some` when the connection ends.
    async fn frame(&mut self, frame: Option<Result<Frame, tungstenite::Error>>) -> Option<End> {
        let text = match frame {
            Some(Ok(Frame::Text(text))) => text,
            Some(Ok(Frame::Close(frame))) => return Some(closed(frame, self.healthy)),
            Some(Ok(_)) => return None,
            Some(Err(e)) => return Some(self.again(true, &format!("connection lost: {e}"))),
            None => return Some(self.again(true, "connection closed")),
        };
        let payload: Payload = match serde_json::from_str(&text) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "Discord gateway: a payload that does not parse, skipped");
                return None;
            }
        };
        match payload.op {
            op::DISPATCH => {
                let before = *self.seq;
                if let Some(s) = payload.s {
                    *self.seq = Some(s);
                }
                if let Err(why) = self.dispatch(payload).await {
                    // Not recorded: resumed from before it, Discord sends it (and what came
                    // after) again; the handler records each once by its id.
                    *self.seq = before;
                    self.close(CLOSE_TO_RESUME).await;
                    return Some(End::Again {
                        resume: true,
                        healthy: false,
                        pause: Some(UNRECORDED_PAUSE),
                        why: format!(
                            "a message could not be recorded ({why}); it is asked for again"
                        ),
                    });
                }
                None
            }
            op::HEARTBEAT => match self.beat().await {
                Ok(()) => None,
                Err(e) => Some(self.again(true, &format!("cannot send a heartbeat: {e}"))),
            },
            op::HEARTBEAT_ACK => {
                self.awaiting_ack = false;
                None
            }
            op::RECONNECT => {
                self.close(CLOSE_TO_RESUME).await;
                Some(self.again(true, "Discord asked to reconnect (op 7)"))
            }
            op::INVALID_SESSION => {
                let resumable = payload.d.as_bool() == Some(true);
                self.close(CLOSE_TO_RESUME).await;
                Some(End::Again {
                    resume: resumable,
                    healthy: self.healthy,
                    // Discord asks for a pause of 1 to 5 s before a new IDENTIFY.
                    pause: (!resumable)
                        .then(|| Duration::from_secs(1).mul_f64(1.0 + 4.0 * random_fraction())),
                    why: "Discord invalidated the session (op 9)".into(),
                })
            }
            _ => None,
        }
    }

    async fn dispatch(&mut self, payload: Payload) -> Result<(), String> {
        match payload.t.as_deref() {
            Some("READY") => match serde_json::from_value::<Ready>(payload.d) {
                Ok(ready) => {
                    tracing::info!(bot = %ready.user.username, "Discord gateway: ready");
                    self.handler.ready(&ready.user).await;
                    *self.session = Some(Session {
                        id: ready.session_id,
                        resume_url: ready.resume_gateway_url,
                        me: ready.user,
                    });
                    self.healthy = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Discord gateway: a READY that does not parse")
                }
            },
            Some("THREAD_CREATE" | "THREAD_UPDATE") => {
                if let Some((id, parent)) = thread_of(&payload.d) {
                    self.handler.thread(id, parent).await;
                }
            }
            Some("GUILD_CREATE" | "THREAD_LIST_SYNC") => {
                let threads = payload
                    .d
                    .get("threads")
                    .and_then(serde_json::Value::as_array);
                for t in threads.into_iter().flatten() {
                    if let Some((id, parent)) = thread_of(t) {
                        self.handler.thread(id, parent).await;
                    }
                }
            }
            Some("RESUMED") => {
                tracing::info!("Discord gateway: resumed");
                self.healthy = true;
            }
            Some("MESSAGE_CREATE") => {
                let Some(me) = self.session.as_ref().map(|s| s.me.clone()) else {
                    return Ok(());
                };
                match serde_json::from_value::<Message>(payload.d) {
                    Ok(message) => return self.handler.message(&me, message).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "Discord gateway: a MESSAGE_CREATE that does not parse")
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_closes_stop_and_the_others_resume() {
        assert_eq!(Fatal::from_close(4004), Some(Fatal::AuthenticationFailed));
        assert_eq!(Fatal::from_close(4014), Some(Fatal::DisallowedIntents));
        assert!(matches!(
            closed(None, true),
            End::Again { resume: true, .. }
        ));
        let frame = |code: u16| {
            Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "".into(),
            })
        };
        assert!(matches!(
            closed(frame(4009), true),
            End::Again { resume: false, .. }
        ));
        assert!(matches!(
            closed(frame(4000), true),
            End::Again { resume: true, .. }
        ));
        assert!(matches!(
            closed(frame(4004), true),
            End::Fatal(Fatal::AuthenticationFailed)
        ));
    }

    #[test]
    fn a_refused_intent_says_which_switch_to_turn_on() {
        let why = Fatal::from_close(4014)
            .map(Fatal::explain)
            .unwrap_or_default();
        assert!(why.contains("MESSAGE CONTENT INTENT") && why.contains("Developer Portal"));
    }

    #[test]
    fn the_url_asks_for_version_10_in_json() {
        assert_eq!(
            with_query("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            with_query("ws://127.0.0.1:9/"),
            "ws://127.0.0.1:9/?v=10&encoding=json"
        );
        assert_eq!(with_query("ws://h/?v=10"), "ws://h/?v=10");
    }

    #[test]
    fn the_intents_are_guild_and_direct_messages_with_content() {
        assert_eq!(intents::ASKED, 37377);
    }
}
