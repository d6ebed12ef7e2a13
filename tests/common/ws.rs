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

/// `v` as one text frame.
pub async fn send<S>(ws: &mut WebSocketStream<S>, v: Value)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ws.send(Message::text(v.to_string())).await.expect("send");
}
