//! The PostgreSQL store at its edges: opening (a newer schema refused, an unreachable server
//! or a bad URL named in a clear error, never a hang), two stores appending to one session,
//! and the binary on PostgreSQL through `--store` and `$SWITCHBOARD_STORE`.

use serde_json::json;
use switchboard_store::{NewLine, Store, StoreErrorKind, StoredSession};
use switchboard_store_postgres::PgStore;
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{SessionKey, SessionKind};

use crate::common::{CliBench, pg};

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn session(key: &str) -> StoredSession {
    StoredSession {
        key: SessionKey::from_canonical(key.to_string()),
        agent_id: "main".into(),
        kind: SessionKind::Other,
        entry: SessionEntry {
            session_id: format!("sid-{}", key.replace(':', "-")),
            updated_at: 1,
            ..SessionEntry::default()
        },
    }
}

/// A database written by a newer build is refused at open, with a message that names the
/// server, both versions and what to do; nothing in it is changed.
#[test]
fn a_database_at_a_newer_schema_is_refused_naming_it() {
    let Some(cluster) = pg::cluster_or_skip("a_database_at_a_newer_schema_is_refused") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    drop(PgStore::open(&url).expect("a fresh database opens"));
    let db = url.rsplit('/').next().expect("db name");
    cluster.sql(db, "UPDATE schema_version SET version = 999");
    let err = match PgStore::open(&url) {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), StoreErrorKind::NewerSchema, "{err}");
    let text = err.to_string();
    for part in [
        "schema 999",
        &format!("up to {}", switchboard_store_postgres::SCHEMA_VERSION),
        &format!("127.0.0.1:{}", cluster.port),
        "upgrade switchboard",
    ] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    assert_eq!(cluster.sql(db, "SELECT version FROM schema_version"), "999");
}

/// A server that refuses the connection fails the open at once as `Unavailable`, naming
/// host and port and saying to retry; no PostgreSQL needed.
#[test]
fn an_unreachable_server_is_named_and_fails_fast() {
    let port = dead_port();
    let url = format!("postgres://someone:secret@127.0.0.1:{port}/nothing");
    let err = match PgStore::open(&url) {
        Ok(_) => panic!("nothing listens there"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("retry"), "{text}");
    assert!(
        !text.contains("secret"),
        "the password must not be shown: {text}"
    );
}

/// A URL the driver cannot read says what one looks like, without its password.
#[test]
fn a_bad_url_says_what_a_url_looks_like() {
    let err = match PgStore::open("postgres://u:secret@127.0.0.1:notaport/db") {
        Ok(_) => panic!("not a URL"),
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(
        text.contains("postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
}

/// Two stores (two nodes) appending to one session at once: every line lands, `seq` stays
/// dense, and each line's parent is the line before it (the session's row is locked for
/// the append, so neither reads a stale end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_appending_to_one_session_keep_seq_dense_and_chained() {
    let Some(cluster) = pg::cluster_or_skip("two_stores_appending_to_one_session") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let a = PgStore::open(&url).expect("open a");
    let b = PgStore::open(&url).expect("open b");
    let s = session("agent:main:main");
    let (_, created) = a
        .create_session(
            s.clone(),
            json!({"type": "session", "id": s.entry.session_id}),
        )
        .await
        .expect("create");
    assert!(created);
    let mut pending = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { &a } else { &b };
        let line = NewLine::message(json!({"role": "user", "content": format!("m{i}")}));
        pending.push(store.submit_append(&s.key, vec![line]));
    }
    for p in pending {
        p.await.expect("append");
    }
    let rows = a
        .transcript_tail(&s.entry.session_id, 100, true)
        .await
        .expect("tail");
    let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
    for pair in rows.windows(2) {
        assert_eq!(
            pair[1].line["parentId"].as_str(),
            Some(pair[0].entry_id.as_str()),
            "line {} is not chained to {}",
            pair[1].seq,
            pair[0].seq
        );
    }
}

/// The binary on PostgreSQL: `--store` puts a message in the database (no SQLite file in
/// the state folder), `$SWITCHBOARD_STORE` reads it back, and an unreachable server is an
/// exit with a message naming it, not a panic.
#[test]
fn the_binary_runs_on_postgres_through_store_and_the_environment() {
    let Some(cluster) = pg::cluster_or_skip("the_binary_runs_on_postgres") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let bench = CliBench::new("{}");
    bench.ok(&[
        "--store",
        &url,
        "inject",
        "agent:main:main",
        "hello there",
        "--quiet",
    ]);
    assert!(
        !bench.state.join("switchboard.db").exists(),
        "the state went to PostgreSQL, not SQLite"
    );
    let out = bench
        .command(&["sessions", "list"])
        .env("SWITCHBOARD_STORE", &url)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("agent:main:main") || listed.contains("main"),
        "{listed}"
    );
    // The overview (no command, off a terminal) reads the database, not the folder's file.
    let out = bench
        .command(&[])
        .env("SWITCHBOARD_STORE", &url)
        .output()
        .expect("run");
    let overview = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!overview.contains("not made yet"), "{overview}");
    assert!(overview.contains("Sessions: 1"), "{overview}");

    let port = dead_port();
    let out = bench.run(&[
        "--store",
        &format!("postgres://postgres@127.0.0.1:{port}/x"),
        "sessions",
        "list",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = bench.run(&["--store", "mysql://x/y", "sessions", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("postgres://"), "{err}");
}

/// Free text with NUL in it (PostgreSQL's text cannot hold U+0000; SQLite's can) is
/// stored with the replacement character instead of failing the write: a label, an
/// exchange's message, and a transcript under a session id with NUL in it (the engine's
/// merge staging ids have one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_with_nul_is_stored_not_refused() {
    let Some(cluster) = pg::cluster_or_skip("text_with_nul_is_stored_not_refused") else {
        return;
    };
    let store = PgStore::open(&pg::fresh_database(cluster)).expect("open");
    let s = session("agent:main:main");
    store
        .create_session(s.clone(), json!({"type": "session"}))
        .await
        .expect("create");
    let updated = store
        .update_session(
            &s.key,
            Box::new(|s| {
                s.entry.label = Some("a\0b".into());
                Ok(())
            }),
        )
        .await
        .expect("a label with NUL is stored");
    assert_eq!(updated.entry.label.as_deref(), Some("a\0b"));
    let keys = store.keys_by_label("a\0b").await.expect("by label");
    assert_eq!(
        keys,
        std::slice::from_ref(&s.key),
        "the label is found as it was given"
    );
    store
        .start_exchange(switchboard_store::NewExchange {
            exchange_id: "x1".into(),
            chain_id: "c".into(),
            requester: "agent:main:main".into(),
            target: "agent:main:main".into(),
            message: "hello\0there".into(),
            run_id: "r1".into(),
            owner: "o".into(),
            started_at: 1,
        })
        .await
        .expect("a message with NUL is stored");
    let (x, _) = store
        .exchange_with_runs("x1")
        .await
        .expect("read")
        .expect("exchange");
    assert_eq!(x.message, "hello\u{FFFD}there");
    let staging = "sid\0merge".to_string();
    store
        .stage_lines(
            staging.clone(),
            0,
            true,
            vec![switchboard_store::RawLine::from_value(
                &json!({"type": "message", "id": "l1"}),
            )],
        )
        .await
        .expect("lines under an id with NUL are staged");
    assert_eq!(
        store.line_identities(&staging).await.expect("identities"),
        [(0, "id:l1".to_string())]
    );
    store
        .discard_orphan_lines(staging.clone())
        .await
        .expect("discard");
    assert!(
        store
            .line_identities(&staging)
            .await
            .expect("identities")
            .is_empty()
    );
}

/// The server restarted under a running store: while it is down a write fails at once as
/// `Unavailable` naming the server (no hang), and once it is back the same store reads
/// and writes again by itself, having lost nothing it acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_fails_requests_clearly_then_the_store_recovers() {
    let Some(cluster) = pg::private_cluster_or_skip("a_restarted_server") else {
        return;
    };
    let store = PgStore::open(&pg::fresh_database(&cluster)).expect("open");
    let s = session("agent:main:main");
    store
        .create_session(s.clone(), json!({"type": "session"}))
        .await
        .expect("create");
    let first = NewLine::message(json!({"role": "user", "content": "before"}));
    store
        .submit_append(&s.key, vec![first])
        .await
        .expect("append before");

    cluster.stop();
    let down = NewLine::message(json!({"role": "user", "content": "while down"}));
    let err = store
        .submit_append(&s.key, vec![down])
        .await
        .expect_err("the server is down");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{}", cluster.port)),
        "{err}"
    );
    let err = store.count_sessions().await.expect_err("reads fail too");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");

    cluster.start();
    let after = NewLine::message(json!({"role": "user", "content": "after"}));
    store
        .submit_append(&s.key, vec![after])
        .await
        .expect("the writer reconnects by itself");
    let texts: Vec<String> = store
        .transcript_tail(&s.entry.session_id, 10, true)
        .await
        .expect("the readers reconnect by itself")
        .iter()
        .map(|r| {
            r.line["message"]["content"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(texts, ["before", "after"]);
}

/// `storage.url` that is not a `postgres://` URL is a config problem naming the key and
/// what a URL looks like, for `config check` and for any command (no PostgreSQL needed).
#[test]
fn a_storage_url_that_is_not_postgres_is_a_config_problem() {
    let b = CliBench::new("{\n  storage: {\n    url: \"mysql://db/x\",\n  },\n}\n");
    for args in [&["config", "check"][..], &["sessions", "list"][..]] {
        let out = b.run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("storage.url") && err.contains("postgres://USER"),
            "{args:?}: {err}"
        );
    }
}

/// Two stores (two processes) creating the same new session, and recording the same
/// idempotency key, at the same moment: the session is created once and both calls
/// succeed; the key is recorded once and the other call is told it is taken (neither fails
/// on the other's insert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_creating_one_session_or_key_at_once_both_succeed_once() {
    let Some(cluster) = pg::cluster_or_skip("two_stores_creating_one_session") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let a = PgStore::open(&url).expect("open a");
    let b = PgStore::open(&url).expect("open b");
    for i in 0..20 {
        let s = session(&format!("agent:main:new{i}"));
        let header = json!({"type": "session"});
        let (x, y) = tokio::join!(
            a.create_session(s.clone(), header.clone()),
            b.create_session(s.clone(), header)
        );
        let (x, y) = (x.expect("a creates"), y.expect("b creates"));
        assert!(x.1 ^ y.1, "created exactly once: {} {}", x.1, y.1);

        let inbound = |now: i64| switchboard_store::InboundWrite {
            key: s.key.clone(),
            line: NewLine::message(json!({"role": "user", "content": "hi"})),
            run: None,
            idempotency: Some(switchboard_store::KeyRow {
                key: format!("key-{i}"),
                session_key: s.key.to_string(),
                message_hash: "h".into(),
                run_id: None,
                seq: 0,
                command_reply: None,
                created_at: now,
            }),
            now,
        };
        let now = switchboard_types::api::time::now_ms();
        let (x, y) = tokio::join!(
            a.submit_inbound(inbound(now)),
            b.submit_inbound(inbound(now))
        );
        let (x, y) = (x.expect("a records"), y.expect("b records"));
        assert!(x.is_ok() ^ y.is_ok(), "the key is recorded exactly once");
    }
}

/// `switchboard backup` on a PostgreSQL store says to use pg_dump instead of backing up a
/// state folder that holds no data (no PostgreSQL needed: it refuses before connecting).
#[test]
fn backup_on_postgres_points_to_pg_dump() {
    let b = CliBench::new("{}");
    let out_file = b.state.with_extension("backup.db");
    let out = b.run(&[
        "--store",
        &format!("postgres://postgres@127.0.0.1:{}/x", dead_port()),
        "backup",
        "--out",
        out_file.to_str().expect("utf-8 path"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("pg_dump"), "{err}");
    assert!(!out_file.exists());
}

/// `store check` on a PostgreSQL store checks the database (it reported a missing state
/// folder, then that it covered SQLite only); one that cannot be reached is named, at once.
#[test]
fn store_check_on_an_unreachable_postgres_names_it() {
    let b = CliBench::new("{}");
    let port = dead_port();
    let out = b.run(&[
        "--store",
        &format!("postgres://postgres@127.0.0.1:{port}/x"),
        "store",
        "check",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot check the PostgreSQL store")
            && err.contains(&format!("127.0.0.1:{port}"))
            && err.contains("cannot be reached"),
        "{err}"
    );
}

/// The session counters kept by triggers (schema 2) agree with the rows after inserts, an
/// upsert changing a kind, archiving, the reserved keys and deletes, so a list's totals can
/// be summed from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_counters_follow_every_write() {
    let Some(cluster) = pg::cluster_or_skip("the_session_counters_follow_every_write") else {
        return;
    };
    let db = pg::fresh_database(cluster);
    let store = PgStore::open(&db).expect("open");
    for key in [
        "agent:main:a",
        "agent:main:b",
        "agent:main:c",
        "global",
        "unknown",
    ] {
        store
            .create_session(session(key), json!({"type": "session"}))
            .await
            .expect("create");
    }
    store
        .update_session(
            &SessionKey::from_canonical("agent:main:b".to_string()),
            Box::new(|s| {
                s.kind = SessionKind::Group;
                s.entry.archived_at = Some(5);
                Ok(())
            }),
        )
        .await
        .expect("update");
    assert!(
        store
            .delete_session(&SessionKey::from_canonical("agent:main:c".to_string()))
            .await
            .expect("delete")
    );
    assert_eq!(store.count_sessions().await.expect("count"), 4);
    let name = db.rsplit('/').next().unwrap_or_default().to_string();
    let counted = cluster.rows(
        &name,
        "SELECT kind, archived, slot, n FROM session_counts WHERE n <> 0 ORDER BY 1, 2, 3",
    );
    let walked = cluster.rows(
        &name,
        "SELECT kind, archived_at IS NOT NULL, \
         CASE WHEN key IN ('unknown', 'global') THEN key ELSE '' END, count(*) \
         FROM sessions GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    );
    assert_eq!(counted, walked);
}

/// contrib/postgresql/setup.sql as the README says to run it: the role and database it makes
/// are enough for Switchboard to migrate its schema and write, as that role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_setup_makes_a_database_switchboard_can_use() {
    let Some(cluster) = pg::cluster_or_skip("the_sample_setup") else {
        return;
    };
    let setup =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/postgresql/setup.sql");
    cluster.script("postgres", &setup, &[("password", "'sample secret'")]);
    let url = format!(
        "postgres://switchboard:sample%20secret@127.0.0.1:{}/switchboard",
        cluster.port
    );
    let store = PgStore::open(&url).expect("the sample role opens and migrates its database");
    let s = session("agent:main:main");
    store
        .create_session(s.clone(), json!({"type": "session"}))
        .await
        .expect("the sample role writes");
    assert_eq!(store.count_sessions().await.expect("count"), 1);
    assert_eq!(
        cluster.sql(
            "switchboard",
            "SELECT tableowner FROM pg_tables WHERE tablename = 'sessions'"
        ),
        "switchboard",
        "the tables belong to the sample role"
    );
}
