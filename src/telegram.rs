//! The Telegram channel wired to the engine (issue 29; the Bot API and Telegram's rules are in
//! `switchboard_telegram`): messages the poller admits become inbound messages of their
//! session through `SessionsApi::send`, exactly as `inject` records them (channel
//! `telegram`, chat type, sender, display name), with the update's id as the idempotency key
//! so an update handed over twice after a crash is recorded once; the poll offset is kept in
//! the state folder; and a queued delivery is sent to its chat, split at Telegram's limit.
//! Updates pushed to a webhook instead are `telegram_push.rs`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_telegram::{Access, Admit, Bot, Ignored, Inbox, TelegramError, poll};
use switchboard_types::api::pairing::{PairingAnswer, PairingRequest};
use switchboard_types::api::{SendRequest, Sender, SessionsApi};

use crate::channel_lease::ChannelLease;

/// The channel's name in keys, routes and the outbox.
pub const CHANNEL: &str = "telegram";

/// Where the poll offset is kept, in the state folder.
const OFFSET_FILE: &str = "channels/telegram.offset";

/// Telegram's pushed updates (`webhookUrl`): the public URL Telegram is told, the secret it
/// sends with each update, and the gateway's path they arrive at.
#[derive(Clone)]
pub struct WebhookSettings {
    pub url: String,
    pub secret: String,
    pub path: String,
}

/// What the Telegram channel needs. Debug never shows the token or the webhook's secret.
#[derive(Clone)]
pub struct Settings {
    pub api_root: String,
    pub token: String,
    pub access: Access,
    /// The agent whose sessions Telegram's messages go to.
    pub agent: String,
    /// Where direct chats go: the agent's main session as the key scheme names it
    /// (`session.mainKey`, or `global` under global scope), OpenClaw's `dmScope: main`.
    pub direct_key: String,
    /// Updates pushed by Telegram instead of polled (`None`: long polling).
    pub webhook: Option<WebhookSettings>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("api_root", &self.api_root)
            .field("agent", &self.agent)
            .field("direct_key", &self.direct_key)
            .field("webhook", &self.webhook.as_ref().map(|w| (&w.url, &w.path)))
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The channel's settings from `channels.telegram` (`None`: not configured, or
    /// `enabled: false`; `Err`: configured but unusable, said as `config check` says it).
    pub fn from_config(
        config: &switchboard_types::config::Config,
    ) -> Option<Result<Settings, String>> {
        let telegram = config.channels.telegram.as_ref().filter(|t| t.enabled)?;
        let Some(token) = telegram.token() else {
            return Some(Err(format!(
                "channels.telegram.botToken: missing (or set ${})",
                switchboard_types::config::channels::TELEGRAM_TOKEN_ENV
            )));
        };
        let access = Access {
            dm_policy: telegram.dm_policy,
            allow_from: telegram.allow_from_text(),
            group_policy: telegram.group_policy,
            groups: telegram
                .groups
                .iter()
                .map(|(chat, g)| {
                    (
                        chat.clone(),
                        switchboard_telegram::GroupRule {
                            require_mention: g.require_mention,
                            enabled: g.enabled,
                        },
                    )
                })
                .collect(),
        };
        let webhook = match (&telegram.webhook_url, &telegram.webhook_secret) {
            (None, _) => None,
            (Some(_), None) => {
                return Some(Err(
                    "channels.telegram.webhookSecret: missing (a webhook needs one)".into(),
                ));
            }
            (Some(url), Some(secret)) => Some(WebhookSettings {
                url: url.clone(),
                secret: secret.clone(),
                path: telegram.webhook_path.clone().unwrap_or_else(|| {
                    switchboard_types::config::channels::TELEGRAM_WEBHOOK_PATH.to_string()
                }),
            }),
        };
        let scheme = config.key_scheme();
        let agent = telegram
            .agent
            .clone()
            .unwrap_or_else(|| scheme.default_agent.clone());
        Some(Ok(Settings {
            api_root: telegram
                .api_root
                .clone()
                .unwrap_or_else(|| switchboard_telegram::DEFAULT_API_ROOT.to_string()),
            token,
            access,
            direct_key: scheme.main_key_for(&agent).as_str().to_string(),
            agent,
            webhook,
        }))
    }
}

/// The lane the poller holds (`channel_lease.rs`): the bot's id (before the token's colon)
/// names it; the secret never does.
fn lane(settings: &Settings) -> String {
    let bot = settings.token.split(':').next().unwrap_or_default();
    ChannelLease::lane(CHANNEL, bot)
}

/// Start the channel in the background for as long as the process runs (abort the handle to
/// stop it: every step it takes is recorded before the next). It logs when it is up, and
/// why it stopped (a refused token stops it; the others go on).
pub fn spawn(
    settings: Settings,
    api: Arc<dyn SessionsApi>,
    state_dir: &Path,
    lease: ChannelLease,
) -> tokio::task::JoinHandle<()> {
    let state_dir = state_dir.to_path_buf();
    tokio::spawn(async move {
        let lane = lane(&settings);
        lease.acquire(&lane).await;
        // Telegram away at start: tried again, 1 s doubling to a minute.
        let mut pauses = crate::channels::StartPauses::new();
        loop {
            match run_inbound(&settings, api.clone(), &state_dir, std::future::pending()).await {
                Ok(poll::Stopped::Asked) => break,
                Ok(poll::Stopped::Revoked(why)) => {
                    tracing::error!(%why, "the Telegram channel stopped: its token was refused");
                    break;
                }
                Err(e) if e.revoked() => {
                    tracing::error!(error = %e, "the Telegram channel cannot start: its token was refused");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Telegram channel cannot start yet; retrying");
                    pauses.wait().await;
                }
            }
        }
        lease.release(&lane).await;
    })
}

/// The channel's outbound side, for the outbox drain: a delivery goes to its chat in as
/// many messages as Telegram's limit needs. Telegram has no idempotency key for
/// `sendMessage`, so a crash between its accepting and our recording sends it again (at
/// least once); a retry after a failure part-way through a long reply sends only the parts
/// not yet accepted (`send_parts`).
pub struct TelegramChannel {
    bot: Bot,
}

impl TelegramChannel {
    pub fn new(settings: &Settings) -> Result<TelegramChannel, TelegramError> {
        Ok(TelegramChannel {
            bot: Bot::new(&settings.api_root, &settings.token)?,
        })
    }
}

#[async_trait::async_trait]
impl switchboard_channels::Channel for TelegramChannel {
    fn kind(&self) -> &str {
        CHANNEL
    }

    fn dedup(&self) -> switchboard_channels::Dedup {
        switchboard_channels::Dedup::None
    }

    async fn send(
        &self,
        delivery: &switchboard_store::OutboxRow,
    ) -> Result<switchboard_channels::Sent, switchboard_channels::SendError> {
        let (chat, thread) =
            target(&delivery.to, delivery.thread_id.as_deref()).map_err(|e| send_error(&e))?;
        let parts = switchboard_telegram::split(&delivery.text, switchboard_telegram::MAX_MESSAGE);
        // A retry after a failure part-way posts only the parts not yet accepted.
        switchboard_channels::send_parts(delivery, &parts, |_, part| async move {
            self.bot
                .send_message(chat, &part, thread)
                .await
                .map(|id| id.to_string())
                .map_err(|e| send_error(&e))
        })
        .await
    }
}

/// Records admitted messages in the engine and keeps the offset in the state folder.
pub struct EngineInbox {
    api: Arc<dyn SessionsApi>,
    agent: String,
    /// The bot's id: the idempotency key names it, so two bots' update ids never meet.
    bot_id: i64,
    offset_file: PathBuf,
    /// Messages ignored (not allowed, not addressed, no text), for the channel's report.
    ignored: AtomicU64,
    /// Where direct chats go (`Settings::direct_key`); `agent:<agent>:main` when unset.
    direct_key: Option<String>,
    /// The bot, to tell an unknown sender their pairing code.
    bot: Option<Bot>,
}

impl EngineInbox {
    pub fn new(
        api: Arc<dyn SessionsApi>,
        agent: &str,
        bot_id: i64,
        state_dir: &Path,
    ) -> EngineInbox {
        EngineInbox {
            api,
            agent: agent.to_string(),
            bot_id,
            offset_file: state_dir.join(OFFSET_FILE),
            ignored: AtomicU64::new(0),
            direct_key: None,
            bot: None,
        }
    }

    /// Unknown senders are told their pairing code through `bot`.
    pub fn with_bot(mut self, bot: &Bot) -> EngineInbox {
        self.bot = Some(bot.clone());
        self
    }

    /// Direct chats go to `key` (the key scheme's main session of the agent).
    pub fn with_direct_key(mut self, key: &str) -> EngineInbox {
        self.direct_key = Some(key.to_string());
        self
    }

    /// The offset kept by the last run (`None`: never polled here).
    pub fn kept_offset(&self) -> Option<i64> {
        std::fs::read_to_string(&self.offset_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

impl EngineInbox {
    /// An unpaired sender's message (`dmPolicy: "pairing"`): taken as a direct chat's once
    /// the owner approved them; else, the first time, they are told a code (`None`: nothing
    /// more to do with it).
    async fn pair(&self, admitted: Admit) -> Result<Option<Admit>, String> {
        let Admit::Unpaired {
            chat_id,
            sender,
            display_name,
            text,
        } = admitted
        else {
            return Ok(Some(admitted));
        };
        let request = PairingRequest {
            channel: CHANNEL.into(),
            sender: sender.clone(),
            display_name: Some(display_name.clone()),
        };
        match self
            .api
            .pairing_ask(request)
            .await
            .map_err(|e| e.to_string())?
        {
            PairingAnswer::Approved => Ok(Some(Admit::Direct {
                chat_id,
                sender,
                display_name,
                text,
            })),
            PairingAnswer::New { code, .. } => {
                tracing::info!(sender = %sender, "a Telegram sender was given a pairing code");
                if let Some(bot) = &self.bot
                    && let Err(e) = bot
                        .send_message(chat_id, &pairing_message(&sender, &code), None)
                        .await
                {
                    // The code stands: `pairing list` shows it to the owner.
                    tracing::warn!(error = %e, "cannot tell a Telegram sender their pairing code");
                }
                Ok(None)
            }
            PairingAnswer::Waiting | PairingAnswer::Full => {
                self.ignored(Ignored::SenderNotAllowed);
                Ok(None)
            }
        }
    }
}

/// What an unknown sender is told: who they are to the bot, the code, and what the owner
/// runs.
pub fn pairing_message(sender: &str, code: &str) -> String {
    format!(
        "This bot does not know you yet.\n\nYour Telegram user id: {sender}\nPairing code: \
         {code}\n\nAsk its owner to approve you with:\nswitchboard pairing approve {CHANNEL} \
         {code}\n\nThe code can be approved for an hour."
    )
}

impl Inbox for EngineInbox {
    async fn take(&self, update_id: i64, admitted: Admit) -> Result<(), String> {
        let Some(admitted) = self.pair(admitted).await? else {
            return Ok(());
        };
        let key = match (&admitted, &self.direct_key) {
            (Admit::Direct { .. }, Some(direct)) => direct.clone(),
            _ => match admitted.key(&self.agent) {
                Some(key) => key,
                None => return Ok(()),
            },
        };
        // A direct chat's replies go to the chat, whose id is the person's; a group's go to
        // the group its key names, so there the sender is only who spoke.
        let (text, chat_type, sender, display_name) = match admitted {
            Admit::Direct {
                chat_id,
                display_name,
                text,
                ..
            } => (text, "direct", chat_id.to_string(), display_name),
            Admit::Group {
                sender,
                display_name,
                text,
                ..
            } => (text, "group", sender, display_name),
            Admit::Ignored(_) | Admit::Unpaired { .. } => return Ok(()),
        };
        let from = Sender {
            channel: Some(CHANNEL.into()),
            chat_type: Some(chat_type.into()),
            display_name: Some(display_name),
            sender: Some(sender),
            owner: false,
        };
        let request = SendRequest {
            key,
            text,
            from,
            idempotency_key: Some(format!("{CHANNEL}:{}:{update_id}", self.bot_id)),
        };
        // The same update after a crash: the key is recorded, and the send answers with the
        // first receipt, recording nothing.
        self.api
            .send(request)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn save_offset(&self, offset: i64) {
        if let Err(e) = write_atomically(&self.offset_file, &offset.to_string()) {
            tracing::warn!(error = %e, file = %self.offset_file.display(), "cannot keep Telegram's poll offset");
        }
    }

    fn ignored(&self, why: Ignored) {
        let so_far = self.ignored.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(why = why.as_str(), so_far, "a Telegram message was ignored");
    }
}

/// Write `text` to `path` through a temporary file and a rename: a crash leaves the old
/// offset or the new one, never half of one.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)
}

/// Poll Telegram for `settings` until `stop` resolves or the token is refused, recording
/// messages through `api`; what stopped it.
pub async fn run_inbound(
    settings: &Settings,
    api: Arc<dyn SessionsApi>,
    state_dir: &Path,
    stop: impl std::future::Future<Output = ()>,
) -> Result<poll::Stopped, TelegramError> {
    let bot = Bot::new(&settings.api_root, &settings.token)?;
    let me = bot.get_me().await?;
    tracing::info!(
        bot = me.username.as_deref().unwrap_or(""),
        "Telegram channel up"
    );
    // A webhook set before (by a webhook setup, or OpenClaw's) makes Telegram refuse
    // `getUpdates` with 409: polling means no webhook.
    if let Err(e) = bot.delete_webhook().await {
        if e.revoked() {
            return Err(e);
        }
        tracing::warn!(error = %e, "cannot remove Telegram's webhook before polling");
    }
    let inbox = EngineInbox::new(api, &settings.agent, me.id, state_dir)
        .with_direct_key(&settings.direct_key)
        .with_bot(&bot);
    let offset = inbox.kept_offset();
    Ok(poll::run(&bot, &me, &settings.access, offset, &inbox, stop).await)
}

/// Send `text` to route `to` (`<chatId>`, or `group:<chatId>` / `channel:<chatId>`, a forum
/// topic as `…:topic:<threadId>` or in `thread`), in as many messages as Telegram's limit
/// needs; the ids of the messages, in order.
pub async fn send(
    bot: &Bot,
    to: &str,
    thread: Option<&str>,
    text: &str,
) -> Result<Vec<i64>, TelegramError> {
    let (chat_id, thread) = target(to, thread)?;
    let mut ids = Vec::new();
    for part in switchboard_telegram::split(text, switchboard_telegram::MAX_MESSAGE) {
        ids.push(bot.send_message(chat_id, &part, thread).await?);
    }
    Ok(ids)
}

/// The chat and forum topic a delivery goes to: its route's, the topic from the route or the
/// delivery's thread.
fn target(to: &str, thread: Option<&str>) -> Result<(i64, Option<i64>), TelegramError> {
    let (chat_id, topic) = parse_route(to).ok_or_else(|| TelegramError::Refused {
        code: 0,
        description: format!("{to:?} is not a Telegram chat (a chat id, or group:<chat id>)"),
    })?;
    Ok((
        chat_id,
        topic.or_else(|| thread.and_then(|t| t.parse().ok())),
    ))
}

/// What the drain does with a Bot API failure: stop the channel (the token), try again
/// (after Telegram's `retry_after` when it gave one), or give the message up.
fn send_error(e: &TelegramError) -> switchboard_channels::SendError {
    use switchboard_channels::SendError;
    if e.revoked() {
        return SendError::Revoked {
            reason: e.to_string(),
        };
    }
    match e.retry() {
        Some(after) => SendError::Retry {
            after,
            reason: e.to_string(),
        },
        None => SendError::Fatal {
            reason: e.to_string(),
        },
    }
}

/// The chat id (and forum topic) a route names.
fn parse_route(to: &str) -> Option<(i64, Option<i64>)> {
    let rest = to
        .strip_prefix("group:")
        .or_else(|| to.strip_prefix("channel:"))
        .unwrap_or(to);
    let mut parts = rest.split(':');
    let chat = parts.next()?.parse().ok()?;
    let topic = match (parts.next(), parts.next()) {
        (Some("topic"), Some(t)) => Some(t.parse().ok()?),
        (None, None) => None,
        _ => return None,
    };
    Some((chat, topic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_chats_and_topics() {
        assert_eq!(parse_route("42"), Some((42, None)));
        assert_eq!(parse_route("group:-1001"), Some((-1001, None)));
        assert_eq!(parse_route("group:-1001:topic:7"), Some((-1001, Some(7))));
        assert_eq!(parse_route("channel:-5"), Some((-5, None)));
        assert_eq!(parse_route("group:x"), None);
        assert_eq!(parse_route("group:-1:thread:2"), None);
    }
}
