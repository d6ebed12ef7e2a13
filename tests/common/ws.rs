//! A test client's side of a gateway WebSocket, for both harnesses (the gateway in process,
//! `gateway_support`, and `switchboard serve` as a process, `gateway_process`): plain or TLS
//! streams alike.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// A bound no healthy exchange comes near; hitting it means a hang.
pub const WAIT: Duration = Duration::from_secs(60);

/// The next text frame as JSON, or `Err` with the close frame (if any) once the server closed.
pub async fn recv<S>(ws: &mut WebSocketStream<S>) -> Result<Value, Option<(CloseCode, String)>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the server sends something within the wait");
        match msg {
            Some(Ok(Message::Text(t))) => {
                return Ok(serde_json::from_str(t.as_str()).expect("server sends JSON"));
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(frame.map(|f| (f.code, f.reason.to_string())));
            }
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

/// The first frame `wanted` accepts, each frame before it handed to `skipped`. Bounded as a
/// whole by `WAIT`: the server's ticks keep a connection talking, so a bound on each frame
/// alone never ends a wait for a frame that never comes (it hung a CI run).
pub async fn recv_until<S>(
    ws: &mut WebSocketStream<S>,
    what: &str,
    mut wanted: impl FnMut(&Value) -> bool,
    mut skipped: impl FnMut(Value),
) -> Value
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let frame = tokio::time::timeout(left, recv(ws))
            .await
            .unwrap_or_else(|_| panic!("no {what} within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("the connection closed before {what}: {e:?}"));
        if wanted(&frame) {
            return frame;
        }
        skipped(frame);
    }
}

/// `v` as one text frame.
pub async fn send<S>(ws: &mut WebSocketStream<S>, v: Value)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ws.send(Message::text(v.to_string())).await.expect("send");
}
