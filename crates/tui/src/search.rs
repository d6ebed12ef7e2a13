//! Search in the transcript pane: the query (a regex when it compiles within a size limit,
//! otherwise the text as typed), its hits over the loaded window, computed once per query
//! change or load (never per frame), and which hit is current (`n`/`N`).

use regex::{Regex, RegexBuilder};

use super::state::TranscriptLine;

/// The compiled program's size limit: a pattern needing more (`\w{1000}{1000}`) is refused
/// with a message instead of taking seconds or megabytes to build.
const REGEX_SIZE_LIMIT: usize = 4 << 20;
/// The lazy DFA's cache per search: matching stays linear whatever the pattern.
const DFA_SIZE_LIMIT: usize = 2 << 20;
/// The longest query kept (a paste of a whole file into the box is cut here).
pub const QUERY_MAX: usize = 1_000;
/// The most hits kept: the counter says when there are more (`500+`).
pub const HITS_MAX: usize = 100_000;

/// One match: the line's seq and its byte range in that line's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub seq: i64,
    pub start: usize,
    pub end: usize,
}

/// The search state of the transcript pane.
#[derive(Debug, Clone, Default)]
pub struct Search {
    pub query: String,
    /// The compiled query (the text as typed is compiled escaped); `None`: nothing to find.
    matcher: Option<Regex>,
    /// Said under the box: why the query is matched literally, or refused.
    pub note: Option<String>,
    /// Hits in the loaded window, in transcript order.
    pub hits: Vec<Hit>,
    /// More hits than `HITS_MAX` exist.
    pub capped: bool,
    /// The current hit (an index into `hits`).
    pub current: Option<usize>,
}

impl Search {
    /// Whether a search is in effect (its hits are highlighted).
    pub fn active(&self) -> bool {
        !self.query.is_empty()
    }

    /// The query changed: compile it again.
    pub fn set_query(&mut self, query: &str) {
        let mut q = query.to_string();
        if q.len() > QUERY_MAX {
            let mut cut = QUERY_MAX;
            while !q.is_char_boundary(cut) {
                cut -= 1;
            }
            q.truncate(cut);
        }
        self.query = q;
        self.note = None;
        self.matcher = None;
        if self.query.is_empty() {
            return;
        }
        // Smart case: all lowercase searches ignore case, a capital asks for it exactly.
        let fold = !self.query.chars().any(char::is_uppercase);
        let build = |pattern: &str| {
            RegexBuilder::new(pattern)
                .case_insensitive(fold)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(DFA_SIZE_LIMIT)
                .build()
        };
        match build(&self.query) {
            Ok(re) => self.matcher = Some(re),
            Err(regex::Error::CompiledTooBig(_)) => {
                self.note =
                    Some("pattern too large to search quickly: refused (simplify it)".to_string());
            }
            Err(_) => {
                self.note = Some("not a valid regex: matching the text as typed".to_string());
                // The same engine on the escaped text: linear, and case folding that keeps
                // byte offsets of the original.
                self.matcher = build(&regex::escape(&self.query)).ok();
            }
        }
    }

    /// Find every hit in `lines` (those `shown` accepts). The current hit stays on the same
    /// line when it is still there, else moves to the nearest one after it.
    pub fn rescan(&mut self, lines: &[TranscriptLine], shown: impl Fn(&TranscriptLine) -> bool) {
        let keep = self.current_hit();
        self.hits.clear();
        self.capped = false;
        let Some(m) = &self.matcher else {
            self.current = None;
            return;
        };
        'lines: for l in lines.iter().filter(|l| shown(l)) {
            for (start, end) in find_all(m, &l.text) {
                if self.hits.len() == HITS_MAX {
                    self.capped = true;
                    break 'lines;
                }
                self.hits.push(Hit {
                    seq: l.seq,
                    start,
                    end,
                });
            }
        }
        self.current = match keep {
            _ if self.hits.is_empty() => None,
            Some(k) => Some(
                self.hits
                    .partition_point(|h| (h.seq, h.start) < (k.seq, k.start))
                    .min(self.hits.len() - 1),
            ),
            None => None,
        };
    }

    pub fn current_hit(&self) -> Option<Hit> {
        self.current.and_then(|i| self.hits.get(i).copied())
    }

    /// Make the newest hit current (where a new query starts: the view is usually at the end).
    pub fn to_last(&mut self) -> Option<Hit> {
        self.current = self.hits.len().checked_sub(1);
        self.current_hit()
    }

    /// The next (or previous) hit, wrapping around at either end.
    pub fn step(&mut self, forward: bool) -> Option<Hit> {
        let n = self.hits.len();
        if n == 0 {
            return None;
        }
        self.current = Some(match self.current {
            None if forward => 0,
            None => n - 1,
            Some(i) if forward => (i + 1) % n,
            Some(i) => (i + n - 1) % n,
        });
        self.current_hit()
    }

    /// Hits in line `seq`, with whether each is the current one.
    pub fn hits_in(&self, seq: i64) -> impl Iterator<Item = (Hit, bool)> + '_ {
        // Hits are in the order of the lines, which is time order: nearly always seq order
        // (a binary search), a scan where the two disagree.
        let from = self.hits.partition_point(|h| h.seq < seq);
        let from = if self.hits.get(from).is_some_and(|h| h.seq == seq) {
            from
        } else {
            self.hits
                .iter()
                .position(|h| h.seq == seq)
                .unwrap_or(self.hits.len())
        };
        let current = self.current;
        self.hits[from..]
            .iter()
            .enumerate()
            .take_while(move |(_, h)| h.seq == seq)
            .map(move |(i, h)| (*h, current == Some(from + i)))
    }

    /// `3/17`, `0/0`, `-/17` (no current hit), `3/100000+`.
    pub fn counter(&self) -> String {
        let total = format!("{}{}", self.hits.len(), if self.capped { "+" } else { "" });
        match self.current {
            Some(i) => format!("{}/{total}", i + 1),
            None => format!("-/{total}"),
        }
    }
}

/// Byte ranges of every non-empty match of `re` in `text`.
fn find_all<'a>(re: &'a Regex, text: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
    re.find_iter(text)
        .filter(|x| x.start() < x.end())
        .map(|x| (x.start(), x.end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: i64, text: &str) -> TranscriptLine {
        TranscriptLine {
            seq,
            role: "user",
            timestamp: 0,
            from: "owner".into(),
            text: text.into(),
        }
    }

    #[test]
    fn an_invalid_regex_is_matched_as_typed_with_a_note() {
        let mut s = Search::default();
        s.set_query("a(b");
        assert_eq!(
            s.note.as_deref(),
            Some("not a valid regex: matching the text as typed")
        );
        s.rescan(&[line(1, "xa(by"), line(2, "ab")], |_| true);
        assert_eq!(
            s.hits,
            vec![Hit {
                seq: 1,
                start: 1,
                end: 4
            }]
        );
    }

    #[test]
    fn a_huge_pattern_is_refused_not_slow() {
        let mut s = Search::default();
        s.set_query(r"\w{1000}{1000}");
        assert!(s.note.as_deref().is_some_and(|n| n.contains("refused")));
        s.rescan(&[line(1, "abc")], |_| true);
        assert!(s.hits.is_empty());
    }

    #[test]
    fn lowercase_ignores_case_and_a_capital_does_not() {
        let mut s = Search::default();
        s.set_query("error");
        s.rescan(&[line(1, "Error and ERROR and error")], |_| true);
        assert_eq!(s.hits.len(), 3);
        s.set_query("Error");
        s.rescan(&[line(1, "Error and ERROR and error")], |_| true);
        assert_eq!(s.hits.len(), 1);
    }

    #[test]
    fn a_folded_literal_keeps_byte_ranges_of_the_original() {
        let mut s = Search::default();
        s.set_query("[ab");
        s.rescan(&[line(1, "İx [AB")], |_| true);
        assert_eq!(
            s.hits,
            vec![Hit {
                seq: 1,
                start: 4,
                end: 7
            }]
        );
    }
}
