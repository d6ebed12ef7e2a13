//! Plain HTTP on the gateway's port, before the WebSocket upgrade: `/healthz` and `/readyz`
//! (and their aliases `/health`, `/ready`) answered as OpenClaw 2026.9.6 answers them (load
//! balancers and systemd checks poll them), `/metrics` in Prometheus' text format when the
//! gateway was started with metrics, every other request handed on to the upgrade with the
//! bytes already read. `serve_probes` answers the same on a port of their own.
//!
//! The request head is read here (bounded in size; the caller bounds it in time) and
//! replayed to tungstenite through `Rewind`, so a WebSocket client sees no difference.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use switchboard_protocol::tls;

/// The most of a request head read before it is handed on as it is (tungstenite then
/// refuses it if it is not an upgrade): a browser's upgrade request is well under this.
const MAX_HEAD: usize = 16 * 1024;

/// What the first bytes of a connection asked for.
pub enum Opening {
    /// A probe, answered and closed.
    Probe(Probe, Ask),
    /// `POST /hooks/<name>`: a webhook's message (`hooks.rs`).
    Hook(crate::hooks::HookRequest),
    /// Anything else: the upgrade, with the bytes read so far to replay.
    Upgrade(Vec<u8>),
}

/// The HTTP checks OpenClaw serves on its gateway port (2026.9.6 answers `/health` and
/// `/ready` the same as `/healthz` and `/readyz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Liveness: the process answers.
    Health,
    /// Readiness: the gateway takes connections and its store answers (ours listens only
    /// once its engine is open; a store that stops answering makes it not ready).
    Ready,
    /// Prometheus' scrape.
    Metrics,
}

/// Renders the metrics recorded so far, in Prometheus' text format.
pub type MetricsRender = std::sync::Arc<dyn Fn() -> String + Send + Sync>;

/// What a probe's answer needs.
#[derive(Clone)]
pub struct Site {
    pub started: std::time::Instant,
    pub api: std::sync::Arc<dyn switchboard_types::api::SessionsApi>,
    pub metrics: Option<MetricsRender>,
    /// The webhooks accepted at `POST /hooks/<name>` (empty: that path is an upgrade).
    pub hooks: crate::hooks::Hooks,
}

/// How long `/readyz` waits for the store to answer before it says not ready.
const READY_WAIT: Duration = Duration::from_secs(1);

/// How a probe's path was asked for: OpenClaw answers `GET` and `HEAD`, and any other
/// method with 405 naming them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Get,
    Head,
    Other,
}

impl Probe {
    fn of(path: &str) -> Option<Probe> {
        // A query string does not change the answer (`/readyz?verbose`).
        match path.split('?').next().unwrap_or_default() {
            "/healthz" | "/health" => Some(Probe::Health),
            "/readyz" | "/ready" => Some(Probe::Ready),
            "/metrics" => Some(Probe::Metrics),
            _ => None,
        }
    }

    /// OpenClaw's bodies (its `start.sh` waits for `"ready":true`). Its `/readyz` also
    /// reports its Node event loop's delays, which have no counterpart here.
    fn body(self, uptime: Duration, ready: bool) -> String {
        match self {
            Probe::Health => r#"{"ok":true,"status":"live"}"#.to_string(),
            Probe::Ready if ready => format!(
                r#"{{"ready":true,"failing":[],"uptimeMs":{}}}"#,
                uptime.as_millis()
            ),
            Probe::Ready => format!(
                r#"{{"ready":false,"failing":["store"],"uptimeMs":{}}}"#,
                uptime.as_millis()
            ),
            Probe::Metrics => String::new(),
        }
    }

    /// The whole HTTP answer to `ask` at `site` (readiness asks its store).
    pub async fn answer_for(self, ask: Ask, site: &Site) -> String {
        let uptime = site.started.elapsed();
        match self {
            Probe::Ready if ask != Ask::Other => {
                let ready = matches!(
                    tokio::time::timeout(READY_WAIT, site.api.status()).await,
                    Ok(Ok(_))
                );
                self.response_with(ask, uptime, ready)
            }
            Probe::Metrics if ask != Ask::Other => match &site.metrics {
                Some(render) => http(
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    &render(),
                    ask,
                ),
                None => http(
                    "404 Not Found",
                    "text/plain; charset=utf-8",
                    "metrics are off: start the gateway with --metrics (or --metrics-bind ADDR)\n",
                    ask,
                ),
            },
            _ => self.response_with(ask, uptime, true),
        }
    }

    fn response_with(self, ask: Ask, uptime: Duration, ready: bool) -> String {
        if ask == Ask::Other {
            let body = "Method Not Allowed";
            return format!(
                "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n\
Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        let body = self.body(uptime, ready);
        let status = if ready {
            "200 OK"
        } else {
            "503 Service Unavailable"
        };
        http(status, "application/json; charset=utf-8", &body, ask)
    }
}

/// An HTTP answer that closes the connection; `HEAD` gets the headers a `GET` would.
fn http(status: &str, content_type: &str, body: &str, ask: Ask) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n\
Cache-Control: no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.len(),
        if ask == Ask::Head { "" } else { body }
    )
}

/// Reads the request head (up to its blank line, `MAX_HEAD` or the end of input) and
/// tells a probe from a hook's or a pushed route's POST (`hooks`) and from an upgrade.
pub async fn read_opening<S: AsyncRead + Unpin>(
    stream: &mut S,
    hooks: &crate::hooks::Hooks,
) -> io::Result<Opening> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while head.len() < MAX_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request.parse(&head);
    let path = request
        .path
        .map(|p| p.split('?').next().unwrap_or_default().to_string());
    if let Ok(httparse::Status::Complete(len)) = parsed
        && request.method == Some("POST")
        && let Some(path) = path.filter(|p| p.starts_with("/hooks/") || hooks.pushes_to(p))
    {
        let header = |n: &str| {
            request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(n))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .map(str::to_string)
        };
        return Ok(Opening::Hook(crate::hooks::HookRequest {
            secret: hooks.secret_header_of(&path).and_then(|h| header(&h)),
            path,
            authorization: header("authorization"),
            content_length: header("content-length").and_then(|v| v.trim().parse().ok()),
            body_start: head[len..].to_vec(),
        }));
    }
    let probe = match parsed {
        Ok(_) => request.path.and_then(Probe::of).map(|p| {
            let ask = match request.method {
                Some("GET") => Ask::Get,
                Some("HEAD") => Ask::Head,
                _ => Ask::Other,
            };
            (p, ask)
        }),
        Err(_) => None,
    };
    Ok(match probe {
        Some((p, ask)) => Opening::Probe(p, ask),
        None => Opening::Upgrade(head),
    })
}

/// Answers a probe and closes the write side.
pub async fn answer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    probe: Probe,
    ask: Ask,
    site: &Site,
) -> io::Result<()> {
    stream
        .write_all(probe.answer_for(ask, site).await.as_bytes())
        .await?;
    stream.shutdown().await
}

/// `/metrics`, `/healthz` and `/readyz` on a listener of their own (`serve --metrics-bind`):
/// anything else is answered 404. Each connection is bounded in time and reads one request.
pub async fn serve_probes(
    listener: tokio::net::TcpListener,
    site: Site,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((mut tcp, _)) = accepted else {
                    // Out of descriptors: a moment's pause instead of spinning.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let site = site.clone();
                tokio::spawn(async move {
                    let served = async {
                        match read_opening(&mut tcp, &site.hooks).await? {
                            Opening::Probe(probe, ask) => answer(&mut tcp, probe, ask, &site).await,
                            Opening::Upgrade(_) | Opening::Hook(_) => {
                                let body = "only /metrics, /healthz and /readyz here\n";
                                tcp.write_all(
                                    http("404 Not Found", "text/plain; charset=utf-8", body, Ask::Get)
                                        .as_bytes(),
                                )
                                .await?;
                                tcp.shutdown().await
                            }
                        }
                    };
                    let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
                });
            }
        }
    }
}

/// A stream that first gives back `head` (bytes already read from it), then reads on.
pub struct Rewind {
    head: Vec<u8>,
    at: usize,
    inner: tls::Stream,
}

impl Rewind {
    pub fn new(head: Vec<u8>, inner: tls::Stream) -> Rewind {
        Rewind { head, at: 0, inner }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.head.len() {
            let n = (self.head.len() - self.at).min(buf.remaining());
            let from = self.at;
            buf.put_slice(&self.head[from..from + n]);
            self.at += n;
            if self.at == self.head.len() {
                // Replayed: its memory is not held for the connection's life.
                self.head = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_probe_is_told_from_an_upgrade_whose_bytes_are_replayed() {
        let mut probe: &[u8] = b"GET /readyz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(matches!(
            read_opening(&mut probe, &crate::hooks::Hooks::default())
                .await
                .expect("read"),
            Opening::Probe(Probe::Ready, Ask::Get)
        ));
        let upgrade = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n\x81\x00".to_vec();
        let mut reader: &[u8] = &upgrade;
        let Opening::Upgrade(head) = read_opening(&mut reader, &crate::hooks::Hooks::default())
            .await
            .expect("read")
        else {
            panic!("an upgrade is not a probe");
        };
        let mut rewound = Rewind::new(head, Box::new(tokio::io::duplex(64).0));
        let mut all = Vec::new();
        rewound.read_to_end(&mut all).await.expect("replay");
        assert_eq!(all, upgrade, "every byte read is given back");
    }
}
