//! `serve` with `channels.discord` configured, against the local fake of Discord's REST API
//! (issue 29): a reply in a Discord channel's session is posted there by the outbox drain, in
//! parts of at most 2,000 characters, through a 429 (waited out for Discord's `retry_after`),
//! with no part posted twice; a reply to a channel Discord does not know fails with its reason,
//! listed by `switchboard deliveries --failed`.

use std::time::Duration;

use crate::common::fake_discord::FakeDiscord;
use crate::gateway_process;

const BOT_TOKEN: &str = "discord-test-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_posts_replies_to_discord_split_and_through_a_429() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    fake.rate_limit_next([0.3]);
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}", groupPolicy: "open" }} }} }}"#,
        fake.api_root
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains("channels up: ") && l.contains("discord")),
        "{:?}",
        gw.said
    );
    let inject = |key: &str, text: &str| {
        let args = [
            "inject",
            key,
            text,
            "--channel",
            "discord",
            "--chat-type",
            "group",
            "--quiet",
        ];
        gateway_process::run_cli(gw.dir.path(), &args);
    };
    let long = format!("{}\n\n{}", "a".repeat(1500), "b".repeat(1000));
    inject("agent:main:discord:channel:123", &long);
    inject("agent:main:discord:channel:404", "into the void");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let posted = fake.posted();
        if posted.len() >= 2 {
            assert!(posted.iter().all(|p| p.channel == "123"), "{posted:?}");
            assert!(posted.iter().all(|p| p.content.chars().count() <= 2000));
            let whole: String = posted.iter().map(|p| p.content.as_str()).collect();
            assert_eq!(whole, format!("re: {long}"));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not posted: {posted:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The unknown channel's reply failed, with Discord's reason.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = std::process::Command::new(gateway_process::BIN)
            .args(["deliveries", "--failed", "--json"])
            .env("SWITCHBOARD_STATE_DIR", gw.state())
            .env("SWITCHBOARD_CONFIG", gw.dir.path().join("config.json5"))
            .output()
            .expect("deliveries");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("Unknown Channel") {
            assert!(text.contains("channel:404"), "{text}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never failed: {text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(fake.posted().len(), 2, "nothing posted twice");
}
