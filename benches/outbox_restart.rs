//! 10,000 queued deliveries drained across a crash (issue 29): they are queued in a state
//! folder's SQLite store for a webhook channel, a real `switchboard serve` (release build)
//! starts draining them to a receiver in this process, is killed with SIGKILL about halfway,
//! and is started again on the same folder, which drains the rest. Figures: how many
//! reached the receiver before the kill, the time from the restart to the last delivery, and
//! the count of distinct `Idempotency-Key`s received (lost = 10,000 − distinct) against the
//! requests (a repeat is a send in flight at the kill, which the key lets a receiver drop),
//! and the restarted `serve`'s resident memory once done.
//! Run: `cargo bench --bench outbox_restart` (`RESTART_N=2000` for fewer).

#[path = "support/receiver.rs"]
mod receiver;
#[path = "support/serve_process.rs"]
mod serve_process;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_store_sqlite::{SqliteStore, Storage};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// Queues `n` webhook deliveries in the state folder `state` (closed again before `serve`).
async fn queue(state: &Path, n: usize) {
    let store = SqliteStore::new(Storage::open(state).expect("storage"));
    receiver::queue(&store, n).await;
}

fn serve(dir: &Path) -> Child {
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("SWITCHBOARD_STATE_DIR", dir.join("state"))
        .env("SWITCHBOARD_CONFIG", dir.join("config.json5"))
        .env("SWITCHBOARD_GATEWAY_TOKEN", "bench-token-0123456789")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    serve_process::listening_addr(&mut child);
    child
}

/// Waits (bounded) until `done` holds, checking every millisecond.
fn wait(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn main() {
    let n: usize = std::env::var("RESTART_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let received = receiver::Received::default();
    let url = runtime.block_on(receiver::start(received.clone()));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("config.json5"),
        format!(
            r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted" }} ] }},
                channels: {{ webhook: {{ bench: {{ url: "{url}",
                  secret: "bench-secret-0123456789" }} }} }} }}"#
        ),
    )
    .expect("config");
    runtime.block_on(queue(&dir.path().join("state"), n));

    let mut first = serve(dir.path());
    wait("half of them sent", Duration::from_secs(300), || {
        received.requests() >= n / 2
    });
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");
    let before = received.requests();

    let restarted = Instant::now();
    let mut second = serve(dir.path());
    wait("every delivery received", Duration::from_secs(600), || {
        received.distinct() >= n
    });
    let took = restarted.elapsed();
    // Anything still to come (a repeat) would come now; none is expected.
    std::thread::sleep(Duration::from_millis(500));
    let rss = serve_process::rss_mib(second.id());
    let _ = second.kill();
    let _ = second.wait();
    let (requests, distinct) = (received.requests(), received.distinct());
    println!(
        "{n} queued; {before} received before the kill; the restarted serve delivered the rest \
         in {:.2} s ({:.0}/s); distinct keys {distinct} (lost {}), requests {requests} \
         (repeats {}); the restarted serve's RSS after {rss:.1} MiB",
        took.as_secs_f64(),
        (n - before.min(n)) as f64 / took.as_secs_f64(),
        n - distinct.min(n),
        requests - distinct
    );
    assert_eq!(distinct, n, "none lost");
}
