//! The sessions total a page reports (`sessions.list` with `count: true`) comes from counters
//! the database keeps (schema 5) instead of a count over 100,000 index entries. These tests
//! hold the counters to the old definition: after any mix of writes through the storage's
//! own write paths, and after an older state folder is upgraded, the total is what
//! `SELECT count(*)` with the page's rules says, for every filter a page can ask for.

use std::path::Path;

use proptest::prelude::*;
use rusqlite::{Connection, params};
use switchboard_store_sqlite::queries::{self, NewLine, PageFilter, StoredSession};
use switchboard_store_sqlite::{DB_FILE, SCHEMA_VERSION, Storage};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::{KeyScheme, SessionKey, SessionKind};

/// Keys the operations pick from: the two reserved keys the page hides or shows, and a few
/// ordinary ones, so collisions (updates of an existing row) are frequent.
const KEYS: [&str; 7] = [
    "unknown",
    "global",
    "agent:main:main",
    "agent:main:dm-1",
    "agent:ops:dm-2",
    "agent:main:cron:job3",
    "agent:main:telegram:group:4",
];

#[derive(Debug, Clone)]
enum Op {
    /// Create, or rewrite an existing session (the writer's upsert): any kind, archived or not.
    Put {
        key: usize,
        kind: usize,
        archived: bool,
        updated_at: i64,
    },
    Delete {
        key: usize,
    },
    /// An append: bumps `updated_at` only (on a session that exists).
    Append {
        key: usize,
        now: i64,
    },
    /// The kind-basis rewrite on open: every row's kind recomputed from a key scheme.
    Reclassify {
        main_key: bool,
        global_scope: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS.len(), 0..SessionKind::ALL.len(), any::<bool>(), 0i64..100).prop_map(
            |(key, kind, archived, updated_at)| Op::Put { key, kind, archived, updated_at }
        ),
        2 => (0..KEYS.len()).prop_map(|key| Op::Delete { key }),
        1 => (0..KEYS.len(), 0i64..200).prop_map(|(key, now)| Op::Append { key, now }),
        1 => (any::<bool>(), any::<bool>())
            .prop_map(|(main_key, global_scope)| Op::Reclassify { main_key, global_scope }),
    ]
}

fn session(key: &str, kind: SessionKind, archived: bool, updated_at: i64) -> StoredSession {
    StoredSession {
        key: SessionKey::from_canonical(key),
        agent_id: "main".into(),
        kind,
        entry: SessionEntry {
            session_id: format!("sid-{key}"),
            updated_at,
            archived_at: archived.then_some(1_700_000_000_000),
            ..SessionEntry::default()
        },
    }
}

/// Close the state folder and open it again, as the engine does: the kind-basis rewrite
/// runs on open, before the writer starts, and rewrites every row's kind when the key
/// scheme changed.
fn reopen(state: &Path, main_key: bool, global_scope: bool) -> Storage {
    let scheme = KeyScheme {
        main_key: if main_key { "main" } else { "dm-1" }.into(),
        global_scope,
        ..KeyScheme::default()
    };
    Storage::open_prepared(state, |c| queries::reclassify_if_needed(c, &scheme)).expect("reopen")
}

fn apply(storage: &Storage, op: &Op) {
    let op = op.clone();
    storage
        .write_blocking(move |c| {
            match &op {
                Op::Put {
                    key,
                    kind,
                    archived,
                    updated_at,
                } => queries::put_session(
                    c,
                    &session(KEYS[*key], SessionKind::ALL[*kind], *archived, *updated_at),
                )?,
                Op::Delete { key } => {
                    queries::delete_session(c, &SessionKey::from_canonical(KEYS[*key]))?;
                }
                Op::Append { key, now } => {
                    let key = SessionKey::from_canonical(KEYS[*key]);
                    if queries::get_session(c, &key)?.is_some() {
                        let line = NewLine::message(serde_json::json!({"role": "user"}));
                        queries::append_lines(c, &key, &[line], *now)?;
                    }
                }
                Op::Reclassify { .. } => unreachable!("done on open, by `reopen`"),
            }
            Ok(())
        })
        .expect("write");
}

/// Every filter a page can ask for: each kind or none, archived shown or not, `global`
/// shown or not, with and without an `updated_since` (which keeps the range count).
fn filters() -> Vec<PageFilter> {
    let mut out = Vec::new();
    for kind in std::iter::once(None).chain(SessionKind::ALL.into_iter().map(Some)) {
        for since in [None, Some(50)] {
            for archived in [false, true] {
                for show_global in [false, true] {
                    out.push(PageFilter {
                        kind,
                        updated_since: since,
                        archived,
                        show_global,
                        by_name: false,
                    });
                }
            }
        }
    }
    out
}

/// The total as defined before the counters: a count over the table with the page's rules.
fn counted(c: &Connection, f: &PageFilter) -> u64 {
    c.query_row(
        "SELECT count(*) FROM sessions WHERE (?1 IS NULL OR kind = ?1)
         AND (?2 IS NULL OR updated_at >= ?2) AND (?3 OR archived_at IS NULL)
         AND key != 'unknown' AND (?4 OR key != 'global')",
        params![
            f.kind.map(|k| k.as_str()),
            f.updated_since,
            f.archived,
            f.show_global
        ],
        |r| r.get::<_, i64>(0),
    )
    .expect("count") as u64
}

/// For every filter: the page's total equals the old count and the number of keys a
/// walk of the whole list returns.
fn assert_totals(storage: &Storage, after: &str) {
    for f in filters() {
        let (total, keys, want) = storage
            .read(|c| {
                let page = queries::page_sessions(c, &f, 0, 1000, true, false)?;
                Ok((page.matching, page.rows, counted(c, &f)))
            })
            .expect("read");
        assert_eq!(total, Some(want), "total for {f:?} after {after}");
        assert_eq!(
            keys.len() as u64,
            want,
            "keys listed for {f:?} after {after}"
        );
    }
    let (all, want) = storage
        .read(|c| {
            let want: i64 = c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?;
            Ok((queries::count_sessions(c)?, want as u64))
        })
        .expect("read");
    assert_eq!(all, want, "every session after {after}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_total_from_counters_is_the_counted_total_after_any_writes(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut storage = Storage::open(dir.path()).expect("open");
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Reclassify { main_key, global_scope } => {
                    drop(storage);
                    storage = reopen(dir.path(), *main_key, *global_scope);
                }
                _ => apply(&storage, op),
            }
            assert_totals(&storage, &format!("op {i} {op:?}"));
        }
    }
}

/// Turn a current state folder into one of the schema before the counters (schema 4 is
/// schema 5 without `session_counts` and its triggers; schema 6's exchange columns and
/// schema 7's name order go too).
fn downgrade_to_schema_4(state: &Path) {
    let c = Connection::open(state.join(DB_FILE)).expect("open db");
    c.execute_batch(crate::common::UNDO_SCHEMAS_13_12)
        .expect("undo schemas 13 and 12");
    c.execute_batch(
        "DROP TRIGGER sessions_rev_insert;
         DROP TRIGGER sessions_rev_update;
         DROP TABLE session_revs;
         ALTER TABLE sessions DROP COLUMN rev;
         DROP TABLE idempotency_keys;
         DROP TABLE import_marks;
         DROP INDEX sessions_by_name;
         DROP INDEX sessions_by_kind_name;
         ALTER TABLE sessions DROP COLUMN name_key;
         DROP INDEX flows_by_started;
         DROP INDEX flows_by_requester;
         DROP INDEX flows_by_target;
         DROP INDEX runs_by_flow;
         ALTER TABLE flows DROP COLUMN kind;
         ALTER TABLE flows DROP COLUMN detail;
         ALTER TABLE flows DROP COLUMN announce;
         ALTER TABLE flows DROP COLUMN announce_text;
         ALTER TABLE flows DROP COLUMN announce_channel;
         ALTER TABLE flows DROP COLUMN announce_to;
         ALTER TABLE flows DROP COLUMN announce_detail;
         DROP TRIGGER session_counts_insert;
         DROP TRIGGER session_counts_delete;
         DROP TRIGGER session_counts_update;
         DROP TABLE session_counts;
         PRAGMA user_version = 4;",
    )
    .expect("downgrade");
}

/// A state folder written before the counters existed opens, is upgraded in place, and
/// reports the same totals as the count; writes after the upgrade keep them exact.
#[test]
fn a_schema_4_state_folder_upgrades_and_counts_right() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let storage = Storage::open(dir.path()).expect("open");
        let rows = [
            ("unknown", SessionKind::Other, false),
            ("global", SessionKind::Main, false),
            ("agent:main:main", SessionKind::Main, false),
            ("agent:main:dm-1", SessionKind::Other, true),
            ("agent:ops:dm-2", SessionKind::Other, false),
            ("agent:main:cron:job3", SessionKind::Cron, true),
            ("agent:main:telegram:group:4", SessionKind::Group, false),
        ];
        for (i, (key, kind, archived)) in rows.into_iter().enumerate() {
            storage
                .write_blocking(move |c| {
                    queries::put_session(c, &session(key, kind, archived, 10 * i as i64))
                })
                .expect("put");
        }
    }
    downgrade_to_schema_4(dir.path());

    let storage = Storage::open(dir.path()).expect("reopen and upgrade");
    let version: i64 = storage
        .read(|c| Ok(c.pragma_query_value(None, "user_version", |r| r.get(0))?))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
    assert_totals(&storage, "the upgrade");
    let all = storage
        .read(|c| {
            queries::page_sessions(
                c,
                &PageFilter {
                    archived: true,
                    show_global: true,
                    ..PageFilter::default()
                },
                0,
                1,
                true,
                false,
            )
        })
        .expect("page");
    assert_eq!(all.matching, Some(6), "every session but `unknown`");

    apply(&storage, &Op::Delete { key: 3 });
    apply(
        &storage,
        &Op::Put {
            key: 5,
            kind: 0,
            archived: false,
            updated_at: 99,
        },
    );
    assert_totals(&storage, "writes after the upgrade");
}
