//! One WebSocket connection: the challenge, the `connect` handshake, then requests read in
//! order until the client leaves, breaks the protocol, or the gateway shuts down; answers and
//! events leave through the connection's outbox.

use std::sync::Arc;

use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::events::Subscriptions;
use super::methods::{self, error};
use super::outbox::{self, Ending, Outbox};
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
    pub max_payload: usize,
    pub handshake_timeout: std::time::Duration,
    pub max_buffered_bytes: usize,
    pub tick_interval_ms: u64,
}

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
}

/// Serves one connection to its end; closes it with a reason when it breaks the protocol.
pub async fn serve(mut ws: Ws, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let conn_id = uuid::Uuid::new_v4().to_string();
    let greeted = tokio::select! {
        r = greet(&mut ws, &shared, &conn_id) => r,
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
async fn greet(ws: &mut Ws, shared: &Shared, conn_id: &str) -> Result<Option<Conn>, Closing> {
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
    let hello = match handshake(&req, shared, conn_id, &nonce) {
        Ok(h) => h,
        Err(message) => return refuse(ws, req.id, &message).await,
    };
    send(ws, &response(req.id.clone(), Ok(hello))).await?;
    let caps = req
        .params_as::<ConnectParams>()
        .ok()
        .and_then(|p| p.caps)
        .unwrap_or_default();
    Ok(Some(Conn {
        id: conn_id.to_string(),
        caps,
    }))
}

/// Reads requests until the client leaves or breaks the protocol; answers go to `outbox`.
async fn requests<R>(
    mut stream: R,
    shared: &Shared,
    conn: &Conn,
    outbox: &Arc<Outbox>,
) -> Result<(), Closing>
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let mut subscriptions = Subscriptions::default();
    while let Some(frame) = next_frame(&mut stream, shared.max_payload).await? {
        let Frame::Req(Request {
            id, method, params, ..
        }) = frame
        else {
            // Clients send only requests; anything else is ignored, as OpenClaw does.
            continue;
        };
        if method == switchboard::method::SUBSCRIBE {
            if conn.caps.iter().any(|c| c == switchboard::CAP) {
                subscriptions.subscribe_switchboard(&shared.api, outbox, id);
            } else {
                let refused = error(
                    INVALID_REQUEST,
                    format!(
                        "{method} needs the `{}` capability in connect.caps",
                        switchboard::CAP
                    ),
                );
                let _ = outbox.response(id, Err(refused));
            }
            continue;
        }
        let outcome = methods::call(&shared.api, &method, params).await;
        if let Err(e) = &outcome {
            tracing::debug!(conn_id = %conn.id, %method, code = %e.code, "request failed");
        }
        if outbox.response(id, outcome).is_err() {
            // Closing (lagged): `serve` sees it and ends the connection.
            return Ok(());
        }
    }
    Ok(())
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
    if !same_token(&offered, &shared.token) {
        return Err("unauthorized: gateway token missing or wrong".into());
    }
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
            tick_interval_ms: shared.tick_interval_ms,
            extra: serde_json::Map::new(),
        },
        extra: serde_json::Map::new(),
    };
    serde_json::to_value(&hello).map_err(|e| e.to_string())
}
