//! Re-importing an OpenClaw folder after its owner kept using OpenClaw (issue 15, item 2):
//! new lines are appended by line id, newer entries replace unchanged ones, a session
//! continued on both sides is a conflict that changes nothing, and a second run changes
//! nothing. Real folders and a real store on disk.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use switchboard_config::{Config, Visibility};
use switchboard_engine::Engine;
use switchboard_engine::transfer::SkipReason;
use switchboard_types::key::SessionKey;

const SID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const SID2: &str = "bbbbbbbb-0000-4000-8000-000000000002";
const T0: i64 = 1_700_000_000_000;

fn open(state: &Path) -> Engine {
    let mut c = Config::default();
    c.tools.sessions.visibility = Visibility::All;
    switchboard::state_folder::open_engine(state, c).unwrap()
}

fn key(s: &str) -> SessionKey {
    SessionKey::from_canonical(s)
}

fn header(sid: &str) -> String {
    json!({"type":"session","version":3,"id":sid,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"})
        .to_string()
}

fn message(id: &str, role: &str, text: &str) -> String {
    json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",
        "message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}})
    .to_string()
}

/// A legacy folder: `agents/main/sessions/sessions.json` plus transcripts.
struct Source {
    dir: PathBuf,
}

impl Source {
    fn new(root: &Path) -> Source {
        let dir = root.join("oc/agents/main/sessions");
        fs::create_dir_all(&dir).unwrap();
        Source { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.join("../../..")
    }

    fn index(&self, index: Value) {
        fs::write(
            self.dir.join("sessions.json"),
            serde_json::to_string_pretty(&index).unwrap(),
        )
        .unwrap();
    }

    fn write(&self, sid: &str, lines: &[String]) {
        let mut text = lines.join("\n");
        text.push('\n');
        fs::write(self.dir.join(format!("{sid}.jsonl")), text).unwrap();
    }

    fn append(&self, sid: &str, lines: &[String]) {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join(format!("{sid}.jsonl")))
            .unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }

    fn file_lines(&self, sid: &str) -> Vec<String> {
        fs::read_to_string(self.dir.join(format!("{sid}.jsonl")))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

async fn stored(engine: &Engine, k: &str) -> Vec<String> {
    let (_, out) = engine.export_session_jsonl(k, Vec::new()).await.unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn texts(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["message"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// One session `agent:main:chat` (header + two messages) and one `agent:main:other`.
fn two_sessions(src: &Source) {
    src.index(json!({
        "agent:main:chat": {"sessionId": SID, "updatedAt": T0, "label": "chat"},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0},
    }));
    src.write(
        SID,
        &[
            header(SID),
            message("a0000001", "user", "hello"),
            message("a0000002", "assistant", "hi"),
        ],
    );
    src.write(SID2, &[header(SID2), message("b0000001", "user", "other")]);
}

#[tokio::test]
async fn reimport_appends_new_lines_updates_the_entry_and_a_second_run_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Source::new(tmp.path());
    two_sessions(&src);
    let engine = open(&tmp.path().join("state"));
    let first = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(first.sessions_imported, 2, "{first:?}");

    // The owner kept using OpenClaw: two lines with ids, one without, a newer entry.
    let no_id = json!({"type":"custom","customType":"note","data":{"n":1}}).to_string();
    src.append(
        SID,
        &[
            message("a0000003", "user", "still there?"),
            no_id.clone(),
            message("a0000004", "assistant", "yes"),
        ],
    );
    src.index(json!({
        "agent:main:chat": {"sessionId": SID, "updatedAt": T0 + 60_000, "label": "renamed"},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0},
    }));
    let second = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(
        (
            second.sessions_imported,
            second.sessions_updated,
            second.sessions_present
        ),
        (0, 1, 1),
        "{second:?}"
    );
    assert_eq!(second.lines_appended, 3, "{second:?}");
    assert_eq!(second.entries_updated, 1, "{second:?}");
    assert!(second.conflicts.is_empty(), "{second:?}");
    // The store now holds exactly the source's lines, in its order.
    assert_eq!(
        stored(&engine, "agent:main:chat").await,
        src.file_lines(SID)
    );
    let s = engine
        .store()
        .get(&key("agent:main:chat"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.entry.label.as_deref(), Some("renamed"));
    assert_eq!(s.entry.updated_at, T0 + 60_000);

    // The same import again: nothing changes, and the report says so.
    let before = stored(&engine, "agent:main:chat").await;
    let third = engine.import_openclaw(&src.root()).await.unwrap();
    assert!(third.changed_nothing(), "{third:?}");
    assert_eq!(third.sessions_present, 2, "{third:?}");
    assert_eq!((third.lines_appended, third.entries_updated), (0, 0));
    assert_eq!(stored(&engine, "agent:main:chat").await, before);

    // An id-less line already stored is recognised by its content, not appended twice,
    // even when the shortcut cannot be taken (the file was touched).
    src.append(SID, &[]);
    let mut lines = src.file_lines(SID);
    lines.push(message("a0000005", "user", "last"));
    src.write(SID, &lines);
    let fourth = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(fourth.lines_appended, 1, "{fourth:?}");
    assert_eq!(
        stored(&engine, "agent:main:chat").await,
        src.file_lines(SID)
    );
}

#[tokio::test]
async fn a_session_continued_on_both_sides_is_a_conflict_and_nothing_of_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Source::new(tmp.path());
    two_sessions(&src);
    let engine = open(&tmp.path().join("state"));
    engine.import_openclaw(&src.root()).await.unwrap();

    // Continued here…
    engine
        .store()
        .append_message(
            &key("agent:main:chat"),
            json!({"role":"user","content":"said in switchboard"}),
        )
        .await
        .unwrap();
    let here = stored(&engine, "agent:main:chat").await;
    // …and there; the other session only there.
    src.append(SID, &[message("a0000003", "user", "said in openclaw")]);
    src.append(SID2, &[message("b0000002", "user", "more")]);
    src.index(json!({
        "agent:main:chat": {"sessionId": SID, "updatedAt": T0 + 60_000, "label": "there"},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0 + 60_000},
    }));
    let report = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert!(
        report.conflicts[0].starts_with("agent:main:chat:"),
        "{report:?}"
    );
    assert_eq!(report.sessions_updated, 1, "the other session: {report:?}");
    assert_eq!(stored(&engine, "agent:main:chat").await, here);
    let s = engine
        .store()
        .get(&key("agent:main:chat"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.entry.label.as_deref(), Some("chat"));
    assert_eq!(
        texts(&stored(&engine, "agent:main:other").await),
        ["other", "more"]
    );

    // Still a conflict the next time: nothing was forgotten.
    let again = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(again.conflicts.len(), 1, "{again:?}");
    assert_eq!(stored(&engine, "agent:main:chat").await, here);
}

#[tokio::test]
async fn lines_added_here_alone_are_kept_and_an_entry_changed_here_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Source::new(tmp.path());
    two_sessions(&src);
    let engine = open(&tmp.path().join("state"));
    engine.import_openclaw(&src.root()).await.unwrap();

    // Here: the owner denies sending (a field Switchboard owns) and writes in `other`.
    engine
        .store()
        .patch(&key("agent:main:chat"), |e| {
            e.send_policy = Some("deny".into());
            Ok(())
        })
        .await
        .unwrap();
    engine
        .store()
        .append_message(
            &key("agent:main:other"),
            json!({"role":"user","content":[{"type":"text","text":"here only"}]}),
        )
        .await
        .unwrap();
    // There: new lines and a newer entry for `chat`, nothing for `other`.
    src.append(SID, &[message("a0000003", "user", "from openclaw")]);
    src.index(json!({
        "agent:main:chat": {"sessionId": SID, "updatedAt": T0 + 60_000, "label": "there"},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0},
    }));
    let report = engine.import_openclaw(&src.root()).await.unwrap();
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(
        (
            report.sessions_updated,
            report.lines_appended,
            report.entries_updated
        ),
        (1, 1, 0),
        "{report:?}"
    );
    assert_eq!(report.sessions_present, 1, "{report:?}");
    let w = report.warnings.join("\n");
    assert!(
        w.contains("agent:main:chat") && w.contains("changed here"),
        "{w}"
    );
    let s = engine
        .store()
        .get(&key("agent:main:chat"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.entry.send_policy.as_deref(), Some("deny"));
    assert_eq!(
        texts(&stored(&engine, "agent:main:chat").await),
        ["hello", "hi", "from openclaw"]
    );
    assert_eq!(
        texts(&stored(&engine, "agent:main:other").await),
        ["other", "here only"]
    );

    // The next import still knows the entry was changed here.
    src.index(json!({
        "agent:main:chat": {"sessionId": SID, "updatedAt": T0 + 120_000, "label": "there2"},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0},
    }));
    let again = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(again.entries_updated, 0, "{again:?}");
    let s = engine
        .store()
        .get(&key("agent:main:chat"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.entry.send_policy.as_deref(), Some("deny"));
}

#[tokio::test]
async fn malformed_and_huge_lines_in_the_new_part_are_skipped_with_a_count() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Source::new(tmp.path());
    two_sessions(&src);
    let engine = open(&tmp.path().join("state"));
    engine.import_openclaw(&src.root()).await.unwrap();

    let huge = format!(
        "{{\"type\":\"message\",\"id\":\"a00000ff\",\"x\":\"{}\"}}",
        "x".repeat(50 << 20)
    );
    src.append(
        SID,
        &[
            message("a0000003", "user", "before"),
            "{not json".to_string(),
            huge,
            message("a0000004", "user", "after"),
        ],
    );
    let report = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(report.lines_appended, 2, "{report:?}");
    assert_eq!(report.skipped(SkipReason::BadJson), 1, "{report:?}");
    assert_eq!(report.skipped(SkipReason::LineTooLong), 1, "{report:?}");
    assert_eq!(
        texts(&stored(&engine, "agent:main:chat").await),
        ["hello", "hi", "before", "after"]
    );
}

#[tokio::test]
async fn a_reset_session_or_a_reused_id_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Source::new(tmp.path());
    two_sessions(&src);
    let engine = open(&tmp.path().join("state"));
    engine.import_openclaw(&src.root()).await.unwrap();

    // OpenClaw reset `chat` (new sessionId); `third` reuses `other`'s id.
    let reset = "cccccccc-0000-4000-8000-000000000003";
    src.write(
        reset,
        &[header(reset), message("c0000001", "user", "fresh")],
    );
    src.index(json!({
        "agent:main:chat": {"sessionId": reset, "updatedAt": T0 + 60_000},
        "agent:main:other": {"sessionId": SID2, "updatedAt": T0},
        "agent:main:third": {"sessionId": SID2, "updatedAt": T0},
    }));
    let report = engine.import_openclaw(&src.root()).await.unwrap();
    assert_eq!(report.skipped(SkipReason::OtherSession), 1, "{report:?}");
    assert_eq!(report.skipped(SkipReason::IdTaken), 1, "{report:?}");
    assert!(report.changed_nothing(), "{report:?}");
    assert_eq!(
        texts(&stored(&engine, "agent:main:chat").await),
        ["hello", "hi"]
    );
}
