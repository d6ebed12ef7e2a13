//! The Telegram channel's Bot API client against the local fake of Telegram's API
//! (`tests/common/fake_telegram.rs`, issue 29): every call and every error shape the channel
//! acts on, over real sockets, and the token never in a message.

use std::time::Duration;

use crate::common::fake_telegram::{BOT_USERNAME, Failure, FakeTelegram};
use switchboard_telegram::{Access, Admit, Bot, GroupPolicy, TelegramError, split};

const TOKEN: &str = "123456:test-secret_TOKEN";

#[tokio::test]
async fn the_bot_reads_updates_confirms_them_and_sends() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    let me = bot.get_me().await.expect("getMe");
    assert_eq!(me.username.as_deref(), Some(BOT_USERNAME));

    let first = fake.direct(42, "Ann", "hello bot");
    fake.group(-100_555, 43, "status?", true);
    let updates = bot
        .get_updates(None, Duration::ZERO)
        .await
        .expect("getUpdates");
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0].update_id, first);
    let access = Access {
        group_policy: GroupPolicy::Open,
        dm_policy: switchboard_telegram::DmPolicy::Open,
        ..Access::default()
    };
    let direct = access.admit(updates[0].message.as_ref().expect("a message"), &me);
    assert!(matches!(&direct, Admit::Direct { chat_id: 42, text, .. } if text == "hello bot"));
    let group = access.admit(updates[1].message.as_ref().expect("a message"), &me);
    assert_eq!(
        group.key("main").as_deref(),
        Some("agent:main:telegram:group:-100555")
    );

    // The next poll from past the last confirms both.
    let next = updates[1].update_id + 1;
    let none = bot
        .get_updates(Some(next), Duration::ZERO)
        .await
        .expect("poll");
    assert!(none.is_empty());
    assert_eq!(fake.pending(), 0);

    // A long poll returns as soon as something arrives.
    let waiting = {
        let bot = bot.clone();
        tokio::spawn(async move { bot.get_updates(Some(next), Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    fake.direct(42, "Ann", "are you there?");
    let arrived = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the long poll returned when the update came")
        .expect("task")
        .expect("poll");
    assert_eq!(arrived.len(), 1);

    let id = bot.send_message(42, "hi Ann", None).await.expect("send");
    let id2 = bot
        .send_message(-100_555, "in the topic", Some(9))
        .await
        .expect("send");
    assert!(id2 > id);
    let sent = fake.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].chat_id, sent[0].text.as_str()), (42, "hi Ann"));
    assert_eq!(sent[1].thread, Some(9));
}

#[tokio::test]
async fn telegrams_failures_come_back_as_what_the_channel_does() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    fake.fail_next([
        Failure::RateLimited(3),
        Failure::Server,
        Failure::NotJson,
        Failure::Revoked,
    ]);
    let limited = bot.send_message(1, "a", None).await.expect_err("429");
    assert_eq!(limited.retry(), Some(Some(Duration::from_secs(3))));
    let server = bot.send_message(1, "b", None).await.expect_err("500");
    assert_eq!(server.retry(), Some(None));
    let proxy = bot.send_message(1, "c", None).await.expect_err("502 html");
    assert!(
        matches!(proxy, TelegramError::Server { code: 502, .. }),
        "{proxy}"
    );
    let revoked = bot.send_message(1, "d", None).await.expect_err("401");
    assert!(revoked.revoked(), "{revoked}");
    // Telegram's own limit, refused as it refuses it; split first and every part goes.
    let long = "y".repeat(10_000);
    let refused = bot
        .send_message(1, &long, None)
        .await
        .expect_err("too long");
    assert!(
        matches!(refused, TelegramError::Refused { code: 400, .. }),
        "{refused}"
    );
    for part in split(&long, switchboard_telegram::MAX_MESSAGE) {
        bot.send_message(1, &part, None).await.expect("a part");
    }
    assert_eq!(
        fake.sent().iter().map(|s| s.text.len()).sum::<usize>(),
        10_000
    );

    // A wrong token: 401 from the first call.
    let wrong = Bot::new(&fake.api_root, "123456:wrong").expect("bot");
    assert!(wrong.get_me().await.expect_err("401").revoked());
}

/// A long reply in three parts meets a 429 at the second: the retry posts the second and the
/// third only, so the chat gets each part once (before, the retry posted the first again).
#[tokio::test]
async fn a_retry_after_a_failure_part_way_posts_only_the_parts_not_yet_accepted() {
    use switchboard_channels::{Channel, SendError};
    let fake = FakeTelegram::start(TOKEN).await;
    let channel = switchboard::telegram::TelegramChannel::new(&switchboard::telegram::Settings {
        api_root: fake.api_root.clone(),
        token: TOKEN.into(),
        access: Access::default(),
        agent: "main".into(),
        direct_key: "agent:main:main".into(),
        webhook: None,
    })
    .expect("channel");
    let text = ["a", "b", "c"].map(|c| c.repeat(4000)).join("\n\n");
    let mut row = switchboard_types::api::OutboxRow {
        id: 5,
        channel: "telegram".into(),
        to: "42".into(),
        text,
        ..Default::default()
    };
    fake.fail_next([Failure::Pass, Failure::RateLimited(1)]);
    let first = channel.send(&row).await;
    let Err(SendError::Partly { sent, then }) = first else {
        panic!("a failure part-way: {first:?}");
    };
    assert!(
        matches!(*then, SendError::Retry { after: Some(_), .. }),
        "{then:?}"
    );
    assert_eq!(sent.split(',').count(), 1, "the first part went: {sent}");
    // What the drain records: the parts that went.
    row.message_id = Some(sent.clone());
    let done = channel.send(&row).await.expect("the rest sent");
    assert_eq!(done.message_id.split(',').count(), 3, "{done:?}");
    assert!(done.message_id.starts_with(&sent));
    let texts: Vec<String> = fake.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(texts.len(), 3, "each part once: {texts:?}");
    for (t, c) in texts.iter().zip(["a", "b", "c"]) {
        assert!(t.trim() == c.repeat(4000), "part of {c}s");
    }
}

/// A direct chat goes to the agent's main session as the key scheme names it (its
/// `session.mainKey`, or `global` under global scope), as Discord's do; it was always
/// `agent:<id>:main`.
#[test]
fn direct_chats_go_to_the_main_session_the_key_scheme_names() {
    let settings = |session: &str| {
        let config = switchboard_config::load::parse_str(&format!(
            r#"{{ session: {session}, agents: {{ list: [ {{ id: "ops", default: true }} ] }},
                 channels: {{ telegram: {{ botToken: "1:x" }} }} }}"#
        ))
        .expect("config");
        switchboard::telegram::Settings::from_config(&config)
            .expect("configured")
            .expect("usable")
    };
    assert_eq!(
        settings(r#"{ mainKey: "desk" }"#).direct_key,
        "agent:ops:desk"
    );
    assert_eq!(settings(r#"{ scope: "global" }"#).direct_key, "global");
    assert_eq!(settings("{}").direct_key, "agent:ops:main");
}

#[tokio::test]
async fn an_update_this_build_cannot_read_is_passed_over_not_a_stop() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    fake.push_raw(serde_json::json!({"update_id": 5, "message": "not an object"}));
    fake.push_raw(serde_json::json!({"no_update_id": true}));
    fake.direct(42, "Ann", "after the garbage");
    let updates = bot.get_updates(None, Duration::ZERO).await.expect("poll");
    assert_eq!(updates.len(), 2, "{updates:?}");
    assert_eq!(updates[0].update_id, 5);
    assert!(updates[0].message.is_none());
    assert!(updates[1].message.is_some());
}

#[tokio::test]
async fn the_token_is_never_in_a_message() {
    // A server that is not there: the transport error must not carry the URL (and token).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let bot = Bot::new(&format!("http://127.0.0.1:{port}"), TOKEN).expect("bot");
    let err = bot.get_me().await.expect_err("nobody listens");
    assert!(err.retry().is_some(), "{err}");
    let text = format!("{err} {err:?} {bot:?}");
    assert!(!text.contains("test-secret"), "{text}");
    // Nor a refused token's.
    let bad = Bot::new("https://api.telegram.org", "not a token").expect_err("refused");
    assert!(!bad.to_string().contains("not a token"), "{bad}");
    let bad_root = Bot::new("ftp://x", TOKEN).expect_err("refused");
    assert!(
        bad_root.to_string().contains("not an http(s) URL"),
        "{bad_root}"
    );
}

/// What the poller handed over, for the test.
#[derive(Default)]
struct Recorded {
    taken: std::sync::Mutex<Vec<(i64, String, String)>>,
    ignored: std::sync::Mutex<Vec<switchboard_telegram::Ignored>>,
    offset: std::sync::Mutex<Option<i64>>,
    /// Takes that fail before one succeeds (a store that is away).
    failing: std::sync::atomic::AtomicUsize,
}

impl switchboard_telegram::Inbox for Recorded {
    async fn take(&self, update_id: i64, admitted: Admit) -> Result<(), String> {
        if self
            .failing
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok()
        {
            return Err("the store is away".into());
        }
        let key = admitted.key("main").expect("admitted");
        let text = match admitted {
            Admit::Direct { text, .. } | Admit::Group { text, .. } => text,
            Admit::Ignored(_) | Admit::Unpaired { .. } => {
                unreachable!("ignored and unpaired messages are not taken here")
            }
        };
        self.taken
            .lock()
            .expect("taken")
            .push((update_id, key, text));
        Ok(())
    }

    async fn save_offset(&self, offset: i64) {
        *self.offset.lock().expect("offset") = Some(offset);
    }

    fn ignored(&self, why: switchboard_telegram::Ignored) {
        self.ignored.lock().expect("ignored").push(why);
    }
}

#[tokio::test]
async fn the_poller_records_admitted_messages_once_and_keeps_the_offset() {
    use switchboard_telegram::{Ignored, Stopped, poll};
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    let me = bot.get_me().await.expect("getMe");
    let access = Access {
        dm_policy: switchboard_telegram::DmPolicy::Allowlist,
        allow_from: vec!["42".into()],
        groups: [("*".to_string(), switchboard_telegram::GroupRule::default())].into(),
        ..Access::default()
    };
    let inbox = Recorded::default();
    // The first message's recording fails once: it is asked for again, recorded once.
    inbox.failing.store(1, std::sync::atomic::Ordering::SeqCst);
    fake.direct(42, "Ann", "hello");
    fake.direct(66, "Eve", "let me in");
    fake.group(-1009, 43, "deploy?", true);
    let last = fake.group(-1009, 43, "lunch?", false);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let polling = tokio::spawn({
        let bot = bot.clone();
        async move {
            poll::run(&bot, &me, &access, None, &inbox, async {
                let _ = stop_rx.await;
            })
            .await;
            inbox
        }
    });
    // Until everything was seen: the offset saved past the last update.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while fake.pending() > 0 || fake.calls().iter().filter(|c| *c == "getUpdates").count() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the poller never caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_tx.send(());
    let inbox = polling.await.expect("poller");
    let taken = inbox.taken.lock().expect("taken").clone();
    assert_eq!(
        taken
            .iter()
            .map(|(_, k, t)| (k.as_str(), t.as_str()))
            .collect::<Vec<_>>(),
        [
            ("agent:main:main", "hello"),
            (
                "agent:main:telegram:group:-1009",
                &format!("@{BOT_USERNAME} deploy?")[..]
            ),
        ]
    );
    assert_eq!(
        *inbox.ignored.lock().expect("ignored"),
        [Ignored::SenderNotAllowed, Ignored::NotMentioned]
    );
    assert_eq!(*inbox.offset.lock().expect("offset"), Some(last + 1));

    // A revoked token stops the poller, saying so.
    fake.revoke();
    let me: switchboard_telegram::User =
        serde_json::from_value(serde_json::json!({"id": 1, "first_name": "x"})).expect("user");
    let stopped = poll::run(
        &bot,
        &me,
        &Access::default(),
        None,
        &Recorded::default(),
        std::future::pending(),
    )
    .await;
    assert!(
        matches!(stopped, Stopped::Revoked(ref why) if why.contains("refused the bot token")),
        "{stopped:?}"
    );
}

/// Telegram wired to an engine: a direct message, a group mention and a forum topic's message
/// reach their sessions as `inject` would record them; each reply is queued for its chat (the
/// topic's in its topic) and sent there, split as needed; an update handed over again (the
/// offset lost in a crash) is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_messages_reach_their_sessions_and_replies_go_back_to_their_chats() {
    use switchboard::telegram::{Settings, run_inbound, send};
    let config = switchboard_config::load::parse_str(
        r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
             script: [ { reply: "re: {{text}}" } ] } ] } }"#,
    )
    .expect("config");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine");
    let api = engine.start();
    let fake = FakeTelegram::start(TOKEN).await;
    let settings = Settings {
        api_root: fake.api_root.clone(),
        token: TOKEN.into(),
        access: Access {
            dm_policy: switchboard_telegram::DmPolicy::Open,
            group_policy: GroupPolicy::Open,
            ..Access::default()
        },
        agent: "main".into(),
        direct_key: "agent:main:main".into(),
        webhook: None,
    };
    let poll_once = |api: std::sync::Arc<dyn switchboard_types::api::SessionsApi>| {
        let (settings, dir, fake) = (settings.clone(), dir.path().to_path_buf(), fake.clone());
        async move {
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let polling = tokio::spawn(async move {
                run_inbound(&settings, api, &dir, async {
                    let _ = stop_rx.await;
                })
                .await
            });
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while fake.pending() > 0 {
                assert!(tokio::time::Instant::now() < deadline, "never polled");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = stop_tx.send(());
            polling.await.expect("poller").expect("the bot started");
        }
    };
    fake.direct(42, "Ann", "hello");
    fake.group(-1001, 43, "deploy?", true);
    fake.push(serde_json::json!({
        "from": {"id": 44, "first_name": "Cy"},
        "chat": {"id": -1002, "type": "supergroup", "is_forum": true, "title": "Forum"},
        "message_thread_id": 7,
        "text": "@switchboard_test_bot long one",
        "entities": [{"type": "mention", "offset": 0, "length": 21}],
    }));
    poll_once(api.clone()).await;
    tokio::time::timeout(Duration::from_secs(30), engine.idle())
        .await
        .expect("the replies were made");

    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    let keys = [
        "agent:main:main",
        "agent:main:telegram:group:-1001",
        "agent:main:telegram:group:-1002:topic:7",
    ];
    for key in keys {
        let key = switchboard_types::key::SessionKey::from_canonical(key.to_string());
        let rows = engine.outbox(&key).await.expect("outbox");
        assert_eq!(rows.len(), 1, "{key}: {rows:?}");
        let row = &rows[0];
        assert_eq!(row.channel, "telegram");
        send(&bot, &row.to, row.thread_id.as_deref(), &row.text)
            .await
            .expect("sent");
    }
    let sent: Vec<(i64, Option<i64>, String)> = fake
        .sent()
        .into_iter()
        .map(|s| (s.chat_id, s.thread, s.text))
        .collect();
    assert_eq!(
        sent,
        [
            (42, None, "re: hello".to_string()),
            (-1001, None, format!("re: @{BOT_USERNAME} deploy?")),
            (-1002, Some(7), format!("re: @{BOT_USERNAME} long one")),
        ]
    );

    // A crash after reading a batch and before confirming it (the next poll) or keeping its
    // offset: the same updates come again and are recorded once (the update id is the
    // idempotency key).
    std::fs::remove_file(dir.path().join("channels/telegram.offset")).expect("the offset was kept");
    fake.replay();
    fake.direct(42, "Ann", "and again");
    poll_once(api.clone()).await;
    tokio::time::timeout(Duration::from_secs(30), engine.idle())
        .await
        .expect("idle");
    let texts = crate::common::transcript_texts(api.as_ref(), "agent:main:main").await;
    assert_eq!(texts, ["hello", "re: hello", "and again", "re: and again"]);
}

/// A sessions_send exchange whose target is a Telegram group's session: its announce is
/// queued for that group (kind `announce`) and sent there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchanges_announce_lands_in_the_targets_telegram_group() {
    use switchboard::telegram::send;
    let config = switchboard_config::load::parse_str(
        r#"{
          tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
          session: { agentToAgent: { maxPingPongTurns: 0 } },
          agents: { list: [ { id: "main", default: true, model: "scripted", script: [
            { when: { step: "message", text: "/^tell (\\S+) (.*)/" },
              tools: [{ name: "sessions_send", args: { sessionKey: "$1", message: "$2" } }],
              reply: "told" },
            { when: { step: "announce" }, reply: "for the group: {{text}}" },
            { reply: "ok: {{text}}" },
          ] } ] },
        }"#,
    )
    .expect("config");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config).expect("engine");
    let api = engine.start();
    // The group's session exists, with its route, from a first message there.
    let group = "agent:main:telegram:group:-1001";
    let first = api
        .send(switchboard_types::api::SendRequest {
            key: group.into(),
            text: "hello from the group".into(),
            from: switchboard_types::api::Sender {
                channel: Some("telegram".into()),
                chat_type: Some("group".into()),
                display_name: Some("Team".into()),
                sender: Some("43".into()),
                owner: false,
            },
            idempotency_key: None,
        })
        .await
        .expect("group message");
    assert!(
        api.wait_work(first.work, Duration::from_secs(30))
            .await
            .expect("work")
    );
    let r = api
        .send(crate::common::owner(
            "agent:main:main",
            &format!("tell {group} standup at 10"),
        ))
        .await
        .expect("owner message");
    assert!(
        api.wait_work(r.work, Duration::from_secs(30))
            .await
            .expect("work")
    );
    tokio::time::timeout(Duration::from_secs(30), engine.idle())
        .await
        .expect("the exchange ended");
    let rows = engine
        .outbox(&switchboard_types::key::SessionKey::from_canonical(
            group.to_string(),
        ))
        .await
        .expect("outbox");
    let announce: Vec<_> = rows.iter().filter(|r| r.kind == "announce").collect();
    assert_eq!(announce.len(), 1, "{rows:?}");
    assert_eq!(
        (announce[0].channel.as_str(), announce[0].to.as_str()),
        ("telegram", "group:-1001")
    );
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = Bot::new(&fake.api_root, TOKEN).expect("bot");
    send(
        &bot,
        &announce[0].to,
        announce[0].thread_id.as_deref(),
        &announce[0].text,
    )
    .await
    .expect("sent");
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].chat_id, -1001);
    assert!(
        sent[0].text.starts_with("for the group: "),
        "{:?}",
        sent[0].text
    );
}
