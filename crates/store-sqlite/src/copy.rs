//! The SQLite store's side of `store copy` (`switchboard_store::copy::CopyStore`): one
//! connection of its own, pages read with the shared SQL, each session loaded in one
//! transaction (a copy killed inside it leaves nothing of that session).

use std::path::{Path, PathBuf};

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OptionalExtension};

use switchboard_store::StoreError;
use switchboard_store::copy::{
    Cell, CopyStore, Dialect, Loaded, OwnedFeed, PAGE_BYTES, Row, Scope, Table, row_bytes,
};

use crate::error::StorageError;

/// A state folder's database opened for `store copy`.
pub struct SqliteCopy {
    conn: Connection,
    dir: PathBuf,
}

impl SqliteCopy {
    /// Open the database of `state_dir`, migrated to this build's schema (a newer one is
    /// refused). `create`: make the folder and database when missing (a destination); else a
    /// missing one is an error naming it (a source).
    pub fn open(state_dir: &Path, create: bool) -> Result<SqliteCopy, StorageError> {
        let path = state_dir.join(crate::DB_FILE);
        if !create && !path.is_file() {
            return Err(StorageError::Open {
                path,
                message: "no database here (is this a state folder?)".into(),
            });
        }
        // The store's own open migrates (and refuses a newer schema); then a plain
        // connection of the copy's own.
        drop(crate::Storage::open(state_dir)?);
        Ok(SqliteCopy {
            conn: crate::open_conn(&path)?,
            dir: state_dir.to_path_buf(),
        })
    }

    fn rows(&self, sql: &str, params: &[Cell], table: Table) -> Result<Vec<Row>, StorageError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(value)))?;
        let (mut out, mut bytes) = (Vec::new(), 0);
        while bytes < PAGE_BYTES
            && let Some(r) = rows.next()?
        {
            let mut row = Vec::with_capacity(width);
            for i in 0..width {
                row.push(cell(r.get_ref(i)?, table, i)?);
            }
            bytes += row_bytes(&row);
            out.push(row);
        }
        Ok(out)
    }

    fn load(&mut self, session: &Row, owned: &mut OwnedFeed<'_>) -> Result<Loaded, StoreError> {
        let tx = self.conn.transaction().map_err(StorageError::from)?;
        let this = Self::within(&tx);
        if this.insert(Table::Sessions, std::slice::from_ref(session))? == 0 {
            let key = session.first().map(value);
            let exists: Option<i64> = tx
                .query_row("SELECT 1 FROM sessions WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(StorageError::from)?;
            return Ok(if exists.is_some() {
                Loaded::KeyExists
            } else {
                Loaded::IdTaken
            });
        }
        while let Some((table, rows)) = owned()? {
            this.insert(table, &rows)?;
        }
        tx.commit().map_err(StorageError::from)?;
        Ok(Loaded::Committed)
    }

    /// The insert helpers over a transaction's connection.
    fn within<'c>(conn: &'c Connection) -> Within<'c> {
        Within(conn)
    }
}

/// `SqliteCopy::insert` on a borrowed connection (inside a transaction).
struct Within<'c>(&'c Connection);

impl Within<'_> {
    fn insert(&self, table: Table, rows: &[Row]) -> Result<usize, StorageError> {
        let mut changed = 0;
        for chunk in rows.chunks(table.rows_per_insert()) {
            let sql = table.insert(chunk.len(), Dialect::Sqlite);
            changed += self
                .0
                .prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(
                    chunk.iter().flatten().map(value),
                ))?;
        }
        Ok(changed)
    }
}

fn value(c: &Cell) -> Value {
    match c {
        Cell::Null => Value::Null,
        Cell::Int(n) => Value::Integer(*n),
        Cell::Text(s) => Value::Text(s.clone()),
    }
}

/// A stored value as a cell; what neither store's schema allows there is damage, named.
fn cell(v: ValueRef<'_>, table: Table, i: usize) -> Result<Cell, StorageError> {
    let column = table.columns().get(i).map(|c| c.name).unwrap_or("?");
    match v {
        ValueRef::Null => Ok(Cell::Null),
        ValueRef::Integer(n) => Ok(Cell::Int(n)),
        ValueRef::Text(t) => String::from_utf8(t.to_vec()).map(Cell::Text).map_err(|_| {
            StorageError::Corrupt(format!(
                "{}.{column} holds text that is not UTF-8",
                table.name()
            ))
        }),
        ValueRef::Real(_) | ValueRef::Blob(_) => Err(StorageError::Corrupt(format!(
            "{}.{column} holds a value of the wrong type",
            table.name()
        ))),
    }
}

impl CopyStore for SqliteCopy {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn store_id(&mut self) -> Result<String, StoreError> {
        let fresh = uuid::Uuid::new_v4().to_string();
        self.conn
            .execute(
                "INSERT INTO meta (name, value) VALUES ('store_id', ?1) ON CONFLICT DO NOTHING",
                [fresh],
            )
            .map_err(StorageError::from)?;
        Ok(self.meta("store_id")?.unwrap_or_default())
    }

    fn meta(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()
            .map_err(StorageError::from)?)
    }

    fn set_meta(&mut self, name: &str, value: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta (name, value) VALUES (?1, ?2)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                [name, value],
            )
            .map_err(StorageError::from)?;
        Ok(())
    }

    fn page(
        &mut self,
        table: Table,
        scope: &Scope,
        after: &[Cell],
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        let (sql, params) = table.select_page(scope, after, limit, Dialect::Sqlite);
        Ok(self.rows(&sql, &params, table)?)
    }

    fn count(&mut self, table: Table, scope: &Scope) -> Result<u64, StoreError> {
        let (sql, params) = table.select_count(scope, Dialect::Sqlite);
        let n: i64 = self
            .conn
            .query_row(
                &sql,
                rusqlite::params_from_iter(params.iter().map(value)),
                |r| r.get(0),
            )
            .map_err(StorageError::from)?;
        Ok(switchboard_store::check::to_count(n))
    }

    fn load_session(
        &mut self,
        session: &Row,
        owned: &mut OwnedFeed<'_>,
    ) -> Result<Loaded, StoreError> {
        self.load(session, owned)
    }

    fn load_rows(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(StorageError::from)?;
        Self::within(&tx).insert(table, rows)?;
        tx.commit().map_err(StorageError::from)?;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StoreError> {
        // AUTOINCREMENT's counter follows explicit ids by itself; nothing else is derived.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page stops at `PAGE_BYTES` whatever the limit asked: ten 1 MB lines come in pages
    /// of at most five, and every line arrives once.
    #[test]
    fn a_page_of_long_lines_stops_at_its_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = SqliteCopy::open(dir.path(), true).expect("open");
        let long = "x".repeat(1 << 20);
        for seq in 0..10 {
            store
                .conn
                .execute(
                    "INSERT INTO transcript (session_id, seq, entry_id, type, line)
                     VALUES ('s', ?1, 'e', 'message', ?2)",
                    rusqlite::params![seq, long],
                )
                .expect("insert");
        }
        let scope = Scope::Session {
            key: "k".into(),
            session_id: "s".into(),
        };
        let (mut after, mut seen) = (Vec::new(), 0);
        loop {
            let page = store
                .page(Table::Transcript, &scope, &after, 1000)
                .expect("page");
            let Some(last) = page.last() else { break };
            assert!(page.len() <= 5, "{} rows of 1 MB in one page", page.len());
            after = Table::Transcript.cursor(&scope, last);
            seen += page.len();
        }
        assert_eq!(seen, 10);
    }
}
