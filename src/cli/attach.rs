//! What a command runs on: the state folder and config it names, the local engine, or a
//! gateway dialled with `--connect` (its token, its refusals, patient first dial).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use switchboard_config::{self as config, Config};
use switchboard_engine::Engine;
use switchboard_types::api::SessionsApi;
use switchboard_types::text_safety::safe_line;

use super::args::Cli;
use super::print::say;
use super::sources::{GatewayPlan, Plan, settle_and_say};
use super::usage;
use super::waiting::Waiting;

pub fn default_state_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("switchboard")
}

pub fn default_config_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("switchboard").join("config.json5"))
}

impl Cli {
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(default_state_dir)
    }

    /// The config in force: an explicit file must exist; the default path may be missing.
    pub fn load_config(&self) -> Result<Config> {
        let mut config = if let Some(path) = &self.config {
            config::load_file(path)?
        } else {
            match default_config_path() {
                Some(path) if path.exists() => config::load_file(&path)?,
                _ => Config::default(),
            }
        };
        for w in config::warnings(&config) {
            tracing::warn!(path = %w.path, "config: {}", w.message);
        }
        // `--store` (or $SWITCHBOARD_STORE) wins over the config's `storage.url`.
        if let Some(url) = &self.store {
            if !switchboard_types::config::is_postgres_url(url) {
                let _ = url;
                anyhow::bail!(
                    "--store is not a postgres:// URL (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE); \
                     leave --store and $SWITCHBOARD_STORE out to keep the state folder's SQLite database"
                );
            }
            config.storage.url = Some(url.clone());
        }
        Ok(config)
    }

    pub(crate) fn config_path(&self) -> Result<PathBuf> {
        self.config
            .clone()
            .or_else(default_config_path)
            .ok_or_else(|| anyhow!("no config folder on this platform; pass --config FILE"))
    }

    pub fn open_engine(&self) -> Result<Engine> {
        let config = self.load_config()?;
        let dir = self.state_dir();
        switchboard::state_folder::open_engine(&dir, config)
            .with_context(|| format!("cannot open the state folder {}", dir.display()))
    }

    /// For commands that only read: also works on a folder this user cannot write.
    pub fn open_engine_for_reading(&self) -> Result<Engine> {
        let config = self.load_config()?;
        let dir = self.state_dir();
        use switchboard::state_folder::ReadOpenError;
        switchboard::state_folder::open_engine_for_reading(&dir, config).map_err(|e| match e {
            // Names the folder and what to do already.
            missing @ ReadOpenError::Missing(_) => anyhow::Error::new(missing),
            ReadOpenError::Store(e) => anyhow::Error::new(e)
                .context(format!("cannot open the state folder {}", dir.display())),
        })
    }

    /// The API for a command that only reads. No start-up work: it would write, and the
    /// folder may be read-only. With several sources, every gateway is waited for (bounded)
    /// and one that cannot attach is named on stderr and left out.
    pub(crate) async fn reading_api(&self) -> Result<Arc<dyn SessionsApi>> {
        let config = self.load_config()?;
        match self.plan(&config)? {
            Plan::Local => Ok(Arc::new(self.open_engine_for_reading()?)),
            Plan::Single(g) => self.remote_api(&g).await,
            Plan::Several { local, gateways } => {
                let dir = self.state_dir();
                let local = match local {
                    Some(name) if switchboard::state_folder::has_state(&dir, &config) => {
                        let api: Arc<dyn SessionsApi> = Arc::new(self.open_engine_for_reading()?);
                        Some((name, api))
                    }
                    Some(name) => {
                        say(&format!(
                            "source {name} is left out: no state folder at {} yet (--no-local \
leaves it out without this note)",
                            dir.display()
                        ));
                        None
                    }
                    None => None,
                };
                let api = self.several(local, &gateways)?;
                settle_and_say(api.as_ref()).await;
                Ok(api)
            }
        }
    }

    /// The engine a command that writes runs on: the gateway's (`--connect`), this state
    /// folder's, started (its start-up work drained before exit), or several at once.
    pub(crate) async fn attach(&self) -> Result<Attached> {
        let config = self.load_config()?;
        match self.plan(&config)? {
            Plan::Local => {
                let engine = self.open_engine()?;
                let api = engine.start();
                Ok(Attached::Local(engine, api))
            }
            Plan::Single(g) => Ok(Attached::Remote(self.remote_api(&g).await?)),
            Plan::Several { local, gateways } => {
                let engine = local.as_ref().map(|_| self.open_engine()).transpose()?;
                let started = engine.as_ref().map(Engine::start);
                let api: Arc<dyn SessionsApi> = self.several(local.zip(started), &gateways)?;
                settle_and_say(api.as_ref()).await;
                Ok(match engine {
                    Some(engine) => Attached::Local(engine, api),
                    None => Attached::Remote(api),
                })
            }
        }
    }

    /// The token a plain `--connect` offers: `--token`, else the environment's, else the
    /// state folder's `gateway-token` for this folder's own `serve` (`own_token`). Without
    /// a token the command stops here, before dialling, saying why.
    pub(crate) fn gateway_token(&self, target: &str) -> Result<String> {
        use switchboard_protocol::token;
        if let Some(t) = self.plain_token(&[]) {
            return Ok(t.to_string());
        }
        if let Ok(t) = std::env::var(token::TOKEN_ENV) {
            let t = t.trim();
            if !t.is_empty() {
                return Ok(t.to_string());
            }
        }
        own_token(&self.state_dir(), target).map_err(|why| {
            anyhow!(
                "no gateway token for {}: {why}. Pass --token TOKEN or set ${}",
                safe_line(target),
                token::TOKEN_ENV
            )
        })
    }

    /// One gateway alone (`--connect URL`, or one named gateway and `--no-local`): dial it
    /// now, so an unreachable or refusing one is reported at once (exit 1), never waited on.
    /// Our own gateway is spoken to in its own methods; any other (OpenClaw's) in
    /// OpenClaw's, chosen from what `hello-ok` lists.
    pub(crate) async fn remote_api(&self, g: &GatewayPlan) -> Result<Arc<dyn SessionsApi>> {
        use switchboard_remote::{DialError, LinkOptions};
        let target = g.url.clone();
        let token = match &g.name {
            None => self.gateway_token(&target)?,
            Some(name) => self
                .named_token(g, &[name.as_str()], true)
                .map_err(|why| anyhow!("source {name} ({}): {why}", safe_line(&target)))?,
        };
        let mut options = LinkOptions::new(target.clone(), Some(token));
        options.tls_ca = g
            .entry
            .as_ref()
            .and_then(|(_, e)| e.tls_ca.clone())
            .or_else(|| self.tls_ca.clone());
        // OpenClaw grants an operator's scopes only to a signed device; ours checks one when
        // offered. One key per state folder, created on first use.
        options.device = self.device();
        let link = dial_patiently(&target, options).await.map_err(|e| match e {
            DialError::Refused(reason) => {
                anyhow!(
                "cannot attach to {}: refused: {}",
                safe_line(&target),
                refusal(&reason)
            )
            }
            DialError::Deferred {
                reason,
                retry_after,
            } => {
                let when = retry_after
                    .map(|d| format!("in {} s", d.as_secs().max(1)))
                    .unwrap_or_else(|| "later".into());
                anyhow!(
                    "cannot attach to {}: refused for now: {} (this passes by itself: try again \
{when})",
                    safe_line(&target),
                    safe_line(&reason)
                )
            }
            DialError::Transient(_) => anyhow!(
                "cannot attach to {}: {} (is `switchboard serve` running there?)",
                safe_line(&target),
                safe_line(&e.to_string())
            ),
        })?;
        tracing::info!(%target, "attached to a gateway");
        Ok(api_of(link))
    }

    /// Refuses `--connect` for a command that works on a local state folder only.
    pub(crate) fn local_only(&self, command: &str) -> Result<()> {
        if !self.connect.is_empty() {
            return Err(usage(format!(
                "`{command}` works on a local state folder only, not over --connect; run it on \
the gateway's machine"
            )));
        }
        Ok(())
    }
}

/// Why a gateway refused, with what to do when it does not know this device yet.
pub(crate) fn refusal(reason: &str) -> String {
    let pairing = if reason.to_ascii_lowercase().contains("pairing") {
        " (the gateway does not know this device yet: approve it on the gateway's host with `openclaw devices list` then `openclaw devices approve <id>`, or attach through an SSH tunnel so it connects from loopback, which OpenClaw pairs by itself)"
    } else {
        ""
    };
    format!("{}{pairing}", safe_line(reason))
}

/// An attached link as an API: our gateway in its own methods, any other (OpenClaw's) in
/// OpenClaw's, chosen from what `hello-ok` lists.
pub(crate) fn api_of(link: switchboard_remote::Link) -> Arc<dyn SessionsApi> {
    use switchboard_protocol::switchboard::method;
    use switchboard_remote::RemoteApi;
    use switchboard_remote::openclaw::OpenClawApi;
    use switchboard_remote::rpc::Rpc;
    let ours = link
        .hello()
        .is_some_and(|h| h.features.methods.iter().any(|m| m == method::SESSIONS));
    tracing::info!(ours, "a gateway's methods");
    let link: Arc<dyn Rpc> = Arc::new(link);
    if ours {
        RemoteApi::new(link)
    } else {
        Arc::new(OpenClawApi::new(link))
    }
}

/// The state folder's own `gateway-token`, offered only to a loopback URL whose port this
/// folder's own running `serve` is listening on (its record in `<state>/gateways/`):
/// whatever else listens on a local port (another user's program, a tunnel to another
/// gateway) never gets it. `Err`: why it is not offered.
pub(crate) fn own_token(
    dir: &std::path::Path,
    target: &str,
) -> std::result::Result<String, String> {
    use switchboard_protocol::token;
    use switchboard_server::listening;
    let file = dir.join(token::TOKEN_FILE);
    Err(match loopback_addrs(target) {
        None => "it is not a loopback address (the state folder's token is offered only to this machine's own gateway)"
            .to_string(),
        Some(addrs) => match listening::own_for_all(dir, &addrs) {
            Some(records) if records.iter().all(|r| r.token_file) => {
                match token::read_private(&file) {
                    Ok(Some(t)) => return Ok(t),
                    Ok(None) => format!("{} is missing or empty", file.display()),
                    Err(e) => e.to_string(),
                }
            }
            Some(_) => format!(
                "the gateway of {} there takes its token from its config or environment, not from {}",
                dir.display(),
                file.display()
            ),
            None => format!(
                "no `switchboard serve` of the state folder {} is listening there ({}), so {} is not offered to whatever is",
                dir.display(),
                addrs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                file.display()
            ),
        },
    })
}

/// Every address a `ws://` or `wss://` URL on this machine may be dialled at (an IP literal,
/// or all that `localhost` resolves to; the gateway's default port when none is given), or
/// `None` when it is not on this machine (any address not loopback).
fn loopback_addrs(target: &str) -> Option<Vec<std::net::SocketAddr>> {
    use std::net::ToSocketAddrs;
    let (host, port) = switchboard_remote::link::host_port(target).ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<std::net::SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![(ip, port).into()],
        Err(_) if host.eq_ignore_ascii_case("localhost") => {
            (host, port).to_socket_addrs().ok()?.collect()
        }
        Err(_) => return None,
    };
    (!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())).then_some(addrs)
}

/// What a command runs on.
pub(crate) enum Attached {
    /// This state folder's engine, started.
    Local(Engine, Arc<dyn SessionsApi>),
    /// A gateway's engine.
    Remote(Arc<dyn SessionsApi>),
}

impl Attached {
    pub(crate) fn api(&self) -> &Arc<dyn SessionsApi> {
        match self {
            Attached::Local(_, api) | Attached::Remote(api) => api,
        }
    }

    /// Everything a local engine started (start-up work too) ends before exit; a gateway's
    /// engine carries on by itself.
    pub(crate) async fn drain(&self, waiting: &Waiting) {
        if let Attached::Local(engine, _) = self {
            waiting.drain(engine).await;
        }
    }
}

/// The longest the first dial keeps trying a gateway that refuses for now.
const FIRST_DIAL_PATIENCE: Duration = Duration::from_secs(10 * 60);

/// `Link::connect`, dialled again while the gateway refuses for now (a lockout, all its
/// connections taken, shutting down), each wait said on stderr: the same backoff as the
/// link's redials, never sooner than the gateway asked, for at most `FIRST_DIAL_PATIENCE`.
/// Any other outcome is returned at once.
async fn dial_patiently(
    target: &str,
    options: switchboard_remote::LinkOptions,
) -> std::result::Result<switchboard_remote::Link, switchboard_remote::DialError> {
    use switchboard_remote::{DialError, Link};
    let give_up = std::time::Instant::now() + FIRST_DIAL_PATIENCE;
    let mut delays = switchboard_remote::link::redial_delays();
    loop {
        match Link::connect(options.clone()).await {
            Err(DialError::Deferred {
                reason,
                retry_after,
            }) if std::time::Instant::now() < give_up => {
                let left = give_up.saturating_duration_since(std::time::Instant::now());
                let wait = delays
                    .next()
                    .unwrap_or(Duration::from_secs(5))
                    .max(retry_after.unwrap_or_default())
                    .min(left);
                say(&format!(
                    "{} refused for now: {}; trying again in {} s",
                    safe_line(target),
                    safe_line(&reason),
                    wait.as_secs().max(1)
                ));
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}
