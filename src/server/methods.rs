//! The gateway's methods: each request's params read, answered from `SessionsApi`, in
//! OpenClaw's payload shapes.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{
    ApiError, SendRequest, Sender, SessionRow, SessionsApi, SessionsQuery, ToolCall,
    TranscriptQuery,
};
use crate::protocol::{ErrorShape, INVALID_REQUEST};

/// The methods `hello-ok` announces, in the order they are documented.
pub const METHODS: &[&str] = &[
    "health",
    "sessions.list",
    "chat.history",
    "chat.send",
    "tools.invoke",
    crate::protocol::switchboard::method::SUBSCRIBE,
];

/// Events this gateway sends.
pub const EVENTS: &[&str] = &[
    "connect.challenge",
    crate::protocol::switchboard::EVENT,
    crate::protocol::switchboard::GAP,
];

/// `sessions.list` and `chat.history` limits as OpenClaw 2026.9.6 applies them (its list
/// honoured 10 000; its history caps at 1000).
const LIST_DEFAULT: usize = 100;
const LIST_MAX: usize = 10_000;
const HISTORY_DEFAULT: usize = 200;
const HISTORY_MAX: usize = 1000;

/// A failed call, as the `error` of a `res`.
pub fn error(code: &str, message: impl Into<String>) -> ErrorShape {
    ErrorShape {
        code: code.to_string(),
        message: message.into(),
        extra: serde_json::Map::new(),
    }
}

fn invalid(message: impl Into<String>) -> ErrorShape {
    error(INVALID_REQUEST, message)
}

fn api_failure(e: ApiError) -> ErrorShape {
    match e {
        ApiError::BadInput(m) => invalid(m),
        ApiError::NotFound(m) => error("NOT_FOUND", m),
        ApiError::Storage(m) => error("UNAVAILABLE", m),
        ApiError::Unavailable(m) => error("UNAVAILABLE", m),
    }
}

/// Reads params into `T`, naming the offending field on failure; absent params are `{}`.
fn params<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Option<Value>,
) -> Result<T, ErrorShape> {
    let v = match params {
        None | Some(Value::Null) => json!({}),
        Some(v) => v,
    };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        invalid(format!(
            "invalid {method} params at `{path}`: {}",
            e.into_inner()
        ))
    })
}

/// Answers one request (other than `connect`) with its payload or error.
pub async fn call(
    api: &Arc<dyn SessionsApi>,
    method: &str,
    mut raw: Option<Value>,
) -> Result<Value, ErrorShape> {
    if let Some(r) = super::switchboard_methods::call(api, method, &mut raw).await {
        return r;
    }
    match method {
        "health" => Ok(json!({"ok": true})),
        "sessions.list" => sessions_list(api, params(method, raw)?).await,
        "chat.history" => chat_history(api, params(method, raw)?).await,
        "chat.send" => chat_send(api, params(method, raw)?).await,
        "tools.invoke" => tools_invoke(api, params(method, raw)?).await,
        "connect" => Err(invalid("already connected")),
        other => Err(invalid(format!("unknown method: {other}"))),
    }
}

// Params of OpenClaw's own methods accept fields not modelled here (`includeLastMessage`,
// `deliver`, …), as its clients send them; our `tools.invoke` refuses unknown ones (typos).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    limit: Option<usize>,
    offset: Option<usize>,
    search: Option<String>,
    active_minutes: Option<u64>,
}

async fn sessions_list(api: &Arc<dyn SessionsApi>, p: ListParams) -> Result<Value, ErrorShape> {
    let limit = p.limit.unwrap_or(LIST_DEFAULT).clamp(1, LIST_MAX);
    let offset = p.offset.unwrap_or(0);
    let active_since = p.active_minutes.map(|m| {
        let ms = i64::try_from(m.saturating_mul(60_000)).unwrap_or(i64::MAX);
        chrono::Utc::now().timestamp_millis().saturating_sub(ms)
    });
    // One row more than asked tells whether another page follows without counting all.
    let page = api
        .sessions(SessionsQuery {
            text: p.search.unwrap_or_default(),
            active_since,
            offset,
            limit: limit + 1,
            count: true,
            ..SessionsQuery::default()
        })
        .await
        .map_err(api_failure)?;
    let has_more = page.rows.len() > limit;
    let sessions: Vec<Value> = page.rows.iter().take(limit).map(session_json).collect();
    let mut out = json!({
        "count": sessions.len(),
        "limitApplied": limit,
        "hasMore": has_more,
        "sessions": sessions,
    });
    if let Some(total) = page.matching {
        out["totalCount"] = json!(total);
    }
    if has_more {
        out["nextOffset"] = json!(offset + limit);
    }
    Ok(out)
}

fn session_json(row: &SessionRow) -> Value {
    let mut v = json!({
        "key": row.key,
        "sessionId": row.session_id,
        "agentId": row.agent_id,
        "kind": row.kind,
        "channel": row.channel,
        "updatedAt": row.updated_at,
        "sendPolicy": row.policy.policy,
    });
    if let Some(label) = &row.label {
        v["label"] = json!(label);
    }
    if let Some(name) = &row.display_name {
        v["displayName"] = json!(name);
    }
    v
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HistoryParams {
    session_key: String,
    limit: Option<usize>,
}

async fn chat_history(api: &Arc<dyn SessionsApi>, p: HistoryParams) -> Result<Value, ErrorShape> {
    let limit = p.limit.unwrap_or(HISTORY_DEFAULT).clamp(1, HISTORY_MAX);
    let key = api
        .resolve_key(&p.session_key, crate::api::KeyPurpose::Existing)
        .await
        .map_err(api_failure)?
        .key;
    let session_id = api
        .session(&key)
        .await
        .map_err(api_failure)?
        .map(|d| d.row.session_id)
        .ok_or_else(|| error("NOT_FOUND", format!("no session {key}")))?;
    let page = api
        .transcript(TranscriptQuery {
            key: key.clone(),
            before: None,
            limit: limit + 1,
            tools: true,
            raw: true,
        })
        .await
        .map_err(api_failure)?;
    let has_more = page.lines.len() > limit;
    let skip = page.lines.len().saturating_sub(limit);
    let messages: Vec<Value> = page
        .lines
        .into_iter()
        .skip(skip)
        .filter_map(|l| l.message)
        .collect();
    Ok(json!({
        "sessionKey": key,
        "sessionId": session_id,
        "messages": messages,
        "hasMore": has_more,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendParams {
    session_key: String,
    message: String,
    #[allow(dead_code)] // Accepted as OpenClaw's clients send it; dedup comes later.
    idempotency_key: Option<String>,
}

async fn chat_send(api: &Arc<dyn SessionsApi>, p: SendParams) -> Result<Value, ErrorShape> {
    let receipt = api
        .send(SendRequest {
            key: p.session_key,
            text: p.message,
            from: Sender {
                channel: Some("webchat".into()),
                owner: false,
                ..Sender::default()
            },
        })
        .await
        .map_err(api_failure)?;
    Ok(json!({
        "runId": receipt.run_id,
        "status": "started",
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeParams {
    name: String,
    #[serde(default)]
    params: Value,
    #[serde(rename = "as", default = "main_key")]
    requester: String,
}

fn main_key() -> String {
    "main".into()
}

async fn tools_invoke(api: &Arc<dyn SessionsApi>, p: InvokeParams) -> Result<Value, ErrorShape> {
    let params = if p.params.is_null() {
        json!({})
    } else {
        p.params
    };
    let result = api
        .call_tool(ToolCall {
            tool: p.name,
            params,
            requester: p.requester,
            sandboxed: false,
        })
        .await
        .map_err(api_failure)?;
    Ok(result.result)
}
