//! `switchboard store check` and `store copy`: a store checked (the state folder's, or the
//! PostgreSQL database the config names) and everything moved from one store to another.

use std::io::IsTerminal;

use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};

use switchboard::stores::{self, StoreKind};
use switchboard_store::check::{CheckReport, Integrity};
use switchboard_store::copy::{self, CopyError, CopyOptions, CopyReport};
use switchboard_types::api::time::now_ms;
use switchboard_types::text_safety::safe_line;
use switchboard_types::words::count;

use super::ExitError;
use super::args::Cli;

/// Test-only: after this many sessions have committed, hold inside the next session's
/// transaction until killed (how the tests kill a copy midway).
const HOLD_ENV: &str = "SWITCHBOARD_COPY_HOLD_AFTER";

/// `store check`: the store checked (see its help); exit 1 on problems.
pub(crate) async fn check(cli: &Cli, json: bool) -> Result<()> {
    let (kind, location, r) = match cli.load_config()?.storage.url {
        Some(url) => {
            let (location, r) = tokio::task::spawn_blocking(move || stores::check_postgres(&url))
                .await
                .map_err(|e| anyhow!("the check stopped: {e}"))?
                .context("cannot check the PostgreSQL store")?;
            (StoreKind::Postgres, location, r)
        }
        None => {
            let dir = cli.state_dir();
            if !switchboard::state_folder::exists(&dir) {
                return Err(anyhow!("no state folder at {}", dir.display()));
            }
            let r = switchboard_store_sqlite::check::check(&dir)
                .with_context(|| format!("cannot check {}", dir.display()))?;
            let location = dir.join(switchboard_store_sqlite::DB_FILE);
            (StoreKind::Sqlite, location.display().to_string(), r)
        }
    };
    if json {
        println!("{}", check_json(kind, &location, &r));
    } else {
        print_check(kind, &location, &r);
    }
    if r.problems() {
        return Err(ExitError {
            code: 1,
            message: "the store has problems (see above)".into(),
        }
        .into());
    }
    Ok(())
}

fn check_json(kind: StoreKind, location: &str, r: &CheckReport) -> Value {
    let (integrity, note) = match &r.integrity {
        Integrity::Checked(found) => (json!(found), Value::Null),
        Integrity::NotChecked(why) => (Value::Null, json!(why)),
    };
    json!({
        "store": kind.name(),
        "location": location,
        "schema": r.schema,
        "schemaKnown": r.schema_known,
        "integrity": integrity,
        "integrityNote": note,
        "sessions": r.sessions,
        "transcriptLines": r.lines,
        "orphanLines": r.orphan_lines,
        "brokenSeq": {"sessions": r.broken_seq, "keys": r.broken_seq_keys},
        "countDrift": r.count_drift,
        "ofDeletedSessions": {"runs": r.gone_runs, "spawns": r.gone_spawns, "outbox": r.gone_outbox},
        "running": {"runs": r.running_runs, "exchanges": r.running_exchanges, "spawns": r.running_spawns},
        "leases": {
            "nodes": r.leases.nodes.iter().map(|n| json!({
                "node": n.node, "host": n.host, "pid": n.pid,
                "expiresInMs": n.expires_in_ms, "lanes": n.lanes, "runningRuns": n.running,
            })).collect::<Vec<_>>(),
            "staleLanes": r.leases.stale_lanes,
            "ownerlessRuns": r.leases.ownerless_runs,
        },
        "ok": !r.problems(),
    })
}

fn print_check(kind: StoreKind, location: &str, r: &CheckReport) {
    let name = match kind {
        StoreKind::Sqlite => "SQLite",
        StoreKind::Postgres => "PostgreSQL",
    };
    println!(
        "store: {} ({name}, schema {} of {})",
        safe_line(location),
        r.schema,
        r.schema_known
    );
    match &r.integrity {
        Integrity::Checked(found) => println!("integrity: {}", safe_line(&found.join("; "))),
        Integrity::NotChecked(why) => println!("integrity: {why}"),
    }
    println!(
        "{}, {}",
        count(r.sessions as usize, "session"),
        count(r.lines as usize, "transcript line")
    );
    println!("orphan transcript lines: {}", r.orphan_lines);
    let named: Vec<String> = r
        .broken_seq_keys
        .iter()
        .map(|k| safe_line(k).into_owned())
        .collect();
    match r.broken_seq {
        0 => println!("transcripts numbered 0, 1, 2, … without gaps: all"),
        n => println!(
            "transcripts with a gap or a line out of place: {n} ({}{})",
            named.join(", "),
            if n as usize > named.len() {
                ", …"
            } else {
                ""
            }
        ),
    }
    if r.count_drift.is_empty() {
        println!("session counters: match the sessions");
    } else {
        println!(
            "session counters that drifted: {}",
            r.count_drift.join("; ")
        );
    }
    println!(
        "kept from deleted sessions: {}, {}, {}",
        count(r.gone_runs as usize, "run"),
        count(r.gone_spawns as usize, "sub-agent record"),
        count(r.gone_outbox as usize, "outbox row")
    );
    println!(
        "recorded as running: {}, {}, {} (the next start recovers them unless a process runs them now)",
        count(r.running_runs as usize, "run"),
        count(r.running_exchanges as usize, "exchange"),
        count(r.running_spawns as usize, "sub-agent")
    );
    match kind {
        StoreKind::Sqlite => {
            println!("leases: none (SQLite: the processes of one host, by their lock files)")
        }
        StoreKind::Postgres => print_leases(&r.leases),
    }
}

fn print_leases(leases: &switchboard_store::check::Leases) {
    println!("leases: {}", count(leases.nodes.len(), "node"));
    for n in &leases.nodes {
        let standing = if n.expires_in_ms >= 0 {
            format!(
                "renewed, runs out in {:.1} s",
                n.expires_in_ms as f64 / 1000.0
            )
        } else {
            format!(
                "ran out {:.1} s ago (a running node takes it over)",
                -n.expires_in_ms as f64 / 1000.0
            )
        };
        println!(
            "  {} on {} (pid {}): {standing}; {}, {}",
            safe_line(&n.node),
            safe_line(&n.host),
            n.pid,
            count(n.lanes as usize, "lane"),
            count(n.running as usize, "running run")
        );
    }
    println!(
        "lanes of nodes that are gone: {} (free for the next run); running runs without a lease: {} (a running node takes them over)",
        leases.stale_lanes, leases.ownerless_runs
    );
}

/// The test hold: say so, then wait to be killed.
fn hold_then_wait() {
    eprintln!("store copy: holding inside a session's transaction ({HOLD_ENV})");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// `store copy`: everything from `from` to `to`, then verified (see its help); exit 1 when
/// the verification finds a difference.
pub(crate) async fn copy(from: &str, to: &str, force: bool, json: bool) -> Result<()> {
    let hold_after = std::env::var(HOLD_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let (from, to) = (from.to_string(), to.to_string());
    let outcome = tokio::task::spawn_blocking(move || {
        let mut src = stores::open_for_copy(&from, false).with_context(|| {
            format!(
                "cannot open the source {}",
                safe_line(&stores::shown(&from))
            )
        })?;
        let mut dst = stores::open_for_copy(&to, true).with_context(|| {
            format!(
                "cannot open the destination {}",
                safe_line(&stores::shown(&to))
            )
        })?;
        let hold: fn() = hold_then_wait;
        let options = CopyOptions {
            force,
            now: now_ms(),
            hold: hold_after.map(|n| (n, &hold as &dyn Fn())),
        };
        let mut progress = Shown::new(!json);
        let report = copy::copy(src.as_mut(), dst.as_mut(), &options, &mut progress);
        progress.end();
        anyhow::Ok((src.location(), dst.location(), report))
    })
    .await
    .map_err(|e| anyhow!("the copy stopped: {e}"))??;
    let (from, to, report) = outcome;
    let report = match report {
        Ok(r) => r,
        Err(e @ (CopyError::SameStore { .. } | CopyError::Foreign { .. })) => {
            return Err(super::usage(safe_line(&e.to_string()).into_owned()));
        }
        Err(CopyError::Store(e)) => {
            return Err(anyhow!(e).context(
                "the copy stopped (what it committed stays; run the same command again to resume)",
            ));
        }
    };
    tracing::info!(
        from = %from,
        to = %to,
        sessions = report.sessions,
        copied = report.copied,
        resumed = report.resumed,
        kept = report.kept,
        id_taken = report.id_taken,
        mismatches = report.verify.mismatches_total,
        ok = report.ok(),
        "store copy finished"
    );
    if json {
        println!("{}", copy_json(&from, &to, &report));
    } else {
        print_copy(&from, &to, &report);
    }
    if !report.ok() {
        return Err(ExitError {
            code: 1,
            message: "the copy does not verify (see above): a session named was changed in the \
                      source after it was copied (stop what writes to the source) or in the \
                      destination; copy into an empty destination to start over"
                .into(),
        }
        .into());
    }
    Ok(())
}

fn copy_json(from: &str, to: &str, r: &CopyReport) -> Value {
    let counts: serde_json::Map<String, Value> = r
        .verify
        .counts
        .iter()
        .map(|c| {
            (
                c.table.noun().to_string(),
                json!({"source": c.source, "destination": c.destination}),
            )
        })
        .collect();
    json!({
        "from": from,
        "to": to,
        "sessions": r.sessions,
        "copied": r.copied,
        "resumed": r.resumed,
        "kept": r.kept,
        "keptKeys": r.kept_keys,
        "idTaken": r.id_taken,
        "idTakenKeys": r.id_taken_keys,
        "counts": counts,
        "countsOk": r.verify.counts_ok,
        "sessionsChecked": r.verify.sessions_checked,
        "mismatches": r.verify.mismatches.iter()
            .map(|m| json!({"key": m.key, "what": m.what})).collect::<Vec<_>>(),
        "mismatchesTotal": r.verify.mismatches_total,
        "ok": r.ok(),
    })
}

fn print_copy(from: &str, to: &str, r: &CopyReport) {
    println!(
        "copied {} of {} from {} to {}{}",
        count(r.copied as usize, "session"),
        r.sessions,
        safe_line(from),
        safe_line(to),
        if r.resumed > 0 {
            format!(" ({} there from an earlier run)", r.resumed)
        } else {
            String::new()
        }
    );
    if r.kept > 0 {
        println!(
            "kept the destination's own {} under the same keys (--force): {}",
            count(r.kept as usize, "session"),
            named(&r.kept_keys, r.kept)
        );
    }
    if r.id_taken > 0 {
        println!(
            "not copied, their session id is another key's in the destination: {}",
            named(&r.id_taken_keys, r.id_taken)
        );
    }
    for c in &r.verify.counts {
        let mark = if c.agrees { "" } else { "  <- differs" };
        println!(
            "  {:<18} {:>10} -> {:>10}{mark}",
            c.table.words(),
            c.source,
            c.destination
        );
    }
    for m in &r.verify.mismatches {
        println!("mismatch: {}: {}", safe_line(&m.key), safe_line(&m.what));
    }
    if r.verify.mismatches_total > r.verify.mismatches.len() as u64 {
        println!(
            "… and {} more sessions that differ",
            r.verify.mismatches_total - r.verify.mismatches.len() as u64
        );
    }
    if r.ok() {
        println!(
            "verified: counts match, {} compared (entry and transcript checksums): all equal",
            count(r.verify.sessions_checked as usize, "session")
        );
    }
}

/// Keys as a list, with how many more there are.
fn named(keys: &[String], total: u64) -> String {
    let mut s: Vec<String> = keys.iter().map(|k| safe_line(k).into_owned()).collect();
    if total > keys.len() as u64 {
        s.push(format!("… {} more", total - keys.len() as u64));
    }
    s.join(", ")
}

/// Progress on stderr: sessions done of all, at most once a second (and the last), on one
/// line rewritten on a terminal.
struct Shown {
    enabled: bool,
    tty: bool,
    last: Option<std::time::Instant>,
    shown: bool,
}

impl Shown {
    fn new(enabled: bool) -> Shown {
        Shown {
            enabled,
            tty: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    fn end(&self) {
        if self.shown && self.tty {
            eprintln!();
        }
    }
}

impl copy::Progress for Shown {
    fn sessions(&mut self, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let due = self
            .last
            .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1));
        if !due && done != total {
            return;
        }
        self.last = Some(std::time::Instant::now());
        self.shown = true;
        if self.tty {
            eprint!("\rcopying: {done} of {total} sessions");
        } else {
            eprintln!("copying: {done} of {total} sessions");
        }
    }
}
