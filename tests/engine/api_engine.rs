//! `SessionsApi` on the real engine (a temporary state folder, `Engine::start()`): messages
//! into one session keep the order of the calls, a caller waits for its own call's work and
//! no one else's, a session deleted meanwhile is a clear answer, a subscriber that falls
//! behind is told, another process's writes arrive as an event, and a caller that goes away
//! does not stop what it started.
//!
//! Real time, as the other flow tests (the writer thread and the flows' own timeouts do not
//! mix with tokio's paused clock); every wait is bounded.

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_types::api::{
    ApiError, EngineEvent, KeyPurpose, LineRole, SendReceipt, SendRequest, Sender, SessionsApi,
    StreamItem, TranscriptPage, TranscriptQuery,
};

/// A bound no healthy call here comes near; hitting it means a hang.
const HANG: Duration = Duration::from_secs(30);

fn send(key: &str, text: &str) -> SendRequest {
    SendRequest {
        key: key.to_string(),
        text: text.to_string(),
        from: Sender::default(),
        idempotency_key: None,
    }
}

async fn transcript(api: &dyn SessionsApi, key: &str) -> TranscriptPage {
    api.transcript(TranscriptQuery {
        key: key.to_string(),
        limit: 10_000,
        ..TranscriptQuery::default()
    })
    .await
    .expect("transcript")
}

fn texts(page: &TranscriptPage, role: LineRole) -> Vec<String> {
    page.lines
        .iter()
        .filter(|l| l.role == role)
        .map(|l| l.text.clone())
        .collect()
}

/// 100 messages into one session, their calls made one after the other in one task and
/// all in flight at once: the transcript holds them in call order, and the runs answer
/// them in the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sends_land_in_call_order_and_are_answered_in_order() {
    let b = common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "reply": "re: {{text}}" } ] },
        ] },
    }));
    let api = b.engine.start();
    let key = "agent:main:main";
    let wanted: Vec<String> = (0..100).map(|i| format!("line {i:03}")).collect();
    let calls = wanted
        .iter()
        .map(|t| Box::pin(api.send(send(key, t))) as Pin<Box<dyn Future<Output = _> + Send>>)
        .collect();
    let receipts: Vec<SendReceipt> = tokio::time::timeout(HANG, common::join::join_in_order(calls))
        .await
        .expect("the sends end")
        .into_iter()
        .collect::<Result<_, ApiError>>()
        .expect("every send is recorded");
    // Sequence numbers follow the calls.
    let seqs: Vec<i64> = receipts.iter().map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    for r in &receipts {
        let run = r.run_id.as_deref().expect("a run answers");
        let done = api.wait_run(run, HANG).await.expect("wait_run");
        assert_eq!(done.status.as_str(), "ok", "{done:?}");
        assert!(api.wait_work(r.work, HANG).await.expect("wait_work"));
    }
    let page = transcript(api.as_ref(), key).await;
    assert_eq!(texts(&page, LineRole::User), wanted);
    let replies: Vec<String> = wanted.iter().map(|t| format!("re: {t}")).collect();
    assert_eq!(texts(&page, LineRole::Assistant), replies);
}

const EXCHANGE: &str = r#"{
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  session: { agentToAgent: { maxPingPongTurns: 2 } },
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [
      { when: { step: "message", text: "/^ask (\\S+) (.*)/" },
        tools: [{ name: "sessions_send", args: { agentId: "$1", message: "$2" } }],
        reply: "asked $1" },
      { when: { step: "reply" }, reply: "main hears: {{text}}" },
      { when: { step: "announce" }, reply: "main announces: {{text}}" },
      { reply: "main got: {{text}}" },
    ] },
    { id: "work", model: "scripted", script: [
      { when: { step: "message" }, reply: "work: {{text}}" },
      { when: { step: "reply" }, reply: "work again: {{text}}" },
      { when: { step: "announce" }, reply: "work announces: {{text}}" },
    ] },
    { id: "slow", model: "scripted", script: [
      { delayMs: 8000, reply: "slow at last" },
    ] },
  ] },
}"#;

fn exchange_bench() -> common::Bench {
    let config: serde_json::Value = json5::from_str(EXCHANGE).expect("test config");
    common::bench(config)
}

/// `wait_work` covers what the send set off (the exchange's rounds and its announce), and
/// only that: another call's long run is still going when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_work_waits_for_the_calls_own_exchange_but_not_for_another_calls_run() {
    let b = exchange_bench();
    let api = b.engine.start();
    let mut events = api.subscribe();
    let slow = api
        .send(send("agent:slow:main", "take your time"))
        .await
        .expect("slow send");
    let asked = api
        .send(send("agent:main:main", "ask work status?"))
        .await
        .expect("send");
    assert!(
        api.wait_work(asked.work, HANG).await.expect("wait_work"),
        "the exchange did not end: {:?}",
        api.still_running(asked.work).await
    );
    // Everything the exchange did has happened by now: its loop ended and its announce ran.
    let mut seen = Vec::new();
    while let Some(item) = events.try_next() {
        if let StreamItem::Event(e) = item {
            seen.push(e.event);
        }
    }
    assert!(
        seen.iter()
            .any(|e| matches!(e, EngineEvent::ExchangeLoopEnded { .. })),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, EngineEvent::Announce { .. })),
        "{seen:?}"
    );
    let work = transcript(api.as_ref(), "agent:work:main").await;
    assert!(
        texts(&work, LineRole::Assistant)
            .iter()
            .any(|t| t.starts_with("work again:")),
        "{work:?}"
    );
    assert_eq!(
        api.still_running(asked.work).await.expect("running"),
        [],
        "nothing of the exchange is left"
    );
    // The other call's run was not waited for.
    let run = slow.run_id.as_deref().expect("slow run");
    let now = api.wait_run(run, Duration::ZERO).await.expect("wait_run");
    assert_eq!(now.status.as_str(), "running", "{now:?}");
    assert!(
        !api.still_running(slow.work)
            .await
            .expect("running")
            .is_empty()
    );
    // And it ends by itself.
    let done = api.wait_run(run, HANG).await.expect("wait_run");
    assert_eq!(
        (done.status.as_str(), done.reply.as_str()),
        ("ok", "slow at last")
    );
}

/// A transcript asked for a session deleted meanwhile says so (no error); keys that name
/// no session, or none a message can go to, are errors a user can act on, in the words the
/// command line prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_reads_as_gone_and_bad_keys_are_clear_errors() {
    let b = exchange_bench();
    let api = b.engine.start();
    let r = api
        .send(send("agent:work:main", "hello"))
        .await
        .expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("wait_work"));
    assert!(transcript(api.as_ref(), &r.key).await.exists);
    assert!(api.delete(&r.key).await.expect("delete"));
    let gone = transcript(api.as_ref(), &r.key).await;
    assert!(!gone.exists && gone.lines.is_empty(), "{gone:?}");
    assert_eq!(api.session(&r.key).await.expect("session"), None);

    assert_eq!(
        api.resolve_key("agent:work:main", KeyPurpose::Existing)
            .await,
        Err(ApiError::NotFound(
            "no session found: agent:work:main".into()
        ))
    );
    assert_eq!(
        api.resolve_key("current", KeyPurpose::Inbound).await,
        Err(ApiError::BadInput(
            "a message needs a real session key, not \"current\"".into()
        ))
    );
    assert_eq!(
        api.resolve_key("unknown", KeyPurpose::Inbound).await,
        Err(ApiError::BadInput(
            "\"unknown\" is a reserved key and cannot receive messages".into()
        ))
    );
    match api.resolve_key("  ", KeyPurpose::Inbound).await {
        Err(ApiError::BadInput(m)) => assert_eq!(
            m,
            "the session key is empty (e.g. agent:main:main, agent:main:telegram:group:42, cron:nightly)"
        ),
        other => panic!("{other:?}"),
    }
    for purpose in [
        KeyPurpose::Existing,
        KeyPurpose::Requester,
        KeyPurpose::Inbound,
    ] {
        match api.resolve_key("agent:main:\u{202e}niam", purpose).await {
            Err(ApiError::BadInput(m)) => {
                assert!(m.contains("U+202E") && m.contains("may not contain"), "{m}")
            }
            other => panic!("{purpose:?}: {other:?}"),
        }
    }
    // The same key sent to is created: the engine's answer to a send agrees with resolve.
    let back = api
        .resolve_key("agent:work:main", KeyPurpose::Inbound)
        .await
        .expect("resolve");
    assert!(!back.exists);
}

/// Read what the stream holds now; panics on a second gap or a jump in the numbers.
fn drain_in_order(
    events: &mut switchboard_types::api::EventStream,
    last: &mut Option<u64>,
) -> Vec<EngineEvent> {
    let mut seen = Vec::new();
    while let Some(item) = events.try_next() {
        let StreamItem::Event(e) = item else {
            panic!("unexpected {item:?} after {last:?}");
        };
        if let Some(l) = *last {
            assert_eq!(e.seq, l + 1, "numbers jump");
        }
        *last = Some(e.seq);
        seen.push(e.event);
    }
    seen
}

/// A subscriber that stops reading while more events pass than the stream holds is told
/// how many it missed (once), then gets every event still held and all that follow, in
/// order, none dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_is_told_and_then_gets_events_again() {
    let b = exchange_bench();
    let api = b.engine.start();
    let mut events = api.subscribe();
    // One event read before falling behind: the gap is counted from it.
    b.engine.events().emit(EngineEvent::ExternalChange);
    let first = match events.next().await {
        StreamItem::Event(e) => e.seq,
        other => panic!("{other:?}"),
    };
    for _ in 0..5_000 {
        b.engine.events().emit(EngineEvent::ExternalChange);
    }
    let missed = match events.next().await {
        StreamItem::Missed(n) => n,
        other => panic!("expected word of a gap, got {other:?}"),
    };
    assert_eq!(missed, 5_000 - 4_096);
    // The next event is the first one still held, right after the missed ones.
    let resumed = match events.next().await {
        StreamItem::Event(e) => e.seq,
        other => panic!("the gap was reported twice: {other:?}"),
    };
    assert_eq!(resumed, first + missed + 1);
    let mut last = Some(resumed);
    assert_eq!(drain_in_order(&mut events, &mut last).len(), 4_095);
    // And what happens afterwards.
    let r = api.send(send("agent:work:main", "hi")).await.expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("wait_work"));
    let after = drain_in_order(&mut events, &mut last);
    assert!(
        after
            .iter()
            .any(|e| matches!(e, EngineEvent::MessageAppended { .. })),
        "the send after the gap was not seen: {after:?}"
    );
}

/// Another engine (another process, as far as the database knows) writing into the same
/// folder reaches this engine's subscribers as `ExternalChange`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_engine_writing_on_the_folder_is_an_event_here() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = || {
        let v: serde_json::Value = json5::from_str(EXCHANGE).expect("test config");
        serde_json::from_value(v).expect("config")
    };
    let here = crate::common::open_engine(dir.path(), config()).expect("engine");
    let api = here.start();
    let mut events = api.subscribe();
    let other = crate::common::open_engine(dir.path(), config()).expect("second engine");
    let other_api = other.start();
    let r = other_api
        .send(send("agent:work:main", "from elsewhere"))
        .await
        .expect("send");
    assert!(other_api.wait_work(r.work, HANG).await.expect("wait_work"));
    let seen = tokio::time::timeout(HANG, async {
        loop {
            match events.next().await {
                StreamItem::Event(e) if e.event == EngineEvent::ExternalChange => return,
                // On a store whose nodes relay their events (PostgreSQL), the other engine's
                // own event arrives instead.
                StreamItem::Event(e)
                    if std::env::var("SWITCHBOARD_TEST_STORE").is_ok_and(|s| s == "postgres")
                        && matches!(&e.event, EngineEvent::MessageAppended { key, .. }
                            if key == "agent:work:main") =>
                {
                    return;
                }
                StreamItem::Closed => panic!("the stream closed"),
                _ => {}
            }
        }
    })
    .await;
    assert!(
        seen.is_ok(),
        "no ExternalChange for the other engine's writes"
    );
    // And what it wrote reads here.
    let page = transcript(api.as_ref(), "agent:work:main").await;
    assert_eq!(texts(&page, LineRole::User), ["from elsewhere"]);
}

/// A caller that gives up waiting for a run, or drops its send before it returns, stops
/// nothing: the run goes on and its reply is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_goes_away_leaves_the_run_going_and_its_result_kept() {
    let b = common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "delayMs": 300, "reply": "re: {{text}}" } ] },
        ] },
    }));
    let api: Arc<dyn SessionsApi> = b.engine.start();
    let key = "agent:main:main";

    // Gives up on the run at once.
    let r = api.send(send(key, "first")).await.expect("send");
    let run = r.run_id.clone().expect("a run");
    let early = api.wait_run(&run, Duration::ZERO).await.expect("wait_run");
    assert_eq!(early.status.as_str(), "running");
    drop(early);

    // Drops its send after the call began (one poll), before it returned.
    {
        let mut call = api.send(send(key, "second"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "the send finished in one poll");
    }

    // A later caller's message still gets through (the session's line is not stuck).
    let third = tokio::time::timeout(HANG, api.send(send(key, "third")))
        .await
        .expect("the next send is not blocked")
        .expect("send");
    assert!(api.wait_work(third.work, HANG).await.expect("wait_work"));
    let done = api.wait_run(&run, HANG).await.expect("wait_run");
    assert_eq!(
        (done.status.as_str(), done.reply.as_str()),
        ("ok", "re: first")
    );

    // Every message recorded is answered: the dropped call's too.
    tokio::time::timeout(HANG, b.engine.idle())
        .await
        .expect("the engine settles");
    let page = transcript(api.as_ref(), key).await;
    let asked = texts(&page, LineRole::User);
    let answered = texts(&page, LineRole::Assistant);
    assert_eq!(
        asked,
        ["first", "second", "third"],
        "the dropped call's message was lost"
    );
    assert_eq!(answered, ["re: first", "re: second", "re: third"]);
}

/// A send is answered only once its message and its run are both on disk: the run the
/// receipt names is recorded (`running`) the moment `send` returns, so a crash right after
/// the answer leaves a run that recovery closes and `wait_run` reports, never an unknown
/// id. (Before, the run's row was written 20 ms into its turn: a receipt could name a run
/// that no restart would ever know.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_acknowledged_with_its_run_recorded() {
    let b = exchange_bench();
    let api = b.engine.start();
    let receipt = api
        .send(send("agent:slow:main", "take your time"))
        .await
        .expect("send");
    let run_id = receipt.run_id.expect("a run answers the message");
    let run = b
        .engine
        .run(&run_id)
        .await
        .expect("read")
        .expect("the acknowledged run is recorded");
    assert_eq!(run.status.as_str(), "running", "{run:?}");
    assert_eq!(run.session_key, "agent:slow:main");
}

/// One key sent at once into two sessions: the writer's transaction admits exactly one; the
/// other is refused, and nothing of it is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_raced_into_two_sessions_records_one_message() {
    let b = exchange_bench();
    let api = b.engine.start();
    let keyed = |key: &str| SendRequest {
        idempotency_key: Some("raced".into()),
        ..send(key, "the same words")
    };
    let (a, c) = tokio::join!(
        api.send(keyed("agent:main:left")),
        api.send(keyed("agent:main:right"))
    );
    let (won, lost) = match (a, c) {
        (Ok(w), Err(l)) => (w, l),
        (Err(l), Ok(w)) => (w, l),
        other => panic!("exactly one send is recorded: {other:?}"),
    };
    assert!(
        matches!(&lost, ApiError::BadInput(m) if m.contains("raced") && m.contains(&won.display_key)),
        "{lost:?}"
    );
    let other = if won.key == "agent:main:left" {
        "agent:main:right"
    } else {
        "agent:main:left"
    };
    let page = transcript(api.as_ref(), other).await;
    assert!(texts(&page, LineRole::User).is_empty(), "{page:?}");
    let page = transcript(api.as_ref(), &won.key).await;
    assert_eq!(texts(&page, LineRole::User), ["the same words"]);
}

/// A key is stored and quoted back: an empty one, one over 256 bytes or one with control
/// characters is refused before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_idempotency_key_is_refused_with_its_rule() {
    let b = exchange_bench();
    let api = b.engine.start();
    for bad in [String::new(), "k".repeat(257), "a\u{1b}[2Jb".to_string()] {
        let request = SendRequest {
            idempotency_key: Some(bad.clone()),
            ..send("agent:main:keys", "hello")
        };
        let refused = api.send(request).await.expect_err("refused");
        assert!(
            matches!(&refused, ApiError::BadInput(m) if m.contains("idempotencyKey must be 1 to 256 bytes")),
            "{bad:?}: {refused:?}"
        );
    }
    let page = transcript(api.as_ref(), "agent:main:keys").await;
    assert!(!page.exists, "{page:?}");
}
