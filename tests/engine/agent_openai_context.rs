//! What a model-backed agent is given and offered, against the in-process fake
//! OpenAI-compatible server (`fake_model`) through the real engine: a tool call round trip
//! for each session tool (the result the model reads next), a `sessions_send` exchange
//! driven by model output (ping-pong ended by `REPLY_SKIP`, announce skipped with
//! `ANNOUNCE_SKIP`), the session's history on a later turn, tools filtered by the sub-agent
//! and sandbox policy, `systemPromptFile` and `thinkingLevel` in the request, `agents_list`
//! showing models, and the transcript naming the model and keeping its tool call ids.
//!
//! Real time (the engine's writer thread does not mix with a paused clock); waits bounded.

use crate::common;
use crate::fake_model;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_engine::Engine;
use switchboard_engine::events::EngineEvent;
use switchboard_engine::store::SessionInit;
use switchboard_engine::tools::ToolContext;
use switchboard_types::api::{SendRequest, Sender, SessionsApi, ToolCall};
use switchboard_types::key::SessionKey;

use fake_model::{Answer, Fake, call, last_text, system_text, text_reply, tool_reply};

const HANG: Duration = Duration::from_secs(60);
const MAIN: &str = "agent:main:main";
const WORK: &str = "agent:work:main";

/// `main` and `work` on the fake server (`fake/test-model`), each with a system prompt, every
/// session visible, agent-to-agent allowed, spawning under any agent allowed; `extra` is
/// merged in at the top level.
fn config(base_url: &str, extra: Value) -> Value {
    let mut c = json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": {
            "defaults": { "subagents": { "allowAgents": ["*"] } },
            "list": [
                { "id": "main", "default": true, "model": "fake/test-model",
                  "systemPrompt": "You are the main agent." },
                { "id": "work", "model": "fake/test-model", "systemPrompt": "You are work.",
                  "thinkingLevel": "high" },
            ],
        },
        "models": { "providers": { "fake": { "baseUrl": base_url, "api": "openai-completions" } } },
    });
    merge(&mut c, extra);
    c
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

async fn send(engine: &Engine, key: &str, text: &str) {
    let api = engine.start();
    tokio::time::timeout(
        HANG,
        api.send(SendRequest {
            key: key.to_string(),
            text: text.to_string(),
            from: Sender::default(),
            idempotency_key: None,
        }),
    )
    .await
    .expect("the send ends")
    .expect("the send is recorded");
    tokio::time::timeout(HANG, engine.idle())
        .await
        .expect("the engine settles");
}

/// The work agent's main session, so sends can reach it.
async fn open_work(engine: &Engine) {
    engine
        .store()
        .ensure(&SessionKey::from_canonical(WORK), SessionInit::default())
        .await
        .expect("work's session");
}

/// Every transcript message of `key`, oldest first, as stored.
async fn transcript(engine: &Engine, key: &str) -> Vec<Value> {
    let stored = engine
        .store()
        .get(&SessionKey::from_canonical(key))
        .await
        .expect("read")
        .expect("session exists");
    engine
        .store()
        .tail(&stored.entry.session_id, 1000, true)
        .await
        .expect("tail")
        .into_iter()
        .filter_map(|r| r.line.get("message").cloned())
        .collect()
}

fn role(m: &Value) -> &str {
    m["role"].as_str().unwrap_or_default()
}

fn tool_names(body: &Value) -> Option<Vec<String>> {
    body.get("tools").map(|t| {
        t.as_array()
            .expect("tools is an array")
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    })
}

/// The request a session's model call was made with: the first whose system prompt
/// contains `marker` and whose last message satisfies `last`.
fn request_where(fake: &Fake, marker: &str, last: impl Fn(&Value) -> bool) -> Value {
    fake.seen()
        .into_iter()
        .map(|s| s.body)
        .find(|b| {
            system_text(b).contains(marker)
                && b["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .is_some_and(&last)
        })
        .unwrap_or_else(|| panic!("no request with {marker:?}: {:#?}", fake.seen()))
}

fn last_is_tool(m: &Value) -> bool {
    role(m) == "tool"
}

/// A responder for a main agent that calls `tool` with `args` (id `call_<tool>`) when the
/// user says "go", answers "done" once a tool result is in, and lets everyone else (work,
/// children, announces) answer plainly.
fn one_tool(tool: &'static str, args: Value) -> impl Fn(&Value) -> Answer + Send + Sync {
    move |body| {
        let system = system_text(body);
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
        if last.as_ref().is_some_and(last_is_tool) {
            return text_reply("done", 5, 1);
        }
        if system.contains("announce step") {
            return text_reply("ANNOUNCE_SKIP", 1, 1);
        }
        if system.contains("You are work.") {
            return text_reply("pong from work", 3, 2);
        }
        if last_text(body) == "go" {
            return tool_reply(json!([call(
                &format!("call_{tool}"),
                tool,
                &args.to_string()
            )]));
        }
        text_reply("ok", 1, 1)
    }
}

/// Runs main through one call of `tool`; returns the tool result the model read next, the
/// engine (to inspect) and the fake.
async fn round_trip(tool: &'static str, args: Value) -> (Value, common::Bench, Fake) {
    let fake = Fake::start_fn(one_tool(tool, args)).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "session": { "agentToAgent": { "maxPingPongTurns": 0 } } }),
    ));
    open_work(&b.engine).await;
    send(&b.engine, MAIN, "go").await;
    let next = request_where(&fake, "You are the main agent.", last_is_tool);
    let messages = next["messages"].as_array().unwrap();
    let tool_msg = messages.last().unwrap();
    assert_eq!(tool_msg["tool_call_id"], format!("call_{tool}"));
    let asked = &messages[messages.len() - 2];
    assert_eq!(asked["tool_calls"][0]["function"]["name"], tool);
    let result: Value = serde_json::from_str(tool_msg["content"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{tool} result is JSON ({e}): {tool_msg}"));
    (result, b, fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_list_round_trip_gives_the_model_the_session_rows() {
    let (result, _b, _f) = round_trip("sessions_list", json!({ "limit": 10 })).await;
    let keys: Vec<&str> = result["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&MAIN), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_history_round_trip_gives_the_model_the_transcript() {
    let (result, _b, _f) = round_trip("sessions_history", json!({ "sessionKey": MAIN })).await;
    assert_eq!(result["sessionKey"], MAIN, "{result}");
    let texts: Vec<&str> = result["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .filter_map(|m| m["content"][0]["text"].as_str())
        .collect();
    assert!(texts.contains(&"go"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_send_round_trip_gives_the_model_the_targets_reply() {
    let (result, b, fake) = round_trip(
        "sessions_send",
        json!({ "sessionKey": WORK, "message": "ping", "timeoutSeconds": 30 }),
    )
    .await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["reply"], "pong from work", "{result}");
    // The target's model was told who sent it, in its turn and in its system prompt.
    let target = request_where(&fake, "You are work.", |m| {
        m["content"].as_str().is_some_and(|c| c.starts_with("ping"))
    });
    let user = last_text(&target);
    assert!(
        user.contains(
            "[Inter-session message] sourceSession=agent:main:main sourceChannel=unknown sourceTool=sessions_send isUser=false"
        ),
        "{user}"
    );
    assert!(user.contains("not a direct end-user instruction"), "{user}");
    assert!(
        system_text(&target).contains(
            "Agent-to-agent message context:\nAgent 1 (requester) session: agent:main:main."
        ),
        "{}",
        system_text(&target)
    );
    // The primary run recorded the message once; the model saw it once.
    let pings = transcript(&b.engine, WORK)
        .await
        .into_iter()
        .filter(|m| role(m) == "user")
        .count();
    assert_eq!(pings, 1);
    let user_turns = target["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| role(m) == "user")
        .count();
    assert_eq!(user_turns, 1, "{target:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_spawn_round_trip_accepts_and_the_child_runs_as_its_agent() {
    let (result, b, fake) = round_trip(
        "sessions_spawn",
        json!({ "task": "compute 42", "agentId": "work", "model": "fake/other-model", "thinking": "low" }),
    )
    .await;
    assert_eq!(result["status"], "accepted", "{result}");
    let child = result["childSessionKey"].as_str().unwrap().to_string();
    assert!(child.starts_with("agent:work:subagent:"), "{child}");
    // The child ran on the override model, with work's system prompt and the spawn's
    // thinking level.
    let child_req = fake
        .seen()
        .into_iter()
        .map(|s| s.body)
        .find(|b| b["model"] == "other-model")
        .unwrap_or_else(|| panic!("no request on the override model: {:#?}", fake.seen()));
    assert!(system_text(&child_req).starts_with("You are work."));
    assert_eq!(child_req["reasoning_effort"], "low");
    assert!(last_text(&child_req).starts_with("compute 42"));
    let runs = b
        .engine
        .runs_of(&SessionKey::from_canonical(&child), 10)
        .await
        .unwrap();
    assert!(
        runs.iter()
            .any(|r| r.step.as_str() == "subagent" && r.status.as_str() == "ok"),
        "{runs:?}"
    );
    // The requester's model then read the completion once, marked as coming from the child.
    let completion = request_where(&fake, "You are the main agent.", |m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.contains("sourceTool=subagent_announce"))
    });
    let messages = completion["messages"].as_array().unwrap();
    let last = last_text(&completion);
    assert!(
        last.contains(&format!(
            "[Inter-session message] sourceSession={child} sourceChannel=internal sourceTool=subagent_announce isUser=false"
        )),
        "{last}"
    );
    assert!(
        last.contains("pong from work"),
        "the child's result: {last}"
    );
    let mentions = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("pong from work"))
        })
        .count();
    assert_eq!(mentions, 1, "{completion:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_list_round_trip_shows_models_and_thinking_but_never_the_prompt() {
    let (result, _b, _f) = round_trip("agents_list", json!({})).await;
    assert_eq!(
        result["agents"],
        json!([
            { "id": "main", "model": "fake/test-model", "default": true },
            { "id": "work", "model": "fake/test-model", "thinkingLevel": "high" },
        ]),
        "{result}"
    );
    assert!(!result.to_string().contains("You are"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_lines_name_the_model_and_keep_its_call_id() {
    let (_result, b, _f) = round_trip("agents_list", json!({})).await;
    let lines = transcript(&b.engine, MAIN).await;
    let call = lines
        .iter()
        .find(|m| m["content"][0]["type"] == "toolCall")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(call["api"], "openai-completions");
    assert_eq!(call["provider"], "fake");
    assert_eq!(call["model"], "test-model");
    assert_eq!(call["content"][0]["id"], "call_agents_list");
    let result = lines.iter().find(|m| role(m) == "toolResult").unwrap();
    assert_eq!(result["toolCallId"], "call_agents_list");
    let reply = lines.last().unwrap();
    assert_eq!(reply["content"][0]["text"], "done");
    assert_eq!(
        (&reply["api"], &reply["provider"], &reply["model"]),
        (
            &json!("openai-completions"),
            &json!("fake"),
            &json!("test-model")
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_exchange_is_driven_by_model_output_and_ends_with_the_skips() {
    let fake = Fake::start_fn(|body| {
        let system = system_text(body);
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
        if last.as_ref().is_some_and(last_is_tool) {
            return text_reply("work answered", 5, 1);
        }
        if system.contains("Agent-to-agent announce step") {
            return text_reply("ANNOUNCE_SKIP", 1, 1);
        }
        if system.contains("Agent-to-agent reply step") {
            return if system.contains("Current agent: Agent 1 (requester).") {
                text_reply("main follows up", 1, 1)
            } else {
                text_reply("REPLY_SKIP", 1, 1)
            };
        }
        if system.contains("Agent-to-agent message context") {
            return text_reply("pong from work", 1, 1);
        }
        if last_text(body) == "ask work" {
            let args = json!({ "sessionKey": WORK, "message": "ping", "timeoutSeconds": 30 });
            return tool_reply(json!([call("s1", "sessions_send", &args.to_string())]));
        }
        text_reply("?", 1, 1)
    })
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    open_work(&b.engine).await;
    let mut events = b.engine.events().subscribe();
    send(&b.engine, MAIN, "ask work").await;

    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    let ended = seen
        .iter()
        .find_map(|e| match e {
            EngineEvent::ExchangeLoopEnded { reason, rounds, .. } => Some((*reason, *rounds)),
            _ => None,
        })
        .expect("the loop ended");
    assert_eq!(ended.0.as_str(), "reply_skip", "{seen:#?}");
    let announce = seen
        .iter()
        .find_map(|e| match e {
            EngineEvent::Announce { outcome, text, .. } => {
                Some((outcome.to_string(), text.clone()))
            }
            _ => None,
        })
        .expect("the announce ran");
    assert_eq!(
        announce,
        ("skipped".to_string(), Some("ANNOUNCE_SKIP".to_string()))
    );

    // Runs: work answered (round 1), main followed up (round 2), work skipped (round 3),
    // then work's announce.
    let steps = async |key: &str| -> Vec<(String, u32, String)> {
        let mut runs = b
            .engine
            .runs_of(&SessionKey::from_canonical(key), 10)
            .await
            .unwrap();
        runs.sort_by_key(|r| r.round);
        runs.into_iter()
            .map(|r| (r.step.to_string(), r.round, r.reply.unwrap_or_default()))
            .collect()
    };
    assert_eq!(
        steps(WORK).await,
        [
            ("message".into(), 1, "pong from work".into()),
            ("reply".into(), 3, "REPLY_SKIP".into()),
            ("announce".into(), 4, "ANNOUNCE_SKIP".into()),
        ]
    );
    assert!(
        steps(MAIN)
            .await
            .contains(&("reply".into(), 2, "main follows up".into())),
        "{:?}",
        steps(MAIN).await
    );

    // The ping-pong turn told main who it is, the turn and how to stop; its user turn is
    // work's reply, marked as coming from work.
    let pingpong = request_where(&fake, "Agent-to-agent reply step", |_| true);
    let system = system_text(&pingpong);
    assert!(system.starts_with("You are the main agent.\n\nAgent-to-agent reply step:\nCurrent agent: Agent 1 (requester).\nTurn 1 of 5."), "{system}");
    assert!(system.contains("If you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."));
    let user = last_text(&pingpong);
    assert!(user.starts_with("pong from work"), "{user}");
    assert!(user.contains("sourceSession=agent:work:main"), "{user}");
    // The announce step holds the whole exchange and the skip instruction.
    let announce_req = request_where(&fake, "Agent-to-agent announce step", |_| true);
    let system = system_text(&announce_req);
    for line in [
        "Original request: ping",
        "Round 1 reply: pong from work",
        "Latest reply: main follows up",
        "If you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".",
    ] {
        assert!(system.contains(line), "{line:?} in {system}");
    }
    assert!(last_text(&announce_req).starts_with("Agent-to-agent announce step."));

    // Work's transcript: main's message and follow-up as inter-session user messages,
    // its own replies as assistant messages.
    let texts: Vec<(String, String)> = transcript(&b.engine, WORK)
        .await
        .iter()
        .map(|m| {
            (
                role(m).to_string(),
                m["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let expect = [
        ("user", "ping"),
        ("assistant", "pong from work"),
        ("user", "main follows up"),
        ("assistant", "REPLY_SKIP"),
    ];
    for (r, t) in expect {
        assert!(
            texts.contains(&(r.to_string(), t.to_string())),
            "{r} {t:?} in {texts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_turn_gets_the_history_with_tool_calls_and_the_current_message_once() {
    let fake = Fake::start_fn(|body| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
        if last.as_ref().is_some_and(last_is_tool) {
            return text_reply("there are two agents", 5, 1);
        }
        match last_text(body).as_str() {
            "which agents?" => tool_reply(json!([call("t1", "agents_list", "{}")])),
            _ => text_reply("you asked about agents", 1, 1),
        }
    })
    .await;
    let b = common::bench(config(&fake.base_url, json!({})));
    send(&b.engine, MAIN, "which agents?").await;
    send(&b.engine, MAIN, "what did I ask?").await;
    let seen = fake.seen();
    // The first turn started from nothing.
    let first: Vec<&str> = seen[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(role)
        .collect();
    assert_eq!(first, ["system", "user"]);
    let second = &seen.last().unwrap().body;
    let messages = second["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(role).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{second:#}"
    );
    assert_eq!(messages[1]["content"], "which agents?");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "t1");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["name"],
        "agents_list"
    );
    assert_eq!(messages[3]["tool_call_id"], "t1");
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("\"agents\"")
    );
    assert_eq!(messages[4]["content"], "there are two agents");
    assert_eq!(messages[5]["content"], "what did I ask?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_is_offered_only_the_tools_its_policy_allows() {
    let respond = |body: &Value| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
        if last.as_ref().is_some_and(last_is_tool) || !system_text(body).contains("main agent") {
            return text_reply("fine", 1, 1);
        }
        if last_text(body) == "spawn" {
            return tool_reply(json!([call(
                "sp",
                "sessions_spawn",
                "{\"task\": \"child task\"}"
            )]));
        }
        text_reply("fine", 1, 1)
    };
    // Default policy: a leaf sub-agent gets no session tools, so `tools` is left out.
    let fake = Fake::start_fn(respond).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    send(&b.engine, MAIN, "spawn").await;
    let child = fake
        .seen()
        .into_iter()
        .map(|s| s.body)
        .find(|b| last_text(b).starts_with("child task"))
        .expect("the child ran");
    assert_eq!(tool_names(&child), None, "{child:#}");
    let parent = &fake.seen()[0].body;
    assert_eq!(tool_names(parent).map(|t| t.len()), Some(5));

    // alsoAllow grants one, deny takes one back from the orchestrator set.
    let fake = Fake::start_fn(respond).await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "tools": { "subagents": { "tools": { "alsoAllow": ["sessions_list", "agents_list"], "deny": ["agents_list"] } } } }),
    ));
    send(&b.engine, MAIN, "spawn").await;
    let child = fake
        .seen()
        .into_iter()
        .map(|s| s.body)
        .find(|b| last_text(b).starts_with("child task"))
        .expect("the child ran");
    assert_eq!(tool_names(&child), Some(vec!["sessions_list".to_string()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_session_with_no_sandboxed_agent_to_spawn_under_is_not_offered_spawn() {
    let fake = Fake::start(vec![text_reply("x", 1, 1)]).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    let main = SessionKey::from_canonical(MAIN);
    let all = [
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "agents_list",
    ];
    assert_eq!(
        b.engine
            .allowed_tools(&ToolContext::new(main.clone(), false)),
        all
    );
    assert_eq!(
        b.engine
            .allowed_tools(&ToolContext::new(main.clone(), true)),
        [
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "agents_list"
        ]
    );
    // A sandboxed agent it may spawn under puts it back.
    let mut c = config(&fake.base_url, json!({}));
    c["agents"]["list"][1]["sandboxed"] = json!(true);
    let b = common::bench(c);
    assert_eq!(b.engine.allowed_tools(&ToolContext::new(main, true)), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_prompt_file_and_thinking_level_reach_the_request() {
    let fake = Fake::start(vec![text_reply("hi", 1, 1)]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(
        dir.path().join("prompts/main.md"),
        "You are main, from a file.\nBe brief.",
    )
    .unwrap();
    let text = json!({
        "agents": {
            "defaults": { "thinkingLevel": "medium" },
            "list": [{ "id": "main", "model": "fake/test-model", "systemPromptFile": "prompts/main.md" }],
        },
        "models": { "providers": { "fake": { "baseUrl": fake.base_url, "api": "openai-completions" } } },
    });
    let path = dir.path().join("switchboard.json5");
    std::fs::write(&path, text.to_string()).unwrap();
    let config = switchboard_config::load_file(&path).expect("the config loads");
    let state = tempfile::tempdir().unwrap();
    let engine = crate::common::open_engine(state.path(), config).unwrap();
    send(&engine, MAIN, "hello").await;
    let body = &fake.seen()[0].body;
    assert_eq!(system_text(body), "You are main, from a file.\nBe brief.");
    assert_eq!(body["reasoning_effort"], "medium");

    // `off` (here on the agent, over the default) sends no reasoning_effort at all.
    let mut off = text.clone();
    off["agents"]["list"][0]["thinkingLevel"] = json!("off");
    std::fs::write(&path, off.to_string()).unwrap();
    let config = switchboard_config::load_file(&path).expect("the config loads");
    let state = tempfile::tempdir().unwrap();
    let engine = crate::common::open_engine(state.path(), config).unwrap();
    send(&engine, MAIN, "hello").await;
    let body = fake.seen().last().unwrap().body.clone();
    assert!(body.get("reasoning_effort").is_none(), "{body}");

    // A file that is not there is a config problem naming the path tried.
    let mut missing = text.clone();
    missing["agents"]["list"][0]["systemPromptFile"] = json!("prompts/gone.md");
    std::fs::write(&path, missing.to_string()).unwrap();
    let problems = switchboard_config::check_file(&path).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "agents.list[0].systemPromptFile");
    let expected = dir.path().join("prompts/gone.md");
    assert!(
        problems[0]
            .message
            .contains(&expected.display().to_string()),
        "{}",
        problems[0].message
    );
    assert!(switchboard_config::load_file(&path).is_err());

    // Both ways at once is ambiguous; an unknown level is refused by name.
    let mut both = text.clone();
    both["agents"]["list"][0]["systemPrompt"] = json!("inline");
    both["agents"]["list"][0]["thinkingLevel"] = json!("huge");
    std::fs::write(&path, both.to_string()).unwrap();
    let problems = switchboard_config::check_file(&path).unwrap();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert!(
        paths.contains(&"agents.list[0].thinkingLevel"),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.path == "agents.list[0].systemPromptFile" && p.message.contains("not both")),
        "{problems:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_repeating_earlier_words_does_not_cut_the_history_short() {
    let fake = Fake::start_fn(|body| match last_text(body).as_str() {
        "ok" => text_reply("ack", 1, 1),
        _ => text_reply("noted", 1, 1),
    })
    .await;
    let b = common::bench(config(
        &fake.base_url,
        json!({ "session": { "agentToAgent": { "maxPingPongTurns": 0 } } }),
    ));
    open_work(&b.engine).await;
    send(&b.engine, MAIN, "ok").await;
    // Work says the same words into main (main's run records them when it starts).
    let result = SessionsApi::call_tool(
        &b.engine,
        ToolCall {
            tool: "sessions_send".into(),
            params: json!({ "sessionKey": MAIN, "message": "ok", "timeoutSeconds": 30 }),
            requester: WORK.into(),
            sandboxed: false,
        },
    )
    .await
    .expect("the send runs")
    .result;
    assert_eq!(result["status"], "ok", "{result}");
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("the engine settles");
    let second = request_where(&fake, "You are the main agent.", |m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.contains("sourceSession=agent:work:main"))
    });
    let messages = second["messages"].as_array().unwrap();
    let shown: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (role(m), m["content"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(shown.len(), 4, "{shown:#?}");
    assert_eq!(shown[1], ("user", "ok"));
    assert_eq!(shown[2], ("assistant", "ack"));
    assert!(
        shown[3]
            .1
            .starts_with("ok\n\n<<<BEGIN_SWITCHBOARD_INTERNAL_CONTEXT>>>")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_window_follows_the_transcript_turn_after_turn_and_sees_lines_written_elsewhere()
 {
    // The history is read incrementally (only the lines since the last model turn): it must
    // still be exactly the transcript's newest messages, with nothing twice, also after lines
    // were appended outside any model turn.
    let fake = Fake::start_fn(|body| text_reply(&format!("re: {}", last_text(body)), 1, 1)).await;
    let b = common::bench(config(&fake.base_url, json!({})));
    for i in 0..30 {
        send(&b.engine, MAIN, &format!("message {i}")).await;
    }
    let key = switchboard_types::key::SessionKey::from_canonical(MAIN);
    b.engine
        .store()
        .append_message(
            &key,
            json!({ "role": "user", "content": [{ "type": "text", "text": "written elsewhere" }],
                    "timestamp": 1 }),
        )
        .await
        .expect("append");
    send(&b.engine, MAIN, "last one").await;
    let body = fake.seen().last().unwrap().body.clone();
    let texts: Vec<String> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1) // the system prompt
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    // 30 exchanges (60 messages) + the outside line: the window keeps the newest 40 history
    // messages (the outside line the newest of them), then the turn's own message.
    let mut expected: Vec<String> = vec!["re: message 10".into()];
    for i in 11..30 {
        expected.push(format!("message {i}"));
        expected.push(format!("re: message {i}"));
    }
    expected.push("written elsewhere".into());
    expected.push("last one".into());
    assert_eq!(texts, expected, "{body:#}");
}
