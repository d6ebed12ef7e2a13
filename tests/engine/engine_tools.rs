//! Black-box tests of `sessions_list` and `sessions_history` through `SessionsApi::call_tool`
//! (input errors through `Engine::call_tool`, which keeps their kind):
//! limits and clamps, the row and result shapes, transcript filtering, reference resolution,
//! and every visibility mode (with the sandbox clamp) and its exact denial message.

use crate::common;

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_engine::store::{SessionInit, now_ms};
use switchboard_engine::tools::{ToolContext, ToolError, ToolInputError};
use switchboard_store_sqlite::queries::NewLine;
use switchboard_types::api::{SessionsApi, ToolCall};
use switchboard_types::key::SessionKey;

/// The requester most tests call as.
const ME: &str = "agent:main:main";

use common::{Bench, bench};

/// Visibility `agent`: every session of agent `main` is visible to `ME`.
fn agent_wide() -> Bench {
    bench(json!({ "tools": { "sessions": { "visibility": "agent" } } }))
}

/// Visibility `all` with agent-to-agent enabled for every agent: nothing is hidden.
fn everything_visible() -> Bench {
    bench(json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } }
    }))
}

fn key(raw: &str) -> SessionKey {
    SessionKey::from_canonical(raw)
}

fn text(role: &str, t: &str) -> Value {
    json!({ "role": role, "content": [{ "type": "text", "text": t }] })
}

fn tool_result(t: &str) -> Value {
    json!({
        "role": "toolResult", "toolCallId": "call_1", "toolName": "sessions_list",
        "content": [{ "type": "text", "text": t }], "isError": false,
    })
}

fn tool_call() -> Value {
    json!({
        "role": "assistant",
        "content": [{ "type": "toolCall", "id": "call_1", "name": "sessions_list", "arguments": {} }],
    })
}

impl Bench {
    /// Create session `k` with `init`; returns its sessionId.
    async fn ensure(&self, k: &str, init: SessionInit) -> String {
        let (s, _) = self
            .engine
            .store()
            .ensure(&key(k), init)
            .await
            .expect("ensure");
        s.entry.session_id
    }

    async fn session(&self, k: &str) -> String {
        self.ensure(k, SessionInit::default()).await
    }

    /// A session spawned by `parent`.
    async fn child(&self, k: &str, parent: &str) -> String {
        let init = SessionInit {
            spawned_by: Some(key(parent)),
            ..SessionInit::default()
        };
        self.ensure(k, init).await
    }

    /// Many sessions at once (concurrent, so the writer commits them in few transactions).
    async fn sessions(&self, keys: impl IntoIterator<Item = String>) {
        let mut tasks = tokio::task::JoinSet::new();
        for k in keys {
            let engine = self.engine.clone();
            tasks.spawn(async move {
                engine
                    .store()
                    .ensure(&key(&k), SessionInit::default())
                    .await
                    .map(|_| ())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("task").expect("ensure");
        }
    }

    /// Append messages to `k` in one transaction.
    async fn append(&self, k: &str, messages: impl IntoIterator<Item = Value>) {
        let lines = messages.into_iter().map(NewLine::message).collect();
        self.engine
            .store()
            .append(&key(k), lines)
            .await
            .expect("append");
    }

    /// Set a session's last activity (the entry's `updatedAt`, which `patch` writes through
    /// to the indexed column).
    async fn set_updated_at(&self, k: &str, ms: i64) {
        self.engine
            .store()
            .patch(&key(k), move |e| {
                e.updated_at = ms;
                Ok(())
            })
            .await
            .expect("patch");
    }

    async fn try_call(
        &self,
        tool: &str,
        requester: &str,
        sandboxed: bool,
        params: Value,
    ) -> Result<Value, ToolError> {
        let ctx = ToolContext::new(key(requester), sandboxed);
        self.engine.call_tool(tool, &params, &ctx).await
    }

    /// A tool call through `SessionsApi::call_tool`, as a front end makes it.
    async fn call(&self, tool: &str, requester: &str, sandboxed: bool, params: Value) -> Value {
        let api: Arc<dyn SessionsApi> = Arc::new(self.engine.clone());
        let call = ToolCall {
            tool: tool.into(),
            params,
            requester: requester.into(),
            sandboxed,
        };
        api.call_tool(call)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
            .result
    }

    async fn list(&self, params: Value) -> Value {
        self.call("sessions_list", ME, false, params).await
    }

    async fn list_as(&self, requester: &str, sandboxed: bool, params: Value) -> Value {
        self.call("sessions_list", requester, sandboxed, params)
            .await
    }

    async fn history(&self, params: Value) -> Value {
        self.call("sessions_history", ME, false, params).await
    }

    async fn history_as(&self, requester: &str, sandboxed: bool, session_key: &str) -> Value {
        self.call(
            "sessions_history",
            requester,
            sandboxed,
            json!({ "sessionKey": session_key }),
        )
        .await
    }
}

/// The row keys of a `sessions_list` result, checking that `count` matches the rows.
fn keys(list: &Value) -> Vec<String> {
    let rows = list["sessions"].as_array().expect("sessions array");
    assert_eq!(
        list["count"],
        json!(rows.len()),
        "count equals the rows returned"
    );
    rows.iter()
        .map(|r| r["key"].as_str().expect("row key").to_string())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    sorted(v.iter().map(|s| s.to_string()).collect())
}

/// The error text of a `status: "forbidden"` result.
fn forbidden(result: &Value) -> &str {
    assert_eq!(
        result["status"], "forbidden",
        "expected forbidden, got {result}"
    );
    result["error"].as_str().expect("error text")
}

/// The texts of history/list messages (first text block, or string content).
fn texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .expect("messages array")
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .find_map(|b| b["text"].as_str().or(b["name"].as_str()))
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        })
        .collect()
}

fn input_error(result: Result<Value, ToolError>) -> ToolInputError {
    match result {
        Err(ToolError::Input(e)) => e,
        other => panic!("expected an input error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// sessions_list: limits, order, activeMinutes, messageLimit, parameters
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_returns_50_rows_by_default() {
    let b = agent_wide();
    b.sessions((0..60).map(|i| format!("agent:main:s{i:02}")))
        .await;
    let all = b.list(json!({})).await;
    assert_eq!(keys(&all).len(), 50);
    assert_eq!(keys(&b.list(json!({ "limit": 55 })).await).len(), 55);
}

#[tokio::test]
async fn list_limit_is_clamped_to_200() {
    let b = agent_wide();
    b.sessions((0..250).map(|i| format!("agent:main:s{i:03}")))
        .await;
    assert_eq!(keys(&b.list(json!({ "limit": 1000 })).await).len(), 200);
    assert_eq!(keys(&b.list(json!({ "limit": 200 })).await).len(), 200);
    assert_eq!(keys(&b.list(json!({ "limit": 199.9 })).await).len(), 199);
}

#[tokio::test]
async fn list_limit_below_one_returns_one_row() {
    let b = agent_wide();
    b.sessions((0..3).map(|i| format!("agent:main:s{i}"))).await;
    for limit in [json!(0), json!(0.5), json!(-3)] {
        let rows = keys(&b.list(json!({ "limit": limit })).await);
        assert_eq!(rows.len(), 1, "limit {limit}");
    }
}

#[tokio::test]
async fn list_is_newest_first() {
    let b = agent_wide();
    let now = now_ms();
    let ages = [("a", 30), ("b", 10), ("c", 50), ("d", 20), ("e", 40)];
    for (name, _) in ages {
        b.session(&format!("agent:main:{name}")).await;
    }
    for (name, minutes) in ages {
        b.set_updated_at(&format!("agent:main:{name}"), now - minutes * 60_000)
            .await;
    }
    let list = b.list(json!({})).await;
    assert_eq!(
        keys(&list),
        ["b", "d", "a", "e", "c"].map(|n| format!("agent:main:{n}"))
    );
    let stamps: Vec<i64> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["updatedAt"].as_i64().unwrap())
        .collect();
    assert_eq!(stamps, [10, 20, 30, 40, 50].map(|m| now - m * 60_000));
}

#[tokio::test]
async fn list_active_minutes_keeps_recent_sessions_only() {
    let b = agent_wide();
    let now = now_ms();
    b.session("agent:main:fresh").await;
    b.session("agent:main:recent").await;
    b.session("agent:main:stale").await;
    b.set_updated_at("agent:main:recent", now - 10 * 60_000)
        .await;
    b.set_updated_at("agent:main:stale", now - 3 * 60 * 60_000)
        .await;

    let active = |minutes: Value| json!({ "activeMinutes": minutes });
    assert_eq!(
        keys(&b.list(active(json!(30))).await),
        ["agent:main:fresh", "agent:main:recent"]
    );
    assert_eq!(
        keys(&b.list(active(json!(240))).await),
        ["agent:main:fresh", "agent:main:recent", "agent:main:stale"]
    );
    // Below one minute means one minute.
    for tiny in [json!(0), json!(0.5)] {
        assert_eq!(keys(&b.list(active(tiny)).await), ["agent:main:fresh"]);
    }
    assert_eq!(
        keys(&b.list(json!({})).await).len(),
        3,
        "no activeMinutes: no cutoff"
    );
}

#[tokio::test]
async fn list_message_limit_attaches_the_last_non_tool_messages() {
    let b = agent_wide();
    b.session("agent:main:chat").await;
    b.append(
        "agent:main:chat",
        [
            text("user", "list sessions"),
            tool_call(),
            tool_result("{\"count\":0}"),
            text("assistant", "there are none"),
        ],
    )
    .await;
    let row = |list: Value| list["sessions"][0].clone();

    assert!(
        row(b.list(json!({})).await).get("messages").is_none(),
        "default: no messages"
    );
    assert!(
        row(b.list(json!({ "messageLimit": 0 })).await)
            .get("messages")
            .is_none()
    );
    assert!(
        row(b.list(json!({ "messageLimit": -2 })).await)
            .get("messages")
            .is_none()
    );

    let two = row(b.list(json!({ "messageLimit": 2 })).await);
    assert_eq!(texts(&two["messages"]), ["sessions_list", "there are none"]);
    let roles: Vec<&str> = two["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["assistant", "assistant"],
        "the toolResult is skipped"
    );

    let all = row(b.list(json!({ "messageLimit": 10 })).await);
    assert_eq!(
        texts(&all["messages"]),
        ["list sessions", "sessions_list", "there are none"]
    );
}

#[tokio::test]
async fn list_message_limit_is_clamped_to_20() {
    let b = agent_wide();
    b.session("agent:main:chat").await;
    b.append(
        "agent:main:chat",
        (1..=25).map(|i| text("user", &format!("m{i}"))),
    )
    .await;
    let list = b.list(json!({ "messageLimit": 50 })).await;
    let got = texts(&list["sessions"][0]["messages"]);
    let want: Vec<String> = (6..=25).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn list_messages_are_sanitised_like_history() {
    let b = agent_wide();
    b.session("agent:main:chat").await;
    let secret = "sk-abcdefghijklmnopqrstuvwxyz0123";
    b.append("agent:main:chat", [text("user", &format!("use {secret}"))])
        .await;
    let list = b.list(json!({ "messageLimit": 1 })).await;
    assert_eq!(texts(&list["sessions"][0]["messages"]), ["use sk-abc…0123"]);
}

#[tokio::test]
async fn list_rejects_parameters_of_the_wrong_type() {
    let b = agent_wide();
    for bad in [
        json!({ "limit": "ten" }),
        json!({ "kinds": "main" }),
        json!({ "kinds": [1] }),
        json!({ "activeMinutes": "5" }),
        json!({ "messageLimit": true }),
    ] {
        let err = input_error(b.try_call("sessions_list", ME, false, bad.clone()).await);
        assert!(matches!(err, ToolInputError::Invalid(_)), "{bad}: {err:?}");
    }
    let err = input_error(
        b.try_call("sessions_list", ME, false, json!("limit=5"))
            .await,
    );
    assert!(err.to_string().contains("JSON object"), "{err}");
    // JSON null counts as absent.
    b.sessions((0..3).map(|i| format!("agent:main:s{i}"))).await;
    let list = b.list(json!({ "limit": null, "kinds": null })).await;
    assert_eq!(keys(&list).len(), 3);
}

#[tokio::test]
async fn list_row_has_the_spec_fields_and_nothing_unset() {
    let b = agent_wide();
    let init = SessionInit {
        channel: Some("telegram".into()),
        display_name: Some("Alice".into()),
        to: Some("+15550001".into()),
        ..SessionInit::default()
    };
    let session_id = b.ensure(ME, init).await;
    let list = b.list(json!({})).await;
    let row = list["sessions"][0].clone();

    assert_eq!(row["sessionId"], session_id.as_str());
    assert!(row["updatedAt"].as_i64().unwrap() > 0);
    let path = row["transcriptPath"].as_str().unwrap();
    assert!(
        path.ends_with(&session_id),
        "transcriptPath names the session: {path}"
    );
    for unset in [
        "model",
        "contextTokens",
        "totalTokens",
        "thinkingLevel",
        "verboseLevel",
        "systemSent",
        "abortedLastRun",
        "sendPolicy",
        "label",
        "spawnedBy",
        "parentSessionKey",
        "messages",
    ] {
        assert!(row.get(unset).is_none(), "{unset} should be absent: {row}");
    }
    assert!(
        row.as_object().unwrap().values().all(|v| !v.is_null()),
        "no null fields: {row}"
    );

    let mut row = row;
    row["sessionId"] = json!("[sessionId]");
    row["updatedAt"] = json!("[updatedAt]");
    row["transcriptPath"] = json!("[transcriptPath]");
    insta::assert_json_snapshot!("list_row_direct_chat", row);
}

#[tokio::test]
async fn list_discloses_scoping_unless_everything_is_visible() {
    let tree = bench(json!({}));
    tree.session(ME).await;
    let list = tree.list(json!({})).await;
    assert_eq!(list["visibility"]["mode"], "tree");
    assert_eq!(list["visibility"]["scoped"], true);
    let note = list["visibility"]["note"].as_str().unwrap();
    assert!(note.contains("tools.sessions.visibility=tree"), "{note}");

    let agent = agent_wide();
    let list = agent.list(json!({})).await;
    assert_eq!(list["visibility"]["mode"], "agent");

    let all_a2a_off = bench(json!({ "tools": { "sessions": { "visibility": "all" } } }));
    let list = all_a2a_off.list(json!({})).await;
    assert_eq!(list["visibility"]["mode"], "all");
    assert!(
        list["visibility"]["note"]
            .as_str()
            .unwrap()
            .contains("agentToAgent")
    );

    let open = everything_visible();
    open.session(ME).await;
    let list = open.list(json!({})).await;
    assert!(list.get("visibility").is_none(), "{list}");
    assert_eq!(
        list.as_object().unwrap().len(),
        4,
        "just count, hasMore, limitApplied and sessions: {list}"
    );
}

// ---------------------------------------------------------------------------------------------
// sessions_history
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn history_returns_the_last_200_messages_by_default() {
    let b = agent_wide();
    b.session(ME).await;
    b.append(ME, (1..=250).map(|i| text("user", &format!("m{i}"))))
        .await;
    let h = b.history(json!({ "sessionKey": ME })).await;
    let got = texts(&h["messages"]);
    assert_eq!(got.len(), 200);
    assert_eq!(got.first().unwrap(), "m51");
    assert_eq!(got.last().unwrap(), "m250");
    assert_eq!(h["truncated"], false);

    let few = b.history(json!({ "sessionKey": ME, "limit": 3 })).await;
    assert_eq!(texts(&few["messages"]), ["m248", "m249", "m250"]);
    for tiny in [json!(0), json!(0.5)] {
        let one = b.history(json!({ "sessionKey": ME, "limit": tiny })).await;
        assert_eq!(texts(&one["messages"]), ["m250"]);
    }
}

#[tokio::test]
async fn history_limit_is_clamped_to_1000() {
    let b = agent_wide();
    b.session(ME).await;
    // Tiny messages, so 1000 of them stay under the 80 KiB result cap.
    b.append(
        ME,
        (1..=1005).map(|i| json!({ "role": "user", "content": i.to_string() })),
    )
    .await;
    let h = b.history(json!({ "sessionKey": ME, "limit": 5000 })).await;
    assert_eq!(h["droppedMessages"], false, "bytes: {}", h["bytes"]);
    let got = texts(&h["messages"]);
    assert_eq!(got.len(), 1000);
    assert_eq!(got.first().unwrap(), "6");
    assert_eq!(got.last().unwrap(), "1005");
}

#[tokio::test]
async fn history_include_tools() {
    let b = agent_wide();
    b.session(ME).await;
    b.append(
        ME,
        [
            text("user", "who is around?"),
            tool_call(),
            tool_result("{\"count\":1}"),
            text("assistant", "just me"),
        ],
    )
    .await;
    let roles = |h: &Value| -> Vec<String> {
        h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    };
    let without = b.history(json!({ "sessionKey": ME })).await;
    assert_eq!(roles(&without), ["user", "assistant", "assistant"]);
    assert_eq!(
        without["messages"][1]["content"][0]["type"], "toolCall",
        "toolCall kept"
    );
    let explicit = b
        .history(json!({ "sessionKey": ME, "includeTools": false }))
        .await;
    assert_eq!(roles(&explicit), roles(&without));

    let with = b
        .history(json!({ "sessionKey": ME, "includeTools": true }))
        .await;
    assert_eq!(
        roles(&with),
        ["user", "assistant", "toolResult", "assistant"]
    );
    assert_eq!(with["messages"][2]["toolName"], "sessions_list");

    let err = input_error(
        b.try_call(
            "sessions_history",
            ME,
            false,
            json!({ "sessionKey": ME, "includeTools": "yes" }),
        )
        .await,
    );
    assert!(matches!(err, ToolInputError::Invalid(_)));
}

#[tokio::test]
async fn history_resolves_a_full_session_id_in_any_case() {
    let b = agent_wide();
    let id = b.session("agent:main:work").await;
    b.append("agent:main:work", [text("user", "hello")]).await;
    for input in [id.clone(), id.to_uppercase(), format!("  {id}  ")] {
        let h = b.history(json!({ "sessionKey": input })).await;
        assert_eq!(h["sessionKey"], "agent:main:work", "input {input:?}");
        assert_eq!(texts(&h["messages"]), ["hello"]);
    }
}

#[tokio::test]
async fn history_refuses_short_or_unknown_session_ids() {
    let b = agent_wide();
    let id = b.session("agent:main:work").await;
    let prefix = &id[..8];
    let h = b.history(json!({ "sessionKey": prefix })).await;
    assert_eq!(h["status"], "error");
    assert_eq!(
        h["error"],
        format!("Session not found: {prefix} (use the full sessionKey from sessions_list)")
    );

    let stranger = "4CF38B27-4311-4E06-85F3-E787B8FD5769";
    let h = b.history(json!({ "sessionKey": stranger })).await;
    assert_eq!(h["status"], "error");
    assert_eq!(
        h["error"],
        format!("Session not found: {stranger} (use the full sessionKey from sessions_list)")
    );
}

#[tokio::test]
async fn history_of_a_missing_key_is_an_error_result() {
    let b = agent_wide();
    b.session(ME).await;
    let h = b.history(json!({ "sessionKey": "agent:main:nope" })).await;
    assert_eq!(h["status"], "error");
    assert_eq!(h["error"], "No session found: agent:main:nope");
}

#[tokio::test]
async fn history_requires_a_session_key() {
    let b = agent_wide();
    for params in [
        json!({}),
        json!({ "sessionKey": "   " }),
        json!({ "limit": 5 }),
    ] {
        let err = input_error(b.try_call("sessions_history", ME, false, params).await);
        assert_eq!(err, ToolInputError::Missing("sessionKey".into()));
        assert_eq!(err.to_string(), "sessionKey required");
    }
    let err = input_error(
        b.try_call("sessions_history", ME, false, json!({ "sessionKey": 7 }))
            .await,
    );
    assert!(matches!(err, ToolInputError::Invalid(_)));
    let err = input_error(
        b.try_call(
            "sessions_history",
            ME,
            false,
            json!({ "sessionKey": ME, "limit": "all" }),
        )
        .await,
    );
    assert!(matches!(err, ToolInputError::Invalid(_)));
}

#[tokio::test]
async fn history_result_shape() {
    let b = agent_wide();
    b.session(ME).await;
    b.append(
        ME,
        [
            json!({ "role": "user", "content": [{ "type": "text", "text": "ping" }], "timestamp": 1_700_000_000_000_i64 }),
            json!({
                "role": "assistant",
                "content": [{ "type": "text", "text": "pong" }],
                "usage": { "input": 3, "output": 1, "totalTokens": 4 },
                "stopReason": "stop",
                "timestamp": 1_700_000_001_000_i64,
            }),
        ],
    )
    .await;
    let mut h = b.history(json!({ "sessionKey": "main" })).await;
    let keys: Vec<&String> = h.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "sessionKey",
            "messages",
            "truncated",
            "droppedMessages",
            "contentTruncated",
            "contentRedacted",
            "bytes"
        ]
    );
    let messages_json = serde_json::to_string(&h["messages"]).unwrap();
    assert_eq!(
        h["bytes"],
        json!(messages_json.len()),
        "bytes is the JSON size"
    );
    for m in h["messages"].as_array_mut().unwrap() {
        m["__openclaw"]["id"] = json!("[entryId]");
    }
    insta::assert_json_snapshot!("history_result", h);
}

#[tokio::test]
async fn history_redacts_api_keys() {
    let b = agent_wide();
    b.session(ME).await;
    let secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
    b.append(ME, [text("user", &format!("my key is {secret} ok?"))])
        .await;
    let h = b.history(json!({ "sessionKey": ME })).await;
    assert_eq!(h["contentRedacted"], true);
    let shown = h["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(!shown.contains(secret), "{shown}");
    assert_eq!(shown, "my key is sk-pro…0123 ok?");

    b.append(ME, [text("user", "nothing secret")]).await;
    let h = b.history(json!({ "sessionKey": ME, "limit": 1 })).await;
    assert_eq!(h["contentRedacted"], false);
}

#[tokio::test]
async fn history_returns_inter_session_provenance_as_stored() {
    let b = agent_wide();
    b.session(ME).await;
    let provenance = json!({
        "kind": "inter_session",
        "sourceSessionKey": "agent:ops:main",
        "sourceChannel": "webchat",
        "sourceTool": "sessions_send",
    });
    let mut m = text("user", "status report please");
    m["provenance"] = provenance.clone();
    b.append(ME, [m]).await;
    let h = b.history(json!({ "sessionKey": ME })).await;
    assert_eq!(h["messages"][0]["provenance"], provenance);
}

// ---------------------------------------------------------------------------------------------
// Visibility
// ---------------------------------------------------------------------------------------------

/// ME with a child, a grandchild, a sibling, and a session of agent `ops`.
async fn family(b: &Bench) {
    b.session(ME).await;
    b.child("agent:main:subagent:kid", ME).await;
    b.child("agent:main:subagent:grandkid", "agent:main:subagent:kid")
        .await;
    b.session("agent:main:sibling").await;
    b.session("agent:ops:main").await;
}

const SELF_DENIED: &str = "Session history visibility is restricted to the current session (tools.sessions.visibility=self).";
const TREE_DENIED: &str = "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).";
const CROSS_AGENT_DENIED: &str = "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.";
const A2A_DISABLED: &str = "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.";
const A2A_NOT_ALLOWED: &str = "Agent-to-agent history denied by tools.agentToAgent.allow.";

#[tokio::test]
async fn visibility_self_shows_only_the_requester() {
    let b = bench(json!({ "tools": { "sessions": { "visibility": "self" } } }));
    family(&b).await;
    assert_eq!(keys(&b.list(json!({})).await), [ME]);
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:main:sibling").await),
        SELF_DENIED
    );
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:main:subagent:kid").await),
        SELF_DENIED,
        "not even a spawned child"
    );
    assert_eq!(b.history_as(ME, false, "current").await["sessionKey"], ME);
    let list = b.list(json!({})).await;
    assert_eq!(list["visibility"]["mode"], "self");
}

#[tokio::test]
async fn visibility_tree_is_the_default_and_covers_direct_children() {
    let b = bench(json!({}));
    family(&b).await;
    assert_eq!(
        sorted(keys(&b.list(json!({})).await)),
        strs(&[ME, "agent:main:subagent:kid"])
    );
    assert_eq!(
        b.history_as(ME, false, "agent:main:subagent:kid").await["sessionKey"],
        "agent:main:subagent:kid"
    );
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:main:sibling").await),
        TREE_DENIED
    );
    assert_eq!(
        forbidden(
            &b.history_as(ME, false, "agent:main:subagent:grandkid")
                .await
        ),
        TREE_DENIED,
        "grandchildren are not in the tree"
    );
    // A sub-agent has no session tools by default (spec: "minus session tools") …
    let kid = "agent:main:subagent:kid";
    assert!(
        forbidden(&b.list_as(kid, false, json!({})).await)
            .starts_with("sessions_list is not available to sub-agents")
    );
    // … and once given them, it sees itself and its own child, not its parent.
    let b = bench(json!({
        "tools": { "subagents": { "tools": { "alsoAllow": ["sessions_list", "sessions_history"] } } }
    }));
    family(&b).await;
    assert_eq!(
        sorted(keys(&b.list_as(kid, false, json!({})).await)),
        strs(&[kid, "agent:main:subagent:grandkid"])
    );
    assert_eq!(forbidden(&b.history_as(kid, false, ME).await), TREE_DENIED);
}

#[tokio::test]
async fn visibility_agent_covers_the_agent_but_not_other_agents() {
    let b = agent_wide();
    family(&b).await;
    assert_eq!(
        sorted(keys(&b.list(json!({})).await)),
        strs(&[
            ME,
            "agent:main:sibling",
            "agent:main:subagent:grandkid",
            "agent:main:subagent:kid"
        ])
    );
    assert_eq!(
        b.history_as(ME, false, "agent:main:sibling").await["sessionKey"],
        "agent:main:sibling"
    );
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:ops:main").await),
        CROSS_AGENT_DENIED
    );
}

#[tokio::test]
async fn visibility_all_needs_agent_to_agent() {
    let b = bench(json!({ "tools": { "sessions": { "visibility": "all" } } }));
    family(&b).await;
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:ops:main").await),
        A2A_DISABLED
    );
    let rows = keys(&b.list(json!({})).await);
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(!rows.contains(&"agent:ops:main".to_string()), "{rows:?}");

    let open = everything_visible();
    family(&open).await;
    assert_eq!(
        open.history_as(ME, false, "agent:ops:main").await["sessionKey"],
        "agent:ops:main"
    );
    assert_eq!(keys(&open.list(json!({})).await).len(), 5);
}

#[tokio::test]
async fn visibility_all_respects_the_agent_to_agent_allow_list() {
    let b = bench(json!({
        "tools": {
            "sessions": { "visibility": "all" },
            "agentToAgent": { "enabled": true, "allow": ["ops"] },
        }
    }));
    family(&b).await;
    // The requester's own agent `main` is not on the list, so no pair with it is allowed.
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:ops:main").await),
        A2A_NOT_ALLOWED
    );
    assert!(!keys(&b.list(json!({})).await).contains(&"agent:ops:main".to_string()));
}

#[tokio::test]
async fn agent_to_agent_allow_patterns() {
    for allow in [
        json!(["main", "ops-*"]),
        json!(["main", "OPS-*"]),
        json!(["*"]),
    ] {
        let b = bench(json!({
            "tools": {
                "sessions": { "visibility": "all" },
                "agentToAgent": { "enabled": true, "allow": allow.clone() },
            }
        }));
        b.session(ME).await;
        b.session("agent:ops-1:main").await;
        b.session("agent:dev:main").await;
        let wildcard_all = allow == json!(["*"]);
        assert_eq!(
            b.history_as(ME, false, "agent:ops-1:main").await["sessionKey"],
            "agent:ops-1:main",
            "allow {allow}"
        );
        let dev = b.history_as(ME, false, "agent:dev:main").await;
        let list = b.list(json!({})).await;
        if wildcard_all {
            assert_eq!(dev["sessionKey"], "agent:dev:main");
            assert_eq!(keys(&list).len(), 3);
        } else {
            assert_eq!(forbidden(&dev), A2A_NOT_ALLOWED, "allow {allow}");
            assert_eq!(
                sorted(keys(&list)),
                strs(&[ME, "agent:ops-1:main"]),
                "denied rows are dropped silently (allow {allow})"
            );
            assert!(list.get("status").is_none());
        }
    }
    // A plain pattern is an exact, case-sensitive id.
    let b = bench(json!({
        "tools": {
            "sessions": { "visibility": "all" },
            "agentToAgent": { "enabled": true, "allow": ["MAIN", "ops-1"] },
        }
    }));
    b.session("agent:ops-1:main").await;
    assert_eq!(
        forbidden(&b.history_as(ME, false, "agent:ops-1:main").await),
        A2A_NOT_ALLOWED
    );
}

#[tokio::test]
async fn listing_drops_denied_rows_and_still_fills_the_page() {
    let b = bench(json!({
        "tools": {
            "sessions": { "visibility": "all" },
            "agentToAgent": { "enabled": true, "allow": ["main"] },
        }
    }));
    // Newer hidden rows must not eat the page.
    b.sessions((0..5).map(|i| format!("agent:main:s{i}"))).await;
    b.sessions((0..10).map(|i| format!("agent:ops:s{i}"))).await;
    let now = now_ms();
    for i in 0..5 {
        b.set_updated_at(&format!("agent:main:s{i}"), now - 60_000)
            .await;
    }
    let rows = keys(&b.list(json!({ "limit": 3 })).await);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(
        rows.iter().all(|k| k.starts_with("agent:main:")),
        "{rows:?}"
    );
}

#[tokio::test]
async fn sandboxed_requester_is_clamped_to_its_tree() {
    let b = everything_visible();
    family(&b).await;
    let list = b.list_as(ME, true, json!({})).await;
    assert_eq!(sorted(keys(&list)), strs(&[ME, "agent:main:subagent:kid"]));
    assert_eq!(list["visibility"]["mode"], "tree");
    let note = list["visibility"]["note"].as_str().unwrap();
    assert!(
        note.contains("clamped from all") && note.contains("sandboxed"),
        "{note}"
    );

    for target in ["agent:main:sibling", "agent:ops:main"] {
        assert_eq!(
            forbidden(&b.history_as(ME, true, target).await),
            format!("Session not visible from this sandboxed agent session: {target}")
        );
    }
    // By sessionId too; the message names what the caller wrote.
    let sibling_id = b.session("agent:main:sibling").await;
    assert_eq!(
        forbidden(&b.history_as(ME, true, &sibling_id).await),
        format!("Session not visible from this sandboxed agent session: {sibling_id}")
    );
    let kid = b.history_as(ME, true, "agent:main:subagent:kid").await;
    assert_eq!(kid["sessionKey"], "agent:main:subagent:kid");
}

#[tokio::test]
async fn sandboxed_agent_in_config_is_clamped_too() {
    let b = bench(json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [{ "id": "main", "default": true }, { "id": "ops", "sandboxed": true }] },
    }));
    let ops = "agent:ops:main";
    b.session(ops).await;
    b.child("agent:ops:subagent:task", ops).await;
    b.session("agent:ops:other").await;
    b.session(ME).await;
    let list = b.list_as(ops, false, json!({})).await;
    assert_eq!(sorted(keys(&list)), strs(&[ops, "agent:ops:subagent:task"]));
    assert!(
        list["visibility"]["note"]
            .as_str()
            .unwrap()
            .contains("sandboxed")
    );
    assert_eq!(
        forbidden(&b.history_as(ops, false, "agent:ops:other").await),
        "Session not visible from this sandboxed agent session: agent:ops:other"
    );
    // The unsandboxed agent is not affected.
    assert_eq!(keys(&b.list_as(ME, false, json!({})).await).len(), 4);
}

#[tokio::test]
async fn sandbox_clamp_can_be_turned_off() {
    let b = bench(json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "defaults": { "sandbox": { "sessionToolsVisibility": "all" } } },
    }));
    family(&b).await;
    let list = b.list_as(ME, true, json!({})).await;
    assert_eq!(keys(&list).len(), 5);
    assert!(list.get("visibility").is_none(), "{list}");
    assert_eq!(
        b.history_as(ME, true, "agent:main:sibling").await["sessionKey"],
        "agent:main:sibling"
    );
    assert_eq!(
        b.history_as(ME, true, "agent:ops:main").await["sessionKey"],
        "agent:ops:main"
    );
}

/// ME, its child under agent `ops`, and an unrelated `ops` session; the child must be
/// listed and readable, the unrelated session not.
async fn assert_cross_agent_child_visible(config: Value) {
    let b = bench(config.clone());
    b.session(ME).await;
    b.child("agent:ops:subagent:helper", ME).await;
    b.session("agent:ops:main").await;
    let rows = keys(&b.list(json!({})).await);
    assert!(
        rows.contains(&"agent:ops:subagent:helper".to_string()),
        "{config}: {rows:?}"
    );
    assert!(
        !rows.contains(&"agent:ops:main".to_string()),
        "{config}: {rows:?}"
    );
    let h = b.history_as(ME, false, "agent:ops:subagent:helper").await;
    assert_eq!(
        h["sessionKey"], "agent:ops:subagent:helper",
        "{config}: {h}"
    );
    assert!(h.get("status").is_none(), "{config}: {h}");
}

#[tokio::test]
async fn a_child_under_another_agent_is_in_the_tree() {
    assert_cross_agent_child_visible(json!({})).await;
}

#[tokio::test]
async fn a_child_under_another_agent_stays_visible_under_wider_visibility() {
    assert_cross_agent_child_visible(json!({ "tools": { "sessions": { "visibility": "agent" } } }))
        .await;
    assert_cross_agent_child_visible(json!({ "tools": { "sessions": { "visibility": "all" } } }))
        .await;
}

#[tokio::test]
async fn sandbox_clamp_never_widens_self() {
    let b = bench(json!({ "tools": { "sessions": { "visibility": "self" } } }));
    family(&b).await;
    let list = b.list_as(ME, true, json!({})).await;
    assert_eq!(keys(&list), [ME]);
    assert_eq!(list["visibility"]["mode"], "self");
    let kid = b.history_as(ME, true, "agent:main:subagent:kid").await;
    assert_eq!(kid["status"], "forbidden", "{kid}");
}

#[tokio::test]
async fn sandboxed_history_does_not_reveal_whether_a_hidden_session_exists() {
    let b = everything_visible();
    family(&b).await;
    let existing = b.history_as(ME, true, "agent:main:sibling").await;
    let missing = b.history_as(ME, true, "agent:main:ghost").await;
    assert_eq!(
        forbidden(&missing),
        "Session not visible from this sandboxed agent session: agent:main:ghost"
    );
    assert_eq!(existing["status"], missing["status"]);
}

/// A transcript stored before import validated shapes (issue 10 item 8) may hold a message
/// line whose `message` is not an object: history leaves it out rather than hand an agent a
/// bare string where it expects a message.
#[tokio::test]
async fn history_leaves_out_stored_messages_that_are_not_objects() {
    let b = agent_wide();
    b.session(ME).await;
    b.append(
        ME,
        [
            text("user", "before"),
            json!("not-an-object"),
            json!(42),
            text("assistant", "after"),
        ],
    )
    .await;
    let h = b.history(json!({ "sessionKey": ME })).await;
    let messages = h["messages"].as_array().expect("messages");
    assert!(messages.iter().all(Value::is_object), "{h}");
    assert_eq!(texts(&h["messages"]), ["before", "after"]);
}

// ---------------------------------------------------------------------------------------------
// Bounded parameters: durations and counts outside their range never reach the engine's
// arithmetic (issue 10: `timeoutSeconds: 1e20` panicked after the message was delivered)
// ---------------------------------------------------------------------------------------------

/// Every tool, `agents_list` included, answers huge, negative and fractional numbers in every
/// numeric parameter with a result or an input error naming the parameter, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_numbers_are_refused_before_anything_is_sent_or_spawned() {
    let b = everything_visible();
    b.session("agent:main:other").await;
    b.append("agent:main:other", [text("user", "before")]).await;
    for (tool, params, needle) in [
        (
            "sessions_send",
            json!({ "sessionKey": "agent:main:other", "message": "hi", "timeoutSeconds": 1e20 }),
            "timeoutSeconds must be a number from 0 to 3600 seconds",
        ),
        (
            "sessions_send",
            json!({ "sessionKey": "agent:main:other", "message": "hi", "timeoutSeconds": 3601 }),
            "(got 3601)",
        ),
        (
            "sessions_send",
            json!({ "sessionKey": "agent:main:other", "message": "hi", "timeoutSeconds": -0.1 }),
            "(got -0.1)",
        ),
        (
            "sessions_spawn",
            json!({ "task": "t", "runTimeoutSeconds": 1e20 }),
            "runTimeoutSeconds must be a number from 0 to 86400 seconds; 0 means no limit (got 1e+20)",
        ),
        (
            "sessions_spawn",
            json!({ "task": "t", "timeoutSeconds": 86401 }),
            "timeoutSeconds must be a number from 0 to 86400",
        ),
    ] {
        let err = input_error(b.try_call(tool, ME, false, params.clone()).await);
        assert!(
            err.to_string().contains(needle),
            "{tool} {params}: {err} lacks {needle}"
        );
    }
    // Nothing reached the target, and no child was spawned.
    let h = b.history(json!({ "sessionKey": "agent:main:other" })).await;
    assert_eq!(texts(&h["messages"]), ["before"]);
    let all = b.list(json!({ "limit": 200 })).await;
    assert!(
        keys(&all).iter().all(|k| !k.contains(":subagent:")),
        "{all}"
    );
}

#[tokio::test]
async fn a_huge_active_minutes_reaches_back_to_every_session() {
    let b = agent_wide();
    b.session("agent:main:old").await;
    b.set_updated_at("agent:main:old", 1).await;
    for minutes in [json!(1e20), json!(i64::MAX), json!(u64::MAX), json!(1e308)] {
        let rows = keys(&b.list(json!({ "activeMinutes": minutes })).await);
        assert_eq!(rows, ["agent:main:old"], "activeMinutes {minutes}");
    }
    let rows = keys(&b.list(json!({ "activeMinutes": 5 })).await);
    assert!(rows.is_empty(), "a 5-minute window excludes it: {rows:?}");
}
