//! The overlays slash commands open (the `/status` card, the `/agents` picker), what their
//! loads bring back (plain data, built by `update`, drawn by `view::cards`), and the runner's
//! part for those loads and for `/abort` and `/new`.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::action::Action;
use super::effects::Effect;
use switchboard_types::api::{
    AgentInfo, ApiError, DeliveryCounts, KeyPurpose, OutboxQuery, OutboxRow, SendRequest, Sender,
    SessionDetail, SessionsApi, SessionsQuery,
};

/// How many of the newest sessions `/status` looks through for a session's children (the
/// API lists sessions, not children; a child is normally recent).
pub const CHILDREN_SCAN: usize = 500;

/// An overlay over the panes; while one is open it takes the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Card {
    /// `/status`: one session's facts, as label/value rows (`None`: still loading).
    Status {
        key: String,
        rows: Option<Vec<(String, String)>>,
    },
    /// `/agents`: the configured agents, one selected.
    Agents { selected: usize },
}

/// What `/status` loads: the session (None: no such session) and the sessions it spawned.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusInfo {
    pub detail: Option<SessionDetail>,
    pub children: Vec<String>,
    /// How many sessions were looked through for children (the newest ones).
    pub scanned: usize,
    /// The session's newest deliveries (`None`: the engine records none).
    pub deliveries: Option<Vec<OutboxRow>>,
    /// The engine's deliveries per status (`None`: it records none).
    pub counts: Option<DeliveryCounts>,
}

/// What `/new` found and did: the session's canonical key, whether it existed, and whether
/// the first message was sent into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub key: String,
    pub exists: bool,
    pub sent: bool,
}

/// The `/status` card's rows for `info`. `running` and `agents` are what the console knows
/// besides (the session runs now; the agents' configured models).
pub fn status_rows(
    info: &StatusInfo,
    running: bool,
    now_ms: i64,
    agents: Option<&[AgentInfo]>,
) -> Vec<(String, String)> {
    let Some(d) = &info.detail else {
        return vec![("session".into(), "no such session (deleted?)".into())];
    };
    let (row, e) = (&d.row, &d.entry);
    let text = |name: &str| e.get(name).and_then(Value::as_str).map(str::to_string);
    let number = |name: &str| e.get(name).and_then(Value::as_u64);
    let mut rows: Vec<(String, String)> = Vec::new();
    // On one of several sources, the key is shown with its source (the same key may be on
    // another).
    let shown = match switchboard_types::api::source::SessionRef::parse(&row.key).source {
        Some(source) => switchboard_types::api::source::SessionRef::join(source, &row.display_key),
        None => row.display_key.clone(),
    };
    let name = if row.name != row.display_key {
        format!("{shown} ({})", row.name)
    } else {
        shown
    };
    rows.push(("session".into(), name));
    let model = text("model")
        .map(|m| format!("{m} (last run)"))
        .or_else(|| {
            agents?
                .iter()
                .find(|a| a.id == row.agent_id)
                .map(|a| format!("{} (configured)", a.model))
        })
        .unwrap_or_else(|| "not recorded yet".into());
    rows.push(("agent".into(), format!("{} · {model}", row.agent_id)));
    let tokens = match (number("totalTokens"), number("contextTokens")) {
        (None, None) => "none recorded".to_string(),
        (t, c) => {
            let mut s = format!("{} total", t.unwrap_or(0));
            if let Some(c) = c {
                s.push_str(&format!(" · context {c}"));
            }
            s
        }
    };
    rows.push(("tokens".into(), tokens));
    let mut runtime = if running { "running now" } else { "idle" }.to_string();
    // The phrase style: a whole phrase ("just now", "2 min ago"), never "now ago".
    runtime.push_str(&format!(
        " · updated {}",
        switchboard_types::api::time::ago(
            now_ms,
            row.updated_at,
            switchboard_types::api::time::AgoStyle::Words
        )
    ));
    if e.get("abortedLastRun").and_then(Value::as_bool) == Some(true) {
        runtime.push_str(" · last run aborted");
    }
    rows.push(("runtime".into(), runtime));
    let p = &row.policy;
    rows.push((
        "send policy".into(),
        // The detail names the source in words (`override`, `rule 1 (…)`, `default (…)`).
        format!("{} · {}", p.policy, p.detail),
    ));
    let parent = text("spawnedBy")
        .or_else(|| text("parentSessionKey"))
        .unwrap_or_else(|| "none".into());
    rows.push(("parent".into(), parent));
    let children = if info.children.is_empty() {
        format!("none among the {} newest sessions", info.scanned)
    } else {
        info.children.join(", ")
    };
    rows.push(("children".into(), children));
    if let Some(d) = &info.deliveries {
        rows.push((
            "deliveries".into(),
            crate::deliveries::Deliveries::summary(d),
        ));
    }
    if let Some(c) = &info.counts {
        rows.push(("all deliveries".into(), crate::deliveries::counts_words(c)));
    }
    rows
}

/// Carry out one of the slash commands' effects off the UI task; the result comes back as
/// an action.
pub(super) fn run(effect: Effect, api: Arc<dyn SessionsApi>, tx: UnboundedSender<Action>) {
    tokio::spawn(async move {
        let action = match effect {
            Effect::LoadAgents => Action::AgentsLoaded(Box::new(api.agents().await)),
            Effect::LoadStatus { key } => {
                let result = status_info(api.as_ref(), &key).await;
                Action::StatusLoaded {
                    key,
                    result: Box::new(result),
                }
            }
            Effect::Abort { key } => {
                let result = api.abort(&key, None).await;
                Action::Aborted {
                    key,
                    result: Box::new(result),
                }
            }
            Effect::Halt { keys } => {
                if api.policy_stops_exchanges() {
                    return;
                }
                let mut results = Vec::with_capacity(keys.len());
                for key in keys {
                    let result = api.abort(&key, None).await;
                    results.push((key, result));
                }
                Action::Halted(results)
            }
            Effect::AgentSends { keys, stopped } => {
                let mut failed = None;
                for key in &keys {
                    if let Err(e) = api.set_agent_sends(key, stopped).await {
                        failed = Some(format!("{key}: {e}"));
                        break;
                    }
                }
                match failed {
                    Some(why) => Action::Flash(why, true),
                    None if stopped => Action::Flash(
                        format!(
                            "agent sends stopped into {}; its replies to its chat go on",
                            keys.join(", ")
                        ),
                        false,
                    ),
                    None => Action::Flash(
                        format!(
                            "agent sends into {} follow its send policy again",
                            keys.join(", ")
                        ),
                        false,
                    ),
                }
            }
            Effect::NewSession { raw, text } => {
                Action::NewSession(Box::new(new_session(api.as_ref(), &raw, text).await))
            }
            // The console's own loads and sends are the runner's.
            _ => return,
        };
        let _ = tx.send(action);
    });
}

async fn status_info(api: &dyn SessionsApi, key: &str) -> Result<StatusInfo, ApiError> {
    let detail = api.session(key).await?;
    let page = api
        .sessions(SessionsQuery {
            limit: CHILDREN_SCAN,
            entries: true,
            archived: true,
            ..SessionsQuery::default()
        })
        .await?;
    let display = detail.as_ref().map(|d| d.row.display_key.as_str());
    let children = page
        .rows
        .iter()
        .filter(|r| {
            r.entry.as_ref().is_some_and(|e| {
                e.get("spawnedBy")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p == key || Some(p) == display)
            })
        })
        .map(|r| r.display_key.clone())
        .collect();
    // Where the engine keeps no outbox (an OpenClaw gateway), the card says nothing of it.
    let query = OutboxQuery {
        limit: crate::deliveries::SESSION_ROWS,
        session_key: Some(key.to_string()),
        ..OutboxQuery::default()
    };
    let deliveries = api.deliveries(query).await.ok();
    let counts = api.delivery_counts().await.ok().flatten();
    Ok(StatusInfo {
        detail,
        children,
        scanned: page.rows.len(),
        deliveries,
        counts,
    })
}

async fn new_session(
    api: &dyn SessionsApi,
    raw: &str,
    text: Option<String>,
) -> Result<NewSession, ApiError> {
    let resolved = api.resolve_key(raw, KeyPurpose::Inbound).await?;
    let sent = match text {
        Some(text) => {
            api.send(SendRequest {
                key: resolved.key.clone(),
                text,
                from: Sender::owner(),
                idempotency_key: None,
            })
            .await?;
            true
        }
        None => false,
    };
    Ok(NewSession {
        key: resolved.key,
        exists: resolved.exists,
        sent,
    })
}
