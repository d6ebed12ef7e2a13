//! The database schema as numbered migrations, applied in order and recorded in
//! `PRAGMA user_version`, and the connection settings every connection gets.

use rusqlite::Connection;

use super::error::{BUSY_TIMEOUT, StorageError};

/// Each entry is one migration; its 1-based position is the schema version it produces.
/// Never edit a shipped migration: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions and transcripts.
    r#"
    CREATE TABLE sessions (
        key         TEXT PRIMARY KEY,
        session_id  TEXT NOT NULL,
        agent_id    TEXT NOT NULL,
        kind        TEXT NOT NULL,
        channel     TEXT,
        updated_at  INTEGER NOT NULL,
        label       TEXT,
        spawned_by  TEXT,
        entry       TEXT NOT NULL
    );
    CREATE UNIQUE INDEX sessions_by_session_id ON sessions(session_id);
    CREATE INDEX sessions_by_updated ON sessions(updated_at DESC);
    CREATE INDEX sessions_by_kind ON sessions(kind, updated_at DESC);
    CREATE INDEX sessions_by_agent ON sessions(agent_id, kind, updated_at DESC);
    CREATE INDEX sessions_by_agent_updated ON sessions(agent_id, updated_at DESC);
    CREATE INDEX sessions_by_parent ON sessions(spawned_by) WHERE spawned_by IS NOT NULL;
    CREATE INDEX sessions_by_label ON sessions(label) WHERE label IS NOT NULL;

    -- One row per transcript line, in OpenClaw's JSONL line format (`line`). seq 0 is the
    -- `session` header; `type`/`role` are copied out so tails filter inside the index.
    CREATE TABLE transcript (
        session_id  TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        entry_id    TEXT NOT NULL,
        type        TEXT NOT NULL,
        role        TEXT,
        line        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE meta (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    "#,
    // 2: runs, agent-to-agent flows and the outbox: what must survive a restart.
    r#"
    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        agent_id    TEXT NOT NULL,
        step        TEXT NOT NULL,
        round       INTEGER NOT NULL DEFAULT 0,
        flow_id     TEXT,
        -- running | ok | error | timeout | aborted
        status      TEXT NOT NULL,
        -- the engine instance executing it (see `instance.rs`), to recover after a crash
        owner       TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER,
        error       TEXT,
        reply       TEXT,
        tokens_in   INTEGER,
        tokens_out  INTEGER
    );
    CREATE INDEX runs_by_session ON runs(session_key, started_at DESC);
    CREATE INDEX runs_running ON runs(owner) WHERE status = 'running';

    CREATE TABLE flows (
        flow_id     TEXT PRIMARY KEY,
        chain_id    TEXT NOT NULL,
        requester   TEXT NOT NULL,
        target      TEXT NOT NULL,
        message     TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        -- running | done | interrupted
        status      TEXT NOT NULL,
        ended_reason TEXT,
        owner       TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER
    );
    CREATE INDEX flows_running ON flows(owner) WHERE status = 'running';

    CREATE TABLE outbox (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at  INTEGER NOT NULL,
        session_key TEXT NOT NULL,
        -- announce | reply
        kind        TEXT NOT NULL,
        channel     TEXT NOT NULL,
        recipient   TEXT NOT NULL,
        account_id  TEXT,
        thread_id   TEXT,
        text        TEXT NOT NULL,
        -- queued: waiting for a channel adapter to send it (none ship yet)
        status      TEXT NOT NULL,
        run_id      TEXT,
        flow_id     TEXT
    );
    CREATE INDEX outbox_by_session ON outbox(session_key, id);
    "#,
    // 3: sub-agents: one row per spawned child, carrying its announce and archive timer
    // through restarts.
    r#"
    CREATE TABLE spawns (
        child_key     TEXT PRIMARY KEY,
        requester     TEXT NOT NULL,
        run_id        TEXT NOT NULL,
        agent_id      TEXT NOT NULL,
        task          TEXT NOT NULL,
        label         TEXT,
        cleanup       TEXT NOT NULL,
        mode          TEXT NOT NULL,
        -- running | ended (announce decided, maybe not delivered) | done
        status        TEXT NOT NULL,
        -- completed | failed | timed out
        outcome       TEXT,
        error         TEXT,
        started_at    INTEGER NOT NULL,
        ended_at      INTEGER,
        -- the announce text, persisted before delivery; NULL when silent
        announce      TEXT,
        -- pending | delivered | skipped | blocked | no_route
        announce_state TEXT,
        announced_at  INTEGER,
        archive_at    INTEGER,
        archived_at   INTEGER
    );
    CREATE INDEX spawns_by_requester ON spawns(requester, status);
    CREATE INDEX spawns_open ON spawns(status) WHERE status != 'done';
    CREATE INDEX spawns_archive ON spawns(archive_at) WHERE archive_at IS NOT NULL AND archived_at IS NULL;
    "#,
    // 4: a session's archive time copied out of its entry (`archivedAt`), the one definition
    // of archived: the engine's own archives and imported entries alike. The partial index
    // holds only archived rows, so pages leave them out without reading any entry. Only rows
    // that mention the field are rewritten; an entry that is not valid JSON (CASE evaluates
    // lazily) gets NULL rather than failing the upgrade, and fails when read, as before.
    r#"
    ALTER TABLE sessions ADD COLUMN archived_at INTEGER;
    UPDATE sessions SET archived_at = CASE WHEN json_valid(entry) THEN
        CASE WHEN json_type(entry, '$.archivedAt') = 'integer'
             THEN json_extract(entry, '$.archivedAt') END END
      WHERE entry LIKE '%"archivedAt"%';
    CREATE INDEX sessions_archived ON sessions(key) WHERE archived_at IS NOT NULL;
    "#,
    // 5: how many sessions there are, kept instead of counted: one row per kind, archived or
    // not, and slot (the reserved keys `unknown` and `global`, which pages hide, apart from
    // the rest), so a page's total sums a few rows instead of walking 100,000 index entries.
    // Triggers keep it exact on every write, whichever process or statement makes it (no
    // sessions write uses REPLACE, which would delete without firing the DELETE trigger).
    // Rows that fall to zero stay; there are at most kinds x 2 x 3 of them. Every connection
    // parses the triggers when it loads the schema, so they are kept short.
    r#"
    CREATE TABLE session_counts (
        kind      TEXT NOT NULL,
        archived  INTEGER NOT NULL,
        -- '' for an ordinary key, else the reserved key itself: 'unknown' or 'global'
        slot      TEXT NOT NULL,
        n         INTEGER NOT NULL,
        PRIMARY KEY (kind, archived, slot)
    ) WITHOUT ROWID;
    INSERT INTO session_counts (kind, archived, slot, n)
        SELECT kind, archived_at IS NOT NULL, iif(key IN ('unknown', 'global'), key, ''),
               count(*)
        FROM sessions GROUP BY 1, 2, 3;
    CREATE TRIGGER session_counts_insert AFTER INSERT ON sessions BEGIN
        INSERT INTO session_counts VALUES (NEW.kind, NEW.archived_at IS NOT NULL,
            iif(NEW.key IN ('unknown', 'global'), NEW.key, ''), 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER session_counts_delete AFTER DELETE ON sessions BEGIN
        UPDATE session_counts SET n = n - 1 WHERE kind = OLD.kind
            AND archived = (OLD.archived_at IS NOT NULL)
            AND slot = iif(OLD.key IN ('unknown', 'global'), OLD.key, '');
    END;
    -- Every upsert of an existing session sets kind and archived_at; the WHEN skips the
    -- counters unless one of the three things they are keyed on changed.
    CREATE TRIGGER session_counts_update AFTER UPDATE OF kind, archived_at, key ON sessions
    WHEN OLD.kind IS NOT NEW.kind OR (OLD.archived_at IS NULL) != (NEW.archived_at IS NULL)
      OR OLD.key IS NOT NEW.key
    BEGIN
        UPDATE session_counts SET n = n - 1 WHERE kind = OLD.kind
            AND archived = (OLD.archived_at IS NOT NULL)
            AND slot = iif(OLD.key IN ('unknown', 'global'), OLD.key, '');
        INSERT INTO session_counts VALUES (NEW.kind, NEW.archived_at IS NOT NULL,
            iif(NEW.key IN ('unknown', 'global'), NEW.key, ''), 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
    END;
    "#,
    // 6: exchanges kept and navigable. Sends that never started an exchange (refused by the
    // target's send policy, stopped by the chain limit) are rows of their own (`kind`); each
    // exchange keeps why its loop ended (`detail`) and what its announce did. The indexes
    // page newest-first, all or one session's (as requester or as target), without a scan,
    // and find an exchange's runs (with their step, so counting its answers reads only the
    // index).
    r#"
    ALTER TABLE flows ADD COLUMN kind TEXT NOT NULL DEFAULT 'send';
    ALTER TABLE flows ADD COLUMN detail TEXT;
    ALTER TABLE flows ADD COLUMN announce TEXT;
    ALTER TABLE flows ADD COLUMN announce_text TEXT;
    ALTER TABLE flows ADD COLUMN announce_channel TEXT;
    ALTER TABLE flows ADD COLUMN announce_to TEXT;
    ALTER TABLE flows ADD COLUMN announce_detail TEXT;
    CREATE INDEX flows_by_started ON flows(started_at, flow_id);
    CREATE INDEX flows_by_requester ON flows(requester, started_at, flow_id);
    CREATE INDEX flows_by_target ON flows(target, started_at, flow_id);
    CREATE INDEX runs_by_flow ON runs(flow_id, step) WHERE flow_id IS NOT NULL;
    "#,
    // 7: the name order. `name_key` is the name front ends show (display name, else label,
    // else the key as shown), lower-cased; every write sets it (`queries::name_key`). SQL's
    // lower() folds ASCII only, so `migrate` then redoes the rows with other characters in
    // Rust. The indexes cover what a page filters on (archived, kind, the reserved keys), so
    // a page 99,000 rows deep walks index entries only, never the rows. They leave out
    // `updated_at`: every append bumps it, and each index holding it is one more B-tree
    // write per bump on the writer, the bottleneck (a time-filtered page takes the activity
    // range and sorts what is in it instead).
    r#"
    ALTER TABLE sessions ADD COLUMN name_key TEXT NOT NULL DEFAULT '';
    UPDATE sessions SET name_key = lower(coalesce(
        CASE WHEN json_valid(entry) THEN
            coalesce(json_extract(entry, '$.displayName'), json_extract(entry, '$.label')) END,
        iif(key = 'global', 'main', key)));
    CREATE INDEX sessions_by_name ON sessions(name_key, key, archived_at, kind);
    CREATE INDEX sessions_by_kind_name ON sessions(kind, name_key, key, archived_at);
    -- The activity order's index covers its pages the same way (it held `updated_at` only,
    -- so a page 99,000 deep read 99,400 rows: 0.3 s); replaced, not added, so an append's
    -- bump still writes one entry here.
    DROP INDEX sessions_by_updated;
    CREATE INDEX sessions_by_updated ON sessions(updated_at DESC, key, archived_at, kind);
    "#,
    // 8: what the last import of each session saw (`imports.rs`), so a re-import appends only
    // what is new, tells a conflict from an update, and skips unchanged transcripts unread.
    r#"
    CREATE TABLE import_marks (
        session_key       TEXT PRIMARY KEY,
        session_id        TEXT NOT NULL,
        source_file       TEXT NOT NULL,
        source_size       INTEGER NOT NULL,
        source_mtime_ns   INTEGER NOT NULL,
        source_entry_hash TEXT NOT NULL,
        entry_hash        TEXT NOT NULL,
        last_seq          INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 9: `idempotencyKey`s of recorded sends (`idempotency.rs`), written in the commit of the
    // message they deduplicate, so a restart remembers them and a crash never keeps one
    // without the other. `message_hash` tells a repeat from a reuse for another message;
    // `created_at` orders the expiry and the cap.
    r#"
    CREATE TABLE idempotency_keys (
        key           TEXT PRIMARY KEY,
        session_key   TEXT NOT NULL,
        message_hash  TEXT NOT NULL,
        run_id        TEXT,
        seq           INTEGER NOT NULL,
        command_reply TEXT,
        created_at    INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_at);
    "#,
    // 10: OpenClaw's shown notices (`custom_message` lines with `display` true, e.g. "This
    // turn ended before a reply: …") get role `custom`, which history reads select beside
    // message lines (`switchboard_store::notice`; `queries::shown_lines`). New imports set it
    // (`notice::row_role`); this marks those imported before. Names that now come from the
    // entry's `origin.label` are redone in Rust after it (`queries::refill_origin_names`).
    r#"
    UPDATE transcript SET role = 'custom'
      WHERE type = 'custom_message' AND json_valid(line)
        AND json_type(line, '$.display') = 'true'
        AND coalesce(json_extract(line, '$.customType'), '') != 'openclaw.runtime-context';
    "#,
    // 11: a revision per session row, new on every insert and every write of its entry,
    // from a counter that never goes back (not `max(rev) + 1`: a deleted row's number
    // would come round again). With `updated_at` (which appends bump without touching the
    // entry) it tells a reader that a row it rendered before is unchanged, without reading
    // the entry (the gateway's rendered rows, `switchboard_server::rows`). Triggers, so a
    // write by any statement or process counts; the rows there are numbered once here.
    r#"
    ALTER TABLE sessions ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE session_revs (n INTEGER NOT NULL);
    INSERT INTO session_revs SELECT coalesce(max(rowid), 0) FROM sessions;
    UPDATE sessions SET rev = rowid;
    CREATE TRIGGER sessions_rev_insert AFTER INSERT ON sessions BEGIN
        UPDATE session_revs SET n = n + 1;
        UPDATE sessions SET rev = (SELECT n FROM session_revs) WHERE rowid = NEW.rowid;
    END;
    CREATE TRIGGER sessions_rev_update AFTER UPDATE OF entry ON sessions BEGIN
        UPDATE session_revs SET n = n + 1;
        UPDATE sessions SET rev = (SELECT n FROM session_revs) WHERE rowid = NEW.rowid;
    END;
    "#,
    // 12: delivery state of the outbox (`switchboard_store::OutboxStatus`): attempts, when the
    // row is due, the drain holding it and until when, the channel's message id, the last
    // error. Rows queued before stay queued and are due at once.
    r#"
    ALTER TABLE outbox ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN next_at INTEGER;
    ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
    ALTER TABLE outbox ADD COLUMN claim_until INTEGER;
    ALTER TABLE outbox ADD COLUMN message_id TEXT;
    ALTER TABLE outbox ADD COLUMN last_error TEXT;
    ALTER TABLE outbox ADD COLUMN updated_at INTEGER;
    -- What a drain looks for: rows not yet sent or given up, by when they are due.
    CREATE INDEX outbox_due ON outbox(coalesce(next_at, 0), id)
        WHERE status IN ('queued', 'retrying', 'sending');
    "#,
    // 13: direct-message pairing (`switchboard_types::api::pairing`): per channel and sender,
    // the code given, until when, and when the owner approved it. A code names one sender
    // of a channel.
    r#"
    CREATE TABLE pairings (
        channel      TEXT NOT NULL,
        sender       TEXT NOT NULL,
        display_name TEXT,
        code         TEXT NOT NULL,
        requested_at INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        approved_at  INTEGER,
        PRIMARY KEY (channel, sender)
    );
    CREATE UNIQUE INDEX pairings_by_code ON pairings(channel, code);
    "#,
];

/// The migration after which the shown name may come from `origin.label`.
const ORIGIN_NAME_VERSION: i64 = 10;

/// The migration that adds `sessions.name_key`.
const NAME_KEY_VERSION: i64 = 7;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The size at which the write-ahead log is cut back: checkpoints then wait for readers and
/// truncate the file (`wal_checkpoint(TRUNCATE)`), and a log reset trims the file to this.
/// 16 MiB is about 900 appends at the measured 4.3 pages each (BENCHMARKS.md): enough that a
/// single process's passive checkpoints (every 1,000 jobs) keep it below the mark and the
/// blocking kind is rare, and small enough that copying it back stalls writers for well
/// under a second, leaving room below the 64 MB bound for what arrives during that wait.
pub const WAL_LIMIT_BYTES: u64 = 16 * 1024 * 1024;

/// Settings for every connection: WAL so readers never block the writer (or another
/// process), FULL sync so an acknowledged commit survives power loss, and a generous busy
/// timeout so a second process waits for the write lock instead of failing.
pub fn configure(conn: &Connection) -> Result<(), StorageError> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Switching to WAL takes an exclusive lock and may report busy without waiting (the
    // caller retries); a database already in WAL mode needs no switch, so ask first.
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT_BYTES as i64)?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(64);
    plan_once(conn)
}

/// Statements keep the plan they were prepared with (SQLite's query planner stability
/// guarantee). Without it, a value bound to a LIMIT or to an indexed column's comparison
/// expired the cached statement, and every run of the sessions page and the transcript page
/// parsed and planned its SQL again (perf: 5 % of a `sessions.list`). Our statements are
/// written for one plan whatever the values (see the `INDEXED BY`s).
pub fn plan_once(conn: &Connection) -> Result<(), StorageError> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// Page cache of a pooled read connection, in KiB (the writer sets its own). SQLite's 2 MB
/// default is smaller than what one 400-row sessions page with previews touches at 100,000
/// sessions, so every page re-read most of its pages from the OS: 4.5 ms against 2.8 ms
/// with this (BENCHMARKS.md, issue 24). The cache fills only as far as reads need, and the
/// pool keeps at most 8 connections.
const READER_CACHE_KIB: i64 = 8 * 1024;

/// Settings for a connection that only reads (a state folder this user cannot write).
pub fn configure_read_only(conn: &Connection) -> Result<(), StorageError> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", "ON")?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(64);
    plan_once(conn)
}

/// Run `op` again while it fails because another process holds a lock, up to the busy
/// timeout. SQLite's busy handler covers most waits, but not all: switching the journal
/// mode, and opening while another process recovers the log after a crash, report busy at
/// once. Start-up steps go through here so processes started together all open.
pub fn retry_busy<T>(op: impl FnMut() -> Result<T, StorageError>) -> Result<T, StorageError> {
    use backon::BlockingRetryable;
    let pauses = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(2))
        .with_max_delay(std::time::Duration::from_millis(100))
        .with_total_delay(Some(BUSY_TIMEOUT))
        .without_max_times();
    op.retry(pauses)
        .sleep(std::thread::sleep)
        .when(|e| matches!(e, StorageError::Locked(_)))
        .notify(|e, _| tracing::debug!(detail = %e, "database busy while opening; retrying"))
        .call()
}

/// Extra settings for the one write connection. A group-commit transaction touches
/// thousands of pages, which the default 2 MB cache would spill to the WAL mid-transaction;
/// the cache only grows as far as a burst needs. Statement journals stay in memory.
pub fn configure_writer(conn: &Connection) -> Result<(), StorageError> {
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// Page cache of the write connection, in KiB.
const WRITER_CACHE_KIB: i64 = 32 * 1024;

/// Bring the schema up to date. Refuses a database written by a newer build rather than
/// guessing at its layout.
pub fn migrate(conn: &mut Connection) -> Result<(), StorageError> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(StorageError::NewerSchema {
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    // Two processes may open a fresh folder together: the immediate transaction makes one
    // of them wait, and the re-read inside it stops the second from re-applying.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version > current {
            tx.execute_batch(sql)?;
            if version == NAME_KEY_VERSION {
                super::queries::refill_name_keys(&tx)?;
            }
            if version == ORIGIN_NAME_VERSION {
                super::queries::refill_origin_names(&tx)?;
            }
            tx.pragma_update(None, "user_version", version)?;
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at schema `version` holding sessions `(key, entry JSON)` (session id = key).
    fn sessions_at_version(version: usize, rows: &[(&str, &str)]) -> Connection {
        let conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..version] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", version as i64)
            .expect("version");
        for (key, entry) in rows {
            conn.execute(
                "INSERT INTO sessions (key, session_id, agent_id, kind, updated_at, entry)
                 VALUES (?1, ?1, 'main', 'other', 0, ?2)",
                [key, entry],
            )
            .expect("old row");
        }
        conn
    }

    /// Upgrading to schema 10: OpenClaw notices imported before it (`custom_message`,
    /// `display: true`) get the role history reads select, and a session named only by its
    /// `origin.label` sorts by that name.
    #[test]
    fn schema_10_marks_shown_notices_and_names_from_origin() {
        let mut conn = sessions_at_version(
            9,
            &[
                (
                    "agent:main:a",
                    r#"{"sessionId":"a","origin":{"label":"Pyclient","provider":"webchat"}}"#,
                ),
                (
                    "agent:main:b",
                    r#"{"sessionId":"b","label":"kept","origin":{"label":"not used"}}"#,
                ),
            ],
        );
        let line = |seq: i64, kind: &str, text: &str| {
            conn.execute(
                "INSERT INTO transcript (session_id, seq, entry_id, type, role, line)
                 VALUES ('a', ?1, '', ?2, NULL, ?3)",
                rusqlite::params![seq, kind, text],
            )
            .expect("old line");
        };
        line(
            1,
            "custom_message",
            r#"{"type":"custom_message","customType":"run-failed-before-reply","content":"x","display":true}"#,
        );
        line(
            2,
            "custom_message",
            r#"{"type":"custom_message","customType":"y","content":"x","display":false}"#,
        );
        line(
            3,
            "custom_message",
            r#"{"type":"custom_message","customType":"openclaw.runtime-context","content":"x","display":true}"#,
        );
        line(4, "custom", r#"{"type":"custom","display":true}"#);
        migrate(&mut conn).expect("upgrade");
        let roles: Vec<Option<String>> = conn
            .prepare("SELECT role FROM transcript ORDER BY seq")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(roles, [Some("custom".to_string()), None, None, None]);
        let names: Vec<String> = conn
            .prepare("SELECT name_key FROM sessions ORDER BY key")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(names, ["pyclient", "kept"]);
    }

    /// Upgrading to schema 7 gives every row the name the name order sorts on: the display
    /// name, else the label, else the key as shown, lower-cased beyond ASCII too.
    #[test]
    fn schema_7_fills_the_name_order_from_the_entry() {
        let rows = [
            (
                "agent:main:a",
                r#"{"sessionId":"a","displayName":"Zeta Team"}"#,
            ),
            ("agent:main:b", r#"{"sessionId":"b","label":"Ops LABEL"}"#),
            (
                "agent:main:c",
                r#"{"sessionId":"c","displayName":"Shown","label":"hidden"}"#,
            ),
            ("agent:main:D", r#"{"sessionId":"d"}"#),
            ("global", r#"{"sessionId":"g"}"#),
            (
                "agent:main:e",
                r#"{"sessionId":"e","displayName":"ÉMILE Ärger"}"#,
            ),
            (
                "agent:main:f",
                r#"{"sessionId":"f","displayName": not json"#,
            ),
        ];
        let mut conn = sessions_at_version(6, &rows);
        migrate(&mut conn).expect("upgrade");
        let got: Vec<(String, String)> = conn
            .prepare("SELECT key, name_key FROM sessions ORDER BY name_key, key")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want: Vec<(String, String)> = [
            ("agent:main:D", "agent:main:d"),
            ("agent:main:f", "agent:main:f"),
            ("global", "main"),
            ("agent:main:b", "ops label"),
            ("agent:main:c", "shown"),
            ("agent:main:a", "zeta team"),
            ("agent:main:e", "émile ärger"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    /// Exchanges recorded before schema 6 are `send` entries afterwards, and page.
    #[test]
    fn schema_6_keeps_older_exchanges_as_sends() {
        let mut conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..5] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 5)
            .expect("version");
        conn.execute(
            "INSERT INTO flows (flow_id, chain_id, requester, target, message, run_id, status,
                                owner, started_at, ended_reason, ended_at)
             VALUES ('f1', 'c', 'agent:main:main', 'agent:ops:main', 'hi', 'r1', 'done', 'o',
                     1000, 'cap', 2000)",
            [],
        )
        .expect("old row");
        migrate(&mut conn).expect("upgrade");
        let (rows, more) = super::super::flows::page(
            &conn,
            &super::super::flows::FlowPageQuery {
                limit: 10,
                ..Default::default()
            },
        )
        .expect("page");
        assert!(!more);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].kind.as_str(),
                rows[0]
                    .ended_reason
                    .map(switchboard_types::api::ExchangeEnd::as_str)
            ),
            ("send", Some("cap"))
        );
        assert_eq!(rows[0].announce, None);
    }

    /// Upgrading from schema 3 copies `archivedAt` into the column for the entries that carry
    /// a whole number there, and neither fails nor guesses on any other entry.
    #[test]
    fn schema_4_fills_archived_at_from_the_entry() {
        let rows = [
            ("a", r#"{"sessionId":"a","archivedAt":1700000000000}"#),
            ("b", r#"{"sessionId":"b"}"#),
            ("c", r#"{"sessionId":"c","archivedAt":null}"#),
            ("d", r#"{"sessionId":"d","archivedAt":"yesterday"}"#),
            ("e", r#"{"sessionId":"e","archivedAt": not json"#),
            ("f", r#"{"sessionId":"f","label":"archivedAt"}"#),
        ];
        let mut conn = sessions_at_version(3, &rows);
        migrate(&mut conn).expect("upgrade");
        let got: Vec<(String, Option<i64>)> = conn
            .prepare("SELECT key, archived_at FROM sessions ORDER BY key")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want: Vec<(String, Option<i64>)> = [
            ("a", Some(1_700_000_000_000)),
            ("b", None),
            ("c", None),
            ("d", None),
            ("e", None),
            ("f", None),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(got, want);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
    }
}
