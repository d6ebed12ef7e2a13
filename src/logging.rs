//! Logging: `tracing` to `<state>/logs/switchboard.log`, never to stdout (stdout carries
//! results for scripts, and later the console's screen). The file is bounded whatever is
//! logged: each event is cut to `MAX_LINE_BYTES`, and the file rotates by size, keeping
//! `KEPT_FILES` older ones (`switchboard.log.1` newest … `.4` oldest).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};
use tracing_subscriber::EnvFilter;

/// The size at which the log file is rotated.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;
/// Rotated files kept beside the current one; the oldest is deleted. With the current file,
/// the folder holds at most `(KEPT_FILES + 1) * MAX_FILE_BYTES` (40 MiB) of this process's log.
pub const KEPT_FILES: usize = 4;
/// The longest event written: anything longer (a client's input quoted in an error, say) is
/// cut, and the line says how much was left out.
pub const MAX_LINE_BYTES: usize = 4096;

/// How each event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, `span`), for log
    /// shippers.
    Json,
}

/// Start logging into `state_dir/logs/`. Returns the log file's path, or `None` when the
/// folder cannot be written (then the command still runs; its own errors say why).
pub fn init(state_dir: &Path, format: LogFormat) -> Option<PathBuf> {
    let dir = state_dir.join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("switchboard.log");
    // Opened once here so an unwritable file is seen now, not as silently lost lines.
    open_options().open(&path).ok()?;
    let file = FileRotate::new(
        &path,
        AppendCount::new(KEPT_FILES),
        ContentLimit::BytesSurpassed(MAX_FILE_BYTES),
        Compression::None,
        Some(open_options()),
    );
    let filter =
        EnvFilter::try_from_env("SWITCHBOARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let writer = Mutex::new(SafeLog {
        inner: file,
        json: format == LogFormat::Json,
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.try_init().ok()?,
        LogFormat::Json => builder.json().try_init().ok()?,
    }
    Some(path)
}

/// Appending, readable by the owner only: lines quote session keys and senders.
fn open_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// The log file's writer: every event is escaped by `text_safety` before it is written, so
/// agent or user text quoted in a field can neither drive a terminal running `tail -f` on
/// the log nor forge log lines (a line break inside an event shows as `^J`), and cut to
/// `MAX_LINE_BYTES`. The formatter hands over one whole event per write. JSON events stay
/// JSON: JSON already escapes control characters, the look-alike ones are escaped the JSON
/// way, and an event too long is replaced by one that says so.
struct SafeLog<W> {
    inner: W,
    json: bool,
}

impl<W: std::io::Write> std::io::Write for SafeLog<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = if self.json {
            safe_json_event(buf)
        } else {
            safe_event(buf)
        };
        // One write per event, so lines of processes appending to the same file do not mix.
        self.inner.write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One JSON event as it is written: on one line, characters that reorder or hide text
/// escaped as `\uXXXX`; past `MAX_LINE_BYTES`, an event saying how long it was instead.
fn safe_json_event(buf: &[u8]) -> String {
    let body = buf.strip_suffix(b"\n").unwrap_or(buf);
    if body.len() > MAX_LINE_BYTES {
        return format!(
            "{{\"level\":\"WARN\",\"fields\":{{\"message\":\"event of {} bytes cut\"}}}}\n",
            body.len()
        );
    }
    let text = String::from_utf8_lossy(body);
    let mut line = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        // C0 and line breaks are already escaped by JSON; these are not.
        if matches!(c, '\u{80}'..='\u{9f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        {
            line.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            line.push(c);
        }
    }
    line.push('\n');
    line
}

/// One event as it is written: escaped, on one line, at most `MAX_LINE_BYTES` plus the note
/// saying what was cut.
fn safe_event(buf: &[u8]) -> String {
    let (body, end) = match buf.strip_suffix(b"\n") {
        Some(body) => (body, "\n"),
        None => (buf, ""),
    };
    // Cut before escaping too, so a 20 MB event costs no more than a short one.
    let raw = &body[..body.len().min(MAX_LINE_BYTES)];
    let text = String::from_utf8_lossy(raw);
    let safe = switchboard_types::text_safety::safe_line(&text);
    let mut line = String::with_capacity(MAX_LINE_BYTES + 64);
    if body.len() > MAX_LINE_BYTES || safe.len() > MAX_LINE_BYTES {
        let mut cut = MAX_LINE_BYTES.min(safe.len());
        while !safe.is_char_boundary(cut) {
            cut -= 1;
        }
        line.push_str(&safe[..cut]);
        line.push_str(&format!(" …[event of {} bytes cut]", body.len()));
    } else {
        line.push_str(&safe);
    }
    line.push_str(end);
    line
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{MAX_LINE_BYTES, SafeLog};

    #[test]
    fn log_events_are_escaped_one_line_each() {
        let mut log = SafeLog {
            inner: Vec::new(),
            json: false,
        };
        log.write_all(b"WARN error=\x1b]0;x\x07 two\nlines \xe2\x80\xae\n")
            .expect("write");
        assert_eq!(
            String::from_utf8(log.inner).expect("utf-8"),
            "WARN error=^[]0;x^G two^Jlines \\u{202e}\n"
        );
    }

    #[test]
    fn a_huge_event_is_cut_and_says_so() {
        let mut log = SafeLog {
            inner: Vec::new(),
            json: false,
        };
        let mut event = b"INFO refused message=".to_vec();
        event.extend(std::iter::repeat_n(b'A', 20_000_000));
        event.push(b'\n');
        log.write_all(&event).expect("write");
        let text = String::from_utf8(log.inner).expect("utf-8");
        assert!(text.len() < MAX_LINE_BYTES + 100, "{}", text.len());
        assert!(
            text.ends_with(" …[event of 20000021 bytes cut]\n"),
            "{}",
            &text[4000..]
        );
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn control_characters_do_not_escape_the_cap() {
        // Each byte expands to two characters when escaped: the cut is after escaping too.
        let mut log = SafeLog {
            inner: Vec::new(),
            json: false,
        };
        log.write_all(&[0x07; MAX_LINE_BYTES]).expect("write");
        let text = String::from_utf8(log.inner).expect("utf-8");
        assert!(text.len() < MAX_LINE_BYTES + 100, "{}", text.len());
    }

    #[test]
    fn json_events_stay_json_with_look_alikes_escaped_and_long_ones_replaced() {
        let mut log = SafeLog {
            inner: Vec::new(),
            json: true,
        };
        let event = "{\"fields\":{\"message\":\"a\u{202e}b\u{85}c\"}}\n";
        log.write_all(event.as_bytes()).expect("write");
        let mut big = b"{\"fields\":{\"message\":\"".to_vec();
        big.extend(std::iter::repeat_n(b'A', 100_000));
        big.extend(b"\"}}\n");
        log.write_all(&big).expect("write");
        let text = String::from_utf8(log.inner).expect("utf-8");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(lines[0]["fields"]["message"], "a\u{202e}b\u{85}c");
        assert!(
            text.lines()
                .next()
                .is_some_and(|l| l.contains("\\u202e") && l.is_ascii())
        );
        assert_eq!(lines[1]["fields"]["message"], "event of 100025 bytes cut");
    }
}
