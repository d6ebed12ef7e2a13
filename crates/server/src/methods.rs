//! The gateway's methods: each request's params read, answered from `SessionsApi`, in
//! OpenClaw's payload shapes.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::rows::RowCache;
use super::session_rows;
use switchboard_protocol::{ErrorShape, INVALID_REQUEST, Rendered};
use switchboard_types::api::{
    ApiError, KeyPurpose, PatchRequest, PolicySetting, RowRevision, RunStatus, SendPolicy,
    SendRequest, Sender, SessionRow, SessionsApi, SessionsQuery, ToolCall, TranscriptQuery,
};

/// The methods `hello-ok` announces: OpenClaw's, in the order they are documented, then
/// Switchboard's own (`protocol::switchboard::method::ALL`, added where the list is built).
pub const METHODS: &[&str] = &[
    "health",
    "status",
    "sessions.list",
    "sessions.resolve",
    "sessions.create",
    "sessions.patch",
    "sessions.delete",
    "sessions.subscribe",
    "sessions.unsubscribe",
    "sessions.messages.subscribe",
    "sessions.messages.unsubscribe",
    "chat.history",
    "chat.send",
    "chat.abort",
    "agent",
    "agent.wait",
    "agents.list",
    "tools.invoke",
    // What OpenClaw's TUI calls on attach and after each send (`tui_methods.rs`).
    "sessions.describe",
    "commands.list",
    "question.list",
    "plugin.approval.list",
    "taskSuggestions.list",
];

/// Events this gateway sends.
pub const EVENTS: &[&str] = &[
    "connect.challenge",
    super::events::TICK,
    super::events::SESSIONS_CHANGED,
    super::events::SESSION_MESSAGE,
    super::events::CHAT,
    super::events::AGENT,
    super::events::A2A,
    switchboard_protocol::switchboard::EVENT,
    switchboard_protocol::switchboard::GAP,
];

/// Methods that change state: refused on a read-only connection (with
/// `protocol::switchboard::method::WRITES`).
pub const WRITES: &[&str] = &[
    "chat.send",
    "chat.abort",
    "agent",
    "sessions.create",
    "sessions.patch",
    "sessions.delete",
    "tools.invoke",
];

/// Whether `method` changes state.
pub fn is_write(method: &str) -> bool {
    WRITES.contains(&method) || switchboard_protocol::switchboard::method::WRITES.contains(&method)
}

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

pub fn invalid(message: impl Into<String>) -> ErrorShape {
    error(INVALID_REQUEST, message)
}

pub fn api_failure(e: ApiError) -> ErrorShape {
    match e {
        ApiError::BadInput(m) => invalid(m),
        ApiError::NotFound(m) => error("NOT_FOUND", m),
        ApiError::Storage { message, .. } => error("UNAVAILABLE", message),
        ApiError::Unavailable(m) => error("UNAVAILABLE", m),
    }
}

/// Reads params into `T`, naming the offending field on failure; absent params are `{}`.
pub fn params<T: serde::de::DeserializeOwned>(
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

/// Answers one request (other than `connect`) with its payload or error; an answer that
/// lists history is paged to fit a frame of `max_payload` bytes.
pub async fn call(
    api: &Arc<dyn SessionsApi>,
    method: &str,
    mut raw: Option<Value>,
    max_payload: usize,
) -> Result<Value, ErrorShape> {
    if let Some(r) = super::switchboard_methods::call(api, method, &mut raw, max_payload).await {
        return r;
    }
    match method {
        "health" => Ok(json!({"ok": true})),
        "status" => status(api).await,
        // `sessions.list` is answered by `requests` through `sessions_list_answer` (its
        // rows may be spliced from the ones kept rendered, which a `Value` cannot carry).
        "sessions.resolve" => sessions_resolve(api, params(method, raw)?).await,
        "sessions.create" => sessions_create(api, params(method, raw)?).await,
        "sessions.patch" => sessions_patch(api, params(method, raw)?).await,
        "sessions.delete" => sessions_delete(api, params(method, raw)?).await,
        "chat.history" => chat_history(api, params(method, raw)?, max_payload).await,
        "chat.abort" => chat_abort(api, params(method, raw)?).await,
        "agent.wait" => agent_wait(api, params(method, raw)?).await,
        "agents.list" => agents_list(api).await,
        "tools.invoke" => tools_invoke(api, params(method, raw)?).await,
        "sessions.describe" => sessions_describe(api, params(method, raw)?).await,
        "commands.list" => Ok(super::tui_methods::commands_list()),
        "connect" => Err(invalid("already connected")),
        other => super::tui_methods::empty_list(other)
            .ok_or_else(|| invalid(format!("unknown method: {other}"))),
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
    /// Only this agent's sessions (their TUI lists the current agent's).
    agent_id: Option<String>,
    /// `derivedTitle` on each row (the name the session shows).
    #[serde(default)]
    include_derived_titles: bool,
    /// `lastMessagePreview` on each row.
    #[serde(default)]
    include_last_message: bool,
}

/// What `sessions.list` asks of the API, from its params.
struct ListQuery {
    query: SessionsQuery,
    limit: usize,
    offset: usize,
    agent: Option<String>,
}

fn list_query(p: &ListParams) -> ListQuery {
    let limit = p.limit.unwrap_or(LIST_DEFAULT).clamp(1, LIST_MAX);
    let offset = p.offset.unwrap_or(0);
    let active_since = p.active_minutes.map(|m| {
        let ms = i64::try_from(m.saturating_mul(60_000)).unwrap_or(i64::MAX);
        chrono::Utc::now().timestamp_millis().saturating_sub(ms)
    });
    let agent = p.agent_id.clone().filter(|a| !a.is_empty());
    // An agent's sessions are the keys `agent:<id>:…`: the key search narrows the page to
    // them (rows whose name merely contains that text are dropped below). A search of
    // the client's own keeps its text, and the agent is then only filtered on the page.
    let text = match (&p.search, &agent) {
        (Some(search), _) => search.clone(),
        (None, Some(id)) => format!("agent:{id}:"),
        (None, None) => String::new(),
    };
    ListQuery {
        // One row more than asked tells whether another page follows without counting all.
        query: SessionsQuery {
            text,
            active_since,
            offset,
            limit: limit + 1,
            count: true,
            entries: true,
            previews: p.include_last_message,
            ..SessionsQuery::default()
        },
        limit,
        offset,
        agent,
    }
}

/// A `sessions.list` answer: built as a `Value`, or spliced from rows kept rendered.
pub enum Listed {
    Value(Value),
    Rendered(Rendered),
}

/// `sessions.list`: from the rows kept rendered (`rows::RowCache`) where the API can say
/// which rows changed (`SessionsApi::session_revisions`), else built whole.
pub async fn sessions_list_answer(
    api: &Arc<dyn SessionsApi>,
    kept: &RowCache,
    raw: Option<Value>,
) -> Result<Listed, ErrorShape> {
    let p: ListParams = params("sessions.list", raw)?;
    if let Some(answer) = rendered_list(api, kept, &p).await? {
        return Ok(Listed::Rendered(answer));
    }
    sessions_list(api, p).await.map(Listed::Value)
}

/// The envelope of a `sessions.list` answer made of rendered rows, in the order and names
/// `sessions_list` gives its fields.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RenderedList<'a> {
    ts: i64,
    count: usize,
    limit_applied: usize,
    has_more: bool,
    next_offset: Option<usize>,
    defaults: Value,
    sessions: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_count: Option<u64>,
}

/// The answer spliced from kept rows, rendering only the rows whose revision moved; `None`
/// when the API cannot give revisions for this query.
async fn rendered_list(
    api: &Arc<dyn SessionsApi>,
    kept: &RowCache,
    p: &ListParams,
) -> Result<Option<Rendered>, ErrorShape> {
    let q = list_query(p);
    let Some(page) = api.session_revisions(&q.query).await.map_err(api_failure)? else {
        return Ok(None);
    };
    let models = session_rows::Models::new(&api.agents().await.map_err(api_failure)?);
    let shape = models.fingerprint(p.include_derived_titles);
    let has_more = page.rows.len() > q.limit;
    let wanted: Vec<&(String, String, RowRevision)> = page
        .rows
        .iter()
        .take(q.limit)
        .filter(|(_, agent, _)| q.agent.as_ref().is_none_or(|a| a == agent))
        .collect();
    let mut texts: Vec<Option<Arc<RawValue>>> = wanted
        .iter()
        .map(|(key, _, revision)| kept.get(key, *revision, shape))
        .collect();
    let missing: Vec<String> = wanted
        .iter()
        .zip(&texts)
        .filter(|(_, t)| t.is_none())
        .map(|((key, _, _), _)| key.clone())
        .collect();
    if !missing.is_empty() {
        let read = api.sessions_by_key(missing).await.map_err(api_failure)?;
        let mut fresh = HashMap::with_capacity(read.len());
        for (row, revision) in read {
            let key = row.key.clone();
            let v = listed_row(row, &models, p);
            let text: Arc<RawValue> = serde_json::value::to_raw_value(&v)
                .map_err(|e| api_failure(ApiError::storage(e.to_string())))?
                .into();
            kept.put(key.clone(), revision, shape, text.clone());
            fresh.insert(key, text);
        }
        for (t, (key, _, _)) in texts.iter_mut().zip(&wanted) {
            if t.is_none() {
                // A session deleted since the page was read is left out, as a page read a
                // moment later would.
                *t = fresh.get(key).cloned();
            }
        }
    }
    let rows: Vec<Arc<RawValue>> = texts.into_iter().flatten().collect();
    let answer = RenderedList {
        ts: chrono::Utc::now().timestamp_millis(),
        count: rows.len(),
        limit_applied: q.limit,
        has_more,
        next_offset: has_more.then_some(q.offset + q.limit),
        defaults: models.defaults(),
        sessions: rows.iter().map(|r| &**r).collect(),
        total_count: page.matching,
    };
    let text = serde_json::value::to_raw_value(&answer)
        .map_err(|e| api_failure(ApiError::storage(e.to_string())))?;
    Ok(Some(Rendered::from(text)))
}

/// One `sessions.list` row as the params ask for it (`derivedTitle`, `lastMessagePreview`).
fn listed_row(mut r: SessionRow, models: &session_rows::Models, p: &ListParams) -> Value {
    let entry = r.entry.take();
    let mut v = session_rows::row(&r, entry, models);
    if p.include_derived_titles {
        v["derivedTitle"] = json!(r.name);
    }
    if p.include_last_message
        && let Some(last) = &r.last_message
    {
        v["lastMessagePreview"] = json!(last);
    }
    v
}

async fn sessions_list(api: &Arc<dyn SessionsApi>, p: ListParams) -> Result<Value, ErrorShape> {
    let ListQuery {
        query,
        limit,
        offset,
        agent,
    } = list_query(&p);
    let page = api.sessions(query).await.map_err(api_failure)?;
    let models = session_rows::Models::new(&api.agents().await.map_err(api_failure)?);
    let has_more = page.rows.len() > limit;
    let sessions: Vec<Value> = page
        .rows
        .into_iter()
        .take(limit)
        .filter(|r| agent.as_ref().is_none_or(|a| &r.agent_id == a))
        .map(|r| listed_row(r, &models, &p))
        .collect();
    let mut out = json!({
        "ts": chrono::Utc::now().timestamp_millis(),
        "count": sessions.len(),
        "limitApplied": limit,
        "hasMore": has_more,
        "nextOffset": if has_more { json!(offset + limit) } else { Value::Null },
        "defaults": models.defaults(),
    });
    // Moved in, not through `json!`: the macro serialises its arguments into a new
    // `Value`, which copied every row once more (13 % of a 50-row list, perf).
    out["sessions"] = Value::Array(sessions);
    if let Some(total) = page.matching {
        out["totalCount"] = json!(total);
    }
    Ok(out)
}

#[derive(Deserialize)]
struct DescribeParams {
    key: String,
}

/// `sessions.describe`: one session's row, as `sessions.list` gives it, under `session`;
/// `null` for a session with no message yet, as OpenClaw 2026.9.6 answers (their TUI asks
/// for `agent:<id>:main` before anything was said there, and on an error it keeps neither
/// the list's `defaults` nor the model: its footer read "unknown | tokens ?").
async fn sessions_describe(
    api: &Arc<dyn SessionsApi>,
    p: DescribeParams,
) -> Result<Value, ErrorShape> {
    let key = match api.resolve_key(&p.key, KeyPurpose::Existing).await {
        Ok(resolved) => resolved.key,
        Err(ApiError::NotFound(_)) => return Ok(json!({"session": null})),
        Err(e) => return Err(api_failure(e)),
    };
    let Some(detail) = api.session(&key).await.map_err(api_failure)? else {
        return Ok(json!({"session": null}));
    };
    let models = session_rows::Models::new(&api.agents().await.map_err(api_failure)?);
    Ok(json!({"session": session_rows::row(&detail.row, Some(detail.entry), &models)}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HistoryParams {
    session_key: String,
    limit: Option<usize>,
    /// The messages as stored, without OpenClaw's display normalisation and envelope
    /// fields: only Switchboard's own clients send it (OpenClaw's know no such field).
    #[serde(default)]
    raw: bool,
}

/// OpenClaw's cap on a `chat.history` answer's messages (DEFAULT_MAX_CHAT_HISTORY_MESSAGES_BYTES).
const HISTORY_MAX_BYTES: usize = 6 * 1024 * 1024;

async fn chat_history(
    api: &Arc<dyn SessionsApi>,
    p: HistoryParams,
    max_payload: usize,
) -> Result<Value, ErrorShape> {
    let limit = p.limit.unwrap_or(HISTORY_DEFAULT).clamp(1, HISTORY_MAX);
    let resolved = api
        .resolve_key(&p.session_key, KeyPurpose::Inbound)
        .await
        .map_err(api_failure)?;
    let key = resolved.key;
    let detail = api.session(&key).await.map_err(api_failure)?;
    let Some(detail) = detail else {
        if p.raw {
            return Err(error("NOT_FOUND", format!("no session {key}")));
        }
        // A session with no message yet has an empty history (their TUI attaches to
        // `agent:<id>:main` before anything was said there, and says "history failed"
        // on an error), with the `defaults` OpenClaw gives there too: their TUI's footer
        // shows the default model and its window from them.
        let models = session_rows::Models::new(&api.agents().await.map_err(api_failure)?);
        return Ok(json!({
            "sessionKey": key, "messages": [], "hasMore": false, "totalMessages": 0,
            "defaults": models.defaults(),
        }));
    };
    let session_id = detail.row.session_id.clone();
    let page = api
        .transcript(TranscriptQuery {
            key: key.clone(),
            before: None,
            limit: limit + 1,
            tools: true,
            raw: true,
            // The messages go on as they are: the text of each is not needed here.
            bare: true,
        })
        .await
        .map_err(api_failure)?;
    let has_more = page.lines.len() > limit;
    let skip = page.lines.len().saturating_sub(limit);
    let last_seq = page.last_seq;
    let messages = page.lines.into_iter().skip(skip).filter_map(|l| l.message);
    let messages: Vec<Value> = if p.raw {
        messages.collect()
    } else {
        messages.filter_map(super::history::display).collect()
    };
    let mut answer = json!({
        "sessionKey": key,
        "sessionId": session_id,
    });
    // Moved in, not through `json!` (which would copy every message: see `sessions_list`).
    answer["messages"] = Value::Array(messages);
    answer["hasMore"] = Value::Bool(has_more);
    if !p.raw {
        let models = session_rows::Models::new(&api.agents().await.map_err(api_failure)?);
        // Every line of the transcript (the session header and custom lines included):
        // the store keeps no separate count of messages.
        answer["totalMessages"] = json!(last_seq);
        answer["deltaCursor"] = json!(super::history::delta_cursor(&session_id, last_seq));
        answer["defaults"] = models.defaults();
        answer["sessionInfo"] = session_rows::row(&detail.row, Some(detail.entry), &models);
    }
    // As OpenClaw: the oldest messages go first, a message too large is replaced; unlike it,
    // a long one is first cut (its head kept, with the marker) rather than dropped whole.
    let budget = super::fit::budget(max_payload).min(HISTORY_MAX_BYTES);
    let paged = super::fit::page_field(&mut answer, "messages", budget, |m| {
        json!({
            "role": m.get("role").cloned().unwrap_or_else(|| json!("assistant")),
            "content": [{"type": "text", "text": "[chat.history omitted: message too large]"}],
            "__openclaw": m.get("__openclaw").cloned().unwrap_or(Value::Null),
        })
    });
    if paged.dropped > 0 {
        answer["hasMore"] = json!(true);
    }
    Ok(answer)
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

async fn status(api: &Arc<dyn SessionsApi>) -> Result<Value, ErrorShape> {
    let status = api.status().await.map_err(api_failure)?;
    Ok(json!({
        "ok": true,
        "ts": chrono::Utc::now().timestamp_millis(),
        "server": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")},
        "protocol": super::PROTOCOL,
        "sessions": {"count": status.sessions},
    }))
}

/// The canonical key of an existing session, found as `sessions.resolve` takes it: by
/// key, by session id, or by exact label.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResolveParams {
    key: Option<String>,
    session_id: Option<String>,
    label: Option<String>,
}

async fn sessions_resolve(
    api: &Arc<dyn SessionsApi>,
    p: ResolveParams,
) -> Result<Value, ErrorShape> {
    let raw = match (p.key, p.session_id, p.label) {
        (Some(k), _, _) | (None, Some(k), _) => k,
        (None, None, Some(label)) => return resolve_label(api, &label).await,
        (None, None, None) => {
            return Err(invalid("sessions.resolve needs key, sessionId or label"));
        }
    };
    let resolved = api
        .resolve_key(&raw, KeyPurpose::Existing)
        .await
        .map_err(api_failure)?;
    if !resolved.exists {
        return Err(error("NOT_FOUND", format!("no session found: {raw}")));
    }
    Ok(json!({"ok": true, "key": resolved.key}))
}

async fn resolve_label(api: &Arc<dyn SessionsApi>, label: &str) -> Result<Value, ErrorShape> {
    // The text search narrows the list; the exact label decides.
    let page = api
        .sessions(SessionsQuery {
            text: label.to_string(),
            archived: true,
            limit: LIST_MAX,
            ..SessionsQuery::default()
        })
        .await
        .map_err(api_failure)?;
    let found: Vec<&SessionRow> = page
        .rows
        .iter()
        .filter(|r| r.label.as_deref() == Some(label))
        .collect();
    match found.as_slice() {
        [one] => Ok(json!({"ok": true, "key": one.key})),
        [] => Err(error("NOT_FOUND", format!("no session labelled {label:?}"))),
        _ => Err(invalid(format!(
            "{} sessions are labelled {label:?}; give the key",
            found.len()
        ))),
    }
}

/// `sessions.create`: our engine makes a session with its first message, so a create
/// with a `message` sends it; without one, an existing key is answered as it is, and a
/// new key is refused rather than faked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateParams {
    key: Option<String>,
    agent_id: Option<String>,
    message: Option<String>,
    /// Recorded as the new session's `parentSessionKey` (their TUI's `/new` names the
    /// session it was typed in).
    parent_session_key: Option<String>,
}

async fn sessions_create(api: &Arc<dyn SessionsApi>, p: CreateParams) -> Result<Value, ErrorShape> {
    let raw = match (p.key, p.agent_id) {
        // A bare key belongs to the agent named beside it (`{key: "tui-…", agentId:
        // "work"}` is `agent:work:tui-…`), as OpenClaw reads it.
        (Some(k), Some(agent)) if !k.starts_with("agent:") && !agent.is_empty() => {
            format!("agent:{agent}:{k}")
        }
        (Some(k), _) => k,
        (None, Some(agent)) => format!("agent:{agent}:main"),
        (None, None) => "main".to_string(),
    };
    let resolved = api
        .resolve_key(&raw, KeyPurpose::Inbound)
        .await
        .map_err(api_failure)?;
    let mut run_started = false;
    if let Some(text) = p.message {
        let receipt = api
            .send(SendRequest {
                key: resolved.key.clone(),
                text,
                from: webchat(),
                idempotency_key: None,
            })
            .await
            .map_err(api_failure)?;
        run_started = receipt.run_id.is_some();
    } else if !resolved.exists {
        api.create(&resolved.key, p.parent_session_key.as_deref())
            .await
            .map_err(api_failure)?;
    }
    let detail = api
        .session(&resolved.key)
        .await
        .map_err(api_failure)?
        .ok_or_else(|| error("NOT_FOUND", format!("no session found: {}", resolved.key)))?;
    Ok(json!({
        "ok": true,
        "key": detail.row.key,
        "sessionId": detail.row.session_id,
        "entry": detail.entry,
        "runStarted": run_started,
    }))
}

/// The sender of messages from OpenClaw's clients: its run channel is webchat.
pub fn webchat() -> Sender {
    Sender {
        channel: Some("webchat".into()),
        owner: false,
        ..Sender::default()
    }
}

/// `sendPolicy` is the one setting this engine patches; OpenClaw's others (label,
/// model …) are refused by name rather than silently dropped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchParams {
    key: String,
    /// Absent: not given; `null`: back to the config's rule.
    #[serde(default, deserialize_with = "present")]
    send_policy: Option<Value>,
    /// Switchboard's narrower stop: `"deny"` stops agent-to-agent sends into the session
    /// only; `null` lifts it.
    #[serde(default, deserialize_with = "present")]
    agent_send_policy: Option<Value>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

async fn sessions_patch(api: &Arc<dyn SessionsApi>, p: PatchParams) -> Result<Value, ErrorShape> {
    if p.send_policy.is_none() && p.agent_send_policy.is_none() {
        let names: Vec<&str> = p.other.keys().map(String::as_str).collect();
        return Err(invalid(if names.is_empty() {
            "nothing to change: give sendPolicy (\"allow\", \"deny\" or null) or \
             agentSendPolicy (\"deny\" or null)"
                .to_string()
        } else {
            format!(
                "this gateway patches sendPolicy and agentSendPolicy only, not {}",
                names.join(", ")
            )
        }));
    }
    let change = match &p.send_policy {
        None => None,
        Some(Value::Null) => Some(PolicySetting::Inherit),
        // The wire's exact words (serde's), not the lenient words people type.
        Some(v) => match SendPolicy::deserialize(v) {
            Ok(policy) => Some(PolicySetting::from_policy(Some(policy))),
            Err(_) => {
                return Err(invalid(format!(
                    "invalid sessions.patch params at `sendPolicy`: expected \"allow\", \"deny\" or null, got {v}"
                )));
            }
        },
    };
    let stop_agents = match &p.agent_send_policy {
        None => None,
        Some(Value::Null) => Some(false),
        Some(Value::String(s)) if s == switchboard_types::entry::AGENT_SENDS_STOPPED => Some(true),
        Some(v) => {
            return Err(invalid(format!(
                "invalid sessions.patch params at `agentSendPolicy`: expected \"deny\" or null, got {v}"
            )));
        }
    };
    let key = api
        .resolve_key(&p.key, KeyPurpose::Existing)
        .await
        .map_err(api_failure)?
        .key;
    if let Some(stopped) = stop_agents {
        api.set_agent_sends(&key, stopped)
            .await
            .map_err(api_failure)?;
    }
    let effective = match change {
        Some(change) => Some(
            api.patch(PatchRequest {
                key: key.clone(),
                send_policy: Some(change),
            })
            .await
            .map_err(api_failure)?
            .effective,
        ),
        None => None,
    };
    let detail = api.session(&key).await.map_err(api_failure)?;
    let effective = match (effective, &detail) {
        (Some(e), _) => Some(e),
        (None, Some(d)) => Some(d.row.policy.clone()),
        (None, None) => None,
    };
    let entry = detail.map(|d| d.entry).unwrap_or(Value::Null);
    let mut resolved = json!({
        "agentSendPolicy": entry.get("agentSendPolicy").cloned().unwrap_or(Value::Null),
    });
    if let Some(e) = effective {
        resolved["sendPolicy"] = json!(e.policy);
        resolved["source"] = json!(e.source);
    }
    Ok(json!({
        "ok": true,
        "key": key,
        "entry": entry,
        "resolved": resolved,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteParams {
    key: String,
}

async fn sessions_delete(api: &Arc<dyn SessionsApi>, p: DeleteParams) -> Result<Value, ErrorShape> {
    let key = api
        .resolve_key(&p.key, KeyPurpose::Existing)
        .await
        .map_err(api_failure)?
        .key;
    let deleted = api.delete(&key).await.map_err(api_failure)?;
    Ok(json!({"ok": true, "key": key, "deleted": deleted}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AbortParams {
    session_key: String,
    run_id: Option<String>,
}

/// Stops the session's running run (only `runId`, when given), as OpenClaw's `chat.abort`:
/// `{ok, aborted, runIds}`; nothing running is `aborted: false`, not an error.
async fn chat_abort(api: &Arc<dyn SessionsApi>, p: AbortParams) -> Result<Value, ErrorShape> {
    let key = match api.resolve_key(&p.session_key, KeyPurpose::Existing).await {
        Ok(k) => k.key,
        // No such session: nothing of it can be running.
        Err(ApiError::NotFound(_)) => {
            return Ok(json!({"ok": true, "aborted": false, "runIds": []}));
        }
        Err(e) => return Err(api_failure(e)),
    };
    let done = api
        .abort(&key, p.run_id.as_deref())
        .await
        .map_err(api_failure)?;
    Ok(json!({"ok": true, "aborted": !done.run_ids.is_empty(), "runIds": done.run_ids}))
}

/// The longest `agent.wait` honoured; OpenClaw's own default is 30 s.
const WAIT_DEFAULT_MS: u64 = 30_000;
const WAIT_MAX_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitParams {
    pub run_id: String,
    timeout_ms: Option<u64>,
}

pub async fn agent_wait(api: &Arc<dyn SessionsApi>, p: WaitParams) -> Result<Value, ErrorShape> {
    let ms = p.timeout_ms.unwrap_or(WAIT_DEFAULT_MS).min(WAIT_MAX_MS);
    let r = api
        .wait_run(&p.run_id, std::time::Duration::from_millis(ms))
        .await
        .map_err(api_failure)?;
    Ok(wait_payload(&r))
}

/// A run's end in `agent.wait`'s shape (`status`: ok | timeout | error); as in OpenClaw,
/// `timeout` also stands for a run that was aborted.
pub fn wait_payload(r: &switchboard_types::api::RunResult) -> Value {
    let status = match r.status {
        RunStatus::Ok => "ok",
        RunStatus::Running | RunStatus::Timeout | RunStatus::Aborted => "timeout",
        RunStatus::Error => "error",
    };
    let mut v = json!({"runId": r.run_id, "status": status});
    if r.status == RunStatus::Ok {
        v["stopReason"] = json!("stop");
        v["terminalReply"] = json!({"disposition": "visible", "text": r.reply});
    }
    if let Some(e) = &r.error {
        v["error"] = json!(e);
    }
    v
}

async fn agents_list(api: &Arc<dyn SessionsApi>) -> Result<Value, ErrorShape> {
    let agents = api.agents().await.map_err(api_failure)?;
    let default = agents
        .iter()
        .find(|a| a.is_default)
        .map(|a| a.id.clone())
        .unwrap_or_else(|| "main".into());
    let list: Vec<Value> = agents
        .iter()
        .map(|a| {
            let mut v = json!({"id": a.id, "model": a.model, "isDefault": a.is_default});
            // Ours, beside OpenClaw's fields: whom the agent may spawn under (not itself).
            if !a.may_spawn.is_empty() {
                v["maySpawn"] = json!(a.may_spawn);
            }
            v
        })
        .collect();
    Ok(json!({"defaultId": default, "agents": list}))
}
