//! `sessions export` and `import-openclaw`: sessions out to and in from OpenClaw's files.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use switchboard_engine::Overwrite;
use switchboard_types::api::SessionsApi;
use switchboard_types::text_safety::{self, safe_line};
use switchboard_types::words::{count, count_as, noun};

use super::args::Cli;
use super::{existing_key, usage};

pub(crate) async fn export(
    cli: &Cli,
    key: Option<&str>,
    all: bool,
    out: Option<&Path>,
    overwrite: Overwrite,
) -> Result<()> {
    let engine = cli.open_engine_for_reading()?;
    if all {
        if key.is_some() {
            return Err(usage("give either a session key or --all, not both"));
        }
        let dir = out.ok_or_else(|| usage("--all needs --out FOLDER"))?;
        let report = engine.export_openclaw(dir, overwrite).await?;
        eprintln!(
            "exported {} ({}) to {}",
            count(report.sessions, "session"),
            count(report.lines, "line"),
            dir.display()
        );
        return Ok(());
    }
    let raw = key.ok_or_else(|| usage("name a session key, or pass --all --out FOLDER"))?;
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    // The file operations stay engine calls (they work on this machine's state folder).
    let key = existing_key(api.as_ref(), raw).await?;
    let lines = match out {
        Some(path) => engine.export_session_to_file(&key, path, overwrite).await?,
        None => {
            // Lines are stored as their agents wrote them; on the way to a terminal (or a
            // pipe) the characters that could drive one are escaped, the values unchanged.
            let w = text_safety::SafeJsonText::new(std::io::BufWriter::new(std::io::stdout()));
            let (n, mut w) = engine.export_session_jsonl(&key, w).await?;
            w.flush()?;
            n
        }
    };
    eprintln!("exported {key}: {}", count(lines, "line"));
    Ok(())
}

pub(crate) async fn import(cli: &Cli, dir: &Path) -> Result<()> {
    let engine = cli.open_engine()?;
    let report = engine.import_openclaw(dir).await?;
    for w in &report.warnings {
        eprintln!("warning: {}", safe_line(w));
    }
    for n in &report.source_notes {
        eprintln!("transcript: {}", safe_line(n));
    }
    if report.source_notes_total > report.source_notes.len() {
        let more = report.source_notes_total - report.source_notes.len();
        eprintln!(
            "transcript: … and {more} more {} like these",
            noun(more, "session", "sessions")
        );
    }
    for c in &report.conflicts {
        println!("conflict: {}", safe_line(c));
    }
    let mut summary = format!(
        "imported {} ({}); updated {} ({} appended, {} replaced); {} unchanged; {}",
        count(report.sessions_imported, "new session"),
        count(report.lines_imported, "line"),
        report.sessions_updated,
        count(report.lines_appended, "line"),
        count_as(report.entries_updated, "entry", "entries"),
        report.sessions_present,
        count(report.conflicts.len(), "conflict")
    );
    if !report.skipped.is_empty() {
        let skips: Vec<String> = report
            .skipped
            .iter()
            .map(|(reason, n)| reason.describe(*n))
            .collect();
        summary.push_str(&format!("; skipped {}", skips.join(", ")));
    }
    println!("{summary}");
    if !report.approvals.is_empty() {
        let per: Vec<String> = report
            .approvals
            .iter()
            .map(|(channel, n)| format!("{} {n}", safe_line(channel)))
            .collect();
        let total: usize = report.approvals.values().sum();
        println!(
            "approved {} OpenClaw had approved ({}): `switchboard pairing list` shows them",
            count(total, "sender"),
            per.join(", ")
        );
    }
    if report.changed_nothing() {
        println!("nothing changed");
    }
    Ok(())
}

/// `backup --out FILE`: the state folder's database copied while in use (see its help).
pub(crate) async fn backup(cli: &Cli, out: &std::path::Path, force: bool) -> Result<()> {
    // The SQLite backup has nothing to copy when the state is in PostgreSQL.
    if cli.load_config()?.storage.url.is_some() {
        return Err(super::usage(
            "the engine's state is in PostgreSQL (--store, $SWITCHBOARD_STORE or storage.url), \
             not in the state folder: back it up with pg_dump (README, \"Running on PostgreSQL\")",
        ));
    }
    let dir = cli.state_dir();
    if !switchboard::state_folder::exists(&dir) {
        return Err(anyhow::anyhow!("no state folder at {}", dir.display()));
    }
    if out.exists() && !force {
        return Err(super::usage(format!(
            "{} exists: pass --force to replace it, or another --out",
            out.display()
        )));
    }
    let (dir2, out2) = (dir.clone(), out.to_path_buf());
    let report =
        tokio::task::spawn_blocking(move || switchboard_store_sqlite::backup::backup(&dir2, &out2))
            .await
            .map_err(|e| anyhow::anyhow!("the backup stopped: {e}"))?
            .with_context(|| format!("cannot back up {} to {}", dir.display(), out.display()))?;
    println!(
        "backed up {} to {}: {}, {} ({:.1} MB)",
        dir.display(),
        out.display(),
        switchboard_types::words::count(report.sessions as usize, "session"),
        switchboard_types::words::count(report.lines as usize, "transcript line"),
        report.bytes as f64 / 1e6
    );
    Ok(())
}
