//! The PostgreSQL store's side of `store copy` (`switchboard_store::copy::CopyStore`): one
//! pooled connection kept for the copy, each call run on the store's runtime and waited for
//! on the copy's thread, each session loaded between one BEGIN and COMMIT (a copy killed
//! inside it closes the connection, and the server rolls it back).

use futures_util::StreamExt;
use tokio_postgres::types::ToSql;

use switchboard_store::StoreError;
use switchboard_store::copy::{
    Cell, ColumnType, CopyStore, Dialect, Loaded, OwnedFeed, PAGE_BYTES, Row, Scope, Table,
    row_bytes,
};

use crate::error::PgError;
use crate::sessions::{exec, rows};
use crate::text::pg;
use crate::{Conn, PgStore};

/// A PostgreSQL database opened for `store copy`.
pub struct PgCopy {
    store: PgStore,
    conn: Conn,
}

type Param = Box<dyn ToSql + Sync + Send>;

impl PgCopy {
    /// Open the database at `url`, migrated to this build's schema (a newer one is refused).
    pub fn open(url: &str) -> Result<PgCopy, StoreError> {
        let store = PgStore::open(url)?;
        let (pool, at) = (store.inner.pool.clone(), store.inner.at.clone());
        let conn = store.block(async move {
            let c = pool.get().await.map_err(|e| PgError::from_pool(&at, e))?;
            Ok(std::sync::Arc::new(c))
        })?;
        Ok(PgCopy { store, conn })
    }

    /// Run `op` on the copy's connection and wait for it here.
    fn on_conn<R, F, Fut>(&self, op: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<R, PgError>> + Send + 'static,
    {
        let c = self.conn.clone();
        self.store.block(async move { op(c).await })
    }

    /// A count (one bigint) of `sql`.
    fn count_of(&self, sql: String, params: Vec<Param>) -> Result<u64, StoreError> {
        self.on_conn(move |c| async move {
            let refs: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            let n: i64 = match rows(&c, &sql, &refs).await?.first() {
                Some(r) => r.try_get(0)?,
                None => 0,
            };
            Ok(switchboard_store::check::to_count(n))
        })
    }

    /// The rows of `sql` as `table`'s, read one by one until they hold `PAGE_BYTES`.
    fn page_of(
        &self,
        sql: String,
        params: Vec<Param>,
        table: Table,
    ) -> Result<Vec<Row>, StoreError> {
        self.on_conn(move |c| async move {
            let stmt = c.prepare_cached(&sql).await?;
            let stream = c
                .query_raw(
                    &stmt,
                    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)),
                )
                .await?;
            let mut stream = std::pin::pin!(stream);
            let (mut out, mut bytes) = (Vec::new(), 0);
            while bytes < PAGE_BYTES
                && let Some(r) = stream.next().await
            {
                let r = r?;
                let row = table
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(i, col)| {
                        Ok(match col.ty {
                            ColumnType::Int => r
                                .try_get::<_, Option<i64>>(i)?
                                .map_or(Cell::Null, Cell::Int),
                            ColumnType::Text => r
                                .try_get::<_, Option<String>>(i)?
                                .map_or(Cell::Null, Cell::Text),
                        })
                    })
                    .collect::<Result<Row, PgError>>()?;
                bytes += row_bytes(&row);
                out.push(row);
            }
            Ok(out)
        })
    }

    fn batch(&self, sql: &'static str) -> Result<(), StoreError> {
        self.on_conn(move |c| async move { Ok(c.batch_execute(sql).await?) })
    }

    /// `rows` inserted (rows there already kept); how many went in.
    fn insert(&self, table: Table, rows: &[Row]) -> Result<u64, StoreError> {
        let mut changed = 0;
        for chunk in rows.chunks(table.rows_per_insert()) {
            let sql = table.insert(chunk.len(), Dialect::Postgres);
            let params: Vec<Param> = chunk
                .iter()
                .flat_map(|row| row.iter().zip(table.columns()))
                .map(|(cell, col)| typed(cell, col.ty))
                .collect();
            changed += self.on_conn(move |c| async move {
                let refs: Vec<&(dyn ToSql + Sync)> = params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                    .collect();
                exec(&c, &sql, &refs).await
            })?;
        }
        Ok(changed)
    }

    fn load(&mut self, session: &Row, owned: &mut OwnedFeed<'_>) -> Result<Loaded, StoreError> {
        if self.insert(Table::Sessions, std::slice::from_ref(session))? == 0 {
            let key = session
                .first()
                .and_then(Cell::as_str)
                .unwrap_or_default()
                .to_string();
            let exists = self.count_of(
                "SELECT count(*) FROM sessions WHERE key = $1".into(),
                vec![Box::new(key)],
            )? > 0;
            return Ok(if exists {
                Loaded::KeyExists
            } else {
                Loaded::IdTaken
            });
        }
        while let Some((table, rows)) = owned()? {
            self.insert(table, &rows)?;
        }
        Ok(Loaded::Committed)
    }

    /// `op` between BEGIN and COMMIT; ROLLBACK when it fails.
    fn transaction<R>(
        &mut self,
        op: impl FnOnce(&mut Self) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.batch("BEGIN")?;
        match op(self) {
            Ok(r) => {
                self.batch("COMMIT")?;
                Ok(r)
            }
            Err(e) => {
                // A broken connection fails this too; the server rolls back on its own then.
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// A cell bound as its column's type; text as PostgreSQL can hold it (`text::pg`: NUL, which
/// only free text outside JSON can hold, becomes U+FFFD).
fn typed(cell: &Cell, ty: ColumnType) -> Param {
    match (cell, ty) {
        (Cell::Int(n), _) => Box::new(*n),
        (Cell::Text(s), _) => Box::new(pg(s).into_owned()),
        (Cell::Null, ColumnType::Int) => Box::new(None::<i64>),
        (Cell::Null, ColumnType::Text) => Box::new(None::<String>),
    }
}

/// Cells bound by their own kind (a page's scope and cursor).
fn loose(cells: Vec<Cell>) -> Vec<Param> {
    cells
        .into_iter()
        .map(|c| -> Param {
            match c {
                Cell::Int(n) => Box::new(n),
                Cell::Text(s) => Box::new(pg(&s).into_owned()),
                Cell::Null => Box::new(None::<String>),
            }
        })
        .collect()
}

impl CopyStore for PgCopy {
    fn location(&self) -> String {
        self.store.inner.at.clone()
    }

    fn store_id(&mut self) -> Result<String, StoreError> {
        let fresh = uuid::Uuid::new_v4().to_string();
        self.on_conn(move |c| async move {
            exec(
                &c,
                "INSERT INTO meta (name, value) VALUES ('store_id', $1) ON CONFLICT DO NOTHING",
                &[&fresh],
            )
            .await
        })?;
        Ok(self.meta("store_id")?.unwrap_or_default())
    }

    fn meta(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_string();
        self.on_conn(move |c| async move {
            let found = rows(&c, "SELECT value FROM meta WHERE name = $1", &[&name]).await?;
            Ok(match found.first() {
                Some(r) => Some(r.try_get(0)?),
                None => None,
            })
        })
    }

    fn set_meta(&mut self, name: &str, value: &str) -> Result<(), StoreError> {
        let (name, value) = (name.to_string(), value.to_string());
        self.on_conn(move |c| async move {
            exec(
                &c,
                "INSERT INTO meta (name, value) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                &[&name, &value],
            )
            .await
        })?;
        Ok(())
    }

    fn page(
        &mut self,
        table: Table,
        scope: &Scope,
        after: &[Cell],
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        let (sql, params) = table.select_page(scope, after, limit, Dialect::Postgres);
        self.page_of(sql, loose(params), table)
    }

    fn count(&mut self, table: Table, scope: &Scope) -> Result<u64, StoreError> {
        let (sql, params) = table.select_count(scope, Dialect::Postgres);
        self.count_of(sql, loose(params))
    }

    fn load_session(
        &mut self,
        session: &Row,
        owned: &mut OwnedFeed<'_>,
    ) -> Result<Loaded, StoreError> {
        self.transaction(|this| this.load(session, owned))
    }

    fn load_rows(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        self.transaction(|this| this.insert(table, rows).map(|_| ()))
    }

    fn finish(&mut self) -> Result<(), StoreError> {
        // Outbox ids came with their rows: the next one the engine takes must follow them.
        self.batch(
            "SELECT setval(pg_get_serial_sequence('outbox', 'id'),
                           coalesce((SELECT max(id) FROM outbox), 0) + 1, false)",
        )
    }
}
