//! Telegram's inbound side (issue 29): a flood of 1,000 updates in the local fake Bot API,
//! polled by the channel into an engine on a fresh SQLite state folder, each answered by a
//! scripted agent. Printed: the engine's time per recorded message (`SessionsApi::send`,
//! what `Inbox::take` waits for), the time until all 1,000 are recorded and until every reply
//! is made, and that none was lost or recorded twice.
//!
//! Run: `cargo bench --bench telegram`.

#[path = "../tests/common/fake_telegram.rs"]
mod fake_telegram;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_telegram::{Access, Admit, DmPolicy, Ignored, Inbox, poll};
use switchboard_types::api::{SessionsApi, TranscriptQuery};

const TOKEN: &str = "555:bench-token";
const UPDATES: usize = 1000;

/// The channel's inbox, timing each recording.
struct Timed {
    inner: switchboard::telegram::EngineInbox,
    times: Mutex<Vec<Duration>>,
}

impl Inbox for Timed {
    async fn take(&self, update_id: i64, admitted: Admit) -> Result<(), String> {
        let started = Instant::now();
        let taken = self.inner.take(update_id, admitted).await;
        self.times.lock().expect("times").push(started.elapsed());
        taken
    }

    async fn save_offset(&self, offset: i64) {
        self.inner.save_offset(offset).await;
    }

    fn ignored(&self, why: Ignored) {
        self.inner.ignored(why);
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let config = switchboard_config::load::parse_str(
            r#"{ agents: { list: [ { id: "main", default: true, model: "scripted",
                 script: [ { reply: "re: {{text}}" } ] } ] } }"#,
        )
        .expect("config");
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = switchboard::state_folder::open_engine(dir.path(), config).expect("engine");
        let api: Arc<dyn SessionsApi> = engine.start();
        let fake = fake_telegram::FakeTelegram::start(TOKEN).await;
        // 100 people, 10 messages each, all in one burst; a few groups too.
        for i in 0..UPDATES {
            if i % 10 == 9 {
                fake.group(-(1000 + (i as i64 % 7)), 5000 + i as i64, &format!("m{i}"), true);
            } else {
                fake.direct(1 + (i as i64 % 100), "Person", &format!("m{i}"));
            }
        }
        let bot = switchboard_telegram::Bot::new(&fake.api_root, TOKEN).expect("bot");
        let me = bot.get_me().await.expect("getMe");
        let access = Access {
            dm_policy: DmPolicy::Open,
            group_policy: switchboard_telegram::GroupPolicy::Open,
            ..Access::default()
        };
        let inbox = Timed {
            inner: switchboard::telegram::EngineInbox::new(api.clone(), "main", me.id, dir.path()),
            times: Mutex::new(Vec::new()),
        };
        let started = Instant::now();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let watcher = {
            let fake = fake.clone();
            tokio::spawn(async move {
                while fake.pending() > 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let _ = stop_tx.send(());
            })
        };
        poll::run(&bot, &me, &access, None, &inbox, async {
            let _ = stop_rx.await;
        })
        .await;
        let recorded = started.elapsed();
        watcher.await.expect("watcher");
        tokio::time::timeout(Duration::from_secs(300), engine.idle())
            .await
            .expect("every reply made");
        let answered = started.elapsed();

        let mut times = inbox.times.lock().expect("times").clone();
        times.sort();
        let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
        // Every message once: the main session holds the 900 direct ones and their replies.
        let page = api
            .transcript(TranscriptQuery {
                key: "agent:main:main".into(),
                limit: 5000,
                ..Default::default()
            })
            .await
            .expect("transcript");
        let asked = page.lines.iter().filter(|l| l.text.starts_with('m')).count();
        let replies = page.lines.iter().filter(|l| l.text.starts_with("re: m")).count();
        println!(
            "telegram/inbound {} updates: engine time per recorded message p50 {:?} p99 {:?} max {:?}; \
             all recorded after {:?}, all answered after {:?}; main session: {asked} messages, {replies} replies (900 expected each)",
            times.len(),
            at(0.5),
            at(0.99),
            times[times.len() - 1],
            recorded,
            answered
        );
    });
}
