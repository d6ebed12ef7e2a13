//! A throwaway PostgreSQL cluster for the tests: one per test process, made with Debian's
//! `initdb` in a temporary folder, run by the `postgres` user when the tests run as root
//! (the server refuses root), listening on 127.0.0.1 at a free port and on a socket in that
//! folder. A watcher process stops it and removes the folder when the test process ends
//! (statics are never dropped, and a killed test run must not leave a server behind).
//! Each caller gets a fresh database in it (`fresh_database`).
//!
//! Under `CI=true` a cluster that cannot start fails the test; elsewhere (a machine without
//! the server package) the test may skip, saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The running cluster of this test process.
pub struct Cluster {
    pub port: u16,
    pub socket_dir: PathBuf,
    bin: PathBuf,
    data: PathBuf,
    options: String,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster, started on first use; `Err` says why it could not start.
pub fn cluster() -> Result<&'static Cluster, String> {
    CLUSTER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// A cluster of the caller's own (to stop and start again: a server restart), removed
/// when the test process ends; `None` as `cluster_or_skip` says.
pub fn private_cluster_or_skip(test: &str) -> Option<Cluster> {
    match start() {
        Ok(c) => Some(c),
        Err(e) if required() => panic!("PostgreSQL is required here (CI=true) but: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: no PostgreSQL ({e})");
            None
        }
    }
}

/// The cluster, or `None` (with a message on stderr) where PostgreSQL is not installed and
/// not required. Under `CI=true` a failure to start panics: CI must not pass on zero runs.
pub fn cluster_or_skip(test: &str) -> Option<&'static Cluster> {
    match cluster() {
        Ok(c) => Some(c),
        Err(e) if required() => panic!("PostgreSQL is required here (CI=true) but: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: no PostgreSQL ({e})");
            None
        }
    }
}

/// Whether a missing PostgreSQL fails the tests (CI) rather than skipping them.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A new, empty database in the cluster; its `postgres://` URL.
pub fn fresh_database(cluster: &Cluster) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    cluster.sql("postgres", &format!("CREATE DATABASE {name}"));
    cluster.url(&name)
}

impl Cluster {
    /// Stop the server (fast: connections are closed, as when it restarts).
    pub fn stop(&self) {
        let out = as_server_user(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "stop"])
            .output()
            .expect("pg_ctl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start it again on the same port.
    pub fn start(&self) {
        let out = as_server_user(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.socket_dir.join("server.log"))
            .args(["-o", &self.options, "-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .output()
            .expect("pg_ctl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The URL of database `db` over TCP.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// psql on `db` over the socket, as the superuser, stopping at the first error.
    fn psql(&self, db: &str) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", "postgres"])
            .arg("-h")
            .arg(&self.socket_dir)
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-d", db]);
        cmd
    }

    /// Run `sql` in `db` with psql over the socket; panics with psql's message on failure.
    pub fn sql(&self, db: &str, sql: &str) -> String {
        let out = self
            .psql(db)
            .args(["-A", "-t", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Cluster {
    /// Run the psql script `file` in `db` with `-v name=value` for each of `vars`; panics
    /// with psql's message on failure.
    pub fn script(&self, db: &str, file: &std::path::Path, vars: &[(&str, &str)]) {
        let mut cmd = self.psql(db);
        cmd.arg("-f").arg(file);
        for (name, value) in vars {
            cmd.arg("-v").arg(format!("{name}={value}"));
        }
        let out = cmd.output().expect("psql runs");
        assert!(
            out.status.success(),
            "psql -f {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The rows of `sql` in `db`, each column as text (NULL as ""). Fields and rows are
    /// split on the ASCII unit and record separators, which stored text does not hold.
    pub fn rows(&self, db: &str, sql: &str) -> Vec<Vec<String>> {
        self.try_rows(db, sql)
            .unwrap_or_else(|e| panic!("psql {sql:?}: {e}"))
    }

    /// `rows`, or psql's message when the statement fails (a table not made yet).
    pub fn try_rows(&self, db: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let out = self
            .psql(db)
            .args(["-A", "-t", "-F", "\u{1f}", "-R", "\u{1e}", "-c", sql])
            .output()
            .expect("psql runs");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text
            .trim_end_matches('\n')
            .split('\u{1e}')
            .filter(|r| !r.is_empty())
            .map(|r| r.split('\u{1f}').map(str::to_string).collect())
            .collect())
    }
}

/// The database name of a `postgres://` URL.
pub fn database_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or_default()
}

/// Where Debian keeps the server's programs (the newest version), else `$PATH`'s.
fn bin_dir() -> Result<PathBuf, String> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.retain(|p| p.join("initdb").is_file());
    versions.sort();
    if let Some(dir) = versions.pop() {
        return Ok(dir);
    }
    let which = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .map_err(|e| e.to_string())?;
    let path = String::from_utf8_lossy(&which.stdout).trim().to_string();
    match Path::new(&path).parent() {
        Some(dir) if !path.is_empty() => Ok(dir.to_path_buf()),
        _ => Err("initdb not found (apt-get install postgresql)".into()),
    }
}

/// Whether this process runs as root (the server must then run as `postgres`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program args…` as the server's user.
fn as_server_user(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn start() -> Result<Cluster, String> {
    let bin = bin_dir()?;
    // Kept past the process (`keep`): the watcher removes it once the server has stopped.
    let dir = tempfile::Builder::new()
        .prefix("switchboard-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let data = dir.join("data");
    if is_root() {
        let chown = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .map_err(|e| e.to_string())?;
        if !chown.success() {
            return Err("cannot hand the cluster's folder to the postgres user".into());
        }
    }
    let init = as_server_user(&bin, "initdb")
        .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        .args(["--locale", "C", "-D"])
        .arg(&data)
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !init.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&init.stderr)
        ));
    }
    let port = free_port()?;
    // Settings for a disposable cluster: no durability (tests), room for many pools.
    let options = format!(
        "-c listen_addresses=127.0.0.1 -c port={port} -k {} -c fsync=off \
         -c synchronous_commit=off -c full_page_writes=off -c max_connections=400 \
         -c shared_buffers=32MB",
        dir.display()
    );
    let log = dir.join("server.log");
    let started = as_server_user(&bin, "pg_ctl")
        .arg("-D")
        .arg(&data)
        .arg("-l")
        .arg(&log)
        .args(["-o", &options, "-w", "-t", "60", "start"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("pg_ctl: {e}"))?;
    if !started.status.success() {
        return Err(format!(
            "pg_ctl start failed: {} {}",
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        ));
    }
    watch_and_stop(&bin, &data, &dir);
    Ok(Cluster {
        port,
        socket_dir: dir,
        bin,
        data,
        options,
    })
}

/// A detached watcher: when this test process is gone, stop the server and remove its
/// folder.
fn watch_and_stop(bin: &Path, data: &Path, dir: &Path) {
    let stop = if is_root() {
        format!(
            "runuser -u postgres -- {} -D {} -m immediate stop",
            bin.join("pg_ctl").display(),
            data.display()
        )
    } else {
        format!(
            "{} -D {} -m immediate stop",
            bin.join("pg_ctl").display(),
            data.display()
        )
    };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        dir = dir.display()
    );
    let _ = Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}
