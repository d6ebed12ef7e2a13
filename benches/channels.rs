//! The outbox drain (issue 29): 10,000 queued webhook deliveries in a SQLite store, drained
//! to a local receiver that answers each at once (keep-alive, in this process), with the
//! drain's defaults (batches of 128, 32 sends in flight). Figures: deliveries per second
//! from the drain's start to the last one recorded `sent`, and the check that each was
//! received once. Then the same on PostgreSQL (a throwaway cluster, fsync off as the tests',
//! when its server programs are installed). Run: `cargo bench --bench channels`
//! (`CHANNELS_N=2000` for fewer).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "support/receiver.rs"]
mod receiver;

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;
use std::time::{Duration, Instant};

use switchboard_channels::webhook::Webhook;
use switchboard_channels::{Adapter, Drain, DrainOptions, RetryPolicy};
use switchboard_store::{OutboxRow, OutboxStatus, Store};
use switchboard_store_sqlite::{SqliteStore, Storage};

/// Queue `n` deliveries in `store`, drain them to a receiver answering at once; print the
/// rate under `kind`.
async fn drain(kind: &str, store: Arc<dyn Store>, n: usize) {
    receiver::queue(store.as_ref(), n).await;
    let received = receiver::Received::default();
    let url = receiver::start(received.clone()).await;
    let http = switchboard::channels::http_client().expect("client");
    let hook = Webhook::new(
        "bench",
        &url,
        "bench-secret-0123456789",
        http,
        Duration::from_secs(10),
    );
    let adapter = Arc::new(Adapter::new(Arc::new(hook), RetryPolicy::default()));
    let sent = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let (s2, d2) = (sent.clone(), done.clone());
    let started = Instant::now();
    let drain = Drain::new(
        store.clone(),
        vec![adapter],
        DrainOptions::new("bench".into()),
        Arc::new(move |row: &OutboxRow| {
            if row.status == OutboxStatus::Sent && s2.fetch_add(1, Ordering::Relaxed) + 1 == n {
                d2.notify_one();
            }
        }),
    )
    .start();
    tokio::time::timeout(Duration::from_secs(600), done.notified())
        .await
        .expect("drained within 10 minutes");
    let took = started.elapsed();
    drain.stop().await;
    println!(
        "{kind}: drained {n} webhook deliveries in {:.2} s: {:.0} deliveries/s ({} requests received)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        received.requests()
    );
    assert_eq!(received.requests(), n, "each sent once");
    assert_eq!(received.distinct(), n, "under its own key");
}

fn main() {
    let n: usize = std::env::var("CHANNELS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::new(
        Storage::open(dir.path()).expect("storage"),
    ));
    runtime.block_on(drain("SQLite", sqlite, n));
    // The same drain on PostgreSQL: its claims take rows with SKIP LOCKED, each outcome is
    // its own transaction (a throwaway cluster, as the tests start theirs).
    match pg::cluster() {
        Ok(cluster) => {
            let url = pg::fresh_database(cluster);
            let store: Arc<dyn Store> =
                Arc::new(switchboard_store_postgres::PgStore::open(&url).expect("open"));
            runtime.block_on(drain("PostgreSQL", store, n));
        }
        Err(e) => eprintln!("channels bench: no PostgreSQL ({e}); apt-get install postgresql"),
    }
}
