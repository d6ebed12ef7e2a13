//! The demo (`switchboard demo`): its config is valid and denies exactly the one demo group;
//! `seed` leaves a realistic set of sessions and every kind of finished exchange the console
//! is meant to show; `start_traffic` keeps messages coming and stops when aborted.
//!
//! Real time, as the other flow tests (the writer thread and the flows' own timeouts do not
//! mix with tokio's paused clock); the demo's script delays are at most 600 ms.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard::demo::{self, DENIED_GROUP};
use switchboard_engine::Engine;
use switchboard_engine::events::EngineEvent;
use switchboard_engine::policy::{self, SendPolicy};
use switchboard_engine::tools::ToolContext;
use switchboard_types::key::SessionKey;
use tempfile::TempDir;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::TryRecvError;

fn open() -> (Engine, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = demo::demo_config().expect("the demo config parses");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine opens");
    (engine, dir)
}

/// Every event received so far (the channel holds 4,096; the seed sends far fewer).
fn drain(rx: &mut Receiver<EngineEvent>) -> Vec<EngineEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(TryRecvError::Lagged(n)) => panic!("lost {n} events"),
            Err(_) => return out,
        }
    }
}

/// Every session, archived ones included, as the owner's main session sees them.
async fn all_sessions(engine: &Engine) -> Vec<Value> {
    let ctx = ToolContext::new(SessionKey::from_canonical("agent:main:main"), false);
    let list = engine
        .call_tool(
            "sessions_list",
            &json!({ "limit": 200, "includeArchived": true }),
            &ctx,
        )
        .await
        .expect("sessions_list runs");
    list["sessions"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_demo_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-config.json5");
    let problems = switchboard_config::check_file(&path).expect("readable");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), demo::DEMO_CONFIG);

    let config = demo::demo_config().unwrap();
    let ids: Vec<&str> = config.agents.list.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["main", "ops", "research", "support"]);
    assert_eq!(config.default_agent_id(), "main");
    assert_eq!(config.tools.sessions.visibility.as_str(), "all");
    assert!(config.tools.agent_to_agent.enabled);
    assert_eq!(config.session.agent_to_agent.max_ping_pong_turns(), 3);
    let main = config.agent("main").unwrap();
    assert!(
        main.subagents
            .allow_agents
            .as_ref()
            .is_some_and(|a| a.iter().any(|id| id == "research"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seed_leaves_sessions_and_finished_exchanges_of_every_kind() {
    let (engine, _dir) = open();
    let mut rx = engine.events().subscribe();
    tokio::time::timeout(Duration::from_secs(10), demo::seed(engine.start().as_ref()))
        .await
        .expect("the seed settles")
        .expect("the seed works");
    let events = drain(&mut rx);

    // Sessions: at least 8, of at least 4 kinds.
    let sessions = all_sessions(&engine).await;
    assert!(sessions.len() >= 8, "{} sessions", sessions.len());
    let kinds: BTreeSet<&str> = sessions.iter().filter_map(|s| s["kind"].as_str()).collect();
    for kind in ["main", "group", "cron", "hook"] {
        assert!(kinds.contains(kind), "no {kind} session: {kinds:?}");
    }
    assert!(engine.store().count().await.unwrap() >= 8);

    // The send policy denies exactly the demo's #random, and no other session.
    let mut denied = Vec::new();
    for s in &sessions {
        let key = SessionKey::from_canonical(s["key"].as_str().unwrap());
        let stored = engine
            .store()
            .get(&key)
            .await
            .unwrap()
            .expect("listed, so stored");
        if policy::evaluate(engine.config(), &key, &stored.entry).policy == SendPolicy::Deny {
            denied.push(key.to_string());
        }
    }
    assert_eq!(denied, [DENIED_GROUP]);

    // Every turn of every script ran without failing.
    let failed: Vec<&EngineEvent> = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::RunEnded { status, .. } if status.as_str() != "ok"))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");

    let loop_ended = |want: &str| {
        events.iter().any(
            |e| matches!(e, EngineEvent::ExchangeLoopEnded { reason, .. } if reason.as_str() == want),
        )
    };
    assert!(loop_ended("cap"), "no exchange ended by the cap");
    assert!(loop_ended("reply_skip"), "no exchange ended by REPLY_SKIP");

    let announced = |want: &str| {
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Announce { outcome, .. } if outcome.as_str() == want))
    };
    assert!(announced("delivered"), "no announce delivered");
    assert!(announced("skipped"), "no announce skipped");
    let delivered_to_incidents = events.iter().any(|e| {
        matches!(e, EngineEvent::Announce { outcome, target, channel, .. }
            if outcome.as_str() == "delivered" && target.as_str() == "agent:ops:slack:group:incidents"
                && channel.as_deref() == Some("slack"))
    });
    assert!(delivered_to_incidents);

    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Spawned { label: Some(_), .. })),
        "no labelled spawn"
    );
    assert!(
        events.iter().any(
            |e| matches!(e, EngineEvent::SpawnAnnounce { text: Some(t), .. }
            if t.contains("Result: Nightly report"))
        ),
        "no sub-agent announce with the child's result"
    );

    // The send into #random was refused, and main told the owner why.
    assert!(events.iter().any(|e| matches!(e,
        EngineEvent::PolicyDecision { key, action, allowed: false, .. }
            if key == DENIED_GROUP && action.as_str() == "send")));
    let forbidden_reply = events.iter().any(|e| {
        matches!(e, EngineEvent::RunEnded { key, reply: Some(r), .. }
            if key == "agent:main:main" && r.contains("(forbidden): send blocked by session policy"))
    });
    assert!(forbidden_reply, "main did not relay the refusal");
    // Substitutions worked: relayed answers carry the other agent's reply.
    assert!(events.iter().any(|e| matches!(e,
        EngineEvent::RunEnded { reply: Some(r), .. }
            if r.starts_with("Asked ops in #incidents. They said: INC-4821"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_keeps_coming_until_aborted() {
    let (engine, _dir) = open();
    let mut rx = engine.events().subscribe();
    let traffic = demo::start_traffic(engine.start(), Duration::from_millis(20));

    // A new inbound message within a second.
    let appended = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match rx.recv().await {
                Ok(EngineEvent::MessageAppended { line, .. })
                    if line["message"]["provenance"]["kind"] == "external_user" =>
                {
                    return;
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream closed: {e}"),
            }
        }
    })
    .await;
    assert!(appended.is_ok(), "no message within a second");

    traffic.abort();
    let ended = traffic.await;
    assert!(
        ended.is_err_and(|e| e.is_cancelled()),
        "the traffic task stopped on its own"
    );

    // What the messages set off still finishes, and nothing new arrives afterwards.
    tokio::time::timeout(Duration::from_secs(4), engine.idle())
        .await
        .expect("the work the traffic started finishes");
    let count = engine.store().count().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(engine.store().count().await.unwrap(), count);
    let later = drain(&mut rx);
    assert!(
        !later
            .iter()
            .any(|e| matches!(e, EngineEvent::MessageAppended { line, .. }
            if line["message"]["provenance"]["kind"] == "external_user")),
        "a message arrived after the abort"
    );
}

/// Issue 26 item 6: the demo opens on a lively session with the top row selected, the same
/// every run. Two seeds on two engines each leave the console's opening session (Alice's
/// chat) the newest, whatever order the others finished in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_seed_leaves_the_opening_session_on_top() {
    for _ in 0..2 {
        let (engine, _dir) = open();
        tokio::time::timeout(Duration::from_secs(20), demo::seed(engine.start().as_ref()))
            .await
            .expect("the seed settles")
            .expect("the seed works");
        let top = all_sessions(&engine).await.first().cloned();
        assert_eq!(
            top.as_ref().and_then(|s| s["key"].as_str()),
            Some(demo::OPENING),
            "{top:?}"
        );
    }
}
