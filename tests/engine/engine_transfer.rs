//! Import from an OpenClaw state folder and export to OpenClaw-compatible JSONL, against real
//! captures from OpenClaw 2026.5.28 (`tests/fixtures/openclaw-legacy/`, copied from the
//! observed s2 ping-pong and s6 spawn scenarios).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use switchboard_config::{Config, Visibility};
use switchboard_engine::Engine;
use switchboard_engine::tools::ToolContext;
use switchboard_engine::transfer::{
    ImportLimits, ImportReport, Overwrite, SkipReason, TransferError,
};
use switchboard_types::key::SessionKey;

const MAIN_S2: &str = "4cf38b27-4311-4e06-85f3-e787b8fd5769";
const MAIN_S6: &str = "b3fa7785-5548-4d55-ade1-19cf075500d7";
const WORK_S2: &str = "d590e10e-153b-4b9a-a1df-844dee341344";
const WORK_S6: &str = "93663dfb-8c3b-4efe-837a-a67afdc4dd3d";

/// (key, agent, sessionId) of every session in the fixture.
const FIXTURE_SESSIONS: [(&str, &str, &str); 4] = [
    ("agent:main:s2", "main", MAIN_S2),
    ("agent:main:s6", "main", MAIN_S6),
    ("agent:work:s2", "work", WORK_S2),
    ("agent:work:s6", "work", WORK_S6),
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-legacy")
}

fn fixture_transcript(agent: &str, session_id: &str) -> PathBuf {
    fixture().join(format!("agents/{agent}/sessions/{session_id}.jsonl"))
}

/// Everyone may read everything, so one requester can look at all imported sessions.
fn config() -> Config {
    let mut c = Config::default();
    c.tools.sessions.visibility = Visibility::All;
    c.tools.agent_to_agent.enabled = true;
    c
}

fn open(state: &Path) -> Engine {
    crate::common::open_engine(state, config()).unwrap()
}

fn ctx(engine: &Engine) -> ToolContext {
    ToolContext::new(engine.requester_key("main").unwrap(), false)
}

fn key(s: &str) -> SessionKey {
    SessionKey::from_canonical(s)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for item in fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        let target = to.join(item.file_name());
        if item.file_type().unwrap().is_dir() {
            copy_dir(&item.path(), &target);
        } else {
            fs::copy(item.path(), target).unwrap();
        }
    }
}

fn file_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn export_lines(engine: &Engine, k: &str) -> Vec<String> {
    // The canonical key as text, as a front end holds it (`ResolvedKey::key`).
    let (n, out) = engine.export_session_jsonl(k, Vec::new()).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert_eq!(n, lines.len(), "reported line count of {k}");
    lines
}

async fn import_fixture(engine: &Engine) -> ImportReport {
    let mut report = engine.import_openclaw(&fixture()).await.unwrap();
    // The fixture's entries name the peer machine's files; the folder's own are read.
    assert_eq!(report.source_notes_total, 4, "{report:?}");
    assert!(
        report
            .source_notes
            .iter()
            .all(|n| n.contains("(the folder's own file comes first)")),
        "{report:?}"
    );
    report.source_notes.clear();
    report.source_notes_total = 0;
    report
}

async fn history(engine: &Engine, k: &str) -> Value {
    engine
        .call_tool(
            "sessions_history",
            &json!({"sessionKey": k, "limit": 50, "includeTools": true, "includeSilent": true}),
            &ctx(engine),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn imports_the_legacy_fixture() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = import_fixture(&engine).await;
    let total_lines: usize = FIXTURE_SESSIONS
        .iter()
        .map(|(_, agent, sid)| file_lines(&fixture_transcript(agent, sid)).len())
        .sum();
    assert_eq!(
        report,
        ImportReport {
            sessions_imported: 4,
            sessions_present: 0,
            lines_imported: total_lines,
            skipped: BTreeMap::new(),
            warnings: vec![],
            ..ImportReport::default()
        }
    );
    for (k, agent, sid) in FIXTURE_SESSIONS {
        let s = engine.store().get(&key(k)).await.unwrap().unwrap();
        assert_eq!(s.agent_id, agent);
        assert_eq!(s.entry.session_id, sid);
        assert_eq!(s.kind.as_str(), "other");
        // OpenClaw's own path is dropped: the transcript now lives in the database.
        assert!(!s.entry.extra.contains_key("sessionFile"), "{k}");
    }
    // Unknown entry fields survive in `extra`.
    let s = engine
        .store()
        .get(&key("agent:main:s2"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.entry.updated_at, 1795354158176);
    assert_eq!(
        s.entry.extra["contextBudgetStatus"]["messageCount"],
        json!(8)
    );
    assert_eq!(s.entry.extra["route"], json!({"channel": "telegram"}));
}

#[tokio::test]
async fn history_returns_the_real_messages_with_inter_session_provenance() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    import_fixture(&engine).await;

    let h = history(&engine, "agent:work:s2").await;
    assert_eq!(h["sessionKey"], "agent:work:s2");
    let messages = h["messages"].as_array().unwrap();
    let file: Vec<Value> = parsed(&file_lines(&fixture_transcript("work", WORK_S2)));
    let expected: Vec<&Value> = file.iter().filter(|l| l["type"] == "message").collect();
    assert_eq!(messages.len(), expected.len());
    assert_eq!(messages.len(), 8);
    for (m, line) in messages.iter().zip(&expected) {
        assert_eq!(m["role"], line["message"]["role"]);
        assert_eq!(m["__openclaw"]["id"], line["id"]);
        assert_eq!(
            m["content"][0]["text"],
            line["message"]["content"][0]["text"]
        );
    }
    let first = &messages[0];
    assert_eq!(first["role"], "user");
    assert_eq!(
        first["provenance"],
        json!({
            "kind": "inter_session",
            "sourceSessionKey": "agent:main:s2",
            "sourceChannel": "telegram",
            "sourceTool": "sessions_send"
        })
    );
    assert!(
        first["content"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with("PING from main")
    );
    assert_eq!(
        messages[1]["content"][0]["text"],
        "WORK_REPLY: pong from work"
    );
    assert_eq!(
        messages.last().unwrap()["content"][0]["text"],
        "ANNOUNCE from work: exchange finished"
    );

    // The requester side keeps its tool call and tool result.
    let h = history(&engine, "agent:main:s2").await;
    let messages = h["messages"].as_array().unwrap();
    let tool_result = messages
        .iter()
        .find(|m| m["role"] == "toolResult")
        .expect("a toolResult message");
    assert_eq!(tool_result["toolName"], "sessions_send");
    assert_eq!(tool_result["toolCallId"], "call_9a05ee2eb3");
    assert_eq!(
        messages
            .iter()
            .filter(|m| m["provenance"]["kind"] == "inter_session")
            .count(),
        3
    );
}

#[tokio::test]
async fn sessions_list_shows_the_imported_rows() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    import_fixture(&engine).await;

    let list = engine
        .call_tool("sessions_list", &json!({}), &ctx(&engine))
        .await
        .unwrap();
    assert_eq!(list["count"], 4, "{list:#}");
    let rows = list["sessions"].as_array().unwrap();
    let row = |k: &str| {
        rows.iter()
            .find(|r| r["key"] == k)
            .unwrap_or_else(|| panic!("no row {k} in {list:#}"))
    };
    let main_s2 = row("agent:main:s2");
    assert_eq!(main_s2["channel"], "telegram");
    assert_eq!(main_s2["label"], "s2-telegram-pingpong-main");
    assert_eq!(main_s2["sessionId"], MAIN_S2);
    assert_eq!(main_s2["agentId"], "main");
    assert_eq!(main_s2["updatedAt"], 1795354158176i64);
    assert_eq!(main_s2["model"], "fake-1");
    let work_s2 = row("agent:work:s2");
    assert_eq!(work_s2["channel"], "webchat");
    assert_eq!(work_s2["label"], "s2-telegram-pingpong-work");
    assert_eq!(row("agent:main:s6")["label"], "s6-sessions-spawn-main");
    assert_eq!(row("agent:work:s6")["channel"], "unknown");
    // Newest first, by the entries' updatedAt.
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "agent:main:s6",
            "agent:work:s6",
            "agent:work:s2",
            "agent:main:s2"
        ]
    );
}

#[tokio::test]
async fn reimport_skips_everything() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    import_fixture(&engine).await;
    let before = export_lines(&engine, "agent:main:s2").await;

    let again = import_fixture(&engine).await;
    assert_eq!(
        again,
        ImportReport {
            sessions_imported: 0,
            sessions_present: 4,
            lines_imported: 0,
            skipped: BTreeMap::new(),
            warnings: vec![],
            ..ImportReport::default()
        }
    );
    assert_eq!(export_lines(&engine, "agent:main:s2").await, before);
    assert_eq!(
        engine
            .call_tool("sessions_list", &json!({}), &ctx(&engine))
            .await
            .unwrap()["count"],
        4
    );
}

#[tokio::test]
async fn a_corrupt_line_is_skipped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    copy_dir(&fixture(), &source);
    let path = source.join(format!("agents/work/sessions/{WORK_S2}.jsonl"));
    let mut lines = file_lines(&path);
    let good = lines.clone();
    lines.insert(
        2,
        r#"{"type":"message","id":"deadbeef","message":{"role":"us"#.to_string(),
    );
    fs::write(&path, lines.join("\n") + "\n").unwrap();

    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 4);
    assert_eq!(report.skipped, BTreeMap::from([(SkipReason::BadJson, 1)]));
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    let w = &report.warnings[0];
    assert!(w.contains(&format!("{WORK_S2}.jsonl")), "{w}");
    assert!(w.contains("line 3"), "{w}");
    // The rest is there, in order, with nothing in place of the bad line.
    let exported = export_lines(&engine, "agent:work:s2").await;
    assert_eq!(parsed(&exported), parsed(&good));
}

#[tokio::test]
async fn a_folder_that_is_not_openclaw_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(&tmp.path().join("state"));
    let elsewhere = tmp.path().join("photos");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(elsewhere.join("cat.jpg"), b"meow").unwrap();

    let err = engine.import_openclaw(&elsewhere).await.unwrap_err();
    assert!(
        matches!(err, TransferError::NotAnOpenClawFolder { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&elsewhere.display().to_string()), "{msg}");
    assert!(msg.contains("is not an OpenClaw state folder"), "{msg}");
    assert!(
        msg.contains("agents/<agentId>/sessions/sessions.json"),
        "{msg}"
    );

    // An agents folder without any sessions index is not one either.
    fs::create_dir_all(elsewhere.join("agents/main/sessions")).unwrap();
    let err = engine.import_openclaw(&elsewhere).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("no <agentId>/sessions/sessions.json"),
        "{err}"
    );

    // A missing folder names the path.
    let missing = tmp.path().join("nope");
    let err = engine.import_openclaw(&missing).await.unwrap_err();
    assert!(matches!(err, TransferError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );

    // A damaged sessions.json fails with its path and line, before anything is written.
    let source = tmp.path().join("oc");
    copy_dir(&fixture(), &source);
    let index = source.join("agents/work/sessions/sessions.json");
    let text = fs::read_to_string(&index).unwrap();
    fs::write(&index, text.replacen("\"updatedAt\"", "updatedAt", 1)).unwrap();
    let err = engine.import_openclaw(&source).await.unwrap_err();
    match &err {
        TransferError::Json { path, line, .. } => {
            assert_eq!(path, &index);
            assert_eq!(*line, 4);
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }
    assert!(err.to_string().contains("sessions.json, line 4"), "{err}");
    assert!(
        engine
            .store()
            .get(&key("agent:main:s2"))
            .await
            .unwrap()
            .is_none()
    );

    assert!(tmp.path().join("state").exists());
}

#[tokio::test]
async fn one_agent_sessions_folder_is_accepted() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    let report = engine
        .import_openclaw(&fixture().join("agents/work/sessions"))
        .await
        .unwrap();
    assert_eq!(report.sessions_imported, 2);
    assert!(
        engine
            .store()
            .get(&key("agent:work:s2"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        engine
            .store()
            .get(&key("agent:main:s2"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn export_of_a_session_equals_the_imported_file() {
    let state = tempfile::tempdir().unwrap();
    let engine = open(state.path());
    import_fixture(&engine).await;
    for (k, agent, sid) in FIXTURE_SESSIONS {
        let file = file_lines(&fixture_transcript(agent, sid));
        let exported = export_lines(&engine, k).await;
        assert_eq!(exported.len(), file.len(), "{k}");
        assert_eq!(parsed(&exported), parsed(&file), "{k}");
        // OpenClaw writes compact JSON and key order is preserved: byte-identical lines.
        assert_eq!(exported, file, "{k}");
    }
    let err = engine
        .export_session_jsonl("agent:main:nope", Vec::new())
        .await
        .unwrap_err();
    assert!(matches!(err, TransferError::NoSession(_)), "{err:?}");
    assert!(err.to_string().contains("agent:main:nope"));
}

#[tokio::test]
async fn export_openclaw_then_import_reproduces_sessions_and_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let first = open(&tmp.path().join("a"));
    import_fixture(&first).await;
    // A session born in Switchboard travels too.
    first
        .record_inbound(
            &key("agent:main:main"),
            "hello from the console",
            &switchboard_engine::inbound::Inbound::default(),
        )
        .await
        .unwrap();

    let out = tmp.path().join("export");
    let report = first
        .export_openclaw(&out, Overwrite::Refuse)
        .await
        .unwrap();
    assert_eq!(report.sessions, 5);
    let index: Value = serde_json::from_str(
        &fs::read_to_string(out.join("agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    // No sessionFile: OpenClaw reads `<sessionId>.jsonl` beside sessions.json, so the folder
    // can be moved (an absolute path would keep naming the old place).
    assert!(index["agent:main:s2"].get("sessionFile").is_none());
    assert!(
        out.join(format!("agents/main/sessions/{MAIN_S2}.jsonl"))
            .is_file()
    );
    assert!(
        out.join(format!("agents/work/sessions/{WORK_S6}.jsonl"))
            .is_file()
    );

    let second = open(&tmp.path().join("b"));
    let imported = second.import_openclaw(&out).await.unwrap();
    assert_eq!(imported.sessions_imported, 5);
    assert_eq!(imported.lines_imported, report.lines);
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    for k in FIXTURE_SESSIONS
        .map(|s| s.0)
        .into_iter()
        .chain(["agent:main:main"])
    {
        let a = first.store().get(&key(k)).await.unwrap().unwrap();
        let b = second.store().get(&key(k)).await.unwrap().unwrap();
        assert_eq!(a, b, "{k}");
        assert_eq!(
            export_lines(&first, k).await,
            export_lines(&second, k).await,
            "{k}"
        );
    }

    // A second export into the same folder refuses rather than overwriting.
    let err = first
        .export_openclaw(&out, Overwrite::Refuse)
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransferError::WouldOverwrite { .. }),
        "{err:?}"
    );
}

/// Build `<root>/agents/<agent>/sessions/` with the given index and files.
fn legacy_folder(root: &Path, agent: &str, index: Value, files: &[(&str, String)]) -> PathBuf {
    let dir = root.join("agents").join(agent).join("sessions");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("sessions.json"),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap();
    }
    dir
}

#[tokio::test]
async fn headerless_and_missing_transcripts_and_mixed_case_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let chat = "11111111-2222-4333-8444-555555555555";
    let lonely = "66666666-7777-4888-9999-000000000000";
    let body = [
        json!({"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}),
        json!({"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"timestamp":2}}),
    ]
    .iter()
    .map(|v| v.to_string() + "\r\n")
    .collect::<String>();
    legacy_folder(
        &source,
        "Ops",
        json!({
            "Agent:Ops:Chat-One": {"sessionId": chat, "updatedAt": 1767225600000i64, "chatType": "group", "channel": "discord"},
            "agent:ops:nofile": {"sessionId": lonely, "updatedAt": 1767225600500i64},
            "agent:ops:broken": {"updatedAt": 5},
        }),
        &[(&format!("{chat}.jsonl"), format!("\n{body}\n"))],
    );

    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 2, "{report:?}");
    assert_eq!(
        report.skipped,
        BTreeMap::from([(SkipReason::UnreadableEntry, 1)])
    );
    assert_eq!(report.sessions_present, 0);
    assert_eq!(report.lines_imported, 2);
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("agent:ops:broken") && w.contains("sessionId")),
        "{:?}",
        report.warnings
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("agent:ops:nofile")
                && w.contains("1 session imported with an empty transcript")),
        "{:?}",
        report.warnings
    );

    let s = engine
        .store()
        .get(&key("agent:ops:chat-one"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.agent_id, "ops");
    assert_eq!(s.kind.as_str(), "group");
    let lines = parsed(&export_lines(&engine, "agent:ops:chat-one").await);
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        json!({"type":"session","version":3,"id":chat,"timestamp":"2026-01-01T00:00:00.000Z","cwd":""})
    );
    assert_eq!(lines[1]["id"], "aaaa0001");
    let h = history(&engine, "agent:ops:chat-one").await;
    let seqs: Vec<&Value> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["__openclaw"]["seq"])
        .collect();
    assert_eq!(seqs, [&json!(1), &json!(2)]);

    let lines = parsed(&export_lines(&engine, "agent:ops:nofile").await);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["id"], lonely);
    assert_eq!(lines[0]["timestamp"], "2026-01-01T00:00:00.500Z");
}

#[tokio::test]
async fn a_session_id_owned_by_another_key_is_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(&tmp.path().join("state"));
    import_fixture(&engine).await;
    let source = tmp.path().join("oc");
    legacy_folder(
        &source,
        "main",
        json!({"agent:main:copy": {"sessionId": MAIN_S2, "updatedAt": 1}}),
        &[],
    );
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 0);
    assert_eq!(report.sessions_present, 0);
    assert_eq!(report.skipped, BTreeMap::from([(SkipReason::IdTaken, 1)]));
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].contains("already belongs to agent:main:s2"),
        "{:?}",
        report.warnings
    );
    assert!(
        engine
            .store()
            .get(&key("agent:main:copy"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn session_file_is_used_when_it_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    // Anywhere inside the imported folder, named by an absolute path as OpenClaw writes it.
    fs::create_dir_all(source.join("topics")).unwrap();
    let elsewhere = source.join("topics/topic.jsonl");
    // Saved by an editor that adds a byte-order mark.
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(fs::read(fixture_transcript("work", WORK_S2)).unwrap());
    fs::write(&elsewhere, bytes).unwrap();
    legacy_folder(
        &source,
        "work",
        json!({"agent:work:s2": {"sessionId": WORK_S2, "updatedAt": 1, "sessionFile": elsewhere}}),
        &[],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 1);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(
        export_lines(&engine, "agent:work:s2").await,
        file_lines(&fixture_transcript("work", WORK_S2))
    );
}

#[tokio::test]
async fn a_long_transcript_is_imported_in_chunks() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sid = "abcdefab-cdef-4abc-8def-abcdefabcdef";
    let n = 12_345;
    let mut text = json!({"type":"session","version":3,"id":sid,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}).to_string();
    text.push('\n');
    for i in 0..n {
        let line = json!({"type":"message","id":format!("{i:08x}"),"parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":format!("line {i}"),"timestamp":i}});
        text.push_str(&line.to_string());
        text.push('\n');
    }
    legacy_folder(
        &source,
        "main",
        json!({"agent:main:long": {"sessionId": sid, "updatedAt": 7}}),
        &[(&format!("{sid}.jsonl"), text.clone())],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 1);
    assert_eq!(report.lines_imported, n + 1);
    let exported = export_lines(&engine, "agent:main:long").await;
    assert_eq!(exported.len(), n + 1);
    assert_eq!(exported.join("\n") + "\n", text);
    let h = engine
        .call_tool(
            "sessions_history",
            &json!({"sessionKey": "agent:main:long", "limit": 2}),
            &ctx(&engine),
        )
        .await
        .unwrap();
    let m = h["messages"].as_array().unwrap();
    assert_eq!(m[1]["content"], format!("line {}", n - 1));
    assert_eq!(m[1]["__openclaw"]["seq"], json!(n));
}

/// A transcript line of a user message with `text`.
fn user_line(id: &str, text: &str) -> String {
    json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":text,"timestamp":1}}).to_string()
}

fn small_limits() -> ImportLimits {
    ImportLimits {
        max_line_bytes: 200,
        max_transcript_bytes: 20_000,
        max_index_bytes: 1_000,
        ..ImportLimits::default()
    }
}

#[tokio::test]
async fn over_long_lines_and_files_are_skipped_by_their_caps() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let (short, big) = (
        "11111111-0000-4000-8000-000000000001",
        "22222222-0000-4000-8000-000000000002",
    );
    let long_text = "y".repeat(300);
    let transcript = [
        user_line("a1", "first"),
        user_line("a2", &long_text),
        user_line("a3", "third"),
        "z".repeat(10_000),
        user_line("a4", "last"),
    ]
    .join("\n");
    let huge = (0..200)
        .map(|i| user_line(&format!("b{i}"), "padding padding"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(huge.len() > 20_000);
    legacy_folder(
        &source,
        "main",
        json!({
            "agent:main:short": {"sessionId": short, "updatedAt": 1},
            "agent:main:big": {"sessionId": big, "updatedAt": 1},
        }),
        &[
            (&format!("{short}.jsonl"), transcript),
            (&format!("{big}.jsonl"), huge),
        ],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine
        .import_openclaw_with(&source, &small_limits())
        .await
        .unwrap();
    assert_eq!(report.sessions_imported, 1, "{report:?}");
    assert_eq!(report.lines_imported, 3);
    assert_eq!(
        report.skipped,
        BTreeMap::from([(SkipReason::FileTooLarge, 1), (SkipReason::LineTooLong, 2)])
    );
    let w = report.warnings.join("\n");
    assert!(w.contains("line 2: skipped ("), "{w}");
    assert!(
        w.contains("line 4: skipped (10000 bytes, over the cap of 200 bytes per line)"),
        "{w}"
    );
    assert!(
        w.contains("agent:main:big skipped") && w.contains("over the cap of 20000 bytes"),
        "{w}"
    );
    // The big session can come in later, with a larger cap.
    assert!(
        engine
            .store()
            .get(&key("agent:main:big"))
            .await
            .unwrap()
            .is_none()
    );
    let texts: Vec<Value> = history(&engine, "agent:main:short").await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(texts, [json!("first"), json!("third"), json!("last")]);
    let again = engine.import_openclaw(&source).await.unwrap();
    assert_eq!((again.sessions_imported, again.sessions_present), (1, 1));
}

#[tokio::test]
async fn an_index_over_its_cap_fails_clearly_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let index: serde_json::Map<String, Value> = (0..30)
        .map(|i| {
            (
                format!("agent:main:s{i}"),
                json!({"sessionId": format!("00000000-0000-4000-8000-{i:012}"), "updatedAt": 1}),
            )
        })
        .collect();
    let dir = legacy_folder(&source, "main", Value::Object(index), &[]);
    let engine = open(&tmp.path().join("state"));
    let err = engine
        .import_openclaw_with(&source, &small_limits())
        .await
        .unwrap_err();
    assert!(matches!(err, TransferError::TooLarge { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&dir.join("sessions.json").display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("over the import's cap of 1000 bytes"), "{msg}");
    assert!(
        engine
            .store()
            .get(&key("agent:main:s0"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn files_that_are_not_regular_or_lead_outside_are_never_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let outside = tmp.path().join("outside");
    let sids = [
        "11111111-0000-4000-8000-000000000001",
        "22222222-0000-4000-8000-000000000002",
        "33333333-0000-4000-8000-000000000003",
    ];
    // Another agent's folder that is a symlink to a folder outside.
    let elsewhere = outside.join("agents/spy/sessions");
    legacy_folder(
        &outside,
        "spy",
        json!({"agent:spy:x": {"sessionId": sids[2], "updatedAt": 1}}),
        &[(&format!("{}.jsonl", sids[2]), user_line("x", "SECRET"))],
    );
    assert!(elsewhere.is_dir());
    let dir = legacy_folder(
        &source,
        "main",
        json!({
            "agent:main:fifo": {"sessionId": sids[0], "updatedAt": 1},
            "agent:main:moved": {"sessionId": sids[1], "updatedAt": 1,
                "sessionFile": outside.join("agents/spy/sessions").join(format!("{}.jsonl", sids[2]))},
        }),
        &[(
            &format!("{}.jsonl", sids[1]),
            user_line("m", "in the folder"),
        )],
    );
    fs::create_dir_all(source.join("agents/spy")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, source.join("agents/spy/sessions")).unwrap();
    // A FIFO with no writer: opening it for reading would wait forever.
    let fifo = dir.join(format!("{}.jsonl", sids[0]));
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );

    let engine = open(&tmp.path().join("state"));
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        engine.import_openclaw(&source),
    )
    .await
    .expect("the import does not wait on a FIFO")
    .unwrap();
    assert_eq!(report.sessions_imported, 1, "{report:?}");
    assert_eq!(
        report.skipped,
        BTreeMap::from([
            (SkipReason::OutsideFolder, 1),
            (SkipReason::NotRegularFile, 1),
        ]),
        "{:?}",
        report.warnings
    );
    // The folder's own transcript comes first: the outside sessionFile is not even opened.
    let notes = report.source_notes.join("\n");
    assert!(
        notes.contains("agent:main:moved") && notes.contains("was not read"),
        "{notes}"
    );
    let w = report.warnings.join("\n");
    assert!(w.contains("named pipe"), "{w}");
    assert!(
        w.contains("agents/spy/sessions/sessions.json: not read"),
        "{w}"
    );
    assert!(
        engine
            .store()
            .get(&key("agent:main:fifo"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        engine
            .store()
            .get(&key("agent:spy:x"))
            .await
            .unwrap()
            .is_none()
    );
    // A sessionFile outside (a copied folder names its old place) falls back to the copy.
    let h = history(&engine, "agent:main:moved").await;
    assert_eq!(h["messages"][0]["content"], "in the folder");
}

#[tokio::test]
async fn line_warnings_are_bounded_per_file() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sid = "11111111-0000-4000-8000-000000000001";
    let body = (0..500)
        .map(|i| format!("garbage {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    legacy_folder(
        &source,
        "main",
        json!({"agent:main:junk": {"sessionId": sid, "updatedAt": 1}}),
        &[(&format!("{sid}.jsonl"), body)],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.skipped(SkipReason::BadJson), 500);
    assert_eq!(report.warnings.len(), 21, "{:?}", report.warnings);
    assert!(
        report.warnings[20].contains("480 more lines skipped"),
        "{:?}",
        report.warnings[20]
    );
}

#[tokio::test]
async fn export_to_a_file_is_safe_from_the_engine_too() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(&tmp.path().join("state"));
    import_fixture(&engine).await;
    let out = tmp.path().join("s2.jsonl");
    let k = key("agent:main:s2");
    let n = engine
        .export_session_to_file(&k, &out, Overwrite::Refuse)
        .await
        .unwrap();
    assert_eq!(
        file_lines(&out),
        export_lines(&engine, "agent:main:s2").await
    );
    assert_eq!(n, file_lines(&out).len());
    let err = engine
        .export_session_to_file(&k, &out, Overwrite::Refuse)
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransferError::WouldOverwrite { .. }),
        "{err:?}"
    );
    // An unknown session creates nothing.
    let none = tmp.path().join("none.jsonl");
    let err = engine
        .export_session_to_file(&key("agent:main:nope"), &none, Overwrite::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, TransferError::NoSession(_)), "{err:?}");
    let mut left: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["s2.jsonl", "state"]);
}

#[tokio::test]
async fn a_session_file_that_cannot_be_a_path_falls_back_without_failing_the_import() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sids = [
        "11111111-0000-4000-8000-000000000001",
        "22222222-0000-4000-8000-000000000002",
    ];
    legacy_folder(
        &source,
        "main",
        json!({
            "agent:main:nul": {"sessionId": sids[0], "updatedAt": 1, "sessionFile": "a\u{0}b.jsonl"},
            "agent:main:notdir": {"sessionId": sids[1], "updatedAt": 1, "sessionFile": "sessions.json/x.jsonl"},
        }),
        &[
            (&format!("{}.jsonl", sids[0]), user_line("n", "nul")),
            (&format!("{}.jsonl", sids[1]), user_line("d", "notdir")),
        ],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 2, "{report:?}");
    // The folder's own files come first, so the odd sessionFile names are never opened.
    assert_eq!(report.skipped(SkipReason::UnreadableFile), 0, "{report:?}");
    assert_eq!(
        history(&engine, "agent:main:nul").await["messages"][0]["content"],
        "nul"
    );
    let w = report.source_notes.join("\n");
    assert!(
        w.contains(r#"/a\0b.jsonl""#),
        "the name is shown escaped: {w}"
    );
}

/// Source lines with everything a re-encoding could change (escapes, raw non-ASCII, key
/// order and duplicates, whitespace, every kind of number, nesting), paired with the exact
/// text stored for each (serde_json's compact encoding of the parsed line, fields in source
/// order), which export writes back byte for byte. Pinned as literals so that a faster
/// import path cannot silently change stored data, on a new import or on an append.
const TRICKY_LINES: [(&str, &str); 16] = [
    (
        r#" { "type" : "message" , "id":"t1", "parentId": null, "message": {"role":"user","content":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t \u0001 \u001f \u007f \u2028 \u0000"} } "#,
        "{\"type\":\"message\",\"id\":\"t1\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"café 😀 \\\"q\\\" \\\\ / \\b\\f\\n\\r\\t \\u0001 \\u001f \u{7f} \u{2028} \\u0000\"}}",
    ),
    (
        r#"{"z":1,"a":2,"type":"custom","m":{"y":[1,2,{"b":null,"a":true}],"x":false}}"#,
        "{\"z\":1,\"a\":2,\"type\":\"custom\",\"m\":{\"y\":[1,2,{\"b\":null,\"a\":true}],\"x\":false}}",
    ),
    (
        r#"{"type":"n","a":1e5,"b":1.0,"c":-0,"d":0.1,"e":12345678901234567890,"f":123456789012345678901234567890,"g":-9223372036854775808,"h":1E-7,"i":2.5e+300,"j":-0.0,"k":18446744073709551615,"l":18446744073709551616,"m":1.7976931348623157e308, "n": 100, "o": -12, "p": 0, "q": 5e-324, "r": 0.30000000000000004, "s": 1.5E3, "t": -1e0}"#,
        "{\"type\":\"n\",\"a\":100000.0,\"b\":1.0,\"c\":-0.0,\"d\":0.1,\"e\":12345678901234567890,\"f\":1.2345678901234568e+29,\"g\":-9223372036854775808,\"h\":1e-7,\"i\":2.5e+300,\"j\":-0.0,\"k\":18446744073709551615,\"l\":1.8446744073709552e+19,\"m\":1.7976931348623157e+308,\"n\":100,\"o\":-12,\"p\":0,\"q\":5e-324,\"r\":0.30000000000000004,\"s\":1500.0,\"t\":-1.0}",
    ),
    (
        r#"{"type":"dup","a":1,"b":2,"a":3}"#,
        "{\"type\":\"dup\",\"a\":3,\"b\":2}",
    ),
    (
        r#"{"type":"u","s":"日本語 é 😀 ÿ ߿ ࠀ ￿"}"#,
        "{\"type\":\"u\",\"s\":\"日本語 é 😀 ÿ ߿ ࠀ \u{ffff}\"}",
    ),
    (
        "{\t\"type\":\"message\",\r\"id\":\"t2\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"usage\":{\"input\":1}}}",
        "{\"type\":\"message\",\"id\":\"t2\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"usage\":{\"input\":1}}}",
    ),
    (
        r#"{"type": "custom", "data": {"k": "v", "n": [1, 2.0, "3"]}}"#,
        "{\"type\":\"custom\",\"data\":{\"k\":\"v\",\"n\":[1,2.0,\"3\"]}}",
    ),
    (
        r#"{"type":"e","a":{},"b":[],"c":[{}],"d":"","e":[[[]]],"f":{"":{}}}"#,
        "{\"type\":\"e\",\"a\":{},\"b\":[],\"c\":[{}],\"d\":\"\",\"e\":[[[]]],\"f\":{\"\":{}}}",
    ),
    (
        r#"{"type":"k","\u0061b":1,"a\"b":2,"\/":3}"#,
        "{\"type\":\"k\",\"ab\":1,\"a\\\"b\":2,\"/\":3}",
    ),
    (
        r#"{"type":"k2","ab":1,"\u0061b":2}"#,
        "{\"type\":\"k2\",\"ab\":2}",
    ),
    (
        r#"{"type":"message","id":"t3","message":{"role":"toolResult","content":[],"isError":true,"details":{"exitCode":-1,"ms":1.25}}}"#,
        "{\"type\":\"message\",\"id\":\"t3\",\"message\":{\"role\":\"toolResult\",\"content\":[],\"isError\":true,\"details\":{\"exitCode\":-1,\"ms\":1.25}}}",
    ),
    (
        r#"{"id":"t4","type":"message","message":{"content":"first","role":"user"},"timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "{\"id\":\"t4\",\"type\":\"message\",\"message\":{\"content\":\"first\",\"role\":\"user\"},\"timestamp\":\"2026-01-01T00:00:00.000Z\"}",
    ),
    (
        r#"{"type":"message","id":"t5","message":{"role":"user","content":"tab\there, \u00e9, \u00E9, \uD83D\uDE00"}}"#,
        "{\"type\":\"message\",\"id\":\"t5\",\"message\":{\"role\":\"user\",\"content\":\"tab\\there, é, é, 😀\"}}",
    ),
    (
        r#"{"type":"b","t":true,"f":false,"n":null,"a":[true,false,null]}"#,
        "{\"type\":\"b\",\"t\":true,\"f\":false,\"n\":null,\"a\":[true,false,null]}",
    ),
    (
        r#"{"type":"custom_message","customType":"x","content":"plain ascii, no escapes at all","display":true}"#,
        "{\"type\":\"custom_message\",\"customType\":\"x\",\"content\":\"plain ascii, no escapes at all\",\"display\":true}",
    ),
    (
        r#"{"type":"message","id":"t6","parentId":"t5","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"reply: dolor sit dolor sit "}],"usage":{"input":20,"output":12,"totalTokens":32},"stopReason":"stop","timestamp":1795343000010}}"#,
        "{\"type\":\"message\",\"id\":\"t6\",\"parentId\":\"t5\",\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"reply: dolor sit dolor sit \"}],\"usage\":{\"input\":20,\"output\":12,\"totalTokens\":32},\"stopReason\":\"stop\",\"timestamp\":1795343000010}}",
    ),
];

#[tokio::test]
async fn stored_lines_are_byte_identical_for_tricky_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sid = "0badc0de-1234-4567-89ab-cdef01234567";
    let header = format!(
        "\u{feff}{{\"type\": \"session\", \"version\": 3, \"id\": \"{sid}\", \"timestamp\": \"2026-01-01T00:00:00.000Z\", \"cwd\": \"/\"}}\r\n"
    );
    let (first, later) = TRICKY_LINES.split_at(9);
    let mut text = header.clone();
    for (line, _) in first {
        text.push_str(line);
        text.push('\n');
    }
    let dir = legacy_folder(
        &source,
        "main",
        json!({"agent:main:tricky": {"sessionId": sid, "updatedAt": 7}}),
        &[(&format!("{sid}.jsonl"), text.clone())],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_imported, 1, "{report:?}");
    assert!(report.skipped.is_empty(), "{report:?}");
    let want_header = format!(
        "{{\"type\":\"session\",\"version\":3,\"id\":\"{sid}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}}"
    );
    let mut want: Vec<String> = vec![want_header];
    want.extend(first.iter().map(|(_, stored)| stored.to_string()));
    let got = export_lines(&engine, "agent:main:tricky").await;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "line {i} as stored");
    }
    assert_eq!(got.len(), want.len());

    // The owner kept going in OpenClaw: the appended lines go through the merge.
    for (line, _) in later {
        text.push_str(line);
        text.push('\n');
    }
    fs::write(dir.join(format!("{sid}.jsonl")), &text).unwrap();
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(report.sessions_updated, 1, "{report:?}");
    assert_eq!(report.lines_appended, later.len(), "{report:?}");
    want.extend(later.iter().map(|(_, stored)| stored.to_string()));
    let got = export_lines(&engine, "agent:main:tricky").await;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "line {i} as stored after the merge");
    }
    assert_eq!(got.len(), want.len());

    // Touched but not changed: every line (those without an id too) is recognised.
    let f = fs::File::options()
        .append(true)
        .open(dir.join(format!("{sid}.jsonl")))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    let report = engine.import_openclaw(&source).await.unwrap();
    assert!(report.changed_nothing(), "{report:?}");
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(export_lines(&engine, "agent:main:tricky").await, want);
}

/// A writer that cannot go on until the runtime's own task lets it (its first write waits
/// for the word, and fails after a minute rather than hang the test).
struct Gate {
    open: Option<std::sync::mpsc::Receiver<()>>,
    out: Vec<u8>,
}

impl std::io::Write for Gate {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(open) = self.open.take() {
            open.recv_timeout(std::time::Duration::from_secs(60))
                .map_err(std::io::Error::other)?;
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A one-session export reads and writes on the blocking pool, not on the runtime's worker:
/// on a one-worker runtime, a task that must run before the writer can go on still runs.
/// (Before, the export ran on its caller's thread: the task never ran and the write failed.)
#[tokio::test(flavor = "current_thread")]
async fn a_one_session_export_leaves_the_worker_free() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(&tmp.path().join("state"));
    import_fixture(&engine).await;
    let (tx, rx) = std::sync::mpsc::channel();
    let opener = tokio::spawn(async move { tx.send(()).unwrap() });
    let gate = Gate {
        open: Some(rx),
        out: Vec::new(),
    };
    let (n, gate) = engine
        .export_session_jsonl("agent:main:s2", gate)
        .await
        .expect("the export held the worker the task needed");
    opener.await.unwrap();
    let text = String::from_utf8(gate.out).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        export_lines(&engine, "agent:main:s2").await
    );
    assert_eq!(n, text.lines().count());
}

/// OpenClaw's notice that a run failed ("This turn ended before a reply: …", a
/// `custom_message` line with `display: true`) is imported exactly, shown in history as
/// OpenClaw's `chat.history` shows it (role `custom`, no `details`), read by the transcript
/// pane as a failure line of its own (not a reply), and exported back byte for byte; a
/// notice OpenClaw keeps out of history (`openclaw.runtime-context`) stays out (issue 25).
#[tokio::test]
async fn a_failed_runs_notice_is_kept_shown_and_exported_unchanged() {
    use switchboard_types::api::{SessionsApi, TranscriptQuery};
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sid = "0f0f0f0f-1111-4222-8333-444444444444";
    let said = "This turn ended before a reply: ⚠️ model \"fake-1\" unavailable\n(retry later)";
    let lines = [
        format!(
            r#"{{"type":"session","version":3,"id":"{sid}","timestamp":"2026-11-23T13:08:59.000Z","cwd":"/"}}"#
        ),
        r#"{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-11-23T13:08:59.500Z","message":{"role":"user","content":"hello","timestamp":1795439339500}}"#.to_string(),
        r#"{"type":"custom_message","customType":"run-failed-before-reply","content":"This turn ended before a reply: ⚠️ model \"fake-1\" unavailable\n(retry later)","display":true,"details":{"runId":"run-1","error":"PRIVATE_DIAGNOSTIC"},"id":"c0ffee01","parentId":"a0000001","timestamp":"2026-11-23T13:09:00.000Z"}"#.to_string(),
        r#"{"type":"custom_message","customType":"openclaw.runtime-context","content":"PRIVATE_CONTEXT","display":true,"id":"c0ffee02","parentId":"c0ffee01","timestamp":"2026-11-23T13:09:01.000Z"}"#.to_string(),
    ];
    legacy_folder(
        &source,
        "main",
        json!({"agent:main:failed": {"sessionId": sid, "updatedAt": 1795439341000i64}}),
        &[(&format!("{sid}.jsonl"), lines.join("\n") + "\n")],
    );
    let engine = open(&tmp.path().join("state"));
    let report = engine.import_openclaw(&source).await.unwrap();
    assert_eq!(
        (report.sessions_imported, report.lines_imported),
        (1, 4),
        "{report:?}"
    );

    assert_eq!(export_lines(&engine, "agent:main:failed").await, lines);

    let h = history(&engine, "agent:main:failed").await;
    let messages = h["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{h:#}");
    assert_eq!(
        messages[1],
        json!({"role": "custom", "customType": "run-failed-before-reply", "content": said,
            "timestamp": 1795439340000i64, "__openclaw": {"id": "c0ffee01", "seq": 2}})
    );
    assert!(!h.to_string().contains("PRIVATE"), "{h:#}");

    let page = engine
        .transcript(TranscriptQuery {
            key: "agent:main:failed".into(),
            before: None,
            limit: 10,
            tools: true,
            raw: false,
            bare: false,
        })
        .await
        .unwrap();
    let shown: Vec<_> = page
        .lines
        .iter()
        .map(|l| (l.seq, l.role.as_str(), l.from.as_str(), l.text.as_str()))
        .collect();
    assert_eq!(
        shown,
        [(1, "user", "user", "hello"), (2, "error", "notice", said)]
    );
}

/// Where an OpenClaw entry came from and what its runs used is kept through import and
/// export, and shown in the owner's row (`sessions list --json`, `sessions show`): `origin`
/// whole, `createdAt`, `createdVia`, `chatType`, `spawnDepth`, `modelProvider`, input/output
/// tokens, `lastRunId`; a session named only by `origin.label` shows that name, as OpenClaw
/// shows it (issue 25: the owner row had none of these and `origin` as `{provider}` only).
#[tokio::test]
async fn entry_fields_are_kept_shown_and_exported() {
    use switchboard_types::api::SessionsApi;
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("oc");
    let sid = "5e5e5e5e-1111-4222-8333-444444444444";
    let entry = json!({
        "sessionId": sid, "updatedAt": 1795354220801i64, "chatType": "direct",
        "origin": {"label": "pyclient", "provider": "webchat", "surface": "webchat", "chatType": "direct"},
        "createdVia": "spawn", "createdAt": 1795354200000i64, "spawnDepth": 1,
        "modelProvider": "fake", "model": "fake-1", "inputTokens": 80, "outputTokens": 10,
        "totalTokens": 90, "lastRunId": "b7d11bcf-df00-41d2-8abf-c5ad057d2c17",
        "skillsSnapshot": {"version": 3, "skills": [{"name": "x"}]},
        "sessionFile": "/elsewhere/x.jsonl"
    });
    let dir = legacy_folder(
        &source,
        "main",
        json!({"agent:main:s5": entry}),
        &[(
            &format!("{sid}.jsonl"),
            format!(
                r#"{{"type":"session","version":3,"id":"{sid}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}}"#
            ) + "\n",
        )],
    );
    let engine = open(&tmp.path().join("state"));
    engine.import_openclaw(&source).await.unwrap();

    let detail = engine.session("agent:main:s5").await.unwrap().unwrap();
    let row = &detail.entry;
    for (field, want) in [
        ("origin", &entry["origin"]),
        ("createdAt", &entry["createdAt"]),
        ("createdVia", &entry["createdVia"]),
        ("chatType", &entry["chatType"]),
        ("spawnDepth", &entry["spawnDepth"]),
        ("modelProvider", &entry["modelProvider"]),
        ("inputTokens", &entry["inputTokens"]),
        ("outputTokens", &entry["outputTokens"]),
        ("lastRunId", &entry["lastRunId"]),
        ("displayName", &json!("pyclient")),
    ] {
        assert_eq!(&row[field], want, "{field} in {row:#}");
    }
    assert_eq!(detail.row.name, "pyclient");

    // Export writes the entry back: every source field, as it was (`sessionFile` aside:
    // the export's transcript sits beside its index).
    let out = tmp.path().join("out");
    engine
        .export_openclaw(&out, Overwrite::Refuse)
        .await
        .unwrap();
    let index: Value = serde_json::from_str(
        &fs::read_to_string(out.join("agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    let exported = index["agent:main:s5"].as_object().unwrap();
    for (field, value) in entry.as_object().unwrap() {
        if field != "sessionFile" {
            assert_eq!(exported.get(field), Some(value), "{field}");
        }
    }
    assert!(!exported.contains_key("sessionFile"));
    drop(dir);
}
