//! Store benchmarks for the targets of DESIGN §4 (the 100,000-session / 1,000,000-message
//! rows). Run with `cargo bench --bench store`; results and comparison figures are in
//! BENCHMARKS.md.
//!
//! The populated state folder (100,000 sessions of every kind, a 1,000,000-message transcript
//! on `agent:main:main`, a 10,000-message one on a group) is built once with bulk writer jobs
//! and cached in `target/bench-state/<STATE_VERSION>/`; bump `STATE_VERSION` when the data
//! shape changes. The append benchmarks work on 100 extra sessions they create and delete
//! again, so the cached state stays as populated.
//!
//! Before criterion starts, the bench re-runs itself as child processes (`SB_BENCH_PROBE`) to
//! read peak RSS after 50 `sessions_history` calls on each transcript, which shows memory
//! does not depend on the transcript's length.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use serde_json::{Value, json};
use switchboard_config::{Config, Visibility};
use switchboard_engine::Engine;
use switchboard_engine::store::{SessionInit, SessionStore};
use switchboard_engine::tools::ToolContext;
use switchboard_store_sqlite::Storage;
use switchboard_store_sqlite::queries::{self, NewLine, StoredSession};
use switchboard_types::entry::{DeliveryContext, SessionEntry};
use switchboard_types::key::{KeyScheme, SessionKey};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Names the cached state; change it whenever what `populate` writes changes.
const STATE_VERSION: &str = "store-v2-100k-sessions-1m-lines";
const SESSIONS: usize = 100_000;
const BIG_LINES: usize = 1_000_000;
const SMALL_LINES: usize = 10_000;
/// Rows per bulk writer job while populating.
const CHUNK: usize = 10_000;
/// A fixed "now" so the cached data does not depend on when it was built (2026-11-22).
const BASE_MS: i64 = 1_795_353_349_734;
const DAY_MS: i64 = 86_400_000;
/// The session that holds the 1,000,000-message transcript (index 0 in `session_row`).
const BIG_KEY: &str = "agent:main:main";
/// Index (in `session_row`) of the session holding the 10,000-message transcript.
const SMALL_INDEX: usize = 20;

const BURST: usize = 10_000;
const BURST_SESSIONS: usize = 100;

const PROBE_ENV: &str = "SB_BENCH_PROBE";

// ---------------------------------------------------------------------------------------
// Deterministic data
// ---------------------------------------------------------------------------------------

/// splitmix64: small, fast, deterministic; seeded per row so any row can be rebuilt alone.
struct Gen(u64);

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    fn hex8(&mut self) -> String {
        format!("{:08x}", self.next() as u32)
    }
}

const CHANNELS: [&str; 4] = ["discord", "telegram", "slack", "whatsapp"];

/// Session `i` of the populated store. Index 0..3 are the agents' main sessions; the rest
/// cycle through a mix of 20 slots: 20 % groups, 10 % cron, 10 % hooks, 5 % nodes, 20 %
/// sub-agents (spawnedBy a direct chat, 200 of them by `agent:main:main`), 35 % direct chats;
/// a third of the groups and a fifth of the direct chats belong to agent `ops`.
fn session_row(i: usize) -> StoredSession {
    let scheme = KeyScheme::default();
    let mut g = Gen::new(i as u64 + 1);
    let updated_at = if i < 3 {
        BASE_MS - i as i64 * 1_000
    } else {
        BASE_MS - g.below(30 * DAY_MS as u64) as i64
    };
    let mut entry = SessionEntry {
        session_id: g.uuid(),
        updated_at,
        created_at: Some(updated_at - g.below(7 * DAY_MS as u64) as i64),
        model: Some("fake-1".into()),
        model_provider: Some("fake".into()),
        system_sent: Some(true),
        aborted_last_run: Some(false),
        ..SessionEntry::default()
    };
    let tokens_in = g.below(40_000);
    let tokens_out = g.below(8_000);
    entry.input_tokens = Some(tokens_in);
    entry.output_tokens = Some(tokens_out);
    entry.total_tokens = Some(tokens_in + tokens_out);
    entry.context_tokens = Some(200_000);
    let key = match i {
        0 => "agent:main:main".to_string(),
        1 => "agent:ops:main".to_string(),
        2 => "agent:research:main".to_string(),
        _ => match i % 20 {
            0..=3 => {
                let agent = if i.is_multiple_of(3) { "ops" } else { "main" };
                let channel = CHANNELS[(i / 20) % 4];
                entry.chat_type = Some("group".into());
                entry.channel = Some(channel.into());
                entry.display_name = Some(format!("{channel}:#room-{i}"));
                entry.last_channel = Some(channel.into());
                entry.last_to = Some(format!("group:{i}"));
                entry.delivery_context = Some(DeliveryContext {
                    channel: Some(channel.into()),
                    to: Some(format!("group:{i}")),
                    ..DeliveryContext::default()
                });
                format!("agent:{agent}:{channel}:group:{i}")
            }
            4..=5 => {
                entry.label = Some(format!("cron-job{i}"));
                format!("agent:main:cron:job{i}")
            }
            6..=7 => format!("agent:main:hook:{}", g.uuid()),
            8 => format!("agent:main:node-{i}"),
            9..=12 => {
                let parent = if i % 500 == 9 || i < 20 {
                    BIG_KEY.to_string()
                } else {
                    // The direct chat in the previous block of 20.
                    session_row_key(i - i % 20 - 20 + 13)
                };
                entry.spawned_by = Some(parent.clone());
                entry.parent_session_key = Some(parent);
                entry.spawn_depth = Some(1);
                entry.label = (i.is_multiple_of(4)).then(|| format!("task-{i}"));
                entry
                    .extra
                    .insert("createdVia".into(), Value::String("spawn".into()));
                entry
                    .extra
                    .insert("subagentRole".into(), Value::String("worker".into()));
                format!("agent:main:subagent:{}", g.uuid())
            }
            _ => {
                let agent = if i.is_multiple_of(5) { "ops" } else { "main" };
                entry.chat_type = Some("direct".into());
                entry.display_name = Some(format!("telegram:user{i}"));
                entry.last_channel = Some("telegram".into());
                entry.last_to = Some(format!("user:{i}"));
                entry.delivery_context = Some(DeliveryContext {
                    channel: Some("telegram".into()),
                    to: Some(format!("user:{i}")),
                    ..DeliveryContext::default()
                });
                format!("agent:{agent}:dm-{i}")
            }
        },
    };
    let key = SessionKey::from_canonical(key);
    let agent_id = key.agent_id(&scheme.default_agent).to_string();
    let kind = scheme.kind(&key, entry.chat_type.as_deref());
    StoredSession {
        key,
        agent_id,
        kind,
        entry,
    }
}

/// Only the key of session `i` (used for spawnedBy of sub-agents).
fn session_row_key(i: usize) -> String {
    session_row(i).key.as_str().to_string()
}

/// The `session` header line every transcript starts with (seq 0).
fn header_line(s: &StoredSession, cwd: &str) -> Value {
    json!({
        "type": "session",
        "version": 3,
        "id": s.entry.session_id,
        "timestamp": queries::iso_timestamp(s.entry.created_at.unwrap_or(BASE_MS)),
        "cwd": cwd,
    })
}

const WORDS: [&str; 24] = [
    "the", "deploy", "ping", "queue", "status", "ok", "agent", "report", "nightly", "build",
    "failed", "retry", "merged", "branch", "please", "check", "logs", "done", "review", "ticket",
    "memory", "latency", "summary", "next",
];

fn text(g: &mut Gen, target: usize) -> String {
    let mut out = String::with_capacity(target + 12);
    while out.len() < target {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[g.below(WORDS.len() as u64) as usize]);
    }
    out
}

/// Message line `seq` (1-based) of a transcript seeded by `salt`, in OpenClaw's line format,
/// about 230 bytes; every 10th is a toolResult. `id` of line n is `parent` of line n+1.
fn message_line(salt: u64, seq: usize) -> Value {
    let id = Gen::new(salt ^ (seq as u64) << 20).hex8();
    let parent = if seq == 1 {
        Value::Null
    } else {
        Value::String(Gen::new(salt ^ ((seq - 1) as u64) << 20).hex8())
    };
    let mut g = Gen::new(salt.wrapping_mul(31) ^ seq as u64);
    let ts = BASE_MS - 30 * DAY_MS + seq as i64 * 1_500;
    let message = if seq.is_multiple_of(10) {
        json!({
            "role": "toolResult",
            "toolCallId": format!("call_{}", g.hex8()),
            "toolName": "sessions_send",
            "content": [{"type": "text", "text": text(&mut g, 28)}],
            "isError": false,
            "timestamp": ts,
        })
    } else {
        let role = if seq % 2 == 1 { "user" } else { "assistant" };
        let n = 22 + g.below(30) as usize;
        json!({
            "role": role,
            "content": [{"type": "text", "text": text(&mut g, n)}],
            "timestamp": ts,
        })
    };
    json!({
        "type": "message",
        "id": id,
        "parentId": parent,
        "timestamp": queries::iso_timestamp(ts),
        "message": message,
    })
}

// ---------------------------------------------------------------------------------------
// Populating (cached)
// ---------------------------------------------------------------------------------------

fn state_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench-state")
        .join(STATE_VERSION)
}

fn ready_marker(dir: &Path) -> PathBuf {
    dir.join("READY")
}

/// The populated state folder, building it first if it is not cached yet.
fn prepare() -> PathBuf {
    let dir = state_dir();
    if ready_marker(&dir).exists() {
        eprintln!("bench state: using cached {}", dir.display());
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    eprintln!("bench state: populating {} (once) …", dir.display());
    // Open through the engine first, so the schema and the kind basis are in place exactly
    // as a real state folder would have them.
    let engine =
        switchboard::state_folder::open_engine(&dir, Config::default()).expect("open empty state");
    let storage = storage_of(&engine);
    let cwd = dir.display().to_string();

    for start in (0..SESSIONS).step_by(CHUNK) {
        let end = (start + CHUNK).min(SESSIONS);
        let rows: Vec<StoredSession> = (start..end).map(session_row).collect();
        let cwd = cwd.clone();
        storage
            .write_blocking(move |c| {
                for s in &rows {
                    queries::put_session(c, s)?;
                    queries::put_raw_lines(c, &s.entry.session_id, 0, &[header_line(s, &cwd)])?;
                }
                Ok(())
            })
            .expect("write sessions");
        eprintln!(
            "  sessions {end}/{SESSIONS} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }

    let big = session_row(0);
    let small = session_row(SMALL_INDEX);
    assert_eq!(big.key.as_str(), BIG_KEY);
    let mut bytes = 0usize;
    let mut count = 0usize;
    for (s, total, salt) in [(&big, BIG_LINES, 1u64), (&small, SMALL_LINES, 2u64)] {
        for start in (1..=total).step_by(CHUNK) {
            let end = (start + CHUNK - 1).min(total);
            let lines: Vec<Value> = (start..=end).map(|seq| message_line(salt, seq)).collect();
            bytes += lines.iter().map(|l| l.to_string().len()).sum::<usize>();
            count += lines.len();
            let sid = s.entry.session_id.clone();
            storage
                .write_blocking(move |c| queries::put_raw_lines(c, &sid, start as i64, &lines))
                .expect("write lines");
            if end % 100_000 == 0 || end == total {
                eprintln!(
                    "  {}: lines {end}/{total} ({:.1} s)",
                    s.key,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    drop(storage);
    drop(engine);
    // Fold the WAL into the database so every run starts from the same files.
    std::thread::sleep(Duration::from_millis(200));
    let conn = rusqlite::Connection::open(dir.join("switchboard.db")).expect("reopen");
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(conn);
    let db_size = std::fs::metadata(dir.join("switchboard.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    std::fs::write(
        ready_marker(&dir),
        format!(
            "{STATE_VERSION}\nsessions {SESSIONS}\nmessage lines {count}, mean {} bytes\n",
            bytes / count.max(1)
        ),
    )
    .expect("write marker");
    eprintln!(
        "bench state: done in {:.1} s; {count} lines, mean line {} bytes; database {:.0} MB",
        started.elapsed().as_secs_f64(),
        bytes / count.max(1),
        db_size as f64 / 1e6
    );
    dir
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// `tools.sessions.visibility = "all"` and `tools.agentToAgent.enabled = true`: the
/// owner-wide scan over every session.
fn all_config() -> Config {
    let mut config = Config::default();
    config.tools.sessions.visibility = Visibility::All;
    config.tools.agent_to_agent.enabled = true;
    config
}

fn ctx() -> ToolContext {
    ToolContext::new(SessionKey::from_canonical(BIG_KEY), false)
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn call(rt: &Runtime, engine: &Engine, tool: &str, params: &Value, ctx: &ToolContext) -> Value {
    rt.block_on(engine.call_tool(tool, params, ctx))
        .expect("tool call")
}

fn small_key() -> String {
    session_row_key(SMALL_INDEX)
}

fn proc_status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Child-process body: open the state, do 50 `sessions_history` calls (limit 200) on one
/// transcript (or none), print peak and current RSS.
fn probe(which: &str) {
    let dir = state_dir();
    let engine = switchboard::state_folder::open_engine(&dir, all_config()).expect("open");
    let rt = current_thread();
    let ctx = ctx();
    let key = match which {
        "1m" => Some(BIG_KEY.to_string()),
        "10k" => Some(small_key()),
        _ => None,
    };
    let mut returned = 0usize;
    if let Some(key) = key {
        let params = json!({"sessionKey": key, "limit": 200});
        for _ in 0..50 {
            let r = call(&rt, &engine, "sessions_history", &params, &ctx);
            returned = r["messages"].as_array().map_or(0, Vec::len);
            black_box(r);
        }
    } else {
        black_box(call(
            &rt,
            &engine,
            "sessions_list",
            &json!({"limit": 1}),
            &ctx,
        ));
    }
    println!(
        "{which} VmHWM={} VmRSS={} messages={returned}",
        proc_status_kb("VmHWM:"),
        proc_status_kb("VmRSS:")
    );
}

fn memory_report() {
    let exe = std::env::current_exe().expect("current exe");
    eprintln!("memory: peak RSS of a fresh process after 50 × sessions_history limit 200");
    for which in ["none", "10k", "1m"] {
        let out = std::process::Command::new(&exe)
            .env(PROBE_ENV, which)
            .output()
            .expect("run probe");
        let line = String::from_utf8_lossy(&out.stdout);
        let label = match which {
            "none" => "baseline (open + 1-row list)",
            "10k" => "10,000-message transcript",
            _ => "1,000,000-message transcript",
        };
        eprintln!("  memory/{which:<4} {label:<32} {}", line.trim());
        println!("memory/{which} {}", line.trim());
    }
}

// ---------------------------------------------------------------------------------------
// Benchmarks
// ---------------------------------------------------------------------------------------

/// A second handle on an engine's SQLite database, for the set-up and the SQL-only
/// comparisons (the engine itself knows only the `Store` trait).
fn storage_of(engine: &Engine) -> Storage {
    let db = PathBuf::from(engine.store().backend().location());
    Storage::open(db.parent().expect("the database is in a folder")).expect("open storage")
}

fn bench_open(c: &mut Criterion, dir: &Path) {
    let mut g = c.benchmark_group("open_100k");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    // open_engine on the populated folder; the engine is dropped outside the timing.
    g.bench_function("engine_open", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let engine =
                    switchboard::state_folder::open_engine(dir, Config::default()).expect("open");
                total += t.elapsed();
                drop(black_box(engine));
            }
            total
        })
    });
    // Open plus the first page a console would draw (200 newest sessions, every agent).
    let rt = current_thread();
    let ctx = ctx();
    let params = json!({"limit": 200});
    g.bench_function("engine_open_plus_first_page_200", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let engine =
                    switchboard::state_folder::open_engine(dir, all_config()).expect("open");
                let page = call(&rt, &engine, "sessions_list", &params, &ctx);
                total += t.elapsed();
                black_box(page);
                drop(engine);
            }
            total
        })
    });
    g.finish();
}

fn bench_list(c: &mut Criterion, all: &Engine, tree: &Engine) {
    let rt = current_thread();
    let ctx = ctx();
    let kinds = json!({"limit": 200, "kinds": ["group", "cron"]});
    let plain = json!({"limit": 200});
    let fifty = json!({"limit": 50});
    // Sanity: the owner-wide scan really fills the page.
    for (params, want) in [(&kinds, 200), (&plain, 200), (&fifty, 50)] {
        let r = call(&rt, all, "sessions_list", params, &ctx);
        assert_eq!(r["count"], json!(want), "visibility=all page: {params}");
    }
    let tree_count = call(&rt, tree, "sessions_list", &plain, &ctx)["count"].clone();
    eprintln!("sessions_list with visibility=tree returns {tree_count} rows (main + its children)");

    let mut g = c.benchmark_group("sessions_list_100k");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let cases: [(&str, &Engine, &Value); 5] = [
        ("all/limit200_kinds_group_cron", all, &kinds),
        ("all/limit200_no_filter", all, &plain),
        ("all/limit50_no_filter", all, &fifty),
        ("tree/limit200_kinds_group_cron", tree, &kinds),
        ("tree/limit200_no_filter", tree, &plain),
    ];
    for (name, engine, params) in cases {
        g.bench_function(name, |b| {
            b.iter(|| black_box(call(&rt, engine, "sessions_list", params, &ctx)))
        });
    }
    g.finish();
}

/// The owner's sessions page (`SessionsApi::sessions`, what the console's sessions pane
/// asks for): a window of 400, newest first and by name, at the top and deep in the
/// 100,000, and with the last-message previews the wide pane shows.
fn bench_page(c: &mut Criterion, all: &Engine) {
    use switchboard_types::api::{SessionKind, SessionsApi, SessionsOrder, SessionsQuery};
    let rt = current_thread();
    let window = |order: SessionsOrder, offset: usize| SessionsQuery {
        offset,
        limit: 400,
        order,
        ..SessionsQuery::default()
    };
    let (activity, name) = (SessionsOrder::Activity, SessionsOrder::Name);
    let cases: Vec<(&str, SessionsQuery)> = vec![
        ("activity/offset_0", window(activity, 0)),
        ("activity/offset_99000", window(activity, 99_000)),
        ("name/offset_0", window(name, 0)),
        ("name/offset_50000", window(name, 50_000)),
        ("name/offset_99000", window(name, 99_000)),
        (
            "name/kind_group_offset_10000",
            SessionsQuery {
                kinds: vec![SessionKind::Group],
                ..window(name, 10_000)
            },
        ),
        (
            "name/offset_50000_count",
            SessionsQuery {
                count: true,
                ..window(name, 50_000)
            },
        ),
        (
            "previews/activity_offset_0",
            SessionsQuery {
                previews: true,
                ..window(activity, 0)
            },
        ),
        (
            "previews/name_offset_50000",
            SessionsQuery {
                previews: true,
                ..window(name, 50_000)
            },
        ),
    ];
    // Most sessions of the fixture have only their header line: give each row of the
    // preview windows one message, so the previews have something to read. Raw lines at
    // seq 1 of sessions that have none: idempotent, and no session's activity moves (the
    // other benches see the same order as before).
    let mut sids = Vec::new();
    for (_, q) in cases.iter().filter(|(_, q)| q.previews) {
        let page = rt.block_on(all.sessions(q.clone())).expect("page");
        sids.extend(page.rows.into_iter().map(|r| r.session_id));
    }
    storage_of(all)
        .write_blocking(move |c| {
            for (n, sid) in sids.iter().enumerate() {
                if queries::last_seq(c, sid)? == 0 {
                    queries::put_raw_lines(c, sid, 1, &[message_line(7 + n as u64, 1)])?;
                }
            }
            Ok(())
        })
        .expect("preview lines");
    // Sanity: every case fills its window, in the order asked for.
    for (name, q) in &cases {
        let page = rt.block_on(all.sessions(q.clone())).expect("page");
        assert_eq!(page.rows.len(), 400, "{name}");
        assert_eq!(page.order, q.order, "{name}");
        if q.previews {
            let with = page
                .rows
                .iter()
                .filter(|r| r.last_message.is_some())
                .count();
            eprintln!("sessions_page_100k/{name}: {with} of 400 rows have a last message");
        }
    }
    let mut g = c.benchmark_group("sessions_page_100k");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, q) in cases {
        g.bench_function(name, |b| {
            b.iter(|| black_box(rt.block_on(all.sessions(q.clone())).expect("page")))
        });
    }
    g.finish();
}

fn bench_history(c: &mut Criterion, all: &Engine) {
    let rt = current_thread();
    let ctx = ctx();
    let small = small_key();
    let storage = storage_of(all);
    let sid_of = |key: &str| {
        rt.block_on(all.store().get(&SessionKey::from_canonical(key)))
            .unwrap()
            .expect("session")
            .entry
            .session_id
    };
    let big_sid = sid_of(BIG_KEY);
    let small_sid = sid_of(&small);
    for (key, sid, want) in [
        (BIG_KEY, &big_sid, BIG_LINES),
        (small.as_str(), &small_sid, SMALL_LINES),
    ] {
        let r = call(
            &rt,
            all,
            "sessions_history",
            &json!({"sessionKey": key, "limit": 200}),
            &ctx,
        );
        let n = r["messages"].as_array().map_or(0, Vec::len);
        assert_eq!(n, 200, "history page of {key}: {r}");
        let len = storage.read(|c| queries::transcript_len(c, sid)).unwrap();
        assert_eq!(len as usize, want, "transcript length of {key}");
    }

    let mut g = c.benchmark_group("history");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let cases = [
        ("sessions_history_limit200/1m", BIG_KEY.to_string(), 200),
        ("sessions_history_limit200/10k", small.clone(), 200),
        ("sessions_history_limit100/1m", BIG_KEY.to_string(), 100),
    ];
    for (name, key, limit) in cases {
        let params = json!({"sessionKey": key, "limit": limit});
        g.bench_function(name, |b| {
            b.iter(|| black_box(call(&rt, all, "sessions_history", &params, &ctx)))
        });
    }
    for (name, sid) in [
        ("transcript_tail_200/1m", big_sid.clone()),
        ("transcript_tail_200/10k", small_sid.clone()),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    storage
                        .read(|c| queries::transcript_tail(c, &sid, 200, false))
                        .unwrap(),
                )
            })
        });
    }
    g.finish();
}

fn burst_message(n: usize) -> Value {
    json!({
        "role": if n.is_multiple_of(2) { "user" } else { "assistant" },
        "content": [{"type": "text", "text": format!("burst message {n}: please check the nightly build logs and report")}],
        "timestamp": BASE_MS + n as i64,
    })
}

async fn reset_burst_sessions(store: &SessionStore, keys: &[SessionKey], create: bool) {
    for k in keys {
        store.delete(k).await.expect("delete burst session");
        if create {
            store
                .ensure(k, SessionInit::default())
                .await
                .expect("create burst session");
        }
    }
}

fn bench_append(c: &mut Criterion, dir: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = switchboard::state_folder::open_engine(dir, Config::default()).expect("open");
    let store = engine.store().clone();
    let keys: Vec<SessionKey> = (0..BURST_SESSIONS)
        .map(|n| SessionKey::from_canonical(format!("agent:main:burst-{n}")))
        .collect();
    rt.block_on(reset_burst_sessions(&store, &keys, true));

    let mut g = c.benchmark_group("append_100k");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(BURST as u64));
    // 10,000 appends in flight at once over 100 sessions; the time until every one of them
    // has been told its commit. Group commit should make this a handful of fsyncs.
    g.bench_function("burst_10000_appends_over_100_sessions", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let work: Vec<(SessionKey, Value)> = (0..BURST)
                    .map(|n| (keys[n % BURST_SESSIONS].clone(), burst_message(n)))
                    .collect();
                let t = Instant::now();
                rt.block_on(async {
                    let mut set = JoinSet::new();
                    for (key, message) in work {
                        let store = store.clone();
                        set.spawn(async move { store.append_message(&key, message).await });
                    }
                    while let Some(r) = set.join_next().await {
                        r.expect("task").expect("append");
                    }
                });
                total += t.elapsed();
            }
            total
        })
    });
    // For comparison: the same 10,000 `queries::append_lines` calls run as ONE writer job
    // (one savepoint, one commit, no per-append future): what the SQL alone costs.
    let storage = storage_of(&engine);
    g.bench_function("append_lines_10000_in_one_writer_job", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let work: Vec<(SessionKey, Vec<NewLine>)> = (0..BURST)
                    .map(|n| {
                        (
                            keys[n % BURST_SESSIONS].clone(),
                            vec![NewLine::message(burst_message(n))],
                        )
                    })
                    .collect();
                let t = Instant::now();
                storage
                    .write_blocking(move |c| {
                        let now = BASE_MS;
                        for (key, lines) in &work {
                            queries::append_lines(c, key, lines, now)?;
                        }
                        Ok(())
                    })
                    .expect("bulk append");
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();

    let mut g = c.benchmark_group("append_100k");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    // One append awaited alone: one transaction, one fsync of the WAL.
    let key = keys[0].clone();
    let mut n = 0usize;
    g.bench_function("single_append", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let message = burst_message(n);
                let t = Instant::now();
                let row = rt
                    .block_on(store.append_message(&key, message))
                    .expect("append");
                total += t.elapsed();
                black_box(row);
            }
            total
        })
    });
    g.finish();

    eprintln!("append: removing the burst sessions again");
    rt.block_on(reset_burst_sessions(&store, &keys, false));
}

/// Positional (filter) arguments given to the bench binary, if any.
fn filters() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect()
}

/// Whether any of the benchmark ids `ids` passes the filters (substring match, which is what
/// criterion's regex filter amounts to for plain words).
fn wanted(ids: &[&str]) -> bool {
    let f = filters();
    f.is_empty()
        || f.iter()
            .any(|f| ids.iter().any(|id| id.contains(f.as_str())))
}

fn main() {
    if let Ok(which) = std::env::var(PROBE_ENV) {
        probe(&which);
        return;
    }
    let dir = prepare();
    let test_mode = std::env::args().any(|a| a == "--test" || a == "--list");
    if !test_mode && wanted(&["memory"]) {
        memory_report();
    }

    let mut c = Criterion::default().configure_from_args();
    bench_open(&mut c, &dir);
    {
        let all = switchboard::state_folder::open_engine(&dir, all_config()).expect("open");
        let tree = switchboard::state_folder::open_engine(&dir, Config::default()).expect("open");
        bench_list(&mut c, &all, &tree);
        bench_page(&mut c, &all);
        bench_history(&mut c, &all);
    }
    if wanted(&[
        "append_100k/burst_10000_appends_over_100_sessions",
        "append_100k/append_lines_10000_in_one_writer_job",
        "append_100k/single_append",
    ]) {
        bench_append(&mut c, &dir);
    }
    c.final_summary();
}
