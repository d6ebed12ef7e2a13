//! `sessions export` and `import-openclaw` through the real binary, as a hostile or unlucky
//! user meets them (issue 10, items 2 and 8): existing targets, symlinks at the target and at
//! a guessable temporary name, device and FIFO targets, a write that fails part-way and its
//! retry; transcripts outside the imported folder, symlinked transcripts, an over-long line,
//! message lines of the wrong shape, and the summary's counts.

use crate::common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{BIN, CliBench};
use serde_json::{Value, json};

/// Same-agent sessions are visible to `main`, so `tool sessions_history` reads imports.
const CONFIG: &str = "{ tools: { sessions: { visibility: 'agent' } } }";

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A state with one session, `agent:main:main`, holding `n` messages of `size` bytes.
fn with_session(n: usize, size: usize) -> CliBench {
    let b = CliBench::new(CONFIG);
    for i in 0..n {
        let msg = format!("{i}:{}", "m".repeat(size));
        b.ok(&["inject", "agent:main:main", &msg, "--quiet"]);
    }
    b
}

fn exported(b: &CliBench) -> Vec<u8> {
    b.ok(&["sessions", "export", "agent:main:main"])
        .into_bytes()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[track_caller]
fn refused(out: &Output, path: &Path, wants: &[&str]) {
    let (_, err) = text(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&path.display().to_string()),
        "names the path: {err}"
    );
    for w in wants {
        assert!(err.contains(w), "says {w:?}: {err}");
    }
}

#[test]
fn export_refuses_an_existing_file_unless_forced() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("main.jsonl");
    fs::write(&out, b"precious").unwrap();
    let path = out.to_str().unwrap();

    let r = b.run(&["sessions", "export", "main", "--out", path]);
    refused(&r, &out, &["already exists", "--force"]);
    assert_eq!(fs::read(&out).unwrap(), b"precious");
    assert_eq!(names(dir.path()), ["main.jsonl"]);

    b.ok(&["sessions", "export", "main", "--out", path, "--force"]);
    assert_eq!(fs::read(&out).unwrap(), exported(&b));
    assert_eq!(names(dir.path()), ["main.jsonl"]);
}

#[test]
fn export_replaces_a_symlink_itself_and_never_writes_through_it() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    fs::write(&victim, b"do not touch").unwrap();
    let link = dir.path().join("out.jsonl");
    symlink(&victim, &link).unwrap();
    let path = link.to_str().unwrap();

    let r = b.run(&["sessions", "export", "main", "--out", path]);
    refused(&r, &link, &["already exists", "--force"]);
    assert_eq!(fs::read_link(&link).unwrap(), victim);

    b.ok(&["sessions", "export", "main", "--out", path, "--force"]);
    assert_eq!(fs::read(&victim).unwrap(), b"do not touch");
    assert!(
        fs::symlink_metadata(&link).unwrap().is_file(),
        "the link itself was replaced"
    );
    assert_eq!(fs::read(&link).unwrap(), exported(&b));

    // A dangling symlink is an existing target too.
    let dangling = dir.path().join("dangling.jsonl");
    symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let r = b.run(&[
        "sessions",
        "export",
        "main",
        "--out",
        dangling.to_str().unwrap(),
    ]);
    refused(&r, &dangling, &["already exists", "--force"]);
    assert!(!dir.path().join("nowhere").exists());
    assert!(
        fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn export_never_writes_through_a_symlink_planted_at_the_temporary_name() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    fs::write(&victim, b"do not touch").unwrap();
    let out = dir.path().join("main.jsonl");
    // The name the export used to write to first.
    let planted = dir.path().join("main.jsonl.partial");
    symlink(&victim, &planted).unwrap();

    b.ok(&["sessions", "export", "main", "--out", out.to_str().unwrap()]);
    assert_eq!(fs::read(&victim).unwrap(), b"do not touch");
    assert_eq!(fs::read_link(&planted).unwrap(), victim);
    assert_eq!(fs::read(&out).unwrap(), exported(&b));
    assert_eq!(
        names(dir.path()),
        ["main.jsonl", "main.jsonl.partial", "victim.txt"]
    );
}

#[test]
fn export_refuses_a_fifo_or_a_folder_even_with_force() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let folder = dir.path().join("folder");
    fs::create_dir(&folder).unwrap();
    for force in [false, true] {
        let mut args = vec![
            "sessions",
            "export",
            "main",
            "--out",
            fifo.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        refused(&b.run(&args), &fifo, &["named pipe", "not a regular file"]);
        args[4] = folder.to_str().unwrap();
        refused(&b.run(&args), &folder, &["a folder", "not a regular file"]);
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(fs::symlink_metadata(&folder).unwrap().is_dir());
    assert_eq!(names(dir.path()), ["folder", "pipe"]);
    assert!(names(&folder).is_empty());
}

#[test]
fn export_refuses_dev_null_even_with_force() {
    let b = with_session(1, 10);
    let null = Path::new("/dev/null");
    for force in [false, true] {
        let mut args = vec!["sessions", "export", "main", "--out", "/dev/null"];
        if force {
            args.push("--force");
        }
        refused(
            &b.run(&args),
            null,
            &["character device", "even with --force"],
        );
        let meta = fs::symlink_metadata(null).unwrap();
        assert!(
            meta.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }
    assert!(!Path::new("/dev/null.jsonl.partial").exists());
}

/// Run the binary with a cap on the size of any file it writes (`ulimit -f`), so writing
/// the export fails part-way as on a full disk (EFBIG instead of ENOSPC, the same path).
fn run_with_file_cap(b: &CliBench, blocks: u32, args: &[&str]) -> Output {
    let cmd = b.command(args);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!(
            r#"trap '' XFSZ; ulimit -f {blocks}; exec "$0" "$@""#
        ))
        .arg(BIN)
        .args(cmd.get_args())
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG");
    sh.output().unwrap()
}

#[test]
fn a_failed_export_leaves_nothing_behind_and_a_retry_works() {
    // About 300 KB of transcript; the cap allows at most 128 KB per file.
    let b = with_session(5, 60_000);
    let whole = exported(&b);
    assert!(whole.len() > 250_000);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("main.jsonl");
    let path = out.to_str().unwrap();

    let r = run_with_file_cap(&b, 128, &["sessions", "export", "main", "--out", path]);
    let (_, err) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));

    b.ok(&["sessions", "export", "main", "--out", path]);
    assert_eq!(fs::read(&out).unwrap(), whole);
    assert_eq!(names(dir.path()), ["main.jsonl"]);

    // The same for a whole-state export.
    let all = dir.path().join("all");
    let all_path = all.to_str().unwrap();
    let r = run_with_file_cap(&b, 128, &["sessions", "export", "--all", "--out", all_path]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r).1);
    let files: Vec<PathBuf> = walk(&all).into_iter().filter(|p| !p.is_dir()).collect();
    assert!(files.is_empty(), "{files:?}");

    b.ok(&["sessions", "export", "--all", "--out", all_path]);
    let sessions = all.join("agents/main/sessions");
    let index: Value =
        serde_json::from_str(&fs::read_to_string(sessions.join("sessions.json")).unwrap()).unwrap();
    let entry = &index["agent:main:main"];
    assert!(entry.get("sessionFile").is_none(), "{entry}");
    let sid = entry["sessionId"].as_str().unwrap();
    assert_eq!(
        fs::read(sessions.join(format!("{sid}.jsonl"))).unwrap(),
        whole
    );
    assert_eq!(names(&sessions).len(), 2, "{:?}", names(&sessions));
}

/// Issue "a gateway that holds", item 10: a failed `sessions export --all` used to leave the
/// folders it created (`out/agents/main/sessions`, and missing parents of `out`) behind.
/// Every folder it created goes; the folder that was there before stays, and so does a
/// layout folder that existed before the export.
#[test]
fn a_failed_whole_export_removes_the_folders_it_created_and_only_those() {
    let b = with_session(5, 60_000);
    let export_capped = |out: &Path| {
        let args = [
            "sessions",
            "export",
            "--all",
            "--out",
            out.to_str().unwrap(),
        ];
        run_with_file_cap(&b, 128, &args)
    };
    let dir = tempfile::tempdir().unwrap();
    // Missing parents of the target are created by the export, so they are its to remove.
    let r = export_capped(&dir.path().join("new/parent/out"));
    let (_, err) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(
        names(dir.path()).is_empty(),
        "left behind: {:?}",
        walk(dir.path())
    );

    // An existing target with part of the layout already in it: that part stays.
    let out = dir.path().join("out");
    fs::create_dir_all(out.join("agents")).unwrap();
    fs::write(out.join("keep.txt"), "mine").unwrap();
    let r = export_capped(&out);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r).1);
    assert_eq!(names(&out), ["agents", "keep.txt"]);
    assert!(names(&out.join("agents")).is_empty(), "{:?}", walk(&out));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(items) = fs::read_dir(dir) {
        for item in items {
            let p = item.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
    }
    out
}

#[test]
fn export_all_refuses_existing_files_unless_forced_and_symlinked_folders_always() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all");
    let all_path = all.to_str().unwrap();
    b.ok(&["sessions", "export", "--all", "--out", all_path]);
    let index = all.join("agents/main/sessions/sessions.json");
    let before = fs::read(&index).unwrap();

    let r = b.run(&["sessions", "export", "--all", "--out", all_path]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r).1.contains("--force"), "{}", text(&r).1);
    b.ok(&["sessions", "export", "--all", "--out", all_path, "--force"]);
    assert_eq!(fs::read(&index).unwrap(), before);

    // A sessions folder that is a symlink elsewhere is never written through.
    let other = dir.path().join("other");
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(other.join("agents/main")).unwrap();
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, other.join("agents/main/sessions")).unwrap();
    for force in [false, true] {
        let mut args = vec![
            "sessions",
            "export",
            "--all",
            "--out",
            other.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        let r = b.run(&args);
        assert_eq!(r.status.code(), Some(1));
        assert!(
            text(&r).1.contains("a symlink, not a folder"),
            "{}",
            text(&r).1
        );
    }
    assert!(names(&elsewhere).is_empty());
}

// ---- import ----

const SID_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const SID_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
const SID_C: &str = "cccccccc-0000-4000-8000-000000000003";
const SID_D: &str = "dddddddd-0000-4000-8000-000000000004";
const SID_E: &str = "eeeeeeee-0000-4000-8000-000000000005";

fn message(id: &str, role: &str, text: &str) -> String {
    json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",
        "message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}})
    .to_string()
}

/// `<root>/agents/main/sessions` with `index` as sessions.json.
fn sessions_folder(root: &Path, index: Value) -> PathBuf {
    let dir = root.join("agents/main/sessions");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("sessions.json"), index.to_string()).unwrap();
    dir
}

fn import(b: &CliBench, dir: &Path) -> (String, String) {
    let out = b.run(&["import-openclaw", dir.to_str().unwrap()]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    (o, e)
}

fn has_session(b: &CliBench, key: &str) -> bool {
    b.run(&["sessions", "export", key]).status.success()
}

#[test]
fn import_reads_nothing_outside_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    // Valid transcripts outside the imported folder: the old import read them in.
    let secret = tmp.path().join("oc/agents/main/secret.jsonl");
    let outside = tmp.path().join("outside.jsonl");
    fs::create_dir_all(secret.parent().unwrap()).unwrap();
    fs::write(&secret, message("s1", "user", "SECRET-ONE") + "\n").unwrap();
    fs::write(&outside, message("s2", "user", "SECRET-TWO") + "\n").unwrap();
    let dir = sessions_folder(
        &tmp.path().join("oc"),
        json!({
            "agent:main:passwd": {"sessionId": SID_A, "updatedAt": 1, "sessionFile": "/etc/passwd"},
            "agent:main:environ": {"sessionId": SID_B, "updatedAt": 1, "sessionFile": "/proc/self/environ"},
            "agent:main:up": {"sessionId": SID_C, "updatedAt": 1, "sessionFile": "../secret.jsonl"},
            "agent:main:linked": {"sessionId": SID_D, "updatedAt": 1},
            "agent:main:fine": {"sessionId": SID_E, "updatedAt": 1},
        }),
    );
    symlink(&outside, dir.join(format!("{SID_D}.jsonl"))).unwrap();
    fs::write(
        dir.join(format!("{SID_E}.jsonl")),
        message("f1", "user", "fine") + "\n",
    )
    .unwrap();

    let b = CliBench::new(CONFIG);
    // The sessions folder itself is the source, so `../secret.jsonl` leaves it.
    let (out, err) = import(&b, &dir);
    for (key, shown) in [
        ("agent:main:passwd", "/etc/passwd"),
        ("agent:main:environ", "/proc/self/environ"),
        ("agent:main:up", "secret.jsonl"),
        ("agent:main:linked", SID_D),
    ] {
        assert!(!has_session(&b, key), "{key} was imported");
        assert!(
            err.lines().any(|l| l.contains(key) && l.contains(shown)),
            "{key}: {err}"
        );
    }
    assert!(
        out.contains("imported 1 new session (1 line); updated 0 (0 lines appended, 0 entries replaced); 0 unchanged; 0 conflicts; skipped 3 files outside the folder, 1 symlinked file"),
        "{out}"
    );
    assert!(err.contains("is outside"), "{err}");
    assert!(err.contains("is a symlink"), "{err}");
    assert!(!err.contains("root:"), "/etc/passwd was read: {err}");
    assert!(has_session(&b, "agent:main:fine"));
    let all = tmp.path().join("export");
    b.ok(&[
        "sessions",
        "export",
        "--all",
        "--out",
        all.to_str().unwrap(),
    ]);
    for f in walk(&all).into_iter().filter(|p| p.is_file()) {
        let body = fs::read_to_string(&f).unwrap();
        assert!(!body.contains("SECRET"), "{}: {body}", f.display());
    }
}

#[test]
fn import_skips_message_lines_of_the_wrong_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = sessions_folder(
        tmp.path(),
        json!({"agent:main:shape": {"sessionId": SID_A, "updatedAt": 1}}),
    );
    let lines = [
        message("m1", "user", "hello"),
        r#"{"type":"message","id":"m2","message":"not-an-object"}"#.to_string(),
        r#"{"type":"message","id":"m3","message":{"role":"system","content":"x"}}"#.to_string(),
        r#"{"type":"message","id":"m4","message":{"role":"user","content":42}}"#.to_string(),
        r#"{"type":"message","id":"m5"}"#.to_string(),
        r#"["an","array"]"#.to_string(),
        message("m6", "assistant", "hi there"),
    ];
    fs::write(dir.join(format!("{SID_A}.jsonl")), lines.join("\n") + "\n").unwrap();

    let b = CliBench::new(CONFIG);
    let (out, err) = import(&b, tmp.path());

    let h = b.json(&[
        "tool",
        "sessions_history",
        r#"{"sessionKey":"agent:main:shape"}"#,
    ]);
    let messages = h["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{h:#}");
    assert!(messages.iter().all(Value::is_object), "{h:#}");
    assert_eq!(messages[1]["content"][0]["text"], "hi there");
    assert!(
        out.contains("imported 1 new session (2 lines); updated 0 (0 lines appended, 0 entries replaced); 0 unchanged; 0 conflicts; skipped 1 line not a JSON object, 4 message lines of the wrong shape"),
        "{out}"
    );
    assert!(
        err.contains("line 2: skipped (a message line whose message is not an object)"),
        "{err}"
    );
    assert!(
        err.contains(r#"line 3: skipped (a message with role "system""#),
        "{err}"
    );
}

#[test]
fn import_summary_does_not_count_invalid_ids_as_already_present() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = sessions_folder(
        tmp.path(),
        json!({
            "agent:main:evil": {"sessionId": "../../evil", "updatedAt": 1},
            "agent:main:blank": {"sessionId": "", "updatedAt": 1},
            "agent:main:good": {"sessionId": SID_A, "updatedAt": 1},
        }),
    );
    fs::write(
        dir.join(format!("{SID_A}.jsonl")),
        message("g1", "user", "hi") + "\n",
    )
    .unwrap();
    let b = CliBench::new(CONFIG);
    let (out, _) = import(&b, tmp.path());
    assert_eq!(
        out.trim(),
        "imported 1 new session (1 line); updated 0 (0 lines appended, 0 entries replaced); 0 unchanged; 0 conflicts; skipped 2 invalid session ids"
    );
    let (out, _) = import(&b, tmp.path());
    assert_eq!(
        out.trim(),
        "imported 0 new sessions (0 lines); updated 0 (0 lines appended, 0 entries replaced); 1 unchanged; 0 conflicts; skipped 2 invalid session ids\nnothing changed"
    );
}

#[test]
fn import_skips_a_line_over_the_default_cap_without_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = sessions_folder(
        tmp.path(),
        json!({"agent:main:big": {"sessionId": SID_A, "updatedAt": 1}}),
    );
    // 17 MiB of text in one valid message line: over the 16 MiB line cap.
    let huge = message("h1", "user", &"x".repeat(17 << 20));
    let body = [
        message("m1", "user", "before"),
        huge,
        message("m2", "user", "after"),
    ];
    fs::write(dir.join(format!("{SID_A}.jsonl")), body.join("\n") + "\n").unwrap();

    let b = CliBench::new(CONFIG);
    let (out, err) = import(&b, tmp.path());
    let h = b.json(&[
        "tool",
        "sessions_history",
        r#"{"sessionKey":"agent:main:big"}"#,
    ]);
    let texts: Vec<&Value> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["content"][0]["text"])
        .collect();
    assert_eq!(texts, [&json!("before"), &json!("after")]);
    assert!(out.contains("imported 1 new session (2 lines)"), "{out}");
    assert!(out.contains("skipped 1 line too long"), "{out}");
    assert!(err.contains("line 2: skipped (17825"), "{err}");
}

#[test]
fn export_into_a_missing_folder_names_the_target() {
    let b = with_session(1, 10);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no/such/folder/main.jsonl");
    let r = b.run(&["sessions", "export", "main", "--out", out.to_str().unwrap()]);
    refused(&r, &out, &["cannot create", "No such file or directory"]);
    assert!(!text(&r).1.contains(".partial"), "{}", text(&r).1);
}
