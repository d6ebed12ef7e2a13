//! Over a real gateway (`server::run` in this process, a real socket, a real engine on
//! disk), reached by `RemoteApi` as `--connect` reaches it: the sessions page's name order
//! travels both ways (asked for in the query, reported in the page), and a send refused by
//! the target's policy names its requester in the event, so the console's traffic view,
//! running on the remote API, counts each refusal on its own pair.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_engine::store::SessionInit;
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_server as server;
use switchboard_tui::action::Intent;
use switchboard_tui::state::State;
use switchboard_types::api::{
    EngineEvent, PatchRequest, PolicySetting, SessionKind, SessionsApi, SessionsOrder,
    SessionsQuery, StreamItem, ToolCall,
};
use switchboard_types::key::SessionKey;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use common::console_driver::Driver;

const TOKEN: &str = "sort-test-token";

/// A gateway in front of `api` on a free port; dropping the sender stops it.
async fn gateway(api: Arc<dyn SessionsApi>) -> (Arc<RemoteApi>, oneshot::Sender<()>) {
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
    let mut o = LinkOptions::new(format!("ws://{addr}"), Some(TOKEN.into()));
    o.connect_timeout = Duration::from_secs(5);
    let link = Link::connect(o)
        .await
        .expect("the gateway accepts the token");
    (RemoteApi::new(Arc::new(link)), stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_order_travels_over_the_gateway() {
    let b = common::bench(json!({}));
    let local = b.engine.start();
    // Created in the opposite of their name order, so activity and name disagree.
    let names = ["zeta", "Yankee", "x-ray", "Whiskey", "victor", "Uniform"];
    for (i, name) in names.iter().enumerate() {
        let key = if i % 2 == 0 {
            format!("agent:main:discord:group:{i}")
        } else {
            format!("agent:main:dm-{i}")
        };
        let init = SessionInit {
            display_name: Some((*name).into()),
            ..SessionInit::default()
        };
        b.engine
            .store()
            .ensure(&SessionKey::from_canonical(key), init)
            .await
            .expect("ensure");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (remote, _stop) = gateway(local.clone()).await;
    for kinds in [vec![], vec![SessionKind::Group]] {
        let q = SessionsQuery {
            kinds: kinds.clone(),
            limit: 3,
            offset: 1,
            count: true,
            order: SessionsOrder::Name,
            ..SessionsQuery::default()
        };
        let there = remote.sessions(q.clone()).await.expect("remote page");
        let here = local.sessions(q).await.expect("local page");
        assert_eq!(there, here, "kinds {kinds:?}");
        assert_eq!(there.order, SessionsOrder::Name);
        let got: Vec<&str> = there.rows.iter().map(|r| r.name.as_str()).collect();
        let want: &[&str] = if kinds.is_empty() {
            &["victor", "Whiskey", "x-ray"]
        } else {
            &["x-ray", "zeta"]
        };
        assert_eq!(got, want, "kinds {kinds:?}");
    }
    // Without an order the page is newest first, as before, and says so.
    let there = remote
        .sessions(SessionsQuery {
            limit: 2,
            ..SessionsQuery::default()
        })
        .await
        .expect("remote page");
    assert_eq!(there.order, SessionsOrder::Activity);
    let got: Vec<&str> = there.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(got, ["Uniform", "victor"]);
}

const TARGET: &str = "agent:main:discord:group:quiet";
const FROM_MAIN: &str = "agent:main:main";
const FROM_OPS: &str = "agent:ops:main";

fn refusal_config() -> serde_json::Value {
    json!({
        "tools": {
            "sessions": { "visibility": "all" },
            "agentToAgent": { "enabled": true, "allow": ["*"] },
        },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "script": [ { "reply": "ok" } ] },
            { "id": "ops", "model": "scripted", "script": [ { "reply": "ok" } ] },
        ] },
    })
}

async fn refused_send(api: &dyn SessionsApi, requester: &str) {
    let r = api
        .call_tool(ToolCall {
            tool: "sessions_send".into(),
            params: json!({ "sessionKey": TARGET, "message": "hello?", "timeoutSeconds": 0 }),
            requester: requester.into(),
            sandboxed: false,
        })
        .await
        .expect("the tool answers");
    assert_eq!(r.result["status"], "forbidden", "{}", r.result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refused_send_counts_on_its_own_pair_in_the_remote_console() {
    let b = common::bench(refusal_config());
    let local = b.engine.start();
    for key in [TARGET, FROM_MAIN, FROM_OPS] {
        b.engine
            .store()
            .ensure(&SessionKey::from_canonical(key), SessionInit::default())
            .await
            .expect("ensure");
    }
    local
        .patch(PatchRequest {
            key: TARGET.into(),
            send_policy: Some(PolicySetting::Deny),
        })
        .await
        .expect("deny sends into the target");
    let (remote, _stop) = gateway(local.clone()).await;
    let mut events = remote.subscribe();

    // The console on the remote API, traffic view open (its history read while it is
    // empty), so what follows is counted from the live events alone.
    let mut state = State::new("remote".into(), switchboard_tui::now_ms());
    state.width = 120;
    state.height = 40;
    let mut d = Driver::new(remote.clone(), state);
    d.settle().await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;

    refused_send(remote.as_ref(), FROM_MAIN).await;
    refused_send(remote.as_ref(), FROM_OPS).await;
    refused_send(remote.as_ref(), FROM_OPS).await;

    // The refusal events carry their requesters over the wire.
    let mut requesters = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while requesters.len() < 3 {
        let item = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("three refusal events within 30 s");
        if let StreamItem::Event(s) = item
            && let EngineEvent::PolicyDecision {
                key,
                action,
                allowed: false,
                requester,
                ..
            } = s.event
            && key == TARGET
            && action.as_str() == "send"
        {
            requesters.push(requester);
        }
    }
    assert_eq!(
        requesters,
        [
            Some(FROM_MAIN.to_string()),
            Some(FROM_OPS.to_string()),
            Some(FROM_OPS.to_string())
        ]
    );

    d.until("the refusals to count on their pairs", |s| {
        let refused = |from: &str| {
            s.traffic
                .sessions
                .get(from, TARGET)
                .map_or(0, |p| p.hour.refused)
        };
        refused(FROM_MAIN) == 1 && refused(FROM_OPS) == 2
    })
    .await;
    let t = &d.console.state.traffic;
    assert!(
        t.sessions.get("?", TARGET).is_none(),
        "no refusal is left without its requester"
    );
    // And by agent: main → main and ops → main, one and two.
    assert_eq!(
        t.agents
            .get("agent:main", "agent:main")
            .map(|p| p.hour.refused),
        Some(1)
    );
    assert_eq!(
        t.agents
            .get("agent:ops", "agent:main")
            .map(|p| p.hour.refused),
        Some(2)
    );
}
