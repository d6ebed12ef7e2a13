//! The copy itself: sessions one by one in key order, each with everything it owns in one
//! transaction of the destination (skipped when a previous run put it there, which is how an
//! interrupted copy resumes), then the shared rows and those of deleted sessions, page by
//! page, then the verification. Memory stays at a page (`PAGE_BYTES` of text, give or take
//! a row) whatever the size of the stores and of their rows.

use super::verify::{VerifyReport, verify};
use super::{Cell, CopyStore, Loaded, PAGE_BYTES, Row, Scope, Table, row_bytes};
use crate::StoreError;

/// `meta` name under which a destination records the store id of its source: a rerun with
/// the same source resumes; another source is refused unless forced.
const COPIED_FROM: &str = "copied_from";

/// `meta` name of the key scheme the stored kinds were computed under (both stores).
const KIND_BASIS: &str = "kind_basis";

/// Rows per page at most (a page of lines is one multi-row insert).
const ROW_PAGE: usize = 1000;

/// How many rows the next page asks for: `ROW_PAGE`, fewer when the rows so far were long.
/// The first page of a walk asks for a few, to learn their size.
#[derive(Debug, Clone, Copy)]
pub(super) struct PageSize(usize);

impl Default for PageSize {
    fn default() -> PageSize {
        PageSize(16)
    }
}

impl PageSize {
    pub(super) fn limit(self) -> usize {
        self.0
    }

    /// Learn from the page just read.
    pub(super) fn after(&mut self, rows: &[Row]) {
        let bytes: usize = rows.iter().map(|r| row_bytes(r)).sum();
        let per_row = (bytes / rows.len().max(1)).max(1);
        self.0 = (PAGE_BYTES / per_row).clamp(1, ROW_PAGE);
    }
}

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
    let mut after: Vec<Cell> = Vec::new();
    let mut done = 0u64;
    let mut size = PageSize::default();
    loop {
        let page = src.page(Table::Sessions, &kept_scope, &after, size.limit())?;
        size.after(&page);
        let Some(last) = page.last() else { break };
        after = Table::Sessions.cursor(&kept_scope, last);
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
        (Table::Runs, Scope::Orphans),
        (Table::Outbox, Scope::Orphans),
        (Table::Spawns, Scope::Orphans),
        (Table::ImportMarks, Scope::Orphans),
    ] {
        let mut after = Vec::new();
        let mut size = PageSize::default();
        loop {
            let rows = src.page(table, &scope, &after, size.limit())?;
            size.after(&rows);
            let Some(last) = rows.last() else { break };
            after = table.cursor(&scope, last);
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
    let mut table = 0;
    let mut after: Vec<Cell> = Vec::new();
    let mut size = PageSize::default();
    let mut batches = 0u64;
    let mut feed = || -> Result<Option<(Table, Vec<Row>)>, StoreError> {
        if batches == 1
            && let Some(hold) = hold
        {
            hold();
        }
        while let Some(&t) = OWNED.get(table) {
            let rows = src.page(t, &scope, &after, size.limit())?;
            size.after(&rows);
            match rows.last() {
                Some(last) => {
                    after = t.cursor(&scope, last);
                    batches += 1;
                    return Ok(Some((t, rows)));
                }
                None => {
                    table += 1;
                    after.clear();
                }
            }
        }
        Ok(None)
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
