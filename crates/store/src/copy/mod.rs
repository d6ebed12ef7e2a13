//! `switchboard store copy`: moving everything the engine keeps from one store to another
//! (SQLite to PostgreSQL and back), resumable and verified (docs/ARCHITECTURE.md, "Moving
//! between stores").
//!
//! Both stores hold the same tables with the same columns (the PostgreSQL schema mirrors
//! SQLite's), so a row moves as plain cells (`Cell`) under a table's column list (`Table`).
//! A store takes part through `CopyStore`, a small trait of its own beside `Store`: pages of
//! rows after a cursor, one session loaded with everything it owns in one transaction, and a
//! page of shared rows loaded in one transaction. The engine never uses it, so `Store` stays
//! the engine's operations only. The order of work, resuming and verifying live here, once.

mod run;
mod tables;
mod verify;
mod walk;

pub use run::{CopyError, CopyOptions, CopyReport, NAMED, Progress, copy};
pub use tables::{Column, ColumnType, Dialect, Scope, Table};
pub use verify::{CountRow, Mismatch, VerifyReport, session_digest, verify};

use crate::StoreError;

/// One value of a row, as both stores hold it: every column is an integer or text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
}

impl Cell {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Cell::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// A row of `Table`, its cells in `Table::columns` order.
pub type Row = Vec<Cell>;

/// About how much text a page holds at most: a store's `page` stops taking rows once they
/// hold this much (the row that crosses it included), so memory stays bounded whatever the
/// rows hold (a 30 KB entry, a megabyte line).
pub const PAGE_BYTES: usize = 4 << 20;

/// What a row weighs against `PAGE_BYTES`.
pub fn row_bytes(row: &[Cell]) -> usize {
    row.iter()
        .map(|c| match c {
            Cell::Text(s) => s.len() + 8,
            _ => 8,
        })
        .sum()
}

/// What a session's load found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// The session and everything it owns committed.
    Committed,
    /// A session with this key is there already: nothing written (a previous run copied it,
    /// or under `--force` the destination had its own).
    KeyExists,
    /// Another key there has this session id: nothing written.
    IdTaken,
}

/// The next batch of rows a session owns (`Ok(None)`: no more), pulled by `load_session`
/// while its transaction is open, so a 1M-line transcript is never held whole.
pub type OwnedFeed<'a> = dyn FnMut() -> Result<Option<(Table, Vec<Row>)>, StoreError> + 'a;

/// A store as `store copy` reads and writes it. Blocking calls on one connection of its own
/// (the copy runs on a thread of its own); rows as `Table` describes them.
pub trait CopyStore: Send {
    /// Where the data lives, as a user names it (a folder, a URL without its password).
    fn location(&self) -> String;

    /// This store's own id (`meta.store_id`), made on first ask: tells a store from itself
    /// under another name.
    fn store_id(&mut self) -> Result<String, StoreError>;

    /// A `meta` value.
    fn meta(&mut self, name: &str) -> Result<Option<String>, StoreError>;

    fn set_meta(&mut self, name: &str, value: &str) -> Result<(), StoreError>;

    /// At most `limit` rows of `table` within `scope`, in the table's order, after `after`
    /// (the order columns of the last row taken; empty: from the start); fewer once they
    /// hold `PAGE_BYTES` (rows are read one by one, never all `limit` at once).
    fn page(
        &mut self,
        table: Table,
        scope: &Scope,
        after: &[Cell],
        limit: usize,
    ) -> Result<Vec<Row>, StoreError>;

    /// How many rows of `table` there are within `scope`.
    fn count(&mut self, table: Table, scope: &Scope) -> Result<u64, StoreError>;

    /// In one transaction: the session row, unless its key or session id is there already,
    /// then every batch `owned` gives (rows already there kept as they are). Nothing of it
    /// is visible until all of it is.
    fn load_session(
        &mut self,
        session: &Row,
        owned: &mut OwnedFeed<'_>,
    ) -> Result<Loaded, StoreError>;

    /// Rows of a shared table in one transaction, rows already there kept as they are.
    fn load_rows(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError>;

    /// After the last load: whatever the store keeps beside the rows catches up (a sequence
    /// past the copied ids).
    fn finish(&mut self) -> Result<(), StoreError>;
}
