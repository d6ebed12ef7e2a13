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

use super::auth_limit::Limiter;
use super::events::Subscriptions;
use super::methods::{self, error};
use super::outbox::{self, Ending, Outbox};
use super::requests::{self, Ctx, Work};
use super::token::same_token;
use crate::api::SessionsApi;
use crate::protocol::{
    ConnectChallenge, ConnectParams, ErrorShape, Event, Features, Frame, HelloOk, HelloOkTag,
    INVALID_REQUEST, Policy, Request, Response, ServerInfo, switchboard,
};

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
}

/// Requests of one connection being answered at once; past this, the socket is not read
/// (TCP pushes back on the client).
pub const MAX_IN_FLIGHT: usize = 128;

type Ws = WebSocketStream<super::tls::Stream>;

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
        return match Frame::decode(text.as_str(), max) {
            Ok(f) => Ok(Some(f)),
            Err(e @ crate::protocol::ProtocolError::TooLarge { .. }) => {
                Err(Closing(CloseCode::Size, e.to_string()))
            }
            Err(e) => Err(Closing(CloseCode::Policy, e.to_string())),
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
}

/// Serves one connection to its end; closes it with a reason when it breaks the protocol.
pub async fn serve(
    mut ws: Ws,
    peer: Option<IpAddr>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let conn_id = uuid::Uuid::new_v4().to_string();
    let greeted = tokio::select! {
        r = greet(&mut ws, &shared, &conn_id, peer) => r,
        _ = stop.wait_for(|s| *s) => Err(Closing(CloseCode::Away, "gateway shutting down".into())),
    };
    let conn = match greeted {
        Ok(Some(conn)) => conn,
        Ok(None) => {
            let _ = ws.close(None).await;
            return;
        }
        Err(Closing(code, reason)) => {
            tracing::info!(%conn_id, %reason, "closing connection");
            let _ = ws
                .close(Some(CloseFrame {
                    code,
                    reason: outbox::truncate(&reason, 120).into(),
                }))
                .await;
            return;
        }
    };
    tracing::info!(%conn_id, "client connected");

    // From here every frame goes through the outbox and its one writer.
    let (sink, stream) = ws.split();
    let (outbox, writer) = outbox::outbox(shared.max_buffered_bytes);
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
    if !ending.reason.is_empty() {
        tracing::info!(conn_id = %conn.id, reason = %ending.reason, "closing connection");
    }
    let _ = writer.await;
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
    if let Some(ip) = peer
        && let Some(wait) = shared.auth_limit.locked_out(ip)
    {
        let message = format!(
            "too many failed attempts; retry in {} s",
            wait.as_secs().max(1)
        );
        return refuse(ws, req.id, &message).await;
    }
    let hello = match handshake(&req, shared, conn_id, &nonce) {
        Ok(h) => h,
        Err(message) => {
            if let Some(ip) = peer {
                shared.auth_limit.failed(ip);
            }
            tracing::info!(%conn_id, ?peer, %message, "connect refused");
            return refuse(ws, req.id, &message).await;
        }
    };
    // The connection obeys exactly what hello-ok told the client it was granted.
    let hello_scopes = hello["auth"]["scopes"].clone();
    send(ws, &response(req.id.clone(), Ok(hello))).await?;
    let caps = req
        .params_as::<ConnectParams>()
        .ok()
        .and_then(|p| p.caps)
        .unwrap_or_default();
    let scopes: Vec<String> = serde_json::from_value(hello_scopes).unwrap_or_default();
    Ok(Some(Conn {
        id: conn_id.to_string(),
        caps,
        write: can_write(&scopes),
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
    };
    let mut in_flight: FuturesUnordered<Work<'_>> = FuturesUnordered::new();
    loop {
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

/// The `hello-ok` payload, or why the `connect` is refused. `nonce` is this connection's
/// challenge, which an offered device signature must cover.
fn handshake(req: &Request, shared: &Shared, conn_id: &str, nonce: &str) -> Result<Value, String> {
    let params: ConnectParams = req
        .params_as()
        .map_err(|e| format!("invalid connect params: {e}"))?;
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
        let id = crate::protocol::device::verify(
            device,
            &params.client,
            &params.role,
            &params.scopes,
            &offered,
            nonce,
        )
        .map_err(|e| format!("device signature invalid: {e}"))?;
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
                    crate::protocol::switchboard::method::ALL
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
    serde_json::to_value(&hello).map_err(|e| e.to_string())
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

/// Whether granted scopes allow changes.
fn can_write(scopes: &[String]) -> bool {
    scopes
        .iter()
        .any(|s| s == "operator.write" || s == "operator.admin")
}
