//! Logging: `tracing` to `<state>/logs/switchboard.log`, never to stdout (stdout carries
//! results for scripts, and later the console's screen).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// Start logging into `state_dir/logs/`. Returns the log file's path, or `None` when the
/// folder cannot be written (then the command still runs; its own errors say why).
pub fn init(state_dir: &Path) -> Option<PathBuf> {
    let dir = state_dir.join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("switchboard.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
    let filter =
        EnvFilter::try_from_env("SWITCHBOARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(SafeLog(file)))
        .try_init()
        .ok()?;
    Some(path)
}

/// The log file's writer: every event is escaped by `text_safety` before it is written, so
/// agent or user text quoted in a field can neither drive a terminal running `tail -f` on
/// the log nor forge log lines (a line break inside an event shows as `^J`). The formatter
/// hands over one whole event per write.
struct SafeLog<W>(W);

impl<W: std::io::Write> std::io::Write for SafeLog<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let mut line = switchboard::text_safety::safe_line(body).into_owned();
        line.push_str(end);
        // One write per event, so lines of processes appending to the same file do not mix.
        self.0.write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::SafeLog;

    #[test]
    fn log_events_are_escaped_one_line_each() {
        let mut log = SafeLog(Vec::new());
        log.write_all(b"WARN error=\x1b]0;x\x07 two\nlines \xe2\x80\xae\n")
            .expect("write");
        assert_eq!(
            String::from_utf8(log.0).expect("utf-8"),
            "WARN error=^[]0;x^G two^Jlines \\u{202e}\n"
        );
    }
}
