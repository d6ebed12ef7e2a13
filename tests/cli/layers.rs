//! The layer rule, checked on the source: front ends (the console, the command line, the
//! demo's traffic, `inject`'s progress) use `api::SessionsApi` and its types, never the
//! engine's internals. The compiler enforces it for the binary (the engine's modules are
//! `pub(crate)` without the `internals` feature); the console and the demo live in the same
//! crate as the engine, so for them this test is the check.

use std::path::{Path, PathBuf};

/// What no front-end file may mention: the database, the storage layer, policy evaluation,
/// the key scheme, or any engine module.
const FORBIDDEN: &[&str] = &[
    "rusqlite",
    "storage::",
    "policy::evaluate",
    "scheme()",
    "crate::engine",
];

/// What the composition root (`cli.rs`) may name on the engine: opening it, starting it,
/// draining it before exit, and the state-folder file operations (docs/ARCHITECTURE.md).
const ROOT_MAY_NAME: &[&str] = &[
    "switchboard::engine::Engine;",
    "switchboard::engine::Overwrite;",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn front_end_files() -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("tui"), &mut files);
    rust_files(&src.join("server"), &mut files);
    rust_files(&src.join("remote"), &mut files);
    rust_files(&src.join("protocol"), &mut files);
    for f in ["cli.rs", "main.rs", "progress.rs", "demo.rs"] {
        files.push(src.join(f));
    }
    files
}

/// Lines breaking the rule, as `file:line: text`; comments are not code, and a file's unit
/// tests (from `#[cfg(test)]` on) may check the engine's side of things.
fn violations() -> Vec<String> {
    let mut found = Vec::new();
    for file in front_end_files() {
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            let bad = FORBIDDEN.iter().any(|f| code.contains(f))
                || (code.contains("switchboard::engine")
                    && !ROOT_MAY_NAME.iter().any(|ok| code.contains(ok)));
            if bad {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn front_ends_reach_the_engine_only_through_the_api() {
    let found = violations();
    assert!(
        found.is_empty(),
        "front ends must use crate::api, not the engine:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_every_front_end_file() {
    // A check that reads no files would pass forever.
    let files = front_end_files();
    assert!(files.iter().any(|f| f.ends_with("tui/update.rs")));
    assert!(files.iter().any(|f| f.ends_with("server/methods.rs")));
    assert!(files.iter().all(|f| f.exists()), "{files:?}");
    assert!(files.len() >= 10, "{files:?}");
}

/// Engine files that still name the SQLite store: the import and export (`transfer/`), and
/// the bridge they use (`session/store.rs`'s `sqlite_read`, the `Storage` handle `Engine::new`
/// passes on). See docs/ARCHITECTURE.md, "The store seam".
const ENGINE_MAY_NAME_SQLITE: &[&str] = &["transfer/", "session/store.rs", "engine/mod.rs"];

/// Engine lines naming the database (`rusqlite`, `store_sqlite`) outside those files.
fn engine_sqlite_lines() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root.join("engine"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if ENGINE_MAY_NAME_SQLITE.iter().any(|ok| rel.contains(ok)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("rusqlite") || code.contains("store_sqlite") {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_engine_stores_through_the_store_trait() {
    let found = engine_sqlite_lines();
    assert!(
        found.is_empty(),
        "the engine must use crate::store::Store, not SQLite:\n{}",
        found.join("\n")
    );
}
