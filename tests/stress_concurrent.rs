//! No hang under concurrency (issue 10 item 3): a run whose start record is slow to commit
//! (another process holds the database's write lock) still finishes, and many `inject`
//! processes of the real binary on one state folder, with `kill -9`s among them, all exit,
//! leaving a consistent store.

mod common;

use std::time::Duration;

use serde_json::json;
use switchboard::engine::key::SessionKey;
use switchboard::engine::runs::{RunRequest, RunStatus};

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
    let db = b.engine.store().storage().path().to_path_buf();
    let other = rusqlite::Connection::open(&db).expect("second connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the other connection takes the write lock");
    let release = std::thread::spawn(move || {
        // Well past the grace, so the run records its start while its tool call's write of
        // the same record is still waiting on the lock.
        std::thread::sleep(Duration::from_millis(300));
        other.execute_batch("ROLLBACK").expect("release the lock");
    });
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
    let row = b.engine.run(&run.run_id).expect("read").expect("run row");
    assert_eq!(row.status, "ok");
}
