//! How long ago a moment was, in the words each front end shows: one formatter, so the
//! console's and the command line's buckets (seconds, minutes, hours, days) cannot drift.

/// Milliseconds since the Unix epoch, now (0 for a clock set before 1970). The one clock
/// reading of every crate: stored timestamps, event times and ages all use it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How an age is written. Each style is complete as it stands: no caller adds "ago" (the
/// console's `/status` once printed "updated now ago").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgoStyle {
    /// The console's narrow column: `now` under a minute, then `5m`, `2h`, `3d`. Minute
    /// granularity on purpose: a second counter would redraw an idle console every second
    /// (an idle console writes nothing).
    Terse,
    /// A phrase for sentences and the command line's table: `just now` under a second,
    /// then `12 s ago`, `5 min ago`, `2 h ago`, `3 d ago`.
    Words,
}

/// The age of `then_ms` at `now_ms` (milliseconds since the epoch), rounded down to its
/// largest whole unit; a moment in the future (clocks disagree) is "now".
pub fn ago(now_ms: i64, then_ms: i64, style: AgoStyle) -> String {
    let secs = (now_ms.saturating_sub(then_ms) / 1000).max(0);
    let (n, terse, words) = match secs {
        0..60 => (secs, "s", "s"),
        60..3600 => (secs / 60, "m", "min"),
        3600..86400 => (secs / 3600, "h", "h"),
        _ => (secs / 86400, "d", "d"),
    };
    match style {
        AgoStyle::Terse if secs < 60 => "now".to_string(),
        AgoStyle::Terse => format!("{n}{terse}"),
        AgoStyle::Words if secs == 0 => "just now".to_string(),
        AgoStyle::Words => format!("{n} {words} ago"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_styles_share_the_buckets() {
        let now = 10_000_000_000;
        let cases = [
            (0, "now", "just now"),
            (999, "now", "just now"),
            (1_000, "now", "1 s ago"),
            (59_999, "now", "59 s ago"),
            (60_000, "1m", "1 min ago"),
            (3_599_999, "59m", "59 min ago"),
            (3_600_000, "1h", "1 h ago"),
            (86_399_999, "23h", "23 h ago"),
            (86_400_000, "1d", "1 d ago"),
            (-5_000, "now", "just now"),
            (i64::MAX, "106751991167d", "106751991167 d ago"),
        ];
        for (age, terse, words) in cases {
            assert_eq!(ago(now, now - age, AgoStyle::Terse), terse, "age {age}");
            assert_eq!(ago(now, now - age, AgoStyle::Words), words, "age {age}");
        }
    }
}
