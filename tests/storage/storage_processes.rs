//! Several `switchboard` processes on one state folder: started together on a fresh or an
//! existing folder, after one was killed mid-run, and what killed processes leave behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// `slow …` keeps its run going long enough to be killed in the middle of it.
const CONFIG: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { text: "slow" }, delayMs: 60000, reply: "late" },
      { reply: "got: {{text}}" },
    ] },
  ] },
}"#;

/// A fresh state folder with `CONFIG`, whose commands capture their output.
struct Folder {
    bench: common::CliBench,
    state: PathBuf,
}

impl Folder {
    fn new() -> Folder {
        let bench = common::CliBench::new(CONFIG);
        let state = bench.state.clone();
        Folder { bench, state }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.bench.command(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// Start `n` injects at once (each into its own session) and collect them all.
    fn inject_together(&self, n: usize, tag: &str) -> Vec<Output> {
        let children: Vec<Child> = (0..n)
            .map(|i| {
                self.command(&["inject", &format!("agent:main:{tag}{i}"), "hello"])
                    .spawn()
                    .unwrap()
            })
            .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect()
    }

    fn lock_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.state.join("instances"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Start an inject whose run lasts a minute and wait until its run is recorded.
    fn start_slow(&self, key: &str) -> Child {
        let before = self.lock_files();
        let runs_before = running_runs(&self.state);
        let mut child = self.command(&["inject", key, "slow"]).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut started = false;
        while !started && Instant::now() < deadline {
            started =
                self.lock_files().len() > before.len() && running_runs(&self.state) > runs_before;
            if !started {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if started {
            return child;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the slow inject never started its run");
    }
}

fn running_runs(state: &Path) -> i64 {
    // On PostgreSQL (SWITCHBOARD_TEST_STORE) the folder's database is made on first use.
    if let Some(url) = crate::common::test_store_url(state) {
        let cluster = crate::common::pg::cluster().expect("the test cluster runs");
        let sql = "SELECT count(*) FROM runs WHERE status = 'running'";
        // No table yet (no process has opened the database): none running.
        return cluster
            .try_rows(crate::common::pg::database_of(&url), sql)
            .ok()
            .and_then(|rows| rows.first()?.first()?.parse().ok())
            .unwrap_or(0);
    }
    let Ok(conn) = rusqlite::Connection::open(state.join("switchboard.db")) else {
        return 0;
    };
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.query_row(
        "SELECT count(*) FROM runs WHERE status = 'running'",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

fn kill9(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[track_caller]
fn assert_all_succeeded(outs: &[Output], what: &str) {
    let failures: Vec<String> = outs
        .iter()
        .filter(|o| !o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert!(
        failures.is_empty(),
        "{what}: {} of {} failed: {failures:?}",
        failures.len(),
        outs.len()
    );
}

#[test]
fn processes_started_together_on_a_fresh_folder_all_succeed() {
    for round in 0..3 {
        let folder = Folder::new();
        let outs = folder.inject_together(6, "s");
        assert_all_succeeded(&outs, &format!("round {round} on a fresh folder"));
    }
}

#[test]
fn processes_started_together_after_a_killed_one_all_succeed() {
    let folder = Folder::new();
    assert_all_succeeded(&folder.inject_together(1, "first"), "first inject");
    for round in 0..3 {
        let slow = folder.start_slow(&format!("agent:main:slow{round}"));
        kill9(slow);
        let outs = folder.inject_together(6, &format!("r{round}x"));
        assert_all_succeeded(&outs, &format!("round {round} after a kill"));
    }
    // Every run the killed processes left open was closed by someone.
    assert_eq!(running_runs(&folder.state), 0);
}

#[test]
fn lock_files_of_killed_processes_are_removed_and_live_ones_kept() {
    let folder = Folder::new();
    assert_all_succeeded(&folder.inject_together(1, "first"), "first inject");
    assert!(folder.lock_files().is_empty(), "{:?}", folder.lock_files());
    let live = folder.start_slow("agent:main:live");
    let live_files = folder.lock_files();
    assert_eq!(live_files.len(), 1);
    // All four run at once, then three are killed.
    let doomed: Vec<Child> = (0..3)
        .map(|i| folder.start_slow(&format!("agent:main:dead{i}")))
        .collect();
    doomed.into_iter().for_each(kill9);
    // Two more die before recording anything: they wait for the write lock this test holds.
    {
        let conn = rusqlite::Connection::open(folder.state.join("switchboard.db")).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let waiting: Vec<Child> = (0..2)
            .map(|i| {
                folder
                    .command(&["inject", &format!("agent:main:blocked{i}"), "hello"])
                    .spawn()
                    .unwrap()
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        // Claimed: their lock files renamed into place (a `.lock.new` is a claim under way,
        // which a kill would leave for the sweep's grace period, not this test's).
        let claimed = || {
            folder
                .lock_files()
                .iter()
                .filter(|f| f.ends_with(".lock"))
                .count()
        };
        while claimed() < 6 {
            assert!(Instant::now() < deadline, "{:?}", folder.lock_files());
            std::thread::sleep(Duration::from_millis(10));
        }
        waiting.into_iter().for_each(kill9);
        conn.execute_batch("ROLLBACK").unwrap();
    }
    assert_eq!(folder.lock_files().len(), 6, "five dead, one live");
    let out = folder.command(&["sessions", "list"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        folder.lock_files(),
        live_files,
        "only the live process's lock file is left"
    );
    // The live process still counts as alive: its run was not closed by the others.
    assert_eq!(running_runs(&folder.state), 1);
    kill9(live);
}
