//! `serve` with `channels.telegram` configured, against the local fake of Telegram's Bot API
//! (issue 29): the gateway says the channel polls, a direct message from an allowed sender and
//! a group message that mentions the bot reach their sessions and are answered there, and
//! the outbox drain sends each reply to its chat (through a 429 with `retry_after`); a
//! stranger's direct message and an unaddressed group message are not recorded.

use std::sync::Arc;
use std::time::Duration;

use crate::common::fake_telegram::{BOT_USERNAME, FakeTelegram};
use crate::gateway_process::{self, TOKEN};
use switchboard_remote::{Link, LinkOptions, RemoteApi};
use switchboard_types::api::SessionsApi;

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

    let link = Arc::new(
        Link::connect(LinkOptions::new(
            format!("ws://{}", gw.addr),
            Some(TOKEN.into()),
        ))
        .await
        .expect("attached"),
    );
    let api: Arc<dyn SessionsApi> = RemoteApi::new(link);
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
