//! The hand-over of a session scan: the store reads rows on its side in chunks, and reads
//! the next chunk only when the caller asks for it, so a caller that stops early leaves
//! nothing read in vain (a list of 50 rows read 150 when the reader ran ahead).

use tokio::sync::mpsc;

use crate::{StoreError, StoredSession};

/// One chunk of a scan, or the error that ended it.
pub type ScanChunk = Result<Vec<StoredSession>, StoreError>;

/// A new scan's two ends: the store keeps the feed, the caller the rows.
pub fn scan_channel() -> (ScanFeed, ScanRows) {
    let (chunks_tx, chunks) = mpsc::channel(1);
    let (demand, demand_rx) = mpsc::channel(1);
    (
        ScanFeed {
            chunks: chunks_tx,
            demand: demand_rx,
        },
        ScanRows {
            chunks,
            demand,
            asked: false,
        },
    )
}

/// The caller's end: chunks in order until the scan ends (`None`) or fails.
pub struct ScanRows {
    chunks: mpsc::Receiver<ScanChunk>,
    demand: mpsc::Sender<()>,
    asked: bool,
}

impl ScanRows {
    /// The next chunk. The first is read unasked, each later one when this asks for it.
    pub async fn next(&mut self) -> Option<ScanChunk> {
        if self.asked {
            // The store's side gone means the scan ended; `recv` then says so.
            let _ = self.demand.send(()).await;
        }
        self.asked = true;
        self.chunks.recv().await
    }
}

/// The store's end, used from the thread that reads.
pub struct ScanFeed {
    chunks: mpsc::Sender<ScanChunk>,
    demand: mpsc::Receiver<()>,
}

impl ScanFeed {
    /// Hand a full chunk over and wait (blocking) until the caller asks for the next; false
    /// when the caller has stopped reading, and the scan should end.
    pub fn hand_over_blocking(&mut self, chunk: Vec<StoredSession>) -> bool {
        self.chunks.blocking_send(Ok(chunk)).is_ok() && self.demand.blocking_recv().is_some()
    }

    /// The scan's end: its last rows (when any) or its error.
    pub fn finish_blocking(self, last: ScanChunk) {
        if last.as_ref().map_or(true, |rows| !rows.is_empty()) {
            let _ = self.chunks.blocking_send(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The reader reads a chunk only when asked: after the first chunk it waits, and when
    /// the caller drops its end, the reader learns to stop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_chunk_is_read_only_when_asked_for() {
        let (mut feed, mut rows) = scan_channel();
        let handed = Arc::new(AtomicUsize::new(0));
        let seen = handed.clone();
        let reader = std::thread::spawn(move || {
            let mut going = true;
            while going && seen.load(Ordering::SeqCst) < 3 {
                going = feed.hand_over_blocking(Vec::new());
                if going {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
            going
        });
        assert!(rows.next().await.expect("first chunk").is_ok());
        // Not asked yet: the reader is still waiting after its first hand-over.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(handed.load(Ordering::SeqCst), 0);
        assert!(rows.next().await.expect("second chunk").is_ok());
        drop(rows);
        assert!(
            !reader.join().expect("reader"),
            "the reader stops once the caller is gone"
        );
        assert_eq!(handed.load(Ordering::SeqCst), 1);
    }
}
