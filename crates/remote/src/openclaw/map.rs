//! OpenClaw's payloads as `api` types: session keys, `sessions.list` rows, `chat.history`
//! messages, send-policy overrides and `agent.wait` answers. Pure functions over JSON, so
//! each mapping is checked against frames captured from a real 2026.9.6 gateway. What a
//! payload does not say is left unknown (`unknown`, `None`), never guessed.

use serde::Deserialize;
use serde_json::Value;

use switchboard_types::api::{
    AgentInfo, ApiError, PolicySetting, PolicySourceKind, PolicyView, RunResult, RunStatus,
    SendPolicy, SessionKind, SessionRow, TranscriptLine, role_and_text,
};

/// The gateway's key settings (`agents.list`: `defaultId`, `mainKey`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRules {
    pub default_agent: String,
    pub main_key: String,
}

impl Default for KeyRules {
    fn default() -> KeyRules {
        KeyRules {
            default_agent: "main".into(),
            main_key: "main".into(),
        }
    }
}

/// OpenClaw's agent-id normalisation: lowercase, runs of other characters become one `-`,
/// dashes trimmed, at most 64 characters, empty means `main`.
fn agent_id(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for ch in raw.trim().chars() {
        let c = ch.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let id: String = out.trim_matches('-').chars().take(64).collect();
    let id = id.trim_end_matches('-');
    if id.is_empty() {
        "main".into()
    } else {
        id.to_string()
    }
}

impl KeyRules {
    /// A key as typed, in the canonical `agent:<id>:<rest>` form OpenClaw stores: `main` (or
    /// the configured main key) is the default agent's main session, other bare keys belong
    /// to the default agent. Refuses what cannot name a session and keys holding control,
    /// BiDi or invisible characters.
    pub fn canonical(&self, raw: &str) -> Result<String, ApiError> {
        let trimmed = raw.trim();
        if let Some((at, c)) = switchboard_types::text_safety::forbidden_in_key(trimmed) {
            return Err(ApiError::BadInput(format!(
                "session key {:?} holds {} ({}) at character {}",
                switchboard_types::text_safety::safe_line(trimmed),
                switchboard_types::text_safety::describe(c),
                switchboard_types::text_safety::code_point(c),
                at + 1
            )));
        }
        let s = switchboard_types::key::collapse_segments(trimmed);
        if s.is_empty() {
            return Err(ApiError::BadInput("a session key cannot be empty".into()));
        }
        if s == "main" || s == self.main_key {
            return Ok(self.main_of(&self.default_agent));
        }
        if let Some(after) = s.strip_prefix("agent:") {
            let (agent, rest) = after.split_once(':').ok_or_else(|| {
                ApiError::BadInput(format!(
                    "{s}: an agent key needs agent:<id>:<rest> (e.g. agent:main:main)"
                ))
            })?;
            if rest == "main" || rest == self.main_key {
                return Ok(self.main_of(agent));
            }
            return Ok(format!("agent:{}:{rest}", agent_id(agent)));
        }
        Ok(format!("agent:{}:{s}", agent_id(&self.default_agent)))
    }

    fn main_of(&self, agent: &str) -> String {
        format!("agent:{}:{}", agent_id(agent), self.main_key)
    }

    /// The kind by the key's shape (as `sessions_list` classifies), with the row's
    /// `chatType` marking groups whose key does not say so.
    pub fn kind(&self, key: &str, chat_type: Option<&str>) -> SessionKind {
        let rest = rest_of(key);
        SessionKind::of_key(
            rest,
            key.starts_with("agent:") && rest == self.main_key,
            chat_type,
        )
    }
}

/// What follows `agent:<id>:` (the whole key when it has no agent part).
fn rest_of(key: &str) -> &str {
    key.strip_prefix("agent:")
        .and_then(|after| after.split_once(':'))
        .map(|(_, rest)| rest)
        .unwrap_or(key)
}

fn text_of<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// A row's or entry's `sendPolicy` override: exactly `allow` or `deny` (as the gateway writes
/// it); anything else is no override.
pub fn send_policy_of(row: &Value) -> Option<SendPolicy> {
    row.get("sendPolicy")
        .and_then(|p| SendPolicy::deserialize(p).ok())
}

/// The send policy a row's `sendPolicy` stands for. OpenClaw reports only the session's
/// own override; without one its config rules decide and the gateway does not say how, so
/// the view says "inherit" rather than claim allow or deny.
pub fn policy_view(send_policy: Option<SendPolicy>) -> PolicyView {
    match send_policy {
        Some(p) => PolicyView {
            policy: PolicySetting::from_policy(Some(p)),
            source: PolicySourceKind::Override,
            rule: None,
            matched: None,
            detail: "this session's override (sessions.patch sendPolicy)".into(),
            summary: format!("{p}, from this session's override"),
        },
        None => PolicyView {
            policy: PolicySetting::Inherit,
            source: PolicySourceKind::Default,
            rule: None,
            matched: None,
            detail: "the OpenClaw gateway's config decides (it does not report the outcome)".into(),
            summary: "inherit (gateway default)".into(),
        },
    }
}

/// One `sessions.list` / `sessions.describe` row as a `SessionRow` (`None`: no key).
pub fn session_row(rules: &KeyRules, row: &Value) -> Option<SessionRow> {
    let key = text_of(row, "key")?.to_string();
    let label = text_of(row, "label").map(str::to_string);
    let display_name = text_of(row, "displayName").map(str::to_string);
    let agent = text_of(row, "agentId")
        .map(str::to_string)
        .or_else(|| {
            key.strip_prefix("agent:")
                .and_then(|a| a.split(':').next())
                .map(str::to_string)
        })
        .unwrap_or_else(|| rules.default_agent.clone());
    let channel = text_of(row, "channel")
        .or_else(|| text_of(row, "lastChannel"))
        .or_else(|| row.get("origin").and_then(|o| text_of(o, "provider")))
        .or_else(|| {
            row.get("deliveryContext")
                .and_then(|d| text_of(d, "channel"))
        })
        .unwrap_or("unknown")
        .to_string();
    let kind = rules.kind(&key, text_of(row, "chatType"));
    Some(SessionRow {
        name: display_name
            .clone()
            .or_else(|| label.clone())
            .unwrap_or_else(|| key.clone()),
        display_key: key.clone(),
        kind,
        agent_id: agent,
        channel,
        label,
        display_name,
        session_id: text_of(row, "sessionId").unwrap_or("").to_string(),
        updated_at: row.get("updatedAt").and_then(Value::as_i64).unwrap_or(0),
        policy: policy_view(send_policy_of(row)),
        running: row.get("hasActiveRun").and_then(Value::as_bool) == Some(true),
        archived: row.get("archived").and_then(Value::as_bool) == Some(true),
        // OpenClaw has no such stop (a field one of ours would send is read all the same).
        agents_stopped: row.get("agentSendPolicy").and_then(Value::as_str) == Some("deny"),
        // OpenClaw's list row is not our owner entry; `sessions list` asks `session()` for it.
        entry: None,
        // OpenClaw's rows carry no last message: the preview column stays empty.
        last_message: None,
        key,
    })
}

pub use switchboard_types::api::message_text;

/// Where a `chat.history` message sits in its transcript (`__openclaw.seq`, 1-based).
pub fn message_seq(m: &Value) -> Option<i64> {
    m.get("__openclaw")
        .and_then(|o| o.get("seq"))
        .and_then(Value::as_i64)
}

/// Who a display-normalised message is from. OpenClaw labels forwarded messages itself
/// (`senderLabel: "Forwarded from work"`, on an assistant line), so its label comes first.
fn speaker(m: &Value) -> String {
    let role = text_of(m, "role").unwrap_or("");
    let owner = m
        .get("__openclaw")
        .and_then(|o| o.get("senderIsOwner"))
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(label) = text_of(m, "senderLabel") {
        return if owner && role == "user" {
            format!("{label} (owner)")
        } else {
            label.to_string()
        };
    }
    let prov = m.get("provenance");
    match role {
        "user" if prov.and_then(|p| text_of(p, "kind")) == Some("inter_session") => format!(
            "from {} via {}",
            prov.and_then(|p| text_of(p, "sourceSessionKey"))
                .unwrap_or("?"),
            prov.and_then(|p| text_of(p, "sourceTool")).unwrap_or("?")
        ),
        "user" if owner => "owner".into(),
        "user" => "user".into(),
        "toolResult" => text_of(m, "toolName").unwrap_or("tool").to_string(),
        // OpenClaw's own notice (`custom_message` with `display: true`), not an agent's words.
        "custom" => "notice".into(),
        _ => "agent".into(),
    }
}

/// One `chat.history` message (or `session.message` payload message) as a transcript
/// line; `None` for assistant turns with nothing to show. `seq` is the message's place
/// when it carries none.
pub fn transcript_line(m: &Value, seq: i64, keep_message: bool) -> Option<TranscriptLine> {
    let (role, text) = role_and_text(m)?;
    Some(TranscriptLine {
        seq: message_seq(m).unwrap_or(seq),
        role,
        timestamp: m.get("timestamp").and_then(Value::as_i64).unwrap_or(0),
        from: speaker(m),
        text,
        message: keep_message.then(|| m.clone()),
    })
}

/// `agents.list` as the configured agents (the model is the agent's primary, when set).
pub fn agents(payload: &Value) -> (Vec<AgentInfo>, KeyRules) {
    let rules = KeyRules {
        default_agent: text_of(payload, "defaultId").unwrap_or("main").to_string(),
        main_key: text_of(payload, "mainKey").unwrap_or("main").to_string(),
    };
    let list = payload
        .get("agents")
        .and_then(Value::as_array)
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|a| {
            let id = text_of(a, "id")?.to_string();
            let model = match a.get("model") {
                Some(Value::String(s)) => s.clone(),
                Some(m) => text_of(m, "primary").unwrap_or("").to_string(),
                None => String::new(),
            };
            Some(AgentInfo {
                is_default: id == rules.default_agent,
                id,
                model,
                // A Switchboard gateway says it; OpenClaw does not.
                may_spawn: a
                    .get("maySpawn")
                    .and_then(Value::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
                // OpenClaw's `agents.list` does not say; its rows carry `contextTokens`.
                context_tokens: None,
            })
        })
        .collect();
    (list, rules)
}

/// An `agent.wait` answer. OpenClaw says `timeout` when the wait ran out with the run still
/// going (or unknown to it): that is the API's `running`.
pub fn run_result(run_id: &str, payload: &Value) -> RunResult {
    let said = text_of(payload, "status");
    let status = match said {
        Some("timeout") | None => RunStatus::Running,
        // A status this build does not know is not success: reported as an error that
        // names it.
        Some(s) => s.parse().unwrap_or(RunStatus::Error),
    };
    let error = text_of(payload, "error")
        .or_else(|| text_of(payload, "errorMessage"))
        .map(str::to_string)
        .or_else(|| {
            said.filter(|s| s.parse::<RunStatus>().is_err())
                .map(|s| format!("the gateway reported run status {s:?}"))
        });
    RunResult {
        run_id: text_of(payload, "runId").unwrap_or(run_id).to_string(),
        status,
        reply: payload
            .get("terminalReply")
            .and_then(|r| text_of(r, "text"))
            .unwrap_or("")
            .to_string(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_keep_may_spawn_when_the_gateway_says_it() {
        let (list, _) = agents(&serde_json::json!({"defaultId": "main", "agents": [
            {"id": "main", "model": {"primary": "m"}},
            {"id": "work", "model": "w", "maySpawn": ["main", 7]},
        ]}));
        assert!(list[0].may_spawn.is_empty());
        assert_eq!(list[1].may_spawn, ["main"]);
    }

    /// A failed run's notice, as OpenClaw's `chat.history` returns it, is a line of its own
    /// that says the run failed (not a reply, not dropped).
    #[test]
    fn a_failed_runs_notice_shows_as_the_failure_it_reports() {
        let m = serde_json::json!({"role": "custom", "customType": "run-failed-before-reply",
            "content": "This turn ended before a reply: Run timed out", "timestamp": 5,
            "__openclaw": {"seq": 4}});
        let l = transcript_line(&m, 1, false).unwrap();
        assert_eq!(
            (l.seq, l.role.as_str(), l.from.as_str(), l.text.as_str()),
            (
                4,
                "error",
                "notice",
                "This turn ended before a reply: Run timed out"
            )
        );
    }

    #[test]
    fn keys_canonicalise_as_openclaw_stores_them() {
        let r = KeyRules::default();
        assert_eq!(r.canonical("main").unwrap(), "agent:main:main");
        assert_eq!(r.canonical(" Agent:Work:Main ").unwrap(), "agent:work:main");
        assert_eq!(r.canonical("octest").unwrap(), "agent:main:octest");
        assert_eq!(r.canonical("agent:Ops Team:x").unwrap(), "agent:ops-team:x");
        assert!(r.canonical("agent:solo").is_err());
        assert!(r.canonical("  ").is_err());
        assert!(r.canonical("a\u{202e}b").is_err());
    }

    #[test]
    fn kinds_follow_the_key() {
        let r = KeyRules::default();
        assert_eq!(r.kind("agent:main:main", None), SessionKind::Main);
        assert_eq!(r.kind("agent:main:cron:nightly", None), SessionKind::Cron);
        assert_eq!(r.kind("agent:main:hook:x", None), SessionKind::Hook);
        assert_eq!(r.kind("agent:main:node-1", None), SessionKind::Node);
        assert_eq!(
            r.kind("agent:main:telegram:group:42", None),
            SessionKind::Group
        );
        assert_eq!(r.kind("agent:main:x", Some("group")), SessionKind::Group);
        assert_eq!(
            r.kind("agent:main:octest", Some("direct")),
            SessionKind::Other
        );
    }
}
