//! `switchboard serve`: the engine headless behind the WebSocket gateway until a signal.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::args::{Cli, ServeArgs};
use super::print::{say, say_log};
use super::usage;

/// `serve`: the engine headless behind the gateway until SIGINT or SIGTERM.
pub(crate) async fn serve(cli: &Cli, args: &ServeArgs, log: Option<PathBuf>) -> Result<()> {
    use switchboard_protocol::{tls, token};
    use switchboard_server as server;
    // `--demo`: the demo's config and agents on a fresh temporary state, as `demo` runs them.
    let demo = match args.demo {
        true => Some(super::console::tempfile_dir()?),
        false => None,
    };
    let config = match &demo {
        Some(_) => switchboard::demo::demo_config()?,
        None => cli.load_config()?,
    };
    let bind = args
        .bind
        .clone()
        .unwrap_or_else(|| format!("127.0.0.1:{}", config.gateway.port));
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host(&bind)
        .await
        .map_err(|e| usage(format!("--bind {bind}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(usage(format!("--bind {bind}: no address")));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(tls::acceptor(cert, key).map_err(|e| usage(format!("TLS: {e}")))?)
        }
        _ => None,
    };
    if tls.is_none() && !args.insecure && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(usage(format!(
            "--bind {bind} is not a loopback address and no TLS is set: the token and every \
message would cross the network in clear text. Give --tls-cert FILE --tls-key FILE (wss://), \
use an SSH tunnel to 127.0.0.1, or pass --insecure to accept that risk."
        )));
    }
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    let dir = demo.clone().unwrap_or_else(|| cli.state_dir());
    let (secret, source) = token::resolve(config.gateway.auth.token.as_deref(), &dir)?;
    let engine = match &demo {
        Some(dir) => switchboard::state_folder::open_engine(dir, config.clone())
            .with_context(|| format!("cannot open the demo state {}", dir.display()))?,
        None => cli.open_engine()?,
    };
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr()?;
    let api = engine.start();
    let channels = start_channels(&engine, &api, &config)?;
    // Metrics: recorded from here on, rendered on the gateway's port and/or a port of their own.
    let metrics =
        super::monitor::Metrics::start(args.metrics, args.metrics_bind.as_deref(), &api).await?;
    metrics.watch_lease(engine.clone());
    let (inbound, pushed) = start_inbound(&config, &api, &dir, &engine);
    say_log(&log);
    say_token(&source);
    // `--connect` on this machine offers the folder's token only to a port recorded here.
    let record = server::listening::Record {
        addr: local,
        scheme: scheme.to_string(),
        pid: std::process::id(),
        token_file: matches!(source, token::TokenSource::File(_)),
    };
    let _listening = server::listening::Listening::record(&dir, &record).with_context(|| {
        format!(
            "cannot record the listening address in {}",
            dir.join(server::listening::DIR).display()
        )
    })?;
    // Watched before the address is announced: a SIGTERM sent as soon as a supervisor (or a
    // test) reads it must stop the gateway cleanly, not kill it with its record left behind.
    let (stop, lost) = stop_or_lease_lost(&engine)?;
    let traffic = demo.as_ref().map(|dir| {
        say(&format!("demo state: {} (removed at exit)", dir.display()));
        switchboard::demo::start(engine.start(), Duration::from_millis(args.demo_pace_ms))
    });
    if demo.is_some() {
        say_demo_attach(&source, scheme, local);
    }
    say(&format!("gateway listening on {scheme}://{local}"));
    tracing::info!(%local, "gateway listening");
    let mut options = gateway_options(
        args,
        &config,
        secret,
        [Some(dir.clone()), cli.config_path().ok(), log.clone()],
    );
    options.metrics = metrics.on_gateway_port();
    options.hooks = options.hooks.clone().with_pushed(pushed);
    let supervisor = super::monitor::Supervisor::ready(api.clone());
    server::run_with_tls(listener, api, options, tls, stop).await;
    supervisor.stopping();
    drop(metrics);
    inbound.iter().for_each(|poller| poller.abort());
    wind_down(&engine, channels, traffic).await;
    say("gateway stopped");
    if let Some(dir) = &demo {
        drop(_listening);
        drop(engine);
        let _ = std::fs::remove_dir_all(dir);
        return Ok(());
    }
    lease_verdict(&engine, &lost)
}

/// Start the chat channels that bring messages in (Telegram's poller, Discord's gateway
/// connection; webhooks arrive through the gateway); one that cannot work is said and left out, the others start.
fn start_inbound(
    config: &switchboard_config::Config,
    api: &std::sync::Arc<dyn switchboard_types::api::SessionsApi>,
    dir: &std::path::Path,
    engine: &switchboard_engine::Engine,
) -> (Vec<tokio::task::JoinHandle<()>>, Vec<Pushed>) {
    let mut up = Vec::new();
    let mut pushed: Vec<Pushed> = Vec::new();
    match switchboard::telegram::Settings::from_config(config) {
        Some(Ok(settings)) if settings.webhook.is_some() => {
            let (path, url) = settings
                .webhook
                .as_ref()
                .map(|w| (w.path.clone(), w.url.clone()))
                .unwrap_or_default();
            say(&format!(
                "telegram channel: updates pushed to {url}, taken at this gateway's {path}"
            ));
            if let Some(push) = switchboard::telegram_push::TelegramPush::new(&settings) {
                let push = std::sync::Arc::new(push);
                pushed.push((path, push.clone()));
                up.push(switchboard::telegram_push::spawn_webhook(
                    settings,
                    api.clone(),
                    dir,
                    push,
                ));
            }
        }
        Some(Ok(settings)) => {
            say(&format!("telegram channel: polling {}", settings.api_root));
            let lease = switchboard::channel_lease::ChannelLease::new(engine);
            up.push(switchboard::telegram::spawn(
                settings,
                api.clone(),
                dir,
                lease,
            ));
        }
        Some(Err(why)) => say(&format!("telegram channel not started: {why}")),
        None => {}
    }
    match switchboard::discord::Settings::from_config(config) {
        Some(Ok(settings)) => {
            let via = settings
                .gateway_url
                .as_deref()
                .unwrap_or(&settings.api_root);
            say(&format!("discord channel: gateway via {via}"));
            let lease = switchboard::channel_lease::ChannelLease::new(engine);
            up.push(switchboard::discord::spawn(settings, api.clone(), lease));
        }
        Some(Err(why)) => say(&format!("discord channel not started: {why}")),
        None => {}
    }
    (up, pushed)
}

/// A pushed route of the gateway: its path and the channel taking its updates.
type Pushed = (String, std::sync::Arc<dyn switchboard_server::Pushed>);

/// The exit: an error saying why when the gateway stopped because its lease was lost.
fn lease_verdict(
    engine: &switchboard_engine::Engine,
    lost: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    if lost.load(std::sync::atomic::Ordering::Relaxed) {
        let why = engine.standing().trouble().unwrap_or_default();
        return Err(anyhow::anyhow!("{why}"));
    }
    Ok(())
}

/// What stops the gateway: SIGINT or SIGTERM, or this node losing its lease (another node
/// took its work over: its writes are refused, and a supervisor starts it afresh as a new
/// node), which the flag then says.
fn stop_or_lease_lost(
    engine: &switchboard_engine::Engine,
) -> Result<(
    impl std::future::Future<Output = ()> + use<>,
    Arc<std::sync::atomic::AtomicBool>,
)> {
    let signal = stop_signal()?;
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, engine) = (lost.clone(), engine.clone());
    let stop = async move {
        tokio::select! {
            _ = signal => {}
            _ = lease_lost(&engine) => flag.store(true, std::sync::atomic::Ordering::Relaxed),
        }
    };
    Ok((stop, lost))
}

/// The outbox drain and the channels it sends through, said on stderr (none configured:
/// deliveries stay queued).
fn start_channels(
    engine: &switchboard_engine::Engine,
    api: &Arc<dyn switchboard_types::api::SessionsApi>,
    config: &switchboard_config::Config,
) -> Result<Option<switchboard::channels::Running>> {
    let channels = switchboard::channels::start(engine, api, config, None)?;
    match &channels {
        Some(up) => say(&format!("channels up: {}", up.names.join(", "))),
        None => tracing::info!("no channels configured: deliveries stay queued"),
    }
    Ok(channels)
}

/// After the gateway stopped accepting: the demo's traffic stops, the drain records its sends in flight, then the
/// engine's work ends (at most 30 s; what is left resumes at the next start).
async fn wind_down(
    engine: &switchboard_engine::Engine,
    channels: Option<switchboard::channels::Running>,
    demo_traffic: Option<tokio::task::JoinHandle<()>>,
) {
    if let Some(traffic) = demo_traffic {
        traffic.abort();
    }
    if let Some(channels) = channels {
        channels.stop().await;
    }
    tracing::info!("gateway stopped accepting; draining the engine");
    if tokio::time::timeout(Duration::from_secs(30), engine.idle())
        .await
        .is_err()
    {
        tracing::warn!(running = ?engine.still_running(), "work still running at exit; it resumes at the next start");
    }
}

/// `serve --demo`: the record of this address is in the temporary folder, which no other
/// command reads: say how to attach, token included (never the token itself).
fn say_demo_attach(
    source: &switchboard_protocol::token::TokenSource,
    scheme: &str,
    local: std::net::SocketAddr,
) {
    use switchboard_protocol::token;
    let token = match source {
        token::TokenSource::File(path) => format!("\"$(cat {})\"", path.display()),
        _ => format!("\"${}\"", token::TOKEN_ENV),
    };
    say(&format!(
        "attach: switchboard --connect {scheme}://{local} --token {token}"
    ));
}

/// Completes once this node has lost its lease on the store (never for a store without
/// leases).
async fn lease_lost(engine: &switchboard_engine::Engine) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        if engine.standing() == switchboard_store::nodes::Standing::Lost {
            tracing::error!("this node lost its lease; stopping the gateway");
            return;
        }
    }
}

/// Where the gateway's token comes from (never the token itself).
fn say_token(source: &switchboard_protocol::token::TokenSource) {
    use switchboard_protocol::token;
    let from = match source {
        token::TokenSource::Config => "the config's gateway.auth.token".to_string(),
        token::TokenSource::Env => format!("${}", token::TOKEN_ENV),
        token::TokenSource::File(path) => format!(
            "in {} (read it with: cat {})",
            path.display(),
            path.display()
        ),
    };
    say(&format!("gateway token: {from}"));
}

/// The gateway's options from the command line and config (`private`: what a read-only
/// client must not learn of this machine, `private_paths.rs`).
fn gateway_options(
    args: &ServeArgs,
    config: &switchboard_config::Config,
    secret: String,
    private: [Option<PathBuf>; 3],
) -> switchboard_server::Options {
    use switchboard_server as server;
    let mut max_connections = args.max_connections as usize;
    if let Some(cap) = server::descriptor_cap()
        && cap < max_connections
    {
        say(&format!(
            "at most {cap} connections: the descriptor limit (ulimit -n) leaves no room for \
{max_connections}"
        ));
        max_connections = cap;
    }
    server::Options {
        read_only_token: config.gateway.auth.read_only_token.clone(),
        // Within the range clap checked, so it fits any usize this runs on.
        max_payload: usize::try_from(args.max_payload)
            .unwrap_or(switchboard_server::DEFAULT_MAX_PAYLOAD),
        max_connections,
        // Fewer than the connections, so connected clients keep places of their own.
        max_handshakes: server::DEFAULT_MAX_HANDSHAKES.min(max_connections.div_ceil(2)),
        max_buffered_bytes: args.max_buffered_bytes,
        max_queued_bytes: args.max_queued_bytes,
        private_paths: server::PrivatePaths::new(private.into_iter().flatten()),
        hooks: switchboard::channels::inbound_hooks(config),
        ..server::Options::new(secret)
    }
}

/// Completes on the first SIGINT or SIGTERM (Ctrl-C elsewhere).
fn stop_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
