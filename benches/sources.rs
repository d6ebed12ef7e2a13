//! Several sources in one console (issue 27): the local engine, a real `switchboard serve`
//! process and a fake OpenClaw 2026.9.6 gateway on a socket (`openclaw_record`), 100,000
//! sessions in all, merged by `switchboard_sources::Sources`. It measures
//! - the first merged page the console asks for (400 rows, counted, with last messages),
//!   and each source's own first page beside it. Target < 150 ms.
//! - key → frame (`Console::update` + `refresh` + a 120×40 draw, results applied as they
//!   arrive) while all three sources stream events (a message every 50 ms each). Target
//!   < 16 ms.
//! - one source stalled for 5 s (the OpenClaw gateway answers nothing): a message sent to
//!   the local engine until it is on a drawn frame (the selected session's transcript),
//!   against the same with nothing stalled (target < 50 ms); and the merged page while it
//!   stalls (its last page stands in; the wait for it is bounded).
//!
//! The two SQLite states are built once and cached in `target/bench-state/`. Run:
//! `cargo bench --bench sources`.

#[path = "../tests/remote/openclaw_record.rs"]
mod openclaw_record;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use openclaw_record::RecordGateway;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_sources::{Source, Sources};
use switchboard_store_sqlite::queries::{self, StoredSession};
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::Runner;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::source::SourceKind;
use switchboard_types::api::{LinkState, SendRequest, Sender, SessionsApi, SessionsQuery};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{KeyScheme, SessionKey};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::sync::watch;

const HOME_SESSIONS: usize = 33_334;
const TEAM_SESSIONS: usize = 33_333;
const OC_SESSIONS: usize = 33_333;
const STATE_VERSION: &str = "sources-v1";
const TOKEN: &str = "bench-token-0123456789";
/// A fixed "now" for the data (2026-11-22), so the cached states do not depend on the day.
const BASE_MS: i64 = 1_795_353_349_734;
const CONFIG: &str = r#"{ agents: { list: [
  { id: "main", default: true, model: "scripted", script: [ { reply: "ok: {{text}}" } ] } ] } }"#;

fn config() -> switchboard_config::Config {
    switchboard_config::load::parse_str(CONFIG).expect("bench config")
}

/// Session `i` of a source: a direct chat, activity spread over a month.
fn stored(i: usize, salt: u64) -> StoredSession {
    let scheme = KeyScheme::default();
    let spread = (i as u64).wrapping_mul(2_654_435_761).wrapping_add(salt) % (30 * 86_400_000);
    let updated_at = BASE_MS - spread as i64;
    let entry = SessionEntry {
        session_id: format!("{salt:04x}-{i:08}"),
        updated_at,
        display_name: Some(format!("user {i}")),
        chat_type: Some("direct".into()),
        ..SessionEntry::default()
    };
    let key = SessionKey::from_canonical(format!("agent:main:dm-{i}"));
    StoredSession {
        agent_id: key.agent_id(&scheme.default_agent).to_string(),
        kind: scheme.kind(&key, Some("direct")),
        key,
        entry,
    }
}

/// A state folder with `n` sessions, built once.
fn state(name: &str, n: usize, salt: u64) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-state")
        .join(format!("{STATE_VERSION}-{name}-{n}"));
    let ready = dir.join("ready");
    if ready.exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let engine = switchboard::state_folder::open_engine(&dir, config()).expect("open");
    let db = PathBuf::from(engine.store().backend().location());
    let storage =
        switchboard_store_sqlite::Storage::open(db.parent().expect("a folder")).expect("storage");
    for start in (0..n).step_by(10_000) {
        let rows: Vec<StoredSession> = (start..(start + 10_000).min(n))
            .map(|i| stored(i, salt))
            .collect();
        storage
            .write_blocking(move |c| {
                for s in &rows {
                    queries::put_session(c, s)?;
                }
                Ok(())
            })
            .expect("write");
    }
    drop(storage);
    drop(engine);
    std::fs::write(&ready, "ready").expect("marker");
    dir
}

/// A copy of a cached state to run on (runs write to it).
fn scratch(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::copy(
        from.join("switchboard.db"),
        dir.path().join("switchboard.db"),
    )
    .expect("copy");
    dir
}

/// `switchboard serve` on `state`; its `host:port`.
fn serve(state: &Path, config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("SWITCHBOARD_STATE_DIR", state)
        .env("SWITCHBOARD_CONFIG", config)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    let err = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(err).lines();
    let addr = loop {
        let line = lines.next().expect("serve's listening line").expect("line");
        if let Some(rest) = line.split("listening on ws://").nth(1) {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

/// The fake OpenClaw gateway, able to stall (answer nothing) on demand.
struct Stalling {
    inner: Arc<RecordGateway>,
    stalled: AtomicBool,
}

#[async_trait]
impl Rpc for Stalling {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        while self.stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.inner.request(method, params).await
    }
    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        while self.stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.inner.request_final(method, params).await
    }
    fn events(&self) -> tokio::sync::broadcast::Receiver<WireEvent> {
        self.inner.events()
    }
    fn state(&self) -> watch::Receiver<LinkState> {
        self.inner.state()
    }
    fn hello(&self) -> Option<switchboard_protocol::HelloOk> {
        self.inner.hello()
    }
    fn target(&self) -> String {
        self.inner.target()
    }
}

async fn link(url: &str, token: &str) -> Link {
    let mut o = LinkOptions::new(url.to_string(), Some(token.into()));
    o.connect_timeout = Duration::from_secs(10);
    Link::connect(o).await.expect("link")
}

fn owner(key: &str, text: &str) -> SendRequest {
    SendRequest {
        key: key.into(),
        text: text.into(),
        from: Sender::owner(),
        idempotency_key: None,
    }
}

/// The app's loop minus the terminal.
struct Loop {
    console: Console,
    runner: Runner,
    rx: UnboundedReceiver<Action>,
    events: switchboard_types::api::EventStream,
    term: Terminal<TestBackend>,
    keymap: Keymap,
}

impl Loop {
    fn new(api: Arc<Sources>) -> Loop {
        let events = api.subscribe();
        let mut state = State::new("bench".into(), switchboard_types::api::time::now_ms());
        state.width = 120;
        state.height = 40;
        state.sources = switchboard_tui::sources::Sources::new(api.sources());
        let (tx, rx) = unbounded_channel();
        let runner = Runner::new(api, tx);
        let mut console = Console::new(state);
        runner.run(console.refresh());
        Loop {
            console,
            runner,
            rx,
            events,
            term: Terminal::new(TestBackend::new(120, 40)).expect("terminal"),
            keymap: Keymap::defaults(),
        }
    }

    /// Every result and event that has arrived, applied.
    fn apply_arrived(&mut self) {
        while let Ok(a) = self.rx.try_recv() {
            let effects = self.console.update(a);
            self.runner.run(effects);
        }
        while let Some(item) = self.events.try_next() {
            let a = match item {
                switchboard_types::api::StreamItem::Event(e) => Action::Engine(Box::new(e.event)),
                switchboard_types::api::StreamItem::Missed(_) => Action::Lagged,
                switchboard_types::api::StreamItem::Closed => continue,
            };
            let effects = self.console.update(a);
            self.runner.run(effects);
        }
    }

    fn frame(&mut self) {
        let effects = self.console.refresh();
        self.runner.run(effects);
        let (state, keymap) = (&self.console.state, &self.keymap);
        self.term
            .draw(|f| switchboard_tui::view::draw(f, state, keymap))
            .expect("draw");
    }

    /// A key as the terminal delivers it, mapped as the app loop maps it.
    fn press(&mut self, code: KeyCode) {
        let k = crossterm::event::Event::Key(KeyEvent::new(code, KeyModifiers::NONE));
        for a in switchboard_tui::map_event(k, &self.console.state, &self.keymap) {
            let effects = self.console.update(a);
            self.runner.run(effects);
        }
        self.frame();
    }

    fn key(&mut self, intent: Intent) {
        let effects = self.console.update(Action::Intent(intent));
        self.runner.run(effects);
        self.frame();
    }

    /// Turns of the loop until `done` holds on a drawn frame (bounded).
    async fn until(&mut self, done: impl Fn(&State) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.apply_arrived();
            self.frame();
            if done(&self.console.state) {
                return;
            }
            if Instant::now() >= deadline {
                let s = &self.console.state;
                panic!(
                    "the console never settled: focus {:?}, filter {:?}, selected {:?}, {} rows, first {:?}, flash {:?}",
                    s.focus,
                    s.sessions.filter,
                    s.sessions.selected_key(),
                    s.sessions.rows.len(),
                    s.sessions
                        .rows
                        .iter()
                        .take(3)
                        .map(|r| r.key.clone())
                        .collect::<Vec<_>>(),
                    s.flash
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

fn stats(label: &str, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label}: median {:.2} ms, p95 {:.2} ms, max {:.2} ms (n={})",
        at(0.5),
        at(0.95),
        at(1.0),
        ms.len()
    );
}

fn main() {
    let rt = Runtime::new().expect("runtime");
    let home_state = state("home", HOME_SESSIONS, 1);
    let team_state = state("team", TEAM_SESSIONS, 2);
    let home_dir = scratch(&home_state);
    let team_dir = scratch(&team_state);
    let config_file = team_dir.path().join("config.json5");
    std::fs::write(&config_file, CONFIG).expect("config");
    let (mut team_child, team_addr) = serve(team_dir.path(), &config_file);

    rt.block_on(async {
        let engine =
            switchboard::state_folder::open_engine(home_dir.path(), config()).expect("home");
        let home = engine.start();
        let team: Arc<dyn SessionsApi> =
            RemoteApi::new(Arc::new(link(&format!("ws://{team_addr}"), TOKEN).await));
        let gw = Arc::new(RecordGateway::default());
        for i in 0..OC_SESSIONS {
            let at = BASE_MS - ((i as i64 * 7_919) % (30 * 86_400_000));
            gw.add(
                json!({ "key": format!("agent:main:oc-{i}"), "updatedAt": at,
                        "sessionId": format!("oc-{i}"), "displayName": format!("oc user {i}") }),
                &json!({ "messages": [] }),
            );
        }
        gw.sort();
        let stalling = Arc::new(Stalling {
            inner: gw.clone(),
            stalled: AtomicBool::new(false),
        });
        let oc_url = openclaw_record::serve(stalling.clone()).await;
        let oc: Arc<dyn SessionsApi> =
            Arc::new(OpenClawApi::new(Arc::new(link(&oc_url, "test-token").await)));
        let api = Sources::new(vec![
            Source::ready("home", SourceKind::Local, home_dir.path().display().to_string(), home.clone()),
            Source::ready("team", SourceKind::Gateway, format!("ws://{team_addr}"), team.clone()),
            Source::ready("oc", SourceKind::Gateway, oc_url.clone(), oc.clone()),
        ])
        .expect("sources");

        // 1. The first merged page, as the console asks for it.
        let first = SessionsQuery {
            limit: 400,
            count: true,
            previews: true,
            ..Default::default()
        };
        let total = api.status().await.expect("status").sessions;
        println!("sessions in all: {total}");
        for (label, src) in [
            ("home alone", home.clone()),
            ("team alone (serve)", team.clone()),
            ("oc alone (fake OpenClaw)", oc.clone()),
            ("merged (three sources)", api.clone() as Arc<dyn SessionsApi>),
        ] {
            let mut ms = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                let page = src.sessions(first.clone()).await.expect("page");
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                assert_eq!(page.rows.len(), 400);
            }
            stats(&format!("first page of 400, {label}"), ms);
        }

        // 2. Key → frame while all three stream.
        let streaming = Arc::new(AtomicBool::new(true));
        let mut feeders = Vec::new();
        for (name, src) in [("home", home.clone()), ("team", team.clone())] {
            let on = streaming.clone();
            feeders.push(tokio::spawn(async move {
                let mut n = 0u64;
                while on.load(Ordering::SeqCst) {
                    let key = format!("agent:main:dm-{}", n % 50);
                    let _ = src.send(owner(&key, &format!("{name} {n}"))).await;
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }));
        }
        {
            let on = streaming.clone();
            let gw = gw.clone();
            feeders.push(tokio::spawn(async move {
                let mut n = 0i64;
                while on.load(Ordering::SeqCst) {
                    let key = format!("agent:main:oc-{}", n % 50);
                    gw.push(
                        "session.message",
                        json!({ "sessionKey": key, "messageSeq": n + 1,
                                "message": openclaw_record::reply(n + 1, BASE_MS + n, &format!("oc-run-{n}"), "ok") }),
                    );
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }));
        }
        let mut l = Loop::new(api.clone());
        l.until(|s| s.sessions.rows.len() >= 100).await;
        let mut ms = Vec::new();
        for i in 0..300 {
            l.apply_arrived();
            let t = Instant::now();
            l.key(if i % 40 < 20 { Intent::Down } else { Intent::Up });
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stats("key -> frame, three sources streaming", ms);

        streaming.store(false, Ordering::SeqCst);
        for f in feeders {
            let _ = f.await;
        }

        // 3. A message on home to the screen, with oc stalled and without. The probe
        // session, home's newest, is picked with `O` (home's sessions only), as an owner
        // would.
        let probe_key = "agent:main:dm-probe";
        home.send(owner(probe_key, "hello")).await.expect("probe session");
        l.press(KeyCode::Char('O'));
        let want = format!("home/{probe_key}");
        l.until(move |s| s.sessions.selected_key() == Some(want.as_str()))
            .await;
        for stalled in [false, true] {
            stalling.stalled.store(stalled, Ordering::SeqCst);
            let mut ms = Vec::new();
            let began = Instant::now();
            for n in 0..15 {
                let text = format!("probe {stalled} {n}");
                let t = Instant::now();
                home.send(owner(probe_key, &text)).await.expect("send");
                let want = text.clone();
                l.until(move |s| s.transcript.lines.iter().any(|x| x.text == want)).await;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let label = if stalled {
                format!(
                    "home message -> frame, oc stalled ({:.1} s of stall)",
                    began.elapsed().as_secs_f64()
                )
            } else {
                "home message -> frame, nothing stalled".to_string()
            };
            stats(&label, ms);
            if stalled {
                // The merged list while one source stalls: its last page stands in for it.
                let mut ms = Vec::new();
                for _ in 0..5 {
                    let t = Instant::now();
                    api.sessions(first.clone()).await.expect("merged page");
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                stats("first page of 400, merged, oc stalled", ms);
            }
        }
        stalling.stalled.store(false, Ordering::SeqCst);
    });
    let _ = team_child.kill();
    let _ = team_child.wait();
}
