//! The PostgreSQL schema as numbered migrations, recorded in `schema_version` and applied
//! at start under an advisory lock, so nodes started together apply each one once; a
//! database at a version this build does not know is refused.
//!
//! The tables mirror the SQLite store's (docs/ARCHITECTURE.md, "Storage"). Text that is
//! ordered (keys, names) is `COLLATE "C"`: byte order, as SQLite sorts, whatever the
//! database's locale. Entries and lines are kept as the exact text written (not `jsonb`,
//! which would reorder keys and change what an export gives back).

use deadpool_postgres::ClientWrapper;

use crate::error::PgError;

/// Each entry is one migration; its 1-based position is the schema version it produces.
/// Never edit a shipped migration: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: everything the SQLite store holds at its schema 11.
    r#"
    CREATE TABLE sessions (
        key         TEXT COLLATE "C" PRIMARY KEY,
        session_id  TEXT COLLATE "C" NOT NULL UNIQUE,
        agent_id    TEXT COLLATE "C" NOT NULL,
        kind        TEXT NOT NULL,
        channel     TEXT,
        updated_at  BIGINT NOT NULL,
        label       TEXT,
        spawned_by  TEXT COLLATE "C",
        entry       TEXT NOT NULL,
        archived_at BIGINT,
        name_key    TEXT COLLATE "C" NOT NULL DEFAULT '',
        -- New on every insert and every write of the entry (never reused: a sequence).
        rev         BIGINT NOT NULL
    );
    CREATE SEQUENCE session_revs;
    CREATE INDEX sessions_by_updated ON sessions (updated_at DESC, key);
    CREATE INDEX sessions_by_kind ON sessions (kind, updated_at DESC, key);
    CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC, key);
    CREATE INDEX sessions_by_name ON sessions (name_key, key);
    CREATE INDEX sessions_by_parent ON sessions (spawned_by) WHERE spawned_by IS NOT NULL;
    CREATE INDEX sessions_by_label ON sessions (label) WHERE label IS NOT NULL;

    -- One row per transcript line, in OpenClaw's JSONL line format; seq 0 is the header.
    CREATE TABLE transcript (
        session_id  TEXT COLLATE "C" NOT NULL,
        seq         BIGINT NOT NULL,
        entry_id    TEXT NOT NULL,
        type        TEXT NOT NULL,
        role        TEXT,
        line        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );

    CREATE TABLE meta (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );

    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        session_key TEXT COLLATE "C" NOT NULL,
        agent_id    TEXT NOT NULL,
        step        TEXT NOT NULL,
        round       BIGINT NOT NULL DEFAULT 0,
        flow_id     TEXT,
        status      TEXT NOT NULL,
        owner       TEXT NOT NULL,
        started_at  BIGINT NOT NULL,
        ended_at    BIGINT,
        error       TEXT,
        reply       TEXT,
        tokens_in   BIGINT,
        tokens_out  BIGINT,
        -- Insertion order, the tie-break SQLite's rowid gives.
        n           BIGSERIAL
    );
    CREATE INDEX runs_by_session ON runs (session_key, started_at DESC);
    CREATE INDEX runs_running ON runs (owner) WHERE status = 'running';
    CREATE INDEX runs_by_flow ON runs (flow_id, step) WHERE flow_id IS NOT NULL;

    CREATE TABLE flows (
        flow_id          TEXT COLLATE "C" PRIMARY KEY,
        chain_id         TEXT NOT NULL,
        requester        TEXT COLLATE "C" NOT NULL,
        target           TEXT COLLATE "C" NOT NULL,
        message          TEXT NOT NULL,
        run_id           TEXT NOT NULL,
        status           TEXT NOT NULL,
        ended_reason     TEXT,
        owner            TEXT NOT NULL,
        started_at       BIGINT NOT NULL,
        ended_at         BIGINT,
        kind             TEXT NOT NULL DEFAULT 'send',
        detail           TEXT,
        announce         TEXT,
        announce_text    TEXT,
        announce_channel TEXT,
        announce_to      TEXT,
        announce_detail  TEXT
    );
    CREATE INDEX flows_running ON flows (owner) WHERE status = 'running';
    CREATE INDEX flows_by_started ON flows (started_at, flow_id);
    CREATE INDEX flows_by_requester ON flows (requester, started_at, flow_id);
    CREATE INDEX flows_by_target ON flows (target, started_at, flow_id);

    CREATE TABLE outbox (
        id          BIGSERIAL PRIMARY KEY,
        created_at  BIGINT NOT NULL,
        session_key TEXT NOT NULL,
        kind        TEXT NOT NULL,
        channel     TEXT NOT NULL,
        recipient   TEXT NOT NULL,
        account_id  TEXT,
        thread_id   TEXT,
        text        TEXT NOT NULL,
        status      TEXT NOT NULL,
        run_id      TEXT,
        flow_id     TEXT
    );
    CREATE INDEX outbox_by_session ON outbox (session_key, id);

    CREATE TABLE spawns (
        child_key      TEXT COLLATE "C" PRIMARY KEY,
        requester      TEXT COLLATE "C" NOT NULL,
        run_id         TEXT NOT NULL,
        agent_id       TEXT NOT NULL,
        task           TEXT NOT NULL,
        label          TEXT,
        cleanup        TEXT NOT NULL,
        mode           TEXT NOT NULL,
        status         TEXT NOT NULL,
        outcome        TEXT,
        error          TEXT,
        started_at     BIGINT NOT NULL,
        ended_at       BIGINT,
        announce       TEXT,
        announce_state TEXT,
        announced_at   BIGINT,
        archive_at     BIGINT,
        archived_at    BIGINT
    );
    CREATE INDEX spawns_by_requester ON spawns (requester, status);
    CREATE INDEX spawns_open ON spawns (status) WHERE status != 'done';
    CREATE INDEX spawns_archive ON spawns (archive_at)
        WHERE archive_at IS NOT NULL AND archived_at IS NULL;

    CREATE TABLE import_marks (
        session_key       TEXT PRIMARY KEY,
        session_id        TEXT NOT NULL,
        source_file       TEXT NOT NULL,
        source_size       BIGINT NOT NULL,
        source_mtime_ns   BIGINT NOT NULL,
        source_entry_hash TEXT NOT NULL,
        entry_hash        TEXT NOT NULL,
        last_seq          BIGINT NOT NULL
    );

    CREATE TABLE idempotency_keys (
        key           TEXT PRIMARY KEY,
        session_key   TEXT NOT NULL,
        message_hash  TEXT NOT NULL,
        run_id        TEXT,
        seq           BIGINT NOT NULL,
        command_reply TEXT,
        created_at    BIGINT NOT NULL
    );
    CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
    "#,
    // 2: the sessions counted by kind, archived and reserved key, kept by triggers, so a list's
    // totals sum a few counter rows instead of counting 100,000 rows twice per page (26 ms a
    // `sessions.list` at 100,000 sessions before, BENCHMARKS.md "Issue 28").
    r#"
    CREATE TABLE session_counts (
        kind      TEXT NOT NULL,
        archived  BOOLEAN NOT NULL,
        -- '' for an ordinary key, else the reserved key itself: 'unknown' or 'global'
        slot      TEXT NOT NULL,
        n         BIGINT NOT NULL,
        PRIMARY KEY (kind, archived, slot)
    );
    INSERT INTO session_counts (kind, archived, slot, n)
        SELECT kind, archived_at IS NOT NULL,
               CASE WHEN key IN ('unknown', 'global') THEN key ELSE '' END, count(*)
        FROM sessions GROUP BY 1, 2, 3;
    CREATE FUNCTION session_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE session_counts SET n = n - 1
             WHERE kind = OLD.kind AND archived = (OLD.archived_at IS NOT NULL)
               AND slot = CASE WHEN OLD.key IN ('unknown', 'global') THEN OLD.key ELSE '' END;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO session_counts VALUES (NEW.kind, NEW.archived_at IS NOT NULL,
                CASE WHEN NEW.key IN ('unknown', 'global') THEN NEW.key ELSE '' END, 1)
            ON CONFLICT (kind, archived, slot) DO UPDATE SET n = session_counts.n + 1;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER session_counts_insert_delete AFTER INSERT OR DELETE ON sessions
        FOR EACH ROW EXECUTE FUNCTION session_counts_keep();
    -- An upsert of an existing session runs the UPDATE path: counted only when what the
    -- counters are keyed on changed.
    CREATE TRIGGER session_counts_update AFTER UPDATE OF kind, archived_at, key ON sessions
        FOR EACH ROW WHEN (OLD.kind IS DISTINCT FROM NEW.kind
            OR (OLD.archived_at IS NULL) <> (NEW.archived_at IS NULL)
            OR OLD.key IS DISTINCT FROM NEW.key)
        EXECUTE FUNCTION session_counts_keep();
    "#,
    // 3: several nodes on one database (nodes.rs). A node's row is its lease (expiry by the
    // server's clock, so the nodes' clocks do not matter); its absence fences the node.
    // A lane row says which node runs in a session now. Failed connects are counted here
    // so every node refuses a guesser alike.
    r#"
    CREATE TABLE nodes (
        id          TEXT PRIMARY KEY,
        host        TEXT NOT NULL,
        pid         BIGINT NOT NULL,
        started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
        renewed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
        expires_at  TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE lanes (
        session_key TEXT PRIMARY KEY,
        owner       TEXT NOT NULL,
        epoch       BIGINT NOT NULL,
        claimed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX lanes_by_owner ON lanes (owner);
    -- Every write of a node begins with this: it waits for nothing but a take-over of the
    -- node (a DELETE of its row), and fails once that happened, so a stale owner's writes are
    -- refused in the same round trip as its BEGIN.
    CREATE FUNCTION switchboard_fence(node TEXT) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM 1 FROM nodes WHERE id = node FOR KEY SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'node % lost its lease', node USING ERRCODE = 'SWF01';
        END IF;
    END $$;
    CREATE TABLE auth_failures (
        peer        TEXT PRIMARY KEY,
        failures    BIGINT NOT NULL,
        since       TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX auth_failures_by_age ON auth_failures (since);
    "#,
    // 4: delivery state of the outbox (SQLite's migration 12): attempts, when due, the node
    // holding a row and until when, the channel's message id, the last error.
    r#"
    ALTER TABLE outbox ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN next_at BIGINT;
    ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
    ALTER TABLE outbox ADD COLUMN claim_until BIGINT;
    ALTER TABLE outbox ADD COLUMN message_id TEXT;
    ALTER TABLE outbox ADD COLUMN last_error TEXT;
    ALTER TABLE outbox ADD COLUMN updated_at BIGINT;
    CREATE INDEX outbox_due ON outbox ((coalesce(next_at, 0)), id)
        WHERE status IN ('queued', 'retrying', 'sending');
    "#,
    // 5: direct-message pairing (SQLite's migration 13).
    r#"
    CREATE TABLE pairings (
        channel      TEXT NOT NULL,
        sender       TEXT NOT NULL,
        display_name TEXT,
        code         TEXT NOT NULL,
        requested_at BIGINT NOT NULL,
        expires_at   BIGINT NOT NULL,
        approved_at  BIGINT,
        PRIMARY KEY (channel, sender)
    );
    CREATE UNIQUE INDEX pairings_by_code ON pairings (channel, code);
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock every node takes while it migrates (an arbitrary constant: "SWBD").
const MIGRATION_LOCK: i64 = 0x5357_4244;

/// Bring the schema up to date, holding the advisory lock so that nodes started together
/// apply each migration once. A database at a newer version is refused before anything is
/// written.
pub async fn migrate(c: &mut ClientWrapper, at: &str) -> Result<(), PgError> {
    let e = |e| PgError::from_driver(at, e);
    c.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e)?;
    let result = migrate_locked(c, at).await;
    // Released whatever happened (the session ending would release it too).
    let unlocked = c
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e);
    result.and(unlocked.map(|_| ()))
}

async fn migrate_locked(c: &mut ClientWrapper, at: &str) -> Result<(), PgError> {
    let e = |e| PgError::from_driver(at, e);
    c.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .await
        .map_err(e)?;
    let current: i64 = c
        .query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])
        .await
        .map_err(e)?
        .get(0);
    if current > SCHEMA_VERSION {
        return Err(PgError::NewerSchema {
            at: at.to_string(),
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        let tx = c.transaction().await.map_err(e)?;
        tx.batch_execute(sql).await.map_err(e)?;
        tx.execute("DELETE FROM schema_version", &[])
            .await
            .map_err(e)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(e)?;
        tx.commit().await.map_err(e)?;
        tracing::info!(version, "PostgreSQL schema migrated");
    }
    Ok(())
}
