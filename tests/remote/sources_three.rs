//! Three real sources in one API, as an owner with a home engine, a team gateway and an
//! OpenClaw gateway has them: the local engine, a real `switchboard serve` process, and a
//! fake OpenClaw gateway on a real socket replaying a ping-pong captured from 2026.9.6
//! (`openclaw_record`). Merged ordering and paging, the same key on two sources kept apart,
//! a send and a `/send off` reaching only their own source, the traffic with pairs from two
//! sources, a source that stalls costing the others nothing, and the `serve` source dropping
//! (`kill -9`) and coming back on its port.

use crate::gateway_process::{self, BIN, TOKEN};
use crate::openclaw_record::{scenario, serve};

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_remote::openclaw::OpenClawApi;
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_sources::{Source, Sources};
use switchboard_types::api::source::SourceKind;
use switchboard_types::api::{
    ApiError, LinkState, PatchRequest, PolicySetting, SessionsApi, SessionsQuery, ToolCall,
};

const HANG: Duration = Duration::from_secs(30);
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6"
);

const CONFIG: &str = r#"{
  agents: { list: [
    { id: "main", default: true, model: "scripted", script: [ { reply: "re: {{text}}" } ] },
    { id: "ops", model: "scripted", script: [ { reply: "REPLY_SKIP" } ] },
  ] },
  tools: { agentToAgent: { enabled: true }, sessions: { visibility: "all" } },
}"#;

use crate::common::owner;

async fn link(url: &str, token: &str) -> Link {
    let mut o = LinkOptions::new(url.to_string(), Some(token.into()));
    o.connect_timeout = Duration::from_secs(5);
    o.ping_every = Duration::from_millis(200);
    Link::connect(o)
        .await
        .expect("the gateway accepts the token")
}

async fn put(api: &dyn SessionsApi, key: &str, text: &str) {
    let r = api.send(owner(key, text)).await.expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
}

/// `serve` again on the same state folder and port (after `kill -9`).
fn restart(state: &std::path::Path, config: &std::path::Path, addr: &str) -> std::process::Child {
    // The port may linger a moment after the kill: try for a while.
    for _ in 0..50 {
        let mut child = Command::new(BIN)
            .args(["serve", "--bind", addr])
            .env("SWITCHBOARD_STATE_DIR", state)
            .env("SWITCHBOARD_CONFIG", config)
            .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
            .env_remove("SWITCHBOARD_FAILPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve");
        std::thread::sleep(Duration::from_millis(300));
        if child.try_wait().expect("wait").is_none() {
            return child;
        }
    }
    panic!("serve did not start again on {addr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_real_sources_merge_keep_apart_route_and_survive_a_drop() {
    // home: the local engine.
    let home_config: switchboard_config::Config =
        switchboard_config::load::parse_str(CONFIG).expect("config");
    let dir = tempfile::tempdir().expect("dir");
    let engine = switchboard::state_folder::open_engine(dir.path(), home_config).expect("engine");
    let home = engine.start();
    // team: a real `serve` process.
    let mut team_gw = gateway_process::start_with_config(CONFIG, &[]);
    let team_url = format!("ws://{}", team_gw.addr);
    let team: Arc<dyn SessionsApi> = RemoteApi::new(Arc::new(link(&team_url, TOKEN).await));
    // oc: a fake OpenClaw 2026.9.6 replaying a captured ping-pong.
    let gw = Arc::new(scenario(&format!(
        "{FIXTURES}/exchanges/s2-telegram-pingpong"
    )));
    let oc_url = serve(gw).await;
    let oc: Arc<dyn SessionsApi> = Arc::new(OpenClawApi::new(Arc::new(
        link(&oc_url, "test-token").await,
    )));

    let api = Sources::new(vec![
        Source::ready(
            "home",
            SourceKind::Local,
            dir.path().display().to_string(),
            home.clone(),
        ),
        Source::ready("team", SourceKind::Gateway, team_url.clone(), team.clone()),
        Source::ready("oc", SourceKind::Gateway, oc_url.clone(), oc.clone()),
    ])
    .expect("three sources");

    // Activity on home and team, the same key on both, and an exchange on home.
    put(home.as_ref(), "agent:main:main", "at home").await;
    put(team.as_ref(), "agent:main:main", "at work").await;
    put(team.as_ref(), "agent:ops:main", "ops up").await;
    put(home.as_ref(), "agent:ops:main", "ops up").await;
    let r = api
        .call_tool(ToolCall {
            tool: "sessions_send".into(),
            params: json!({"sessionKey": "home/agent:ops:main", "message": "status?", "timeoutSeconds": 0}),
            requester: "home/agent:main:main".into(),
            sandboxed: false,
        })
        .await
        .expect("sessions_send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));

    // The merged order is every source's own list merged by activity; pages of 2 walk it.
    let mut want = Vec::new();
    for (name, src) in [("home", &home), ("team", &team), ("oc", &oc)] {
        let page = src
            .sessions(SessionsQuery {
                limit: 200,
                ..Default::default()
            })
            .await
            .expect("a source's list");
        want.extend(
            page.rows
                .into_iter()
                .map(|r| (r.updated_at, format!("{name}/{}", r.key))),
        );
    }
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let want: Vec<String> = want.into_iter().map(|(_, k)| k).collect();
    assert!(want.iter().any(|k| k.starts_with("oc/")), "{want:?}");
    let mut got = Vec::new();
    loop {
        let page = api
            .sessions(SessionsQuery {
                offset: got.len(),
                limit: 2,
                ..Default::default()
            })
            .await
            .expect("a merged page");
        if page.rows.is_empty() {
            break;
        }
        got.extend(page.rows.into_iter().map(|r| r.key));
    }
    assert_eq!(got, want);
    assert!(got.contains(&"home/agent:main:main".to_string()));
    assert!(got.contains(&"team/agent:main:main".to_string()));

    // A send and a `/send off` reach only their own source.
    let r = api
        .send(owner("team/agent:main:main", "only team"))
        .await
        .expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
    let lines = |src: Arc<dyn SessionsApi>| async move {
        src.transcript(switchboard_types::api::TranscriptQuery {
            key: "agent:main:main".into(),
            limit: 50,
            ..Default::default()
        })
        .await
        .expect("transcript")
        .lines
        .into_iter()
        .map(|l| l.text)
        .collect::<Vec<_>>()
    };
    assert!(lines(team.clone()).await.iter().any(|l| l == "only team"));
    assert!(!lines(home.clone()).await.iter().any(|l| l == "only team"));
    api.patch(PatchRequest {
        key: "home/agent:main:main".into(),
        send_policy: Some(PolicySetting::Deny),
    })
    .await
    .expect("patch");
    let policy = |src: Arc<dyn SessionsApi>| async move {
        src.session("agent:main:main")
            .await
            .expect("session")
            .expect("there")
            .row
            .policy
    };
    assert_eq!(policy(home.clone()).await.policy, PolicySetting::Deny);
    assert!(!policy(team.clone()).await.is_override());

    // The traffic has pairs from two sources, each named by its own (OpenClaw's exchanges
    // are rebuilt from its record in the background: wait for them).
    let deadline = tokio::time::Instant::now() + HANG;
    let traffic = loop {
        let traffic = api.traffic(0).await.expect("traffic");
        let seen: std::collections::BTreeSet<String> = traffic
            .iter()
            .filter_map(|c| c.requester.split_once('/').map(|(s, _)| s.to_string()))
            .collect();
        if seen.contains("home") && seen.contains("oc") {
            break traffic;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pairs from home and oc: {traffic:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        traffic
            .iter()
            .all(|c| c.requester.split_once('/').map(|(s, _)| s)
                == c.target.split_once('/').map(|(s, _)| s)),
        "a pair never spans sources: {traffic:?}"
    );
    let merged = api
        .exchanges(switchboard_types::api::ExchangesQuery {
            limit: 50,
            ..Default::default()
        })
        .await
        .expect("merged exchanges");
    let from: std::collections::BTreeSet<&str> = merged
        .exchanges
        .iter()
        .filter_map(|e| e.id.split_once('/').map(|(s, _)| s))
        .collect();
    assert_eq!(
        from.into_iter().collect::<Vec<_>>(),
        ["home", "oc"],
        "{merged:?}"
    );

    // team drops (kill -9): its rows stay listed (from its last answer), its calls fail
    // fast with why, and the others go on.
    let infos = api.sources();
    let mut team_state = infos
        .iter()
        .find(|s| s.name == "team")
        .and_then(|s| s.state.clone())
        .expect("team's link state");
    team_gw.kill_hard();
    tokio::time::timeout(
        HANG,
        team_state.wait_for(|s| !matches!(s, LinkState::Connected { .. })),
    )
    .await
    .expect("the drop is seen")
    .expect("state");
    let page = api
        .sessions(SessionsQuery {
            limit: 2,
            ..Default::default()
        })
        .await
        .expect("the others answer");
    assert!(!page.rows.is_empty());
    match api.send(owner("team/agent:main:main", "while down")).await {
        Err(ApiError::Unavailable(_)) => {}
        other => panic!("a send to a dropped source fails: {other:?}"),
    }
    put(home.as_ref(), "agent:main:main", "home goes on").await;
    // A bare key is refused while a source that may hold it cannot be asked.
    match api.session("agent:ops:main").await {
        Err(ApiError::BadInput(m)) => assert!(m.contains("team"), "{m}"),
        other => panic!("{other:?}"),
    }

    // team comes back on its port: linked again, and a send reaches it.
    let config = team_gw.dir.path().join("config.json5");
    let mut again = restart(&team_gw.state(), &config, &team_gw.addr);
    tokio::time::timeout(
        HANG,
        team_state.wait_for(|s| matches!(s, LinkState::Connected { .. })),
    )
    .await
    .expect("linked again")
    .expect("state");
    let r = api
        .send(owner("team/agent:main:main", "back"))
        .await
        .expect("send after the return");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
    assert!(lines(team.clone()).await.iter().any(|l| l == "back"));
    let _ = again.kill();
    let _ = again.wait();
}
