//! The methods OpenClaw's TUI calls on attach and after every send that our engine has
//! little or nothing behind: `commands.list` (the slash commands this gateway handles),
//! `question.list`, `plugin.approval.list` and `taskSuggestions.list` (nothing of the kind
//! here: OpenClaw's exact empty answers, as a 2026.9.6 gateway gives them with none).

use serde_json::{Value, json};

/// A slash command this gateway handles in `chat.send` (`slash.rs`).
struct Command {
    name: &'static str,
    description: &'static str,
    category: &'static str,
    accepts_args: bool,
}

const COMMANDS: &[Command] = &[
    Command {
        name: "status",
        description: "Show current status.",
        category: "status",
        accepts_args: false,
    },
    Command {
        name: "send",
        description: "Set send policy (on, off or inherit).",
        category: "management",
        accepts_args: true,
    },
    Command {
        name: "abort",
        description: "Abort the current run.",
        category: "session",
        accepts_args: false,
    },
    Command {
        name: "new",
        description: "Start a new session.",
        category: "session",
        accepts_args: true,
    },
];

/// `commands.list`: each entry in OpenClaw's shape (`name`, `nativeName`, `textAliases`,
/// `description`, `category`, `source`, `scope`, `acceptsArgs`).
pub fn commands_list() -> Value {
    let commands: Vec<Value> = COMMANDS
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "nativeName": c.name, "textAliases": [format!("/{}", c.name)],
                "description": c.description, "category": c.category, "source": "native",
                "scope": "both", "acceptsArgs": c.accepts_args,
            })
        })
        .collect();
    json!({ "commands": commands })
}

/// The answers of the lists this gateway has nothing in, as OpenClaw 2026.9.6 gives them
/// empty; `None` for any other method.
pub fn empty_list(method: &str) -> Option<Value> {
    Some(match method {
        "question.list" => json!({"questions": []}),
        // A bare array: OpenClaw's answer here is not an object.
        "plugin.approval.list" => json!([]),
        "taskSuggestions.list" => json!({"suggestions": []}),
        _ => return None,
    })
}
