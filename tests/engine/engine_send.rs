//! `sessions_send` end to end through the library: the result shapes (accepted, ok, timeout,
//! error, every resolution error), the reply-back loop (cap, REPLY_SKIP, no loop to self),
//! the announce (delivered, skipped, no route, blocked by policy), the chain limit across
//! three agents, send policy on sends, runs and token totals, and `/send` from the owner.
//!
//! Flows cross the storage writer thread, so these tests run on real time (tokio's paused
//! clock would auto-advance while a write is in flight and fire the flows' own timeouts).
//! Delays are chosen so the outcome cannot depend on machine speed: a "slow" agent sleeps
//! 3 s against a 1 s wait; nothing asserts on elapsed time.

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::events::EngineEvent;
use switchboard_engine::store::SessionInit;
use switchboard_types::api::{
    ApiError, PatchRequest, PolicySetting, SendRequest, Sender, SessionsApi, ToolCall,
};
use switchboard_types::key::SessionKey;
use tempfile::TempDir;
use tokio::sync::broadcast;

struct Bench {
    engine: Engine,
    /// The same engine as every front end uses it.
    api: Arc<dyn SessionsApi>,
    events: broadcast::Receiver<EngineEvent>,
    _dir: TempDir,
}

/// An engine with agents `main` (default) and `work` scripted by `main_script` and
/// `work_script`, every session visible to every agent, and `extra` merged into `session`.
fn bench_with(main_script: Value, work_script: Value, session: Value) -> Bench {
    let config = json!({
        "session": session,
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": main_script },
            { "id": "work", "model": "scripted", "script": work_script },
        ] },
    });
    let config: Config = serde_json::from_value(config).expect("test config is valid");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine opens");
    let events = engine.events().subscribe();
    Bench {
        api: Arc::new(engine.clone()),
        engine,
        events,
        _dir: dir,
    }
}

fn bench(main_script: Value, work_script: Value) -> Bench {
    bench_with(main_script, work_script, json!({}))
}

fn key(raw: &str) -> SessionKey {
    SessionKey::from_canonical(raw)
}

const ME: &str = "agent:main:s2";
const WORK: &str = "agent:work:s2";

impl Bench {
    async fn session(&self, raw: &str, channel: Option<&str>) {
        let init = SessionInit {
            channel: channel.map(str::to_string),
            ..SessionInit::default()
        };
        self.engine
            .store()
            .ensure(&key(raw), init)
            .await
            .expect("session");
    }

    async fn send_as(&self, requester: &str, params: Value) -> Value {
        self.try_send_as(requester, false, params)
            .await
            .expect("tool runs")
    }

    /// `sessions_send` through `SessionsApi::call_tool`, as a front end calls it.
    async fn try_send_as(
        &self,
        requester: &str,
        sandboxed: bool,
        params: Value,
    ) -> Result<Value, ApiError> {
        let call = ToolCall {
            tool: "sessions_send".into(),
            params,
            requester: requester.into(),
            sandboxed,
        };
        Ok(self.api.call_tool(call).await?.result)
    }

    /// Every message (role, text, provenance kind) of a session, oldest first.
    async fn messages(&self, raw: &str) -> Vec<(String, String, Option<String>)> {
        let stored = self
            .engine
            .store()
            .get(&key(raw))
            .await
            .expect("read")
            .expect("session exists");
        self.engine
            .store()
            .tail(&stored.entry.session_id, 1000, true)
            .await
            .expect("tail")
            .into_iter()
            .filter_map(|row| {
                let m = row.line.get("message")?.clone();
                let role = m["role"].as_str().unwrap_or("").to_string();
                let text = m["content"]
                    .as_array()
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("")
                    })
                    .unwrap_or_default();
                let prov = m["provenance"]["kind"].as_str().map(str::to_string);
                Some((role, text, prov))
            })
            .collect()
    }

    async fn assistant_texts(&self, raw: &str) -> Vec<String> {
        self.messages(raw)
            .await
            .into_iter()
            .filter(|(role, text, _)| role == "assistant" && !text.is_empty())
            .map(|(_, t, _)| t)
            .collect()
    }

    /// Drain the events seen so far.
    fn drain(&mut self) -> Vec<EngineEvent> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(e);
        }
        out
    }
}

fn loop_end(events: &[EngineEvent]) -> Option<(String, u32)> {
    events.iter().find_map(|e| match e {
        EngineEvent::ExchangeLoopEnded { reason, rounds, .. } => {
            Some((reason.to_string(), *rounds))
        }
        _ => None,
    })
}

fn announce(events: &[EngineEvent]) -> Option<(String, Option<String>, Option<String>)> {
    events.iter().find_map(|e| match e {
        EngineEvent::Announce {
            outcome,
            text,
            channel,
            ..
        } => Some((outcome.to_string(), text.clone(), channel.clone())),
        _ => None,
    })
}

/// Scripts where both sides keep talking until the cap.
fn chatty() -> (Value, Value) {
    (
        json!([{ "when": { "step": "reply" }, "reply": "main round {{round}}" }]),
        json!([
            { "when": { "step": "message" }, "reply": "WORK_REPLY: {{text}}", "tokens": { "in": 30, "out": 5 } },
            { "when": { "step": "reply" }, "reply": "work round {{round}}" },
            { "when": { "step": "announce" }, "reply": "ANNOUNCE from work" },
        ]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waited_send_replies_then_ping_pong_runs_to_the_cap_and_announces() {
    let (m, w) = chatty();
    let mut b = bench(m, w);
    b.session(ME, Some("telegram")).await;
    b.session(WORK, None).await;
    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": WORK, "message": "PING from main", "timeoutSeconds": 30 }),
        )
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["reply"], "WORK_REPLY: PING from main");
    assert_eq!(r["sessionKey"], WORK);
    assert_eq!(
        r["delivery"],
        json!({ "status": "pending", "mode": "announce" })
    );
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["runId", "sessionKey", "status", "delivery", "reply"]);
    b.engine.idle().await;

    // Turns 1, 3, 5 in the requester; 2, 4 and the announce in the target.
    assert_eq!(
        b.assistant_texts(ME).await,
        ["main round 2", "main round 4", "main round 6"]
    );
    assert_eq!(
        b.assistant_texts(WORK).await,
        [
            "WORK_REPLY: PING from main",
            "work round 3",
            "work round 5",
            "ANNOUNCE from work"
        ]
    );
    // Every message into either side is an inter-session message.
    let inbound: Vec<_> = b
        .messages(WORK)
        .await
        .into_iter()
        .filter(|(role, _, _)| role == "user")
        .collect();
    assert_eq!(inbound.len(), 3, "the original and two reply rounds");
    assert!(
        inbound
            .iter()
            .all(|(_, _, p)| p.as_deref() == Some("inter_session"))
    );
    let events = b.drain();
    assert_eq!(loop_end(&events), Some(("cap".to_string(), 6)));
    // The target has no route (no channel): the announce is recorded, not delivered.
    assert_eq!(announce(&events).map(|a| a.0), Some("no_route".to_string()));
    // Token usage of the primary run is summed on the session row.
    let entry = b
        .engine
        .store()
        .get(&key(WORK))
        .await
        .unwrap()
        .unwrap()
        .entry;
    assert_eq!(
        (entry.input_tokens, entry.output_tokens, entry.total_tokens),
        (Some(30), Some(5), Some(35))
    );
    // Every run ended, with its outcome recorded.
    let runs = b.engine.runs_of(&key(WORK), 10).await.unwrap();
    assert_eq!(runs.len(), 4);
    assert!(
        runs.iter()
            .all(|r| r.status.as_str() == "ok" && r.ended_at.is_some())
    );
    // The primary run's row carries its reply and token usage (written in one insert).
    let primary = runs
        .iter()
        .find(|r| r.step.as_str() == "message")
        .expect("primary");
    assert_eq!(primary.reply.as_deref(), Some("WORK_REPLY: PING from main"));
    assert_eq!((primary.tokens_in, primary.tokens_out), (Some(30), Some(5)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provenance_names_the_source_session_channel_tool_and_chain() {
    let (m, w) = chatty();
    let b = bench_with(m, w, json!({ "agentToAgent": { "maxPingPongTurns": 0 } }));
    b.session(ME, Some("telegram")).await;
    b.session(WORK, None).await;
    b.send_as(ME, json!({ "sessionKey": WORK, "message": "hello" }))
        .await;
    b.engine.idle().await;
    let stored = b.engine.store().get(&key(WORK)).await.unwrap().unwrap();
    let rows = b
        .engine
        .store()
        .tail(&stored.entry.session_id, 50, true)
        .await
        .unwrap();
    let user = rows
        .iter()
        .find(|r| r.line["message"]["role"] == "user")
        .expect("an inbound message");
    let p = &user.line["message"]["provenance"];
    assert_eq!(p["kind"], "inter_session");
    assert_eq!(p["sourceSessionKey"], ME);
    assert_eq!(p["sourceChannel"], "telegram");
    assert_eq!(p["sourceTool"], "sessions_send");
    assert_eq!(p["hop"], 1);
    assert!(p["chainId"].as_str().is_some_and(|s| s.len() == 36));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_is_accepted_at_once_and_the_exchange_still_runs() {
    let (m, w) = chatty();
    let mut b = bench_with(m, w, json!({ "agentToAgent": { "maxPingPongTurns": 1 } }));
    b.session(ME, None).await;
    b.session(WORK, None).await;
    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": WORK, "message": "later", "timeoutSeconds": 0 }),
        )
        .await;
    assert_eq!(r["status"], "accepted", "{r}");
    assert!(r.get("reply").is_none());
    assert_eq!(r["delivery"]["status"], "pending");
    b.engine.idle().await;
    assert_eq!(b.assistant_texts(WORK).await[0], "WORK_REPLY: later");
    assert_eq!(b.assistant_texts(ME).await, ["main round 2"]);
    assert_eq!(loop_end(&b.drain()), Some(("cap".to_string(), 2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_reports_timeout_and_the_late_reply_still_runs_the_loop() {
    let main = json!([{ "when": { "step": "reply" }, "reply": "REPLY_SKIP" }]);
    let work = json!([
        { "when": { "step": "message" }, "delayMs": 3000, "reply": "late but here" },
        { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
    ]);
    let mut b = bench(main, work);
    b.session(ME, None).await;
    b.session(WORK, None).await;
    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": WORK, "message": "take your time", "timeoutSeconds": 1 }),
        )
        .await;
    assert_eq!(r["status"], "timeout", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("the run goes on"),
        "{r}"
    );
    // A timeout is not "not delivered": the message is in the target, the announce pending.
    assert_eq!(r["delivery"]["status"], "pending");
    assert_eq!(
        b.messages(WORK)
            .await
            .iter()
            .filter(|m| m.0 == "user")
            .count(),
        1
    );
    b.engine.idle().await;
    // The skip token is kept in the transcript (as OpenClaw keeps it).
    assert_eq!(
        b.assistant_texts(WORK).await,
        ["late but here", "ANNOUNCE_SKIP"]
    );
    // The late reply reached the requester as round 2's input, and REPLY_SKIP ended it.
    let me = b.messages(ME).await;
    assert!(
        me.iter()
            .any(|(role, text, _)| role == "user" && text == "late but here")
    );
    let events = b.drain();
    assert_eq!(loop_end(&events), Some(("reply_skip".to_string(), 2)));
    assert_eq!(announce(&events).map(|a| a.0), Some("skipped".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_target_gives_an_error_result_and_no_exchange() {
    let work = json!([{ "when": { "step": "message" }, "error": "work exploded on {{text}}" }]);
    let mut b = bench(json!([]), work);
    b.session(ME, None).await;
    b.session(WORK, None).await;
    let r = b
        .send_as(ME, json!({ "sessionKey": WORK, "message": "boom" }))
        .await;
    assert_eq!(r["status"], "error", "{r}");
    assert_eq!(r["error"], "work exploded on boom");
    b.engine.idle().await;
    let runs = b.engine.runs_of(&key(WORK), 10).await.unwrap();
    assert_eq!(
        runs.len(),
        1,
        "no ping-pong and no announce after a failure"
    );
    assert_eq!(runs[0].status.as_str(), "error");
    assert_eq!(runs[0].error.as_deref(), Some("work exploded on boom"));
    // The inbound message stays, and the failure is visible in the transcript.
    let stored = b.engine.store().get(&key(WORK)).await.unwrap().unwrap();
    let rows = b
        .engine
        .store()
        .tail(&stored.entry.session_id, 10, true)
        .await
        .unwrap();
    let last = &rows.last().unwrap().line["message"];
    assert_eq!(last["stopReason"], "error");
    assert_eq!(last["errorMessage"], "work exploded on boom");
    let events = b.drain();
    assert!(events.iter().any(
        |e| matches!(e, EngineEvent::ExchangeEnded { reason, .. } if reason.as_str() == "error")
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_skip_stops_the_loop_but_reply_skip_with_a_dot_does_not() {
    let main = json!([{ "when": { "step": "reply" }, "reply": "main {{round}}" }]);
    // The target says "REPLY_SKIP." in round 3 (not a stop) and "  REPLY_SKIP\n" in round 5.
    let work = json!([
        { "when": { "step": "message" }, "reply": "first" },
        { "when": { "step": "reply", "round": 3 }, "reply": "REPLY_SKIP." },
        { "when": { "step": "reply", "round": 5 }, "reply": "  REPLY_SKIP\n" },
        { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
    ]);
    let mut b = bench(main, work);
    b.session(ME, None).await;
    b.session(WORK, None).await;
    b.send_as(ME, json!({ "sessionKey": WORK, "message": "go" }))
        .await;
    b.engine.idle().await;
    assert_eq!(b.assistant_texts(ME).await, ["main 2", "main 4"]);
    let events = b.drain();
    assert_eq!(loop_end(&events), Some(("reply_skip".to_string(), 5)));
    let rounds: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ExchangeRound { round, .. } => Some(*round),
            _ => None,
        })
        .collect();
    assert_eq!(rounds, [1, 2, 3, 4, 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_sending_to_itself_gets_its_reply_but_no_loop() {
    let main = json!([
        { "when": { "step": "message" }, "reply": "self says {{text}}" },
        { "when": { "step": "reply" }, "reply": "never" },
    ]);
    let mut b = bench(main, json!([]));
    b.session(ME, None).await;
    let r = b
        .send_as(ME, json!({ "sessionKey": ME, "message": "hi me" }))
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["reply"], "self says hi me");
    b.engine.idle().await;
    assert!(!b.assistant_texts(ME).await.contains(&"never".to_string()));
    assert_eq!(loop_end(&b.drain()).map(|l| l.0), Some("self".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_goes_to_the_targets_channel_through_the_outbox() {
    let main = json!([{ "when": { "step": "reply" }, "reply": "REPLY_SKIP" }]);
    let work = json!([
        { "when": { "step": "message" }, "reply": "done" },
        { "when": { "step": "announce" }, "reply": "Exchange over: {{text}}" },
    ]);
    let mut b = bench(main, work);
    let group = "agent:work:discord:group:ops";
    b.session(ME, None).await;
    b.session(group, Some("discord")).await;
    b.send_as(ME, json!({ "sessionKey": group, "message": "status?" }))
        .await;
    b.engine.idle().await;
    let events = b.drain();
    let (outcome, text, channel) = announce(&events).expect("an announce");
    assert_eq!(outcome, "delivered");
    assert_eq!(
        text.as_deref(),
        Some("Exchange over: Agent-to-agent announce step.")
    );
    assert_eq!(channel.as_deref(), Some("discord"));
    let outbox = b.engine.outbox(&key(group)).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (
            outbox[0].kind.as_str(),
            outbox[0].channel.as_str(),
            outbox[0].to.as_str()
        ),
        ("announce", "discord", "group:ops")
    );
    assert_eq!(outbox[0].status.as_str(), "queued");
    // The announce reply is in the target's transcript as well.
    assert!(b.assistant_texts(group).await.contains(&outbox[0].text));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_exchange_step_is_a_run_recorded_with_its_step() {
    let main = json!([{ "when": { "step": "reply" }, "reply": "main answers" }]);
    let work = json!([
        { "when": { "step": "message" }, "reply": "round one" },
        { "when": { "step": "reply" }, "reply": "REPLY_SKIP" },
        { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
    ]);
    let b = bench(main, work);
    b.session(ME, None).await;
    b.session(WORK, None).await;
    b.send_as(ME, json!({ "sessionKey": WORK, "message": "orig" }))
        .await;
    b.engine.idle().await;
    assert_eq!(b.assistant_texts(ME).await, ["main answers"]);
    let runs = b.engine.runs_of(&key(WORK), 10).await.unwrap();
    let steps: Vec<(&str, u32)> = runs
        .iter()
        .rev()
        .map(|r| (r.step.as_str(), r.round))
        .collect();
    assert_eq!(steps, [("message", 1), ("reply", 3), ("announce", 4)]);
    // The announce message itself is not recorded, only the reply (as in OpenClaw).
    assert!(
        !b.messages(WORK)
            .await
            .iter()
            .any(|m| m.1 == "Agent-to-agent announce step.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolution_errors_use_openclaws_messages() {
    let b = bench(json!([]), json!([]));
    b.session(ME, None).await;
    b.session(WORK, None).await;
    let err = |r: &Value| {
        (
            r["status"].as_str().unwrap().to_string(),
            r["error"].as_str().unwrap().to_string(),
        )
    };

    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": WORK, "label": "x", "message": "m" }),
        )
        .await;
    assert_eq!(
        err(&r),
        (
            "error".into(),
            "Provide either sessionKey or label (not both).".into()
        )
    );
    assert!(r["runId"].as_str().is_some_and(|s| s.len() == 36));

    let r = b.send_as(ME, json!({ "message": "m" })).await;
    assert_eq!(
        err(&r),
        (
            "error".into(),
            "Either sessionKey or label is required".into()
        )
    );

    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": "agent:work:doesnotexist", "message": "m" }),
        )
        .await;
    assert_eq!(
        err(&r),
        (
            "error".into(),
            "No session found: agent:work:doesnotexist".into()
        )
    );
    assert_eq!(r["sessionKey"], "agent:work:doesnotexist");

    let r = b
        .send_as(ME, json!({ "sessionKey": "c746cfee", "message": "m" }))
        .await;
    assert_eq!(
        err(&r),
        (
            "error".into(),
            "Session not found: c746cfee (use the full sessionKey from sessions_list)".into()
        )
    );

    let r = b
        .send_as(ME, json!({ "label": "nobody", "message": "m" }))
        .await;
    assert_eq!(
        err(&r),
        ("error".into(), "No session found with label: nobody".into())
    );

    let r = b
        .send_as(ME, json!({ "agentId": "ghost", "message": "m" }))
        .await;
    assert_eq!(err(&r), ("error".into(), "agent not found: ghost".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_session_id_and_agent_id_all_reach_the_target() {
    let work = json!([{ "when": { "step": "message" }, "reply": "got {{text}}" }]);
    let b = bench_with(
        json!([]),
        work,
        json!({ "agentToAgent": { "maxPingPongTurns": 0 } }),
    );
    b.session(ME, None).await;
    let init = SessionInit {
        label: Some("the-work-one".into()),
        ..SessionInit::default()
    };
    b.engine.store().ensure(&key(WORK), init).await.unwrap();
    let r = b
        .send_as(
            ME,
            json!({ "label": "the-work-one", "message": "by label" }),
        )
        .await;
    assert_eq!(
        (r["status"].as_str(), r["reply"].as_str()),
        (Some("ok"), Some("got by label"))
    );
    assert_eq!(r["sessionKey"], WORK);

    let sid = b
        .engine
        .store()
        .get(&key(WORK))
        .await
        .unwrap()
        .unwrap()
        .entry
        .session_id;
    let r = b
        .send_as(ME, json!({ "sessionKey": sid, "message": "by id" }))
        .await;
    assert_eq!(r["reply"], "got by id");

    // agentId alone: that agent's main session, created on first use.
    let r = b
        .send_as(ME, json!({ "agentId": "work", "message": "by agent" }))
        .await;
    assert_eq!(r["sessionKey"], "agent:work:main");
    assert_eq!(r["reply"], "got by agent");
    b.engine.idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_and_agent_to_agent_gates_refuse_with_forbidden() {
    // Default visibility (tree): another agent's session is not visible.
    let config: Config = serde_json::from_value(json!({})).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::common::open_engine(dir.path(), config).unwrap();
    for k in [ME, WORK] {
        engine
            .store()
            .ensure(&key(k), SessionInit::default())
            .await
            .unwrap();
    }
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    let send = |params: Value| {
        let call = ToolCall {
            tool: "sessions_send".into(),
            params,
            requester: ME.into(),
            sandboxed: false,
        };
        let api = api.clone();
        async move { api.call_tool(call).await.unwrap().result }
    };
    let r = send(json!({ "sessionKey": WORK, "message": "m" })).await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Session send visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access."
    );
    assert_eq!(r["sessionKey"], WORK);
    // Label lookup under another agent with agent-to-agent off.
    let r = send(json!({ "label": "x", "agentId": "work", "message": "m" })).await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_input_error_naming_the_parameter() {
    let b = bench(json!([]), json!([]));
    b.session(ME, None).await;
    for (params, needle) in [
        (json!({ "sessionKey": WORK }), "message required"),
        (
            json!({ "sessionKey": WORK, "message": "m", "timeoutSeconds": -1 }),
            "timeoutSeconds must be a number from 0 to 3600 seconds",
        ),
        (
            json!({ "sessionKey": WORK, "message": "m", "timeoutSeconds": "soon" }),
            "timeoutSeconds must be a number",
        ),
    ] {
        let err = b.try_send_as(ME, false, params).await.unwrap_err();
        assert!(matches!(err, ApiError::BadInput(_)), "{err:?}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    }
    // Nothing was created or sent.
    assert!(b.engine.store().get(&key(WORK)).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_into_a_session_whose_policy_denies_is_refused_and_says_how_to_change_it() {
    let work = json!([{ "when": { "step": "message" }, "reply": "should not run" }]);
    let b = bench(json!([]), work);
    b.session(ME, None).await;
    b.session(WORK, None).await;
    b.api
        .patch(PatchRequest {
            key: WORK.into(),
            send_policy: Some(PolicySetting::Deny),
        })
        .await
        .unwrap();
    let r = b
        .send_as(ME, json!({ "sessionKey": WORK, "message": "m" }))
        .await;
    assert_eq!(r["status"], "forbidden", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.starts_with("send blocked by session policy"),
        "{error}"
    );
    assert!(
        error.contains("/send on") && error.contains("--send-policy allow"),
        "{error}"
    );
    b.engine.idle().await;
    assert!(b.engine.runs_of(&key(WORK), 5).await.unwrap().is_empty());
    assert!(
        b.messages(WORK).await.is_empty(),
        "nothing was written into the denied session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_turned_off_mid_exchange_stops_the_loop_and_blocks_the_announce() {
    let main = json!([{ "when": { "step": "reply" }, "reply": "main {{round}}" }]);
    let work = json!([
        { "when": { "step": "message" }, "delayMs": 1500, "reply": "slow first" },
        { "when": { "step": "reply" }, "reply": "work {{round}}" },
        { "when": { "step": "announce" }, "reply": "announcing" },
    ]);
    let mut b = bench(main, work);
    let group = "agent:work:telegram:group:g1";
    b.session(ME, None).await;
    b.session(group, Some("telegram")).await;
    let r = b
        .send_as(
            ME,
            json!({ "sessionKey": group, "message": "m", "timeoutSeconds": 0 }),
        )
        .await;
    assert_eq!(r["status"], "accepted");
    // The owner turns sending off while the target is still thinking.
    let received = b
        .api
        .send(SendRequest {
            key: group.into(),
            text: "/send off".into(),
            from: Sender::owner(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    assert_eq!(
        received.command_reply.as_deref(),
        Some("⚙️ Send policy set to off.")
    );
    b.engine.idle().await;
    let events = b.drain();
    // Round 2 (main) runs; round 3 would go into the denied target.
    let (reason, rounds) = loop_end(&events).unwrap();
    assert_eq!((reason.as_str(), rounds), ("policy", 2));
    assert_eq!(announce(&events).map(|a| a.0), Some("blocked".to_string()));
    assert!(b.engine.outbox(&key(group)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_forwarding_in_a_cycle_are_stopped_by_the_chain_limit() {
    let forward = |to: &str| {
        json!([{ "when": { "step": "message" },
                 "tools": [{ "name": "sessions_send", "args": { "sessionKey": to, "message": "pass it on", "timeoutSeconds": 0 } }],
                 "reply": "forwarded: {{result}}" }])
    };
    let config = json!({
        "session": { "agentToAgent": { "maxPingPongTurns": 0, "maxChainHops": 4 } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "a", "default": true, "model": "scripted", "script": forward("agent:b:main") },
            { "id": "b", "model": "scripted", "script": forward("agent:c:main") },
            { "id": "c", "model": "scripted", "script": forward("agent:a:main") },
        ] },
    });
    let config: Config = serde_json::from_value(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::common::open_engine(dir.path(), config).unwrap();
    let mut events = engine.events().subscribe();
    for k in ["agent:a:main", "agent:b:main", "agent:c:main"] {
        engine
            .store()
            .ensure(&key(k), SessionInit::default())
            .await
            .unwrap();
    }
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    api.send(SendRequest {
        key: "agent:a:main".into(),
        text: "start the chain".into(),
        from: Sender::default(),
        idempotency_key: None,
    })
    .await
    .unwrap();
    engine.idle().await;
    let mut stops = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::ChainStopped {
            hops,
            max_hops,
            requester,
            target,
            ..
        } = e
        {
            stops.push((hops, max_hops, requester, target));
        }
    }
    // a→b (1), b→c (2), c→a (3), a→b (4), and b's send to c would be the fifth.
    assert_eq!(
        stops,
        [(5, 4, "agent:b:main".to_string(), "agent:c:main".to_string())]
    );
    let c_messages = engine
        .runs_of(&key("agent:c:main"), 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.step.as_str() == "message")
        .count();
    assert_eq!(
        c_messages, 1,
        "c answered once: the cycle did not go round again"
    );
    // b's refused send is in its transcript as a tool result saying why.
    let b_session = engine
        .store()
        .get(&key("agent:b:main"))
        .await
        .unwrap()
        .unwrap();
    let rows = engine
        .store()
        .tail(&b_session.entry.session_id, 100, true)
        .await
        .unwrap();
    let refused = rows
        .iter()
        .filter(|r| r.line["message"]["role"] == "toolResult")
        .filter_map(|r| r.line["message"]["details"]["error"].as_str())
        .find(|e| e.contains("chain limit"));
    assert!(refused.is_some_and(|e| e.contains("maxChainHops=4")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_events_arrive_in_the_order_things_happened() {
    let (m, w) = chatty();
    let mut b = bench_with(m, w, json!({ "agentToAgent": { "maxPingPongTurns": 2 } }));
    b.session(ME, None).await;
    b.session(WORK, None).await;
    b.send_as(ME, json!({ "sessionKey": WORK, "message": "go" }))
        .await;
    b.engine.idle().await;
    let names: Vec<String> = b
        .drain()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::ExchangeStarted { .. } => Some("started".to_string()),
            EngineEvent::ExchangeRound { round, .. } => Some(format!("round {round}")),
            EngineEvent::ExchangeLoopEnded { .. } => Some("loop ended".to_string()),
            EngineEvent::Announce { .. } => Some("announce".to_string()),
            EngineEvent::ExchangeEnded { .. } => Some("ended".to_string()),
            EngineEvent::RunEnded { step, .. } if step.as_str() == "announce" => {
                Some("announce run".to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "started",
            "round 1",
            "round 2",
            "round 3",
            "loop ended",
            "announce run",
            "announce",
            "ended"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_session_cannot_reach_beyond_what_it_spawned() {
    let b = bench(json!([]), json!([]));
    b.session(ME, None).await;
    b.session(WORK, None).await;
    b.session("agent:main:other", None).await;
    let send = |params: Value| {
        let b = &b;
        async move { b.try_send_as(ME, true, params).await.unwrap() }
    };
    let r = send(json!({ "label": "x", "agentId": "work", "message": "m" })).await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Sandboxed sessions_send label lookup is limited to this agent"
    );
    let r = send(json!({ "sessionKey": "agent:main:other", "message": "m" })).await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Session not visible from this sandboxed agent session: agent:main:other"
    );
    let r = send(json!({ "label": "nobody", "message": "m" })).await;
    assert_eq!(r["status"], "forbidden");
    assert_eq!(
        r["error"],
        "Session not visible from this sandboxed agent session."
    );
}
