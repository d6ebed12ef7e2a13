//! Archived sessions (`archivedAt` set): hidden from `sessions_list` and `sessions list`
//! unless asked for, marked `archived: true` when shown, still readable by `sessions_history`.

use crate::common;

use common::CliBench;
use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::store::SessionInit;
use switchboard_engine::tools::{ToolContext, ToolError, ToolInputError};
use switchboard_store_sqlite::queries::NewLine;
use switchboard_types::key::SessionKey;

/// The requester the tool tests call as.
const ME: &str = "agent:main:main";

use common::{Bench, bench};

/// Visibility `agent`: every session of agent `main` is visible to `ME`.
fn agent_wide() -> Bench {
    bench(json!({ "tools": { "sessions": { "visibility": "agent" } } }))
}

fn key(raw: &str) -> SessionKey {
    SessionKey::from_canonical(raw)
}

async fn ensure(engine: &Engine, k: &str, init: SessionInit) -> String {
    let (s, _) = engine.store().ensure(&key(k), init).await.expect("ensure");
    s.entry.session_id
}

async fn archive(engine: &Engine, k: &str) {
    engine
        .store()
        .patch(&key(k), |e| {
            e.archived_at = Some(1);
            Ok(())
        })
        .await
        .expect("patch");
}

/// This file's helpers on the shared bench (a trait, not an inherent `impl`: the tools
/// tests in this binary give `Bench` inherent methods of the same names).
trait Archived {
    async fn session(&self, k: &str) -> String;
    async fn child(&self, k: &str, parent: &str) -> String;
    async fn archive(&self, k: &str);
    async fn try_call(&self, tool: &str, params: Value) -> Result<Value, ToolError>;
    async fn call(&self, tool: &str, params: Value) -> Value;
}

impl Archived for Bench {
    async fn session(&self, k: &str) -> String {
        ensure(&self.engine, k, SessionInit::default()).await
    }

    async fn child(&self, k: &str, parent: &str) -> String {
        let init = SessionInit {
            spawned_by: Some(key(parent)),
            ..SessionInit::default()
        };
        ensure(&self.engine, k, init).await
    }

    async fn archive(&self, k: &str) {
        archive(&self.engine, k).await;
    }

    async fn try_call(&self, tool: &str, params: Value) -> Result<Value, ToolError> {
        let ctx = ToolContext::new(key(ME), false);
        self.engine.call_tool(tool, &params, &ctx).await
    }

    async fn call(&self, tool: &str, params: Value) -> Value {
        self.try_call(tool, params)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
    }
}

/// The row keys of a `sessions_list` result, sorted, checking that `count` matches.
fn keys(list: &Value) -> Vec<String> {
    let rows = list["sessions"].as_array().expect("sessions array");
    assert_eq!(list["count"], json!(rows.len()));
    let mut keys: Vec<String> = rows
        .iter()
        .map(|r| r["key"].as_str().expect("row key").to_string())
        .collect();
    keys.sort();
    keys
}

fn row<'a>(list: &'a Value, k: &str) -> &'a Value {
    list["sessions"]
        .as_array()
        .expect("sessions array")
        .iter()
        .find(|r| r["key"] == k)
        .unwrap_or_else(|| panic!("no row {k} in {list}"))
}

#[tokio::test]
async fn archived_sessions_are_hidden_unless_included() {
    let b = agent_wide();
    b.session(ME).await;
    b.session("agent:main:old").await;
    b.session("agent:main:new").await;
    b.archive("agent:main:old").await;

    let list = b.call("sessions_list", json!({})).await;
    assert_eq!(keys(&list), ["agent:main:main", "agent:main:new"]);
    let explicit = b
        .call("sessions_list", json!({ "includeArchived": false }))
        .await;
    assert_eq!(keys(&explicit), keys(&list));

    let all = b
        .call("sessions_list", json!({ "includeArchived": true }))
        .await;
    assert_eq!(
        keys(&all),
        ["agent:main:main", "agent:main:new", "agent:main:old"]
    );
    assert_eq!(row(&all, "agent:main:old")["archived"], true);
    // Every row says whether it is archived (OpenClaw 2026.9.6's row).
    assert_eq!(row(&all, "agent:main:new")["archived"], false);
    assert_eq!(row(&list, "agent:main:new")["archived"], false);
}

#[tokio::test]
async fn archived_sessions_do_not_use_up_the_limit() {
    let b = agent_wide();
    b.session(ME).await;
    // Created last, so newest: a limit applied before the filter would return nothing.
    for k in ["agent:main:a1", "agent:main:a2", "agent:main:a3"] {
        b.session(k).await;
        b.archive(k).await;
    }
    let list = b.call("sessions_list", json!({ "limit": 1 })).await;
    assert_eq!(keys(&list), [ME]);
    let all = b
        .call(
            "sessions_list",
            json!({ "limit": 2, "includeArchived": true }),
        )
        .await;
    assert_eq!(keys(&all).len(), 2);
}

#[tokio::test]
async fn an_archived_child_under_another_agent_is_hidden_too() {
    // Visibility `agent` without agent-to-agent: other agents' sessions are scanned only as
    // the requester's tree, a second scan that must apply the same filter.
    let b = agent_wide();
    b.session(ME).await;
    let child = "agent:work:subagent:7d1b5e0c-2f4a-4c7e-8a55-0d9e6b1c3a21";
    b.child(child, ME).await;
    let list = b.call("sessions_list", json!({})).await;
    assert_eq!(keys(&list), [ME, child]);

    b.archive(child).await;
    let list = b.call("sessions_list", json!({})).await;
    assert_eq!(keys(&list), [ME]);
    let all = b
        .call("sessions_list", json!({ "includeArchived": true }))
        .await;
    assert_eq!(keys(&all), [ME, child]);
    assert_eq!(row(&all, child)["archived"], true);
}

#[tokio::test]
async fn include_archived_must_be_a_boolean() {
    let b = agent_wide();
    let err = b
        .try_call("sessions_list", json!({ "includeArchived": "yes" }))
        .await
        .expect_err("a string is not a boolean");
    assert!(
        matches!(err, ToolError::Input(ToolInputError::Invalid(_))),
        "{err}"
    );
}

#[tokio::test]
async fn history_still_reads_an_archived_session() {
    // Default visibility (`tree`): the archived session is the requester's spawned child,
    // the usual case (sub-agent sessions are archived after they finish).
    let b = bench(json!({}));
    b.session(ME).await;
    let child = "agent:main:subagent:3c9a2f4e-1b7d-4e6a-9c0f-5a8b7d2e1f34";
    let id = b.child(child, ME).await;
    b.engine
        .store()
        .append(
            &key(child),
            vec![NewLine::message(
                json!({ "role": "assistant", "content": [{ "type": "text", "text": "done" }] }),
            )],
        )
        .await
        .expect("append");
    b.archive(child).await;

    assert_eq!(
        keys(&b.call("sessions_list", json!({})).await),
        [ME],
        "hidden from the list"
    );
    for reference in [child.to_string(), id] {
        let h = b
            .call("sessions_history", json!({ "sessionKey": reference }))
            .await;
        assert_eq!(h["sessionKey"], child, "{h}");
        assert_eq!(h["messages"][0]["content"][0]["text"], "done", "{h}");
    }
}

// ---------------------------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------------------------

/// Archive `k` in the bench's state folder through the library, then let the engine go so
/// the binary runs alone.
fn archive_in(bench: &CliBench, k: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let config: Config = serde_json::from_value(json!({})).expect("config");
        let engine = crate::common::open_engine(&bench.state, config).expect("engine opens");
        archive(&engine, k).await;
    });
}

fn table_line<'a>(table: &'a str, k: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(k))
}

#[test]
fn cli_list_hides_archived_sessions_unless_asked() {
    let b = CliBench::new("{}");
    b.ok(&["inject", "agent:main:main", "hello"]);
    b.ok(&[
        "inject",
        "agent:main:discord:group:7",
        "standup",
        "--channel",
        "discord",
        "--chat-type",
        "group",
        "--display-name",
        "#standup",
    ]);
    b.ok(&["inject", "agent:main:cron:nightly", "run"]);
    archive_in(&b, "agent:main:discord:group:7");
    archive_in(&b, "agent:main:cron:nightly");

    let table = b.ok(&["sessions", "list"]);
    assert!(table_line(&table, "agent:main:main").is_some(), "{table}");
    assert!(
        table_line(&table, "agent:main:discord:group:7").is_none(),
        "{table}"
    );
    assert!(!table.contains("(archived)"), "{table}");

    let table = b.ok(&["sessions", "list", "--archived"]);
    let group = table_line(&table, "agent:main:discord:group:7").expect("archived group listed");
    assert!(group.ends_with(" #standup (archived)"), "{group:?}");
    let cron = table_line(&table, "agent:main:cron:nightly").expect("archived cron listed");
    assert!(cron.ends_with(" (archived)"), "{cron:?}");
    let main = table_line(&table, "agent:main:main").expect("main listed");
    assert!(!main.contains("(archived)"), "{main:?}");

    let rows = b.json(&["sessions", "list", "--json"]);
    let shown: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["key"].as_str().expect("key"))
        .collect();
    assert_eq!(shown, ["agent:main:main"]);

    let rows = b.json(&["sessions", "list", "--json", "--archived"]);
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    for r in rows {
        let archived = r["key"] != "agent:main:main";
        assert_eq!(r.get("archived") == Some(&json!(true)), archived, "{r}");
    }
}

#[test]
fn cli_list_says_when_only_archived_sessions_exist() {
    let b = CliBench::new("{}");
    b.ok(&["inject", "agent:main:cron:nightly", "run"]);
    archive_in(&b, "agent:main:cron:nightly");
    let out = b.ok(&["sessions", "list"]);
    assert!(out.contains("add --archived"), "{out}");
    assert!(!out.contains("No sessions yet"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// The API's sessions page (the console's and the CLI's listing)
// ---------------------------------------------------------------------------------------------

use switchboard_types::api::{SessionsApi, SessionsPage, SessionsQuery};

/// Every page of `query` at `limit` rows, checking that each page but the last is full and
/// that every page's `matching` is the number of rows over all pages.
async fn all_pages(engine: &Engine, query: SessionsQuery, limit: usize) -> Vec<SessionsPage> {
    let mut pages: Vec<SessionsPage> = Vec::new();
    loop {
        let offset = pages.iter().map(|p| p.rows.len()).sum();
        let page = engine
            .sessions(SessionsQuery {
                offset,
                limit,
                count: true,
                ..query.clone()
            })
            .await
            .expect("page");
        let done = page.rows.len() < limit;
        pages.push(page);
        assert!(pages.len() <= 20, "paging does not end");
        if done {
            break;
        }
    }
    let listed: usize = pages.iter().map(|p| p.rows.len()).sum();
    for (i, p) in pages.iter().enumerate() {
        assert_eq!(p.matching, Some(listed as u64), "page {i} of {limit}");
        if i + 1 < pages.len() {
            assert_eq!(p.rows.len(), limit, "page {i} of {limit} is short");
        }
    }
    pages
}

fn page_keys(pages: &[SessionsPage]) -> Vec<String> {
    let mut keys: Vec<String> = pages
        .iter()
        .flat_map(|p| p.rows.iter().map(|r| r.key.clone()))
        .collect();
    keys.sort();
    keys
}

/// Sessions `agent:main:s1..s5` and `ME`, with s2 and s4 archived by their entry alone (as
/// an imported OpenClaw session is: `archivedAt` set, no spawn record).
async fn entry_archived_bench() -> Bench {
    let b = agent_wide();
    b.session(ME).await;
    for i in 1..=5 {
        b.session(&format!("agent:main:s{i}")).await;
    }
    b.archive("agent:main:s2").await;
    b.archive("agent:main:s4").await;
    b
}

#[tokio::test]
async fn the_api_page_leaves_out_entry_archived_sessions_and_counts_what_it_lists() {
    let b = entry_archived_bench().await;
    let live = [ME, "agent:main:s1", "agent:main:s3", "agent:main:s5"];
    for limit in 1..=4 {
        let pages = all_pages(&b.engine, SessionsQuery::default(), limit).await;
        assert_eq!(page_keys(&pages), live, "limit {limit}");
        // One kind goes the same index path.
        let rows: Vec<_> = pages.iter().flat_map(|p| &p.rows).collect();
        let kind = rows
            .iter()
            .find(|r| r.key == "agent:main:s1")
            .expect("s1")
            .kind;
        let mut of_kind: Vec<String> = rows
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.key.clone())
            .collect();
        of_kind.sort();
        let query = SessionsQuery {
            kinds: vec![kind],
            ..SessionsQuery::default()
        };
        let pages = all_pages(&b.engine, query, limit).await;
        assert_eq!(page_keys(&pages), of_kind, "one kind, limit {limit}");
    }
}

#[tokio::test]
async fn the_api_page_shows_entry_archived_sessions_when_asked_and_marks_them() {
    let b = entry_archived_bench().await;
    let query = SessionsQuery {
        archived: true,
        ..SessionsQuery::default()
    };
    for limit in 1..=4 {
        let pages = all_pages(&b.engine, query.clone(), limit).await;
        assert_eq!(page_keys(&pages).len(), 6, "limit {limit}");
        for r in pages.iter().flat_map(|p| &p.rows) {
            let archived = r.key == "agent:main:s2" || r.key == "agent:main:s4";
            assert_eq!(r.archived, archived, "{}", r.key);
        }
    }
    // The text path agrees with the index path.
    let text = SessionsQuery {
        text: "agent:main:".into(),
        ..SessionsQuery::default()
    };
    let pages = all_pages(&b.engine, text, 2).await;
    assert_eq!(
        page_keys(&pages),
        [ME, "agent:main:s1", "agent:main:s3", "agent:main:s5"]
    );
}

/// A state folder written by the build before the `archived_at` column (schema 3): its
/// archived entries carry `archivedAt` in the JSON only. Opening it fills the column, and the
/// page leaves them out.
#[tokio::test]
async fn a_schema_3_database_with_an_archived_entry_opens_and_the_page_hides_it() {
    if crate::common::on_postgres(
        "a_schema_3_database_with_an_archived_entry_opens_and_the_page_hides_it",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = || -> Config { serde_json::from_value(json!({})).expect("config") };
    {
        let engine = crate::common::open_engine(dir.path(), config()).expect("engine opens");
        for k in [ME, "agent:main:old", "agent:main:new"] {
            ensure(&engine, k, SessionInit::default()).await;
        }
    }
    let db = dir.path().join("switchboard.db");
    {
        // Back to schema 3's shape (schema 7's name order, 6's exchange columns and 5's counters
        // first: their indexes and triggers read the column), then archive as that build stored it: in the entry.
        let conn = rusqlite::Connection::open(&db).expect("open db");
        conn.execute_batch(crate::common::UNDO_SCHEMAS_13_12)
            .expect("undo schemas 13 and 12");
        conn.execute_batch(
            "DROP TRIGGER sessions_rev_insert;
             DROP TRIGGER sessions_rev_update;
             DROP TABLE session_revs;
             ALTER TABLE sessions DROP COLUMN rev;
             DROP TABLE idempotency_keys;
             DROP TABLE import_marks;
             DROP INDEX sessions_by_name;
             DROP INDEX sessions_by_kind_name;
             DROP INDEX sessions_by_updated;
             CREATE INDEX sessions_by_updated ON sessions(updated_at DESC);
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
             DROP INDEX sessions_archived;
             ALTER TABLE sessions DROP COLUMN archived_at;
             PRAGMA user_version = 3;
             UPDATE sessions SET entry = json_set(entry, '$.archivedAt', 1700000000000)
               WHERE key = 'agent:main:old';",
        )
        .expect("back to schema 3");
    }
    let engine = crate::common::open_engine(dir.path(), config()).expect("a schema 3 folder opens");
    let page = engine
        .sessions(SessionsQuery {
            limit: 10,
            count: true,
            ..SessionsQuery::default()
        })
        .await
        .expect("page");
    let mut keys: Vec<&str> = page.rows.iter().map(|r| r.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, [ME, "agent:main:new"]);
    assert_eq!(page.matching, Some(2));

    let conn = rusqlite::Connection::open(&db).expect("open db");
    let filled: Vec<(String, Option<i64>)> = conn
        .prepare("SELECT key, archived_at FROM sessions ORDER BY key")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(
        filled,
        [
            ("agent:main:main".to_string(), None),
            ("agent:main:new".to_string(), None),
            ("agent:main:old".to_string(), Some(1_700_000_000_000)),
        ]
    );
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("version");
    assert_eq!(version, switchboard_store_sqlite::SCHEMA_VERSION);
}
