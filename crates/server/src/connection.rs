//! One WebSocket connection: the challenge, the `connect` handshake, then requests read in
//! order until the client leaves, breaks the protocol, or the gateway shuts down; answers and
//! events leave through the connection's outbox.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::auth_limit::{Limiter, TARPIT};
use super::events::Subscriptions;
use super::methods::{self, error};
use super::outbox::{self, Budget, Ending, Outbox};
use super::quiet::{Gates, excerpt};
use super::requests::{self, Ctx, Work};
use switchboard_protocol::token::same_token;
use switchboard_protocol::{
    ConnectChallenge, ConnectParams, ErrorShape, Event, Features, Frame, HelloOk, HelloOkTag,
    INVALID_REQUEST, Policy, Request, Response, ServerInfo, switchboard,
};
use switchboard_types::api::SessionsApi;

/// The protocol this gateway speaks, and the oldest one it accepts from a client.
pub const PROTOCOL: u32 = 4;
const MIN_PROTOCOL: u32 = 3;

/// What every connection shares.
pub struct Shared {
    pub api: Arc<dyn SessionsApi>,
    pub token: String,
    pub read_only_token: Option<String>,
    pub max_payload: usize,
    pub handshake_timeout: std::time::Duration,
    pub max_buffered_bytes: usize,
    pub tick_interval: std::time::Duration,
    pub auth_limit: Limiter,
    /// The rate gates of the log lines clients can set off.
    pub gates: Gates,
    /// Encoded frames queued for every connection together (`Options::max_queued_bytes`).
    pub budget: Arc<Budget>,
    /// Requests being answered at once for each token, across its connections.
    pub full_token_requests: Arc<tokio::sync::Semaphore>,
    pub read_only_token_requests: Arc<tokio::sync::Semaphore>,
    /// Connections past their handshake, now.
    pub connected: std::sync::atomic::AtomicUsize,
    /// Hidden from connections without write scope (`private_paths.rs`).
    pub private_paths: Arc<super::private_paths::PrivatePaths>,
    /// `sessions.list` rows as last rendered, for every connection (`rows.rs`).
    pub rows: super::rows::RowCache,
}

/// Count a refused connect where every node of the store sees it (bounded: past
/// `SHARED_COUNT_WAIT` the gateway's own limit stands alone); how long until one more
/// would be within the shared limit.
async fn shared_failure(
    shared: &Shared,
    peer: Option<std::net::IpAddr>,
) -> Option<std::time::Duration> {
    let limit = shared.auth_limit.numbers();
    let limit = switchboard_types::api::ConnectLimit {
        max_failures: limit.max_failures,
        max_failures_global: limit.max_failures_global,
        window: limit.window,
    };
    let noted = shared
        .api
        .note_failed_connect(peer.map(|p| p.to_string()), limit);
    tokio::time::timeout(SHARED_COUNT_WAIT, noted)
        .await
        .ok()
        .flatten()
}

/// How long a refused connect waits for the store's shared count.
const SHARED_COUNT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Requests being answered at once for one token, across all its connections.
pub const MAX_IN_FLIGHT_PER_TOKEN: usize = 512;

/// The most of a client's own input an error or a log line quotes.
const QUOTED: usize = 160;

/// Requests of one connection being answered at once; past this, the socket is not read
/// (TCP pushes back on the client).
pub const MAX_IN_FLIGHT: usize = 128;

type Ws = WebSocketStream<switchboard_protocol::tls::Stream>;

/// Why a connection ends early: the close code and the reason sent with it.
struct Closing(CloseCode, String);

fn response(id: String, outcome: Result<Value, ErrorShape>) -> Frame {
    let (ok, payload, error) = match outcome {
        Ok(v) => (true, Some(v), None),
        Err(e) => (false, None, Some(e)),
    };
    Frame::Res(Response {
        id,
        ok,
        payload,
        rendered: None,
        error,
        extra: serde_json::Map::new(),
    })
}

async fn send(ws: &mut Ws, frame: &Frame) -> Result<(), Closing> {
    let text = frame
        .encode()
        .map_err(|e| Closing(CloseCode::Error, e.to_string()))?;
    ws.send(Message::text(text))
        .await
        .map_err(|e| Closing(CloseCode::Abnormal, e.to_string()))
}

/// The next text frame decoded; pings are answered by tungstenite itself.
async fn next_frame<R>(ws: &mut R, max: usize) -> Result<Option<Frame>, Closing>
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    loop {
        let msg = match ws.next().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(Closing(CloseCode::Protocol, e.to_string())),
            Some(Ok(m)) => m,
        };
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return Ok(None),
            Message::Binary(_) => {
                return Err(Closing(
                    CloseCode::Unsupported,
                    "binary frames are not part of the protocol".into(),
                ));
            }
            _ => continue,
        };
        // Decode errors may quote the frame (an unknown `type`, a serde message): excerpts.
        return match Frame::decode(text.as_str(), max) {
            Ok(f) => Ok(Some(f)),
            Err(e @ switchboard_protocol::ProtocolError::TooLarge { .. }) => {
                Err(Closing(CloseCode::Size, e.to_string()))
            }
            Err(e) => Err(Closing(CloseCode::Policy, excerpt(&e.to_string(), QUOTED))),
        };
    }
}

/// What the handshake granted a connection.
struct Conn {
    id: String,
    /// `connect.caps`: `switchboard.v1` allows `switchboard.subscribe`.
    caps: Vec<String>,
    /// `hello-ok.auth.scopes` allow changes.
    write: bool,
    /// `hello-ok.auth.scopes` hold `operator.admin`: the owner's client (`is_owner`).
    owner: bool,
    /// Admitted with the read-only token (its own in-flight budget).
    read_only: bool,
}

/// Serves one connection to its end; closes it with a reason when it breaks the protocol.
pub async fn serve(
    mut ws: Ws,
    peer: Option<IpAddr>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    mut ticket: super::handshakes::Ticket,
) {
    let conn_id = uuid::Uuid::new_v4().to_string();
    let greeted = tokio::select! {
        // Bounded as a whole: a client that stops reading mid-handshake cannot hold its slot.
        r = tokio::time::timeout(
            shared.handshake_timeout + TARPIT + outbox::CLOSE_LIMIT,
            greet(&mut ws, &shared, &conn_id, peer),
        ) => r.unwrap_or_else(|_| Err(Closing(CloseCode::Policy, "handshake took too long".into()))),
        _ = stop.wait_for(|s| *s) => Err(Closing(CloseCode::Away, "gateway shutting down".into())),
        () = ticket.given_way() => Err(Closing(
            CloseCode::Again,
            "too many handshakes in progress; this one was the oldest".into(),
        )),
    };
    // Connected or not, this connection no longer counts against the handshakes in progress.
    drop(ticket);
    let conn = match greeted {
        Ok(Some(conn)) => conn,
        Ok(None) => {
            close_quickly(&mut ws, None).await;
            return;
        }
        Err(Closing(code, reason)) => {
            if let Some(skipped) = shared.gates.handshake.admit() {
                tracing::info!(%conn_id, ?peer, %reason, skipped, "closing connection before hello-ok");
            }
            let frame = CloseFrame {
                code,
                reason: outbox::truncate(&reason, 120).into(),
            };
            close_quickly(&mut ws, Some(frame)).await;
            return;
        }
    };
    if let Some(skipped) = shared.gates.session.admit() {
        tracing::info!(%conn_id, ?peer, skipped, "client connected");
    }
    let _connected = Connected::count(&shared);

    // From here every frame goes through the outbox and its one writer.
    let (sink, stream) = ws.split();
    let (outbox, writer) = outbox::outbox(
        shared.max_buffered_bytes,
        shared.max_payload,
        shared.budget.clone(),
    );
    if !conn.write && !shared.private_paths.is_empty() {
        outbox.hide_paths(shared.private_paths.clone());
    }
    let writer = tokio::spawn(writer.run(sink));
    let ending = tokio::select! {
        r = requests(stream, &shared, &conn, &outbox) => match r {
            Ok(()) => Ending { code: CloseCode::Normal, reason: String::new(), drain: true },
            Err(Closing(code, reason)) => Ending { code, reason, drain: true },
        },
        _ = stop.wait_for(|s| *s) => Ending {
            code: CloseCode::Away,
            reason: "gateway shutting down".into(),
            drain: true,
        },
        e = outbox.closing() => e,
    };
    outbox.close(ending);
    let ending = outbox.closing().await;
    if !ending.reason.is_empty()
        && let Some(skipped) = shared.gates.session.admit()
    {
        tracing::info!(conn_id = %conn.id, reason = %ending.reason, skipped, "closing connection");
    }
    let _ = writer.await;
}

/// Counts a connection in `Shared::connected` for as long as it lives.
struct Connected<'a>(&'a Shared);

impl<'a> Connected<'a> {
    fn count(shared: &'a Shared) -> Connected<'a> {
        shared
            .connected
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        super::meters::connection_opened();
        Connected(shared)
    }
}

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0
            .connected
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        super::meters::connection_closed();
    }
}

/// The close handshake, bounded: a client that does not read never takes the close frame,
/// and must not hold its connection (and its descriptor) open for it.
async fn close_quickly(ws: &mut Ws, frame: Option<CloseFrame>) {
    let _ = tokio::time::timeout(outbox::CLOSE_LIMIT, ws.close(frame)).await;
}

/// The challenge and the `connect` handshake, answered directly on the socket; `None`
/// when the client left before connecting.
async fn greet(
    ws: &mut Ws,
    shared: &Shared,
    conn_id: &str,
    peer: Option<IpAddr>,
) -> Result<Option<Conn>, Closing> {
    let nonce = uuid::Uuid::new_v4().to_string();
    let ts = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let challenge = ConnectChallenge {
        nonce: nonce.clone(),
        ts,
        capabilities: None,
        extra: serde_json::Map::new(),
    };
    let payload =
        serde_json::to_value(&challenge).map_err(|e| Closing(CloseCode::Error, e.to_string()))?;
    send(
        ws,
        &Frame::Event(Event {
            event: "connect.challenge".into(),
            payload: Some(payload),
            seq: None,
            state_version: None,
            extra: serde_json::Map::new(),
        }),
    )
    .await?;

    let first = tokio::time::timeout(shared.handshake_timeout, next_frame(ws, shared.max_payload))
        .await
        .map_err(|_| Closing(CloseCode::Policy, "no connect request in time".into()))??;
    let Some(first) = first else {
        return Ok(None);
    };
    let req = match first {
        Frame::Req(r) if r.method == "connect" => r,
        Frame::Req(r) => {
            return refuse(ws, r.id, "the first request must be connect").await;
        }
        _ => {
            return Err(Closing(
                CloseCode::Policy,
                "the first frame must be a connect request".into(),
            ));
        }
    };
    // The token is looked at first: a correct one is admitted whatever others failed before.
    let granted = match handshake(&req, shared, conn_id, &nonce) {
        Ok(h) => h,
        Err(message) => {
            // This gateway's own limit first; within it, the count every node of the store
            // shares (a guesser spreading over the nodes meets the same limit).
            let over = match shared.auth_limit.failed(peer) {
                Ok(()) => shared_failure(shared, peer).await,
                Err(wait) => Some(wait),
            };
            let (message, retry_after) = match over.map_or(Ok(()), Err) {
                Ok(()) => (message, None),
                Err(wait) => {
                    // Past the failure rate: the answer is held back, so guesses cannot be
                    // tried at network speed (the handshake slot stays taken meanwhile).
                    tokio::time::sleep(TARPIT).await;
                    let secs = wait.as_secs().max(1);
                    (
                        format!("too many failed attempts; retry in {secs} s"),
                        Some(wait),
                    )
                }
            };
            if let Some(skipped) = shared.gates.refused.admit() {
                tracing::info!(%conn_id, ?peer, %message, skipped, "connect refused");
            }
            let mut shape = error(INVALID_REQUEST, &message);
            if let Some(wait) = retry_after {
                // OpenClaw's fields for a refusal that passes: clients retry, not give up.
                let ms = u64::try_from(wait.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1000);
                shape.extra.insert("retryable".into(), json!(true));
                shape.extra.insert("retryAfterMs".into(), json!(ms));
            }
            send(ws, &response(req.id, Err(shape))).await?;
            return Err(Closing(CloseCode::Policy, message));
        }
    };
    // The connection obeys exactly what hello-ok told the client it was granted.
    let hello_scopes = granted.hello["auth"]["scopes"].clone();
    send(ws, &response(req.id.clone(), Ok(granted.hello))).await?;
    let scopes: Vec<String> = serde_json::from_value(hello_scopes).unwrap_or_default();
    Ok(Some(Conn {
        id: conn_id.to_string(),
        caps: granted.caps,
        write: can_write(&scopes),
        owner: is_owner(&scopes),
        read_only: granted.read_only,
    }))
}

/// Reads requests until the client leaves or breaks the protocol. Each request's work is
/// polled once as it arrives, before the next frame is read (so sends into one session are
/// recorded in arrival order), then runs alongside the others; answers go to the outbox.
async fn requests<R>(
    mut stream: R,
    shared: &Arc<Shared>,
    conn: &Conn,
    outbox: &Arc<Outbox>,
) -> Result<(), Closing>
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let mut subs = Subscriptions::start(&shared.api, outbox, shared.tick_interval);
    let ctx = Ctx {
        shared: shared.clone(),
        outbox: outbox.clone(),
        interest: subs.interest.clone(),
        conn_id: conn.id.clone(),
        switchboard: conn.caps.iter().any(|c| c == switchboard::CAP),
        write: conn.write,
        owner: conn.owner,
        token_requests: if conn.read_only {
            shared.read_only_token_requests.clone()
        } else {
            shared.full_token_requests.clone()
        },
    };
    let mut in_flight: FuturesUnordered<Work<'_>> = FuturesUnordered::new();
    loop {
        // A connection ended as lagged takes no more of its requests, even those already
        // read: they would only be answered into a closed queue.
        if outbox.is_closed() {
            return Ok(());
        }
        // Requests are often answered on their first poll, so this loop could run on
        // without ever waiting while the client keeps the socket full: let the worker's
        // other tasks, and this connection's own ending, have their turn.
        tokio::task::consume_budget().await;
        tokio::select! {
            biased;
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            frame = next_frame(&mut stream, shared.max_payload), if in_flight.len() < MAX_IN_FLIGHT => {
                let Some(frame) = frame? else {
                    return Ok(());
                };
                let Frame::Req(Request { id, method, params, .. }) = frame else {
                    // Clients send only requests; anything else is ignored, as OpenClaw does.
                    continue;
                };
                super::meters::request(&method);
                if let Some(mut work) = requests::dispatch(&ctx, &mut subs, id, method, params)
                    && !poll_once(work.as_mut()).await
                {
                    in_flight.push(work);
                }
            }
        }
    }
}

/// Polls `work` once; true when that finished it.
async fn poll_once(mut work: Pin<&mut (dyn Future<Output = ()> + Send + '_)>) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx).is_ready())).await
}

/// An error `res` for a refused handshake, then the close.
async fn refuse<T>(ws: &mut Ws, id: String, message: &str) -> Result<T, Closing> {
    send(ws, &response(id, Err(error(INVALID_REQUEST, message)))).await?;
    Err(Closing(CloseCode::Policy, message.to_string()))
}

/// What an accepted `connect` got: the `hello-ok` payload to send, and what the connection
/// keeps of its params.
struct Granted {
    hello: Value,
    caps: Vec<String>,
    /// Admitted with the read-only token.
    read_only: bool,
}

/// The `hello-ok` payload (with what the connection keeps), or why the `connect` is refused. `nonce` is this connection's
/// challenge, which an offered device signature must cover.
fn handshake(
    req: &Request,
    shared: &Shared,
    conn_id: &str,
    nonce: &str,
) -> Result<Granted, String> {
    let params: ConnectParams = req.params_as().map_err(|e| {
        format!(
            "invalid connect params: {}",
            excerpt(&e.to_string(), QUOTED)
        )
    })?;
    if params.min_protocol > PROTOCOL || params.max_protocol < MIN_PROTOCOL {
        return Err(format!(
            "protocol mismatch: client speaks {}..{}, this gateway {MIN_PROTOCOL}..{PROTOCOL}",
            params.min_protocol, params.max_protocol
        ));
    }
    let offered = params.auth.and_then(|a| a.token).unwrap_or_default();
    let scopes = grant(&offered, &params.scopes, shared)
        .ok_or_else(|| "unauthorized: gateway token missing or wrong".to_string())?;
    if let Some(device) = &params.device {
        let id = switchboard_protocol::device::verify(
            device,
            &params.client,
            &params.role,
            &params.scopes,
            &offered,
            nonce,
        )
        .map_err(|e| {
            format!(
                "device signature invalid: {}",
                excerpt(&e.to_string(), QUOTED)
            )
        })?;
        tracing::info!(%conn_id, device = %id, "device verified");
    }
    let hello = HelloOk {
        tag: HelloOkTag::HelloOk,
        protocol: PROTOCOL,
        server: ServerInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            extra: [("connId".to_string(), json!(conn_id))]
                .into_iter()
                .collect(),
        },
        features: Features {
            methods: methods::METHODS
                .iter()
                .chain(
                    switchboard_protocol::switchboard::method::ALL
                        .iter()
                        .filter(|m| !methods::METHODS.contains(m)),
                )
                .map(|m| m.to_string())
                .collect(),
            events: methods::EVENTS.iter().map(|m| m.to_string()).collect(),
            extra: serde_json::Map::new(),
        },
        snapshot: json!({}),
        policy: Policy {
            max_payload: shared.max_payload as u64,
            max_buffered_bytes: shared.max_buffered_bytes as u64,
            tick_interval_ms: u64::try_from(shared.tick_interval.as_millis()).unwrap_or(u64::MAX),
            extra: serde_json::Map::new(),
        },
        extra: [(
            "auth".to_string(),
            json!({"method": "token", "role": params.role, "scopes": scopes}),
        )]
        .into_iter()
        .collect(),
    };
    let hello = serde_json::to_value(&hello).map_err(|e| e.to_string())?;
    Ok(Granted {
        hello,
        caps: params.caps.unwrap_or_default(),
        read_only: !same_token(&offered, &shared.token),
    })
}

/// The scopes a token and a request get: the gateway token grants what was asked
/// (`operator.read` when nothing was); the read-only token only ever `operator.read`.
/// `None`: neither token matches.
fn grant(offered: &str, asked: &[String], shared: &Shared) -> Option<Vec<String>> {
    // Both comparisons always run, so timing does not tell which token was near.
    let full = same_token(offered, &shared.token);
    let read_only = shared
        .read_only_token
        .as_deref()
        .is_some_and(|t| !t.is_empty() && same_token(offered, t));
    if full {
        if asked.is_empty() {
            return Some(vec![READ.to_string()]);
        }
        return Some(asked.to_vec());
    }
    read_only.then(|| vec![READ.to_string()])
}

const READ: &str = "operator.read";

/// Whether granted scopes make the client the owner's: `operator.admin`, the scope OpenClaw
/// asks for what a `/send` does (`sessions.patch`), and what its TUI and CLI ask for. A
/// client with `operator.write` alone may chat but its slash text is an ordinary message;
/// the read-only token never gets more than `operator.read`.
fn is_owner(scopes: &[String]) -> bool {
    scopes.iter().any(|s| s == "operator.admin")
}

/// Whether granted scopes allow changes.
fn can_write(scopes: &[String]) -> bool {
    scopes
        .iter()
        .any(|s| s == "operator.write" || s == "operator.admin")
}
