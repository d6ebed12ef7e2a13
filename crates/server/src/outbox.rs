//! A connection's outbound side after `hello-ok`: one bounded queue (frames and bytes) and
//! the one writer task that drains it onto the socket. Events are numbered (`seq` 1, 2, 3 …)
//! in the order they enter the queue; a client that falls more than the queue behind is
//! disconnected as lagged instead of growing the server's memory. Every connection's queue
//! also draws on one `Budget` shared by the whole gateway, so a thousand clients that stop
//! reading cannot together hold more than it. No frame larger than the
//! `maxPayload` the gateway advertises is ever queued: one that would be has its texts cut
//! (with the marker) until it fits, or, failing that, an answer becomes an error and an event
//! is left out (its `seq` is skipped, so the client knows it missed one).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{Sink, SinkExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::private_paths::PrivatePaths;
use switchboard_protocol::{ErrorShape, Event, Frame, Rendered, Response};

/// Frames a connection may have queued, whatever their size: many tiny frames cost memory
/// too (one allocation each).
pub const MAX_QUEUED_FRAMES: usize = 16_384;
/// How long queued frames may take to go out once a connection is closing normally.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long the close frame itself may take (a client that does not read never takes it).
pub const CLOSE_LIMIT: Duration = Duration::from_secs(1);
/// The least a connection may have queued before the shared budget, once spent, ends it: a
/// client that keeps up (nothing queued when the next frame comes) is never ended for the
/// backlog of others.
pub const FAIR_SHARE: usize = 256 * 1024;

/// The bytes of encoded frames queued across all connections, and their limit.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    max: usize,
    /// Connections drawing on it, for each one's share.
    connections: AtomicUsize,
}

impl Budget {
    pub fn new(max: usize) -> Budget {
        Budget {
            used: AtomicUsize::new(0),
            max,
            connections: AtomicUsize::new(0),
        }
    }

    /// What one connection may have queued once the budget is spent: an equal part of it,
    /// and never less than `FAIR_SHARE`.
    fn share(&self) -> usize {
        let n = self.connections.load(Ordering::SeqCst).max(1);
        (self.max / n).max(FAIR_SHARE)
    }

    /// Bytes queued now, across all connections.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    fn release(&self, len: usize) {
        self.used.fetch_sub(len, Ordering::SeqCst);
    }
}

/// How the connection ends: the close code and reason, and whether what is queued is sent
/// first (a lagged connection's queue is dropped: it is the problem).
#[derive(Debug, Clone)]
pub struct Ending {
    pub code: CloseCode,
    pub reason: String,
    pub drain: bool,
}

/// The frame could not be queued: the connection is closing (lagged, or ended).
#[derive(Debug)]
pub struct Gone;

struct Numbering {
    /// The last event `seq` handed out.
    last_seq: u64,
    /// Set once: no frame is queued after the connection began to close.
    closed: bool,
}

/// The sending half every task of a connection shares.
pub struct Outbox {
    numbering: Mutex<Numbering>,
    /// The largest frame this connection is sent: the gateway's `maxPayload`.
    frame_limit: AtomicUsize,
    tx: mpsc::Sender<String>,
    queued_bytes: Arc<AtomicUsize>,
    max_bytes: usize,
    budget: Arc<Budget>,
    ending: watch::Sender<Option<Ending>>,
    /// Set for a connection that may not see the server's paths: applied to every frame.
    hidden: std::sync::OnceLock<Arc<PrivatePaths>>,
}

/// The writer's half: spawn `run` on it.
pub struct Writer {
    rx: mpsc::Receiver<String>,
    queued_bytes: Arc<AtomicUsize>,
    budget: Arc<Budget>,
    ending: watch::Receiver<Option<Ending>>,
}

/// A queue holding at most `max_bytes` of encoded frames (and `MAX_QUEUED_FRAMES` frames),
/// drawing on the gateway's `budget`.
pub fn outbox(max_bytes: usize, max_payload: usize, budget: Arc<Budget>) -> (Arc<Outbox>, Writer) {
    let (tx, rx) = mpsc::channel(MAX_QUEUED_FRAMES);
    let queued_bytes = Arc::new(AtomicUsize::new(0));
    let (ending_tx, ending_rx) = watch::channel(None);
    budget.connections.fetch_add(1, Ordering::SeqCst);
    let outbox = Outbox {
        numbering: Mutex::new(Numbering {
            last_seq: 0,
            closed: false,
        }),
        // The `maxPayload` this connection's `hello-ok` advertised: nothing sent is larger.
        frame_limit: AtomicUsize::new(max_payload),
        tx,
        queued_bytes: queued_bytes.clone(),
        max_bytes,
        budget: budget.clone(),
        ending: ending_tx,
        hidden: std::sync::OnceLock::new(),
    };
    let writer = Writer {
        rx,
        queued_bytes,
        budget,
        ending: ending_rx,
    };
    (Arc::new(outbox), writer)
}

impl Outbox {
    /// From now on, every frame queued has `paths` hidden (`private_paths.rs`).
    pub fn hide_paths(&self, paths: Arc<PrivatePaths>) {
        let _ = self.hidden.set(paths);
    }

    /// Queues an event with the connection's next `seq`.
    pub fn event(&self, event: &str, payload: Value) -> Result<(), Gone> {
        let mut n = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        if n.closed {
            return Err(Gone);
        }
        let seq = n.last_seq + 1;
        let frame = Frame::Event(Event {
            event: event.to_string(),
            payload: Some(payload),
            seq: Some(seq),
            state_version: None,
            extra: serde_json::Map::new(),
        });
        // Numbered and queued under one lock, so frames leave in `seq` order.
        self.queue(&mut n, &frame)?;
        n.last_seq = seq;
        super::meters::event_sent();
        Ok(())
    }

    /// Queues the answer to request `id`.
    pub fn response(&self, id: String, outcome: Result<Value, ErrorShape>) -> Result<(), Gone> {
        super::meters::answered(outcome.as_ref().err().map(|e| e.code.as_str()));
        let (ok, payload, error) = match outcome {
            Ok(v) => (true, Some(v), None),
            Err(e) => (false, None, Some(e)),
        };
        let frame = Frame::Res(Response {
            id,
            ok,
            payload,
            rendered: None,
            error,
            extra: serde_json::Map::new(),
        });
        let mut n = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        if n.closed {
            return Err(Gone);
        }
        self.queue(&mut n, &frame)
    }

    /// An answer whose payload is already JSON text (`Rendered`), queued as `response`.
    pub fn response_rendered(&self, id: String, payload: Rendered) -> Result<(), Gone> {
        super::meters::answered(None);
        let frame = Frame::Res(Response {
            id,
            ok: true,
            payload: None,
            rendered: Some(payload),
            error: None,
            extra: serde_json::Map::new(),
        });
        let mut n = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        if n.closed {
            return Err(Gone);
        }
        self.queue(&mut n, &frame)
    }

    fn queue(&self, n: &mut Numbering, frame: &Frame) -> Result<(), Gone> {
        let Some(text) = self.encode_within_limit(frame) else {
            return Ok(());
        };
        let text = match self.hidden.get() {
            Some(paths) => paths.scrub(text),
            None => text,
        };
        let len = text.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::SeqCst);
        let shared_before = self.budget.used.fetch_add(len, Ordering::SeqCst);
        let over_own = before + len > self.max_bytes;
        // Past the shared budget, only a connection already holding more than its share is
        // ended: the one that is behind, not whichever happens to queue next.
        let over_shared = shared_before + len > self.budget.max && before > self.budget.share();
        if !over_own && !over_shared && self.tx.try_send(text).is_ok() {
            return Ok(());
        }
        self.queued_bytes.fetch_sub(len, Ordering::SeqCst);
        self.budget.release(len);
        if self.tx.is_closed() {
            n.closed = true;
            return Err(Gone);
        }
        let frames = MAX_QUEUED_FRAMES - self.tx.capacity();
        let reason = if over_shared && !over_own {
            format!(
                "lagged: {before} bytes in {frames} frames not yet read, while the gateway's \
                 outbound budget ({} bytes) is spent",
                self.budget.max
            )
        } else {
            format!(
                "lagged: {before} bytes in {frames} frames not yet read by the client (limit {} \
                 bytes)",
                self.max_bytes
            )
        };
        tracing::warn!(%reason, "disconnecting a slow client");
        super::meters::lagged();
        n.closed = true;
        self.ending.send_replace(Some(Ending {
            code: CloseCode::Policy,
            reason,
            drain: false,
        }));
        Err(Gone)
    }

    /// `frame` encoded within the frame limit: as it is, or with its texts cut to fit, or
    /// (an answer) as an error saying it was too large. `None`: nothing can be sent for it.
    fn encode_within_limit(&self, frame: &Frame) -> Option<String> {
        let text = match frame.encode() {
            Ok(t) => t,
            Err(e) => {
                // Our own frames are plain JSON values; failing to encode one is a bug, but
                // not one to take the connection down for.
                tracing::error!(error = %e, "an outgoing frame could not be encoded");
                return None;
            }
        };
        let limit = self.frame_limit.load(Ordering::Relaxed);
        if text.len() <= limit {
            return Some(text);
        }
        let size = text.len();
        drop(text);
        let mut cut = frame.clone();
        let payload = match &mut cut {
            Frame::Res(r) => r.payload.as_mut(),
            Frame::Event(e) => e.payload.as_mut(),
            Frame::Req(_) => None,
        };
        let fits = payload.is_some_and(|p| super::fit::cut_to_fit(p, super::fit::budget(limit)));
        if let Some(text) = fits
            .then(|| cut.encode().ok())
            .flatten()
            .filter(|t| t.len() <= limit)
        {
            tracing::info!(
                size,
                limit,
                "an outgoing frame's texts were cut to fit maxPayload"
            );
            return Some(text);
        }
        tracing::warn!(size, limit, "an outgoing frame does not fit maxPayload");
        let Frame::Res(r) = frame else {
            return None;
        };
        let error = ErrorShape {
            code: switchboard_protocol::INVALID_REQUEST.to_string(),
            message: format!(
                "the answer ({size} bytes) does not fit this gateway's maxPayload ({limit} \
bytes): ask for less"
            ),
            extra: serde_json::Map::new(),
        };
        Frame::Res(Response {
            id: r.id.clone(),
            ok: false,
            payload: None,
            rendered: None,
            error: Some(error),
            extra: serde_json::Map::new(),
        })
        .encode()
        .ok()
        .filter(|t| t.len() <= limit)
    }

    /// Ends the connection: nothing more is queued; the writer sends what is queued (if
    /// `drain`) and then the close frame. The first ending wins.
    pub fn close(&self, ending: Ending) {
        let mut n = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        n.closed = true;
        self.ending.send_if_modified(|e| {
            if e.is_some() {
                return false;
            }
            *e = Some(ending);
            true
        });
    }

    /// Whether the connection began to close (lagged, or `close` was called): its reader
    /// takes no more requests then.
    pub fn is_closed(&self) -> bool {
        self.numbering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed
    }

    /// Resolves when the connection began to close (lagged, or `close` was called).
    pub async fn closing(&self) -> Ending {
        let mut rx = self.ending.subscribe();
        match rx.wait_for(|e| e.is_some()).await {
            Ok(e) => e.clone().unwrap_or_else(normal),
            // The sender lives in `self`, so it cannot be dropped while this runs.
            Err(_) => normal(),
        }
    }
}

fn normal() -> Ending {
    Ending {
        code: CloseCode::Normal,
        reason: String::new(),
        drain: true,
    }
}

impl Writer {
    /// Writes queued frames until the connection ends, then its close frame.
    pub async fn run<K: Sink<Message> + Unpin>(mut self, mut sink: K) {
        loop {
            let text = tokio::select! {
                biased;
                _ = self.ending.wait_for(|e| e.is_some()) => break,
                next = self.rx.recv() => match next {
                    Some(t) => t,
                    None => break,
                },
            };
            self.queued_bytes.fetch_sub(text.len(), Ordering::SeqCst);
            self.budget.release(text.len());
            // A send blocked on a client that does not read must not outlive a lag verdict.
            let sent = tokio::select! {
                biased;
                _ = self.ending.wait_for(|e| e.is_some()) => break,
                r = sink.send(Message::text(text)) => r,
            };
            if sent.is_err() {
                return;
            }
        }
        let ending = self.ending.borrow().clone().unwrap_or_else(normal);
        if ending.drain {
            let drain = async {
                while let Ok(text) = self.rx.try_recv() {
                    self.queued_bytes.fetch_sub(text.len(), Ordering::SeqCst);
                    self.budget.release(text.len());
                    if sink.send(Message::text(text)).await.is_err() {
                        return false;
                    }
                }
                true
            };
            if !matches!(tokio::time::timeout(DRAIN_LIMIT, drain).await, Ok(true)) {
                return;
            }
        }
        // Close reasons are capped at 123 bytes by the WebSocket spec.
        let frame = CloseFrame {
            code: ending.code,
            reason: truncate(&ending.reason, 120).into(),
        };
        let _ = tokio::time::timeout(CLOSE_LIMIT, sink.send(Message::Close(Some(frame)))).await;
    }
}

impl Drop for Writer {
    /// Frames never written leave the shared budget with the connection (a lagged one's
    /// whole queue); the queue is closed first, so nothing is added behind this.
    fn drop(&mut self) {
        self.budget.connections.fetch_sub(1, Ordering::SeqCst);
        self.rx.close();
        while let Ok(text) = self.rx.try_recv() {
            self.queued_bytes.fetch_sub(text.len(), Ordering::SeqCst);
            self.budget.release(text.len());
        }
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_frame_over_the_limit_is_queued() {
        let (outbox, mut writer) = outbox(1 << 30, 64 * 1024, Arc::new(Budget::new(1 << 30)));
        let mut next = || {
            let text = writer.rx.try_recv().expect("a frame was queued");
            assert!(text.len() <= 64 * 1024, "{} bytes", text.len());
            serde_json::from_str::<Value>(&text).expect("json")
        };
        // Text is cut, with the marker.
        outbox
            .response("a".into(), Ok(json!({"text": "\"".repeat(1_000_000)})))
            .expect("queued");
        let cut = next();
        assert_eq!(cut["ok"], true);
        let text = cut["payload"]["text"].as_str().expect("text");
        assert!(text.ends_with(super::super::fit::TRUNCATION_MARKER));
        // Bulk that is not text: the answer becomes an error saying so.
        let numbers: Vec<u32> = (0..100_000).collect();
        outbox
            .response("b".into(), Ok(json!(numbers)))
            .expect("queued");
        let refused = next();
        assert_eq!(
            (refused["id"].as_str(), refused["ok"].as_bool()),
            (Some("b"), Some(false))
        );
        assert!(
            refused["error"]["message"]
                .as_str()
                .expect("message")
                .contains("maxPayload")
        );
        // An event that cannot fit is left out, and its `seq` skipped: the client resyncs.
        outbox.event("small", json!({"n": 1})).expect("queued");
        outbox.event("bulk", json!(numbers)).expect("not an error");
        outbox.event("small", json!({"n": 2})).expect("queued");
        assert_eq!(next()["seq"], 1);
        assert_eq!(next()["seq"], 3);
        assert!(writer.rx.try_recv().is_err());
    }
}
