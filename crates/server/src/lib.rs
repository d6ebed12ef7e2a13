//! The gateway (`switchboard serve`): a WebSocket listener speaking OpenClaw's protocol v4
//! in front of any `SessionsApi`.

mod auth_limit;
mod chat_deltas;
mod connection;
mod events;
mod fit;
mod handshakes;
mod history;
mod hooks;
pub mod listening;
mod memory;
mod meters;
mod methods;
mod outbox;
mod private_paths;
mod probes;
mod quiet;
mod requests;
mod rows;
mod session_rows;
mod slash;
mod switchboard_methods;
mod tui_methods;

use std::future::Future;
use std::sync::Arc;
use switchboard_protocol::tls;

use backon::BackoffBuilder;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

pub use auth_limit::AuthLimit;
pub use connection::PROTOCOL;
pub use hooks::{Hooks, PushError, Pushed};
pub use methods::{EVENTS, METHODS};
pub use private_paths::PrivatePaths;
pub use probes::{MetricsRender, Site, serve_probes};
/// The log's rate gate, for other sources of lines others can set off (a chat channel's
/// ignored messages).
pub use quiet::Quiet;
use switchboard_types::api::SessionsApi;

/// OpenClaw 2026.9.6's limits, as its `hello-ok.policy` states them.
pub const DEFAULT_MAX_PAYLOAD: usize = 25 * 1024 * 1024;
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 50 * 1024 * 1024;
pub const DEFAULT_TICK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
/// Connections open at once; past it a new one is turned away at accept.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections still in their handshake (TLS, upgrade, `connect`) at once; past it the oldest
/// handshake gives way to the new connection (`handshakes.rs`), so peers that never finish
/// theirs cannot keep real clients out.
pub const DEFAULT_MAX_HANDSHAKES: usize = 128;
/// Handshakes one remote address may have in progress at once (OpenClaw's pre-auth
/// budget); past it that address's new connections are answered 503 (`handshakes.rs`).
pub const DEFAULT_MAX_HANDSHAKES_PER_ADDRESS: usize = 32;
/// Encoded frames queued for all connections together (each also has its
/// `max_buffered_bytes`).
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 128 * 1024 * 1024;
/// Descriptors kept for everything but connections (the database, its WAL, the log, …)
/// when the connection cap is fitted to the process's descriptor limit.
pub const RESERVED_DESCRIPTORS: usize = 64;

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
    /// The failed-connect limits, per peer address and global.
    pub auth_limit: AuthLimit,
    /// Connections open at once (see `DEFAULT_MAX_CONNECTIONS`).
    pub max_connections: usize,
    /// Connections in their handshake at once (see `DEFAULT_MAX_HANDSHAKES`).
    pub max_handshakes: usize,
    /// Of those, from one remote address (see `DEFAULT_MAX_HANDSHAKES_PER_ADDRESS`).
    pub max_handshakes_per_address: usize,
    /// Encoded frames queued for all connections together.
    pub max_queued_bytes: usize,
    /// The server's own paths, hidden from connections without write scope.
    pub private_paths: PrivatePaths,
    /// `/metrics` on the gateway's port renders with this (`None`: answered 404).
    pub metrics: Option<MetricsRender>,
    /// The webhooks accepted at `POST /hooks/<name>` (`channels.webhook`).
    pub hooks: Hooks,
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
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_address: DEFAULT_MAX_HANDSHAKES_PER_ADDRESS,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            private_paths: PrivatePaths::default(),
            metrics: None,
            hooks: Hooks::default(),
        }
    }
}

/// How long connections get to close once the gateway stops, before they are dropped.
pub const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The HTTP answer to a connection turned away at the cap (plain ws:// only: a TLS client
/// could not read it). `Retry-After` tells a client the refusal is passing.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Type: text/plain\r\nContent-Length: 34\r\nConnection: close\r\n\r\n\
too many connections; retry later\n";

/// The HTTP answer to a connection from an address that already has
/// `max_handshakes_per_address` handshakes in progress (plain ws:// only, as `BUSY`).
const ADDRESS_BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Type: text/plain\r\nContent-Length: 55\r\nConnection: close\r\n\r\n\
too many unauthenticated connections from this address\n";

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
    // `/readyz` reports the gateway's uptime, as OpenClaw's does.
    let site = probes::Site {
        started: std::time::Instant::now(),
        api: api.clone(),
        metrics: options.metrics.clone(),
        hooks: options.hooks.clone(),
    };
    let shared = Arc::new(connection::Shared {
        api,
        token: options.token,
        read_only_token: options.read_only_token,
        // Never more than a Switchboard client reads: what is advertised is what is sent.
        max_payload: options
            .max_payload
            .min(switchboard_protocol::MAX_PAYLOAD_CEILING),
        handshake_timeout: options.handshake_timeout,
        max_buffered_bytes: options.max_buffered_bytes,
        tick_interval: options.tick_interval,
        auth_limit: auth_limit::Limiter::new(options.auth_limit),
        gates: quiet::Gates::default(),
        budget: Arc::new(outbox::Budget::new(options.max_queued_bytes)),
        full_token_requests: Arc::new(Semaphore::new(connection::MAX_IN_FLIGHT_PER_TOKEN)),
        read_only_token_requests: Arc::new(Semaphore::new(connection::MAX_IN_FLIGHT_PER_TOKEN)),
        connected: std::sync::atomic::AtomicUsize::new(0),
        private_paths: Arc::new(options.private_paths),
        rows: rows::RowCache::default(),
    });
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let handshakes =
        handshakes::Handshakes::new(options.max_handshakes, options.max_handshakes_per_address);
    let mut backoff: Option<backon::ExponentialBackoff> = None;
    // tungstenite's own cap sits above maxPayload, so an oversize frame reaches the decoder
    // and is refused with a close reason instead of a dropped socket; beyond it, the socket drops.
    // Small socket buffers: a thousand idle subscribers must not each hold 256 KiB of them
    // (frames of any size still pass; the read buffer grows for a large one).
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(options.max_payload.saturating_mul(2).max(1 << 16)))
        .max_frame_size(Some(options.max_payload.saturating_mul(2).max(1 << 16)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener) => {
                let (stream, peer) = match accepted {
                    Ok(a) => {
                        backoff = None;
                        a
                    }
                    Err(e) => {
                        // Out of descriptors (or memory), accept fails at once for as long as
                        // it lasts: wait, more each time, instead of spinning on it.
                        let delay = backoff
                            .get_or_insert_with(accept_backoff)
                            .next()
                            .unwrap_or(ACCEPT_BACKOFF_MAX);
                        if let Some(skipped) = shared.gates.accept.admit() {
                            tracing::warn!(error = %e, retry_in = ?delay, skipped, "accept failed");
                        }
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(delay) => {}
                        }
                        continue;
                    }
                };
                // Before a place is taken (or a handshake made to give way for it): one
                // address flooding cannot push out anyone else's handshake.
                if handshakes.address_full(peer.ip()) {
                    if let Some(skipped) = shared.gates.accept.admit() {
                        tracing::warn!(%peer, skipped, "too many handshakes from one address: turned away");
                    }
                    if tls.is_none() {
                        let _ = stream.try_write(ADDRESS_BUSY);
                    }
                    continue;
                }
                let slot = match slots.clone().try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    // Every place is taken: one still in its handshake gives way (it ends on
                    // its next poll, well within the wait), a connected one never does.
                    Err(_) if handshakes.give_way_oldest() => {
                        tokio::time::timeout(GIVE_WAY_WAIT, slots.clone().acquire_owned())
                            .await
                            .ok()
                            .and_then(Result::ok)
                    }
                    Err(_) => None,
                };
                let Some(slot) = slot else {
                    if let Some(skipped) = shared.gates.accept.admit() {
                        tracing::warn!(%peer, skipped, "too many connections: turned away");
                    }
                    if tls.is_none() {
                        // Best effort, never waiting: the socket is closed right after.
                        let _ = stream.try_write(BUSY);
                    }
                    continue;
                };
                let (mut ticket, evicted) = handshakes.admit(peer.ip());
                if evicted && let Some(skipped) = shared.gates.accept.admit() {
                    tracing::info!(%peer, skipped, "handshakes all in progress: the oldest gave way");
                }
                let shared = shared.clone();
                let stop = stop_rx.clone();
                let tls = tls.clone();
                let site = site.clone();
                connections.spawn(async move {
                    let _slot = slot;
                    // A peer that opens TCP and then stalls in TLS or the upgrade is dropped,
                    // after the handshake timeout or when a newer connection needs its place.
                    let opened = tokio::select! {
                        r = tokio::time::timeout(
                            handshake_timeout,
                            open_websocket(stream, tls, ws_config, &site),
                        ) => r,
                        () = ticket.given_way() => return,
                    };
                    match opened {
                        Ok(Ok(Opened::WebSocket(ws))) => {
                            connection::serve(*ws, Some(peer.ip()), shared, stop, ticket).await;
                        }
                        Ok(Ok(Opened::Probe)) => {}
                        Ok(Err(e)) => {
                            if let Some(skipped) = shared.gates.handshake.admit() {
                                let error = quiet::excerpt(&e, 200);
                                tracing::info!(%peer, %error, skipped, "handshake failed");
                            }
                        }
                        Err(_) => {
                            if let Some(skipped) = shared.gates.handshake.admit() {
                                tracing::info!(%peer, skipped, "TLS or WebSocket handshake timed out");
                            }
                        }
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                memory::after_connection_ended();
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Each connection sends its close frame; one that does not finish in time is dropped.
    let all = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(CLOSE_GRACE, all).await.is_err() {
        connections.abort_all();
        // Aborted tasks end at their next await; wait for that (briefly) so their sockets
        // are closed before the caller goes on.
        let aborted = async { while connections.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), aborted).await;
    }
    shared.gates.report_skipped();
}

/// How long a new connection waits at the cap for the place of a handshake that gave way.
const GIVE_WAY_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The longest wait between two failed accepts.
const ACCEPT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Waits between failed accepts: 5 ms doubling to a second, with jitter, for as long as
/// they fail.
fn accept_backoff() -> backon::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(5))
        .with_max_delay(ACCEPT_BACKOFF_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

/// The connection cap fitted to the process's descriptor limit: each connection holds one
/// descriptor, and `RESERVED_DESCRIPTORS` stay for the rest of the process. The soft limit
/// is first raised to the hard one, as servers do. `None` when the limit cannot be read.
pub fn descriptor_cap() -> Option<usize> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return None;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max,
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
        }
        let usable = usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX);
        Some(usable.saturating_sub(RESERVED_DESCRIPTORS).max(1))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The next connection, ready to be served: replies leave at once (`TCP_NODELAY`), since
/// a frame is one small write and Nagle's algorithm would hold each one queued behind an
/// unacknowledged one (about 40 ms per streamed frame after a `res`, with delayed ACKs).
async fn accept(
    listener: &TcpListener,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    let (stream, peer) = listener.accept().await?;
    if let Err(e) = stream.set_nodelay(true) {
        // Still usable, only slower: served as it is.
        tracing::debug!(%peer, error = %e, "TCP_NODELAY could not be set");
    }
    Ok((stream, peer))
}

/// What a new connection turned out to be.
enum Opened {
    WebSocket(Box<tokio_tungstenite::WebSocketStream<tls::Stream>>),
    /// An HTTP probe (`/healthz`, `/readyz`), answered; the connection is done.
    Probe,
}

/// TLS (when configured), then an HTTP probe answered or the WebSocket upgrade.
async fn open_websocket(
    tcp: tokio::net::TcpStream,
    tls: Option<tls::TlsAcceptor>,
    config: WebSocketConfig,
    site: &probes::Site,
) -> Result<Opened, String> {
    let mut stream: tls::Stream = match tls {
        None => Box::new(tcp),
        Some(acceptor) => Box::new(
            acceptor
                .accept(tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?,
        ),
    };
    let head = match probes::read_opening(&mut stream, &site.hooks)
        .await
        .map_err(|e| format!("HTTP: {e}"))?
    {
        probes::Opening::Probe(probe, ask) => {
            probes::answer(&mut stream, probe, ask, site)
                .await
                .map_err(|e| format!("HTTP: {e}"))?;
            return Ok(Opened::Probe);
        }
        probes::Opening::Hook(request) => {
            hooks::answer(&mut stream, request, &site.hooks, &site.api)
                .await
                .map_err(|e| format!("HTTP: {e}"))?;
            return Ok(Opened::Probe);
        }
        probes::Opening::Upgrade(head) => head,
    };
    let stream: tls::Stream = Box::new(probes::Rewind::new(head, stream));
    tokio_tungstenite::accept_async_with_config(stream, Some(config))
        .await
        .map(|ws| Opened::WebSocket(Box::new(ws)))
        .map_err(|e| format!("WebSocket: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accept path sets `TCP_NODELAY` (a socket from a bare `accept` has it off, so
    /// this is the call that sets it).
    #[tokio::test]
    async fn an_accepted_socket_sends_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _plain_client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (plain, _) = listener.accept().await.expect("accept");
        assert!(!plain.nodelay().expect("nodelay"), "off unless set");
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (ours, _) = accept(&listener).await.expect("accept");
        assert!(ours.nodelay().expect("nodelay"));
    }
}
