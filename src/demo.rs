//! The demo behind `switchboard demo`: a config with four scripted agents
//! (`assets/demo-config.json5`), a realistic set of sessions to start from (`seed`), and a
//! steady, deterministic stream of inbound messages that keeps the agents talking
//! (`start_traffic`), so the console has live traffic to show without any model or channel.
//!
//! Everything goes through `SessionsApi::send`, exactly as messages from real channels would,
//! so the console sees ordinary runs, exchanges, spawns, announces and policy refusals.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use switchboard_config::Config;
use switchboard_types::api::{SendRequest, Sender, SessionsApi, WorkId};

/// The demo's config (agents, scripts, send policy), built into the binary so `switchboard
/// demo` works from any folder.
pub const DEMO_CONFIG: &str = include_str!("../assets/demo-config.json5");

/// A pace that keeps the console busy but readable: most exchanges finish before the next
/// message arrives.
pub const DEFAULT_PACE: Duration = Duration::from_millis(1500);

/// The Discord group the demo's send policy denies (rule 1 of `session.sendPolicy`): sends
/// into it are refused and replies in it are not delivered.
pub const DENIED_GROUP: &str = "agent:support:discord:group:random";

/// The session the demo's console opens on, the same every run: Alice's chat with main,
/// where main's exchange with ops starts (the rounds pane is busy from the first seconds),
/// rather than whichever row the first page happened to hold (the denied #random group,
/// whose first line was a refusal, in most runs).
pub const OPENING: &str = ALICE_DM.key;

/// The demo config, parsed and checked by the crate's own loader.
pub fn demo_config() -> anyhow::Result<Config> {
    switchboard_config::load::parse_str(DEMO_CONFIG).map_err(|problems| {
        let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
        anyhow!(
            "the built-in demo config (assets/demo-config.json5) is invalid: {}",
            list.join("; ")
        )
    })
}

/// Fill a fresh engine (opened with [`demo_config`]) with the demo's starting sessions: direct
/// chats on Telegram, WhatsApp and webchat, groups on Discord, Slack and Telegram, a cron job,
/// a webhook, and the denied Discord group; their first messages set off exchanges (ending by
/// the cap and by REPLY_SKIP), announces (delivered, skipped, without a route), a sub-agent
/// and a refused send. Returns once all of that has finished.
pub async fn seed(api: &dyn SessionsApi) -> anyhow::Result<()> {
    let mut work = Vec::new();
    for m in seed_messages() {
        work.push(
            inject(api, &m)
                .await
                .with_context(|| format!("seeding the demo session {}", m.key))?,
        );
    }
    for w in work {
        settle(api, w).await?;
    }
    // Once everything above has settled, one more line in the console's opening session, so
    // it is the newest row (the top one) every run, whatever order the rest finished in.
    let last = at(
        &ALICE_DM,
        OWNER,
        "thanks! ping me if INC-4821 flares up again",
    );
    let w = inject(api, &last)
        .await
        .with_context(|| format!("seeding the demo session {}", last.key))?;
    settle(api, w).await
}

/// Wait until `work` has finished. Each wait is bounded by the work's own timeouts; the slice
/// only keeps the deadline arithmetic small.
async fn settle(api: &dyn SessionsApi, work: WorkId) -> anyhow::Result<()> {
    while !api.wait_work(work, Duration::from_secs(60)).await? {}
    Ok(())
}

/// Inject the next message of a fixed rotation every `pace` (the first one `pace` after the
/// call), until the task is aborted. It never waits for the work a message sets off, so the
/// console stays live however busy the agents are, and a failed message is logged and
/// skipped: the demo must go on. Needs a tokio runtime.
pub fn start_traffic(api: Arc<dyn SessionsApi>, pace: Duration) -> JoinHandle<()> {
    tokio::spawn(traffic(api, pace))
}

/// Seed, then keep the traffic coming, all in the background: the console draws its first
/// frame at once and fills in as the seed lands (seeding takes about two seconds). Abort the
/// task to stop both.
pub fn start(api: Arc<dyn SessionsApi>, pace: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = seed(api.as_ref()).await {
            tracing::warn!(error = %format!("{e:#}"), "demo: seeding stopped; the traffic goes on");
        }
        traffic(api, pace).await;
    })
}

async fn traffic(api: Arc<dyn SessionsApi>, pace: Duration) {
    // `interval` panics on a zero period; a zero pace means "as fast as possible".
    let mut ticker = tokio::time::interval(pace.max(Duration::from_millis(1)));
    // After a stall (a busy writer), carry on at the pace instead of bursting to catch up.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick completes at once; the seed has just run, so start one pace later.
    ticker.tick().await;
    let mut i: u64 = 0;
    loop {
        ticker.tick().await;
        let m = traffic_message(i);
        if let Err(e) = inject(api.as_ref(), &m).await {
            tracing::warn!(key = %m.key, error = %e, "demo traffic: could not inject a message");
        }
        i = i.wrapping_add(1);
    }
}

/// One inbound message: where it arrives and who sent it.
#[derive(Debug, Clone)]
struct Message {
    key: String,
    text: String,
    from: Sender,
}

/// A chat the demo talks in: its key and how messages arrive there.
struct Chat {
    key: &'static str,
    channel: Option<&'static str>,
    chat_type: Option<&'static str>,
    display_name: Option<&'static str>,
}

/// The gateway's owner (her Telegram DM is main's main session).
const OWNER: &str = "alice";

const ALICE_DM: Chat = Chat {
    key: "agent:main:main",
    channel: Some("telegram"),
    chat_type: Some("direct"),
    display_name: Some("Alice (Telegram)"),
};
const JONAS_DM: Chat = Chat {
    key: "agent:main:whatsapp:direct:+4915112345678",
    channel: Some("whatsapp"),
    chat_type: Some("direct"),
    display_name: Some("Jonas (WhatsApp)"),
};
const SAM_DM: Chat = Chat {
    key: "agent:support:whatsapp:direct:+14155550123",
    channel: Some("whatsapp"),
    chat_type: Some("direct"),
    display_name: Some("Sam (WhatsApp)"),
};
const INCIDENTS: Chat = Chat {
    key: "agent:ops:slack:group:incidents",
    channel: Some("slack"),
    chat_type: Some("group"),
    display_name: Some("#incidents"),
};
const STANDUP: Chat = Chat {
    key: "agent:ops:discord:group:eng-standup",
    channel: Some("discord"),
    chat_type: Some("group"),
    display_name: Some("#eng-standup"),
};
const PAPERS: Chat = Chat {
    key: "agent:research:telegram:group:-1001234567890",
    channel: Some("telegram"),
    chat_type: Some("group"),
    display_name: Some("Papers & benchmarks"),
};
const RANDOM: Chat = Chat {
    key: DENIED_GROUP,
    channel: Some("discord"),
    chat_type: Some("group"),
    display_name: Some("#random"),
};
const NIGHTLY: Chat = Chat {
    key: "agent:main:cron:nightly-report",
    channel: None,
    chat_type: None,
    display_name: None,
};

/// How webchat visitors and webhooks arrive; their keys are made per message (each visitor
/// and each webhook delivery is a session of its own, as on a real gateway).
const WEBCHAT: Chat = Chat {
    key: "",
    channel: Some("webchat"),
    chat_type: Some("direct"),
    display_name: None,
};
const WEBHOOK: Chat = Chat {
    key: "",
    channel: None,
    chat_type: None,
    display_name: None,
};

/// A message in `chat` (at `key`, or the chat's own key when `key` is `None`).
fn message(
    chat: &Chat,
    key: Option<String>,
    sender: Option<&str>,
    text: impl Into<String>,
) -> Message {
    Message {
        key: key.unwrap_or_else(|| chat.key.to_string()),
        text: text.into(),
        from: Sender {
            channel: chat.channel.map(str::to_string),
            chat_type: chat.chat_type.map(str::to_string),
            display_name: chat.display_name.map(str::to_string),
            sender: sender.map(str::to_string),
            owner: sender == Some(OWNER),
        },
    }
}

fn at(chat: &Chat, sender: &str, text: impl Into<String>) -> Message {
    message(chat, None, Some(sender), text)
}

/// The nightly cron job's run: no sender, no channel (so the sub-agent's announce is
/// recorded there but has no route).
fn nightly() -> Message {
    message(
        &NIGHTLY,
        None,
        None,
        "Nightly report: compile yesterday's KPIs",
    )
}

/// Webchat visitor `n`'s own session.
fn visitor(n: u64, text: &str) -> Message {
    let name = format!("visitor-{n}");
    let key = format!("agent:support:webchat:direct:{name}");
    message(&WEBCHAT, Some(key), Some(&name), text)
}

/// Webhook delivery `n`: a `hook:<uuid>` session of the default agent. The uuid is derived
/// from `n` so the demo is the same every time.
fn webhook(n: u64, source: &str, text: impl Into<String>) -> Message {
    const BASE: u128 = 0x3f9c1e52_8a47_4d0b_b6e2_5c71a9d04e18;
    let id = uuid::Uuid::from_u128(BASE.wrapping_add(u128::from(n)));
    let key = format!("agent:main:hook:{id}");
    message(&WEBHOOK, Some(key), Some(source), text)
}

/// The demo's first messages, in order. #random comes first: the refused send at the end
/// needs that session to exist (a send to a missing session is "No session found", not
/// the policy refusal the demo wants to show).
fn seed_messages() -> Vec<Message> {
    vec![
        at(&RANDOM, "dev_kim", "anyone up for lunch at 12:30?"),
        at(
            &INCIDENTS,
            "maria",
            "Disk alert on db-3 again, anyone on it?",
        ),
        at(
            &STANDUP,
            "lena",
            "standup: yesterday shipped the rate limiter, today flaky checkout tests",
        ),
        at(
            &PAPERS,
            "yuki",
            "New paper on speculative decoding just dropped, worth a read?",
        ),
        at(&SAM_DM, "Sam", "Hi! How do I change my billing email?"),
        at(&ALICE_DM, OWNER, "morning! anything I should know?"),
        // Refused: the send policy denies #random.
        at(
            &ALICE_DM,
            OWNER,
            "post in #random: maintenance window tonight 23:00-23:30 UTC",
        ),
        // main <-> ops: ends by the cap; ops announces to #incidents (delivered).
        at(&ALICE_DM, OWNER, "@ops is INC-4821 under control?"),
        // main <-> research: research says REPLY_SKIP, then ANNOUNCE_SKIP (skipped).
        at(
            &JONAS_DM,
            "Jonas",
            "@research what did last week's churn cohort look like?",
        ),
        // support <-> ops: support says REPLY_SKIP; ops announces to #incidents.
        visitor(8812, "Checkout keeps failing with a 502, I can't pay"),
        // A research sub-agent compiles the report; its announce comes back to the cron session.
        nightly(),
        // main -> support without waiting; support's announce has no route.
        webhook(
            0,
            "stripe",
            "Stripe webhook: invoice.payment_failed for customer acme-corp (inv_1042)",
        ),
    ]
}

/// Messages per round of the traffic rotation.
const ROTATION: u64 = 16;

/// The `i`-th message of the traffic (0-based): a fixed rotation, with ticket, order and
/// visitor numbers that move on each round so repeated messages are not identical.
fn traffic_message(i: u64) -> Message {
    let round = i / ROTATION;
    match i % ROTATION {
        0 => at(&ALICE_DM, OWNER, "@ops any update on INC-4821?"),
        1 => at(
            &INCIDENTS,
            "maria",
            "Disk alert on db-3 again, anyone on it?",
        ),
        // Each round a new visitor (new session); support escalates to ops.
        2 => visitor(
            8813 + round,
            "Checkout keeps failing with a 502, I can't pay",
        ),
        3 => at(
            &PAPERS,
            "yuki",
            "New paper on speculative decoding just dropped, worth a read?",
        ),
        4 => at(
            &JONAS_DM,
            "Jonas",
            "@research how are weekly actives trending?",
        ),
        5 => at(&RANDOM, "dev_kim", "who's bringing snacks on friday?"),
        // A sub-agent: alternate between two questions.
        6 => at(
            &ALICE_DM,
            OWNER,
            if round.is_multiple_of(2) {
                "please look into why signups dropped on Tuesday"
            } else {
                "please look into why EU conversion dipped yesterday"
            },
        ),
        7 => at(
            &STANDUP,
            "lena",
            "standup: yesterday shipped the rate limiter, today flaky checkout tests",
        ),
        8 => webhook(
            1 + 2 * round,
            "stripe",
            format!(
                "Stripe webhook: invoice.payment_failed for customer acme-corp (inv_{})",
                1043 + round
            ),
        ),
        9 => at(
            &ALICE_DM,
            OWNER,
            "post in #random: deploy freeze starts at 17:00 today",
        ),
        10 => at(
            &SAM_DM,
            "Sam",
            format!("Can I get a refund for order #{}?", 4810 + round),
        ),
        11 => nightly(),
        12 => at(
            &INCIDENTS,
            "maria",
            "Is the 2025.06.3 deploy still going out today?",
        ),
        13 => at(
            &JONAS_DM,
            "Jonas",
            "@research what did last week's churn cohort look like?",
        ),
        14 => webhook(
            2 + 2 * round,
            "github",
            format!(
                "GitHub webhook: pull_request #{} merged into main",
                1289 + round
            ),
        ),
        _ => at(&ALICE_DM, OWNER, "morning! anything I should know?"),
    }
}

/// Hand one message to the engine: recorded, then answered by a run that goes on by itself
/// (the returned work, for a caller that wants to wait for it).
async fn inject(api: &dyn SessionsApi, m: &Message) -> anyhow::Result<WorkId> {
    let receipt = api
        .send(SendRequest {
            key: m.key.clone(),
            text: m.text.clone(),
            from: m.from.clone(),
            idempotency_key: None,
        })
        .await?;
    Ok(receipt.work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_is_deterministic_and_covers_every_slot() {
        for i in 0..ROTATION * 2 {
            let (a, b) = (traffic_message(i), traffic_message(i));
            assert_eq!((a.key, a.text), (b.key, b.text));
        }
        // New visitors and webhooks each round; fixed chats stay the same.
        assert_ne!(traffic_message(2).key, traffic_message(2 + ROTATION).key);
        assert_ne!(traffic_message(8).key, traffic_message(14).key);
        assert_ne!(traffic_message(8).key, traffic_message(8 + ROTATION).key);
        assert_eq!(traffic_message(0).key, traffic_message(ROTATION).key);
    }

    #[test]
    fn keys_are_canonical() {
        let scheme = demo_config().expect("demo config").key_scheme();
        let all = seed_messages()
            .into_iter()
            .chain((0..ROTATION * 2).map(traffic_message));
        for m in all {
            let canonical = scheme.canonicalize(&m.key, "main").expect("a key");
            assert_eq!(canonical.as_str(), m.key);
        }
    }
}
