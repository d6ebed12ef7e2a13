//! Several sources at once (issue 27): what `--connect [NAME=]URL` (repeatable), `--token
//! [NAME=]TOKEN`, `--no-local` and the config's `gateways`/`localSource` name, each
//! gateway's token, the dialer that attaches it in the background, and the bounded wait a
//! command makes for every source before it reads (a source that cannot attach is named on
//! stderr and left out; the others go on).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use switchboard_config::{Config, GatewaySource};
use switchboard_sources::{Attach, Dialer, Source, Sources};
use switchboard_types::api::source::{SourceInfo, SourceKind, check_name};
use switchboard_types::api::{LinkState, SessionsApi};
use switchboard_types::text_safety::safe_line;

use super::args::Cli;
use super::print::say;
use super::usage;

/// How long a command waits for each gateway to attach (all at once) before it reads
/// without the ones still dialling.
pub(crate) const ATTACH_WAIT: Duration = Duration::from_secs(5);

/// One gateway to attach to.
#[derive(Debug, Clone)]
pub(crate) struct GatewayPlan {
    /// `None`: a plain `--connect URL`, which names no source.
    pub name: Option<String>,
    pub url: String,
    /// Its config entry, when it comes from the config (tokenFile, tokenEnv, tlsCa).
    pub entry: Option<(usize, GatewaySource)>,
}

/// What a command or the console attaches to.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    /// The local state folder alone, as always.
    Local,
    /// One gateway alone: keys as the gateway gives them, no source names.
    Single(GatewayPlan),
    /// Two or more sources: every key, run and exchange id is `source/…`.
    Several {
        /// The local folder's name, unless `--no-local`.
        local: Option<String>,
        gateways: Vec<GatewayPlan>,
    },
}

/// `NAME=REST` when the text before the first `=` could be a name (no `:` or `/`, which a
/// URL has before any `=`); the name itself is checked by the caller.
fn split_named(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once('=')?;
    (!name.contains([':', '/'])).then_some((name, rest))
}

/// `SWITCHBOARD_TOKEN_<NAME>`: the name upper-cased, `-` as `_`.
pub(crate) fn token_env(name: &str) -> String {
    format!(
        "SWITCHBOARD_TOKEN_{}",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

impl Cli {
    /// The sources this command line and `config` name. Refusals here are usage errors
    /// (exit 2): a bad name, plain and named `--connect` mixed, a plain `--token` that
    /// several gateways could take.
    /// This state folder's engine alone (no gateway on the command line or in the config).
    pub(crate) fn is_local(&self) -> Result<bool> {
        Ok(matches!(self.plan(&self.load_config()?)?, Plan::Local))
    }

    pub(crate) fn plan(&self, config: &Config) -> Result<Plan> {
        let mut named = Vec::new();
        let mut plain = Vec::new();
        for raw in &self.connect {
            match split_named(raw) {
                Some((name, url)) => {
                    check_name(name)
                        .map_err(|e| usage(format!("--connect {}: {e}", safe_line(raw))))?;
                    if url.trim().is_empty() {
                        return Err(usage(format!(
                            "--connect {name}=: no address after the name (--connect \
{name}=ws://HOST:PORT)"
                        )));
                    }
                    named.push(GatewayPlan {
                        name: Some(name.to_string()),
                        url: url.trim().to_string(),
                        entry: None,
                    });
                }
                None => plain.push(raw.trim().to_string()),
            }
        }
        match (plain.len(), named.is_empty()) {
            (0, _) => {}
            (1, true) => {
                return Ok(Plan::Single(GatewayPlan {
                    name: None,
                    url: plain.remove(0),
                    entry: None,
                }));
            }
            _ => {
                return Err(usage(format!(
                    "--connect {}: with several gateways name each one, e.g. --connect \
home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789",
                    safe_line(&plain[0])
                )));
            }
        }
        // Named on the command line: exactly those; else the config's.
        let gateways = if named.is_empty() {
            config
                .gateways
                .iter()
                .enumerate()
                .map(|(i, g)| GatewayPlan {
                    name: Some(g.name.clone()),
                    url: g.url.clone(),
                    entry: Some((i, g.clone())),
                })
                .collect()
        } else {
            named
        };
        let local = (!self.no_local).then(|| config.local_source.clone());
        let names: Vec<&str> = gateways.iter().filter_map(|g| g.name.as_deref()).collect();
        // Checked here too, not only by `Sources::new`: a local folder not made yet is left
        // out of a reading command's sources, and the clash must not depend on that.
        if let Some(local) = &local
            && names.contains(&local.as_str())
        {
            return Err(usage(format!(
                "sources: {} (the local state folder is \"{local}\": rename it with the \
config's localSource, or leave it out with --no-local)",
                switchboard_sources::SourcesError::SameName(local.clone())
            )));
        }
        // A plain --token is for the one gateway there is; with several it could reach the
        // wrong one.
        let (_, plain_tokens) = self.tokens(&names);
        if plain_tokens > 0 && gateways.len() > 1 {
            return Err(usage(format!(
                "--token without a name, and {} gateways: name the one it is for, --token \
NAME=TOKEN (gateways: {})",
                gateways.len(),
                names.join(", ")
            )));
        }
        if plain_tokens > 1 {
            return Err(usage("--token given twice without a name"));
        }
        Ok(match (local, gateways.len()) {
            (None, 0) => {
                return Err(usage(
                    "--no-local and no gateways: nothing to attach to (name one with --connect \
NAME=URL or in the config's gateways)",
                ));
            }
            (Some(_), 0) => Plan::Local,
            (None, 1) => Plan::Single(
                gateways
                    .into_iter()
                    .next()
                    .ok_or_else(|| usage("no gateway"))?,
            ),
            (local, _) => Plan::Several { local, gateways },
        })
    }

    /// `--token NAME=TOKEN` by the gateway names there are, and how many plain tokens were
    /// given. A `NAME=` prefix that names no gateway is part of a plain token (tokens may
    /// hold `=`).
    fn tokens<'a>(&'a self, names: &[&str]) -> (HashMap<&'a str, &'a str>, usize) {
        let mut by_name = HashMap::new();
        let mut plain = 0;
        for raw in &self.token {
            match split_named(raw) {
                Some((name, token)) if names.contains(&name) => {
                    by_name.insert(name, token.trim());
                }
                _ => plain += 1,
            }
        }
        (by_name, plain)
    }

    /// The plain `--token`, if one was given.
    pub(crate) fn plain_token(&self, names: &[&str]) -> Option<&str> {
        self.token
            .iter()
            .find(|raw| split_named(raw).is_none_or(|(name, _)| !names.contains(&name)))
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
    }

    /// A named gateway's token: `--token NAME=…`, else `$SWITCHBOARD_TOKEN_<NAME>`, else its
    /// config entry's tokenFile or tokenEnv; for the only gateway, also the plain `--token`
    /// and `$SWITCHBOARD_GATEWAY_TOKEN`; last, the state folder's own token for its own
    /// `serve`. `Err`: why there is none, for that source alone.
    pub(crate) fn named_token(
        &self,
        g: &GatewayPlan,
        names: &[&str],
        only: bool,
    ) -> std::result::Result<String, String> {
        let Some(name) = g.name.as_deref() else {
            // A plain --connect keeps its own rules and words.
            return self.gateway_token(&g.url).map_err(|e| e.to_string());
        };
        let (by_name, _) = self.tokens(names);
        if let Some(t) = by_name.get(name).filter(|t| !t.is_empty()) {
            return Ok(t.to_string());
        }
        let var = token_env(name);
        if let Some(t) = std::env::var(&var).ok().filter(|t| !t.trim().is_empty()) {
            return Ok(t.trim().to_string());
        }
        if let Some((i, entry)) = &g.entry {
            if let Some(file) = &entry.token_file {
                use switchboard_protocol::token;
                return match token::read_private(file) {
                    Ok(Some(t)) => Ok(t),
                    Ok(None) => Err(format!(
                        "gateways[{i}].tokenFile: {} is missing or empty",
                        file.display()
                    )),
                    Err(e) => Err(format!("gateways[{i}].tokenFile: {e}")),
                };
            }
            if let Some(env) = &entry.token_env {
                return match std::env::var(env).ok().filter(|t| !t.trim().is_empty()) {
                    Some(t) => Ok(t.trim().to_string()),
                    None => Err(format!(
                        "gateways[{i}].tokenEnv: the environment variable {env} is not set"
                    )),
                };
            }
        }
        if only {
            if let Some(t) = self.plain_token(names) {
                return Ok(t.to_string());
            }
            use switchboard_protocol::token::TOKEN_ENV;
            if let Some(t) = std::env::var(TOKEN_ENV)
                .ok()
                .filter(|t| !t.trim().is_empty())
            {
                return Ok(t.trim().to_string());
            }
        }
        super::attach::own_token(&self.state_dir(), &g.url).map_err(|why| {
            format!(
                "no token: {why}. Pass --token {name}=TOKEN, set ${var}, or give the config's \
gateways entry a tokenFile or tokenEnv"
            )
        })
    }

    /// The CA a gateway's `wss://` is checked with: its config entry's, else `--tls-ca`.
    fn tls_ca_for(&self, g: &GatewayPlan) -> Option<PathBuf> {
        g.entry
            .as_ref()
            .and_then(|(_, e)| e.tls_ca.clone())
            .or_else(|| self.tls_ca.clone())
    }

    /// Several sources as one API: `local` (already open) as is, each gateway dialled in
    /// the background. Names or places given twice are usage errors (exit 2).
    pub(crate) fn several(
        &self,
        local: Option<(String, Arc<dyn SessionsApi>)>,
        gateways: &[GatewayPlan],
    ) -> Result<Arc<Sources>> {
        let names: Vec<&str> = gateways.iter().filter_map(|g| g.name.as_deref()).collect();
        // Made (and written to the state folder) only when there is a gateway to offer it to.
        let device = if gateways.is_empty() {
            None
        } else {
            self.device()
        };
        let mut sources = Vec::new();
        if let Some((name, api)) = local {
            sources.push(Source::ready(
                name,
                SourceKind::Local,
                self.state_dir().display().to_string(),
                api,
            ));
        }
        for g in gateways {
            let token = self.named_token(g, &names, gateways.len() == 1);
            let mut options = switchboard_remote::LinkOptions::new(g.url.clone(), None);
            options.tls_ca = self.tls_ca_for(g);
            options.device = device.clone();
            sources.push(Source {
                name: g.name.clone().unwrap_or_else(|| "gateway".into()),
                kind: SourceKind::Gateway,
                target: g.url.clone(),
                attach: Attach::Dial(dialer(options, token)),
            });
        }
        Sources::new(sources).map_err(|e| usage(format!("sources: {e}")))
    }

    /// This state folder's device identity, offered to every gateway (created on first
    /// use); without one, gateways are dialled without it.
    pub(crate) fn device(&self) -> Option<Arc<dyn switchboard_remote::DeviceSigner>> {
        match switchboard_remote::device::load_or_create(&self.state_dir()) {
            Ok(identity) => Some(Arc::new(identity)),
            Err(e) => {
                tracing::warn!(error = %e, "no device identity; connecting without one");
                None
            }
        }
    }
}

/// Dials one gateway for `Sources`: again with backoff while it is unreachable or says
/// "not now" (each wait reported on the watch, as the link's own redials are), and gives up
/// only when it refuses for good (a bad token, pairing), with the reason.
fn dialer(
    options: switchboard_remote::LinkOptions,
    token: std::result::Result<String, String>,
) -> Dialer {
    use backon::Retryable;
    use switchboard_remote::{DialError, Link};
    Box::new(move |state: tokio::sync::watch::Sender<LinkState>| {
        Box::pin(async move {
            let mut options = options;
            options.token = Some(token.map_err(|why| format!("{NOT_DIALLED}{why}"))?);
            let mut attempt = 1;
            let link = (|| Link::connect(options.clone()))
                .retry(switchboard_remote::link::redial_delays())
                .sleep(tokio::time::sleep)
                .when(|e| !matches!(e, DialError::Refused(_)))
                // Never sooner than the gateway asked.
                .adjust(|e, delay| match e {
                    DialError::Deferred {
                        retry_after: Some(after),
                        ..
                    } => delay.map(|d| d.max(*after)),
                    _ => delay,
                })
                .notify(|e, delay| {
                    attempt += 1;
                    state.send_replace(LinkState::Reconnecting {
                        attempt,
                        retry_in_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        message: e.to_string(),
                    });
                })
                .await
                .map_err(|e| match e {
                    DialError::Refused(reason) => super::attach::refusal(&reason),
                    other => other.to_string(),
                })?;
            Ok(super::attach::api_of(link))
        })
    })
}

/// How a gateway that was never dialled (no token for it) says so in its `Failed` state.
const NOT_DIALLED: &str = "not dialled: ";

/// A source as a command reports it once the wait is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The local folder (no link).
    Local,
    Connected {
        server: String,
        protocol: u32,
        rtt_ms: Option<u64>,
    },
    /// Refused for good: it will not be retried.
    Refused(String),
    /// Not dialled: no token for it (why, naming where it was looked for).
    NoToken(String),
    /// Not reachable so far (the reason of the last attempt).
    Unreachable(String),
    /// Still dialling when the wait ended.
    Connecting,
}

impl Settled {
    fn of(state: Option<&LinkState>) -> Settled {
        match state {
            None => Settled::Local,
            Some(LinkState::Connected {
                protocol,
                server,
                rtt_ms,
                ..
            }) => Settled::Connected {
                server: server.clone(),
                protocol: *protocol,
                rtt_ms: *rtt_ms,
            },
            Some(LinkState::Failed { message }) => match message.strip_prefix(NOT_DIALLED) {
                Some(why) => Settled::NoToken(why.to_string()),
                None => Settled::Refused(message.clone()),
            },
            Some(LinkState::Reconnecting { message, .. }) => Settled::Unreachable(message.clone()),
            Some(LinkState::Connecting { .. }) => Settled::Connecting,
        }
    }

    /// One word for the state (`gateways`' STATE column and its JSON).
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Settled::Local => "ready",
            Settled::Connected { .. } => "connected",
            Settled::Refused(_) => "refused",
            Settled::NoToken(_) => "no token",
            Settled::Unreachable(_) => "unreachable",
            Settled::Connecting => "connecting",
        }
    }

    /// Why the source is not there, if it is not.
    pub(crate) fn problem(&self) -> Option<String> {
        match self {
            Settled::Local | Settled::Connected { .. } => None,
            Settled::Refused(m) => Some(format!("refused: {m}")),
            Settled::NoToken(m) => Some(m.clone()),
            Settled::Unreachable(m) => Some(format!("not reachable: {m}")),
            Settled::Connecting => Some(format!(
                "still connecting after {} s",
                ATTACH_WAIT.as_secs()
            )),
        }
    }
}

/// Waits (at most `wait` in all, every source at once) until each gateway has attached or
/// been refused, and gives each source with how it stands.
pub(crate) async fn settle(api: &dyn SessionsApi, wait: Duration) -> Vec<(SourceInfo, Settled)> {
    let deadline = tokio::time::Instant::now() + wait;
    let infos = api.sources();
    for info in &infos {
        if let Some(rx) = &info.state {
            let mut rx = rx.clone();
            let done =
                |s: &LinkState| matches!(s, LinkState::Connected { .. } | LinkState::Failed { .. });
            let _ = tokio::time::timeout_at(deadline, rx.wait_for(done)).await;
        }
    }
    // Read again: `unavailable` is known once attached.
    api.sources()
        .into_iter()
        .map(|info| {
            let settled = Settled::of(info.state.as_ref().map(|rx| rx.borrow().clone()).as_ref());
            (info, settled)
        })
        .collect()
}

/// `settle`, then each source that is not there said on stderr by name: the command goes
/// on with the others.
pub(crate) async fn settle_and_say(api: &dyn SessionsApi) {
    for (info, settled) in settle(api, ATTACH_WAIT).await {
        if let Some(problem) = settled.problem() {
            say(&format!(
                "source {} ({}) is left out: {}",
                info.name,
                safe_line(&info.target),
                safe_line(&problem)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::parse_from(std::iter::once("switchboard").chain(args.iter().copied()))
    }

    fn plan(args: &[&str]) -> Result<Plan> {
        cli(args).plan(&Config::default())
    }

    fn names(p: &Plan) -> (Option<String>, Vec<Option<String>>) {
        match p {
            Plan::Local => (Some("<local>".into()), Vec::new()),
            Plan::Single(g) => (None, vec![g.name.clone()]),
            Plan::Several { local, gateways } => (
                local.clone(),
                gateways.iter().map(|g| g.name.clone()).collect(),
            ),
        }
    }

    #[test]
    fn one_plain_connect_is_as_before_and_names_make_several() {
        let p = plan(&["--connect", "ws://h:1/?a=b"]).expect("plain");
        assert!(matches!(&p, Plan::Single(g) if g.name.is_none() && g.url == "ws://h:1/?a=b"));
        let p = plan(&["--connect", "team=ws://t:1"]).expect("named");
        assert_eq!(names(&p), (Some("local".into()), vec![Some("team".into())]));
        // One named gateway without the local folder is one source: no names.
        let p = plan(&["--no-local", "--connect", "team=ws://t:1"]).expect("alone");
        assert!(matches!(&p, Plan::Single(g) if g.name.as_deref() == Some("team")));
        assert!(matches!(plan(&[]).expect("none"), Plan::Local));
    }

    #[test]
    fn a_plain_token_goes_only_to_the_only_gateway() {
        let err = plan(&[
            "--connect",
            "a=ws://a:1",
            "--connect",
            "b=ws://b:1",
            "--token",
            "t",
        ])
        .expect_err("which one?");
        assert!(err.to_string().contains("--token NAME=TOKEN"), "{err}");
        // A token holding `=` whose start names no gateway is plain.
        let c = cli(&["--connect", "a=ws://a:1", "--token", "abc=="]);
        assert_eq!(c.plain_token(&["a"]), Some("abc=="));
        let c = cli(&[
            "--connect",
            "a=ws://a:1",
            "--connect",
            "b=ws://b:1",
            "--token",
            "a=x=y",
        ]);
        let g = GatewayPlan {
            name: Some("a".into()),
            url: "ws://a:1".into(),
            entry: None,
        };
        assert_eq!(c.named_token(&g, &["a", "b"], false), Ok("x=y".into()));
        assert_eq!(token_env("eu-prod_2"), "SWITCHBOARD_TOKEN_EU_PROD_2");
    }

    #[test]
    fn bad_or_clashing_names_are_usage_errors() {
        for (args, said) in [
            (vec!["--connect", "Team=ws://t:1"], "a-z"),
            (vec!["--connect", "team="], "no address"),
            (vec!["--connect", "local=ws://t:1"], "localSource"),
            (vec!["--no-local"], "nothing to attach to"),
            (
                vec!["--connect", "ws://a:1", "--connect", "ws://b:1"],
                "name each one",
            ),
        ] {
            let err = plan(&args).expect_err("refused");
            let code = err
                .downcast_ref::<super::super::ExitError>()
                .map(|e| e.code);
            assert_eq!(code, Some(super::super::EXIT_USAGE), "{args:?}: {err}");
            assert!(err.to_string().contains(said), "{args:?}: {err}");
        }
    }
}
