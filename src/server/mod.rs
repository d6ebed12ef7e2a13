//! The gateway (`switchboard serve`): a WebSocket listener speaking OpenClaw's protocol v4
//! in front of any `SessionsApi`.

mod auth_limit;
mod chat_deltas;
mod connection;
mod events;
mod fit;
mod idempotency;
pub mod listening;
mod methods;
mod outbox;
mod requests;
mod switchboard_methods;
pub mod tls;
pub mod token;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::api::SessionsApi;
pub use auth_limit::AuthLimit;
pub use connection::PROTOCOL;
pub use methods::{EVENTS, METHODS};

/// OpenClaw 2026.9.6's limits, as its `hello-ok.policy` states them.
pub const DEFAULT_MAX_PAYLOAD: usize = 25 * 1024 * 1024;
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 50 * 1024 * 1024;
pub const DEFAULT_TICK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// What the gateway needs besides its listener (`Options::new` for the defaults).
pub struct Options {
    pub token: String,
    /// A second token that only ever gets `operator.read`.
    pub read_only_token: Option<String>,
    /// The largest text frame accepted and sent, in bytes (`hello-ok.policy.maxPayload`; at
    /// most `protocol::MAX_PAYLOAD_CEILING`, what a Switchboard client reads).
    pub max_payload: usize,
    /// How far (in encoded bytes) a client may fall behind the frames sent to it before it
    /// is disconnected as lagged.
    pub max_buffered_bytes: usize,
    /// How often every connection gets a `tick`.
    pub tick_interval: std::time::Duration,
    /// How long a client may take to send `connect` before it is closed, so idle sockets
    /// cannot pile up unauthenticated.
    pub handshake_timeout: std::time::Duration,
    /// The failed-connect limit per peer address.
    pub auth_limit: AuthLimit,
}

impl Options {
    /// OpenClaw's limits, and `token` as the one token.
    pub fn new(token: String) -> Options {
        Options {
            token,
            read_only_token: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            tick_interval: DEFAULT_TICK_INTERVAL,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            auth_limit: AuthLimit::default(),
        }
    }
}

/// The default `Options::handshake_timeout`.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Accepts connections until `shutdown` completes, then closes every connection and returns.
pub async fn run(
    listener: TcpListener,
    api: Arc<dyn SessionsApi>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) {
    run_with_tls(listener, api, options, None, shutdown).await;
}

/// `run`, speaking TLS (wss://) on every connection when `tls` is given.
pub async fn run_with_tls(
    listener: TcpListener,
    api: Arc<dyn SessionsApi>,
    options: Options,
    tls: Option<tls::TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    let handshake_timeout = options.handshake_timeout;
    let shared = Arc::new(connection::Shared {
        api,
        token: options.token,
        read_only_token: options.read_only_token,
        // Never more than a Switchboard client reads: what is advertised is what is sent.
        max_payload: options
            .max_payload
            .min(crate::protocol::MAX_PAYLOAD_CEILING),
        handshake_timeout: options.handshake_timeout,
        max_buffered_bytes: options.max_buffered_bytes,
        tick_interval: options.tick_interval,
        idempotency: idempotency::Idempotency::default(),
        auth_limit: auth_limit::Limiter::new(options.auth_limit),
    });
    // tungstenite's own cap sits above maxPayload, so an oversize frame reaches the decoder
    // and is refused with a close reason instead of a dropped socket; beyond it, the socket drops.
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(options.max_payload.saturating_mul(2).max(1 << 16)))
        .max_frame_size(Some(options.max_payload.saturating_mul(2).max(1 << 16)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let shared = shared.clone();
                let stop = stop_rx.clone();
                let tls = tls.clone();
                connections.spawn(async move {
                    // A peer that opens TCP and then stalls in TLS or the upgrade is dropped.
                    let opened = tokio::time::timeout(
                        handshake_timeout,
                        open_websocket(stream, tls, ws_config),
                    )
                    .await;
                    match opened {
                        Ok(Ok(ws)) => connection::serve(ws, Some(peer.ip()), shared, stop).await,
                        Ok(Err(e)) => tracing::info!(%peer, error = %e, "handshake failed"),
                        Err(_) => tracing::info!(%peer, "TLS or WebSocket handshake timed out"),
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Each connection sends its close frame; one that does not finish in time is dropped.
    let all = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(std::time::Duration::from_secs(5), all)
        .await
        .is_err()
    {
        connections.abort_all();
    }
}

/// TLS (when configured), then the WebSocket upgrade.
async fn open_websocket(
    tcp: tokio::net::TcpStream,
    tls: Option<tls::TlsAcceptor>,
    config: WebSocketConfig,
) -> Result<tokio_tungstenite::WebSocketStream<tls::Stream>, String> {
    let stream: tls::Stream = match tls {
        None => Box::new(tcp),
        Some(acceptor) => Box::new(
            acceptor
                .accept(tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?,
        ),
    };
    tokio_tungstenite::accept_async_with_config(stream, Some(config))
        .await
        .map_err(|e| format!("WebSocket: {e}"))
}
