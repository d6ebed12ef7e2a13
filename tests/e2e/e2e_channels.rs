//! Deliveries on screen, end to end (issue 29): a real `switchboard serve` with its Telegram
//! channel on the local fake of the Bot API, and the real console attached over `--connect`
//! in tmux (120×40). A Telegram message is answered; the fake refuses the reply's chat (400
//! "chat not found"), so the reply is marked undelivered under it with the reason and the
//! retry command, and the header counts one failed delivery; a second reply meets a 429
//! with a long `retry_after` and is marked as retrying with its next attempt; then
//! `deliveries retry ID`, run over `--connect` from outside, sends the first: its mark and
//! the header's count go, the retrying one stays.
//!
//! Nothing is timed: each step polls the screen for what it expects (tests/common/tmux.rs).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::BIN;
use common::fake_telegram::{Failure, FakeTelegram};
use common::tmux::{Tmux, header, q, require_tmux, script};

use super::e2e_remote::Gateway;

const TOKEN: &str = "e2e-channels-token-0123456789";
const BOT_TOKEN: &str = "515151:e2e-channels_token";

/// `switchboard --connect <url> <args>` from outside the console; stdout (exit 0 required).
fn remote(client_state: &Path, url: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(client_state)
        .args(["--connect", url])
        .args(args)
        .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
        .env_remove("SWITCHBOARD_STATE_DIR")
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("switchboard runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_console_shows_a_reply_failed_retrying_and_sent_after_retry() {
    require_tmux!();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let fake = rt.block_on(FakeTelegram::start(BOT_TOKEN));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json5");
    std::fs::write(
        &config,
        format!(
            r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
                  script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
                channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
                  dmPolicy: "allowlist", allowFrom: [42] }} }} }}"#,
            fake.api_root
        ),
    )
    .expect("config");
    let gateway = Gateway::spawn(
        &dir.path().join("server"),
        &config,
        TOKEN,
        &["serve", "--bind", "127.0.0.1:0"],
    );
    let url = format!("ws://{}", gateway.addr);
    let client_state = dir.path().join("client");
    let command = format!(
        "{} --state-dir {} --connect {url}",
        q(Path::new(BIN)),
        q(&client_state)
    );
    let t = Tmux::start("channels", |scratch| {
        script(
            &format!("export SWITCHBOARD_GATEWAY_TOKEN={TOKEN}"),
            &command,
            &scratch.join("xdg"),
        )
    });
    t.wait_for("the console attached", |s| {
        header(s).contains("connected v4")
    });

    // The chat is refused: the reply is given up at once.
    fake.fail_next([Failure::ChatNotFound]);
    fake.direct(42, "Ann", "first");
    t.wait_for(
        "the reply marked as not delivered, the header counting it",
        |s| {
            s.contains("agent: re: first")
                && s.contains("⚠ not delivered: failed to reach telegram")
                && s.contains("Bad Request: chat not found")
                && header(s).contains("1 failed")
        },
    );
    let failed: serde_json::Value = serde_json::from_str(&remote(
        &client_state,
        &url,
        &["deliveries", "--failed", "--json"],
    ))
    .expect("deliveries --json");
    let id = failed[0]["id"].as_i64().expect("a failed delivery");
    // (Wrapped at the pane's edge.)
    assert!(
        t.capture().contains(&format!("retry {id}` sends it again")),
        "the mark names the command that sends it again:\n{}",
        t.capture()
    );

    // Telegram asks the drain to wait ten minutes: the second reply waits, and says so.
    fake.fail_next([Failure::RateLimited(600)]);
    fake.direct(42, "Ann", "second");
    t.wait_for("the second reply marked as retrying", |s| {
        s.contains("agent: re: second")
            && s.contains("⚠ not delivered yet: retrying (next attempt in")
    });

    // Sent again from outside over the gateway: the first reaches the chat, its mark and the
    // header's count go; the second still waits.
    let said = remote(
        &client_state,
        &url,
        &["deliveries", "retry", &id.to_string()],
    );
    assert!(said.contains("queued again"), "{said}");
    t.wait_for("the first reply's mark gone, the count with it", |s| {
        !s.contains("⚠ not delivered: failed")
            && !s.contains("… queued for telegram")
            && !s.contains("… sending to telegram")
            && !header(s).contains("failed")
    });
    assert!(
        fake.sent()
            .iter()
            .any(|m| m.chat_id == 42 && m.text == "re: first"),
        "{:?}",
        fake.sent()
    );
    assert!(t.capture().contains("⚠ not delivered yet: retrying"));
    drop(gateway);
}
