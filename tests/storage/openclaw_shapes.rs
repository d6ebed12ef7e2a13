//! `sessions_list` and `sessions_history` against what a real OpenClaw 2026.9.6 gateway
//! returned for the same state (`tests/fixtures/openclaw-2026.9.6-state/expected/`).
//!
//! The fixture's per-agent SQLite is read here (read-only) and written out as the legacy
//! layout (`sessions.json` + `<sessionId>.jsonl`, the same entries and lines), which the
//! engine imports; the tools' results are then compared field by field with the recorded
//! ones. What differs by nature (nothing here: ids and times are the fixture's own) or by
//! decision (docs/ARCHITECTURE.md, "OpenClaw 2026.9.6 result shapes") is named below.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use switchboard_config::{Config, Visibility};
use switchboard_engine::Engine;
use switchboard_engine::tools::ToolContext;
use switchboard_types::key::SessionKey;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6-state")
}

fn expected(name: &str) -> Value {
    let path = fixture().join("expected").join(format!("{name}.json"));
    serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap()
}

/// The fixture's sessions in the legacy layout under `out`.
fn legacy_copy(out: &Path) {
    for agent in ["main", "work"] {
        let db = fixture().join(format!("agents/{agent}/agent/openclaw-agent.sqlite"));
        let conn = rusqlite::Connection::open_with_flags(
            &db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        let dir = out.join(format!("agents/{agent}/sessions"));
        fs::create_dir_all(&dir).unwrap();
        let mut entries = Map::new();
        let mut nodes = conn
            .prepare("SELECT session_key, entry_json FROM session_nodes ORDER BY session_key")
            .unwrap();
        let rows: Vec<(String, String)> = nodes
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (key, entry) in rows {
            let entry: Value = serde_json::from_str(&entry).unwrap();
            let sid = entry["sessionId"].as_str().unwrap().to_string();
            let mut lines = conn
                .prepare(
                    "SELECT event_json FROM transcript_events WHERE session_id = ?1 ORDER BY seq",
                )
                .unwrap();
            let text: Vec<String> = lines
                .query_map([&sid], |r| r.get::<_, String>(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            fs::write(dir.join(format!("{sid}.jsonl")), text.join("\n") + "\n").unwrap();
            entries.insert(key, entry);
        }
        fs::write(
            dir.join("sessions.json"),
            serde_json::to_string_pretty(&Value::Object(entries)).unwrap(),
        )
        .unwrap();
    }
}

struct Bench {
    engine: Engine,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// An engine holding the fixture's 18 sessions, with the gateway's visibility (`all`).
async fn bench() -> Bench {
    let source = tempfile::tempdir().unwrap();
    legacy_copy(source.path());
    let state = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.tools.sessions.visibility = Visibility::All;
    config.tools.agent_to_agent.enabled = true;
    let engine = switchboard::state_folder::open_engine(state.path(), config).unwrap();
    let report = engine.import_openclaw(source.path()).await.unwrap();
    assert_eq!(report.sessions_imported, 18, "{report:?}");
    Bench {
        engine,
        _dirs: (source, state),
    }
}

impl Bench {
    async fn call(&self, tool: &str, requester: &str, args: &Value) -> Value {
        let ctx = ToolContext::new(SessionKey::from_canonical(requester), false);
        self.engine.call_tool(tool, args, &ctx).await.unwrap()
    }

    /// Our result for a recorded call: same tool, requester and arguments.
    async fn replay(&self, recorded: &Value) -> Value {
        let tool = recorded["tool"].as_str().unwrap();
        let requester = recorded["requester"].as_str().unwrap();
        self.call(tool, requester, &recorded["args"]).await
    }
}

/// Row fields 2026.9.6 returns that we do not (each is in docs/ARCHITECTURE.md).
const THEIRS_ONLY: [&str; 5] = [
    "stateVersion",
    "createdActor",
    "owner",
    "spawnedWorkspaceDir",
    "workspaceDir",
];

/// Fields 2026.9.6 fills from its configured defaults when the entry has none (a session
/// made by `sessions.create` and never run); we show only what the entry holds.
const THEIRS_DEFAULTED: [&str; 2] = ["model", "contextTokens"];

/// Row fields we return beyond 2026.9.6's tool rows: the spec's row (2026.5.28's shape,
/// which agents built on it read) and the lifecycle fields the entry holds.
const OURS_ONLY: [&str; 14] = [
    "spawnedBy",
    "sendPolicy",
    "transcriptPath",
    "lastChannel",
    "lastTo",
    "deliveryContext",
    "systemSent",
    "thinkingLevel",
    "verboseLevel",
    "origin",
    "startedAt",
    "endedAt",
    "runtimeMs",
    "estimatedCostUsd",
];

/// Every difference between one of our rows and theirs, as readable lines.
fn row_differences(ours: &Value, theirs: &Value) -> Vec<String> {
    let key = theirs["key"].as_str().unwrap_or("?");
    let mut out = Vec::new();
    let (o, t) = (ours.as_object().unwrap(), theirs.as_object().unwrap());
    for (name, want) in t {
        if THEIRS_ONLY.contains(&name.as_str())
            || (THEIRS_DEFAULTED.contains(&name.as_str()) && !o.contains_key(name))
        {
            continue;
        }
        match o.get(name) {
            Some(got) if got == want => {}
            got => out.push(format!("{key}.{name}: ours {got:?}, theirs {want}")),
        }
    }
    for name in o.keys() {
        if !t.contains_key(name) && !OURS_ONLY.contains(&name.as_str()) {
            out.push(format!("{key}.{name}: ours only ({})", o[name]));
        }
    }
    out
}

/// Compares a whole `sessions_list` result: the envelope, the rows in order, each row.
/// `childSessions` of `agent:main:main` is the one known gap (see ARCHITECTURE.md): its
/// children name it only in `parentSessionKey`.
fn list_differences(ours: &Value, theirs: &Value, compare_limit: bool) -> Vec<String> {
    let mut out = Vec::new();
    for name in ["count", "hasMore"] {
        if ours[name] != theirs[name] {
            out.push(format!(
                "{name}: ours {}, theirs {}",
                ours[name], theirs[name]
            ));
        }
    }
    if compare_limit && ours["limitApplied"] != theirs["limitApplied"] {
        out.push(format!(
            "limitApplied: ours {}, theirs {}",
            ours["limitApplied"], theirs["limitApplied"]
        ));
    }
    let keys = |v: &Value| -> Vec<String> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };
    if keys(ours) != keys(theirs) {
        out.push(format!(
            "rows: ours {:?}, theirs {:?}",
            keys(ours),
            keys(theirs)
        ));
        return out;
    }
    let ours_rows = ours["sessions"].as_array().unwrap();
    for (o, t) in ours_rows.iter().zip(theirs["sessions"].as_array().unwrap()) {
        let mut t = t.clone();
        if t["key"] == "agent:main:main" {
            t.as_object_mut().unwrap().remove("childSessions");
        }
        let mut o = o.clone();
        if o["key"] == "agent:main:main" {
            o.as_object_mut().unwrap().remove("childSessions");
        }
        // `messages` (messageLimit) are compared as history is, not here.
        let m_o = o.as_object_mut().unwrap().remove("messages");
        let m_t = t.as_object_mut().unwrap().remove("messages");
        if let (Some(m_o), Some(m_t)) = (m_o, m_t)
            && texts(&m_o) != texts(&m_t)
        {
            out.push(format!(
                "{}.messages: ours {:?}, theirs {:?}",
                t["key"],
                texts(&m_o),
                texts(&m_t)
            ));
        }
        out.extend(row_differences(&o, &t));
    }
    out
}

/// What a message says, normalised: the text (string content or text blocks joined).
/// OpenClaw 2026.9.6 also rewrites inter-session inputs (role `assistant`, the
/// `[Inter-session message]` preamble cut, a `senderLabel`); we keep them as stored (role
/// `user`, with provenance), so they are compared by their last line.
fn texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = switchboard_types::api::message_text(m);
            if m.get("provenance").is_some() {
                text.lines().last().unwrap_or_default().trim().to_string()
            } else {
                text
            }
        })
        .collect()
}

async fn assert_list_matches(b: &Bench, name: &str, compare_limit: bool) {
    let recorded = expected(name);
    let ours = b.replay(&recorded).await;
    let diffs = list_differences(&ours, &recorded["result"], compare_limit);
    assert!(diffs.is_empty(), "{name}:\n{}", diffs.join("\n"));
}

#[tokio::test]
async fn list_rows_match_openclaw_2026_9_6() {
    let b = bench().await;
    // Our default limit is 50 (theirs 100): the limit applied differs, the rows do not.
    assert_list_matches(&b, "sessions_list-default", false).await;
    assert_list_matches(&b, "sessions_list-default-from-work", false).await;
    assert_list_matches(&b, "sessions_list-kinds-main", false).await;
    assert_list_matches(&b, "sessions_list-includeLastMessage", false).await;
    assert_list_matches(&b, "sessions_list-limit2", true).await;
}

#[tokio::test]
async fn archived_sessions_are_listed_as_openclaw_lists_them() {
    let b = bench().await;
    assert_list_matches(&b, "sessions_list-archived-true", false).await;
    assert_list_matches(&b, "sessions_list-archived-all", false).await;
}

#[tokio::test]
async fn display_names_follow_openclaw() {
    let b = bench().await;
    let list = b.call("sessions_list", "agent:main:main", &json!({})).await;
    let names: BTreeMap<String, Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["displayName"].clone(),
            )
        })
        .collect();
    assert_eq!(names["agent:main:discord:group:g-42"], "discord:g-42");
    assert_eq!(names["agent:main:s2"], "s2-telegram-pingpong-main");
    assert_eq!(
        names["agent:main:main"],
        Value::Null,
        "no label, no group: no name"
    );
}

#[tokio::test]
async fn a_spawned_child_and_its_parent_name_each_other() {
    let b = bench().await;
    let list = b.call("sessions_list", "agent:main:main", &json!({})).await;
    let rows = list["sessions"].as_array().unwrap();
    let child = rows
        .iter()
        .find(|r| {
            r["key"]
                .as_str()
                .unwrap()
                .starts_with("agent:main:subagent:")
        })
        .unwrap();
    let parent = rows.iter().find(|r| r["key"] == "agent:main:s6").unwrap();
    assert_eq!(child["parentSessionKey"], "agent:main:s6");
    assert_eq!(parent["childSessions"], json!([child["key"]]));
}

/// Compares a `sessions_history` result with the recorded one: the session key and the
/// messages' roles (inter-session inputs aside) and texts, in order.
async fn assert_history_matches(b: &Bench, name: &str) {
    let recorded = expected(name);
    let theirs = &recorded["result"];
    let ours = b.replay(&recorded).await;
    // 2026.9.6 echoes `main` as written; we name the session it resolved to.
    let key = if theirs["sessionKey"] == "main" {
        json!(recorded["requester"])
    } else {
        theirs["sessionKey"].clone()
    };
    assert_eq!(ours["sessionKey"], key, "{name}");
    assert_eq!(
        texts(&ours["messages"]),
        texts(&theirs["messages"]),
        "{name}: messages"
    );
    let roles = |v: &Value| -> Vec<Value> {
        v.as_array()
            .unwrap()
            .iter()
            .filter(|m| m.get("provenance").is_none())
            .map(|m| m["role"].clone())
            .collect()
    };
    assert_eq!(
        roles(&ours["messages"]),
        roles(&theirs["messages"]),
        "{name}: roles"
    );
}

#[tokio::test]
async fn history_leaves_out_silent_replies_as_openclaw_does() {
    let b = bench().await;
    for name in [
        "sessions_history-pingpong-target-default",
        "sessions_history-pingpong-target-limit2",
        "sessions_history-pingpong-requester-default",
        "sessions_history-pingpong-requester-limit2",
        "sessions_history-skip-target-default",
        "sessions_history-skip-target-limit2",
        "sessions_history-spawned-child-default",
        "sessions_history-spawned-child-limit2",
        "sessions_history-archived-default",
        "sessions_history-main-from-main",
    ] {
        assert_history_matches(&b, name).await;
    }
}

/// The silent replies of a session's history with `includeSilent`, and how many messages
/// the default history has fewer.
async fn silent_replies(b: &Bench, key: &str) -> (Vec<String>, usize) {
    let with = b
        .call(
            "sessions_history",
            "agent:main:main",
            &json!({"sessionKey": key, "includeSilent": true}),
        )
        .await;
    let without = b
        .call(
            "sessions_history",
            "agent:main:main",
            &json!({"sessionKey": key}),
        )
        .await;
    let silent = texts(&with["messages"])
        .into_iter()
        .filter(|t| t == "REPLY_SKIP" || t == "ANNOUNCE_SKIP")
        .collect();
    let hidden = texts(&with["messages"]).len() - texts(&without["messages"]).len();
    (silent, hidden)
}

#[tokio::test]
async fn include_silent_keeps_the_silent_replies() {
    let b = bench().await;
    // s3: main says REPLY_SKIP at turn 1, work's announce step says ANNOUNCE_SKIP.
    let (main, hidden) = silent_replies(&b, "agent:main:s3").await;
    assert!(main.contains(&"REPLY_SKIP".to_string()), "{main:?}");
    assert_eq!(hidden, main.len());
    let (work, hidden) = silent_replies(&b, "agent:work:s3").await;
    assert!(work.contains(&"ANNOUNCE_SKIP".to_string()), "{work:?}");
    assert_eq!(hidden, work.len());
}

#[tokio::test]
async fn main_without_a_main_session_is_an_empty_history() {
    let b = bench().await;
    let recorded = expected("sessions_history-main-from-work");
    let ours = b.replay(&recorded).await;
    let theirs = &recorded["result"];
    // `bytes` is left out: theirs (24) counts something other than the messages' JSON.
    for name in ["sessionKey", "messages", "truncated"] {
        assert_eq!(ours[name], theirs[name], "{name}");
    }
}

/// The console reads transcripts through `SessionsApi::transcript`, not the tool: owners
/// still see that a target chose silence.
#[tokio::test]
async fn the_console_still_shows_silent_replies() {
    use switchboard_types::api::{SessionsApi, TranscriptQuery};
    let b = bench().await;
    let api: std::sync::Arc<dyn SessionsApi> = std::sync::Arc::new(b.engine.clone());
    let page = api
        .transcript(TranscriptQuery {
            key: "agent:work:s3".into(),
            before: None,
            limit: 100,
            tools: false,
            raw: false,
            bare: false,
        })
        .await
        .unwrap();
    assert!(
        page.lines.iter().any(|l| l.text.trim() == "ANNOUNCE_SKIP"),
        "{:?}",
        page.lines.iter().map(|l| &l.text).collect::<Vec<_>>()
    );
}

/// A page reads entries as views (the typed fields and `entry::VIEW_FIELDS` only), a text
/// search reads them whole: every row, and every session's detail, must show the same either
/// way on 2026.9.6's own entries (a row field read from a field the view skips would differ).
#[tokio::test]
async fn a_page_of_views_shows_what_the_whole_entries_show() {
    use switchboard_types::api::{SessionsApi, SessionsQuery};
    let b = bench().await;
    let api: &dyn SessionsApi = &b.engine;
    // No text: the page path (views); a text: the search path (whole entries).
    let query = |text: &str| SessionsQuery {
        text: text.to_string(),
        limit: 100,
        entries: true,
        archived: true,
        ..SessionsQuery::default()
    };
    let page = api.sessions(query("")).await.unwrap();
    assert_eq!(page.rows.len(), 18);
    for viewed in &page.rows {
        let searched = api.sessions(query(&viewed.key)).await.unwrap();
        let whole = searched
            .rows
            .iter()
            .find(|r| r.key == viewed.key)
            .expect("the search finds it");
        assert_eq!(viewed, whole, "{}", viewed.key);
        let detail = api.session(&viewed.key).await.unwrap().expect("there");
        assert_eq!(Some(&detail.entry), whole.entry.as_ref(), "{}", viewed.key);
    }
}
