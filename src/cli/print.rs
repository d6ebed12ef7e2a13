//! Output shared by the commands: stderr lines for long-running commands, JSON for
//! scripts, table cells escaped for the terminal.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde_json::Value;

use switchboard_types::text_safety::{self, safe_line};

/// A line on stderr for a long-running command: a reader that went away must not stop it
/// (`eprintln!` would panic).
pub(crate) fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "switchboard: {line}");
}

pub(crate) fn say_log(log: &Option<PathBuf>) {
    // Printed before the screen is taken, so it is still there after quitting.
    if let Some(path) = log {
        eprintln!("switchboard: logging to {}", path.display());
    }
}

/// JSON for scripts, with every character a terminal could act on escaped (`\uXXXX`), so
/// `--json` piped to a screen is as safe as the tables; parsed, the strings are unchanged.
pub(crate) fn print_json(v: &Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    text_safety::write_json(&mut out, v, true)?;
    writeln!(out)?;
    Ok(())
}

pub(crate) fn field<'a>(row: &'a Value, name: &str) -> &'a str {
    row.get(name).and_then(Value::as_str).unwrap_or("")
}

/// A row's field as a table cell shows it: one line, nothing the terminal would act on.
pub(crate) fn cell(row: &Value, name: &str) -> String {
    safe_line(field(row, name)).into_owned()
}

/// A moment (ms since the epoch) in this machine's time zone, as the console shows it:
/// `2026-11-27 11:46:07`. `-` for one out of range.
pub(crate) fn local_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| "-".into())
}

/// A table: the header row, then each row, every column as wide as its widest cell (at
/// most `max` characters) and two spaces apart; the last column is not padded.
pub(crate) fn print_columns(header: &[&str], rows: &[Vec<String>], max: usize) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
                .min(max)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, c) in cells.enumerate() {
            out.push_str(c);
            if i + 1 < header.len() {
                let pad = widths[i].saturating_sub(c.chars().count());
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out
    };
    println!("{}", line(&mut header.iter().copied()));
    for r in rows {
        println!("{}", line(&mut r.iter().map(String::as_str)));
    }
}

/// A session as a command names it: its display form, after its source when the engine's
/// key names one (several sources), so `team/agent:main:main` is never shown as a bare key
/// another source may also have.
pub(crate) fn shown_key(key: &str, display: &str) -> String {
    use switchboard_types::api::source::SessionRef;
    match SessionRef::parse(key).source {
        Some(source) => SessionRef::join(source, display),
        None => display.to_string(),
    }
}
