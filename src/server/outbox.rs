//! A connection's outbound side after `hello-ok`: one bounded queue (frames and bytes) and
//! the one writer task that drains it onto the socket. Events are numbered (`seq` 1, 2, 3 …)
//! in the order they enter the queue; a client that falls more than the queue behind is
//! disconnected as lagged instead of growing the server's memory. Every connection's queue
//! also draws on one `Budget` shared by the whole gateway, so a thousand clients that stop
//! reading cannot together hold more than it.

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
use crate::protocol::{ErrorShape, Event, Frame, Response};

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
pub fn outbox(max_bytes: usize, budget: Arc<Budget>) -> (Arc<Outbox>, Writer) {
    let (tx, rx) = mpsc::channel(MAX_QUEUED_FRAMES);
    let queued_bytes = Arc::new(AtomicUsize::new(0));
    let (ending_tx, ending_rx) = watch::channel(None);
    budget.connections.fetch_add(1, Ordering::SeqCst);
    let outbox = Outbox {
        numbering: Mutex::new(Numbering {
            last_seq: 0,
            closed: false,
        }),
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
        Ok(())
    }

    /// Queues the answer to request `id`.
    pub fn response(&self, id: String, outcome: Result<Value, ErrorShape>) -> Result<(), Gone> {
        let (ok, payload, error) = match outcome {
            Ok(v) => (true, Some(v), None),
            Err(e) => (false, None, Some(e)),
        };
        let frame = Frame::Res(Response {
            id,
            ok,
            payload,
            error,
            extra: serde_json::Map::new(),
        });
        let mut n = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        if n.closed {
            return Err(Gone);
        }
        self.queue(&mut n, &frame)
    }

    fn queue(&self, n: &mut Numbering, frame: &Frame) -> Result<(), Gone> {
        let text = match frame.encode() {
            Ok(t) => t,
            Err(e) => {
                // Our own frames are plain JSON values; failing to encode one is a bug, but
                // not one to take the connection down for.
                tracing::error!(error = %e, "an outgoing frame could not be encoded");
                return Ok(());
            }
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
        n.closed = true;
        self.ending.send_replace(Some(Ending {
            code: CloseCode::Policy,
            reason,
            drain: false,
        }));
        Err(Gone)
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
