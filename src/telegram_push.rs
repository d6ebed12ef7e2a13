//! The Telegram channel's webhook mode (`webhookUrl`): Telegram pushes updates to the
//! gateway instead of being polled. `TelegramPush` takes them at the gateway's `webhookPath`
//! (a `switchboard_server::Pushed` route); `spawn_webhook` tells Telegram where to push.

use std::path::Path;
use std::sync::Arc;

use switchboard_telegram::{Access, Admit, Bot, Inbox, TelegramError};
use switchboard_types::api::SessionsApi;

use crate::telegram::{EngineInbox, Settings};

/// Telegram's pushed updates at the gateway (`webhookUrl`): checked by their secret header,
/// admitted by the access rules, recorded through the inbox as polled ones are (the update id
/// is the idempotency key, so an update Telegram sends again is recorded once). Until the
/// bot is known (`getMe`, `setWebhook`), updates are answered 503 and Telegram sends them
/// again.
pub struct TelegramPush {
    secret: String,
    access: Access,
    ready: std::sync::OnceLock<(switchboard_telegram::User, EngineInbox)>,
}

impl TelegramPush {
    pub fn new(settings: &Settings) -> Option<TelegramPush> {
        let webhook = settings.webhook.as_ref()?;
        Some(TelegramPush {
            secret: webhook.secret.clone(),
            access: settings.access.clone(),
            ready: std::sync::OnceLock::new(),
        })
    }
}

#[async_trait::async_trait]
impl switchboard_server::Pushed for TelegramPush {
    fn secret_header(&self) -> &str {
        "x-telegram-bot-api-secret-token"
    }

    fn secret(&self) -> &str {
        &self.secret
    }

    async fn take(&self, body: &[u8]) -> Result<(), switchboard_server::PushError> {
        use switchboard_server::PushError;
        let Some((me, inbox)) = self.ready.get() else {
            return Err(PushError::Busy("the Telegram channel is starting".into()));
        };
        let value: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| PushError::Body(format!("not a Telegram update: {e}")))?;
        let update = switchboard_telegram::update_of(value)
            .ok_or_else(|| PushError::Body("not a Telegram update: no update_id".into()))?;
        let Some(message) = &update.message else {
            return Ok(());
        };
        match self.access.admit(message, me) {
            Admit::Ignored(why) => {
                inbox.ignored(why);
                Ok(())
            }
            admitted => inbox
                .take(update.update_id, admitted)
                .await
                .map_err(PushError::Busy),
        }
    }
}

/// The webhook side of the channel, in the background: the bot asked who it is and Telegram
/// told where to push (tried again, 1 s doubling to a minute, while Telegram is away); then
/// `push` takes the updates. A refused token stops it, said in the log.
pub fn spawn_webhook(
    settings: Settings,
    api: Arc<dyn SessionsApi>,
    state_dir: &Path,
    push: Arc<TelegramPush>,
) -> tokio::task::JoinHandle<()> {
    let state_dir = state_dir.to_path_buf();
    tokio::spawn(async move {
        let Some(webhook) = settings.webhook.clone() else {
            return;
        };
        let mut pauses = crate::channels::StartPauses::new();
        loop {
            let set = async {
                let bot = Bot::new(&settings.api_root, &settings.token)?;
                let me = bot.get_me().await?;
                bot.set_webhook(&webhook.url, &webhook.secret).await?;
                Ok::<_, TelegramError>((bot, me))
            };
            match set.await {
                Ok((bot, me)) => {
                    tracing::info!(
                        bot = me.username.as_deref().unwrap_or(""),
                        url = %webhook.url,
                        "Telegram channel up: updates pushed to the webhook"
                    );
                    let inbox = EngineInbox::new(api, &settings.agent, me.id, &state_dir)
                        .with_direct_key(&settings.direct_key)
                        .with_bot(&bot);
                    let _ = push.ready.set((me, inbox));
                    return;
                }
                Err(e) if e.revoked() => {
                    tracing::error!(error = %e, "the Telegram channel cannot start: its token was refused");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Telegram webhook cannot be set yet; retrying");
                    pauses.wait().await;
                }
            }
        }
    })
}
