//! One WebSocket connection: the challenge, the `connect` handshake, then requests answered
//! in order until the client leaves, breaks the protocol, or the gateway shuts down.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::methods::{self, error};
use super::token::same_token;
use crate::api::SessionsApi;
use crate::protocol::{
    ConnectChallenge, ConnectParams, ErrorShape, Event, Features, Frame, HelloOk, HelloOkTag,
    INVALID_REQUEST, Policy, Request, Response, ServerInfo,
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

type Ws = WebSocketStream<TcpStream>;

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
async fn next_frame(ws: &mut Ws, max: usize) -> Result<Option<Frame>, Closing> {
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

/// Serves one connection to its end; closes it with a reason when it breaks the protocol.
pub async fn serve(mut ws: Ws, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let conn_id = uuid::Uuid::new_v4().to_string();
    let outcome = tokio::select! {
        r = session(&mut ws, &shared, &conn_id) => r,
        _ = stop.wait_for(|s| *s) => Err(Closing(CloseCode::Away, "gateway shutting down".into())),
    };
    let (code, reason) = match outcome {
        Ok(()) => (CloseCode::Normal, String::new()),
        Err(Closing(code, reason)) => {
            tracing::info!(%conn_id, %reason, "closing connection");
            (code, reason)
        }
    };
    // Close reasons are capped at 123 bytes by the WebSocket spec.
    let reason: String = truncate(&reason, 120);
    let _ = ws
        .close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))
        .await;
}

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

async fn session(ws: &mut Ws, shared: &Shared, conn_id: &str) -> Result<(), Closing> {
    let nonce = uuid::Uuid::new_v4().to_string();
    let ts = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let challenge = ConnectChallenge {
        nonce,
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
        return Ok(());
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
    let hello = match handshake(&req, shared, conn_id) {
        Ok(h) => h,
        Err(message) => return refuse(ws, req.id, &message).await,
    };
    send(ws, &response(req.id, Ok(hello))).await?;
    tracing::info!(%conn_id, "client connected");

    while let Some(frame) = next_frame(ws, shared.max_payload).await? {
        let Frame::Req(Request {
            id, method, params, ..
        }) = frame
        else {
            // Clients send only requests; anything else is ignored, as OpenClaw does.
            continue;
        };
        let outcome = methods::call(&shared.api, &method, params).await;
        if let Err(e) = &outcome {
            tracing::debug!(%conn_id, %method, code = %e.code, "request failed");
        }
        send(ws, &response(id, outcome)).await?;
    }
    Ok(())
}

/// An error `res` for a refused handshake, then the close.
async fn refuse(ws: &mut Ws, id: String, message: &str) -> Result<(), Closing> {
    send(ws, &response(id, Err(error(INVALID_REQUEST, message)))).await?;
    Err(Closing(CloseCode::Policy, message.to_string()))
}

/// The `hello-ok` payload, or why the `connect` is refused.
fn handshake(req: &Request, shared: &Shared, conn_id: &str) -> Result<Value, String> {
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
