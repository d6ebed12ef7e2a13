//! The verification after a copy (and on its own): rows counted per table on both sides, and
//! every session compared: its row column by column (the revision aside, which each store
//! numbers itself) and a SHA-256 over its entry and every transcript line in seq order. Both
//! stores are walked in key order side by side, a page at a time.

use sha2::{Digest, Sha256};

use super::run::{NAMED, text_at};
use super::walk::Walk;
use super::{Cell, CopyStore, Row, Scope, Table};
use crate::StoreError;

/// Rows of one table on each side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountRow {
    pub table: Table,
    pub source: u64,
    pub destination: u64,
    /// Equal (under `force`: the destination holds at least the source's).
    pub agrees: bool,
}

/// A session that differs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub key: String,
    pub what: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub counts: Vec<CountRow>,
    /// Whether the counts agree (equal; under `force`, the destination at least the source).
    pub counts_ok: bool,
    pub sessions_checked: u64,
    /// The first `NAMED` sessions that differ.
    pub mismatches: Vec<Mismatch>,
    pub mismatches_total: u64,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.counts_ok && self.mismatches_total == 0
    }

    fn differ(&mut self, key: &str, what: String) {
        self.mismatches_total += 1;
        if self.mismatches.len() < NAMED {
            self.mismatches.push(Mismatch {
                key: key.to_string(),
                what,
            });
        }
    }
}

/// Compare `src` and `dst` (see the module's comment). Under `force` the destination may
/// hold more (sessions of its own, more rows).
pub fn verify(
    src: &mut dyn CopyStore,
    dst: &mut dyn CopyStore,
    now: i64,
    force: bool,
) -> Result<VerifyReport, StoreError> {
    let kept = Scope::Kept { now };
    let mut report = VerifyReport {
        counts_ok: true,
        ..VerifyReport::default()
    };
    for table in Table::ALL {
        let (source, destination) = (src.count(table, &kept)?, dst.count(table, &kept)?);
        let fine = if force {
            destination >= source
        } else {
            destination == source
        };
        report.counts_ok &= fine;
        report.counts.push(CountRow {
            table,
            source,
            destination,
            agrees: fine,
        });
    }
    let mut left = Pager::new(&kept);
    let mut right = Pager::new(&kept);
    loop {
        let (a, b) = (left.peek(src)?, right.peek(dst)?);
        match (a, b) {
            (None, None) => break,
            (Some(a), b) if b.as_ref().is_none_or(|b| text_at(&a, 0) < text_at(b, 0)) => {
                report.differ(text_at(&a, 0), "missing from the destination".into());
                report.sessions_checked += 1;
                left.next();
            }
            (a, Some(b)) if a.as_ref().is_none_or(|a| text_at(&b, 0) < text_at(a, 0)) => {
                if !force {
                    report.differ(
                        text_at(&b, 0),
                        "in the destination only (not in the source)".into(),
                    );
                }
                right.next();
            }
            (Some(a), Some(b)) => {
                report.sessions_checked += 1;
                if let Some(what) = compare(src, dst, &a, &b)? {
                    report.differ(text_at(&a, 0), what);
                }
                left.next();
                right.next();
            }
            // Unreachable: the arms above cover every order of two keys.
            (_, _) => break,
        }
    }
    Ok(report)
}

/// How two sessions under one key differ (`None`: they do not).
fn compare(
    src: &mut dyn CopyStore,
    dst: &mut dyn CopyStore,
    a: &Row,
    b: &Row,
) -> Result<Option<String>, StoreError> {
    let columns: Vec<&str> = Table::Sessions
        .columns()
        .iter()
        .zip(a.iter().zip(b.iter()))
        .filter(|(_, (x, y))| x != y)
        .map(|(c, _)| c.name)
        .collect();
    if !columns.is_empty() {
        return Ok(Some(format!("{} differ", columns.join(", "))));
    }
    let (sa, la) = session_digest(src, a)?;
    let (sb, lb) = session_digest(dst, b)?;
    Ok(if la != lb {
        Some(format!(
            "transcript: {la} lines in the source, {lb} in the destination"
        ))
    } else if sa != sb {
        Some(format!(
            "checksum differs: {} in the source, {} in the destination (same {la} lines)",
            &sa[..12],
            &sb[..12]
        ))
    } else {
        None
    })
}

/// A session's checksum and line count: SHA-256 (hex) over its entry's text, then for every
/// transcript line in seq order its seq and its text as stored, each framed by a newline
/// and a tab so that no two different transcripts hash alike.
pub fn session_digest(
    store: &mut dyn CopyStore,
    session: &Row,
) -> Result<(String, u64), StoreError> {
    let scope = Scope::Session {
        key: text_at(session, 0).to_string(),
        session_id: text_at(session, 1).to_string(),
    };
    let entry_at = Table::Sessions
        .columns()
        .iter()
        .position(|c| c.name == "entry")
        .unwrap_or(0);
    let mut hash = Sha256::new();
    hash.update(text_at(session, entry_at).as_bytes());
    let mut lines = 0u64;
    let mut walk = Walk::new(Table::Transcript, scope);
    while let Some(page) = walk.next(store)? {
        for line in &page {
            let seq = line.get(1).and_then(Cell::as_int).unwrap_or(-1);
            hash.update(format!("\n{seq}\t").as_bytes());
            hash.update(text_at(line, 5).as_bytes());
            lines += 1;
        }
    }
    let hex = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, lines))
}

/// One side's sessions in key order, a page at a time.
struct Pager {
    page: std::collections::VecDeque<Row>,
    walk: Walk,
    done: bool,
}

impl Pager {
    fn new(scope: &Scope) -> Pager {
        Pager {
            page: std::collections::VecDeque::new(),
            walk: Walk::new(Table::Sessions, scope.clone()),
            done: false,
        }
    }

    fn peek(&mut self, store: &mut dyn CopyStore) -> Result<Option<Row>, StoreError> {
        if self.page.is_empty() && !self.done {
            match self.walk.next(store)? {
                Some(rows) => self.page.extend(rows),
                None => self.done = true,
            }
        }
        Ok(self.page.front().cloned())
    }

    fn next(&mut self) {
        self.page.pop_front();
    }
}
