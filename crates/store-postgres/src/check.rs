//! `switchboard store check` on PostgreSQL: the checks every store answers
//! (`switchboard_store::check`) run on the database, with the same report as SQLite's. The
//! pages themselves are the server's to check (amcheck, a `pg_dump` that reads every row).

use switchboard_store::StoreError;
use switchboard_store::check::{self as common, CheckReport, CountKey, Integrity, to_count};

use crate::PgStore;
use crate::error::PgError;
use crate::sessions::rows;

/// What `integrity` says on PostgreSQL.
const NOT_CHECKED: &str = "not checked here: PostgreSQL checks its own pages (pg_amcheck, or a \
     pg_dump that reads every row)";

impl PgStore {
    /// Check the database (read-only; safe while nodes serve it).
    pub fn check(&self) -> Result<CheckReport, StoreError> {
        self.read_now(|c| async move {
            let count = |sql: &'static str| {
                let c = c.clone();
                async move {
                    let found = rows(&c, sql, &[]).await?;
                    let n: i64 = match found.first() {
                        Some(r) => r.try_get(0)?,
                        None => 0,
                    };
                    Ok::<u64, PgError>(to_count(n))
                }
            };
            let schema: i64 = match rows(
                &c,
                "SELECT coalesce(max(version), 0) FROM schema_version",
                &[],
            )
            .await?
            .first()
            {
                Some(r) => r.try_get(0)?,
                None => 0,
            };
            let broken = rows(&c, common::SQL_BROKEN_SEQ, &[]).await?;
            let broken_seq_keys = broken
                .iter()
                .take(common::NAMED)
                .map(|r| r.try_get::<_, String>(0))
                .collect::<Result<Vec<_>, _>>()?;
            let counts = |sql: &'static str| {
                let c = c.clone();
                async move {
                    rows(&c, sql, &[])
                        .await?
                        .iter()
                        .map(|r| {
                            let key: CountKey = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
                            Ok((key, r.try_get::<_, i64>(3)?))
                        })
                        .collect::<Result<Vec<_>, PgError>>()
                }
            };
            // Leases (several nodes on one database) get their own section here.
            Ok(CheckReport {
                integrity: Integrity::NotChecked(NOT_CHECKED.into()),
                schema,
                schema_known: crate::SCHEMA_VERSION,
                sessions: count(common::SQL_SESSIONS).await?,
                lines: count(common::SQL_LINES).await?,
                orphan_lines: count(common::SQL_ORPHAN_LINES).await?,
                broken_seq: broken.len() as u64,
                broken_seq_keys,
                count_drift: common::count_drift(
                    counts(common::SQL_KEPT_COUNTS).await?,
                    counts(common::SQL_COUNTED).await?,
                ),
                gone_runs: count(common::SQL_GONE_RUNS).await?,
                gone_spawns: count(common::SQL_GONE_SPAWNS).await?,
                gone_outbox: count(common::SQL_GONE_OUTBOX).await?,
                running_runs: count(common::SQL_RUNNING_RUNS).await?,
                running_exchanges: count(common::SQL_RUNNING_EXCHANGES).await?,
                running_spawns: count(common::SQL_RUNNING_SPAWNS).await?,
            })
        })
    }
}
