//! The layer rule, held by the crate graph (docs/ARCHITECTURE.md, "Crates"): each crate may
//! depend only on the crates below it, so a wrong import does not compile. This test pins the
//! graph itself, so that rule cannot be loosened by adding a dependency line unnoticed: every
//! workspace crate's own dependencies are listed, what the bottom crate pulls in is checked,
//! and `rusqlite` is named by the SQLite store alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Each crate → the workspace crates it may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("switchboard-types", &[]),
    ("switchboard-protocol", &["switchboard-types"]),
    ("switchboard-config", &["switchboard-types"]),
    ("switchboard-store", &["switchboard-types"]),
    (
        "switchboard-store-sqlite",
        &["switchboard-store", "switchboard-types"],
    ),
    (
        "switchboard-store-postgres",
        &["switchboard-store", "switchboard-types"],
    ),
    // The engine knows storage only as the `Store` trait (and OpenClaw's SQLite state only as
    // the `OpenClawDbs` source trait); the binary's `state_folder` plugs the SQLite ones in.
    (
        "switchboard-engine",
        &[
            "switchboard-protocol",
            "switchboard-store",
            "switchboard-types",
        ],
    ),
    (
        "switchboard-server",
        &["switchboard-protocol", "switchboard-types"],
    ),
    (
        "switchboard-remote",
        &["switchboard-protocol", "switchboard-types"],
    ),
    // Telegram's Bot API and access rules; it knows nothing of the engine or the stores.
    (
        "switchboard-telegram",
        &["switchboard-protocol", "switchboard-types"],
    ),
    // Several engines as one API: it knows only the API (the binary dials the gateways).
    ("switchboard-sources", &["switchboard-types"]),
    ("switchboard-tui", &["switchboard-types"]),
    // Channel adapters and the outbox drain: the store trait below, never the engine (which
    // must not call an adapter); the binary starts the drain beside the engine.
    (
        "switchboard-channels",
        &["switchboard-store", "switchboard-types"],
    ),
];

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn metadata() -> serde_json::Value {
    let out = cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

/// Workspace crate → its normal (not dev, not build) dependencies among workspace crates.
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let meta = metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(*n))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_crate_depends_only_on_the_crates_below_it() {
    let graph = workspace_graph();
    for (name, allowed) in ALLOWED {
        let deps = graph
            .get(*name)
            .unwrap_or_else(|| panic!("{name} is not in the workspace"));
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        let extra: Vec<_> = deps.difference(&allowed).collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}, which is not below it (docs/ARCHITECTURE.md, \"Crates\")"
        );
    }
    // The binary is the composition root: the only crate that may name every other one.
    assert!(graph.contains_key("switchboard"));
    assert_eq!(
        graph.len(),
        ALLOWED.len() + 1,
        "a crate with no rule: {graph:?}"
    );
}

/// The crates `package` pulls in (normal dependencies), one `name version` a line.
fn tree_of(package: &str) -> String {
    let out = cargo()
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_not_in_tree(package: &str, forbidden: &[&str]) {
    let tree = tree_of(package);
    for name in forbidden {
        assert!(
            !tree.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{package} pulls in {name}:\n{tree}"
        );
    }
}

#[test]
fn the_bottom_crate_pulls_in_no_database_socket_terminal_or_http() {
    assert_not_in_tree(
        "switchboard-types",
        &[
            "rusqlite",
            "tokio-tungstenite",
            "ratatui",
            "reqwest",
            "crossterm",
        ],
    );
}

/// A second store (PostgreSQL) must be possible without touching the engine: the engine
/// compiles without any SQLite in its tree, the OpenClaw import's reader included.
#[test]
fn the_engine_pulls_in_no_sqlite() {
    assert_not_in_tree(
        "switchboard-engine",
        &["rusqlite", "libsqlite3-sys", "switchboard-store-sqlite"],
    );
}

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

#[test]
fn only_the_sqlite_store_names_rusqlite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for entry in std::fs::read_dir(root.join("crates")).expect("crates") {
        let dir = entry.expect("entry").path();
        if !dir.ends_with("store-sqlite") {
            rust_files(&dir.join("src"), &mut files);
        }
    }
    let offenders: Vec<_> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .contains("rusqlite")
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "rusqlite named outside the SQLite store: {offenders:?}"
    );
}

/// The longest a function in the front ends (`crates/tui/`, `src/cli/`) may be without saying
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("crates/tui/src"), &mut files);
    rust_files(&root.join("src/cli"), &mut files);
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
