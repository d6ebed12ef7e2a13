//! Exchanges, traffic and sub-agents rebuilt from an OpenClaw 2026.9.6 gateway's record
//! (tests/fixtures/openclaw-2026.9.6/exchanges/: the rows and `chat.history` answers of the
//! captured scenarios: ping-pong ended by `REPLY_SKIP`, `REPLY_SKIP` at once, fire-and-forget
//! (`timeoutSeconds: 0`), a timeout that expires, a spawn with its announce). Each rebuilt
//! exchange equals what our engine records for the same scenario (scripted agents saying
//! the same words), in every field both record; the rest says it is not recorded.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::store::SessionInit;
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_remote::openclaw::exchanges::{NOT_RECORDED, UNKNOWN_REQUESTER};
use switchboard_types::api::{
    AnnounceOutcome, EngineEvent, ExchangeDetail, ExchangeEnd, ExchangeKind, ExchangeStatus,
    ExchangesQuery, PatchRequest, PolicySetting, RunStatus, SessionsApi, SpawnOutcome, StreamItem,
    ToolCall,
};
use switchboard_types::key::SessionKey;

use crate::openclaw_record::{RecordGateway, forwarded, reply, row, scenario};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6/exchanges"
);

fn dir(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// Everything about an exchange that both OpenClaw's record and our engine record.
#[derive(Debug, PartialEq)]
struct Shape {
    requester: String,
    target: String,
    message: String,
    /// Round, speaker, listener, text, status.
    turns: Vec<(u32, String, String, String, RunStatus)>,
    rounds: u32,
    reason: Option<ExchangeEnd>,
    status: ExchangeStatus,
    /// The announce's outcome and, unless it was skipped (OpenClaw hides the skip word),
    /// its text.
    announce: Option<(AnnounceOutcome, Option<String>)>,
}

fn shape(d: &ExchangeDetail) -> Shape {
    let s = &d.summary;
    Shape {
        requester: s.requester.clone(),
        target: s.target.clone(),
        message: s.message.clone(),
        turns: d
            .turns
            .iter()
            .map(|t| {
                (
                    t.round,
                    t.speaker.clone(),
                    t.listener.clone(),
                    t.text.trim().to_string(),
                    t.status,
                )
            })
            .collect(),
        rounds: s.rounds,
        reason: s.ended_reason,
        status: s.status,
        announce: d.announce.as_ref().map(|a| {
            (
                a.outcome,
                (a.outcome != AnnounceOutcome::Skipped)
                    .then(|| a.text.clone())
                    .flatten(),
            )
        }),
    }
}

/// The newest `limit` exchanges `api` lists.
async fn listed(
    api: &(impl SessionsApi + ?Sized),
    limit: usize,
) -> switchboard_types::api::ExchangesPage {
    api.exchanges(ExchangesQuery {
        limit,
        ..ExchangesQuery::default()
    })
    .await
    .unwrap()
}

/// The one exchange an OpenClaw scenario's record holds, rebuilt through `OpenClawApi`.
async fn rebuilt(name: &str) -> (Arc<RecordGateway>, OpenClawApi, ExchangeDetail) {
    let gw = Arc::new(scenario(&dir(name)));
    let api = OpenClawApi::new(gw.clone());
    let page = listed(&api, 50).await;
    assert_eq!(page.exchanges.len(), 1, "{:#?}", page.exchanges);
    let d = api
        .exchange(&page.exchanges[0].id)
        .await
        .unwrap()
        .expect("the listed exchange is found by its id");
    (gw, api, d)
}

/// The same scenario on our engine: `requester` calls `sessions_send` into `target` with
/// agents scripted to say what OpenClaw's fake model said; the exchange it recorded.
async fn on_our_engine(
    requester: &str,
    target: &str,
    timeout_seconds: u64,
    main_script: Value,
    work_script: Value,
) -> ExchangeDetail {
    on_our_engine_with(
        requester,
        target,
        timeout_seconds,
        main_script,
        work_script,
        None,
    )
    .await
}

/// `on_our_engine`, the target's send policy set to `policy` first.
async fn on_our_engine_with(
    requester: &str,
    target: &str,
    timeout_seconds: u64,
    main_script: Value,
    work_script: Value,
    policy: Option<PolicySetting>,
) -> ExchangeDetail {
    let config = json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": main_script },
            { "id": "work", "model": "scripted", "script": work_script },
        ] },
    });
    let config: Config = serde_json::from_value(config).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let engine = switchboard::state_folder::open_engine(tmp.path(), config).unwrap();
    for (key, channel) in [(requester, Some("telegram")), (target, None)] {
        let init = SessionInit {
            channel: channel.map(str::to_string),
            ..SessionInit::default()
        };
        engine
            .store()
            .ensure(&SessionKey::from_canonical(key), init)
            .await
            .unwrap();
    }
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    if policy.is_some() {
        api.patch(PatchRequest {
            key: target.into(),
            send_policy: policy,
        })
        .await
        .unwrap();
    }
    api.call_tool(ToolCall {
        tool: "sessions_send".into(),
        params: json!({ "sessionKey": target, "message": "PING from main",
                        "timeoutSeconds": timeout_seconds }),
        requester: requester.into(),
        sandboxed: false,
    })
    .await
    .unwrap();
    engine.idle().await;
    let page = listed(api.as_ref(), 10).await;
    assert_eq!(page.exchanges.len(), 1);
    api.exchange(&page.exchanges[0].id).await.unwrap().unwrap()
}

fn turn(
    round: u32,
    speaker: &str,
    listener: &str,
    text: &str,
) -> (u32, String, String, String, RunStatus) {
    (
        round,
        speaker.into(),
        listener.into(),
        text.into(),
        RunStatus::Ok,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_pong_ended_by_reply_skip_is_rebuilt_as_our_engine_records_it() {
    let (m, w) = ("agent:main:s2", "agent:work:s2");
    let (_gw, _api, d) = rebuilt("s2-telegram-pingpong").await;
    let ours = on_our_engine(
        m,
        w,
        30,
        json!([
            { "when": { "step": "reply", "round": 2 }, "reply": "PINGPONG main as Agent 1 (requester) turn 1/5" },
            { "when": { "step": "reply", "round": 4 }, "reply": "PINGPONG main as Agent 1 (requester) turn 3/5" },
        ]),
        json!([
            { "when": { "step": "message" }, "reply": "WORK_REPLY: pong from work" },
            { "when": { "step": "reply", "round": 3 }, "reply": "PINGPONG work as Agent 2 (target) turn 2/5" },
            { "when": { "step": "reply", "round": 5 }, "reply": "REPLY_SKIP" },
            { "when": { "step": "announce" }, "reply": "ANNOUNCE from work: exchange finished" },
        ]),
    )
    .await;
    let expected = Shape {
        requester: m.into(),
        target: w.into(),
        message: "PING from main".into(),
        turns: vec![
            turn(1, w, m, "WORK_REPLY: pong from work"),
            turn(2, m, w, "PINGPONG main as Agent 1 (requester) turn 1/5"),
            turn(3, w, m, "PINGPONG work as Agent 2 (target) turn 2/5"),
            turn(4, m, w, "PINGPONG main as Agent 1 (requester) turn 3/5"),
            turn(5, w, m, "REPLY_SKIP"),
        ],
        rounds: 5,
        reason: Some(ExchangeEnd::ReplySkip),
        status: ExchangeStatus::Done,
        // The target has no delivery route: recorded there only.
        announce: Some((
            AnnounceOutcome::NoRoute,
            Some("ANNOUNCE from work: exchange finished".into()),
        )),
    };
    assert_eq!(shape(&ours), expected, "our engine");
    assert_eq!(shape(&d), expected, "rebuilt from OpenClaw");
    // Times and tokens where OpenClaw records them: the reply's usage, the forwarded
    // message's time to the reply's.
    let t1 = &d.turns[0];
    assert_eq!((t1.tokens_in, t1.tokens_out), (Some(30), Some(5)));
    assert_eq!(t1.run_id, "a5415f3e-95ea-4f30-b048-f2a09de1aa6a");
    assert_eq!(d.summary.started_at, 1795353365786);
    assert_eq!(
        (t1.started_at, t1.ended_at),
        (1795353366578, Some(1795353366618))
    );
    // The hidden REPLY_SKIP has no time in the record.
    assert_eq!(d.turns[4].ended_at, None);
    assert!(
        d.summary.detail.contains("hidden by chat.history"),
        "{}",
        d.summary.detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_skip_at_once_and_a_skipped_announce_match_our_engine() {
    for (name, m, w, timeout) in [
        ("s3-telegram-skip", "agent:main:s3", "agent:work:s3b", 30),
        ("s4-telegram-timeout0", "agent:main:s4", "agent:work:s4", 0),
    ] {
        let (_gw, _api, d) = rebuilt(name).await;
        let ours = on_our_engine(
            m,
            w,
            timeout,
            json!([{ "when": { "step": "reply" }, "reply": "REPLY_SKIP" }]),
            json!([
                { "when": { "step": "message" }, "reply": "WORK_REPLY: pong from work" },
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
            ]),
        )
        .await;
        let expected = Shape {
            requester: m.into(),
            target: w.into(),
            message: "PING from main".into(),
            turns: vec![
                turn(1, w, m, "WORK_REPLY: pong from work"),
                turn(2, m, w, "REPLY_SKIP"),
            ],
            rounds: 2,
            reason: Some(ExchangeEnd::ReplySkip),
            status: ExchangeStatus::Done,
            announce: Some((AnnounceOutcome::Skipped, None)),
        };
        assert_eq!(shape(&ours), expected, "{name}: our engine");
        assert_eq!(shape(&d), expected, "{name}: rebuilt from OpenClaw");
    }
}

/// A reply that came after the requester's wait ran out: OpenClaw goes on with the loop
/// (as our engine does), and its record holds the late reply as round 1.
#[tokio::test]
async fn a_timed_out_wait_still_shows_the_late_reply_and_the_loop() {
    let (_gw, _api, d) = rebuilt("s7-telegram-timeout-expires").await;
    let (m, w) = ("agent:main:s7", "agent:work:s7");
    assert_eq!(
        shape(&d),
        Shape {
            requester: m.into(),
            target: w.into(),
            message: "PING from main".into(),
            turns: vec![
                turn(1, w, m, "WORK_REPLY: slow pong"),
                turn(2, m, w, "REPLY_SKIP"),
            ],
            rounds: 2,
            reason: Some(ExchangeEnd::ReplySkip),
            status: ExchangeStatus::Done,
            announce: Some((AnnounceOutcome::Skipped, None)),
        }
    );
    // The slow reply's run: from when the target took the message to when its reply was
    // written (the lines' record times).
    let t1 = &d.turns[0];
    assert_eq!(
        (t1.started_at, t1.ended_at),
        (1795354472443, Some(1795354478479))
    );
}

async fn next_events(s: &mut switchboard_types::api::EventStream, n: usize) -> Vec<EngineEvent> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), s.next()).await {
            Ok(StreamItem::Event(e)) => out.push(e.event),
            Ok(StreamItem::Missed(_)) => {}
            Ok(StreamItem::Closed) | Err(_) => break,
        }
    }
    out
}

#[tokio::test]
async fn a_spawned_sub_agent_its_result_and_announce_come_as_spawn_events() {
    let gw = Arc::new(scenario(&dir("s6-sessions-spawn")));
    let api = OpenClawApi::new(gw.clone());
    let mut events = api.subscribe();
    let page = listed(&api, 10).await;
    assert!(page.exchanges.is_empty(), "a spawn is not an exchange");
    let got = next_events(&mut events, 3).await;
    let child = "agent:main:subagent:82604f70-126d-49a7-942b-b7cffee553d7";
    match &got[..] {
        [
            EngineEvent::Spawned {
                requester,
                child: c,
                label,
                ..
            },
            EngineEvent::SpawnEnded {
                outcome,
                tokens_in,
                tokens_out,
                runtime_ms,
                ..
            },
            EngineEvent::SpawnAnnounce {
                outcome: announced,
                text,
                ..
            },
        ] => {
            assert_eq!((requester.as_str(), c.as_str()), ("agent:main:s6", child));
            assert_eq!(label.as_deref(), Some("child-s6"));
            assert_eq!(*outcome, SpawnOutcome::Completed);
            assert_eq!((*tokens_in, *tokens_out), (30, 5));
            // Created → its result line.
            assert_eq!(*runtime_ms, 1795353484611 - 1795353484393);
            assert_eq!(*announced, AnnounceOutcome::NotRecorded);
            assert!(
                text.as_deref()
                    .unwrap()
                    .contains("A background task completed"),
                "{text:?}"
            );
        }
        other => panic!("{other:#?}"),
    }
}

/// A forwarded turn with no provenance, and provenance naming a session the gateway does
/// not show: both are listed, marked partial, and neither is an edge in the traffic view.
#[tokio::test]
async fn unattributable_turns_are_partial_and_never_a_traffic_edge() {
    let gw = Arc::new(RecordGateway::default());
    let t0 = 1_700_000_000_000;
    gw.add(
        row("agent:work:a", t0),
        &json!({ "totalMessages": 4, "messages": [
            forwarded(1, t0, None, "who sent this?"),
            reply(2, t0 + 10, "r1", "no idea"),
            forwarded(3, t0 + 20, Some("agent:ghost:x"), "boo"),
            reply(4, t0 + 30, "r2", "eek"),
        ]}),
    );
    gw.add(
        row("agent:main:b", t0),
        &json!({ "totalMessages": 2, "messages": [
            forwarded(1, t0 + 40, Some("agent:work:a"), "hello b"),
            reply(2, t0 + 50, "r3", "hi a"),
        ]}),
    );
    let api = OpenClawApi::new(gw.clone());
    let page = listed(&api, 10).await;
    let by_target: Vec<(&str, &str, &str)> = page
        .exchanges
        .iter()
        .map(|s| (s.requester.as_str(), s.target.as_str(), s.detail.as_str()))
        .collect();
    assert_eq!(by_target.len(), 3, "{by_target:#?}");
    assert_eq!(by_target[0].0, "agent:work:a");
    assert!(!by_target[0].2.contains("partial"), "{by_target:#?}");
    assert_eq!(by_target[1].0, "agent:ghost:x");
    assert!(
        by_target[1]
            .2
            .contains("partial: agent:ghost:x is not visible"),
        "{by_target:#?}"
    );
    assert_eq!(by_target[2].0, UNKNOWN_REQUESTER);
    assert!(by_target[2].2.contains(NOT_RECORDED), "{by_target:#?}");
    assert!(
        by_target[2].2.contains("Forwarded from main"),
        "{by_target:#?}"
    );
    let traffic = api.traffic(0).await.unwrap();
    let edges: Vec<(&str, &str)> = traffic
        .iter()
        .map(|c| (c.requester.as_str(), c.target.as_str()))
        .collect();
    assert_eq!(edges, [("agent:work:a", "agent:main:b")]);
    assert_eq!((traffic[0].exchanges, traffic[0].messages), (1, 2));
}

/// A loop that stopped on a visible reply after reply-back turns: OpenClaw does not record
/// why (its cap is not exposed), so the reason says so, and the traffic view marks the pair.
#[tokio::test]
async fn a_loop_stopped_without_reply_skip_is_not_recorded_and_marked_as_a_loop() {
    let gw = Arc::new(RecordGateway::default());
    let t0 = 1_700_000_000_000;
    let (a, b) = ("agent:main:a", "agent:work:b");
    gw.add(
        row(b, t0),
        &json!({ "totalMessages": 4, "messages": [
            forwarded(1, t0, Some(a), "go"),
            reply(2, t0 + 10, "rb1", "b1"),
            forwarded(3, t0 + 30, Some(a), "a2"),
            reply(4, t0 + 40, "rb3", "b3"),
        ]}),
    );
    gw.add(
        row(a, t0),
        &json!({ "totalMessages": 2, "messages": [
            forwarded(1, t0 + 15, Some(b), "b1"),
            reply(2, t0 + 20, "ra2", "a2"),
        ]}),
    );
    let api = OpenClawApi::new(gw.clone());
    let page = listed(&api, 10).await;
    assert_eq!(page.exchanges.len(), 1, "{:#?}", page.exchanges);
    let s = &page.exchanges[0];
    assert_eq!(s.rounds, 3);
    assert_eq!(s.ended_reason, Some(ExchangeEnd::NotRecorded));
    assert!(s.detail.contains("maxPingPongTurns"), "{}", s.detail);
    assert_eq!(s.announce, Some(AnnounceOutcome::NotRecorded));
    let traffic = api.traffic(0).await.unwrap();
    assert_eq!(traffic.iter().map(|c| c.capped).sum::<u32>(), 1);
}

/// A gateway that goes away midway through the backfill: what was read is shown, nothing
/// hangs or panics, and the next read after a reconnect reads again.
#[tokio::test]
async fn a_gateway_lost_mid_backfill_leaves_a_partial_book_and_is_read_again() {
    let gw = Arc::new(scenario(&dir("s2-telegram-pingpong")));
    // sessions.list, then one chat.history: the second one fails.
    gw.fail_after.store(2, Ordering::SeqCst);
    let api = OpenClawApi::new(gw.clone());
    let page = tokio::time::timeout(
        Duration::from_secs(10),
        api.exchanges(ExchangesQuery {
            limit: 10,
            ..Default::default()
        }),
    )
    .await
    .expect("no hang")
    .unwrap();
    // One side's record read: its forwarded lines, each its own (partial) exchange.
    assert!(page.exchanges.len() <= 3, "{:#?}", page.exchanges);
    gw.fail_after.store(usize::MAX, Ordering::SeqCst);
    let _events = api.subscribe();
    let _ = gw
        .events
        .send(switchboard_remote::rpc::WireEvent::Reconnected);
    // The reconnect marks the book stale; the next read backfills it whole.
    let mut found = 0;
    for _ in 0..100 {
        let page = listed(&api, 10).await;
        found = page.exchanges.first().map_or(0, |s| s.rounds);
        if found == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found, 5);
}

/// Live: a forwarded line and its reply arriving as `session.message` events become our
/// engine's exchange events (started, then its round), numbered with the rest.
#[tokio::test]
async fn live_session_messages_become_exchange_events() {
    let gw = Arc::new(RecordGateway::default());
    let t0 = switchboard_types::api::time::now_ms();
    let (a, b) = ("agent:main:a", "agent:work:b");
    gw.add(row(a, t0), &json!({ "messages": [] }));
    gw.add(row(b, t0), &json!({ "messages": [] }));
    let api = OpenClawApi::new(gw.clone());
    let mut events = api.subscribe();
    let page = listed(&api, 10).await;
    assert!(page.exchanges.is_empty());
    gw.push(
        "session.message",
        json!({ "sessionKey": b, "messageSeq": 1,
                                        "message": forwarded(1, t0, Some(a), "ping") }),
    );
    gw.push(
        "session.message",
        json!({ "sessionKey": b, "messageSeq": 2,
                                        "message": reply(2, t0 + 5, "rb", "pong") }),
    );
    let mut seen = Vec::new();
    for _ in 0..20 {
        for e in next_events(&mut events, 1).await {
            seen.push(e);
        }
        if seen
            .iter()
            .any(|e| matches!(e, EngineEvent::ExchangeRound { .. }))
        {
            break;
        }
    }
    let started = seen.iter().find_map(|e| match e {
        EngineEvent::ExchangeStarted {
            exchange_id,
            requester,
            target,
            message,
            ..
        } => Some((
            exchange_id.clone(),
            requester.clone(),
            target.clone(),
            message.clone(),
        )),
        _ => None,
    });
    assert_eq!(
        started,
        Some((
            format!("{b}#1"),
            a.to_string(),
            b.to_string(),
            "ping".to_string()
        ))
    );
    let round = seen.iter().find_map(|e| match e {
        EngineEvent::ExchangeRound {
            round,
            speaker,
            text,
            ..
        } => Some((*round, speaker.clone(), text.clone())),
        _ => None,
    });
    assert_eq!(round, Some((1, b.to_string(), "pong".to_string())));
    // The list holds it too, still running (its loop may go on).
    let page = listed(&api, 10).await;
    assert_eq!(page.exchanges.len(), 1);
    assert_eq!(page.exchanges[0].status, ExchangeStatus::Running);
}

/// The traffic view's stop key is `/send off` from the owner: on OpenClaw a
/// `sessions.patch sendPolicy: deny` on the target; its undo puts back what was there.
#[tokio::test]
async fn stopping_a_pair_patches_deny_and_undo_restores_inherit() {
    let gw = Arc::new(scenario(&dir("s2-telegram-pingpong")));
    let api = OpenClawApi::new(gw.clone());
    for text in ["/send off", "/send inherit"] {
        api.send(switchboard_types::api::SendRequest {
            key: "agent:work:s2".into(),
            text: text.into(),
            from: switchboard_types::api::Sender::owner(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    }
    let patches = gw.patches.lock().unwrap().clone();
    assert_eq!(
        patches,
        [
            json!({ "key": "agent:work:s2", "sendPolicy": "deny" }),
            json!({ "key": "agent:work:s2", "sendPolicy": null }),
        ]
    );
}

/// Hostile sizes: a session with 100,000 lines and more sessions than the book holds stay
/// bounded.
#[test]
fn the_book_stays_bounded() {
    use switchboard_remote::openclaw::exchanges::{Book, MAX_ITEMS_PER_SESSION, MAX_SESSIONS};
    let mut book = Book::default();
    for seq in 1..=100_000 {
        book.message("agent:main:big", seq, &reply(seq, seq, "r", "x"));
    }
    for i in 0..(MAX_SESSIONS + 10) {
        book.row(&row(&format!("agent:main:s{i}"), 0));
    }
    assert!(book.len() <= MAX_SESSIONS);
    assert_eq!(book.lines("agent:main:big"), MAX_ITEMS_PER_SESSION);
    let _ = book.rebuild(0);
}

/// A round shown running whose end never came (the gateway restarted and forgot the run; no
/// event said so): once its session has been silent for the re-check time, its row and lines
/// are read again and the exchange ends as the record now says (no reply, no run: not
/// recorded), instead of running forever.
#[tokio::test]
async fn a_round_shown_running_is_checked_again_after_a_silence() {
    let gw = Arc::new(RecordGateway::default());
    // Long enough ago that the exchange is settled once no run is going.
    let t0 = switchboard_types::api::time::now_ms() - 10 * 60_000;
    let (a, b) = ("agent:main:a", "agent:work:b");
    gw.add(row(a, t0), &json!({ "messages": [] }));
    let mut running = row(b, t0);
    running["hasActiveRun"] = json!(true);
    gw.add(
        running,
        &json!({ "totalMessages": 1, "messages": [forwarded(1, t0, Some(a), "go")] }),
    );
    let api = OpenClawApi::new(gw.clone()).with_recheck_after(Duration::from_millis(300));
    let mut events = api.subscribe();
    let d = api.exchange(&format!("{b}#1")).await.unwrap().unwrap();
    assert_eq!(d.summary.status, ExchangeStatus::Running);
    assert_eq!(d.turns[0].status, RunStatus::Running);
    // The gateway restarts: the run is gone, and no event says so.
    gw.rows.lock().unwrap()[1]["hasActiveRun"] = json!(false);
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(EngineEvent::ExchangeEnded { reason, .. }) =
                next_events(&mut events, 1).await.pop()
            {
                return reason;
            }
        }
    })
    .await
    .expect("the re-check ends the exchange");
    assert_eq!(ended, ExchangeEnd::NotRecorded);
    let d = api.exchange(&format!("{b}#1")).await.unwrap().unwrap();
    assert_eq!(d.summary.status, ExchangeStatus::Done);
    assert!(d.turns.is_empty(), "no round is made up: {:#?}", d.turns);
    assert!(
        d.summary.detail.contains(NOT_RECORDED),
        "{}",
        d.summary.detail
    );
}

/// A send the target's send policy refused (on OpenClaw, the `agent` method's error in the
/// requester's tool result): rebuilt as the refused exchange our engine records for the same
/// send, in every field both record. A send to a missing session (sample s5, captured from
/// 2026.9.6) is an exchange on neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_by_policy_is_rebuilt_as_our_engine_records_it() {
    let (m, w) = ("agent:main:s5p", "agent:work:s5p");
    let t0 = 1_795_353_407_000;
    let gw = Arc::new(RecordGateway::default());
    let refused = json!({ "runId": "r-x", "status": "error",
                          "error": "send blocked by session policy", "sessionKey": w });
    gw.add(
        row(m, t0),
        &json!({ "totalMessages": 3, "messages": [
            { "role": "user", "content": "please ask the other agent", "timestamp": t0,
              "__openclaw": { "seq": 1 } },
            { "role": "assistant", "stopReason": "toolUse", "timestamp": t0 + 5,
              "content": [{ "type": "toolCall", "id": "call_1", "name": "sessions_send",
                            "arguments": { "sessionKey": w, "message": "PING from main",
                                           "timeoutSeconds": 30 } }],
              "__openclaw": { "seq": 2, "runId": "r-main" } },
            { "role": "toolResult", "toolName": "sessions_send", "toolCallId": "call_1",
              "isError": true, "timestamp": t0 + 9,
              "content": [{ "type": "text", "text": refused.to_string() }],
              "__openclaw": { "seq": 3, "runId": "r-main" } },
        ]}),
    );
    gw.add(row(w, t0), &json!({ "messages": [] }));
    let api = OpenClawApi::new(gw.clone());
    let page = listed(&api, 10).await;
    assert_eq!(page.exchanges.len(), 1, "{:#?}", page.exchanges);
    let d = api.exchange(&page.exchanges[0].id).await.unwrap().unwrap();
    let ours = on_our_engine_with(m, w, 30, json!([]), json!([]), Some(PolicySetting::Deny)).await;
    let expected = Shape {
        requester: m.into(),
        target: w.into(),
        message: "PING from main".into(),
        turns: Vec::new(),
        rounds: 0,
        reason: Some(ExchangeEnd::Policy),
        status: ExchangeStatus::Refused,
        announce: None,
    };
    assert_eq!(shape(&ours), expected, "our engine");
    assert_eq!(shape(&d), expected, "rebuilt from OpenClaw");
    assert_eq!(
        (ours.summary.kind, d.summary.kind),
        (ExchangeKind::Refused, ExchangeKind::Refused)
    );
    assert!(
        d.summary.detail.contains("send blocked by session policy"),
        "{}",
        d.summary.detail
    );
    // Counted in traffic as our engine counts it: an exchange, refused, no message.
    let t = api.traffic(0).await.unwrap();
    assert_eq!(
        t.iter()
            .map(|c| (c.exchanges, c.messages, c.refused))
            .collect::<Vec<_>>(),
        [(1, 0, 1)]
    );

    // s5: "No session found" is a failed send, not a refused one.
    let (_gw, api) = {
        let gw = Arc::new(scenario(&dir("s5-missing-target")));
        (gw.clone(), OpenClawApi::new(gw))
    };
    let page = listed(&api, 10).await;
    assert!(page.exchanges.is_empty(), "{:#?}", page.exchanges);
}

/// s7 on our engine: the wait expires (`timeoutSeconds` shorter than the target's slow
/// reply), the late reply still opens the loop, `REPLY_SKIP` ends it, the announce is
/// skipped. Compared with the exchange rebuilt from OpenClaw's record of the same scenario.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_that_expires_matches_our_engine() {
    let (m, w) = ("agent:main:s7", "agent:work:s7");
    let (_gw, _api, d) = rebuilt("s7-telegram-timeout-expires").await;
    let ours = on_our_engine(
        m,
        w,
        1,
        json!([{ "when": { "step": "reply" }, "reply": "REPLY_SKIP" }]),
        json!([
            { "when": { "step": "message" }, "reply": "WORK_REPLY: slow pong", "delayMs": 2500 },
            { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
        ]),
    )
    .await;
    assert_eq!(shape(&d), shape(&ours));
}

/// A `sessions_spawn` on our engine with agents scripted as OpenClaw's fake model answered
/// in s6 (`delay_ms` past `run_timeout` makes the child time out): the spawn events it sent.
async fn spawned_on_our_engine(
    requester: &str,
    child_rule: Value,
    run_timeout: u64,
) -> Vec<EngineEvent> {
    let config = json!({
        "tools": { "sessions": { "visibility": "all" } },
        "agents": { "list": [
            // The child's task matches `child_rule`; the requester's announce run is noted.
            { "id": "main", "default": true, "model": "scripted",
              "script": [child_rule, { "reply": "noted" }] },
        ] },
    });
    let config: Config = serde_json::from_value(config).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let engine = switchboard::state_folder::open_engine(tmp.path(), config).unwrap();
    engine
        .store()
        .ensure(
            &SessionKey::from_canonical(requester),
            SessionInit::default(),
        )
        .await
        .unwrap();
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    let mut events = api.subscribe();
    api.call_tool(ToolCall {
        tool: "sessions_spawn".into(),
        params: json!({ "task": "Compute things. SAY CHILD_RESULT 42", "label": "child-s6",
                        "runTimeoutSeconds": run_timeout }),
        requester: requester.into(),
        sandboxed: false,
    })
    .await
    .unwrap();
    engine.idle().await;
    let mut out = Vec::new();
    while let Ok(StreamItem::Event(e)) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        if matches!(
            e.event,
            EngineEvent::Spawned { .. }
                | EngineEvent::SpawnEnded { .. }
                | EngineEvent::SpawnAnnounce { .. }
        ) {
            out.push(e.event);
        }
    }
    out
}

/// What of a spawn both records hold: requester, label, outcome, tokens, whether its
/// announce came.
fn spawn_shape(
    events: &[EngineEvent],
) -> (
    String,
    Option<String>,
    Option<SpawnOutcome>,
    (u64, u64),
    bool,
) {
    let mut s = (String::new(), None, None, (0, 0), false);
    for e in events {
        match e {
            EngineEvent::Spawned {
                requester, label, ..
            } => {
                s.0 = requester.clone();
                s.1 = label.clone();
            }
            EngineEvent::SpawnEnded {
                outcome,
                tokens_in,
                tokens_out,
                ..
            } => {
                s.2 = Some(*outcome);
                s.3 = (*tokens_in, *tokens_out);
            }
            EngineEvent::SpawnAnnounce { .. } => s.4 = true,
            _ => {}
        }
    }
    s
}

/// The rebuilt spawn events of s6's record, the child's row and lines changed by `edit`.
async fn rebuilt_spawn(edit: impl FnOnce(&RecordGateway)) -> Vec<EngineEvent> {
    let gw = Arc::new(scenario(&dir("s6-sessions-spawn")));
    edit(&gw);
    let api = OpenClawApi::new(gw.clone());
    let mut events = api.subscribe();
    listed(&api, 10).await;
    let mut out = Vec::new();
    while let Ok(StreamItem::Event(e)) =
        tokio::time::timeout(Duration::from_millis(500), events.next()).await
    {
        out.push(e.event);
    }
    out
}

const S6_CHILD: &str = "agent:main:subagent:82604f70-126d-49a7-942b-b7cffee553d7";

/// s6 on our engine: the same spawn, completed with the same result and tokens, and its
/// announce. Not compared, for a reason of OpenClaw's record: the announce's outcome
/// (OpenClaw records the announce's text in the requester, not its delivery: `not_recorded`;
/// ours says where it went) and the runtime (wall time of two different runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_with_its_announce_matches_our_engine() {
    let theirs = rebuilt_spawn(|_| {}).await;
    let ours = spawned_on_our_engine(
        "agent:main:s6",
        json!({ "when": { "text": "Compute things" }, "reply": "CHILD_RESULT 42",
                "tokens": { "in": 30, "out": 5 } }),
        60,
    )
    .await;
    let want = (
        "agent:main:s6".to_string(),
        Some("child-s6".to_string()),
        Some(SpawnOutcome::Completed),
        (30, 5),
        true,
    );
    assert_eq!(spawn_shape(&ours), want, "our engine: {ours:#?}");
    assert_eq!(
        spawn_shape(&theirs),
        want,
        "rebuilt from OpenClaw: {theirs:#?}"
    );
}

/// A sub-agent whose run timed out: OpenClaw's row says `status: timeout` (its lines hold
/// no result). Rebuilt as our engine records a child that outlives its `runTimeoutSeconds`:
/// timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_sub_agent_is_rebuilt_as_our_engine_records_it() {
    let theirs = rebuilt_spawn(|gw| {
        for r in gw.rows.lock().unwrap().iter_mut() {
            if r["key"] == S6_CHILD {
                r["status"] = json!("timeout");
            }
        }
        let mut h = gw.histories.lock().unwrap();
        let (lines, _) = h.get_mut(S6_CHILD).unwrap();
        lines.retain(|m| m["role"] != "assistant");
    })
    .await;
    let ours = spawned_on_our_engine(
        "agent:main:s6",
        json!({ "when": { "text": "Compute things" }, "reply": "CHILD_RESULT 42",
                "delayMs": 3000 }),
        1,
    )
    .await;
    let outcome = |events: &[EngineEvent]| spawn_shape(events).2;
    assert_eq!(
        outcome(&ours),
        Some(SpawnOutcome::TimedOut),
        "our engine: {ours:#?}"
    );
    assert_eq!(
        outcome(&theirs),
        Some(SpawnOutcome::TimedOut),
        "rebuilt: {theirs:#?}"
    );
    let error = theirs.iter().find_map(|e| match e {
        EngineEvent::SpawnEnded { error, .. } => error.clone(),
        _ => None,
    });
    assert_eq!(error.as_deref(), Some("timed out"));
}
