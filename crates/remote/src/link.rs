//! `Link`: one WebSocket connection to a gateway, kept up. It dials, answers the challenge
//! with `connect`, then one task owns the socket: requests come in on a channel and are
//! matched to their `res` by id; events are checked for gaps and broadcast; a `health`
//! request every few seconds measures the round trip. A dropped connection fails what was
//! pending and is dialled again with backoff, forever; a handshake refused for now (a
//! lockout, a full gateway) is dialled again too, no sooner than the gateway asked; one
//! refused for good (token, protocol) is final.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::refusal::Refusal;
use super::rpc::{Rpc, RpcError, WireEvent};
use switchboard_protocol::{
    AuthParams, ClientInfo, ConnectChallenge, ConnectParams, DeviceAuth, ErrorShape, Frame,
    HelloOk, INVALID_REQUEST, MAX_PAYLOAD_CEILING, MIN_CLIENT_PROTOCOL, PROTOCOL_VERSION, Request,
    Response, switchboard,
};
use switchboard_types::api::LinkState;

/// Signs the `connect` with a device identity (Ed25519 over OpenClaw's v3 payload string).
/// Implemented where the key lives; the link only asks for the signature.
pub trait DeviceSigner: Send + Sync {
    fn sign(
        &self,
        client: &ClientInfo,
        role: &str,
        scopes: &[String],
        token: Option<&str>,
        nonce: &str,
        ts: u64,
    ) -> DeviceAuth;
}

/// How to reach a gateway.
#[derive(Clone)]
pub struct LinkOptions {
    /// `ws://host:port` or `wss://…`, as the user typed it; several, separated by commas
    /// (`ws://a:18789,ws://b:18789`), are gateway nodes on one store: the link fails over to
    /// the next when one dies.
    pub target: String,
    pub token: Option<String>,
    /// A CA bundle for `wss://` (passed to the TLS connector).
    pub tls_ca: Option<PathBuf>,
    pub device: Option<Arc<dyn DeviceSigner>>,
    /// The longest a request waits for its answer.
    pub request_timeout: Duration,
    /// The longest dialling plus the handshake may take.
    pub connect_timeout: Duration,
    /// How often the round trip is measured (and a silent connection noticed).
    pub ping_every: Duration,
}

impl LinkOptions {
    pub fn new(target: impl Into<String>, token: Option<String>) -> LinkOptions {
        LinkOptions {
            target: target.into(),
            token,
            tls_ca: None,
            device: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            ping_every: Duration::from_secs(5),
        }
    }
}

/// Why dialling did not give a connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DialError {
    /// Worth trying again (nothing listening, a dropped socket, a timeout).
    #[error("{0}")]
    Transient(String),
    /// The gateway said no (token, protocol, pairing) or the address cannot work: final.
    #[error("{0}")]
    Refused(String),
    /// The gateway said not now (a lockout, too many connections, shutting down): dial
    /// again, no sooner than `retry_after` when it said how long.
    #[error("{reason}")]
    Deferred {
        reason: String,
        retry_after: Option<Duration>,
    },
}

/// The port a `ws://host` target without one dials (the gateway's default).
pub const DEFAULT_PORT: u16 = 18789;

/// The first backoff after a drop, and the most it grows to.
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long a fresh reconnection shows as `resynced`.
const RESYNCED_FOR: Duration = Duration::from_secs(5);
/// Events buffered for subscribers that fall behind (they then see `Lagged`).
const EVENT_BUFFER: usize = 4096;

type Ws = WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

struct Call {
    method: String,
    params: Value,
    /// Wait for the second `res` (OpenClaw's `agent` answers `accepted` first).
    want_final: bool,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

struct Shared {
    options: LinkOptions,
    /// The nodes of `options.target`, and the one dialled last.
    nodes: Vec<String>,
    current: std::sync::atomic::AtomicUsize,
    events: broadcast::Sender<WireEvent>,
    state: watch::Sender<LinkState>,
    hello: Mutex<Option<HelloOk>>,
    /// Subscriptions made, re-sent after every reconnect.
    subscriptions: Mutex<Vec<(String, Value)>>,
}

/// A kept-up connection to a gateway; cheap to clone, the socket task ends when the last
/// clone is dropped.
#[derive(Clone)]
pub struct Link {
    shared: Arc<Shared>,
    calls: mpsc::UnboundedSender<Call>,
}

impl Link {
    /// Dials and completes the handshake once (an unreachable or refusing gateway is an error
    /// here, at once), then keeps the connection up in the background.
    pub async fn connect(options: LinkOptions) -> Result<Link, DialError> {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (state, _) = watch::channel(LinkState::Connecting { attempt: 1 });
        let nodes = nodes(&options.target);
        let shared = Arc::new(Shared {
            options,
            nodes,
            current: std::sync::atomic::AtomicUsize::new(0),
            events,
            state,
            hello: Mutex::new(None),
            subscriptions: Mutex::new(Vec::new()),
        });
        let (ws, hello) = match shared.dial_from(0).await {
            Ok(x) => x,
            Err(e) => {
                shared.state.send_replace(LinkState::Failed {
                    message: e.to_string(),
                });
                return Err(e);
            }
        };
        shared.set_connected(&hello, None, false);
        let (calls, rx) = mpsc::unbounded_channel();
        tokio::spawn(keep_up(shared.clone(), ws, rx));
        Ok(Link { shared, calls })
    }

    async fn call(&self, method: &str, params: Value, want_final: bool) -> Result<Value, RpcError> {
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(Call {
                method: method.to_string(),
                params,
                want_final,
                reply,
            })
            .map_err(|_| RpcError::Unavailable("the gateway connection has ended".into()))?;
        let limit = self.shared.options.request_timeout;
        match tokio::time::timeout(limit, answer).await {
            Err(_) => Err(RpcError::Timeout(
                u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            )),
            Ok(Err(_)) => Err(RpcError::Unavailable(
                "the gateway connection has ended".into(),
            )),
            Ok(Ok(r)) => r,
        }
    }
}

#[async_trait]
impl Rpc for Link {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.call(method, params, false).await
    }

    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.call(method, params, true).await
    }

    fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.shared.events.subscribe()
    }

    fn hello(&self) -> Option<HelloOk> {
        self.shared.hello.lock().ok().and_then(|h| h.clone())
    }

    fn state(&self) -> watch::Receiver<LinkState> {
        self.shared.state.subscribe()
    }

    fn target(&self) -> String {
        self.shared.current_node()
    }
}

/// The nodes a target names: its comma-separated addresses, in order.
pub fn nodes(target: &str) -> Vec<String> {
    let list: Vec<String> = target
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if list.is_empty() {
        vec![target.to_string()]
    } else {
        list
    }
}

impl Shared {
    fn current_node(&self) -> String {
        let i = self.current.load(std::sync::atomic::Ordering::SeqCst);
        self.nodes.get(i).cloned().unwrap_or_default()
    }

    /// Dial the nodes in turn from `start` until one answers; the node it is remembers. A
    /// node that is away or busy leaves the others to try (and, when all are, the link to
    /// retry); a refusal is final only when every node refused.
    async fn dial_from(&self, start: usize) -> Result<(Ws, HelloOk), DialError> {
        let n = self.nodes.len().max(1);
        let mut retry: Option<DialError> = None;
        let mut refused: Option<DialError> = None;
        for k in 0..n {
            let i = (start + k) % n;
            let Some(node) = self.nodes.get(i) else { break };
            match dial(&self.options, node).await {
                Ok(x) => {
                    if n > 1 && k > 0 {
                        tracing::info!(%node, "attached to another gateway node");
                    }
                    self.current.store(i, std::sync::atomic::Ordering::SeqCst);
                    return Ok(x);
                }
                Err(e @ DialError::Refused(_)) => {
                    refused.get_or_insert(e);
                }
                Err(e) => {
                    retry.get_or_insert(e);
                }
            }
        }
        Err(retry
            .or(refused)
            .unwrap_or_else(|| DialError::Refused("no gateway address".into())))
    }
}

impl Shared {
    fn set_connected(&self, hello: &HelloOk, rtt_ms: Option<u64>, resynced: bool) {
        if let Ok(mut h) = self.hello.lock() {
            *h = Some(hello.clone());
        }
        self.state.send_replace(LinkState::Connected {
            protocol: hello.protocol,
            server: server_name(hello),
            rtt_ms,
            resynced,
        });
    }
}

/// `switchboard 0.1.0` or `openclaw 2026.9.6`: ours lists its own methods.
fn server_name(hello: &HelloOk) -> String {
    let ours = hello
        .features
        .methods
        .iter()
        .any(|m| m.starts_with("switchboard."));
    let name = if ours { "switchboard" } else { "openclaw" };
    format!("{name} {}", hello.server.version)
}

/// A method whose effect lives as long as the connection: repeated after a reconnect.
fn is_subscription(method: &str) -> bool {
    method == switchboard::method::SUBSCRIBE || method.ends_with(".subscribe")
}

/// The delays between redials: 250 ms doubling to 5 s, each plus a random part of itself (up
/// to as much again), so clients dropped together do not all return at the same instant.
pub fn redial_delays() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(BACKOFF_FIRST)
        .with_max_delay(BACKOFF_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

fn text(frame: &Frame) -> Result<Message, DialError> {
    frame
        .encode()
        .map(Message::text)
        .map_err(|e| DialError::Refused(e.to_string()))
}

/// The host (an IPv6 literal keeps its brackets) and port of a `ws://` or `wss://` target;
/// the port defaults to the gateway's. The one parser of gateway URLs: the dial and the
/// CLI's loopback check both read targets through it.
pub fn host_port(target: &str) -> Result<(String, u16), String> {
    let uri: tokio_tungstenite::tungstenite::http::Uri = target
        .parse()
        .map_err(|e| format!("{target}: not a URL ({e})"))?;
    if !matches!(uri.scheme_str(), Some("ws" | "wss")) {
        return Err(format!(
            "{target}: the address must start with ws:// or wss://"
        ));
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("{target}: no host"))?;
    Ok((host.to_string(), uri.port_u16().unwrap_or(DEFAULT_PORT)))
}

/// The host:port a target is dialled at.
fn address(target: &str) -> Result<String, DialError> {
    let (host, port) = host_port(target).map_err(DialError::Refused)?;
    Ok(format!("{host}:{port}"))
}

/// Dial one node, challenge, connect, hello-ok.
async fn dial(options: &LinkOptions, node: &str) -> Result<(Ws, HelloOk), DialError> {
    let addr = address(node)?;
    tokio::time::timeout(options.connect_timeout, dial_inner(options, node, &addr))
        .await
        .map_err(|_| {
            DialError::Transient(format!(
                "no answer within {} s",
                options.connect_timeout.as_secs()
            ))
        })?
}

/// The certificate complaint in a failed wss:// handshake: the user's to fix (trust the
/// certificate), so dialling again would only fail again.
fn untrusted_certificate(e: &tokio_tungstenite::tungstenite::Error) -> Option<String> {
    use tokio_tungstenite::tungstenite::Error;
    let rustls_error = match e {
        Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    matches!(rustls_error, rustls::Error::InvalidCertificate(_)).then(|| rustls_error.to_string())
}

/// A gateway turning connections away for now (HTTP 503, as ours does at its connection
/// cap), with the wait its `Retry-After` names.
fn busy(e: &tokio_tungstenite::tungstenite::Error) -> Option<Option<Duration>> {
    let tokio_tungstenite::tungstenite::Error::Http(response) = e else {
        return None;
    };
    (response.status() == 503).then(|| {
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|secs| Duration::from_secs(secs).min(super::refusal::MAX_RETRY_AFTER))
    })
}

async fn dial_inner(
    options: &LinkOptions,
    node: &str,
    addr: &str,
) -> Result<(Ws, HelloOk), DialError> {
    // Reasons leave the address out: the header and the CLI's message already name it.
    let transient =
        |what: &str, e: &dyn std::fmt::Display| DialError::Transient(format!("{what}: {e}"));
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| transient("cannot reach", &e))?;
    let _ = tcp.set_nodelay(true);
    let connector = if node.starts_with("wss://") {
        // A bad CA file is the user's to fix: no retry.
        Some(
            super::tls::connector(options.tls_ca.as_deref())
                .map_err(|e| DialError::Refused(e.to_string()))?,
        )
    } else {
        None
    };
    // tungstenite's defaults (16 MiB frames) sit below what gateways advertise (OpenClaw's
    // 25 MiB): a frame within the gateway's maxPayload must never be refused here.
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_PAYLOAD_CEILING))
        .max_frame_size(Some(MAX_PAYLOAD_CEILING));
    let (mut ws, _) =
        tokio_tungstenite::client_async_tls_with_config(node, tcp, Some(config), connector)
            .await
            .map_err(|e| match untrusted_certificate(&e) {
                Some(why) => DialError::Refused(format!(
                    "the gateway's TLS certificate is not accepted ({why}): use the host name it \
was issued for, and if it is self-signed pass --tls-ca FILE with it (PEM)"
                )),
                None => match busy(&e) {
                    Some(retry_after) => DialError::Deferred {
                        reason: "the gateway has all the connections it takes (HTTP 503)".into(),
                        retry_after,
                    },
                    None => transient("WebSocket handshake failed", &e),
                },
            })?;
    let challenge = loop {
        match next_frame(&mut ws).await? {
            Frame::Event(e) if e.event == "connect.challenge" => {
                break e.payload_as::<ConnectChallenge>().map_err(|e| {
                    DialError::Refused(format!("not a gateway (bad challenge): {e}"))
                })?;
            }
            _ => continue,
        }
    };
    let client = ClientInfo {
        id: "cli".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        platform: std::env::consts::OS.into(),
        mode: "cli".into(),
        display_name: Some("switchboard".into()),
        extra: serde_json::Map::new(),
    };
    let role = "operator";
    let scopes: Vec<String> = ["operator.read", "operator.write", "operator.admin"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let device = options.device.as_ref().map(|d| {
        d.sign(
            &client,
            role,
            &scopes,
            options.token.as_deref(),
            &challenge.nonce,
            challenge.ts,
        )
    });
    let params = ConnectParams {
        min_protocol: MIN_CLIENT_PROTOCOL,
        max_protocol: PROTOCOL_VERSION,
        client,
        role: role.into(),
        scopes,
        caps: Some(vec![switchboard::CAP.to_string()]),
        auth: Some(AuthParams {
            token: options.token.clone(),
            extra: serde_json::Map::new(),
        }),
        locale: None,
        user_agent: Some(format!("switchboard/{}", env!("CARGO_PKG_VERSION"))),
        device,
        extra: serde_json::Map::new(),
    };
    let params = serde_json::to_value(&params).map_err(|e| DialError::Refused(e.to_string()))?;
    let id = "connect".to_string();
    let req = Frame::Req(Request {
        id: id.clone(),
        method: "connect".into(),
        params: Some(params),
        extra: serde_json::Map::new(),
    });
    ws.send(text(&req)?)
        .await
        .map_err(|e| transient("connection lost", &e))?;
    loop {
        match next_frame(&mut ws).await? {
            Frame::Res(r) if r.id == id => {
                if !r.ok {
                    let Some(error) = r.error else {
                        return Err(DialError::Refused("connect refused".into()));
                    };
                    let reason = format!("{}: {}", error.code, error.message);
                    return Err(match super::refusal::classify(&error) {
                        Refusal::Final => DialError::Refused(reason),
                        Refusal::Later { after } => DialError::Deferred {
                            reason,
                            retry_after: after,
                        },
                    });
                }
                let hello: HelloOk = r
                    .payload_as()
                    .map_err(|e| DialError::Refused(format!("bad hello-ok: {e}")))?;
                return Ok((ws, hello));
            }
            _ => continue,
        }
    }
}

/// The next decoded text frame during the handshake.
async fn next_frame(ws: &mut Ws) -> Result<Frame, DialError> {
    loop {
        match ws.next().await {
            None | Some(Ok(Message::Close(_))) => {
                return Err(DialError::Transient(
                    "the gateway closed the connection during the handshake".into(),
                ));
            }
            Some(Err(e)) => return Err(DialError::Transient(e.to_string())),
            Some(Ok(Message::Text(t))) => {
                return Frame::decode(t.as_str(), usize::MAX)
                    .map_err(|e| DialError::Refused(format!("not a gateway frame: {e}")));
            }
            Some(Ok(_)) => continue,
        }
    }
}

/// What a pending id is waiting for.
enum Pending {
    Call(oneshot::Sender<Result<Value, RpcError>>, bool),
    /// The round-trip probe, sent at this instant.
    Ping(Instant),
    /// A re-sent subscription: its answer is not needed.
    Ignore,
}

/// Why a connection ended.
enum Ended {
    /// Every `Link` is gone: stop.
    Unused,
    Dropped(String),
}

/// The socket task: drive the connection; when it drops, dial again until it works (or the
/// gateway refuses, or nobody uses the link any more).
async fn keep_up(shared: Arc<Shared>, first: Ws, mut calls: mpsc::UnboundedReceiver<Call>) {
    let mut ws = first;
    let mut since = None;
    loop {
        let reason = match drive(&shared, &mut ws, &mut calls, since).await {
            Ended::Unused => {
                let _ = ws.close(None).await;
                return;
            }
            Ended::Dropped(reason) => reason,
        };
        // Closed now, not when replaced: a gateway that went silent (not away) must see this
        // connection end, or it may wait on it forever while the redial waits on it.
        drop(ws);
        tracing::info!(target = %shared.options.target, %reason, "gateway connection lost");
        let mut attempt = 0u32;
        let mut delays = redial_delays();
        let mut reason = reason;
        // How long the gateway asked us to stay away, when it refused for now.
        let mut asked: Option<Duration> = None;
        ws = loop {
            attempt = attempt.saturating_add(1);
            let wait = delays
                .next()
                .unwrap_or(BACKOFF_MAX)
                .max(asked.take().unwrap_or_default());
            shared.state.send_replace(LinkState::Reconnecting {
                attempt,
                retry_in_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                message: reason.clone(),
            });
            if refuse_calls_for(wait, &mut calls, &reason).await.is_none() {
                return;
            }
            shared.state.send_replace(LinkState::Connecting {
                attempt: attempt + 1,
            });
            // The node that dropped is tried last: another one takes over first.
            let next = shared.current.load(std::sync::atomic::Ordering::SeqCst) + 1;
            match shared.dial_from(next).await {
                Ok((ws, hello)) => {
                    shared.set_connected(&hello, None, true);
                    break ws;
                }
                Err(DialError::Transient(r)) => reason = r,
                Err(DialError::Deferred {
                    reason: r,
                    retry_after,
                }) => {
                    tracing::info!(target = %shared.options.target, reason = %r, ?retry_after, "gateway refused the reconnection for now");
                    reason = r;
                    asked = retry_after;
                }
                Err(DialError::Refused(r)) => {
                    tracing::warn!(target = %shared.options.target, reason = %r, "gateway refused the reconnection");
                    shared
                        .state
                        .send_replace(LinkState::Failed { message: r.clone() });
                    // Final: every later call is told why, until the link is dropped.
                    while let Some(call) = calls.recv().await {
                        let _ = call.reply.send(Err(RpcError::Unavailable(r.clone())));
                    }
                    return;
                }
            }
        };
        since = Some(Instant::now());
    }
}

/// Answers calls made while disconnected at once (a front end must never hang on a dead
/// link), for `wait`. `None`: every `Link` is gone.
async fn refuse_calls_for(
    wait: Duration,
    calls: &mut mpsc::UnboundedReceiver<Call>,
    reason: &str,
) -> Option<()> {
    let sleep = tokio::time::sleep(wait);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            () = &mut sleep => return Some(()),
            call = calls.recv() => {
                let call = call?;
                let _ = call.reply.send(Err(RpcError::Unavailable(format!(
                    "not connected to the gateway (reconnecting): {reason}"
                ))));
            }
        }
    }
}

/// One connection's life. `resynced_at`: when this connection replaced a dropped one (its
/// subscriptions are re-sent and subscribers told to reload).
async fn drive(
    shared: &Shared,
    ws: &mut Ws,
    calls: &mut mpsc::UnboundedReceiver<Call>,
    resynced_at: Option<Instant>,
) -> Ended {
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut next_id: u64 = 0;
    let mut new_id = || {
        next_id += 1;
        format!("c{next_id}")
    };
    let mut last_seq: Option<u64> = None;
    // What the gateway said it sends and accepts, within what this client reads at all.
    let max_payload = shared
        .hello
        .lock()
        .ok()
        .and_then(|h| h.as_ref().map(|h| h.policy.max_payload))
        .and_then(|m| usize::try_from(m).ok())
        .unwrap_or(MAX_PAYLOAD_CEILING)
        .min(MAX_PAYLOAD_CEILING);

    let ended = 'life: {
        if resynced_at.is_some() {
            let subs = shared
                .subscriptions
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            for (method, params) in subs {
                let id = new_id();
                if let Err(e) = send(ws, &id, &method, params).await {
                    break 'life Ended::Dropped(e);
                }
                pending.insert(id, Pending::Ignore);
            }
            // Anything a subscriber holds may be stale: it reloads.
            let _ = shared.events.send(WireEvent::Reconnected);
        }
        let mut ping = tokio::time::interval(shared.options.ping_every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                call = calls.recv() => {
                    let Some(call) = call else { break 'life Ended::Unused };
                    let id = new_id();
                    if is_subscription(&call.method)
                        && let Ok(mut subs) = shared.subscriptions.lock()
                        && !subs.iter().any(|(m, _)| *m == call.method)
                    {
                        subs.push((call.method.clone(), call.params.clone()));
                    }
                    let text = match encode(&id, &call.method, call.params) {
                        Ok(t) => t,
                        Err(e) => {
                            let _ = call.reply.send(Err(refused(e)));
                            continue;
                        }
                    };
                    // The gateway would close the connection on a frame over its limit:
                    // refuse it here, and the link stays up for everything else.
                    if text.len() > max_payload {
                        let _ = call.reply.send(Err(refused(format!(
                            "the request is {} bytes; the gateway accepts at most {max_payload} \
            (its maxPayload): send less at once",
                            text.len()
                        ))));
                        continue;
                    }
                    if let Err(e) = ws.send(Message::text(text)).await.map_err(|e| e.to_string()) {
                        let _ = call.reply.send(Err(RpcError::Unavailable(e.clone())));
                        break 'life Ended::Dropped(e);
                    }
                    pending.insert(id, Pending::Call(call.reply, call.want_final));
                }
                _ = ping.tick() => {
                    // A probe still unanswered a whole period later: the connection is dead
                    // even if the socket has not noticed (a half-open TCP connection).
                    let stale = pending.values().any(|p| matches!(p, Pending::Ping(at)
                        if at.elapsed() > shared.options.ping_every * 3));
                    if stale {
                        break 'life Ended::Dropped("the gateway stopped answering".into());
                    }
                    if pending.values().any(|p| matches!(p, Pending::Ping(_))) {
                        continue;
                    }
                    let id = new_id();
                    if let Err(e) = send(ws, &id, "health", json!({})).await {
                        break 'life Ended::Dropped(e);
                    }
                    pending.insert(id, Pending::Ping(Instant::now()));
                }
                msg = ws.next() => {
                    let text = match msg {
                        None => break 'life Ended::Dropped("the gateway closed the connection".into()),
                        Some(Err(e)) => break 'life Ended::Dropped(e.to_string()),
                        Some(Ok(Message::Close(c))) => {
                            let why = c.map(|c| c.reason.to_string()).filter(|r| !r.is_empty())
                                .unwrap_or_else(|| "the gateway closed the connection".into());
                            break 'life Ended::Dropped(why);
                        }
                        Some(Ok(Message::Text(t))) => t,
                        Some(Ok(_)) => continue,
                    };
                    let frame = match Frame::decode(text.as_str(), max_payload) {
                        Ok(f) => f,
                        Err(e) => {
                            tracing::warn!(error = %e, "undecodable frame from the gateway; ignored");
                            continue;
                        }
                    };
                    match frame {
                        Frame::Res(r) => answered(shared, &mut pending, r, resynced_at),
                        Frame::Event(e) => {
                            if let Some(seq) = e.seq {
                                if let Some(last) = last_seq
                                    && seq > last + 1
                                {
                                    tracing::info!(last, seq, "event numbers skipped: resync");
                                    let _ = shared.events.send(WireEvent::Reconnected);
                                }
                                last_seq = Some(seq);
                            }
                            let _ = shared.events.send(WireEvent::Event {
                                event: e.event,
                                payload: e.payload.unwrap_or(Value::Null),
                            });
                        }
                        Frame::Req(_) => {}
                    }
                }
            }
        }
    };
    // Nothing pending will be answered on this connection any more.
    let why = match &ended {
        Ended::Dropped(r) => r.clone(),
        Ended::Unused => "the link was closed".into(),
    };
    for (_, p) in pending.drain() {
        if let Pending::Call(reply, _) = p {
            let _ = reply.send(Err(RpcError::Unavailable(format!(
                "the gateway connection dropped: {why}"
            ))));
        }
    }
    ended
}

fn encode(id: &str, method: &str, params: Value) -> Result<String, String> {
    Frame::Req(Request {
        id: id.to_string(),
        method: method.to_string(),
        params: Some(params),
        extra: serde_json::Map::new(),
    })
    .encode()
    .map_err(|e| e.to_string())
}

async fn send(ws: &mut Ws, id: &str, method: &str, params: Value) -> Result<(), String> {
    let text = encode(id, method, params)?;
    ws.send(Message::text(text))
        .await
        .map_err(|e| e.to_string())
}

/// A request refused on this side, as the gateway would word a bad request.
fn refused(message: String) -> RpcError {
    RpcError::Refused(ErrorShape {
        code: INVALID_REQUEST.to_string(),
        message,
        extra: serde_json::Map::new(),
    })
}

fn answered(
    shared: &Shared,
    pending: &mut HashMap<String, Pending>,
    r: Response,
    resynced_at: Option<Instant>,
) {
    let Some(p) = pending.remove(&r.id) else {
        return;
    };
    match p {
        Pending::Ignore => {}
        Pending::Ping(at) => {
            let rtt = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            let resynced = resynced_at.is_some_and(|t| t.elapsed() < RESYNCED_FOR);
            if let Ok(Some(hello)) = shared.hello.lock().map(|h| h.clone()) {
                shared.set_connected(&hello, Some(rtt), resynced);
            }
        }
        Pending::Call(reply, want_final) => {
            let accepted = r
                .payload
                .as_ref()
                .and_then(|p| p.get("status"))
                .and_then(Value::as_str)
                == Some("accepted");
            if want_final && r.ok && accepted {
                // The first of two answers: keep waiting for the final one.
                pending.insert(r.id, Pending::Call(reply, want_final));
                return;
            }
            let out = if r.ok {
                Ok(r.payload.unwrap_or(Value::Null))
            } else {
                Err(RpcError::Refused(r.error.unwrap_or_else(|| {
                    switchboard_protocol::ErrorShape {
                        code: "UNAVAILABLE".into(),
                        message: "the gateway answered ok: false without an error".into(),
                        extra: serde_json::Map::new(),
                    }
                })))
            };
            let _ = reply.send(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redials_wait_longer_each_time_up_to_five_seconds_with_jitter() {
        for _ in 0..50 {
            let delays: Vec<u128> = redial_delays().take(40).map(|d| d.as_millis()).collect();
            assert!((250..500).contains(&delays[0]), "{delays:?}");
            assert!((1000..2000).contains(&delays[2]), "{delays:?}");
            assert!((5000..10_000).contains(&delays[39]), "{delays:?}");
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(address("ws://127.0.0.1:9").expect("ok"), "127.0.0.1:9");
        assert_eq!(address("ws://h").expect("ok"), "h:18789");
        assert_eq!(address("ws://h:1/x").expect("ok"), "h:1");
        assert!(matches!(address("http://h"), Err(DialError::Refused(_))));
        assert_eq!(address("wss://h:1").expect("tls"), "h:1");
        assert_eq!(address("ws://[::1]").expect("v6"), "[::1]:18789");
        assert_eq!(address("ws://[::1]:7/").expect("v6"), "[::1]:7");
        assert!(matches!(address("ws://"), Err(DialError::Refused(_))));
    }
}
