//! The Discord channel's inbound side wired to the engine (issue 29; Discord's gateway, REST
//! and access rules are in `switchboard_channels::discord`): each message the gateway hands
//! over and the access rules admit becomes an inbound message of its session through
//! `SessionsApi::send`, exactly as Telegram's are (channel `discord`, chat type, sender,
//! display name), with `discord:<bot id>:<message id>` as the idempotency key, so a message
//! Discord replays on a resume is recorded once. A guild channel's reply goes back to it by
//! its key; a direct message's to its sender (`user:<id>`), whose DM channel the REST adapter
//! opens.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchboard_channels::discord::access::{Access, Admit, Ignored};
use switchboard_channels::discord::events::{Message, User};
use switchboard_channels::discord::gateway::{self, GatewayOptions, Handler, Stopped};
use switchboard_channels::discord::{Discord, GatewayUrlError};
use switchboard_types::api::pairing::{PairingAnswer, PairingRequest};
use switchboard_types::api::{ApiError, SendRequest, Sender, SessionsApi};

use crate::channel_lease::ChannelLease;

/// The channel's name in keys, routes and the outbox.
pub const CHANNEL: &str = "discord";

/// What the Discord channel's inbound side needs.
#[derive(Clone)]
pub struct Settings {
    pub api_root: String,
    /// The gateway's URL when configured (`gatewayUrl`); else asked of the API.
    pub gateway_url: Option<String>,
    pub token: String,
    pub access: Access,
    /// The agent whose sessions Discord's channels are.
    pub agent: String,
    /// Where direct messages go: the agent's main session (OpenClaw's `dmScope: main`).
    pub direct_key: String,
}

impl std::fmt::Debug for Settings {
    // Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("api_root", &self.api_root)
            .field("gateway_url", &self.gateway_url)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The channel's settings from `channels.discord` (`None`: not configured, or
    /// `enabled: false`; `Err`: configured but unusable, said as `config check` says it).
    pub fn from_config(
        config: &switchboard_types::config::Config,
    ) -> Option<Result<Settings, String>> {
        let discord = config.channels.discord.as_ref().filter(|d| d.enabled)?;
        let Some(token) = discord.token() else {
            return Some(Err(format!(
                "channels.discord.token: missing (or set ${})",
                switchboard_types::config::channels::DISCORD_TOKEN_ENV
            )));
        };
        let scheme = config.key_scheme();
        let agent = discord
            .agent
            .clone()
            .unwrap_or_else(|| scheme.default_agent.clone());
        Some(Ok(Settings {
            api_root: discord
                .api_root
                .clone()
                .unwrap_or_else(|| switchboard_channels::discord::DEFAULT_API_ROOT.to_string()),
            gateway_url: discord.gateway_url.clone(),
            token,
            access: Access::from_config(discord),
            direct_key: scheme.main_key_for(&agent).as_str().to_string(),
            agent,
        }))
    }

    /// The bot's lane (`channel_lease.rs`): its id read from the token, never the token.
    fn lane(&self) -> String {
        ChannelLease::lane(
            CHANNEL,
            &switchboard_channels::discord::bot_id_of_token(&self.token),
        )
    }
}

/// Records admitted messages in the engine.
pub struct EngineInbox {
    api: Arc<dyn SessionsApi>,
    settings: Settings,
    /// Messages ignored (not allowed, not addressed, a bot's), for the log.
    ignored: AtomicU64,
    /// Busy guilds the bot is not asked in would otherwise write a line per message.
    gate: switchboard_server::Quiet,
    /// Discord's REST API, to tell an unknown sender their pairing code.
    rest: Option<Arc<Discord>>,
    /// Thread → the channel it is in, as the gateway tells them (at most `THREADS_KEPT`).
    threads: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// The most threads whose channel is remembered; past it the map starts over (the gateway
/// tells them again as they are created or synced).
const THREADS_KEPT: usize = 10_000;

impl EngineInbox {
    pub fn new(api: Arc<dyn SessionsApi>, settings: Settings) -> EngineInbox {
        EngineInbox {
            api,
            settings,
            ignored: AtomicU64::new(0),
            gate: switchboard_server::Quiet::default(),
            rest: None,
            threads: std::sync::Mutex::default(),
        }
    }

    /// The channel thread `channel` is in, if it is a thread the gateway told of.
    fn parent_of(&self, channel: &str) -> Option<String> {
        self.threads
            .lock()
            .ok()
            .and_then(|t| t.get(channel).cloned())
    }

    /// Unknown senders are told their pairing code through `rest`.
    pub fn with_rest(mut self, rest: Arc<Discord>) -> EngineInbox {
        self.rest = Some(rest);
        self
    }

    /// A message ignored, counted (and said in the log, at a bounded rate).
    fn ignore(&self, why: Ignored, message: &Message) {
        let so_far = self.ignored.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(skipped) = self.gate.admit() {
            tracing::info!(
                why = why.as_str(),
                channel = %message.channel_id,
                so_far,
                skipped,
                "a Discord message was ignored"
            );
        }
    }

    /// An unpaired sender's direct message (`dmPolicy: "pairing"`): taken as an allowed
    /// sender's once the owner approved them; else, the first time, they are told a code in
    /// their DM channel (`None`: nothing more to do with it).
    async fn pair(&self, message: &Message) -> Result<Option<Admit>, String> {
        let request = PairingRequest {
            channel: CHANNEL.into(),
            sender: message.author.id.clone(),
            display_name: Some(message.display_name()),
        };
        Ok(match self.api.pairing_ask(request).await {
            Ok(PairingAnswer::Approved) => Some(Admit::Direct),
            Ok(PairingAnswer::New { code, .. }) => {
                tracing::info!(sender = %message.author.id, "a Discord sender was given a pairing code");
                let text = pairing_message(&message.author.id, &code);
                let nonce = format!("pair-{}", message.id);
                let told = match &self.rest {
                    Some(rest) => rest
                        .say(&message.channel_id, &text, &nonce)
                        .await
                        .map(|_| ()),
                    None => Ok(()),
                };
                if let Err(e) = told {
                    // The code stands: `pairing list` shows it to the owner.
                    tracing::warn!(error = %e, "cannot tell a Discord sender their pairing code");
                }
                None
            }
            Ok(PairingAnswer::Waiting | PairingAnswer::Full) => {
                self.ignore(Ignored::SenderNotAllowed, message);
                None
            }
            Err(e) => {
                tracing::error!(error = %e, message = %message.id, "cannot ask for a Discord sender's pairing");
                return Err(e.to_string());
            }
        })
    }

    /// The request recording `message`, `admitted` so (`None`: ignored, and counted).
    fn request(&self, me: &User, message: &Message, admitted: Admit) -> Option<SendRequest> {
        let (key, chat_type, sender) = match admitted {
            Admit::Ignored(why) => {
                self.ignore(why, message);
                return None;
            }
            // Asked about before: not approved.
            Admit::Unpaired => return None,
            // A direct message's replies go to the person (their DM channel is opened to send).
            Admit::Direct => (
                self.settings.direct_key.clone(),
                "direct",
                format!("user:{}", message.author.id),
            ),
            // A guild channel's go to the channel its key names; the sender is who spoke.
            Admit::Guild { channel_id } => (
                format!(
                    "agent:{}:{CHANNEL}:channel:{channel_id}",
                    self.settings.agent
                ),
                "channel",
                message.author.id.clone(),
            ),
        };
        Some(SendRequest {
            key,
            text: message.content.clone(),
            from: Sender {
                channel: Some(CHANNEL.into()),
                chat_type: Some(chat_type.into()),
                display_name: Some(message.display_name()),
                sender: Some(sender),
                owner: false,
            },
            idempotency_key: Some(format!("{CHANNEL}:{}:{}", me.id, message.id)),
        })
    }
}

#[async_trait::async_trait]
impl Handler for EngineInbox {
    async fn ready(&self, me: &User) {
        tracing::info!(bot = %me.username, id = %me.id, "Discord channel up");
    }

    async fn thread(&self, thread: &str, parent: &str) {
        if let Ok(mut threads) = self.threads.lock() {
            if threads.len() >= THREADS_KEPT && !threads.contains_key(thread) {
                threads.clear();
            }
            threads.insert(thread.to_string(), parent.to_string());
        }
    }

    async fn message(&self, me: &User, message: Message) -> Result<(), String> {
        let parent = self.parent_of(&message.channel_id);
        let admitted = match self
            .settings
            .access
            .admit_in(&message, &me.id, parent.as_deref())
        {
            Admit::Unpaired => match self.pair(&message).await? {
                Some(admitted) => admitted,
                None => return Ok(()),
            },
            admitted => admitted,
        };
        let Some(request) = self.request(me, &message, admitted) else {
            return Ok(());
        };
        // A message replayed after a resume: its key is recorded, and the send answers with
        // the first receipt, recording nothing. The same key makes a retry safe: a store that
        // fails for a moment is tried again here (a few times over about 3 s; the
        // connection's heartbeats wait meanwhile), then the gateway resumes from before the
        // message so Discord sends it again.
        use backon::Retryable;
        let delays = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(2))
            .with_max_times(3);
        let recorded = (|| self.api.send(request.clone()))
            .retry(delays)
            .sleep(tokio::time::sleep)
            .await;
        match recorded {
            Ok(_) => Ok(()),
            // This message will never be taken: dropped, said.
            Err(ApiError::BadInput(why)) => {
                tracing::warn!(%why, message = %message.id, "a Discord message was refused");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, message = %message.id, "cannot record a Discord message yet");
                Err(e.to_string())
            }
        }
    }
}

/// What an unknown sender is told: who they are to the bot, the code, and what the owner
/// runs.
pub fn pairing_message(sender: &str, code: &str) -> String {
    format!(
        "This bot does not know you yet.\n\nYour Discord user id: {sender}\nPairing code: \
         {code}\n\nAsk its owner to approve you with:\n`switchboard pairing approve {CHANNEL} \
         {code}`\n\nThe code can be approved for an hour."
    )
}

/// Why the inbound side stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    #[error(transparent)]
    GatewayUrl(#[from] GatewayUrlError),
    #[error("cannot set up the channel: {0}")]
    Setup(String),
}

/// Connect to Discord's gateway for `settings` and record its messages through `api` until
/// `stop` resolves or Discord refuses the bot for good.
pub async fn run_inbound(
    settings: &Settings,
    api: Arc<dyn SessionsApi>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Stopped, InboundError> {
    let http = crate::channels::http_client().map_err(|e| InboundError::Setup(e.to_string()))?;
    let rest = Arc::new(Discord::new(
        &settings.token,
        &settings.api_root,
        http,
        switchboard_channels::webhook::DEFAULT_TIMEOUT,
    ));
    let url = match &settings.gateway_url {
        Some(url) => url.clone(),
        None => rest.gateway_url().await?,
    };
    let tls =
        switchboard_protocol::tls_client::config(switchboard_protocol::tls_client::web_roots())
            .map_err(|e| InboundError::Setup(e.to_string()))?;
    let options = GatewayOptions::new(
        &settings.token,
        &url,
        Some(gateway::Connector::Rustls(Arc::new(tls))),
    );
    tracing::info!(%url, "Discord gateway: connecting");
    let inbox = EngineInbox::new(api, settings.clone()).with_rest(rest);
    Ok(gateway::run(&options, &inbox, stop).await)
}

/// Start the channel's inbound side in the background for as long as the process runs
/// (abort the handle to stop it), holding the bot's lane while connected. A refused token
/// or intent stops it, said in the log; the other channels go on.
pub fn spawn(
    settings: Settings,
    api: Arc<dyn SessionsApi>,
    lease: ChannelLease,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let lane = settings.lane();
        lease.acquire(&lane).await;
        // Discord's API away at start: asked again, 1 s doubling to a minute.
        let mut pauses = crate::channels::StartPauses::new();
        loop {
            match run_inbound(&settings, api.clone(), std::future::pending()).await {
                Ok(Stopped::Asked) => break,
                Ok(Stopped::Refused(fatal)) => {
                    tracing::error!(why = fatal.explain(), "the Discord channel stopped");
                    break;
                }
                Err(InboundError::GatewayUrl(GatewayUrlError::Revoked(why))) => {
                    tracing::error!(%why, "the Discord channel cannot start: its token was refused");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Discord channel cannot start yet; retrying");
                    pauses.wait().await;
                }
            }
        }
        lease.release(&lane).await;
    })
}
