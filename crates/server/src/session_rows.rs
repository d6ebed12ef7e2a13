//! A session in OpenClaw's gateway shape, as `sessions.list`, `sessions.describe` and
//! `chat.history`'s `sessionInfo` carry it: every field the engine knows (the owner's
//! entry) under OpenClaw's names and with its values (`kind: "direct"`, `sendPolicy: null`
//! for a session that inherits the config's rule).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use switchboard_types::api::{AgentInfo, SessionKind, SessionRow};

/// OpenClaw's `kind`: `global` and `unknown` are its reserved keys, a group or channel chat
/// is `group`, and everything else (a person's chat, a main session, cron, hooks) `direct`.
pub fn kind(row: &SessionRow) -> &'static str {
    match row.key.as_str() {
        "global" => "global",
        "unknown" => "unknown",
        _ if row.kind == SessionKind::Group => "group",
        _ => "direct",
    }
}

/// The models of the configured agents, for rows whose entry records none (OpenClaw shows
/// the agent's configured model then, and its TUI's footer reads it), and the context
/// windows the config gives those models (OpenClaw's `contextTokens`).
#[derive(Default)]
pub struct Models {
    by_agent: HashMap<String, String>,
    default: Option<String>,
    /// `provider/model` -> context window, for the models the config lists one for.
    windows: HashMap<String, u64>,
}

impl Models {
    pub fn new(agents: &[AgentInfo]) -> Models {
        Models {
            by_agent: agents
                .iter()
                .map(|a| (a.id.clone(), a.model.clone()))
                .collect(),
            default: agents
                .iter()
                .find(|a| a.is_default)
                .map(|a| a.model.clone()),
            windows: agents
                .iter()
                .filter_map(|a| Some((a.model.clone(), a.context_tokens?)))
                .collect(),
        }
    }

    fn of(&self, agent: &str) -> Option<&str> {
        self.by_agent
            .get(agent)
            .or(self.default.as_ref())
            .map(String::as_str)
            .filter(|m| !m.is_empty())
    }

    /// A number that differs when anything rows take from the models differs (and with
    /// `titles`: whether rows carry `derivedTitle`): part of a kept row's key
    /// (`rows::RowCache`).
    pub fn fingerprint(&self, titles: bool) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut agents: Vec<_> = self.by_agent.iter().collect();
        agents.sort();
        agents.hash(&mut h);
        let mut windows: Vec<_> = self.windows.iter().collect();
        windows.sort();
        windows.hash(&mut h);
        (&self.default, titles).hash(&mut h);
        h.finish()
    }

    /// OpenClaw's `defaults` beside a list: the default agent's model and, when the config
    /// gives it, its context window.
    pub fn defaults(&self) -> Value {
        match self.default.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => {
                let mut v = with_model(Map::new(), m);
                if let Some(w) = self.windows.get(m) {
                    v.insert("contextTokens".into(), json!(w));
                }
                v.into()
            }
            None => json!({}),
        }
    }

    /// The window of a row's model (`modelProvider` + `model` as the row now says them).
    fn window_of(&self, row: &Map<String, Value>) -> Option<u64> {
        let model = row.get("model").and_then(Value::as_str)?;
        match row.get("modelProvider").and_then(Value::as_str) {
            Some(p) => self.windows.get(&format!("{p}/{model}")),
            None => self.windows.get(model),
        }
        .copied()
    }
}

/// `model` and, for `provider/model`, `modelProvider` as OpenClaw splits them.
fn with_model(mut v: Map<String, Value>, model: &str) -> Map<String, Value> {
    match model.split_once('/') {
        Some((provider, name)) if !provider.is_empty() && !name.is_empty() => {
            v.insert("modelProvider".into(), json!(provider));
            v.insert("model".into(), json!(name));
        }
        _ => {
            v.insert("model".into(), json!(model));
        }
    }
    v
}

/// One row: the owner's entry (when the query asked for it) with the row's own facts laid
/// over it in OpenClaw's names.
pub fn row(row: &SessionRow, entry: Option<Value>, models: &Models) -> Value {
    // The entry is taken, not copied: a 50-row list copied each row's map once more.
    let mut v = match entry {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    // The spec's row names its transcript file; OpenClaw's gateway rows do not (the list's
    // `path` does), and a path is nothing a remote client can open.
    v.remove("transcriptPath");
    let stored_policy = v
        .remove("sendPolicy")
        .filter(|p| matches!(p.as_str(), Some("allow" | "deny")));
    v.insert("key".into(), json!(row.key));
    v.insert("kind".into(), json!(kind(row)));
    v.insert("agentId".into(), json!(row.agent_id));
    v.insert("sessionId".into(), json!(row.session_id));
    v.insert("channel".into(), json!(row.channel));
    v.insert("updatedAt".into(), json!(row.updated_at));
    if let Some(label) = &row.label {
        v.insert("label".into(), json!(label));
    }
    if !v.contains_key("displayName")
        && let Some(name) = &row.display_name
    {
        v.insert("displayName".into(), json!(name));
    }
    // The session's own override; `null` when it inherits (the config's rule decides).
    v.insert("sendPolicy".into(), stored_policy.unwrap_or(Value::Null));
    v.insert("archived".into(), json!(row.archived));
    v.insert("isMain".into(), json!(row.kind == SessionKind::Main));
    v.insert("hasActiveRun".into(), json!(row.running));
    if row.running {
        v.insert("status".into(), json!("running"));
    }
    if !v.contains_key("model")
        && let Some(model) = models.of(&row.agent_id)
    {
        v = with_model(v, model);
    }
    // OpenClaw's row gives the model's window when the entry records none; unknown (the
    // config lists no window for the model): absent, where OpenClaw would guess 200,000.
    if !v.contains_key("contextTokens")
        && let Some(w) = models.window_of(&v)
    {
        v.insert("contextTokens".into(), json!(w));
    }
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_types::api::{PolicySetting, PolicySourceKind, PolicyView};

    fn session(key: &str, kind: SessionKind) -> SessionRow {
        SessionRow {
            key: key.into(),
            display_key: key.into(),
            kind,
            agent_id: "main".into(),
            channel: "webchat".into(),
            name: key.into(),
            label: None,
            display_name: None,
            session_id: "s-1".into(),
            updated_at: 5,
            policy: PolicyView {
                policy: PolicySetting::Allow,
                source: PolicySourceKind::Default,
                rule: None,
                matched: None,
                detail: String::new(),
                summary: String::new(),
            },
            running: false,
            archived: false,
            agents_stopped: false,
            entry: None,
            last_message: None,
        }
    }

    #[test]
    fn kinds_and_an_inherited_policy_read_as_openclaw_writes_them() {
        let models = Models::new(&[AgentInfo {
            id: "main".into(),
            model: "fake/fake-1".into(),
            is_default: true,
            may_spawn: Vec::new(),
            context_tokens: None,
        }]);
        let entry = json!({"sendPolicy": "inherit", "transcriptPath": "/x", "totalTokens": 9});
        let r = row(
            &session("agent:main:main", SessionKind::Main),
            Some(entry.clone()),
            &models,
        );
        assert_eq!(r["kind"], "direct");
        assert_eq!(r["sendPolicy"], Value::Null);
        assert_eq!(r["model"], "fake-1");
        assert_eq!(r["modelProvider"], "fake");
        assert_eq!(r["totalTokens"], 9);
        assert_eq!(r["archived"], false);
        assert_eq!(
            (r["isMain"].as_bool(), r["hasActiveRun"].as_bool()),
            (Some(true), Some(false))
        );
        assert!(r.get("transcriptPath").is_none());
        let denied = json!({"sendPolicy": "deny"});
        let r = row(
            &session("agent:main:discord:group:g", SessionKind::Group),
            Some(denied.clone()),
            &models,
        );
        assert_eq!(
            (r["kind"].as_str(), r["sendPolicy"].as_str()),
            (Some("group"), Some("deny"))
        );
        assert_eq!(
            row(&session("global", SessionKind::Other), None, &models)["kind"],
            "global"
        );
    }
}
