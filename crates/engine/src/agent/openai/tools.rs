//! The session tools as OpenAI function definitions, with parameter schemas following
//! `spec/session-tools.md`.

use serde_json::{Value, json};

/// The names offered to a model, in the order the spec lists them.
pub const NAMES: [&str; 5] = [
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "agents_list",
];

/// The `tools` array of a chat-completions request.
pub fn definitions() -> Value {
    Value::Array(definitions_of(&NAMES).into_iter().cloned().collect())
}

/// The `tools` array offering only `names` (unknown names are skipped). The definitions are
/// built once per process and borrowed: every model call of every turn sends them.
pub fn definitions_of(names: &[&str]) -> Vec<&'static Value> {
    static ALL: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| NAMES.iter().map(|n| definition(n)).collect());
    NAMES
        .iter()
        .zip(all)
        .filter(|(n, _)| names.contains(n))
        .map(|(_, d)| d)
        .collect()
}

fn function(name: &str, description: &str, parameters: Value) -> Value {
    json!({
        "type": "function",
        "function": { "name": name, "description": description, "parameters": parameters },
    })
}

fn definition(name: &str) -> Value {
    match name {
        "sessions_list" => function(
            name,
            "List sessions as an array of rows (key, kind, channel, displayName, updatedAt, sessionId, model, tokens).",
            json!({
                "type": "object",
                "properties": {
                    "kinds": {
                        "type": "array",
                        "items": { "type": "string", "enum": ["main", "group", "cron", "hook", "node", "other"] },
                        "description": "Only sessions of these kinds.",
                    },
                    "limit": { "type": "number", "description": "Max rows." },
                    "activeMinutes": { "type": "number", "description": "Only sessions updated within N minutes." },
                    "messageLimit": { "type": "number", "description": "0 = no messages (default); >0 = include the last N messages." },
                    "includeLastMessage": { "type": "boolean", "description": "Add lastMessagePreview to each row (default false)." },
                    "archived": { "description": "true = only archived sessions; \"all\" = archived ones too (default: none)." },
                },
                "additionalProperties": false,
            }),
        ),
        "sessions_history" => function(
            name,
            "Fetch the transcript of one session.",
            json!({
                "type": "object",
                "properties": {
                    "sessionKey": { "type": "string", "description": "Session key, or a sessionId from sessions_list." },
                    "limit": { "type": "number", "description": "Max messages." },
                    "includeTools": { "type": "boolean", "description": "Include toolResult messages (default false)." },
                    "includeSilent": { "type": "boolean", "description": "Keep silent replies (REPLY_SKIP, ANNOUNCE_SKIP, NO_REPLY; default false)." },
                },
                "required": ["sessionKey"],
                "additionalProperties": false,
            }),
        ),
        "sessions_send" => function(
            name,
            "Send a message into another session; waits for its reply unless timeoutSeconds is 0.",
            json!({
                "type": "object",
                "properties": {
                    "sessionKey": { "type": "string", "description": "Session key, or a sessionId from sessions_list." },
                    "message": { "type": "string" },
                    "timeoutSeconds": { "type": "number", "description": "Seconds to wait for the reply; 0 = fire-and-forget." },
                },
                "required": ["sessionKey", "message"],
                "additionalProperties": false,
            }),
        ),
        "sessions_spawn" => function(
            name,
            "Spawn a sub-agent run in an isolated session; its result is announced back here.",
            json!({
                "type": "object",
                "properties": {
                    "task": { "type": "string" },
                    "label": { "type": "string" },
                    "agentId": { "type": "string", "description": "Spawn under another agent id, if allowed (see agents_list)." },
                    "model": { "type": "string", "description": "Overrides the sub-agent's model." },
                    "thinking": { "type": "string", "description": "Overrides the sub-agent's thinking level." },
                    "runTimeoutSeconds": { "type": "number" },
                    "thread": { "type": "boolean" },
                    "mode": { "type": "string", "enum": ["run", "session"] },
                    "cleanup": { "type": "string", "enum": ["delete", "keep"] },
                },
                "required": ["task"],
                "additionalProperties": false,
            }),
        ),
        _ => function(
            "agents_list",
            "List the agent ids this session may use with sessions_spawn.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
    }
}
