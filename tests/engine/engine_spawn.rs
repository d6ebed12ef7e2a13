//! `sessions_spawn` through the library: the accepted result and the child session, every
//! refusal (with nothing created), the sub-agent tool policy, the announce text (Status /
//! Result / Notes / Stats) and where it goes, ANNOUNCE_SKIP, failures and run timeouts,
//! cleanup delete vs keep, the archive timer, and visibility with real children.
//!
//! Real time, as in engine_send.rs: a "slow" child sleeps 3 s against a 1 s run timeout.

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::events::EngineEvent;
use switchboard_engine::store::{SessionInit, now_ms};
use switchboard_engine::tools::ToolContext;
use switchboard_types::api::{ApiError, SessionsApi, ToolCall};
use switchboard_types::key::SessionKey;
use tempfile::TempDir;
use tokio::sync::broadcast;

const ME: &str = "agent:main:main";

struct Bench {
    engine: Engine,
    events: broadcast::Receiver<EngineEvent>,
    _dir: TempDir,
}

fn bench_with(config: Value) -> Bench {
    let config: Config = serde_json::from_value(config).expect("test config is valid");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine opens");
    let events = engine.events().subscribe();
    Bench {
        engine,
        events,
        _dir: dir,
    }
}

/// Agents `main` (default) and `work`, with `main` allowed to spawn `work`.
fn bench(main_script: Value, work_script: Value, extra: Value) -> Bench {
    let mut config = json!({
        "agents": {
            "defaults": { "subagents": {} },
            "list": [
                { "id": "main", "default": true, "model": "scripted", "script": main_script,
                  "subagents": { "allowAgents": ["work"] } },
                { "id": "work", "model": "scripted", "script": work_script },
            ],
        },
    });
    merge(&mut config, extra);
    bench_with(config)
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

fn key(raw: &str) -> SessionKey {
    SessionKey::from_canonical(raw)
}

impl Bench {
    async fn requester(&self, channel: Option<&str>) {
        let init = SessionInit {
            channel: channel.map(str::to_string),
            to: channel.map(|_| "alice".to_string()),
            ..SessionInit::default()
        };
        self.engine.store().ensure(&key(ME), init).await.unwrap();
    }

    async fn spawn(&self, params: Value) -> Value {
        self.spawn_as(ME, false, params).await
    }

    async fn spawn_as(&self, requester: &str, sandboxed: bool, params: Value) -> Value {
        self.try_spawn_as(requester, sandboxed, params)
            .await
            .expect("the tool runs")
    }

    /// `sessions_spawn` through `SessionsApi::call_tool`, as a front end calls it.
    async fn try_spawn_as(
        &self,
        requester: &str,
        sandboxed: bool,
        params: Value,
    ) -> Result<Value, ApiError> {
        let api: Arc<dyn SessionsApi> = Arc::new(self.engine.clone());
        let call = ToolCall {
            tool: "sessions_spawn".into(),
            params,
            requester: requester.into(),
            sandboxed,
        };
        Ok(api.call_tool(call).await?.result)
    }

    async fn texts(&self, raw: &str) -> Vec<(String, String)> {
        let Some(s) = self.engine.store().get(&key(raw)).await.unwrap() else {
            return Vec::new();
        };
        self.engine
            .store()
            .tail(&s.entry.session_id, 500, true)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| {
                let m = r.line.get("message")?.clone();
                let text = m["content"]
                    .as_array()
                    .map(|p| {
                        p.iter()
                            .filter_map(|x| x["text"].as_str())
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                Some((m["role"].as_str()?.to_string(), text))
            })
            .collect()
    }

    /// The announce messages in the requester's transcript.
    async fn announces(&self) -> Vec<String> {
        self.texts(ME)
            .await
            .into_iter()
            .filter(|(role, t)| role == "user" && t.starts_with("Sub-agent "))
            .map(|(_, t)| t)
            .collect()
    }

    fn drain(&mut self) -> Vec<EngineEvent> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(e);
        }
        out
    }

    async fn session_count(&self) -> u64 {
        self.engine.store().count().await.unwrap()
    }
}

fn child_of(r: &Value) -> String {
    r["childSessionKey"]
        .as_str()
        .expect("a child key")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_is_accepted_at_once_and_its_result_is_announced_to_the_requester() {
    let work = json!([{ "when": { "step": "subagent" }, "reply": "CHILD_RESULT 42 for {{text}}", "tokens": { "in": 30, "out": 12 } }]);
    let mut b = bench(json!([]), work, json!({}));
    b.requester(Some("telegram")).await;
    let r = b
        .spawn(json!({ "task": "Compute things", "label": "child-s6", "agentId": "work" }))
        .await;
    assert_eq!(r["status"], "accepted", "{r}");
    assert_eq!(r["mode"], "run");
    assert!(r["note"].as_str().unwrap().contains("never busy-poll"));
    assert!(r["runId"].as_str().is_some_and(|s| s.len() == 36));
    let child = child_of(&r);
    assert!(child.starts_with("agent:work:subagent:"), "{child}");
    let entry = b
        .engine
        .store()
        .get(&key(&child))
        .await
        .unwrap()
        .unwrap()
        .entry;
    assert_eq!(entry.spawned_by.as_deref(), Some(ME));
    assert_eq!(entry.parent_session_key.as_deref(), Some(ME));
    assert_eq!(entry.spawn_depth, Some(1));
    assert_eq!(entry.label.as_deref(), Some("child-s6"));
    b.engine.idle().await;

    // The child saw its task, with OpenClaw's sub-agent context line.
    let child_texts = b.texts(&child).await;
    assert!(
        child_texts[0]
            .1
            .starts_with("[Subagent Context] You are running as a subagent (depth 1/1).")
    );
    assert!(
        child_texts[0]
            .1
            .ends_with("[Subagent Task]: Compute things")
    );
    assert_eq!(child_texts[1].1, "CHILD_RESULT 42 for Compute things");

    let announces = b.announces().await;
    assert_eq!(announces.len(), 1, "{announces:?}");
    let lines: Vec<&str> = announces[0].lines().collect();
    assert_eq!(lines[0], "Sub-agent \"child-s6\" finished.");
    assert_eq!(lines[1], "Status: completed");
    assert_eq!(lines[2], "Result: CHILD_RESULT 42 for Compute things");
    assert_eq!(
        lines[3],
        "Notes: cleanup: keep; the sub-agent session is archived after 60 minutes."
    );
    assert!(lines[4].starts_with("Stats: runtime "), "{}", lines[4]);
    assert!(
        lines[4].contains(" • tokens 42 (in 30 / out 12) • sessionKey "),
        "{}",
        lines[4]
    );
    assert!(lines[4].contains(&format!(
        "sessionKey {child} • sessionId {}",
        entry.session_id
    )));
    assert!(lines[4].contains(" • transcript "), "{}", lines[4]);
    // And to the requester's channel.
    let outbox = b.engine.outbox(&key(ME)).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (outbox[0].kind.as_str(), outbox[0].channel.as_str()),
        ("subagent_announce", "telegram")
    );
    assert_eq!(outbox[0].text, announces[0]);
    let events = b.drain();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Spawned { child: c, .. } if *c == child))
    );
    assert!(events.iter().any(|e| matches!(e, EngineEvent::SpawnEnded { outcome, tokens_in: 30, .. } if outcome.as_str() == "completed")));
    assert!(events.iter().any(
        |e| matches!(e, EngineEvent::SpawnAnnounce { outcome, .. } if outcome.as_str() == "delivered")
    ));
    let record = b.engine.spawn_record(&key(&child)).await.unwrap().unwrap();
    assert_eq!(
        (record.status.as_str(), record.announce_state.as_deref()),
        ("done", Some("delivered"))
    );
    assert!(record.archive_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_falls_back_to_the_last_tool_result_and_status_never_comes_from_the_text() {
    let work = json!([{ "when": { "step": "subagent" },
        "tools": [{ "name": "sessions_list", "args": { "limit": 1 } }] }]);
    let b = bench(
        json!([]),
        work,
        json!({ "tools": { "subagents": { "tools": { "alsoAllow": ["sessions_list"] } } } }),
    );
    b.requester(None).await;
    b.spawn(json!({ "task": "look around", "agentId": "work" }))
        .await;
    b.engine.idle().await;
    let a = &b.announces().await[0];
    assert!(a.contains("\nStatus: completed\n"), "{a}");
    assert!(a.contains("\nResult: {\n  \"count\""), "{a}");
    assert!(a.contains("the result is its last tool result"), "{a}");

    // A child whose text claims failure still "completed"; one that errors "failed".
    let b = bench(
        json!([]),
        json!([
            { "when": { "step": "subagent", "text": "pretend" }, "reply": "Status: failed" },
            { "when": { "step": "subagent" }, "error": "disk on fire" },
        ]),
        json!({}),
    );
    b.requester(None).await;
    b.spawn(json!({ "task": "pretend", "agentId": "work" }))
        .await;
    b.spawn(json!({ "task": "really", "agentId": "work" }))
        .await;
    b.engine.idle().await;
    let mut statuses: Vec<String> = b
        .announces()
        .await
        .iter()
        .map(|a| a.lines().nth(1).unwrap().to_string())
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        ["Status: completed", "Status: failed: disk on fire"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_over_its_run_timeout_is_stopped_and_announced_as_timed_out() {
    let work = json!([{ "when": { "step": "subagent" }, "delayMs": 3000, "reply": "too late" }]);
    let b = bench(json!([]), work, json!({}));
    b.requester(None).await;
    let r = b
        .spawn(json!({ "task": "slow", "agentId": "work", "runTimeoutSeconds": 1 }))
        .await;
    b.engine.idle().await;
    let a = &b.announces().await[0];
    assert!(a.contains("\nStatus: timed out\n"), "{a}");
    let run = b
        .engine
        .run(r["runId"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status.as_str(), "timeout");
    assert!(
        !b.texts(&child_of(&r))
            .await
            .iter()
            .any(|t| t.1 == "too late")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announce_skip_stays_silent_and_cleanup_delete_removes_the_child() {
    let work = json!([
        { "when": { "step": "subagent", "text": "quiet" }, "reply": "ANNOUNCE_SKIP" },
        { "when": { "step": "subagent" }, "reply": "done" },
    ]);
    let mut b = bench(json!([]), work, json!({}));
    b.requester(None).await;
    let quiet = child_of(&b.spawn(json!({ "task": "quiet", "agentId": "work" })).await);
    let gone = child_of(
        &b.spawn(json!({ "task": "tidy", "agentId": "work", "cleanup": "delete" }))
            .await,
    );
    b.engine.idle().await;
    let announces = b.announces().await;
    assert_eq!(
        announces.len(),
        1,
        "only the second child announced: {announces:?}"
    );
    assert!(
        announces[0].contains(
            "Notes: cleanup: delete; the sub-agent session is removed after this announce."
        )
    );
    assert!(
        b.engine.store().get(&key(&gone)).await.unwrap().is_none(),
        "deleted after its announce"
    );
    assert!(
        b.engine.store().get(&key(&quiet)).await.unwrap().is_some(),
        "kept"
    );
    let events = b.drain();
    assert!(events.iter().any(
        |e| matches!(e, EngineEvent::SpawnAnnounce { outcome, .. } if outcome.as_str() == "skipped")
    ));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::SessionDeleted { key: k } if *k == gone))
    );
    // A deleted child's record stays, so its parent's history of spawns is complete.
    assert_eq!(b.engine.spawns_of(&key(ME)).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_children_are_archived_once_when_their_timer_is_due_even_across_a_restart() {
    let work = json!([{ "when": { "step": "subagent" }, "reply": "ok" }]);
    let config = json!({
        "agents": {
            "defaults": { "subagents": { "archiveAfterMinutes": 60 } },
            "list": [
                { "id": "main", "default": true, "model": "scripted", "subagents": { "allowAgents": ["work"] } },
                { "id": "work", "model": "scripted", "script": work },
            ],
        },
    });
    let dir = tempfile::tempdir().unwrap();
    let child;
    {
        let engine =
            crate::common::open_engine(dir.path(), serde_json::from_value(config.clone()).unwrap())
                .unwrap();
        engine
            .store()
            .ensure(&key(ME), SessionInit::default())
            .await
            .unwrap();
        let ctx = ToolContext::new(key(ME), false);
        let r = engine
            .call_tool(
                "sessions_spawn",
                &json!({ "task": "t", "agentId": "work" }),
                &ctx,
            )
            .await
            .unwrap();
        child = child_of(&r);
        engine.idle().await;
        // Not due yet.
        assert!(
            engine
                .archive_due(now_ms() + 59 * 60_000)
                .await
                .unwrap()
                .is_empty()
        );
    }
    // A new process: the timer is in the database.
    let engine =
        crate::common::open_engine(dir.path(), serde_json::from_value(config).unwrap()).unwrap();
    engine.resume().await.unwrap();
    let archived = engine.archive_due(now_ms() + 61 * 60_000).await.unwrap();
    assert_eq!(archived, [key(&child)]);
    assert!(
        engine
            .archive_due(now_ms() + 120 * 60_000)
            .await
            .unwrap()
            .is_empty(),
        "never twice"
    );
    // Hidden from the default list, still readable, shown on request.
    let ctx = ToolContext::new(key(ME), false);
    let list = engine
        .call_tool("sessions_list", &json!({}), &ctx)
        .await
        .unwrap();
    assert!(
        !list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == child.as_str())
    );
    let all = engine
        .call_tool("sessions_list", &json!({ "includeArchived": true }), &ctx)
        .await
        .unwrap();
    assert!(
        all["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == child.as_str() && r["archived"] == true)
    );
    let history = engine
        .call_tool("sessions_history", &json!({ "sessionKey": child }), &ctx)
        .await
        .unwrap();
    assert_eq!(history["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_use_openclaws_messages_and_create_nothing() {
    let slow = json!([{ "when": { "step": "subagent" }, "delayMs": 1500, "reply": "slow" }]);
    let b = bench(
        json!([]),
        slow.clone(),
        json!({
            "agents": { "defaults": { "subagents": { "maxChildrenPerAgent": 1 } } },
            "models": { "providers": { "ollama": { "baseUrl": "http://127.0.0.1:11434/v1" } } },
        }),
    );
    b.requester(None).await;
    let before = b.session_count().await;
    let err = |r: &Value| {
        (
            r["status"].as_str().unwrap().to_string(),
            r["error"].as_str().unwrap().to_string(),
        )
    };
    for (params, status, message) in [
        (
            json!({ "task": "t", "agentId": "Bad Id!" }),
            "error",
            "Invalid agentId \"Bad Id!\". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.",
        ),
        (
            json!({ "task": "t", "agentId": "ops" }),
            "forbidden",
            "agentId is not allowed for sessions_spawn (allowed: work)",
        ),
        (
            json!({ "task": "t", "mode": "session" }),
            "error",
            "mode=\"session\" requires thread=true so the subagent can stay bound to a thread.",
        ),
        (
            json!({ "task": "t", "model": "gpt-9" }),
            "error",
            "Invalid model \"gpt-9\": use \"scripted\" or \"<provider>/<model>\" with the provider configured under models.providers.",
        ),
        (
            json!({ "task": "t", "model": "nowhere/x" }),
            "error",
            "Invalid model \"nowhere/x\": provider \"nowhere\" is not configured under models.providers.",
        ),
        (
            json!({ "task": "t", "thinking": "extreme" }),
            "error",
            "Invalid thinking level \"extreme\". Use one of: off, minimal, low, medium, high, xhigh.",
        ),
    ] {
        let r = b.spawn(params.clone()).await;
        assert_eq!(
            err(&r),
            (status.to_string(), message.to_string()),
            "{params}"
        );
    }
    let r = b.spawn(json!({ "task": "t", "thread": true })).await;
    assert_eq!(r["status"], "error");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("thread=true is unavailable")
    );
    assert_eq!(b.session_count().await, before, "nothing was created");
    // Input errors: a missing task, a delivery parameter.
    for (params, needle) in [
        (json!({ "label": "x" }), "task required"),
        (
            json!({ "task": "t", "channel": "discord" }),
            "sessions_spawn does not support \"channel\".",
        ),
    ] {
        let e = b.try_spawn_as(ME, false, params).await.unwrap_err();
        assert!(matches!(e, ApiError::BadInput(_)), "{e:?}");
        assert!(e.to_string().contains(needle), "{e}");
    }
    // Fan-out: one running child at most.
    let first = b.spawn(json!({ "task": "t", "agentId": "work" })).await;
    assert_eq!(first["status"], "accepted");
    let r = b.spawn(json!({ "task": "t2", "agentId": "work" })).await;
    assert_eq!(
        err(&r),
        (
            "forbidden".into(),
            "sessions_spawn has reached max active children for this session (1/1)".into()
        )
    );
    b.engine.idle().await;
    // Once it has finished, there is room again.
    assert_eq!(
        b.spawn(json!({ "task": "t3", "agentId": "work" })).await["status"],
        "accepted"
    );
    b.engine.idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_agent_with_a_star_and_a_sandboxed_requester_keeps_its_children_sandboxed() {
    let config = json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "subagents": { "allowAgents": ["*"] } },
            { "id": "work", "model": "scripted" },
            { "id": "box", "model": "scripted", "sandboxed": true },
        ] },
    });
    let b = bench_with(config);
    b.requester(None).await;
    assert_eq!(
        b.spawn(json!({ "task": "t", "agentId": "work" })).await["status"],
        "accepted"
    );
    let r = b.spawn(json!({ "task": "t", "agentId": "ghost" })).await;
    assert_eq!(r["status"], "error");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Unknown agentId \"ghost\"")
    );
    let r = b
        .spawn_as(ME, true, json!({ "task": "t", "agentId": "work" }))
        .await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime."
    );
    assert_eq!(
        b.spawn_as(ME, true, json!({ "task": "t", "agentId": "box" }))
            .await["status"],
        "accepted"
    );
    b.engine.idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_agents_get_no_session_tools_and_cannot_spawn_unless_configured() {
    let work = json!([{ "when": { "step": "subagent" },
        "tools": [
            { "name": "sessions_send", "args": { "sessionKey": "main", "message": "hi" } },
            { "name": "sessions_spawn", "args": { "task": "grandchild" } },
        ],
        "reply": "tried" }]);
    let b = bench(json!([]), work, json!({}));
    b.requester(None).await;
    let child = child_of(&b.spawn(json!({ "task": "t", "agentId": "work" })).await);
    b.engine.idle().await;
    let s = b.engine.store().get(&key(&child)).await.unwrap().unwrap();
    let results: Vec<Value> = b
        .engine
        .store()
        .tail(&s.entry.session_id, 50, true)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.line["message"]["role"] == "toolResult")
        .map(|r| r.line["message"]["details"].clone())
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["status"], "forbidden");
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("sessions_send is not available to sub-agents")
    );
    assert_eq!(
        results[1]["error"],
        "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)"
    );
    assert_eq!(
        b.engine.spawns_of(&key(&child)).await.unwrap().len(),
        0,
        "no grandchild"
    );
    // The same call from the command line (`tool --as <child>`) is refused the same way.
    let ctx = ToolContext::new(key(&child), false);
    let r = b
        .engine
        .call_tool("sessions_list", &json!({}), &ctx)
        .await
        .unwrap();
    assert_eq!(r["status"], "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_with_real_children() {
    // `main:main` spawns one child under `main` and one under `work`; `main:other` is a
    // sibling it did not spawn.
    let config = |visibility: &str| {
        json!({
            "tools": { "sessions": { "visibility": visibility } },
            "agents": { "list": [
                { "id": "main", "default": true, "model": "scripted", "subagents": { "allowAgents": ["work"] } },
                { "id": "work", "model": "scripted" },
            ] },
        })
    };
    for (visibility, sandboxed, see_sibling) in [
        ("tree", false, false),
        ("agent", false, true),
        ("all", false, true),
        ("all", true, false), // sandboxed: clamped to what it spawned
    ] {
        let b = bench_with(config(visibility));
        b.requester(None).await;
        b.engine
            .store()
            .ensure(&key("agent:main:other"), SessionInit::default())
            .await
            .unwrap();
        let own = child_of(&b.spawn(json!({ "task": "a" })).await);
        let cross = child_of(&b.spawn(json!({ "task": "b", "agentId": "work" })).await);
        b.engine.idle().await;
        let ctx = ToolContext::new(key(ME), sandboxed);
        let list = b
            .engine
            .call_tool("sessions_list", &json!({}), &ctx)
            .await
            .unwrap();
        let keys: Vec<&str> = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap())
            .collect();
        let label = format!("{visibility} sandboxed={sandboxed}: {keys:?}");
        assert!(keys.contains(&ME), "{label}");
        assert!(keys.contains(&own.as_str()), "{label}");
        assert!(
            keys.contains(&cross.as_str()),
            "a child under another agent is still its own: {label}"
        );
        assert_eq!(keys.contains(&"agent:main:other"), see_sibling, "{label}");
        let h = b
            .engine
            .call_tool("sessions_history", &json!({ "sessionKey": cross }), &ctx)
            .await
            .unwrap();
        assert!(h.get("messages").is_some(), "{label}: {h}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_model_is_applied_and_a_missing_backend_is_announced_as_a_failure() {
    let b = bench(
        json!([]),
        json!([{ "when": { "step": "subagent" }, "reply": "scripted reply" }]),
        // An api with no backend here: the openai backend would really dial the URL.
        json!({ "models": { "providers": { "ollama": { "baseUrl": "http://127.0.0.1:11434/v1", "api": "anthropic-messages" } } } }),
    );
    b.requester(None).await;
    let r = b
        .spawn(json!({ "task": "t", "agentId": "work", "model": "ollama/llama3.2", "thinking": "low" }))
        .await;
    assert_eq!(
        (r["status"].as_str(), r["modelApplied"].as_bool()),
        (Some("accepted"), Some(true))
    );
    let entry = b
        .engine
        .store()
        .get(&key(&child_of(&r)))
        .await
        .unwrap()
        .unwrap()
        .entry;
    assert_eq!(entry.model.as_deref(), Some("ollama/llama3.2"));
    assert_eq!(entry.thinking_level.as_deref(), Some("low"));
    b.engine.idle().await;
    let a = &b.announces().await[0];
    assert!(
        a.contains("\nStatus: failed: no backend for model \"ollama/llama3.2\""),
        "{a}"
    );
    // Bad values of the enumerated parameters are input errors.
    let ctx = ToolContext::new(key(ME), false);
    for params in [
        json!({ "task": "t", "mode": "forever" }),
        json!({ "task": "t", "cleanup": "shred" }),
    ] {
        assert!(
            b.engine
                .call_tool("sessions_spawn", &params, &ctx)
                .await
                .is_err(),
            "{params}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_self_hides_even_spawned_children() {
    let b = bench_with(json!({ "tools": { "sessions": { "visibility": "self" } } }));
    b.requester(None).await;
    let own = child_of(&b.spawn(json!({ "task": "a" })).await);
    b.engine.idle().await;
    let ctx = ToolContext::new(key(ME), false);
    let list = b
        .engine
        .call_tool("sessions_list", &json!({}), &ctx)
        .await
        .unwrap();
    let keys: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [ME]);
    let h = b
        .engine
        .call_tool("sessions_history", &json!({ "sessionKey": own }), &ctx)
        .await
        .unwrap();
    assert_eq!(h["status"], "forbidden");
}

/// A requester that spawns again on every `subagent-announce` (issue 10 item 9) loops
/// forever without a bound. Spawns continue the chain of the run that made them, and the
/// announce turn carries it, so the loop stops at `maxChainHops` with a ChainStopped event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_spawn_on_every_announce_stops_at_the_chain_limit() {
    let respawn =
        json!({ "name": "sessions_spawn", "args": { "task": "again", "agentId": "work" } });
    let mut b = bench(
        json!([
            { "when": { "step": "subagent-announce" }, "tools": [respawn], "reply": "{{result.status}} {{result.error}}" },
        ]),
        json!([{ "reply": "done" }]),
        json!({ "session": { "agentToAgent": { "maxChainHops": 3 } } }),
    );
    b.requester(None).await;
    let first = b.spawn(json!({ "task": "first", "agentId": "work" })).await;
    assert_eq!(first["status"], "accepted", "{first}");
    tokio::time::timeout(std::time::Duration::from_secs(30), b.engine.idle())
        .await
        .expect("the re-spawn loop ended");
    // A person's spawn starts a chain (hop 1); the announce turns add hops 2 and 3; the
    // fourth spawn is refused.
    let spawns = b.engine.spawns_of(&key(ME)).await.unwrap();
    assert_eq!(spawns.len(), 3, "{spawns:?}");
    let mut stopped = None;
    while let Ok(ev) = b.events.try_recv() {
        if let EngineEvent::ChainStopped { hops, max_hops, .. } = ev {
            stopped = Some((hops, max_hops));
        }
    }
    assert_eq!(stopped, Some((4, 3)));
    // The refused turn says why in its reply.
    let last = b.engine.runs_of(&key(ME), 1).await.unwrap();
    let reply = last[0].reply.clone().unwrap_or_default();
    assert!(
        reply.starts_with("error Agent-to-agent chain limit reached"),
        "{reply}"
    );
}

/// An announce decided by a live engine (its owner: a console, another command) is that
/// engine's to deliver: another engine's `resume` on the same folder leaves it alone, so
/// the requester's announce turn does not run in (and hold up) the wrong process. Once the
/// owner is gone, the next `resume` delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_leaves_a_live_engines_announce_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = || -> Config { serde_json::from_value(json!({})).unwrap() };
    let owner = crate::common::open_engine(dir.path(), config()).unwrap();
    owner
        .store()
        .ensure(&key(ME), SessionInit::default())
        .await
        .unwrap();
    let child = "agent:main:subagent:decided";
    owner
        .store()
        .ensure(&key(child), SessionInit::default())
        .await
        .unwrap();
    // The state between the two steps of an announce: the child's run ended (in `owner`)
    // and the announce is decided, not yet delivered.
    crate::common::store_exec(
        dir.path(),
        &format!(
            "INSERT INTO runs (run_id, session_key, agent_id, step, round, status, owner, started_at, ended_at, reply)
             VALUES ('r1', '{child}', 'main', 'subagent', 0, 'ok', '{}', 1, 2, 'done');
             INSERT INTO spawns (child_key, requester, run_id, agent_id, task, cleanup, mode, status,
                 outcome, started_at, ended_at, announce, announce_state)
             VALUES ('{child}', '{ME}', 'r1', 'main', 't', 'keep', 'run', 'ended', 'completed', 1, 2,
                 'Sub-agent \"t\" finished.', 'pending')",
            owner.instance_id()
        ),
    );
    let other = crate::common::open_engine(dir.path(), config()).unwrap();
    other.resume().await.unwrap();
    other.idle().await;
    let spawn = other.spawn_record(&key(child)).await.unwrap().unwrap();
    assert_eq!(
        spawn.status.as_str(),
        "ended",
        "another live engine's announce was taken over"
    );
    // The owner is gone: now it is anyone's.
    drop(owner);
    other.resume().await.unwrap();
    other.idle().await;
    let spawn = other.spawn_record(&key(child)).await.unwrap().unwrap();
    assert_eq!(spawn.status.as_str(), "done");
}
