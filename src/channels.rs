//! The channels beside the engine (docs/ARCHITECTURE.md, "Channels"): the adapters built
//! from the config's `channels` section, the outbox drain sending through them (started by
//! `serve` and the console, stopped with them), and the inbound webhooks the gateway
//! accepts. The engine only queues deliveries; it never calls an adapter.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchboard_channels::webhook::{DEFAULT_TIMEOUT, Webhook};
use switchboard_channels::{Adapter, Drain, DrainHandle, DrainOptions, RetryPolicy};
use switchboard_engine::Engine;
use switchboard_types::api::{EngineEvent, SessionsApi, StreamItem};
use switchboard_types::config::{ChannelRetryConfig, Config};

/// Why the channels could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ChannelsError {
    #[error("cannot set up TLS for the channels' HTTP client: {0}")]
    Tls(String),
    #[error("cannot build the channels' HTTP client: {0}")]
    Http(String),
}

/// The retry policy a channel's `retry` settings give.
pub fn retry_policy(c: &ChannelRetryConfig) -> RetryPolicy {
    let d = RetryPolicy::default();
    RetryPolicy {
        attempts: c.attempts.unwrap_or(d.attempts).max(1),
        min_delay: c
            .min_delay_ms
            .map(Duration::from_millis)
            .unwrap_or(d.min_delay),
        max_delay: c
            .max_delay_ms
            .map(Duration::from_millis)
            .unwrap_or(d.max_delay),
        jitter: c.jitter.unwrap_or(d.jitter),
    }
}

/// The pauses between attempts to start a channel whose service is away (its API down at
/// start): 1 s doubling to a minute, with jitter, for as long as it takes.
pub struct StartPauses(backon::ExponentialBackoff);

impl StartPauses {
    const MAX: Duration = Duration::from_secs(60);

    pub fn new() -> StartPauses {
        StartPauses(backon::BackoffBuilder::build(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_secs(1))
                .with_max_delay(Self::MAX)
                .with_jitter()
                .without_max_times(),
        ))
    }

    /// Sleep the next pause.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.0.next().unwrap_or(Self::MAX)).await;
    }
}

impl Default for StartPauses {
    fn default() -> StartPauses {
        StartPauses::new()
    }
}

/// The HTTP client the channels share: rustls with `ring` and the web roots, as every TLS
/// client here.
pub fn http_client() -> Result<reqwest::Client, ChannelsError> {
    let tls =
        switchboard_protocol::tls_client::config(switchboard_protocol::tls_client::web_roots())
            .map_err(|e| ChannelsError::Tls(e.to_string()))?;
    reqwest::Client::builder()
        .connect_timeout(DEFAULT_TIMEOUT)
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| ChannelsError::Http(e.to_string()))
}

/// The outbound adapters the config enables (a Telegram channel that cannot work is left out,
/// logged; `config check` explains it).
pub fn adapters(config: &Config) -> Result<Vec<Arc<Adapter>>, ChannelsError> {
    let mut adapters = Vec::new();
    match crate::telegram::Settings::from_config(config) {
        Some(Ok(settings)) => {
            let channel = crate::telegram::TelegramChannel::new(&settings)
                .map_err(|e| ChannelsError::Http(e.to_string()))?;
            adapters.push(Arc::new(Adapter::new(
                Arc::new(channel),
                RetryPolicy::default(),
            )));
        }
        Some(Err(why)) => tracing::warn!(%why, "the Telegram channel is not started"),
        None => {}
    }
    let hooks: Vec<_> = config
        .channels
        .webhook
        .iter()
        .filter(|(_, h)| h.is_enabled())
        .collect();
    let discord = config.channels.discord.as_ref().filter(|d| d.enabled);
    if hooks.is_empty() && discord.is_none() {
        return Ok(adapters);
    }
    let http = http_client()?;
    match discord.map(|d| (d.token(), d)) {
        Some((Some(token), d)) => {
            let root = d
                .api_root
                .as_deref()
                .unwrap_or(switchboard_channels::discord::DEFAULT_API_ROOT);
            let channel = switchboard_channels::discord::Discord::new(
                &token,
                root,
                http.clone(),
                DEFAULT_TIMEOUT,
            );
            adapters.push(Arc::new(Adapter::new(
                Arc::new(channel),
                RetryPolicy::default(),
            )));
        }
        Some((None, _)) => tracing::warn!("the Discord channel is not started: no token"),
        None => {}
    }
    adapters.extend(hooks.into_iter().map(|(name, hook)| {
        let timeout = hook
            .timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT);
        let channel = Webhook::new(name, &hook.url, &hook.secret, http.clone(), timeout);
        Arc::new(Adapter::new(Arc::new(channel), retry_policy(&hook.retry)))
    }));
    Ok(adapters)
}

/// The webhooks the gateway accepts at `POST /hooks/<name>`: name → secret.
pub fn inbound_hooks(config: &Config) -> switchboard_server::Hooks {
    switchboard_server::Hooks::new(
        config
            .channels
            .webhook
            .iter()
            .filter(|(_, h)| h.is_enabled() && !h.secret.is_empty())
            .map(|(name, h)| (name.clone(), h.secret.clone()))
            .collect::<HashMap<_, _>>(),
    )
}

/// The running drain and what wakes it.
pub struct Running {
    drain: DrainHandle,
    waker: tokio::task::JoinHandle<()>,
    /// `kind:name` of each channel up, for the log and the start-up lines.
    pub names: Vec<String>,
}

impl Running {
    /// Stop claiming and wait for the sends in flight to be recorded.
    pub async fn stop(self) {
        self.waker.abort();
        self.drain.stop().await;
    }
}

/// Start the drain over `engine`'s store for the channels `config` enables (`None` when it
/// enables none). Call inside a tokio runtime, after `engine.start()`.
pub fn start(
    engine: &Engine,
    api: &Arc<dyn SessionsApi>,
    config: &Config,
    options: Option<DrainOptions>,
) -> Result<Option<Running>, ChannelsError> {
    let adapters = adapters(config)?;
    if adapters.is_empty() {
        return Ok(None);
    }
    let names: Vec<String> = adapters.iter().map(|a| a.name()).collect();
    for name in &names {
        tracing::info!(channel = %name, "channel up");
    }
    let updates = engine.clone();
    let drain = Drain::new(
        engine.backend(),
        adapters,
        options.unwrap_or_else(|| DrainOptions::new(engine.owner_id())),
        Arc::new(move |row| updates.delivery_updated(row)),
    )
    .start();
    // A queued delivery wakes the drain at once; the poll catches the rest (retries falling
    // due, rows other processes queued).
    let wake = drain.waker();
    let mut events = api.subscribe();
    let waker = tokio::spawn(async move {
        loop {
            match events.next().await {
                StreamItem::Event(e) if matches!(e.event, EngineEvent::Delivery { .. }) => {
                    wake.notify_one()
                }
                StreamItem::Missed(_) => wake.notify_one(),
                StreamItem::Closed => return,
                StreamItem::Event(_) => {}
            }
        }
    });
    Ok(Some(Running {
        drain,
        waker,
        names,
    }))
}
