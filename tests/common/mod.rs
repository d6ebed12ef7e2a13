//! Running the real `switchboard` binary against a fresh state folder and config file.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// A temporary state folder and config file, and helpers to run the binary on them.
pub struct CliBench {
    _dir: tempfile::TempDir,
    pub state: PathBuf,
    pub config: PathBuf,
}

impl CliBench {
    pub fn new(config: &str) -> CliBench {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let config_path = dir.path().join("config.json5");
        std::fs::write(&config_path, config).unwrap();
        CliBench {
            _dir: dir,
            state,
            config: config_path,
        }
    }

    /// The command with `--state-dir`, `--config` and `args`; the user's environment
    /// does not leak in.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(&self.state)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("SWITCHBOARD_STATE_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .env_remove("RUST_BACKTRACE");
        store_env(&mut c, &self.state);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Run, require success, return stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run, require success, parse stdout as JSON.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }
}

/// An engine over a fresh temporary state folder (removed when dropped).
pub struct Bench {
    pub engine: switchboard_engine::Engine,
    _dir: tempfile::TempDir,
}

impl Bench {
    /// The state folder the engine runs on.
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }
}

/// A message from the owner into session `key`, as the console sends one.
pub fn owner(key: &str, text: &str) -> switchboard_types::api::SendRequest {
    switchboard_types::api::SendRequest {
        key: key.into(),
        text: text.into(),
        from: switchboard_types::api::Sender::owner(),
        idempotency_key: None,
    }
}

/// The texts of `key`'s last 50 transcript lines, oldest first, as `api` shows them.
pub async fn transcript_texts(
    api: &dyn switchboard_types::api::SessionsApi,
    key: &str,
) -> Vec<String> {
    let page = api
        .transcript(switchboard_types::api::TranscriptQuery {
            key: key.into(),
            limit: 50,
            ..Default::default()
        })
        .await
        .expect("transcript");
    page.lines.into_iter().map(|l| l.text).collect()
}

/// An engine with `config` (a JSON value in the config file's shape).
pub fn bench(config: Value) -> Bench {
    let config: switchboard_config::Config =
        serde_json::from_value(config).expect("test config is valid");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = open_engine(dir.path(), config).expect("engine opens");
    Bench { engine, _dir: dir }
}

/// `state_folder::open_engine` on the store the tests run on: the folder's SQLite database,
/// or with `SWITCHBOARD_TEST_STORE=postgres` a database of the test cluster (`pg.rs`) of
/// its own, the same one each time this folder is opened again (a restart).
pub fn open_engine(
    dir: &std::path::Path,
    mut config: switchboard_config::Config,
) -> Result<switchboard_engine::Engine, switchboard_store::StoreError> {
    if let Some(url) = test_store_url(dir) {
        config.storage.url = Some(url);
    }
    switchboard::state_folder::open_engine(dir, config)
}

/// The store the tests run on, for a `switchboard` process on `state`: the folder's
/// PostgreSQL database in `$SWITCHBOARD_STORE` when the tests run on PostgreSQL, else none
/// (the user's own setting never leaks in).
pub fn store_env(c: &mut Command, state: &std::path::Path) {
    match test_store_url(state) {
        Some(url) => c.env("SWITCHBOARD_STORE", url),
        None => c.env_remove("SWITCHBOARD_STORE"),
    };
}

/// The rows of `sql` on the store of state folder `state` (its SQLite file, or its
/// PostgreSQL database when the tests run there), each column as text (NULL as ""): for
/// tests that check what was stored, on either store.
pub fn store_rows(state: &std::path::Path, sql: &str) -> Vec<Vec<String>> {
    if let Some(url) = test_store_url(state) {
        let cluster = pg::cluster().expect("the test cluster runs");
        return cluster.rows(pg::database_of(&url), sql);
    }
    let db = rusqlite::Connection::open(state.join("switchboard.db")).expect("open the store");
    let mut stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let columns = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            (0..columns)
                .map(|i| {
                    use rusqlite::types::ValueRef;
                    Ok(match r.get_ref(i)? {
                        ValueRef::Null => String::new(),
                        ValueRef::Integer(n) => n.to_string(),
                        ValueRef::Real(x) => x.to_string(),
                        ValueRef::Text(t) | ValueRef::Blob(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                    })
                })
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.collect::<rusqlite::Result<_>>()
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Run `sql` (statements with their values written in) on the store of state folder
/// `state`, either store: for tests that set up a state the engine cannot be driven into.
pub fn store_exec(state: &std::path::Path, sql: &str) {
    if let Some(url) = test_store_url(state) {
        let cluster = pg::cluster().expect("the test cluster runs");
        cluster.sql(pg::database_of(&url), sql);
        return;
    }
    rusqlite::Connection::open(state.join("switchboard.db"))
        .expect("open the store")
        .execute_batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Whether the tests run on PostgreSQL (`SWITCHBOARD_TEST_STORE=postgres`): a test of the
/// SQLite file itself (its header, its pragmas) then says so and skips.
pub fn on_postgres(test: &str) -> bool {
    let on = std::env::var("SWITCHBOARD_TEST_STORE").is_ok_and(|s| s == "postgres");
    if on {
        eprintln!("{test}: a test of the SQLite file itself; skipped on PostgreSQL");
    }
    on
}

/// The PostgreSQL database of `dir` when the tests run on PostgreSQL.
pub fn test_store_url(dir: &std::path::Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static DATABASES: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);
    match std::env::var("SWITCHBOARD_TEST_STORE").as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => None,
        Ok("postgres") => {
            let cluster = pg::cluster().unwrap_or_else(|e| {
                panic!("SWITCHBOARD_TEST_STORE=postgres, but PostgreSQL cannot start: {e}")
            });
            let mut dbs = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
            let url = dbs
                .get_or_insert_with(HashMap::new)
                .entry(dir.to_path_buf())
                .or_insert_with(|| pg::fresh_database(cluster))
                .clone();
            Some(url)
        }
        Ok(other) => panic!("SWITCHBOARD_TEST_STORE={other}: expected sqlite or postgres"),
    }
}

/// Runs a command to its end; more than `ws::WAIT` is a hang and fails the test.
pub fn bounded(mut c: Command) -> std::process::Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let id = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(ws::WAIT) {
        Ok(out) => out.expect("output"),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("the command hung");
        }
    }
}

pub mod console_driver;
pub mod fake_api;
pub mod fake_discord;
pub mod fake_telegram;
pub mod join;
pub mod pg;
pub mod receiver;
pub mod screen;
pub mod tmux;
pub mod ws;

/// SQL taking a current SQLite store back before schema 12 (13: the pairings; 12: the
/// outbox's delivery state), newest first, for tests that downgrade a folder to an older
/// schema and reopen it.
pub const UNDO_SCHEMAS_13_12: &str = "DROP TABLE pairings;
     DROP INDEX outbox_due;
     ALTER TABLE outbox DROP COLUMN attempt;
     ALTER TABLE outbox DROP COLUMN next_at;
     ALTER TABLE outbox DROP COLUMN claimed_by;
     ALTER TABLE outbox DROP COLUMN claim_until;
     ALTER TABLE outbox DROP COLUMN message_id;
     ALTER TABLE outbox DROP COLUMN last_error;
     ALTER TABLE outbox DROP COLUMN updated_at;";
