//! Several sources as one API (`switchboard_sources::Sources`): a local engine and a second
//! engine behind a real gateway socket. Merged lists in order and paged by per-source
//! cursors, the same key on two sources kept apart, calls reaching only their own source,
//! references in every answer and event naming their source, and a source that cannot attach
//! answering for itself while the others go on.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_server as server;
use switchboard_sources::{Attach, Source, Sources, SourcesError};
use switchboard_types::api::source::SourceKind;
use switchboard_types::api::{
    ApiError, ExchangesQuery, KeyPurpose, LinkState, PatchRequest, PolicySetting, SessionsApi,
    SessionsQuery, StreamItem, TranscriptQuery,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const TOKEN: &str = "sources-test-token";
const HANG: Duration = Duration::from_secs(30);

fn config() -> Value {
    json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted",
              "script": [ { "reply": "re: {{text}}" } ] },
            { "id": "ops", "model": "scripted", "script": [ { "reply": "ok" } ] },
        ] },
        "tools": { "agentToAgent": { "enabled": true }, "sessions": { "visibility": "all" } },
    })
}

use crate::common::owner;

/// A gateway in front of `api` on a fresh port, and a remote API attached to it.
async fn gateway(api: Arc<dyn SessionsApi>) -> (Arc<dyn SessionsApi>, oneshot::Sender<()>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server::run(
        listener,
        api,
        server::Options::new(TOKEN.into()),
        async move {
            let _ = stopped.await;
        },
    ));
    let url = format!("ws://{addr}");
    let mut o = LinkOptions::new(url.clone(), Some(TOKEN.into()));
    o.connect_timeout = Duration::from_secs(5);
    let link = Link::connect(o)
        .await
        .expect("the gateway accepts the token");
    (RemoteApi::new(Arc::new(link)), stop, url)
}

struct Two {
    api: Arc<Sources>,
    home: Arc<dyn SessionsApi>,
    team: Arc<dyn SessionsApi>,
    _benches: (common::Bench, common::Bench),
    _stop: oneshot::Sender<()>,
}

/// `home`: a local engine; `team`: another engine behind a real gateway.
async fn two() -> Two {
    let home_bench = common::bench(config());
    let team_bench = common::bench(config());
    let home = home_bench.engine.start();
    let (team, stop, url) = gateway(team_bench.engine.start()).await;
    let api = Sources::new(vec![
        Source::ready("home", SourceKind::Local, "/tmp/home", home.clone()),
        Source::ready("team", SourceKind::Gateway, url, team.clone()),
    ])
    .expect("two sources");
    Two {
        api,
        home,
        team,
        _benches: (home_bench, team_bench),
        _stop: stop,
    }
}

async fn put(api: &Arc<dyn SessionsApi>, key: &str, text: &str) {
    let r = api.send(owner(key, text)).await.expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
}

fn keys(rows: &[switchboard_types::api::SessionRow]) -> Vec<String> {
    rows.iter().map(|r| r.key.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_pages_follow_activity_across_sources_and_page_by_their_own_cursors() {
    let t = two().await;
    // Interleaved activity: home, team, home, team …
    for i in 0..7 {
        put(&t.home, &format!("agent:main:h{i}"), "hi").await;
        put(&t.team, &format!("agent:ops:t{i}"), "hi").await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // The whole merged order, from each source's own full list.
    let mut want = Vec::new();
    for (name, api) in [("home", &t.home), ("team", &t.team)] {
        let page = api
            .sessions(SessionsQuery {
                limit: 100,
                ..Default::default()
            })
            .await
            .expect("list");
        for mut row in page.rows {
            row.key = format!("{name}/{}", row.key);
            want.push(row);
        }
    }
    want.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.key.cmp(&b.key)));
    let want = keys(&want);
    assert_eq!(want.len(), 14);
    assert!(want[0].starts_with("team/"), "{want:?}");

    // Pages of 3 in turn, and one page asked for out of turn (walked to).
    let mut got = Vec::new();
    let mut offset = 0;
    loop {
        let page = t
            .api
            .sessions(SessionsQuery {
                offset,
                limit: 3,
                count: true,
                ..Default::default()
            })
            .await
            .expect("merged page");
        assert_eq!(page.matching, Some(14));
        assert_eq!(page.total, 14);
        if page.rows.is_empty() {
            break;
        }
        offset += page.rows.len();
        got.extend(keys(&page.rows));
    }
    assert_eq!(got, want);

    let fresh = two().await;
    for i in 0..4 {
        put(&fresh.home, &format!("agent:main:h{i}"), "hi").await;
        put(&fresh.team, &format!("agent:ops:t{i}"), "hi").await;
    }
    let all = fresh
        .api
        .sessions(SessionsQuery {
            limit: 8,
            ..Default::default()
        })
        .await
        .expect("all");
    let jumped = fresh
        .api
        .sessions(SessionsQuery {
            offset: 5,
            limit: 2,
            ..Default::default()
        })
        .await
        .expect("a page asked for out of turn");
    assert_eq!(keys(&jumped.rows), keys(&all.rows[5..7]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_on_two_sources_is_two_sessions_and_calls_reach_only_their_own() {
    let t = two().await;
    put(&t.home, "agent:main:main", "at home").await;
    put(&t.team, "agent:main:main", "at work").await;

    let page = t
        .api
        .sessions(SessionsQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("list");
    let mut k = keys(&page.rows);
    k.sort();
    assert_eq!(k, ["home/agent:main:main", "team/agent:main:main"]);

    // A send names its source and lands there only.
    let r = t
        .api
        .send(owner("team/agent:main:main", "second"))
        .await
        .expect("send");
    assert_eq!(r.key, "team/agent:main:main");
    assert!(
        r.run_id
            .as_deref()
            .is_some_and(|id| id.starts_with("team/"))
    );
    assert!(t.api.wait_work(r.work, HANG).await.expect("work"));
    let run = t
        .api
        .wait_run(r.run_id.as_deref().unwrap_or_default(), HANG)
        .await
        .expect("run");
    assert_eq!(run.reply, "re: second");
    let text = |page: switchboard_types::api::TranscriptPage| -> Vec<String> {
        page.lines.into_iter().map(|l| l.text).collect()
    };
    let home_lines = text(
        t.home
            .transcript(TranscriptQuery {
                key: "agent:main:main".into(),
                limit: 50,
                ..Default::default()
            })
            .await
            .expect("home"),
    );
    let team_lines = text(
        t.team
            .transcript(TranscriptQuery {
                key: "agent:main:main".into(),
                limit: 50,
                ..Default::default()
            })
            .await
            .expect("team"),
    );
    assert!(
        !home_lines.iter().any(|l| l.contains("second")),
        "{home_lines:?}"
    );
    assert!(team_lines.iter().any(|l| l == "second"), "{team_lines:?}");

    // `/send off` (a patch) on one source only.
    let p = t
        .api
        .patch(PatchRequest {
            key: "home/agent:main:main".into(),
            send_policy: Some(PolicySetting::Deny),
        })
        .await
        .expect("patch");
    assert_eq!(p.key, "home/agent:main:main");
    let home = t.home.session("agent:main:main").await.unwrap().unwrap();
    let team = t.team.session("agent:main:main").await.unwrap().unwrap();
    assert!(home.row.policy.is_override(), "{:?}", home.row.policy);
    assert_eq!(home.row.policy.policy, PolicySetting::Deny);
    assert!(!team.row.policy.is_override(), "{:?}", team.row.policy);
    assert_eq!(team.row.policy.policy, PolicySetting::Allow);

    // A bare key two sources hold is refused, naming both; one only one holds is found.
    match t.api.send(owner("agent:main:main", "where?")).await {
        Err(ApiError::BadInput(m)) => {
            assert!(
                m.contains("home/agent:main:main") && m.contains("team/agent:main:main"),
                "{m}"
            )
        }
        other => panic!("a bare key on two sources must be refused: {other:?}"),
    }
    put(&t.team, "agent:ops:only-team", "x").await;
    let r = t
        .api
        .resolve_key("agent:ops:only-team", KeyPurpose::Existing)
        .await
        .expect("resolved");
    assert_eq!(r.key, "team/agent:ops:only-team");
    // A reference to a source that does not exist says which do.
    match t.api.session("nope/agent:main:main").await {
        Err(ApiError::BadInput(m)) => assert!(m.contains("home, team"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_exchanges_name_their_source() {
    let t = two().await;
    let mut events = t.api.subscribe();
    put(&t.team, "agent:main:main", "hello").await;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + HANG;
    while seen.len() < 3 && tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(HANG, events.next()).await {
            Ok(StreamItem::Event(e)) => seen.push(serde_json::to_value(&e.event).expect("json")),
            Ok(StreamItem::Missed(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    for e in &seen {
        if let Some(k) = e.get("key").and_then(Value::as_str) {
            assert!(k.starts_with("team/"), "{e}");
        }
        if let Some(k) = e.get("runId").and_then(Value::as_str) {
            assert!(k.starts_with("team/"), "{e}");
        }
    }

    // An exchange on home: its id, requester and target name home.
    put(&t.home, "agent:ops:main", "up").await;
    let r = t
        .api
        .call_tool(switchboard_types::api::ToolCall {
            tool: "sessions_send".into(),
            params: json!({"sessionKey": "home/agent:ops:main", "message": "ping", "timeoutSeconds": 0}),
            requester: "home/agent:main:main".into(),
            sandboxed: false,
        })
        .await
        .expect("tool");
    assert_eq!(r.result["status"], "accepted", "{}", r.result);
    assert!(
        r.result["runId"]
            .as_str()
            .is_some_and(|id| id.starts_with("home/")),
        "{}",
        r.result
    );
    assert!(t.api.wait_work(r.work, HANG).await.expect("work"));
    let page = t
        .api
        .exchanges(ExchangesQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("exchanges");
    assert_eq!(page.exchanges.len(), 1, "{page:?}");
    let e = &page.exchanges[0];
    assert!(e.id.starts_with("home/"), "{e:?}");
    assert_eq!(e.requester, "home/agent:main:main");
    assert_eq!(e.target, "home/agent:ops:main");
    let detail = t.api.exchange(&e.id).await.expect("detail").expect("there");
    assert_eq!(detail.summary.id, e.id);
    // A tool cannot reach across sources.
    match t
        .api
        .call_tool(switchboard_types::api::ToolCall {
            tool: "sessions_send".into(),
            params: json!({"sessionKey": "team/agent:ops:main", "message": "x"}),
            requester: "home/agent:main:main".into(),
            sandboxed: false,
        })
        .await
    {
        Err(ApiError::BadInput(m)) => assert!(m.contains("one source"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_cannot_attach_answers_for_itself_and_the_others_go_on() {
    let bench = common::bench(config());
    let home = bench.engine.start();
    put(&home, "agent:main:main", "hi").await;
    let api = Sources::new(vec![
        Source::ready("home", SourceKind::Local, "/tmp/a", home.clone()),
        Source {
            name: "team".into(),
            kind: SourceKind::Gateway,
            target: "ws://127.0.0.1:9".into(),
            attach: Attach::Dial(Box::new(|_state| {
                Box::pin(async { Err("bad token".to_string()) })
            })),
        },
        Source {
            name: "slow".into(),
            kind: SourceKind::Gateway,
            target: "ws://127.0.0.1:10".into(),
            // Never answers.
            attach: Attach::Dial(Box::new(|_state| Box::pin(std::future::pending()))),
        },
    ])
    .expect("sources");
    let page = api
        .sessions(SessionsQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("the local source answers");
    assert_eq!(keys(&page.rows), ["home/agent:main:main"]);
    let infos = api.sources();
    let team = infos.iter().find(|s| s.name == "team").expect("team");
    let mut state = team.state.clone().expect("a gateway has a link state");
    let failed = tokio::time::timeout(
        HANG,
        state.wait_for(|s| matches!(s, LinkState::Failed { .. })),
    )
    .await
    .expect("refused in time")
    .expect("state")
    .clone();
    assert_eq!(
        failed,
        LinkState::Failed {
            message: "bad token".into()
        }
    );
    match api.session("team/agent:main:main").await {
        Err(ApiError::Unavailable(m)) => assert!(m.contains("refused: bad token"), "{m}"),
        other => panic!("{other:?}"),
    }
    match api.session("slow/agent:main:main").await {
        Err(ApiError::Unavailable(m)) => assert!(m.contains("still connecting"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Sending to the one that works still works.
    let r = api
        .send(owner("home/agent:main:main", "more"))
        .await
        .expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sources_with_one_name_or_one_place_are_refused() {
    let bench = common::bench(config());
    let api = bench.engine.start();
    let src = |name: &str, target: &str| Source {
        name: name.into(),
        kind: SourceKind::Gateway,
        target: target.into(),
        attach: Attach::Ready(api.clone()),
    };
    assert!(matches!(
        Sources::new(vec![src("a", "ws://x:1"), src("a", "ws://y:1")]).err(),
        Some(SourcesError::SameName(n)) if n == "a"
    ));
    assert!(matches!(
        Sources::new(vec![src("a", "ws://X:1/"), src("b", "ws://x:1")]).err(),
        Some(SourcesError::SameTarget(..))
    ));
    assert!(matches!(
        Sources::new(vec![src("Bad", "ws://x:1")]).err(),
        Some(SourcesError::Name(_))
    ));
}

/// A source that never answers holds up no merged read (the list, traffic) and no call to
/// another source: before the bound, the merged page waited on it
/// for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_answers_holds_up_nothing_of_the_others() {
    use common::fake_api::{Answer, Data, FakeApi, row};
    use switchboard_types::api::SessionKind;
    let mut data = Data::default();
    data.rows
        .push(row("agent:main:main", "Alice", SessionKind::Main, 2_000));
    let home = Arc::new(FakeApi::new(data));
    let mut data = Data::default();
    data.rows
        .push(row("agent:ops:main", "ops", SessionKind::Main, 1_000));
    let stuck = Arc::new(FakeApi::new(data));
    let api = Sources::new(vec![
        Source::ready("home", SourceKind::Local, "/a", home.clone()),
        Source::ready("stuck", SourceKind::Gateway, "ws://b", stuck.clone()),
    ])
    .expect("sources");
    let query = SessionsQuery {
        limit: 10,
        ..Default::default()
    };
    // Both answer at first: the stuck source's rows are kept.
    let page = api.sessions(query.clone()).await.expect("both");
    assert_eq!(
        keys(&page.rows),
        ["home/agent:main:main", "stuck/agent:ops:main"]
    );
    stuck.set_answer(Answer::Never);
    for _ in 0..3 {
        let page = tokio::time::timeout(HANG, api.sessions(query.clone()))
            .await
            .expect("the merged page does not wait for the stuck source")
            .expect("home answers");
        // Its last answer stands in for it.
        assert_eq!(
            keys(&page.rows),
            ["home/agent:main:main", "stuck/agent:ops:main"]
        );
    }
    let traffic = tokio::time::timeout(HANG, api.traffic(0)).await;
    assert!(
        traffic.is_ok(),
        "traffic does not wait for the stuck source"
    );
    let r = tokio::time::timeout(HANG, api.send(owner("home/agent:main:main", "x")))
        .await
        .expect("a named send goes straight to its source");
    assert!(r.is_ok(), "{r:?}");
}

/// A source that floods events has its excess dropped at its own forwarding, so the other
/// sources' events all reach the subscriber, and a gap reports the drop once the flood
/// stops. Before, the flood filled the shared channel and pushed the others' events out;
/// then its own channel's overflow did the same with one gap per overflow (a fake's channel
/// of 1,024 events overflows all through this flood).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_floods_events_pushes_none_of_the_others_out() {
    use common::fake_api::{Data, FakeApi};
    use switchboard_types::api::EngineEvent;
    let calm = Arc::new(FakeApi::new(Data::default()));
    let flood = Arc::new(FakeApi::new(Data::default()));
    let api = Sources::new(vec![
        Source::ready("calm", SourceKind::Local, "/a", calm.clone()),
        Source::ready("flood", SourceKind::Gateway, "ws://b", flood.clone()),
    ])
    .expect("sources");
    let mut sub = api.subscribe();
    for i in 0..30_000u32 {
        flood.emit(EngineEvent::SessionUpdated {
            key: format!("agent:x:{i}"),
        });
        if i % 3_000 == 0 {
            calm.emit(EngineEvent::SessionUpdated {
                key: format!("agent:main:{i}"),
            });
        }
        if i % 20 == 0 {
            tokio::task::yield_now().await;
        }
    }
    // The flood is over: every calm event arrives, and the flood's drop is reported after a
    // quiet spell (read until both, or the bound: a dropped calm event never comes).
    let (mut calm_seen, mut flood_seen, mut gaps) = (0, 0, 0);
    let deadline = tokio::time::Instant::now() + HANG;
    while (calm_seen < 10 || gaps == 0) && tokio::time::Instant::now() < deadline {
        let Some(item) = sub.try_next() else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        match item {
            StreamItem::Event(e) => match e.event {
                EngineEvent::SessionUpdated { key } if key.starts_with("calm/") => calm_seen += 1,
                EngineEvent::SessionUpdated { key } if key.starts_with("flood/") => flood_seen += 1,
                other => panic!("{other:?}"),
            },
            StreamItem::Missed(_) => gaps += 1,
            StreamItem::Closed => break,
        }
    }
    assert_eq!(
        calm_seen, 10,
        "every calm event ({flood_seen} of the flood's passed)"
    );
    assert!(flood_seen < 30_000, "{flood_seen}");
    assert!(gaps >= 1, "the flood's drop is reported");
}

/// A source removed while running (taken out of the config): its calls say so, its rows
/// leave the merged list, the subscriber is told to reload, and the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_source_leaves_the_lists_and_says_so() {
    let t = two().await;
    put(&t.home, "agent:main:main", "hi").await;
    put(&t.team, "agent:main:main", "hi").await;
    let mut sub = t.api.subscribe();
    assert!(t.api.remove("team"));
    assert!(!t.api.remove("team"), "once");
    let page = t
        .api
        .sessions(SessionsQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("home answers");
    assert_eq!(keys(&page.rows), ["home/agent:main:main"]);
    match t.api.send(owner("team/agent:main:main", "x")).await {
        Err(ApiError::Unavailable(m)) => assert!(m.contains("removed"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        tokio::time::timeout(HANG, sub.next()).await,
        Ok(StreamItem::Missed(_))
    ));
    assert_eq!(
        t.api
            .sources()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["home"]
    );
}
