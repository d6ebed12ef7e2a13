//! `serve` with `channels.telegram` configured, against the local fake of Telegram's Bot API
//! (issue 29): the gateway says the channel polls, a direct message from an allowed sender and
//! a group message that mentions the bot reach their sessions and are answered there, and
//! the outbox drain sends each reply to its chat (through a 429 with `retry_after`); a
//! stranger's direct message and an unaddressed group message are not recorded.

use std::time::Duration;

use crate::common::fake_telegram::{BOT_USERNAME, FakeTelegram};
use crate::gateway_process::{self, TOKEN};

const BOT_TOKEN: &str = "424242:serve-test_token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_polls_telegram_and_its_messages_reach_their_sessions() {
    let fake = FakeTelegram::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "allowlist", allowFrom: [42], groups: {{ "*": {{ requireMention: true }} }},
              streamMode: "partial" }} }} }}"#,
        fake.api_root
    );
    // The first send is refused for a second: the drain waits it out and sends.
    fake.fail_next([crate::common::fake_telegram::Failure::RateLimited(1)]);
    let gw = gateway_process::start_with_config(&config, &[]);
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains(&format!("telegram channel: polling {}", fake.api_root))),
        "{:?}",
        gw.said
    );
    fake.direct(42, "Ann", "hello from telegram");
    fake.direct(66, "Eve", "let me in");
    fake.group(-1001, 43, "lunch?", false);
    fake.group(-1001, 43, "deploy?", true);

    let api = gw.api().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (direct, group) = loop {
        let direct = crate::common::transcript_texts(api.as_ref(), "agent:main:main").await;
        let group =
            crate::common::transcript_texts(api.as_ref(), "agent:main:telegram:group:-1001").await;
        if direct.len() >= 2 && group.len() >= 2 && fake.pending() == 0 {
            break (direct, group);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never answered: {direct:?} {group:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(direct, ["hello from telegram", "re: hello from telegram"]);
    let said = format!("@{BOT_USERNAME} deploy?");
    assert_eq!(group, [said.clone(), format!("re: {said}")]);

    // Each reply reaches its chat through the drain.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut sent: Vec<(i64, String)> = fake
            .sent()
            .into_iter()
            .map(|m| (m.chat_id, m.text))
            .collect();
        sent.sort();
        if sent.len() >= 2 {
            assert_eq!(
                sent,
                [
                    (-1001, format!("re: {said}")),
                    (42, "re: hello from telegram".to_string()),
                ]
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replies were not sent: {sent:?} (calls {:?})",
            fake.calls()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains("channels up: ") && l.contains("telegram")),
        "{:?}",
        gw.said
    );
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `dmPolicy: "pairing"` (OpenClaw's default): a stranger's first message is answered with a
/// code and not recorded; writing again gives no second code; once the owner approves the
/// code (`pairing approve` over `--connect`), the next message is recorded and answered.
/// Before, a stranger under `pairing` was only ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_a_pairing_code_and_is_answered_once_approved() {
    let fake = FakeTelegram::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "pairing" }} }} }}"#,
        fake.api_root
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    fake.direct(77, "Zed", "hi, who are you?");
    until("the code sent to the stranger", || !fake.sent().is_empty()).await;
    let told = fake.sent().remove(0);
    assert_eq!(told.chat_id, 77);
    let listed: serde_json::Value = serde_json::from_str(&gateway_process::remote_cli(
        &gw,
        &["pairing", "list", "telegram", "--json"],
    ))
    .expect("pairing list --json");
    let code = listed[0]["code"]
        .as_str()
        .expect("a code waits")
        .to_string();
    assert_eq!(listed[0]["sender"], "77");
    assert_eq!(listed[0]["displayName"], "Zed");
    assert!(
        told.text
            .contains(&format!("switchboard pairing approve telegram {code}")),
        "{}",
        told.text
    );

    // Again before approval: no second code, nothing recorded.
    fake.direct(77, "Zed", "hello?");
    until("the second message read", || fake.pending() == 0).await;
    let table = gateway_process::remote_cli(&gw, &["pairing", "list"]);
    assert!(
        table.contains(&code) && table.contains("waiting"),
        "{table}"
    );
    let approved = gateway_process::remote_cli(
        &gw,
        &["pairing", "approve", "telegram", &code.to_lowercase()],
    );
    assert!(
        approved.contains("approved telegram sender 77 (Zed)"),
        "{approved}"
    );
    fake.direct(77, "Zed", "now?");
    until("the approved sender answered", || {
        fake.sent()
            .iter()
            .any(|m| m.chat_id == 77 && m.text == "re: now?")
    })
    .await;
    let sent: Vec<String> = fake.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(sent.len(), 2, "one code, one answer: {sent:?}");
    let api = gw.api().await;
    let texts = crate::common::transcript_texts(api.as_ref(), "agent:main:main").await;
    assert_eq!(texts, ["now?", "re: now?"], "nothing before the approval");
    // A code approves once.
    let again = std::process::Command::new(crate::common::BIN)
        .args(["--connect", &format!("ws://{}", gw.addr), "--token", TOKEN])
        .args(["pairing", "approve", "telegram", &code])
        .env("SWITCHBOARD_STATE_DIR", gw.dir.path().join("elsewhere"))
        .env("SWITCHBOARD_CONFIG", gw.dir.path().join("config.json5"))
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("approved already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// `webhookUrl`: `serve` tells Telegram where to push (`setWebhook` with the secret) and never
/// polls; an update Telegram pushes to the gateway's `webhookPath` (through a proxy at the
/// public URL) is recorded and answered in its chat; a push without the secret is refused
/// 401 and recorded nowhere; an update pushed twice (Telegram's retry) is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_pushed_to_the_webhook_are_answered_and_polling_stops() {
    const SECRET: &str = "webhook_Secret-0123";
    let fake = FakeTelegram::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "open", webhookUrl: "https://bot.example.com/tg",
              webhookSecret: "{SECRET}", webhookPath: "/tg" }} }} }}"#,
        fake.api_root
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    assert!(
        gw.said.iter().any(|l| l.contains(
            "telegram channel: updates pushed to https://bot.example.com/tg, taken at this \
             gateway's /tg"
        )),
        "{:?}",
        gw.said
    );
    until("the webhook set", || fake.webhook().is_some()).await;
    assert_eq!(
        fake.webhook(),
        Some(("https://bot.example.com/tg".to_string(), SECRET.to_string()))
    );

    // Without the secret: refused, nothing read.
    let http = switchboard::channels::http_client().expect("client");
    let forged = serde_json::json!({"update_id": 1, "message": {"message_id": 1, "date": 1,
        "from": {"id": 66, "is_bot": false, "first_name": "Eve"},
        "chat": {"id": 66, "type": "private"}, "text": "forged"}});
    for secret in [None, Some("wrong")] {
        let mut post = http.post(format!("http://{}/tg", gw.addr)).json(&forged);
        if let Some(s) = secret {
            post = post.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        let answer = post.send().await.expect("answered");
        assert_eq!(answer.status().as_u16(), 401);
    }

    fake.route_webhook_to(&format!("http://{}", gw.addr));
    fake.direct(42, "Ann", "hello by webhook");
    until("the reply sent", || {
        fake.sent()
            .iter()
            .any(|m| m.chat_id == 42 && m.text == "re: hello by webhook")
    })
    .await;
    // Telegram sends an update again when it doubts the first went through.
    let update = fake.direct(42, "Ann", "once only");
    until("the second answered", || {
        fake.sent().iter().any(|m| m.text == "re: once only")
    })
    .await;
    fake.replay();
    until("the replayed updates pushed", || fake.pending() == 0).await;
    let api = gw.api().await;
    let texts = crate::common::transcript_texts(api.as_ref(), "agent:main:main").await;
    assert_eq!(
        texts,
        [
            "hello by webhook",
            "re: hello by webhook",
            "once only",
            "re: once only"
        ],
        "update {update} replayed, recorded once"
    );
    assert!(!texts.iter().any(|t| t == "forged"));
    assert!(
        !fake.calls().iter().any(|c| c == "getUpdates"),
        "{:?}",
        fake.calls()
    );
}

/// A webhook left set (by a webhook setup before, or OpenClaw's) makes Telegram refuse
/// polling with 409: a polling `serve` removes it first, then polls. Before, it polled into
/// 409 forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_removes_a_webhook_left_set() {
    let fake = FakeTelegram::start(BOT_TOKEN).await;
    fake.preset_webhook("https://old.example.com/hook", "old");
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "open" }} }} }}"#,
        fake.api_root
    );
    let _gw = gateway_process::start_with_config(&config, &[]);
    fake.direct(42, "Ann", "still there?");
    until("answered by polling", || {
        fake.sent().iter().any(|m| m.text == "re: still there?")
    })
    .await;
    assert_eq!(fake.webhook(), None);
}

/// A flood: 1,000 updates from ten busy groups at once. Every message is recorded in its
/// group's session, in the order sent, none dropped; the gateway answers other requests
/// meanwhile; every update is confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_a_thousand_updates_is_recorded_whole_and_in_order() {
    const GROUPS: i64 = 10;
    const EACH: usize = 100;
    let fake = FakeTelegram::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "NO_REPLY" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "{}",
              groupPolicy: "open", groups: {{ "*": {{ requireMention: false }} }} }} }} }}"#,
        fake.api_root
    );
    for i in 0..EACH {
        for g in 0..GROUPS {
            fake.group(-2000 - g, 7, &format!("g{g} m{i:03}"), false);
        }
    }
    let gw = gateway_process::start_with_config(&config, &[]);
    let api = gw.api().await;
    // Meanwhile the gateway answers (each request bounded: a hang fails, slowness does not).
    let status = tokio::time::timeout(Duration::from_secs(30), api.status())
        .await
        .expect("status answered during the flood")
        .expect("status");
    assert!(status.sessions <= GROUPS as u64);
    let said = |g: i64| {
        let api = api.clone();
        async move {
            let page = api
                .transcript(switchboard_types::api::TranscriptQuery {
                    key: format!("agent:main:telegram:group:{}", -2000 - g),
                    limit: 1000,
                    ..Default::default()
                })
                .await
                .expect("transcript");
            page.lines
                .into_iter()
                .map(|l| l.text)
                .filter(|t| t.starts_with('g'))
                .collect::<Vec<_>>()
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    for g in 0..GROUPS {
        let want: Vec<String> = (0..EACH).map(|i| format!("g{g} m{i:03}")).collect();
        loop {
            let got = said(g).await;
            if got.len() >= EACH {
                assert_eq!(got, want, "group {g}: every message, in order");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "group {g}: {} of {EACH} recorded",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    until("every update confirmed", || fake.pending() == 0).await;
}

/// Telegram away when `serve` starts (nothing listens at its API root), then back on the same
/// address: the channel keeps trying (saying so in the log) and answers once it is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_away_at_start_then_back_is_polled_and_answered() {
    let addr = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        free.local_addr().expect("addr").to_string()
    };
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ telegram: {{ botToken: "{BOT_TOKEN}", apiRoot: "http://{addr}",
              dmPolicy: "open" }} }} }}"#
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    until("the failed start said in the log", || {
        std::fs::read_to_string(gw.log())
            .unwrap_or_default()
            .contains("the Telegram channel cannot start yet; retrying")
    })
    .await;
    let fake = FakeTelegram::start_on(BOT_TOKEN, &addr).await;
    fake.direct(42, "Ann", "are you back?");
    until("answered once Telegram is back", || {
        fake.sent().iter().any(|m| m.text == "re: are you back?")
    })
    .await;
}
