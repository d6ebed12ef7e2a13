//! Black-box tests of `agents_list` through `SessionsApi::call_tool`: which agent ids a requester
//! may spawn under (own agent, per-agent and default allowlists, `*`), their models, sub-agents.

use crate::common;

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_types::api::{ApiError, SessionsApi, ToolCall};

use common::{Bench, bench};

impl Bench {
    async fn agents_list(&self, requester: &str) -> Value {
        self.try_agents_list(requester, json!({}))
            .await
            .expect("agents_list runs")
    }

    /// `agents_list` through `SessionsApi::call_tool`, as a front end calls it.
    async fn try_agents_list(&self, requester: &str, params: Value) -> Result<Value, ApiError> {
        let api: Arc<dyn SessionsApi> = Arc::new(self.engine.clone());
        let call = ToolCall {
            tool: "agents_list".into(),
            params,
            requester: requester.into(),
            sandboxed: false,
        };
        Ok(api.call_tool(call).await?.result)
    }
}

/// The ids of an `agents_list` result, in order.
fn ids(result: &Value) -> Vec<&str> {
    result["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents array in {result}"))
        .iter()
        .map(|a| a["id"].as_str().expect("agent id"))
        .collect()
}

/// Three configured agents; `main` is the default (first).
fn three_agents(main_extra: Value, defaults: Value) -> Value {
    let mut main = json!({ "id": "main", "name": "Main", "model": "anthropic/claude-sonnet-4" });
    if let (Some(m), Some(extra)) = (main.as_object_mut(), main_extra.as_object()) {
        m.extend(extra.clone());
    }
    json!({
        "agents": {
            "defaults": defaults,
            "list": [main, { "id": "work", "name": "Work" }, { "id": "research", "model": "openai/gpt-5" }],
        }
    })
}

#[tokio::test]
async fn no_config_lists_only_the_default_agent() {
    let b = bench(json!({}));
    let r = b.agents_list("agent:main:main").await;
    assert_eq!(
        r,
        json!({
            "requester": "main",
            "allowAny": false,
            "agents": [{ "id": "main", "model": "scripted", "default": true }],
        })
    );
}

#[tokio::test]
async fn without_an_allowlist_only_the_own_agent_is_listed() {
    let b = bench(three_agents(json!({}), json!({})));
    let r = b.agents_list("agent:main:main").await;
    assert_eq!(
        r,
        json!({
            "requester": "main",
            "allowAny": false,
            "agents": [{
                "id": "main", "name": "Main", "model": "anthropic/claude-sonnet-4", "default": true,
            }],
        })
    );
    // Another agent's requester sees its own agent, named, with the scripted model.
    let r = b.agents_list("agent:work:main").await;
    assert_eq!(r["requester"], "work");
    assert_eq!(
        r["agents"],
        json!([{ "id": "work", "name": "Work", "model": "scripted" }])
    );
}

#[tokio::test]
async fn per_agent_allow_agents_adds_those_agents_after_the_own_one() {
    let b = bench(three_agents(
        json!({ "subagents": { "allowAgents": ["Research", "work"] } }),
        json!({}),
    ));
    let r = b.agents_list("agent:main:main").await;
    assert_eq!(r["allowAny"], false);
    // Own agent first, then the others sorted by id; ids are normalised (`Research`).
    assert_eq!(ids(&r), ["main", "research", "work"]);
    assert_eq!(
        r["agents"][1],
        json!({ "id": "research", "model": "openai/gpt-5" })
    );
    assert_eq!(
        r["agents"][2],
        json!({ "id": "work", "name": "Work", "model": "scripted" })
    );
    // The allowlist is main's own: work has none and sees only itself.
    assert_eq!(ids(&b.agents_list("agent:work:main").await), ["work"]);
}

#[tokio::test]
async fn defaults_allow_agents_apply_to_agents_without_their_own_list() {
    let b = bench(three_agents(
        json!({ "subagents": { "allowAgents": [] } }),
        json!({ "subagents": { "allowAgents": ["research"] } }),
    ));
    // work has no list of its own: the defaults apply.
    assert_eq!(
        ids(&b.agents_list("agent:work:main").await),
        ["work", "research"]
    );
    // main's explicit empty list wins over the defaults.
    assert_eq!(ids(&b.agents_list("agent:main:main").await), ["main"]);
}

#[tokio::test]
async fn star_allows_every_configured_agent() {
    let b = bench(three_agents(
        json!({}),
        json!({ "subagents": { "allowAgents": ["*"] } }),
    ));
    let r = b.agents_list("agent:research:main").await;
    assert_eq!(r["requester"], "research");
    assert_eq!(r["allowAny"], true);
    assert_eq!(ids(&r), ["research", "main", "work"]);
    assert_eq!(r["agents"][1]["default"], true);
    assert_eq!(r["agents"][0].get("default"), None);
}

#[tokio::test]
async fn an_allowlisted_agent_that_is_not_configured_is_skipped() {
    let b = bench(three_agents(
        json!({ "subagents": { "allowAgents": ["ghost", "work", " ", "work"] } }),
        json!({}),
    ));
    let r = b.agents_list("agent:main:main").await;
    assert_eq!(ids(&r), ["main", "work"]);
}

#[tokio::test]
async fn an_unconfigured_requester_agent_is_still_listed_first() {
    let b = bench(three_agents(
        json!({}),
        json!({ "subagents": { "allowAgents": ["work"] } }),
    ));
    let r = b.agents_list("agent:ops:main").await;
    assert_eq!(r["requester"], "ops");
    assert_eq!(
        r["agents"],
        json!([
            { "id": "ops", "model": "scripted" },
            { "id": "work", "name": "Work", "model": "scripted" },
        ])
    );
}

#[tokio::test]
async fn bare_keys_belong_to_the_default_agent() {
    let b = bench(json!({
        "agents": { "list": [{ "id": "work" }, { "id": "boss", "default": true, "model": "m/x" }] }
    }));
    let r = b.agents_list("cron:nightly").await;
    assert_eq!(r["requester"], "boss");
    assert_eq!(
        r["agents"],
        json!([{ "id": "boss", "model": "m/x", "default": true }])
    );
}

#[tokio::test]
async fn sub_agents_are_forbidden() {
    let b = bench(three_agents(
        json!({}),
        json!({ "subagents": { "allowAgents": ["*"] } }),
    ));
    for requester in [
        "agent:main:subagent:0b6c1f7e-6d8c-4a8e-9f51-3f1f0a7c2d11",
        "agent:work:subagent:a:subagent:b",
    ] {
        let r = b.agents_list(requester).await;
        assert_eq!(r["status"], "forbidden", "{requester}: {r}");
        // The sub-agent tool gate in `call_tool` answers, saying how to allow the tool.
        let error = r["error"].as_str().expect("error text");
        assert!(
            error.starts_with("agents_list is not available to sub-agents"),
            "{error}"
        );
        assert_eq!(r.get("agents"), None, "no agents leak: {r}");
    }
}

#[tokio::test]
async fn parameters_must_be_an_object() {
    let b = bench(json!({}));
    let err = b
        .try_agents_list("agent:main:main", json!([]))
        .await
        .expect_err("an array is not a parameter object");
    assert!(matches!(err, ApiError::BadInput(_)), "{err:?}");
    assert!(err.to_string().contains("JSON object"), "{err}");
}
