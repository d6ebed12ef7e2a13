//! The remote console over a slow link (DESIGN §4, issue 12): the console on a `RemoteApi`
//! whose `Link` reaches an in-process `server::run` through a delaying TCP proxy (every chunk
//! held 50 ms each way: a 100 ms round trip on real sockets). It measures
//! - key → frame: `Console::update(Intent::Down/Up)`, the loads it asks for handed to the
//!   effects `Runner` (so they really cross the link and stay in flight), `refresh`, and a
//!   120×40 draw; results are fed back as they arrive, as the app does. Target < 16 ms.
//! - one loop turn: the results that arrived since the last key applied, then key → frame.
//! - a full reload (sessions page + transcript) until the screen is settled, for the record.
//! - the link's bare round trip (`status`), to show the proxy delays as it should.
//!
//! It reuses the state folder that `cargo bench --bench store` builds and caches (run that
//! first). Run: `cargo bench --bench remote_console`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard_config::Config;
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::{Effect, Runner};
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::{SessionsApi, SessionsQuery};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

const TOKEN: &str = "bench-token-0123456789";
/// Each way; the round trip is twice this.
const ONE_WAY: Duration = Duration::from_millis(50);
/// Between keys: a held arrow key repeats about this often, so several keys fall inside
/// one round trip and their loads overlap on the link.
const KEY_GAP: Duration = Duration::from_millis(10);
const BIG_KEY: &str = "agent:main:main";

fn cached_state() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-state/store-v2-100k-sessions-1m-lines");
    dir.join("switchboard.db").exists().then_some(dir)
}

/// Copies `from` to `to`, each chunk written `ONE_WAY` after it was read; reading goes on
/// meanwhile, so the link delays without throttling (as a long fat pipe does).
async fn delayed_copy(
    from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
) {
    let (tx, mut rx) = unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let mut from = from;
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let due = tokio::time::Instant::now() + ONE_WAY;
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    while let Some((due, bytes)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&bytes).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// A proxy to `upstream` that delays every chunk `ONE_WAY` in each direction.
async fn delaying_proxy(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(delayed_copy(cr, sw));
                tokio::spawn(delayed_copy(sr, cw));
            });
        }
    });
    addr
}

/// What the loop sent and got back.
#[derive(Default)]
struct Traffic {
    sessions_loads: usize,
    transcript_loads: usize,
    results: usize,
}

impl Traffic {
    fn count(&mut self, effects: &[Effect]) {
        for e in effects {
            match e {
                Effect::LoadSessions { .. } => self.sessions_loads += 1,
                Effect::LoadTranscript { .. } => self.transcript_loads += 1,
                _ => {}
            }
        }
    }
}

/// The app's loop minus the terminal: results are applied as they come, loads go to the
/// runner (over the link), and the frame is drawn.
struct Loop {
    console: Console,
    runner: Runner,
    rx: UnboundedReceiver<Action>,
    term: Terminal<TestBackend>,
    keymap: Keymap,
    traffic: Traffic,
}

impl Loop {
    fn run(&mut self, effects: Vec<Effect>) {
        self.traffic.count(&effects);
        self.runner.run(effects);
    }

    /// Applies every result that has arrived; true if any did.
    fn apply_arrived(&mut self) -> bool {
        let mut any = false;
        while let Ok(a) = self.rx.try_recv() {
            any = true;
            self.traffic.results += 1;
            let effects = self.console.update(a);
            self.run(effects);
        }
        any
    }

    fn frame(&mut self) {
        let effects = self.console.refresh();
        self.run(effects);
        let (state, keymap) = (&self.console.state, &self.keymap);
        self.term
            .draw(|f| switchboard_tui::view::draw(f, state, keymap))
            .expect("draw");
    }

    fn key(&mut self, intent: Intent) {
        let effects = self.console.update(Action::Intent(intent));
        self.run(effects);
        self.frame();
    }

    /// Waits (on this thread; the runtime's workers carry the link) until nothing is
    /// pending, applying results as they come. Fails after a minute: a hang, not a figure.
    fn settle(&mut self) {
        let until = Instant::now() + Duration::from_secs(60);
        self.frame();
        while self.console.pending() {
            assert!(Instant::now() < until, "the console never settled");
            if self.apply_arrived() {
                self.frame();
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// This thread's CPU time: set beside the wall time, it tells the work a key costs from the
/// time the thread waited for a core (the VM's 2 cores are shared with the link's workers).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len().max(1) as u32;
    println!(
        "{name:<58} n={:<4} median {:>10.3?}  mean {:>10.3?}  p99 {:>10.3?}  max {:>10.3?}",
        samples.len(),
        percentile(&samples, 0.5),
        mean,
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or_default(),
    );
}

fn main() {
    let Some(dir) = cached_state() else {
        eprintln!(
            "remote_console bench: run `cargo bench --bench store` first (it builds the 100,000-session state)"
        );
        return;
    };
    // `cargo test --benches` runs this with `--test`: a short pass that checks it works.
    let quick = std::env::args().any(|a| a == "--test");
    let keys = if quick { 20 } else { 400 };
    let reloads = if quick { 2 } else { 20 };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let engine = switchboard::state_folder::open_engine(&dir, Config::default()).expect("open");
    let api: Arc<dyn SessionsApi> = Arc::new(engine);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let gateway = listener.local_addr().expect("addr").to_string();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(switchboard_server::run(
        listener,
        api,
        switchboard_server::Options::new(TOKEN.into()),
        async move {
            let _ = stopped.await;
        },
    ));
    let proxy = rt.block_on(delaying_proxy(gateway));
    let link = rt
        .block_on(Link::connect(LinkOptions::new(
            format!("ws://{proxy}"),
            Some(TOKEN.into()),
        )))
        .expect("the gateway accepts the token through the proxy");
    let remote: Arc<dyn SessionsApi> = RemoteApi::new(Arc::new(link));

    // The link's bare round trip: two proxy legs plus the gateway.
    let mut rtts = Vec::new();
    for _ in 0..if quick { 3 } else { 20 } {
        let t = Instant::now();
        rt.block_on(remote.status()).expect("status");
        rtts.push(t.elapsed());
    }
    let min_rtt = rtts.iter().min().copied().unwrap_or_default();
    assert!(
        min_rtt >= 2 * ONE_WAY,
        "the proxy delays every round trip ({min_rtt:?})"
    );

    let (tx, rx) = unbounded_channel::<Action>();
    let runner = Runner::new(remote.clone(), tx);
    let mut state = State::new(format!("ws://{proxy}"), 1_795_353_349_734);
    state.link = remote.link();
    state.width = 120;
    state.height = 40;
    let mut lp = Loop {
        console: Console::new(state),
        runner,
        rx,
        term: Terminal::new(TestBackend::new(120, 40)).expect("terminal"),
        keymap: Keymap::defaults(),
        traffic: Traffic::default(),
    };
    lp.settle();
    // The 1,000,000-message transcript is agent:main:main: select it (keys without waiting,
    // then one settle), so the keys below move around the heaviest transcript.
    if let Some(i) = lp
        .console
        .state
        .sessions
        .rows
        .iter()
        .position(|r| r.key == BIG_KEY)
    {
        for _ in 0..i {
            lp.key(Intent::Down);
        }
    }
    lp.settle();
    assert_eq!(lp.console.state.transcript.key.as_deref(), Some(BIG_KEY));

    // Held arrow keys: 20 down, 20 up, …, one every KEY_GAP; the transcript load each asks
    // for is in flight over the 100 ms link while the next keys are handled.
    let arrows = held_keys(&mut lp, keys, Intent::Down, Intent::Up);
    // Held page keys cross the edge of the 400-row sessions window too: session pages are
    // asked for and in flight as well.
    let pages = held_keys(&mut lp, keys, Intent::PageDown, Intent::PageUp);

    // A full reload (what a lag or a resync asks for): the page and the transcript over the
    // link, until the screen is settled.
    let mut reload = Vec::with_capacity(reloads);
    for _ in 0..reloads {
        let t = Instant::now();
        let effects = lp.console.update(Action::Lagged);
        lp.run(effects);
        lp.settle();
        reload.push(t.elapsed());
    }

    // `sessions list` (50 rows) as the CLI asks for it now (one page carrying the entries)
    // and as it did before (the page, then each row's detail: a round trip per row).
    let page = SessionsQuery {
        limit: 50,
        entries: true,
        ..SessionsQuery::default()
    };
    let mut list_now = Vec::new();
    let mut list_before = Vec::new();
    for _ in 0..if quick { 1 } else { 3 } {
        let t = Instant::now();
        let rows = rt
            .block_on(remote.sessions(page.clone()))
            .expect("page")
            .rows;
        assert!(rows.len() == 50 && rows.iter().all(|r| r.entry.is_some()));
        list_now.push(t.elapsed());
        let t = Instant::now();
        let rows = rt
            .block_on(remote.sessions(SessionsQuery {
                entries: false,
                ..page.clone()
            }))
            .expect("page")
            .rows;
        for r in &rows {
            rt.block_on(remote.session(&r.key)).expect("detail");
        }
        list_before.push(t.elapsed());
    }

    println!(
        "remote console over a delaying proxy ({} ms each way), 100,000 sessions, {BIG_KEY} \
(1,000,000 lines) selected, 120x40",
        ONE_WAY.as_millis()
    );
    report("remote_console/link_round_trip_status", rtts);
    arrows.report("down_up");
    pages.report("pagedown_pageup");
    report(
        "remote_console/reload_sessions_and_transcript_settled",
        reload,
    );
    report(
        "remote_cli/sessions_list_50_one_page_with_entries",
        list_now,
    );
    report(
        "remote_cli/sessions_list_50_page_then_a_request_per_row",
        list_before,
    );
    for held in [&arrows, &pages] {
        assert!(
            held.in_flight_at_key * 2 > keys,
            "the keys were handled with loads in flight"
        );
    }
}

/// Key → frame while keys are held: what one run of `keys` keys measured.
struct Held {
    keys: usize,
    key_to_frame: Vec<Duration>,
    /// The key thread's CPU time for the same span.
    key_cpu: Vec<Duration>,
    turn: Vec<Duration>,
    turn_cpu: Vec<Duration>,
    traffic: Traffic,
    in_flight_at_key: usize,
}

impl Held {
    fn report(&self, name: &str) {
        report(
            &format!("remote_console/{name}/key_to_frame_with_loads_in_flight"),
            self.key_to_frame.clone(),
        );
        report(
            &format!("remote_console/{name}/key_to_frame_cpu_time_of_the_key_thread"),
            self.key_cpu.clone(),
        );
        report(
            &format!("remote_console/{name}/loop_turn_arrived_results_then_key"),
            self.turn.clone(),
        );
        report(
            &format!("remote_console/{name}/loop_turn_cpu_time_of_the_key_thread"),
            self.turn_cpu.clone(),
        );
        println!(
            "  {} keys: {} session-page and {} transcript loads sent, {} results applied as \
they came; loads in flight at {} of the keys",
            self.keys,
            self.traffic.sessions_loads,
            self.traffic.transcript_loads,
            self.traffic.results,
            self.in_flight_at_key
        );
    }
}

/// `keys` keys, 20 of `forth` then 20 of `back`, one every `KEY_GAP`, as the app's loop
/// handles them: first the results that arrived, then the key, its loads, the frame.
fn held_keys(lp: &mut Loop, keys: usize, forth: Intent, back: Intent) -> Held {
    lp.traffic = Traffic::default();
    let mut held = Held {
        keys,
        key_to_frame: Vec::with_capacity(keys),
        key_cpu: Vec::with_capacity(keys),
        turn: Vec::with_capacity(keys),
        turn_cpu: Vec::with_capacity(keys),
        traffic: Traffic::default(),
        in_flight_at_key: 0,
    };
    for n in 0..keys {
        let intent = if (n / 20) % 2 == 0 { forth } else { back };
        let t = Instant::now();
        let turn_cpu = thread_cpu();
        lp.apply_arrived();
        let k = Instant::now();
        let cpu = thread_cpu();
        if lp.console.pending() {
            held.in_flight_at_key += 1;
        }
        lp.key(intent);
        held.key_to_frame.push(k.elapsed());
        held.key_cpu.push(thread_cpu().saturating_sub(cpu));
        held.turn.push(t.elapsed());
        held.turn_cpu.push(thread_cpu().saturating_sub(turn_cpu));
        std::thread::sleep(KEY_GAP);
    }
    held.traffic = std::mem::take(&mut lp.traffic);
    lp.settle();
    held
}
