//! The copy itself: sessions one by one in key order, each with everything it owns in one
//! transaction of the destination (skipped when a previous run put it there, which is how an
//! interrupted copy resumes), then the shared rows and those of deleted sessions, page by
//! page, then the verification. Memory stays at a page (`PAGE_BYTES` of text, give or take
//! a row) whatever the size of the stores and of their rows.

use super::verify::{VerifyReport, verify};
use super::walk::Walk;
use super::{Cell, CopyStore, Loaded, Row, Scope, Table};
use crate::StoreError;

/// `meta` name under which a destination records the store id of its source: a rerun with
/// the same source resumes; another source is refused unless forced.
const COPIED_FROM: &str = "copied_from";

/// `meta` name of the key scheme the stored kinds were computed under (both stores).
const KIND_BASIS: &str = "kind_basis";

/// Sessions named in a report's lists at most (the rest are counted).
pub const NAMED: usize = 20;

/// How to copy.
#[derive(Default)]
pub struct CopyOptions<'a> {
    /// Copy into a destination that holds other data: sessions it has under the same key are
    /// kept as they are (and named), nothing there is deleted or overwritten.
    pub force: bool,
    /// Now (ms): which idempotency keys are still unexpired.
    pub now: i64,
    /// A test's hold: after this many sessions have committed, call the function inside the
    /// next session's transaction, after its first batch (a copy killed there).
    pub hold: Option<(u64, &'a dyn Fn())>,
}

/// Told after each session (done, total).
pub trait Progress {
    fn sessions(&mut self, done: u64, total: u64);
}

impl<F: FnMut(u64, u64)> Progress for F {
    fn sessions(&mut self, done: u64, total: u64) {
        self(done, total)
    }
}

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Sessions in the source.
    pub sessions: u64,
    /// Copied by this run.
    pub copied: u64,
    /// There already from an earlier run of this copy (resumed).
    pub resumed: u64,
    /// Under `force`: sessions the destination had of its own under a source's key, kept.
    pub kept: u64,
    pub kept_keys: Vec<String>,
    /// Sessions not copied because another key there has their session id.
    pub id_taken: u64,
    pub id_taken_keys: Vec<String>,
    pub verify: VerifyReport,
}

impl CopyReport {
    /// The copy is whole and verified.
    pub fn ok(&self) -> bool {
        self.id_taken == 0 && self.verify.ok()
    }
}

/// Why a copy did not start.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "{location} is the source itself (same store id {id}: the same store under another \
         name, or a file copy of it): copying a store onto itself would change nothing; name \
         another destination"
    )]
    SameStore { location: String, id: String },
    #[error(
        "{location} already holds other data ({summary}) and is not an earlier copy of this \
         source; pass --force to copy into it anyway (its sessions are kept as they are, never \
         overwritten or deleted; a session of the source under a key it has is not copied and \
         the verification names it), or name an empty destination"
    )]
    Foreign { location: String, summary: String },
}

/// Copy everything from `src` to `dst`, then verify; `progress` is told after each session.
pub fn copy(
    src: &mut dyn CopyStore,
    dst: &mut dyn CopyStore,
    options: &CopyOptions<'_>,
    progress: &mut dyn Progress,
) -> Result<CopyReport, CopyError> {
    let source_id = src.store_id()?;
    if dst.store_id()? == source_id {
        return Err(CopyError::SameStore {
            location: dst.location(),
            id: source_id,
        });
    }
    let resuming = dst.meta(COPIED_FROM)?.as_deref() == Some(source_id.as_str());
    if !resuming {
        let held = holdings(dst, options.now)?;
        if !held.is_empty() && !options.force {
            return Err(CopyError::Foreign {
                location: dst.location(),
                summary: held.join(", "),
            });
        }
        dst.set_meta(COPIED_FROM, &source_id)?;
    }
    let kept_scope = Scope::Kept { now: options.now };
    let mut report = CopyReport {
        sessions: src.count(Table::Sessions, &kept_scope)?,
        ..CopyReport::default()
    };
    let mut done = 0u64;
    let mut sessions = Walk::new(Table::Sessions, kept_scope.clone());
    while let Some(page) = sessions.next(src)? {
        for session in &page {
            let hold = options
                .hold
                .filter(|(n, _)| *n == report.copied)
                .map(|(_, f)| f);
            let outcome = load_one(src, dst, session, hold)?;
            let key = text_at(session, 0);
            match outcome {
                Loaded::Committed => report.copied += 1,
                Loaded::KeyExists if resuming => report.resumed += 1,
                Loaded::KeyExists => {
                    report.kept += 1;
                    name(&mut report.kept_keys, key);
                }
                Loaded::IdTaken => {
                    report.id_taken += 1;
                    name(&mut report.id_taken_keys, key);
                }
            }
            done += 1;
            progress.sessions(done, report.sessions);
        }
    }
    for (table, scope) in [
        (Table::Flows, kept_scope.clone()),
        (Table::IdempotencyKeys, kept_scope.clone()),
        (Table::Pairings, kept_scope.clone()),
        (Table::Runs, Scope::Orphans),
        (Table::Outbox, Scope::Orphans),
        (Table::Spawns, Scope::Orphans),
        (Table::ImportMarks, Scope::Orphans),
    ] {
        let mut walk = Walk::new(table, scope);
        while let Some(rows) = walk.next(src)? {
            dst.load_rows(table, &rows)?;
        }
    }
    // The key scheme the kinds were computed under goes with them: the destination's first
    // open recomputes them only if its config's scheme differs (as the source's would).
    if let Some(basis) = src.meta(KIND_BASIS)?
        && (!options.force || dst.meta(KIND_BASIS)?.is_none())
    {
        dst.set_meta(KIND_BASIS, &basis)?;
    }
    dst.finish()?;
    report.verify = verify(src, dst, options.now, options.force)?;
    Ok(report)
}

/// What a destination holds already, in words (empty: nothing).
fn holdings(dst: &mut dyn CopyStore, now: i64) -> Result<Vec<String>, StoreError> {
    let mut held = Vec::new();
    for table in Table::ALL {
        let n = dst.count(table, &Scope::Kept { now })?;
        if n > 0 {
            held.push(format!("{n} {}", table.words()));
        }
    }
    Ok(held)
}

/// One session and what it owns, pulled from `src` batch by batch while `dst` holds its
/// transaction open.
fn load_one(
    src: &mut dyn CopyStore,
    dst: &mut dyn CopyStore,
    session: &Row,
    hold: Option<&dyn Fn()>,
) -> Result<Loaded, StoreError> {
    let scope = Scope::Session {
        key: text_at(session, 0).to_string(),
        session_id: text_at(session, 1).to_string(),
    };
    const OWNED: [Table; 5] = [
        Table::Transcript,
        Table::Runs,
        Table::Outbox,
        Table::Spawns,
        Table::ImportMarks,
    ];
    let mut next = 1;
    let mut walk = Walk::new(OWNED[0], scope.clone());
    let mut batches = 0u64;
    let mut feed = || -> Result<Option<(Table, Vec<Row>)>, StoreError> {
        if batches == 1
            && let Some(hold) = hold
        {
            hold();
        }
        loop {
            if let Some(rows) = walk.next(src)? {
                batches += 1;
                return Ok(Some((walk.table(), rows)));
            }
            let Some(&table) = OWNED.get(next) else {
                return Ok(None);
            };
            walk = Walk::new(table, scope.clone());
            next += 1;
        }
    };
    dst.load_session(session, &mut feed)
}

/// The text in column `i` ("" when it is not text: the stores' schemas make it text).
pub(super) fn text_at(row: &Row, i: usize) -> &str {
    row.get(i).and_then(Cell::as_str).unwrap_or_default()
}

fn name(list: &mut Vec<String>, key: &str) {
    if list.len() < NAMED {
        list.push(key.to_string());
    }
}
