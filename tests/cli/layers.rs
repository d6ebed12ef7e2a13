//! The layer rule, checked on the source: front ends (the console, the command line, the
//! demo's traffic, `inject`'s progress) use `api::SessionsApi` and its types, never the
//! engine's internals. The compiler enforces it for the binary (the engine's modules are
//! `pub(crate)` without the `internals` feature); the console and the demo live in the same
//! crate as the engine, so for them this test is the check. The front ends' functions are
//! also held to a length (`front_end_functions_stay_short`, issue 24 item 4).

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

/// What the composition root (`cli/`) may name on the engine: opening it, starting it,
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
    rust_files(&src.join("cli"), &mut files);
    for f in ["main.rs", "progress.rs", "demo.rs"] {
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
    assert!(files.iter().any(|f| f.ends_with("cli/attach.rs")));
    assert!(files.iter().all(|f| f.exists()), "{files:?}");
    assert!(files.len() >= 10, "{files:?}");
}

/// The longest a function in the front ends (`src/tui/`, `src/cli/`) may be without saying
/// why: a comment line starting `// Long:` (or a doc line `/// Long:`) just above it.
const MAX_FN_LINES: usize = 120;

/// Functions of `text` longer than `MAX_FN_LINES`, as `name (n lines)`: from the `fn` line to
/// the closing brace at the same indentation (rustfmt's layout).
fn long_functions(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let Some(at) = code.find("fn ") else { continue };
        let head = &code[..at];
        if !head.split_whitespace().all(|w| {
            [
                "pub",
                "pub(crate)",
                "pub(super)",
                "async",
                "const",
                "unsafe",
            ]
            .contains(&w)
        }) {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        let Some(end) = lines[i..].iter().position(|l| *l == close) else {
            continue;
        };
        let explained = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.trim_start().starts_with("//") || l.trim_start().starts_with("#["))
            .any(|l| l.contains("Long:"));
        if end + 1 > MAX_FN_LINES && !explained {
            found.push(format!("{name} ({} lines)", end + 1));
        }
    }
    found
}

#[test]
fn front_end_functions_stay_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("tui"), &mut files);
    rust_files(&src.join("cli"), &mut files);
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for f in long_functions(&text) {
            long.push(format!("{}: {f}", file.display()));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them, or say why in a `// Long:` comment \
         above):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_counts_a_long_function() {
    // A check that never finds one would pass forever.
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let long = format!("pub(crate) async fn big() {{\n{body}}}\n");
    assert_eq!(
        long_functions(&long),
        vec![format!("big ({} lines)", MAX_FN_LINES + 2)]
    );
    let explained = format!("// Long: one table of every key, read top to bottom.\n{long}");
    assert!(long_functions(&explained).is_empty());
    let short = "fn small() {\n    let x = 1;\n}\n";
    assert!(long_functions(short).is_empty());
}

/// `api` is the bottom layer (issue 24 item 3): it names nothing else of the crate, so it can
/// become the workspace's bottom crate as it is. Until the split, this is the check.
#[test]
fn the_api_imports_nothing_above_it() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api"),
        &mut files,
    );
    assert!(
        files.iter().any(|f| f.ends_with("api/types.rs")),
        "{files:?}"
    );
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let outside = code
                .match_indices("crate::")
                .any(|(i, _)| !code[i..].starts_with("crate::api"));
            if outside {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "api must not import the rest of the crate:\n{}",
        found.join("\n")
    );
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
