//! `switchboard store check` on PostgreSQL: the checks every store answers
//! (`switchboard_store::check`) run on the database, with the same report as SQLite's. Like
//! SQLite's check it changes nothing: one plain connection, no migration (a database at
//! another schema is reported, not upgraded). The pages themselves are the server's to check
//! (amcheck, a `pg_dump` that reads every row).

use std::str::FromStr;

use switchboard_store::StoreError;
use switchboard_store::check::{
    self as common, CheckReport, CountKey, Integrity, LeaseRow, Leases, to_count,
};
use tokio_postgres::Client;

use crate::error::PgError;

/// What `integrity` says on PostgreSQL.
const NOT_CHECKED: &str = "not checked here: PostgreSQL checks its own pages (pg_amcheck, or a \
     pg_dump that reads every row)";

/// Check the database at `url` without changing it; where it is, as a user names it, and the
/// report. Blocking (a runtime of its own): call it off the async workers.
pub fn check_url(url: &str) -> Result<(String, CheckReport), StoreError> {
    let mut config = tokio_postgres::Config::from_str(url).map_err(|e| crate::bad_url(url, e))?;
    if config.get_hosts().is_empty() {
        return Err(crate::bad_url(url, "no host"));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(crate::CONNECT_TIMEOUT);
    }
    let at = crate::location(&config);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StoreError::unavailable(format!("cannot start the check: {e}")))?;
    let report = rt.block_on(async {
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| PgError::from_driver(&at, e))?;
        let driver = tokio::spawn(connection);
        let report = check(&client).await.map_err(|e| e.locate(&at));
        drop(client);
        let _ = driver.await;
        report
    })?;
    Ok((at, report))
}

async fn count(c: &Client, sql: &str) -> Result<u64, PgError> {
    let n: i64 = match c.query(sql, &[]).await?.first() {
        Some(r) => r.try_get(0)?,
        None => 0,
    };
    Ok(to_count(n))
}

async fn counts(c: &Client, sql: &str) -> Result<Vec<(CountKey, i64)>, PgError> {
    c.query(sql, &[])
        .await?
        .iter()
        .map(|r| {
            let key: CountKey = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            Ok((key, r.try_get::<_, i64>(3)?))
        })
        .collect()
}

async fn check(c: &Client) -> Result<CheckReport, PgError> {
    let versioned = c
        .query("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await?
        .first()
        .map(|r| r.try_get::<_, bool>(0))
        .transpose()?
        .unwrap_or(false);
    let schema = if versioned {
        c.query("SELECT coalesce(max(version), 0) FROM schema_version", &[])
            .await?
            .first()
            .map(|r| r.try_get::<_, i64>(0))
            .transpose()?
            .unwrap_or(0)
    } else {
        0
    };
    if schema != crate::SCHEMA_VERSION {
        return Err(PgError::Rejected(format!(
            "the database is at schema {schema} and this build checks schema {}: {}",
            crate::SCHEMA_VERSION,
            if schema > crate::SCHEMA_VERSION {
                "it was written by a newer Switchboard; check it with that one"
            } else {
                "start switchboard on it once (`switchboard --store URL sessions list`) to bring it up to date"
            }
        )));
    }
    let broken = c.query(common::SQL_BROKEN_SEQ, &[]).await?;
    let broken_seq_keys = broken
        .iter()
        .take(common::NAMED)
        .map(|r| r.try_get::<_, String>(0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CheckReport {
        integrity: Integrity::NotChecked(NOT_CHECKED.into()),
        schema,
        schema_known: crate::SCHEMA_VERSION,
        sessions: count(c, common::SQL_SESSIONS).await?,
        lines: count(c, common::SQL_LINES).await?,
        orphan_lines: count(c, common::SQL_ORPHAN_LINES).await?,
        broken_seq: broken.len() as u64,
        broken_seq_keys,
        count_drift: common::count_drift(
            counts(c, common::SQL_KEPT_COUNTS).await?,
            counts(c, common::SQL_COUNTED).await?,
        ),
        gone_runs: count(c, common::SQL_GONE_RUNS).await?,
        gone_spawns: count(c, common::SQL_GONE_SPAWNS).await?,
        gone_outbox: count(c, common::SQL_GONE_OUTBOX).await?,
        running_runs: count(c, common::SQL_RUNNING_RUNS).await?,
        running_exchanges: count(c, common::SQL_RUNNING_EXCHANGES).await?,
        running_spawns: count(c, common::SQL_RUNNING_SPAWNS).await?,
        leases: leases(c).await?,
    })
}

/// Every node's lease with what it holds, the lanes of nodes that are gone and the running
/// work of owners without a lease.
async fn leases(c: &Client) -> Result<Leases, PgError> {
    let rows = c
        .query(
            "SELECT n.id, n.host, n.pid,
                    (extract(epoch FROM (n.expires_at - now())) * 1000)::bigint,
                    (SELECT count(*) FROM lanes l WHERE l.owner = n.id),
                    (SELECT count(*) FROM runs r WHERE r.owner = n.id AND r.status = 'running')
             FROM nodes n ORDER BY n.started_at, n.id",
            &[],
        )
        .await?;
    let nodes = rows
        .iter()
        .map(|r| {
            Ok(LeaseRow {
                node: r.try_get(0)?,
                host: r.try_get(1)?,
                pid: r.try_get(2)?,
                expires_in_ms: r.try_get(3)?,
                lanes: r.try_get::<_, i64>(4)?.max(0) as u64,
                running: r.try_get::<_, i64>(5)?.max(0) as u64,
            })
        })
        .collect::<Result<Vec<_>, PgError>>()?;
    Ok(Leases {
        nodes,
        stale_lanes: count(
            c,
            "SELECT count(*) FROM lanes l WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = l.owner)",
        )
        .await?,
        ownerless_runs: count(
            c,
            "SELECT count(*) FROM runs r WHERE r.status = 'running'
               AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = r.owner)",
        )
        .await?,
    })
}
