//! `OpenClawApi` against frames captured from a real OpenClaw 2026.9.6 gateway
//! (tests/fixtures/openclaw-2026.9.6/console/, see its README): a fake `Rpc` answers each
//! request with the captured answer to the very same request, so every test also checks
//! that we send exactly the params the real gateway accepted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_protocol::{ErrorShape, HelloOk};
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_types::api::{
    ApiError, EngineEvent, KeyPurpose, LineRole, LinkState, PatchRequest, PolicySetting,
    SendRequest, Sender, SessionKind, SessionsApi, SessionsQuery, StreamItem, ToolCall,
    TranscriptQuery,
};
use tokio::sync::{broadcast, watch};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6/console"
);
/// The same requests answered by OpenClaw 2026.5.28, where its answers differ.
const LEGACY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6/legacy-2026.5.28"
);

fn jsonl(name: &str) -> Vec<Value> {
    jsonl_in(FIXTURES, name)
}

fn jsonl_in(dir: &str, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

struct Captured {
    method: String,
    params: Value,
    answer: Result<Value, ErrorShape>,
    used: bool,
}

/// A gateway that answers from the capture: the first unused answer to an identical
/// request (the last one again once all are used). `idempotencyKey` must be a UUID and is
/// compared as `<uuid>`, as the capture recorded it.
struct FakeGateway {
    captured: Mutex<Vec<Captured>>,
    /// Every request as sent (idempotency keys as they were).
    log: Mutex<Vec<(String, Value)>>,
    /// Requests the capture has no answer for.
    unmatched: Mutex<Vec<(String, Value)>>,
    events: broadcast::Sender<WireEvent>,
    state: watch::Sender<LinkState>,
}

impl FakeGateway {
    fn new() -> Arc<FakeGateway> {
        FakeGateway::answering_from(FIXTURES)
    }

    fn answering_from(dir: &str) -> Arc<FakeGateway> {
        let captured = jsonl_in(dir, "rpc.jsonl")
            .into_iter()
            .map(|e| Captured {
                method: e["method"].as_str().unwrap().to_string(),
                params: e["params"].clone(),
                answer: if e["ok"] == json!(true) {
                    Ok(e["payload"].clone())
                } else {
                    Err(serde_json::from_value(e["error"].clone()).unwrap())
                },
                used: false,
            })
            .collect();
        Arc::new(FakeGateway {
            captured: Mutex::new(captured),
            log: Mutex::new(Vec::new()),
            unmatched: Mutex::new(Vec::new()),
            events: broadcast::channel(1024).0,
            state: watch::channel(LinkState::Connecting { attempt: 1 }).0,
        })
    }

    fn requests(&self, method: &str) -> Vec<Value> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, p)| p.clone())
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }

    fn assert_all_answered(&self) {
        let u = self.unmatched.lock().unwrap();
        assert!(
            u.is_empty(),
            "requests the real gateway was never sent: {u:?}"
        );
    }

    fn push(&self, event: &Value) {
        self.events
            .send(WireEvent::Event {
                event: event["event"].as_str().unwrap().to_string(),
                payload: event["payload"].clone(),
            })
            .unwrap();
    }
}

#[async_trait]
impl Rpc for FakeGateway {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.log
            .lock()
            .unwrap()
            .push((method.to_string(), params.clone()));
        let mut shown = params.clone();
        if let Some(k) = shown.get_mut("idempotencyKey") {
            let raw = k.as_str().expect("idempotencyKey is a string");
            uuid::Uuid::parse_str(raw).expect("idempotencyKey is a UUID");
            *k = json!("<uuid>");
        }
        let mut captured = self.captured.lock().unwrap();
        let same = |c: &Captured| c.method == method && c.params == shown;
        let hit = match captured.iter().position(|c| same(c) && !c.used) {
            Some(i) => Some(i),
            None => captured.iter().rposition(same),
        };
        let Some(i) = hit else {
            self.unmatched
                .lock()
                .unwrap()
                .push((method.to_string(), params));
            return Err(RpcError::Refused(ErrorShape {
                code: "INVALID_REQUEST".into(),
                message: format!("no captured answer for {method}"),
                extra: Default::default(),
            }));
        };
        captured[i].used = true;
        captured[i].answer.clone().map_err(RpcError::Refused)
    }

    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request(method, params).await
    }

    fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.events.subscribe()
    }

    fn hello(&self) -> Option<HelloOk> {
        None
    }

    fn state(&self) -> watch::Receiver<LinkState> {
        self.state.subscribe()
    }

    fn target(&self) -> String {
        "ws://127.0.0.1:18789".into()
    }
}

fn api() -> (Arc<FakeGateway>, OpenClawApi) {
    let gw = FakeGateway::new();
    let api = OpenClawApi::new(gw.clone());
    (gw, api)
}

const T: &str = "agent:main:octest";
/// The run the captured `chat.send` started.
fn captured_run_id() -> String {
    jsonl("rpc.jsonl")
        .into_iter()
        .find(|e| e["method"] == "chat.send" && e["ok"] == json!(true))
        .unwrap()["payload"]["runId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// How many messages octest held when the capture read it (before its own send).
fn history_total() -> i64 {
    jsonl("rpc.jsonl")
        .into_iter()
        .find(|e| e["method"] == "chat.history" && e["params"]["limit"] == 100)
        .unwrap()["payload"]["totalMessages"]
        .as_i64()
        .unwrap()
}

fn owner_says(key: &str, text: &str) -> SendRequest {
    SendRequest {
        key: key.into(),
        text: text.into(),
        from: Sender::owner(),
        idempotency_key: None,
    }
}

#[tokio::test]
async fn sessions_list_rows_map_key_kind_channel_names_and_policy() {
    let (gw, api) = api();
    let page = api
        .sessions(SessionsQuery {
            limit: 50,
            ..SessionsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 4);
    assert_eq!(page.matching, None);
    let keys: Vec<_> = page.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "agent:work:telegram:group:42",
            "agent:main:octg",
            "agent:main:cron:nightly",
            T
        ]
    );
    let group = &page.rows[0];
    assert_eq!(group.kind, SessionKind::Group);
    assert_eq!(group.agent_id, "work");
    assert_eq!(group.channel, "telegram");
    assert_eq!(group.name, "ops room");
    assert_eq!(group.label.as_deref(), Some("ops room"));
    assert_eq!(
        (group.policy.policy.as_str(), group.policy.is_override()),
        ("allow", true)
    );
    let tg = &page.rows[1];
    assert_eq!(tg.channel, "telegram");
    assert_eq!(tg.name, "octg");
    assert_eq!(
        (tg.policy.policy.as_str(), tg.policy.is_override()),
        ("deny", true)
    );
    // A key shaped `cron:` is a cron session, whatever the row's chat kind says.
    assert_eq!(page.rows[2].kind, SessionKind::Cron);
    let t = &page.rows[3];
    assert_eq!(t.kind, SessionKind::Other);
    assert_eq!(t.session_id, "f744eb6e-ac3e-4c42-bc9a-b746ca705c05");
    assert!(t.updated_at > 0);
    // No override: the gateway's config decides, and OpenClaw does not say how.
    assert_eq!(t.policy.policy.as_str(), "inherit");
    assert!(!t.policy.is_override());
    assert_eq!(t.policy.summary, "inherit (gateway default)");
    // What OpenClaw did not report is shown as not known.
    assert_eq!(t.channel, "unknown");
    assert_eq!(t.name, T);
    assert_eq!(
        gw.requests("sessions.list"),
        [json!({"limit": 50, "offset": 0})]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn a_search_counts_its_matches_and_the_whole_store() {
    let (gw, api) = api();
    let page = api
        .sessions(SessionsQuery {
            text: "octest".into(),
            limit: 50,
            count: true,
            ..SessionsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.matching, Some(1));
    assert_eq!(page.total, 4);
    assert_eq!(
        gw.requests("sessions.list"),
        [
            json!({"limit": 50, "offset": 0, "search": "octest"}),
            json!({"limit": 1})
        ]
    );
    // Kinds OpenClaw has no filter for are applied to the page.
    let crons = api
        .sessions(SessionsQuery {
            kinds: vec![SessionKind::Cron],
            limit: 50,
            ..SessionsQuery::default()
        })
        .await
        .unwrap();
    let keys: Vec<_> = crons.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["agent:main:cron:nightly"]);
    gw.assert_all_answered();
}

#[tokio::test]
async fn status_names_the_gateway_and_its_session_count() {
    let (gw, api) = api();
    let s = api.status().await.unwrap();
    assert_eq!(s.sessions, 4);
    assert!(
        s.attached.starts_with("ws://127.0.0.1:18789"),
        "{}",
        s.attached
    );
    let link = api.link().expect("a remote API has a link");
    assert_eq!(link.target, "ws://127.0.0.1:18789");
    gw.assert_all_answered();
}

#[tokio::test]
async fn one_session_is_described_and_a_missing_one_is_none() {
    let (gw, api) = api();
    let d = api.session(T).await.unwrap().expect("octest exists");
    assert_eq!(d.row.key, T);
    assert_eq!(d.entry["sessionId"], "f744eb6e-ac3e-4c42-bc9a-b746ca705c05");
    assert!(api.session("agent:main:nosuch").await.unwrap().is_none());
    gw.assert_all_answered();
}

#[tokio::test]
async fn keys_resolve_to_openclaw_canonical_form_and_session_ids_are_found() {
    let (gw, api) = api();
    let r = api
        .resolve_key("octest", KeyPurpose::Existing)
        .await
        .unwrap();
    assert_eq!((r.key.as_str(), r.exists), (T, true));
    // No session has that id as its key; the search by session id finds octest.
    let by_id = api
        .resolve_key("f744eb6e-ac3e-4c42-bc9a-b746ca705c05", KeyPurpose::Existing)
        .await
        .unwrap();
    assert_eq!((by_id.key.as_str(), by_id.exists), (T, true));
    let new = api
        .resolve_key("nosuch", KeyPurpose::Inbound)
        .await
        .unwrap();
    assert_eq!((new.key.as_str(), new.exists), ("agent:main:nosuch", false));
    for word in ["current", "unknown"] {
        let e = api
            .resolve_key(word, KeyPurpose::Inbound)
            .await
            .unwrap_err();
        assert!(matches!(e, ApiError::BadInput(_)), "{e:?}");
    }
    let e = api
        .resolve_key("agent:only", KeyPurpose::Inbound)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::BadInput(_)), "{e:?}");
    gw.assert_all_answered();
}

#[tokio::test]
async fn transcript_lines_come_from_chat_history_numbered_as_openclaw_numbers_them() {
    let (gw, api) = api();
    let page = api
        .transcript(TranscriptQuery {
            key: T.into(),
            limit: 100,
            tools: true,
            ..TranscriptQuery::default()
        })
        .await
        .unwrap();
    assert!(page.exists);
    let total = history_total();
    assert!(total >= 10, "the capture has a conversation: {total}");
    assert_eq!(page.last_seq, total);
    let seqs: Vec<i64> = page.lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    let first = &page.lines[0];
    assert_eq!(first.role, LineRole::User);
    assert_eq!(first.text, "SAY hello from octest");
    assert_eq!(first.from, "owner");
    assert!(first.timestamp > 0);
    assert_eq!(first.message, None);
    let reply = &page.lines[1];
    assert_eq!(
        (reply.role, reply.text.as_str(), reply.from.as_str()),
        (LineRole::Assistant, "hello from octest", "agent")
    );
    assert_eq!(
        gw.requests("chat.history"),
        [json!({"sessionKey": T, "limit": 100})]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn older_lines_are_paged_back_with_openclaws_offset_from_the_newest() {
    let (gw, api) = api();
    let page = api
        .transcript(TranscriptQuery {
            key: T.into(),
            before: Some(history_total() - 2),
            limit: 3,
            tools: true,
            ..TranscriptQuery::default()
        })
        .await
        .unwrap();
    let seqs: Vec<i64> = page.lines.iter().map(|l| l.seq).collect();
    let t = history_total();
    assert_eq!(seqs, [t - 5, t - 4, t - 3]);
    assert!(page.lines.iter().all(|l| !l.text.is_empty()));
    assert_eq!(
        gw.requests("chat.history"),
        [
            json!({"sessionKey": T, "limit": 1}),
            json!({"sessionKey": T, "limit": 3, "offset": 3})
        ]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn a_missing_session_has_no_transcript() {
    let (gw, api) = api();
    let page = api
        .transcript(TranscriptQuery {
            key: "agent:main:nosuch".into(),
            limit: 100,
            ..TranscriptQuery::default()
        })
        .await
        .unwrap();
    assert!(!page.exists);
    assert!(page.lines.is_empty());
    gw.assert_all_answered();
}

#[tokio::test]
async fn a_message_goes_out_by_chat_send_and_its_run_is_waited_for() {
    let (gw, api) = api();
    let receipt = api
        .send(SendRequest {
            key: "octest".into(),
            text: "SAY live reply".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    let run_id = captured_run_id();
    assert_eq!(receipt.key, T);
    assert!(!receipt.created);
    assert_eq!(receipt.run_id.as_deref(), Some(run_id.as_str()));
    assert_eq!(receipt.command_reply, None);
    let sent = gw.requests("chat.send");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["sessionKey"], T);
    assert_eq!(sent[0]["message"], "SAY live reply");

    let done = api
        .wait_run(&run_id, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(done.status.as_str(), "ok");
    assert_eq!(done.reply, "live reply");
    assert!(
        api.wait_work(receipt.work, Duration::from_secs(30))
            .await
            .unwrap()
    );
    assert!(api.still_running(receipt.work).await.unwrap().is_empty());
    // Once the run ended, what still runs of its work is read off the exchange book: the
    // run is not asked about again.
    assert_eq!(
        gw.requests("agent.wait"),
        [
            json!({"runId": run_id, "timeoutMs": 30000}),
            json!({"runId": run_id, "timeoutMs": 30000}),
        ]
    );
    // The work's end is read off the session's record: once when the run ended (the
    // sessions its tool calls reached), once more before the work is called over (a second
    // hop it sent on to). The capture, made before, has no answer for either; answered as
    // failures, the book stays as it was and the run's end ends the work.
    let read = (
        "chat.history".to_string(),
        json!({"sessionKey": T, "limit": 200}),
    );
    assert_eq!(
        std::mem::take(&mut *gw.unmatched.lock().unwrap()),
        [read.clone(), read]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn every_send_carries_its_own_idempotency_key() {
    let (gw, api) = api();
    for _ in 0..2 {
        api.send(SendRequest {
            key: T.into(),
            text: "SAY live reply".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    }
    let sent = gw.requests("chat.send");
    assert_eq!(sent.len(), 2);
    assert_ne!(sent[0]["idempotencyKey"], sent[1]["idempotencyKey"]);
}

#[tokio::test]
async fn a_wait_that_runs_out_reports_the_run_as_still_running() {
    let (gw, api) = api();
    let r = api
        .wait_run(
            "00000000-0000-4000-8000-000000000000",
            Duration::from_millis(100),
        )
        .await
        .unwrap();
    assert_eq!(r.status.as_str(), "running");
    gw.assert_all_answered();
}

#[tokio::test]
async fn a_send_the_gateway_refuses_by_policy_is_reported_not_retried() {
    let (gw, api) = api();
    // The capture sent this message while octest was denied (`sessions.patch deny`).
    api.send(owner_says(T, "SAY live reply")).await.unwrap();
    let e = api.send(owner_says(T, "SAY blocked")).await.unwrap_err();
    assert_eq!(
        e,
        ApiError::BadInput("send blocked by session policy".into())
    );
    assert_eq!(gw.requests("chat.send").len(), 2);
    gw.assert_all_answered();
}

#[tokio::test]
async fn send_off_on_inherit_patch_the_exact_send_policy() {
    let (gw, api) = api();
    let off = api.send(owner_says(T, "/send off")).await.unwrap();
    assert_eq!(
        off.command_reply.as_deref(),
        Some("⚙️ Send policy set to off.")
    );
    assert_eq!(off.run_id, None);
    let inherit = api.send(owner_says(T, "/send inherit")).await.unwrap();
    assert_eq!(
        inherit.command_reply.as_deref(),
        Some("⚙️ Send policy set to inherit.")
    );
    let on = api
        .patch(PatchRequest {
            key: T.into(),
            send_policy: Some(PolicySetting::Allow),
        })
        .await
        .unwrap();
    assert_eq!(on.send_policy.map(|p| p.as_str()), Some("allow"));
    assert!(on.effective.is_override());
    let back = api
        .patch(PatchRequest {
            key: T.into(),
            send_policy: Some(PolicySetting::Inherit),
        })
        .await
        .unwrap();
    assert_eq!(back.send_policy, None);
    assert_eq!(back.effective.policy.as_str(), "inherit");
    // `null` itself, not an absent field: OpenClaw removes the override only for null.
    assert_eq!(
        gw.requests("sessions.patch"),
        [
            json!({"key": T, "sendPolicy": "deny"}),
            json!({"key": T, "sendPolicy": null}),
            json!({"key": T, "sendPolicy": "allow"}),
            json!({"key": T, "sendPolicy": null})
        ]
    );
    // Commands are never sent as chat: OpenClaw would treat them itself.
    assert!(gw.requests("chat.send").is_empty());
    gw.assert_all_answered();
}

#[tokio::test]
async fn delete_says_whether_there_was_a_session() {
    let (gw, api) = api();
    assert!(api.delete("agent:main:cron:nightly").await.unwrap());
    assert!(!api.delete("agent:main:cron:nightly").await.unwrap());
    gw.assert_all_answered();
}

#[tokio::test]
async fn agents_come_from_agents_list_with_the_default_marked() {
    let (gw, api) = api();
    let agents = api.agents().await.unwrap();
    let seen: Vec<_> = agents
        .iter()
        .map(|a| (a.id.as_str(), a.model.as_str(), a.is_default))
        .collect();
    assert_eq!(
        seen,
        [
            ("main", "fake/fake-1", true),
            ("work", "fake/fake-1", false)
        ]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn what_openclaw_does_not_expose_is_unavailable_not_faked() {
    let (gw, api) = api();
    let e = api
        .call_tool(ToolCall {
            tool: "sessions_send".into(),
            params: json!({"sessionKey": T, "message": "hi"}),
            requester: "main".into(),
            sandboxed: false,
        })
        .await
        .unwrap_err();
    match e {
        ApiError::Unavailable(m) => {
            assert!(m.contains("not available on an OpenClaw gateway"), "{m}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // Nothing was asked of the gateway for it.
    assert!(gw.methods().is_empty(), "{:?}", gw.methods());
}

/// The legacy capture's session and its run.
fn legacy_session() -> (String, String) {
    let rpc = jsonl_in(LEGACY, "rpc.jsonl");
    let send = rpc.iter().find(|e| e["method"] == "chat.send").unwrap();
    (
        send["params"]["sessionKey"].as_str().unwrap().to_string(),
        send["payload"]["runId"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn on_2026_5_28_a_runs_reply_is_read_back_when_agent_wait_has_none() {
    let gw = FakeGateway::answering_from(LEGACY);
    let api = OpenClawApi::new(gw.clone());
    let (key, run_id) = legacy_session();
    let receipt = api
        .send(SendRequest {
            key: key.clone(),
            text: "SAY legacy reply".into(),
            from: Sender::default(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    assert_eq!(receipt.run_id.as_deref(), Some(run_id.as_str()));
    let done = api
        .wait_run(&run_id, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        (done.status.as_str(), done.reply.as_str()),
        ("ok", "legacy reply")
    );
    assert_eq!(
        gw.requests("chat.history"),
        [json!({"sessionKey": key, "limit": 20})]
    );
    gw.assert_all_answered();
}

#[tokio::test]
async fn on_2026_5_28_older_lines_are_paged_without_offset() {
    let gw = FakeGateway::answering_from(LEGACY);
    let api = OpenClawApi::new(gw.clone());
    let (key, _) = legacy_session();
    let older = || TranscriptQuery {
        key: key.clone(),
        before: Some(6),
        limit: 3,
        tools: true,
        ..TranscriptQuery::default()
    };
    let page = api.transcript(older()).await.unwrap();
    let seqs: Vec<i64> = page.lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert!(page.exists);
    // The whole transcript's newest line, though this page ends before it.
    assert_eq!(page.last_seq, 8);
    // The refusal of `offset` is remembered: the second page asks without it at once.
    let again = api.transcript(older()).await.unwrap();
    assert_eq!(again.lines, page.lines);
    assert_eq!(
        gw.requests("chat.history"),
        [
            json!({"sessionKey": key, "limit": 1}),
            json!({"sessionKey": key, "limit": 3, "offset": 3}),
            json!({"sessionKey": key, "limit": 6}),
            json!({"sessionKey": key, "limit": 1}),
            json!({"sessionKey": key, "limit": 6}),
        ]
    );
}

async fn next_event(s: &mut switchboard_types::api::EventStream) -> StreamItem {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("an event within 10 s")
}

/// Waits until the pump has asked for `n` requests of `method`.
async fn requested(gw: &FakeGateway, method: &str, n: usize) {
    for _ in 0..1000 {
        if gw.requests(method).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{method} was not requested {n} times: {:?}", gw.methods());
}

#[tokio::test]
async fn gateway_events_become_engine_events_in_order_numbered_without_gaps() {
    let (gw, api) = api();
    let mut stream = api.subscribe();
    let frames = jsonl("events.jsonl");
    for f in &frames {
        gw.push(f);
    }
    requested(&gw, "sessions.subscribe", 1).await;
    // Everything but the session-row refreshes, in the order the gateway sent it.
    let keyed_changes = frames
        .iter()
        .filter(|f| f["event"] == "sessions.changed" && f["payload"]["sessionKey"].is_string())
        .count();
    let mut seqs = Vec::new();
    let mut updates = 0;
    let mut story = Vec::new();
    let run_id = captured_run_id();
    while updates + story.len() < keyed_changes + 6 {
        let StreamItem::Event(e) = next_event(&mut stream).await else {
            panic!("a gap or an end in an unbroken stream");
        };
        seqs.push(e.seq);
        match e.event {
            EngineEvent::SessionUpdated { .. } => updates += 1,
            EngineEvent::SessionCreated { key, session_id } => {
                assert!(!session_id.is_empty());
                story.push(format!("created {key}"))
            }
            EngineEvent::SessionDeleted { key } => story.push(format!("deleted {key}")),
            EngineEvent::MessageAppended { key, seq, line, .. } => story.push(format!(
                "{key} #{seq} {}",
                line["message"]["role"].as_str().unwrap()
            )),
            EngineEvent::RunStarted { run_id: r, key, .. } => {
                assert_eq!(r, run_id);
                story.push(format!("run started in {key}"))
            }
            // Issue 13: OpenClaw's chat deltas, as what each adds to the text so far.
            EngineEvent::ReplyDelta {
                run_id: r,
                key,
                offset,
                delta,
                ..
            } => {
                assert_eq!(r, run_id);
                story.push(format!("delta in {key} at {offset}: {delta}"))
            }
            EngineEvent::RunEnded {
                run_id: r,
                key,
                status,
                reply,
                error,
                ..
            } => {
                assert_eq!(r, run_id);
                assert_eq!(error, None);
                story.push(format!("run ended {status} in {key}: {}", reply.unwrap()))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        story,
        [
            "created agent:main:cron:nightly".to_string(),
            format!("agent:main:octest #{} user", history_total() + 1),
            "run started in agent:main:octest".into(),
            "delta in agent:main:octest at 0: liv".into(),
            format!("agent:main:octest #{} assistant", history_total() + 2),
            "delta in agent:main:octest at 3: e reply".into(),
            "run ended ok in agent:main:octest: live reply".into(),
            "deleted agent:main:cron:nightly".into(),
        ]
    );
    assert_eq!(updates, keyed_changes - 2);
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(stream.try_next().is_none(), "nothing more is mapped");
}

#[tokio::test]
async fn a_reconnect_is_a_gap_and_the_subscriptions_are_renewed() {
    let (gw, api) = api();
    // The console read octest: its messages are asked for from the first subscription on.
    api.transcript(TranscriptQuery {
        key: T.into(),
        limit: 100,
        ..TranscriptQuery::default()
    })
    .await
    .unwrap();
    let mut stream = api.subscribe();
    requested(&gw, "sessions.messages.subscribe", 1).await;
    let frames = jsonl("events.jsonl");
    gw.push(&frames[0]);
    assert!(matches!(
        next_event(&mut stream).await,
        StreamItem::Event(_)
    ));
    gw.events.send(WireEvent::Reconnected).unwrap();
    assert_eq!(next_event(&mut stream).await, StreamItem::Missed(1));
    requested(&gw, "sessions.subscribe", 2).await;
    requested(&gw, "sessions.messages.subscribe", 2).await;
    assert_eq!(
        gw.requests("sessions.messages.subscribe"),
        [json!({"key": T}), json!({"key": T})]
    );
    // Events after the gap flow on.
    gw.push(&frames[1]);
    assert!(matches!(
        next_event(&mut stream).await,
        StreamItem::Event(e) if matches!(e.event, EngineEvent::SessionCreated { .. })
    ));
}

#[tokio::test]
async fn a_transcript_read_while_subscribed_asks_once_for_its_messages() {
    let (gw, api) = api();
    let _stream = api.subscribe();
    requested(&gw, "sessions.subscribe", 1).await;
    for _ in 0..2 {
        api.transcript(TranscriptQuery {
            key: T.into(),
            limit: 100,
            ..TranscriptQuery::default()
        })
        .await
        .unwrap();
    }
    assert_eq!(
        gw.requests("sessions.messages.subscribe"),
        [json!({"key": T})]
    );
}

/// The same API against a running OpenClaw gateway (not in CI: it needs the reference
/// peer). Run by hand: `OC_TOKEN=… cargo test --test remote remote_openclaw:: -- --ignored --nocapture`
/// (`OC_URL` defaults to ws://127.0.0.1:18789). The link here is a minimal stand-in for the
/// real one (src/remote/link.rs): it connects as OpenClaw's reserved loopback backend client,
/// which keeps its scopes without a device identity.
mod live {
    use std::collections::HashMap;
    use std::time::Instant;

    use futures_util::{SinkExt, StreamExt};
    use tokio::sync::{mpsc, oneshot};
    use tokio_tungstenite::tungstenite::Message;

    use super::*;

    type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>>;

    struct LiveLink {
        out: mpsc::UnboundedSender<String>,
        pending: Pending,
        events: broadcast::Sender<WireEvent>,
        state: watch::Sender<LinkState>,
        hello: HelloOk,
        target: String,
    }

    fn text(m: Message) -> Option<Value> {
        match m {
            Message::Text(t) => serde_json::from_str(t.as_str()).ok(),
            _ => None,
        }
    }

    impl LiveLink {
        async fn connect(url: &str, token: &str) -> Arc<LiveLink> {
            let host = url.trim_start_matches("ws://").trim_end_matches('/');
            let tcp = tokio::net::TcpStream::connect(host).await.expect("dial");
            let (ws, _) = tokio_tungstenite::client_async(url, tcp)
                .await
                .expect("upgrade");
            let (mut tx, mut rx) = ws.split();
            let challenge = text(rx.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(challenge["event"], "connect.challenge");
            let connect = json!({"type": "req", "id": "connect", "method": "connect", "params": {
                "minProtocol": 4, "maxProtocol": 4,
                "client": {"id": "gateway-client", "version": "0.1.0", "platform": "linux", "mode": "backend"},
                "role": "operator",
                "scopes": ["operator.admin", "operator.read", "operator.write"],
                "auth": {"token": token}}});
            tx.send(Message::text(connect.to_string())).await.unwrap();
            let hello = loop {
                let Some(f) = text(rx.next().await.unwrap().unwrap()) else {
                    continue;
                };
                if f["type"] == "res" && f["id"] == "connect" {
                    assert_eq!(f["ok"], json!(true), "connect refused: {f}");
                    break serde_json::from_value::<HelloOk>(f["payload"].clone()).unwrap();
                }
            };
            let (out, mut outq) = mpsc::unbounded_channel::<String>();
            tokio::spawn(async move {
                while let Some(s) = outq.recv().await {
                    if tx.send(Message::text(s)).await.is_err() {
                        break;
                    }
                }
            });
            let pending: Pending = Arc::default();
            let events = broadcast::channel(4096).0;
            let (p, e) = (pending.clone(), events.clone());
            tokio::spawn(async move {
                while let Some(Ok(m)) = rx.next().await {
                    let Some(f) = text(m) else { continue };
                    if f["type"] == "res" {
                        let id = f["id"].as_str().unwrap_or("").to_string();
                        let answer = if f["ok"] == json!(true) {
                            Ok(f["payload"].clone())
                        } else {
                            Err(RpcError::Refused(
                                serde_json::from_value(f["error"].clone()).unwrap(),
                            ))
                        };
                        if let Some(w) = p.lock().unwrap().remove(&id) {
                            let _ = w.send(answer);
                        }
                    } else if f["type"] == "event" {
                        let _ = e.send(WireEvent::Event {
                            event: f["event"].as_str().unwrap_or("").to_string(),
                            payload: f["payload"].clone(),
                        });
                    }
                }
            });
            Arc::new(LiveLink {
                out,
                pending,
                events,
                state: watch::channel(LinkState::Connected {
                    protocol: hello.protocol,
                    server: format!("openclaw {}", hello.server.version),
                    rtt_ms: None,
                    resynced: false,
                })
                .0,
                hello,
                target: url.to_string(),
            })
        }
    }

    #[async_trait]
    impl Rpc for LiveLink {
        async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
            let id = uuid::Uuid::new_v4().to_string();
            let (tx, rx) = oneshot::channel();
            self.pending.lock().unwrap().insert(id.clone(), tx);
            let frame = json!({"type": "req", "id": id, "method": method, "params": params});
            self.out
                .send(frame.to_string())
                .map_err(|_| RpcError::Unavailable("closed".into()))?;
            tokio::time::timeout(Duration::from_secs(120), rx)
                .await
                .map_err(|_| RpcError::Timeout(120_000))?
                .map_err(|_| RpcError::Unavailable("closed".into()))?
        }
        async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
            self.request(method, params).await
        }
        fn events(&self) -> broadcast::Receiver<WireEvent> {
            self.events.subscribe()
        }
        fn hello(&self) -> Option<HelloOk> {
            Some(self.hello.clone())
        }
        fn state(&self) -> watch::Receiver<LinkState> {
            self.state.subscribe()
        }
        fn target(&self) -> String {
            self.target.clone()
        }
    }

    /// Times one call, printing it for the record.
    macro_rules! timed {
        ($what:expr, $call:expr) => {{
            let t = Instant::now();
            let r = $call;
            eprintln!(
                "live: {:<44} {:>8.1} ms",
                $what,
                t.elapsed().as_secs_f64() * 1e3
            );
            r
        }};
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a running OpenClaw gateway (see the module comment)"]
    async fn the_console_api_on_a_live_openclaw_gateway() {
        let url = std::env::var("OC_URL").unwrap_or_else(|_| "ws://127.0.0.1:18789".into());
        let token = std::env::var("OC_TOKEN").expect("OC_TOKEN: the gateway token");
        let link = timed!("connect + hello-ok", LiveLink::connect(&url, &token).await);
        eprintln!("live: attached to OpenClaw {}", link.hello.server.version);
        let api = OpenClawApi::new(link);
        let status = timed!("status (sessions.list)", api.status().await.unwrap());
        eprintln!("live: {} ({} sessions)", status.attached, status.sessions);
        let page = timed!(
            "sessions (sessions.list limit 50)",
            api.sessions(SessionsQuery {
                limit: 50,
                count: true,
                ..SessionsQuery::default()
            })
            .await
            .unwrap()
        );
        assert_eq!(page.matching, Some(status.sessions));
        for r in &page.rows {
            eprintln!(
                "live:   {:<40} {:<6} {:<9} {:<8} {}",
                r.key,
                r.kind.as_str(),
                r.channel,
                r.policy.policy,
                r.name
            );
        }
        let agents = timed!("agents (agents.list)", api.agents().await.unwrap());
        assert!(agents.iter().any(|a| a.is_default));

        let key = format!("agent:main:live-{}", &uuid::Uuid::new_v4().to_string()[..8]);
        let mut stream = api.subscribe();
        let before = api
            .transcript(TranscriptQuery {
                key: key.clone(),
                limit: 100,
                ..TranscriptQuery::default()
            })
            .await
            .unwrap();
        assert!(!before.exists, "{key} is new");

        let word = uuid::Uuid::new_v4().simple().to_string();
        let receipt = timed!(
            "send (chat.send ack)",
            api.send(SendRequest {
                key: key.clone(),
                text: format!("SAY live {word}"),
                from: Sender::default(),
                idempotency_key: None,
            })
            .await
            .unwrap()
        );
        assert!(receipt.created);
        let run_id = receipt.run_id.clone().unwrap();
        let done = timed!(
            "wait_run (agent.wait)",
            api.wait_run(&run_id, Duration::from_secs(60))
                .await
                .unwrap()
        );
        assert_eq!(
            (done.status.as_str(), done.reply.as_str()),
            ("ok", &*format!("live {word}"))
        );

        // The live events of that turn, as the console receives them.
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let item = match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
                Ok(i) => i,
                Err(_) => break,
            };
            let StreamItem::Event(e) = item else {
                panic!("gap or end: {item:?}")
            };
            match e.event {
                EngineEvent::MessageAppended {
                    key: k, seq, line, ..
                } if k == key => seen.push(format!(
                    "message #{seq} {}",
                    line["message"]["role"].as_str().unwrap()
                )),
                EngineEvent::RunStarted { run_id: r, .. } if r == run_id => {
                    seen.push("run started".into())
                }
                EngineEvent::RunEnded {
                    run_id: r,
                    status,
                    reply,
                    ..
                } if r == run_id => {
                    seen.push(format!("run ended {status}: {}", reply.unwrap_or_default()));
                    break;
                }
                EngineEvent::SessionCreated { key: k, .. } if k == key => {
                    seen.push("created".into())
                }
                _ => {}
            }
        }
        eprintln!("live: events {seen:?}");
        assert!(seen.contains(&"message #1 user".to_string()), "{seen:?}");
        assert!(seen.contains(&"run started".to_string()), "{seen:?}");
        assert_eq!(seen.last().unwrap(), &format!("run ended ok: live {word}"));

        let after = timed!(
            "transcript (chat.history limit 100)",
            api.transcript(TranscriptQuery {
                key: key.clone(),
                limit: 100,
                ..TranscriptQuery::default()
            })
            .await
            .unwrap()
        );
        let shown: Vec<_> = after
            .lines
            .iter()
            .map(|l| (l.seq, l.role, l.text.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                (1, LineRole::User, format!("SAY live {word}")),
                (2, LineRole::Assistant, format!("live {word}"))
            ]
        );

        let off = timed!(
            "/send off (sessions.patch deny)",
            api.send(owner_says(&key, "/send off")).await.unwrap()
        );
        assert_eq!(
            off.command_reply.as_deref(),
            Some("⚙️ Send policy set to off.")
        );
        let row = api.session(&key).await.unwrap().unwrap().row;
        assert_eq!(
            (row.policy.policy.as_str(), row.policy.is_override()),
            ("deny", true)
        );
        let refused = api.send(owner_says(&key, "SAY refused")).await.unwrap_err();
        assert_eq!(
            refused,
            ApiError::BadInput("send blocked by session policy".into())
        );
        api.send(owner_says(&key, "/send inherit")).await.unwrap();
        let row = api.session(&key).await.unwrap().unwrap().row;
        assert_eq!(row.policy.policy.as_str(), "inherit");

        let e = api
            .call_tool(ToolCall {
                tool: "sessions_list".into(),
                params: json!({}),
                requester: "main".into(),
                sandboxed: false,
            })
            .await
            .unwrap_err();
        assert!(matches!(e, ApiError::Unavailable(_)));
        assert!(timed!(
            "delete (sessions.delete)",
            api.delete(&key).await.unwrap()
        ));
        assert!(api.session(&key).await.unwrap().is_none());
    }
}

/// `inject --channel telegram` over OpenClaw goes by `agent` with that channel, in the params
/// a real 2026.9.6 gateway accepted (samples/s2-telegram-pingpong: `{sessionKey, message,
/// channel, deliver: false, idempotencyKey}`, answered `accepted` with the run), and that run
/// is the one waited for. What no OpenClaw method takes (sender, chat type, chat label) is
/// refused by name before anything is sent: it used to be dropped silently, the message
/// recorded as a webchat one (issue 25).
#[tokio::test]
async fn a_channel_goes_by_agent_and_a_sender_is_refused_by_name() {
    let (gw, api) = api();
    let run = "4ac3b4c9-ba21-4876-988d-36b136b7cb30";
    gw.captured.lock().unwrap().push(Captured {
        method: "agent".into(),
        params: json!({"sessionKey": T, "message": "hi from telegram", "channel": "telegram",
            "deliver": false, "idempotencyKey": "<uuid>"}),
        answer: Ok(json!({"runId": run, "sessionKey": T, "agentId": "main",
            "status": "accepted", "acceptedAt": 1795353364836i64})),
        used: false,
    });
    let telegram = Sender {
        channel: Some("telegram".into()),
        ..Sender::default()
    };
    let receipt = api
        .send(SendRequest {
            key: T.into(),
            text: "hi from telegram".into(),
            from: telegram.clone(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    assert_eq!(receipt.run_id.as_deref(), Some(run));
    assert_eq!(gw.requests("agent").len(), 1);
    assert!(gw.requests("chat.send").is_empty());
    gw.assert_all_answered();

    let sent_before = gw.methods().len();
    for (from, named) in [
        (
            Sender {
                sender: Some("alice".into()),
                ..telegram.clone()
            },
            "--sender",
        ),
        (
            Sender {
                chat_type: Some("group".into()),
                ..telegram.clone()
            },
            "--chat-type",
        ),
        (
            Sender {
                display_name: Some("Family".into()),
                sender: Some("alice".into()),
                ..Sender::default()
            },
            "--sender, --display-name",
        ),
    ] {
        let e = api
            .send(SendRequest {
                key: T.into(),
                text: "hi".into(),
                from,
                idempotency_key: None,
            })
            .await
            .unwrap_err();
        let ApiError::BadInput(why) = e else {
            panic!("{e:?}")
        };
        assert!(
            why.starts_with(&format!("an OpenClaw gateway cannot record {named}:")),
            "{why}"
        );
    }
    assert_eq!(gw.methods().len(), sent_before, "nothing went out");
}
