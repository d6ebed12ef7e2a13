//! Discord's inbound side against the local fake of its gateway and REST API (issue 29):
//! `serve` connects (the gateway's URL asked of `GET /gateway/bot`), an allowed guild
//! channel's message and an allowed person's DM reach their sessions and the agent's replies
//! are posted back where they came from; messages from a channel not allowed and from a
//! stranger are not recorded. A connection ended by op 7 or a dropped socket is resumed and
//! the message dispatched in between is recorded once (the fake replays one already seen
//! too); a connection whose heartbeats go unanswered is closed and resumed; a session Discord
//! invalidates (op 9, `d: false`) is identified anew; close 4004 stops
//! the Discord channel, said in the log, while Telegram goes on answering; each channel's
//! rate-limit bucket is waited out before the next send to it.

use std::sync::Arc;
use std::time::Duration;

use crate::common::fake_discord::{BOT_ID, FakeDiscord};
use crate::gateway_process;
use switchboard_types::api::SessionsApi;

const BOT_TOKEN: &str = "discord-gateway-test-token";

const ANN: (&str, &str) = ("42", "Ann");
const EVE: (&str, &str) = ("66", "Eve");

/// Poll `check` every 50 ms until it gives `Some`, failing with `what` after 30 s.
async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The messages people sent in session `key` (not the agent's replies).
async fn said_in(api: &dyn SessionsApi, key: &str) -> Vec<String> {
    crate::common::transcript_texts(api, key)
        .await
        .into_iter()
        .filter(|t| !t.starts_with("re: "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_a_guild_channel_and_a_dm_where_they_came_from() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "allowlist", allowFrom: ["{}"],
              guilds: {{ "10": {{ channels: {{ "100": {{ allow: true, requireMention: false }},
                                              "101": {{ allow: false }} }} }} }} }} }} }}"#,
        fake.api_root, ANN.0
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    assert!(
        gw.said
            .iter()
            .any(|l| l.contains("discord channel: gateway via")),
        "{:?}",
        gw.said
    );
    until("the gateway identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    fake.guild_message("10", "100", ANN, "deploy?");
    fake.guild_message("10", "101", EVE, &format!("<@{BOT_ID}> let me in"));
    fake.direct("500", ANN, "hello in private");
    fake.direct("501", EVE, "a stranger writes");

    let mut posted = until("both replies posted", async || {
        let mut posted: Vec<(String, String)> = fake
            .posted()
            .into_iter()
            .map(|p| (p.channel, p.content))
            .collect();
        posted.sort();
        (posted.len() >= 2).then_some(posted)
    })
    .await;
    posted.sort();
    assert_eq!(
        posted,
        [
            ("100".to_string(), "re: deploy?".to_string()),
            ("500".to_string(), "re: hello in private".to_string()),
        ]
    );
    let api = gw.api().await;
    assert_eq!(
        said_in(api.as_ref(), "agent:main:discord:channel:100").await,
        ["deploy?"]
    );
    assert_eq!(
        said_in(api.as_ref(), "agent:main:main").await,
        ["hello in private"]
    );
    assert!(
        said_in(api.as_ref(), "agent:main:discord:channel:101")
            .await
            .is_empty()
    );
    // Nobody else was answered, and the stranger's DM was not recorded.
    assert_eq!(fake.posted().len(), 2);
    // The two ignored messages are counted in the log, with why.
    let log = until("the ignored messages logged", async || {
        let log = std::fs::read_to_string(gw.log()).unwrap_or_default();
        log.contains("so_far=2").then_some(log)
    })
    .await;
    assert!(
        log.contains("channel not allowed") && log.contains("sender not allowed"),
        "{log}"
    );
    assert!(!log.contains(BOT_TOKEN), "the token is never logged");
}

/// Run the channel's inbound side in this process against `fake`'s gateway; stop it with
/// the sender.
async fn inbound(
    fake: &FakeDiscord,
    config: &str,
) -> (
    Arc<dyn SessionsApi>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<switchboard_channels::discord::gateway::Stopped>,
    tempfile::TempDir,
) {
    let config = switchboard_config::load::parse_str(&format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}", gatewayUrl: "{}",
              {config} }} }} }}"#,
        fake.api_root, fake.gateway_url
    ))
    .expect("config");
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = switchboard::discord::Settings::from_config(&config)
        .expect("configured")
        .expect("usable");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine");
    let api = engine.start();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let api = api.clone();
        tokio::spawn(async move {
            let stopped = switchboard::discord::run_inbound(&settings, api, async {
                let _ = stop_rx.await;
            })
            .await;
            drop(engine);
            stopped.expect("the gateway's URL is configured")
        })
    };
    (api, stop_tx, running, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_records_the_missed_message_once() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    fake.replay_one_seen_on_resume();
    let (api, stop, running, _dir) =
        inbound(&fake, r#"guilds: { "*": { requireMention: false } }"#).await;
    let key = "agent:main:discord:channel:100";
    until("identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    fake.guild_message("10", "100", ANN, "one");
    until("the first message recorded", async || {
        (said_in(api.as_ref(), key).await.len() == 1).then_some(())
    })
    .await;
    // op 7, with "two" dispatched while the client reconnects: it comes with the resume.
    // Each resume replays one message already recorded too: none may be there twice.
    fake.reconnect_missing("10", "100", ANN, "two");
    let said = until("resumed after op 7", async || {
        let said = said_in(api.as_ref(), key).await;
        (fake.resumes() == 1 && said.len() >= 2).then_some(said)
    })
    .await;
    assert_eq!(said, ["one", "two"]);
    // The socket dropped with no close frame, "three" dispatched meanwhile.
    fake.drop_missing("10", "100", ANN, "three");
    let said = until("resumed after a drop", async || {
        let said = said_in(api.as_ref(), key).await;
        (fake.resumes() == 2 && said.len() >= 3).then_some(said)
    })
    .await;
    assert_eq!(said, ["one", "two", "three"]);
    fake.guild_message("10", "100", ANN, "four");
    let said = until("a live message after the resumes", async || {
        let said = said_in(api.as_ref(), key).await;
        (said.len() >= 4).then_some(said)
    })
    .await;
    assert_eq!(said, ["one", "two", "three", "four"]);
    assert_eq!(fake.identifies(), 1, "resumed, never identified again");
    let _ = stop.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("stops when asked")
        .expect("joined");
    assert_eq!(
        stopped,
        switchboard_channels::discord::gateway::Stopped::Asked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_heartbeats_close_the_connection_and_resume() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    fake.heartbeat_every(100);
    let (api, stop, _running, _dir) =
        inbound(&fake, r#"guilds: { "*": { requireMention: false } }"#).await;
    until("identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    fake.stop_acking();
    until("resumed on a new connection", async || {
        (fake.resumes() >= 1 && fake.connections() >= 2).then_some(())
    })
    .await;
    fake.guild_message("10", "100", ANN, "still there?");
    until("recorded after the resume", async || {
        let said = said_in(api.as_ref(), "agent:main:discord:channel:100").await;
        (said == ["still there?"]).then_some(())
    })
    .await;
    assert_eq!(fake.identifies(), 1);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_session_is_identified_anew() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let (api, stop, _running, _dir) =
        inbound(&fake, r#"guilds: { "*": { requireMention: false } }"#).await;
    until("identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    // op 7, then op 9 (d: false) to the RESUME: a new session after Discord's 1–5 s pause.
    fake.reconnect_forgetting_the_session();
    until("identified again", async || {
        (fake.identifies() == 2).then_some(())
    })
    .await;
    assert_eq!(fake.resumes(), 0, "the forgotten session was not resumed");
    fake.guild_message("10", "100", ANN, "new session");
    until("recorded in the new session", async || {
        let said = said_in(api.as_ref(), "agent:main:discord:channel:100").await;
        (said == ["new session"]).then_some(())
    })
    .await;
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_stops_discord_and_telegram_keeps_answering() {
    use crate::common::fake_telegram::FakeTelegram;
    const TELEGRAM_TOKEN: &str = "434343:discord-test_token";
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    // The gateway is named, so the wrong token meets IDENTIFY (close 4004), not REST.
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{
              discord: {{ token: "not-the-token", apiRoot: "{}", gatewayUrl: "{}" }},
              telegram: {{ botToken: "{TELEGRAM_TOKEN}", apiRoot: "{}", dmPolicy: "open" }} }} }}"#,
        fake.api_root, fake.gateway_url, telegram.api_root
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    until("Discord closed 4004", async || {
        (fake.closes() == [4004]).then_some(())
    })
    .await;
    let log = until("the log says the channel stopped", async || {
        let log = std::fs::read_to_string(gw.log()).unwrap_or_default();
        log.contains("the Discord channel stopped").then_some(log)
    })
    .await;
    assert!(log.contains("close 4004"), "{log}");
    assert!(!log.contains("not-the-token"), "the token is never logged");
    telegram.direct(7, "Tess", "are you up?");
    until("Telegram answered", async || {
        telegram
            .sent()
            .iter()
            .any(|m| m.chat_id == 7 && m.text == "re: are you up?")
            .then_some(())
    })
    .await;
    // Stopped for good: never dialled again.
    assert_eq!(fake.connections(), 1);
}

/// The app's MESSAGE CONTENT intent is off: Discord closes the IDENTIFY 4014; the channel
/// stops for good, and the log says which intent to enable where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallowed_intent_stops_discord_naming_the_intent_to_enable() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    fake.disallow_message_content();
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted" }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}", gatewayUrl: "{}" }} }} }}"#,
        fake.api_root, fake.gateway_url
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    until("Discord closed 4014", async || {
        (fake.closes() == [4014]).then_some(())
    })
    .await;
    let log = until("the log says the channel stopped", async || {
        let log = std::fs::read_to_string(gw.log()).unwrap_or_default();
        log.contains("the Discord channel stopped").then_some(log)
    })
    .await;
    assert!(
        log.contains("MESSAGE CONTENT INTENT") && log.contains("Developer Portal"),
        "{log}"
    );
    assert_eq!(
        fake.connections(),
        1,
        "stopped for good: never dialled again"
    );
    assert_eq!(fake.identifies(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_rate_limit_bucket_is_waited_out_before_the_next_send() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    // One message per 1.5 s per channel, said in Discord's headers; a send inside the window
    // is a 429 the fake counts.
    fake.limit_each_channel(Duration::from_millis(1500));
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}", gatewayUrl: "{}" }} }} }}"#,
        fake.api_root, fake.gateway_url
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    let long = "x".repeat(2500);
    gateway_process::run_cli(
        gw.dir.path(),
        &[
            "inject",
            "agent:main:discord:channel:123",
            &long,
            "--channel",
            "discord",
            "--chat-type",
            "channel",
            "--quiet",
        ],
    );
    let posted = until(
        "both parts posted, or a send to a spent bucket",
        async || {
            let posted = fake.posted();
            (posted.len() >= 2 || fake.violations() > 0).then_some(posted)
        },
    )
    .await;
    assert_eq!(fake.violations(), 0, "a send went to a spent bucket");
    assert_eq!(posted.len(), 2);
    assert!(posted.iter().all(|p| p.channel == "123"));
}

/// `dmPolicy: "pairing"`: a stranger's DM is answered in that DM channel with a code and not
/// recorded; approved through the API, their next DM is recorded and answered. Before, a
/// stranger under `pairing` was only ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_a_pairing_code_in_their_dm_and_is_answered_once_approved() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}",
              dmPolicy: "pairing" }} }} }}"#,
        fake.api_root
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    until("the gateway identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    fake.direct("501", EVE, "who are you?");
    let told = until("the code posted in the DM", async || {
        fake.posted().into_iter().next()
    })
    .await;
    assert_eq!(told.channel, "501");
    let api = gw.api().await;
    let waiting = api
        .pairings(Some("discord".into()))
        .await
        .expect("pairings");
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].sender, EVE.0);
    let code = waiting[0].code.clone();
    assert!(told.content.contains(&code), "{}", told.content);
    assert!(said_in(api.as_ref(), "agent:main:main").await.is_empty());

    let approved = api
        .approve_pairing("discord", &code)
        .await
        .expect("approve")
        .expect("the code waited");
    assert_eq!(approved.sender, EVE.0);
    fake.direct("501", EVE, "and now?");
    until("the approved sender answered", async || {
        fake.posted()
            .iter()
            .any(|p| p.channel == "501" && p.content == "re: and now?")
            .then_some(())
    })
    .await;
    assert_eq!(said_in(api.as_ref(), "agent:main:main").await, ["and now?"]);
    assert_eq!(fake.posted().len(), 2, "one code, one answer");
}

/// A thread of an allowed channel follows that channel's rules (the gateway told which
/// channel it is in): its message is recorded in the thread's session and answered there.
/// Before, a listed channel's threads were ignored unless listed themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_follows_its_channels_rules() {
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let config = format!(
        r#"{{ agents: {{ list: [ {{ id: "main", default: true, model: "scripted",
              script: [ {{ reply: "re: {{{{text}}}}" }} ] }} ] }},
            channels: {{ discord: {{ token: "{BOT_TOKEN}", apiRoot: "{}", gatewayUrl: "{}",
              guilds: {{ "10": {{ channels: {{ "100": {{ allow: true, requireMention: false }},
                                              "101": {{ allow: false }} }} }} }} }} }} }}"#,
        fake.api_root, fake.gateway_url
    );
    let gw = gateway_process::start_with_config(&config, &[]);
    until("identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    fake.thread_created("10", "900", "100");
    fake.thread_created("10", "901", "101");
    fake.guild_message("10", "900", ANN, "in the thread");
    fake.guild_message("10", "901", ANN, "in a closed channel's thread");
    until("the thread's message answered in the thread", async || {
        fake.posted()
            .iter()
            .any(|p| p.channel == "900" && p.content == "re: in the thread")
            .then_some(())
    })
    .await;
    let api = gw.api().await;
    assert_eq!(
        said_in(api.as_ref(), "agent:main:discord:channel:900").await,
        ["in the thread"]
    );
    assert!(
        said_in(api.as_ref(), "agent:main:discord:channel:901")
            .await
            .is_empty()
    );
    assert_eq!(fake.posted().len(), 1);
}

/// A handler that cannot record the second message the first time (the store away) and
/// records by id, as the engine's inbox does.
struct Flaky {
    recorded: std::sync::Mutex<Vec<String>>,
    failed: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl switchboard_channels::discord::gateway::Handler for Flaky {
    async fn ready(&self, _me: &switchboard_channels::discord::events::User) {}

    async fn message(
        &self,
        _me: &switchboard_channels::discord::events::User,
        message: switchboard_channels::discord::events::Message,
    ) -> Result<(), String> {
        use std::sync::atomic::Ordering;
        if message.content == "two" && !self.failed.swap(true, Ordering::SeqCst) {
            return Err("the store is away".into());
        }
        let mut recorded = self.recorded.lock().expect("recorded");
        if !recorded.contains(&message.content) {
            recorded.push(message.content);
        }
        Ok(())
    }
}

/// A message the handler cannot record is not lost: the connection resumes from before it,
/// and Discord sends it (and what followed) again. Before, it was logged and lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_could_not_be_recorded_is_sent_again_after_a_resume() {
    use switchboard_channels::discord::gateway::{self, GatewayOptions};
    let fake = FakeDiscord::start(BOT_TOKEN).await;
    let handler = Arc::new(Flaky {
        recorded: std::sync::Mutex::new(Vec::new()),
        failed: std::sync::atomic::AtomicBool::new(false),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let (handler, url) = (handler.clone(), fake.gateway_url.clone());
        tokio::spawn(async move {
            let options = GatewayOptions::new(BOT_TOKEN, &url, None);
            gateway::run(&options, handler.as_ref(), async {
                let _ = stopped.await;
            })
            .await
        })
    };
    until("identified", async || {
        (fake.identifies() == 1).then_some(())
    })
    .await;
    for text in ["one", "two", "three"] {
        fake.guild_message("10", "100", ANN, text);
    }
    let recorded = until("every message recorded", async || {
        let r = handler.recorded.lock().expect("recorded").clone();
        (r.len() >= 3).then_some(r)
    })
    .await;
    assert_eq!(recorded, ["one", "two", "three"]);
    assert_eq!(fake.resumes(), 1, "resumed once, from before the message");
    assert_eq!(fake.identifies(), 1);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("stops when asked")
        .expect("joined");
}
