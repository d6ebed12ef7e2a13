//! `--connect ws://a,ws://b`: two gateway nodes on one store (here two `serve` processes on
//! one state folder), and a link that fails over to the other when the one it is on dies,
//! resyncing as after a reconnect (issue 28 item 3). Calls made meanwhile fail fast; calls
//! after land on the survivor, and what was written through the dead node is there.

use crate::gateway_process::{self, TOKEN};

use std::sync::Arc;
use std::time::Duration;

use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::{LinkState, SendRequest, SessionsApi, TranscriptQuery};

const CONFIG: &str = r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
  script: [ { reply: "re: {{text}}" } ] } ] } }"#;
const HANG: Duration = Duration::from_secs(30);

/// The owner's message into agent:main:main.
fn owner(text: &str) -> SendRequest {
    crate::common::owner("agent:main:main", text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_to_two_nodes_fails_over_when_its_node_dies() {
    let mut a = gateway_process::start_with_config(CONFIG, &[]);
    // A second node on the same state folder.
    let mut b = gateway_process::launch(gateway_process::serve_command(
        a.dir.path(),
        &a.dir.path().join("config.json5"),
    ));
    let target = format!("ws://{},ws://{}", a.addr, b.addr);
    let mut options = LinkOptions::new(target, Some(TOKEN.into()));
    options.ping_every = Duration::from_millis(200);
    let link = Arc::new(Link::connect(options).await.expect("attached"));
    let api: Arc<dyn SessionsApi> = RemoteApi::new(link.clone());
    assert_eq!(
        switchboard_remote::rpc::Rpc::target(link.as_ref()),
        format!("ws://{}", a.addr),
        "the first node first"
    );
    let r = api.send(owner("through a")).await.expect("send");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));

    let mut state = api.link().expect("a link").state;
    a.kill_hard();
    until_resynced(&mut state).await;
    assert_eq!(
        switchboard_remote::rpc::Rpc::target(link.as_ref()),
        format!("ws://{}", b.addr),
        "on the other node now"
    );
    let r = api
        .send(owner("through b"))
        .await
        .expect("send after the failover");
    assert!(api.wait_work(r.work, HANG).await.expect("work"));
    let page = api
        .transcript(TranscriptQuery {
            key: "agent:main:main".into(),
            limit: 20,
            ..Default::default()
        })
        .await
        .expect("transcript");
    let texts: Vec<String> = page.lines.into_iter().map(|l| l.text).collect();
    for want in ["through a", "re: through a", "through b", "re: through b"] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    let _ = b.child.kill();
    let _ = b.child.wait();
}

/// Until the link under `state` has reattached and resynced (bounded by a minute).
pub(crate) async fn until_resynced(state: &mut tokio::sync::watch::Receiver<LinkState>) {
    tokio::time::timeout(
        Duration::from_secs(60),
        state.wait_for(|s| matches!(s, LinkState::Connected { resynced: true, .. })),
    )
    .await
    .expect("reattached in time")
    .expect("state");
}
