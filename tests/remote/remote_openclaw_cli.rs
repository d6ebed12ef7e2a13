//! `switchboard --connect <openclaw> exchanges [--json]` and `exchanges show ID` as processes,
//! against a fake OpenClaw gateway on a real socket: it speaks 2026.9.6's handshake (its
//! captured `hello-ok`) and answers from the record captured in the ping-pong scenario
//! (`openclaw_record`), so the CLI goes through the whole link, the OpenClaw dialect and the
//! exchanges' backfill.

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::BIN;
use crate::openclaw_record::{scenario, serve};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/openclaw-2026.9.6"
);

/// The binary with `--connect url`, from a state folder of its own.
async fn client(url: &str, dir: &std::path::Path, args: &[&str]) -> Output {
    client_with_env(url, dir, args, &[]).await
}

/// `client` with these variables set for the process.
pub(crate) async fn client_with_env(
    url: &str,
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut c = Command::new(BIN);
    c.envs(env.iter().copied());
    c.arg("--state-dir")
        .arg(dir)
        .args(["--connect", url, "--token", "test-token"])
        .args(args)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_GATEWAY_TOKEN")
        .stdin(Stdio::null());
    let run = tokio::task::spawn_blocking(move || c.output().expect("the binary runs"));
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the command ends")
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchanges_and_exchanges_show_work_over_an_openclaw_gateway() {
    let gw = Arc::new(scenario(&format!(
        "{FIXTURES}/exchanges/s2-telegram-pingpong"
    )));
    let url = serve(gw).await;
    let dir = tempfile::tempdir().unwrap();

    let list = stdout(&client(&url, dir.path(), &["exchanges", "--json"]).await);
    let page: Value = serde_json::from_str(&list).expect("JSON");
    let e = &page["exchanges"][0];
    assert_eq!(
        page["exchanges"].as_array().map(Vec::len),
        Some(1),
        "{page:#}"
    );
    assert_eq!(
        (
            &e["id"],
            &e["requester"],
            &e["target"],
            &e["rounds"],
            &e["endedReason"]
        ),
        (
            &json!("agent:work:s2#1"),
            &json!("agent:main:s2"),
            &json!("agent:work:s2"),
            &json!(5),
            &json!("reply_skip")
        ),
        "{page:#}"
    );

    let text = stdout(&client(&url, dir.path(), &["exchanges"]).await);
    // Columns are padded to the widest cell: compare word by word.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.starts_with("STARTED FROM → TO ROUNDS ENDED ANNOUNCE ID"),
        "{text}"
    );
    assert!(
        words.contains("agent:main:s2 → agent:work:s2 5 reply_skip no_route agent:work:s2#1"),
        "{text}"
    );

    let shown = stdout(&client(&url, dir.path(), &["exchanges", "show", "agent:work:s2#1"]).await);
    for want in [
        "agent:main:s2 → agent:work:s2",
        "Message: PING from main",
        "Round 1 · agent:work:s2 → agent:main:s2",
        "· 40 ms · tokens 30/5 · ok",
        "Round 5 · agent:work:s2 → agent:main:s2",
        "Ended: reply_skip",
        "Announce: no_route",
        "ANNOUNCE from work: exchange finished",
    ] {
        assert!(shown.contains(want), "missing {want:?}:\n{shown}");
    }

    // Issue 26: the filters and a unique start of an id work over --connect too (the CLI
    // applies them to the pages the gateway's record gives).
    let count = |args: &'static [&'static str]| {
        let (url, dir) = (url.clone(), dir.path().to_path_buf());
        async move {
            let out = client(&url, &dir, args).await;
            let page: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            page["exchanges"].as_array().map_or(0, Vec::len)
        }
    };
    assert_eq!(
        count(&["exchanges", "--json", "--to", "agent:work:s2"]).await,
        1
    );
    assert_eq!(
        count(&["exchanges", "--json", "--from", "agent:work:s2"]).await,
        0
    );
    assert_eq!(
        count(&["exchanges", "--json", "--status", "refused"]).await,
        0
    );
    assert_eq!(
        count(&["exchanges", "--json", "--since", "2000-01-01T00:00:00Z"]).await,
        1
    );
    assert_eq!(
        count(&["exchanges", "--json", "--since", "2999-01-01T00:00:00Z"]).await,
        0
    );
    let shown = stdout(&client(&url, dir.path(), &["exchanges", "show", "agent:work:s2#"]).await);
    assert!(shown.contains("Message: PING from main"), "{shown}");
}
