//! Walking a table's rows within a scope a page at a time, in the table's order: the one loop
//! the copy, its owned-row feed and the verification all read through. Pages ask for as many
//! rows as fit in `PAGE_BYTES` from the sizes seen so far (the store stops at that size too).

use super::{Cell, CopyStore, PAGE_BYTES, Row, Scope, Table, row_bytes};
use crate::StoreError;

/// Rows per page at most (a page of lines is one multi-row insert).
const ROW_PAGE: usize = 1000;

/// The first page of a walk asks for a few rows, to learn their size.
const FIRST_PAGE: usize = 16;

/// Where a walk is: past which row, and how many to ask for next.
pub(super) struct Walk {
    table: Table,
    scope: Scope,
    after: Vec<Cell>,
    limit: usize,
}

impl Walk {
    pub(super) fn new(table: Table, scope: Scope) -> Walk {
        Walk {
            table,
            scope,
            after: Vec::new(),
            limit: FIRST_PAGE,
        }
    }

    pub(super) fn table(&self) -> Table {
        self.table
    }

    /// The next page from `store` (`None`: the walk is over).
    pub(super) fn next(
        &mut self,
        store: &mut dyn CopyStore,
    ) -> Result<Option<Vec<Row>>, StoreError> {
        let rows = store.page(self.table, &self.scope, &self.after, self.limit)?;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        self.after = self.table.cursor(&self.scope, last);
        let bytes: usize = rows.iter().map(|r| row_bytes(r)).sum();
        let per_row = (bytes / rows.len()).max(1);
        self.limit = (PAGE_BYTES / per_row).clamp(1, ROW_PAGE);
        Ok(Some(rows))
    }
}
