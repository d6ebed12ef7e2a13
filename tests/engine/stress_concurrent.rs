//! No hang under concurrency (issue 10 item 3): a run whose start record is slow to commit
//! (another process holds the database's write lock) still finishes, and many `inject`
//! processes of the real binary on one state folder, with `kill -9`s among them, all exit,
//! leaving a consistent store.

use crate::common;

use std::time::Duration;

use serde_json::json;
use switchboard_engine::runs::{RunRequest, RunStatus};
use switchboard_types::key::SessionKey;

/// A bound no healthy run here comes near (they take milliseconds); hitting it means a hang.
const HANG: Duration = Duration::from_secs(20);

/// Another connection (as another process would) holds the write lock while a run makes its
/// first tool call, so recording the run's start waits on the lock past the 20 ms grace after
/// which a run records its start on its own. The run must still end once the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_start_commits_slowly_still_ends() {
    let b = common::bench(json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "subagents": { "allowAgents": ["work"] },
              "script": [
                { "when": { "step": "message" },
                  "tools": [{ "name": "sessions_spawn", "args": { "task": "t", "agentId": "work" } }],
                  "reply": "spawned {{result.status}}" },
              ] },
            { "id": "work", "model": "scripted", "script": [ { "reply": "done" } ] },
        ] },
    }));
    let key = SessionKey::from_canonical("agent:main:main");
    // Create the session first, so only the run's own writes meet the lock.
    b.engine
        .store()
        .ensure(&key, Default::default())
        .await
        .expect("session");
    let release = match crate::common::test_store_url(b.dir()) {
        // On PostgreSQL another session holds the runs table against writes instead.
        Some(url) => hold_runs_on_postgres(&url),
        None => {
            let db = std::path::PathBuf::from(b.engine.store().backend().location());
            let other = rusqlite::Connection::open(&db).expect("second connection");
            other
                .execute_batch("BEGIN IMMEDIATE")
                .expect("the other connection takes the write lock");
            std::thread::spawn(move || {
                // Well past the grace, so the run records its start while its tool call's
                // write of the same record is still waiting on the lock.
                std::thread::sleep(Duration::from_millis(300));
                other.execute_batch("ROLLBACK").expect("release the lock");
            })
        }
    };
    // Answering a message already in the transcript: the run's first write is the start
    // record that its tool call needs.
    let mut run = b.engine.start_run(RunRequest::reply_to(key.clone(), "go"));
    let outcome = run.wait_for(HANG).await;
    release.join().expect("release thread");
    let outcome = outcome.expect("the run never ended: its start record waited on itself");
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.reply, "spawned accepted");
    // And everything it set off (the child and its announce) ends too.
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("the engine went idle");
    let row = b
        .engine
        .run(&run.run_id)
        .await
        .expect("read")
        .expect("run row");
    assert_eq!(row.status.as_str(), "ok");
}

/// Another PostgreSQL session holding the runs table against writes for 300 ms (well past
/// the grace), taken before this returns; the thread ends when it is released.
fn hold_runs_on_postgres(url: &str) -> std::thread::JoinHandle<()> {
    let cluster = common::pg::cluster().expect("the test cluster runs");
    let db = common::pg::database_of(url).to_string();
    let holder = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cluster = common::pg::cluster().expect("the test cluster runs");
            cluster.sql(
                &db,
                "BEGIN; LOCK TABLE runs IN EXCLUSIVE MODE; SELECT pg_sleep(0.3); COMMIT;",
            );
        })
    };
    let held = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
                WHERE c.relname = 'runs' AND l.mode = 'ExclusiveLock' AND l.granted";
    let deadline = std::time::Instant::now() + HANG;
    while cluster.sql(&db, held) != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never taken"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    holder
}

/// The two-agents example (assets/examples/two-agents.json5) with `delayMs` on the rules a
/// send and a spawn go through, as in the report of the hang.
const STRESS_CONFIG: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 5 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", subagents: { allowAgents: ["work"] },
      script: [
        { when: { step: "message", text: "/^delegate (.*)$/" },
          tools: [{ name: "sessions_spawn", args: { task: "$1", agentId: "work", label: "delegated" } }],
          reply: "Started {{result.childSessionKey}}", delayMs: 15 },
        { when: { step: "subagent-announce" }, reply: "Got the sub-agent's report.", delayMs: 25 },
        { when: { step: "message", text: "/^ask (\\S+) (.*)$/" },
          tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2" } }],
          reply: "I asked $1. They said: {{result.reply}}{{result.error}}" },
        { when: { step: "reply", round: 2 }, reply: "Thanks. Anything the on-call should know?" },
        { when: { step: "reply" }, reply: "REPLY_SKIP" },
        { reply: "main here." },
      ] },
    { id: "work", model: "scripted",
      script: [
        { when: { step: "subagent" }, reply: "Done: {{text}}.", delayMs: 30 },
        { when: { step: "message" }, reply: "Deploy 418 went out at 14:02.", delayMs: 20 },
        { when: { step: "reply" }, reply: "The cache warms for ten minutes.", delayMs: 10 },
        { when: { step: "announce" }, reply: "Deploy 418 is live." },
      ] },
  ] },
}"#;

const OPS: &str = "agent:main:telegram:group:ops";
const MAIN: &str = "agent:main:main";

/// How long one `inject` may take before it counts as hung (they take well under a second;
/// a writer waiting out another process's lock takes at most the 30 s busy timeout).
const PROCESS_BOUND: Duration = Duration::from_secs(45);

struct Job {
    key: &'static str,
    text: String,
    channel: bool,
    /// `kill -9` this long after the start, if it is still running then.
    kill_after: Option<Duration>,
}

#[derive(Debug)]
enum Exit {
    Ok,
    Killed,
    Failed(Option<i32>, String),
    Hung(String),
}

/// Two loops as in the report (`ask work …` into a Telegram group, `delegate …` into the
/// main session), each `SWITCHBOARD_STRESS_PER_LOOP` (default 200) commands, four at a time
/// per loop, with one in 25 killed at a point spread over its run. Every process must exit;
/// afterwards the store is whole: integrity ok, nothing left running once a last command
/// has recovered, transcripts dense, every acknowledged message present exactly once and
/// every sub-agent announced exactly once.
#[test]
fn concurrent_injects_with_kills_all_exit_and_leave_a_consistent_store() {
    use std::process::Stdio;
    use std::time::Instant;

    let per_loop: usize = std::env::var("SWITCHBOARD_STRESS_PER_LOOP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let bench = common::CliBench::new(STRESS_CONFIG);
    let mut jobs: Vec<Job> = Vec::new();
    for i in 0..per_loop {
        for (n, key) in [OPS, MAIN].into_iter().enumerate() {
            let index = 2 * i + n;
            jobs.push(Job {
                key,
                text: if key == OPS {
                    format!("ask work deploy {i}?")
                } else {
                    format!("delegate task {i}")
                },
                channel: key == OPS,
                // Spread over start-up, the run, the exchange or the child, and the end.
                kill_after: (index % 25 == 7)
                    .then(|| Duration::from_millis(10 + (index as u64 * 37) % 250)),
            });
        }
    }
    let started = Instant::now();
    let mut queue = jobs.iter().enumerate().rev().collect::<Vec<_>>();
    let mut running: Vec<(usize, std::process::Child, Instant)> = Vec::new();
    let mut exits: Vec<Option<Exit>> = jobs.iter().map(|_| None).collect();
    let mut killed = std::collections::HashSet::new();
    let mut largest_wal = 0u64;
    while !queue.is_empty() || !running.is_empty() {
        while running.len() < 8
            && let Some((index, job)) = queue.pop()
        {
            let mut args = vec!["inject", job.key, job.text.as_str()];
            if job.channel {
                args.extend(["--channel", "telegram"]);
            }
            let child = command(&bench, &args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start switchboard");
            running.push((index, child, Instant::now()));
        }
        let mut still = Vec::new();
        for (index, mut child, since) in running.drain(..) {
            let job = &jobs[index];
            match child.try_wait().expect("poll a child") {
                Some(status) => {
                    let out = child.wait_with_output().expect("collect output");
                    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
                    exits[index] = Some(if status.success() {
                        Exit::Ok
                    } else if killed.contains(&index) {
                        Exit::Killed
                    } else {
                        Exit::Failed(status.code(), stderr)
                    });
                }
                None if job.kill_after.is_some_and(|d| since.elapsed() >= d)
                    && !killed.contains(&index) =>
                {
                    killed.insert(index);
                    child.kill().expect("kill -9");
                    still.push((index, child, since));
                }
                None if since.elapsed() >= PROCESS_BOUND => {
                    child.kill().expect("kill a hung process");
                    let out = child.wait_with_output().expect("collect output");
                    exits[index] =
                        Some(Exit::Hung(String::from_utf8_lossy(&out.stderr).to_string()));
                }
                None => still.push((index, child, since)),
            }
        }
        running = still;
        // The log is sampled while the storm runs: it must stay bounded at any time, not
        // just after the last process checkpointed on its way out.
        let wal = std::fs::metadata(bench.state.join("switchboard.db-wal")).map_or(0, |m| m.len());
        largest_wal = largest_wal.max(wal);
        std::thread::sleep(Duration::from_millis(2));
    }
    let elapsed = started.elapsed();
    let exits: Vec<Exit> = exits
        .into_iter()
        .map(|e| e.expect("every job ran"))
        .collect();

    let hung: Vec<String> = exits
        .iter()
        .zip(&jobs)
        .filter_map(|(e, j)| match e {
            Exit::Hung(stderr) => Some(format!("{} {:?}: {stderr}", j.key, j.text)),
            _ => None,
        })
        .collect();
    let failed: Vec<(Option<i32>, String)> = exits
        .iter()
        .filter_map(|e| match e {
            Exit::Failed(code, stderr) => {
                Some((*code, stderr.lines().last().unwrap_or("").to_string()))
            }
            _ => None,
        })
        .collect();
    let ok = exits.iter().filter(|e| matches!(e, Exit::Ok)).count();
    eprintln!(
        "{} commands in {elapsed:?}: {ok} ok, {} killed, {} failed, {} hung",
        jobs.len(),
        killed.len(),
        failed.len(),
        hung.len()
    );
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for (code, line) in &failed {
        // The same failure names a different temporary folder in every run.
        let line = line.replace(&bench.state.display().to_string(), "<state>");
        *reasons.entry(format!("exit {code:?}: {line}")).or_default() += 1;
    }
    for (reason, n) in &reasons {
        eprintln!("  {n} x {reason}");
    }
    assert!(hung.is_empty(), "processes that never exited: {hung:#?}");
    // Processes that start together wait for each other (busy timeout, retried start-up):
    // no command that was not killed may fail, not even with an orderly "database is locked".
    assert!(failed.is_empty(), "commands that failed: {reasons:#?}");
    // And the write-ahead log stayed bounded while they ran (checkpoints made progress).
    eprintln!("largest WAL seen: {largest_wal} bytes");
    assert!(
        largest_wal < 64 << 20,
        "the WAL grew to {largest_wal} bytes"
    );

    // One more command recovers what the killed ones left and finishes their announces.
    let last = command(&bench, &["tool", "sessions_list", "{}"])
        .output()
        .expect("run the last command");
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    check_store(&bench.state, &jobs, &exits);
}

/// `bench.command`, on the binary `SWITCHBOARD_STRESS_BIN` names if set (to try another
/// build, e.g. one from before a fix).
fn command(bench: &common::CliBench, args: &[&str]) -> std::process::Command {
    let mut c = bench.command(args);
    if let Ok(bin) = std::env::var("SWITCHBOARD_STRESS_BIN") {
        let mut other = std::process::Command::new(bin);
        other.args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => other.env(k, v),
                None => other.env_remove(k),
            };
        }
        c = other;
    }
    c
}

/// The store after the storm, read directly (as a second process would).
fn check_store(state: &std::path::Path, jobs: &[Job], exits: &[Exit]) {
    use std::collections::HashMap;

    let rows = |sql: &str| crate::common::store_rows(state, sql);
    if crate::common::test_store_url(state).is_none() {
        assert_eq!(rows("PRAGMA integrity_check"), [["ok"]]);
    }
    let count = |sql: &str| -> i64 { rows(sql)[0][0].parse().expect(sql) };
    assert_eq!(
        count("SELECT count(*) FROM runs WHERE status = 'running'"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM flows WHERE status = 'running'"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM spawns WHERE status != 'done'"),
        0
    );
    // Transcripts are dense: seq 0 (the header) to n - 1, no gaps, no duplicates.
    assert_eq!(
        count(
            "SELECT count(*) FROM (SELECT session_id FROM transcript GROUP BY session_id
             HAVING min(seq) != 0 OR max(seq) != count(*) - 1) AS gaps"
        ),
        0,
        "a transcript has a gap"
    );

    // Every external message and every announce, by session.
    let mut external: HashMap<(String, String), usize> = HashMap::new();
    let mut announces: HashMap<(String, String), usize> = HashMap::new();
    let lines = rows(
        "SELECT s.key, t.line FROM transcript t JOIN sessions s ON s.session_id = t.session_id
         WHERE t.type = 'message'",
    );
    for row in lines {
        let (key, line) = (row[0].clone(), row[1].clone());
        let line: serde_json::Value = serde_json::from_str(&line).expect("a line is JSON");
        let m = &line["message"];
        let provenance = &m["provenance"];
        if provenance["kind"] == "external_user" {
            let text = m["content"][0]["text"].as_str().unwrap_or("").to_string();
            *external.entry((key, text)).or_default() += 1;
        } else if provenance["sourceTool"] == "subagent_announce" {
            let child = provenance["sourceSessionKey"].as_str().unwrap_or("");
            *announces.entry((key, child.to_string())).or_default() += 1;
        }
    }
    for (job, exit) in jobs.iter().zip(exits) {
        let n = external
            .get(&(job.key.to_string(), job.text.clone()))
            .copied()
            .unwrap_or(0);
        match exit {
            Exit::Ok => assert_eq!(n, 1, "acknowledged {:?} in {}", job.text, job.key),
            _ => assert!(n <= 1, "{:?} recorded {n} times", job.text),
        }
    }
    let spawns: Vec<(String, String)> =
        rows("SELECT child_key, requester FROM spawns WHERE announce IS NOT NULL")
            .into_iter()
            .map(|r| (r[0].clone(), r[1].clone()))
            .collect();
    assert!(!spawns.is_empty(), "the storm spawned sub-agents");
    for (child, requester) in spawns {
        let n = announces
            .get(&(requester, child.clone()))
            .copied()
            .unwrap_or(0);
        assert_eq!(n, 1, "{child} announced {n} times");
    }
}
