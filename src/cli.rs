//! The command line: clap definitions and the non-interactive commands (`tool`, `inject`,
//! `sessions …`, `import-openclaw`, `config …`). Output for scripts goes to stdout; every
//! problem goes to stderr with what to do about it.

#[path = "cli_exchanges.rs"]
mod exchanges_cmd;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::Value;

use switchboard::api::{
    ApiError, KeyPurpose, PatchRequest, PolicyChange, PolicyView, RunResult, SendRequest, Sender,
    SessionKind, SessionsApi, SessionsQuery, ToolCall, TranscriptLine, TranscriptQuery, WorkId,
};
use switchboard::config::{self, Config};
use switchboard::engine::Engine;
use switchboard::engine::Overwrite;
use switchboard::text_safety::{self, safe_line, safe_text};

/// Exit code for input the program cannot use (bad JSON, unknown tool, missing parameter).
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A console and session engine for AI agents that talk to each other",
    long_about = "Switchboard keeps agent sessions (OpenClaw's session tools: sessions_list, \
sessions_history, sessions_send, sessions_spawn) in a local SQLite state folder, runs their agents, \
and lets you watch and drive them. With no command it opens the console on that state (on a \
terminal; otherwise it prints an overview).\n\nExamples:\n  switchboard demo\n  switchboard\n  \
switchboard inject agent:main:main \"hello\" --channel telegram --sender alice\n  \
switchboard tool sessions_list '{\"limit\": 5}'\n  switchboard sessions list\n\n\
Remote (a gateway started with `switchboard serve` on another machine, through an SSH tunnel):\n  \
ssh -L 18789:127.0.0.1:18789 server\n  switchboard --connect ws://127.0.0.1:18789\n  \
switchboard --connect ws://127.0.0.1:18789 sessions list",
    after_help = "State: --state-dir, else $SWITCHBOARD_STATE_DIR, else the platform data folder.\n\
Config: --config, else $SWITCHBOARD_CONFIG, else <config dir>/switchboard/config.json5 (missing = built-in defaults).\n\
Console keys: ? in the console; remap them in <config dir>/switchboard/keymap.json5 (defaults: assets/keymap.json5).\n\
NO_COLOR=1 gives a monochrome console; logs go to <state>/logs/switchboard.log.\n\
--connect: the console, tool, inject and sessions list|show|patch|abort run on the gateway's engine; \
the token is --token, else $SWITCHBOARD_GATEWAY_TOKEN, else <state>/gateway-token, offered only to a \
loopback URL whose port this state folder's own running `serve` listens on (recorded in <state>/gateways/)."
)]
pub struct Cli {
    /// The state folder (holds switchboard.db and logs/).
    #[arg(long, global = true, env = "SWITCHBOARD_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The JSON5 config file.
    #[arg(long, global = true, env = "SWITCHBOARD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Run on a gateway's engine instead of a local state folder (ws://HOST:PORT, wss://…).
    #[arg(long, global = true, value_name = "URL")]
    pub connect: Option<String>,
    /// The gateway token for --connect (else $SWITCHBOARD_GATEWAY_TOKEN, else the state
    /// folder's gateway-token file, only for the port this folder's own `serve` listens on).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// A CA certificate (PEM) to trust for a wss:// gateway.
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one session tool as an agent would and print its JSON result.
    #[command(
        long_about = "Run one session tool exactly as the agent of session KEY (default \"main\") \
would, and print the tool's result JSON on stdout. The exit code is 0 even when the result says \
status \"error\" or \"forbidden\" (that is the tool's answer); it is 2 for input the tool cannot \
use: an unknown tool, invalid JSON, a missing required parameter. A call that sets work off \
(sessions_send's reply-back loop and announce) waits for it to finish before exiting.",
        after_help = "Examples:\n  switchboard tool sessions_list '{\"kinds\": [\"group\"], \"limit\": 10}'\n  \
switchboard tool sessions_send '{\"sessionKey\": \"agent:work:main\", \"message\": \"status?\"}' --as agent:main:main\n  \
switchboard tool sessions_history '{\"sessionKey\": \"agent:main:main\", \"limit\": 20}' --as agent:main:main\n  \
echo '{\"sessionKey\": \"main\"}' | switchboard tool sessions_history -"
    )]
    Tool(ToolArgs),
    /// Send a message into a session as if it arrived from outside; its agent answers.
    #[command(
        long_about = "Record an inbound message in session KEY (created if new) and run the session's \
agent on it: the reply is printed on stdout, and what the run sets off (sends to other sessions, \
their reply-back rounds and announces) is shown on stderr as it happens. The command exits when \
all of it has finished. From the owner (--owner), a message \"/send on|off|inherit\" sets the \
session's send policy instead.",
        after_help = "Examples:\n  switchboard inject agent:main:main \"hello\" --channel telegram --sender alice\n  \
switchboard inject agent:main:main \"/send off\" --owner\n  \
switchboard inject agent:main:discord:group:42 \"standup in 5\" --channel discord --chat-type group --display-name \"#standup\""
    )]
    Inject(InjectArgs),
    /// The console on a fresh temporary state with demo agents that keep talking.
    #[command(
        long_about = "Open the console on a fresh temporary state folder with the demo agents \
(assets/demo-config.json5): messages arrive on several channels, agents send to each other \
with ping-pong rounds, announces are delivered or skipped, sub-agents are spawned, and one group's \
send policy denies sends. Your own sessions are not touched: the demo runs on a temporary folder \
that is removed on quit (only its log goes to the usual state folder's logs/). Press ? for keys, q to quit.",
        after_help = "Examples:\n  switchboard demo\n  switchboard demo --pace-ms 500     # busier\n  NO_COLOR=1 switchboard demo"
    )]
    Demo {
        /// Milliseconds between two demo messages (at most 600000: the ticker's deadline
        /// arithmetic panics on a huge period).
        #[arg(long, default_value_t = 1500, value_name = "MS",
              value_parser = clap::value_parser!(u64).range(0..=600_000))]
        pace_ms: u64,
    },
    /// List, show, patch and export sessions (the owner's view: every session).
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Agent-to-agent exchanges, newest first; `exchanges show ID` for one in full.
    #[command(
        after_help = "Examples:\n  switchboard exchanges\n  switchboard exchanges --session agent:main:main --limit 50\n  switchboard exchanges show 0193…  --json"
    )]
    Exchanges(exchanges_cmd::ExchangesArgs),
    /// Bring an OpenClaw state folder in: OpenClaw 2026.6+ (agents/<id>/agent/openclaw-agent.sqlite)
    /// or older (agents/<id>/sessions/sessions.json + <sessionId>.jsonl), or both.
    #[command(after_help = "Example:\n  switchboard import-openclaw ~/.openclaw\n\n\
Importing the same folder again merges: lines not yet here are appended (by line id), newer \
entries replace unchanged ones, a session continued on both sides is reported as a conflict and \
left as it is, and a second run changes nothing. Each transcript is read from DIR's own \
<sessionId>.jsonl first (a sessionFile inside DIR only when that is missing). Only files \
inside DIR are read (no symlinks, FIFOs or devices: each one skipped is named with its reason); \
lines over 16 MiB and message lines of the wrong shape are skipped, and the summary counts every \
skip by reason. OpenClaw's SQLite databases are opened read-only and may be imported while its \
gateway runs; a locked, damaged or newer-schema database, one whose tables are views or computed \
columns, or one a read of which takes over 2 minutes stops the import before anything is written.")]
    ImportOpenclaw {
        /// The OpenClaw state folder (the one holding agents/), or one agents/<id>/agent or
        /// agents/<id>/sessions folder.
        dir: PathBuf,
    },
    /// Write the documented default config, or validate one.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The console's keys: every action, the keys bound to it (your keymap file applied) and
    /// what it does.
    #[command(
        after_help = "Examples:\n  switchboard keys\n  switchboard keys --markdown     # the table README.md carries\n  switchboard keys --defaults     # without <config dir>/switchboard/keymap.json5"
    )]
    Keys {
        /// A Markdown table instead of columns.
        #[arg(long)]
        markdown: bool,
        /// The built-in keys, without your keymap file.
        #[arg(long)]
        defaults: bool,
    },
    /// Run the engine headless behind a WebSocket gateway (OpenClaw's protocol v4).
    #[command(
        long_about = "Run the engine without a console, behind a WebSocket gateway speaking \
OpenClaw's gateway protocol v4 (connect.challenge, connect with the gateway token, hello-ok; \
methods health, sessions.list, chat.history, chat.send, tools.invoke). The token is config \
gateway.auth.token, else $SWITCHBOARD_GATEWAY_TOKEN, else one generated into \
<state>/gateway-token (created 0600; a token file others may read, or a symlink there, is \
refused); it is never printed. While it runs, its address is recorded in <state>/gateways/ so \
`--connect` on this machine offers that token only to it. SIGINT or SIGTERM stops \
accepting, closes the connections, lets running work finish (up to 30 s) and exits 0.",
        after_help = "Examples:\n  switchboard serve\n  switchboard serve --bind 127.0.0.1:0   # any free port; the address is printed\n  \
SWITCHBOARD_GATEWAY_TOKEN=$(cat ~/.gw-token) switchboard serve --bind 127.0.0.1:18790\n  \
switchboard serve --bind 0.0.0.0:18789 --tls-cert fullchain.pem --tls-key privkey.pem   # wss://"
    )]
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (default 127.0.0.1 and the config's gateway.port, 18789).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Allow a non-loopback address without TLS: the token and every message cross the
    /// network in clear text.
    #[arg(long)]
    pub insecure: bool,
    /// Speak TLS (wss://) with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The largest frame accepted and sent, in bytes (hello-ok's policy.maxPayload; 65536 to
    /// 67108864, the most a Switchboard client reads). Longer answers are paged, or their
    /// texts cut with "…(truncated)…".
    #[arg(long, value_name = "BYTES",
          default_value_t = switchboard::server::DEFAULT_MAX_PAYLOAD as u64,
          value_parser = clap::value_parser!(u64).range(
              switchboard::protocol::MIN_MAX_PAYLOAD as u64
                  ..=switchboard::protocol::MAX_PAYLOAD_CEILING as u64))]
    pub max_payload: u64,
    /// Connections open at once; past it new ones are turned away (HTTP 503) until one
    /// closes. Lowered to fit the process's descriptor limit (`ulimit -n`) if needed.
    #[arg(long, value_name = "N", default_value_t = switchboard::server::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// How far one client may fall behind, in bytes of frames queued for it, before it is
    /// disconnected as lagged (hello-ok's policy.maxBufferedBytes).
    #[arg(long, value_name = "BYTES", default_value_t = switchboard::server::DEFAULT_MAX_BUFFERED_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_buffered_bytes: usize,
    /// Bytes of frames queued for all clients together; past it, the clients furthest
    /// behind are disconnected as lagged.
    #[arg(long, value_name = "BYTES", default_value_t = switchboard::server::DEFAULT_MAX_QUEUED_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_queued_bytes: usize,
}

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// sessions_list | sessions_history | sessions_send
    pub name: String,
    /// The parameters as a JSON object; `-` reads them from stdin; omitted means `{}`.
    pub json: Option<String>,
    /// The requester: the session whose agent calls the tool.
    #[arg(long = "as", value_name = "KEY", default_value = "main")]
    pub as_key: String,
    /// Call as a sandboxed session (visibility is clamped to what it spawned).
    #[arg(long)]
    pub sandboxed: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ChatTypeArg {
    Direct,
    Group,
    Channel,
}

#[derive(Debug, Args)]
pub struct InjectArgs {
    /// The session key (e.g. agent:main:main, agent:main:telegram:group:42, cron:nightly).
    pub key: String,
    /// The message text.
    pub text: String,
    /// The channel it arrived on (telegram, discord, webchat, …).
    #[arg(long)]
    pub channel: Option<String>,
    #[arg(long, value_enum)]
    pub chat_type: Option<ChatTypeArg>,
    /// A label for the chat (e.g. a group's name).
    #[arg(long)]
    pub display_name: Option<String>,
    /// Who sent it (a user or chat id on that channel).
    #[arg(long)]
    pub sender: Option<String>,
    /// The sender is the owner (needed for owner-only commands such as /send).
    #[arg(long)]
    pub owner: bool,
    /// Print only the reply, not the progress of the exchanges it sets off.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, newest activity first.
    #[command(
        after_help = "Examples:\n  switchboard sessions list\n  switchboard sessions list --kind group --kind cron --active 60\n  switchboard sessions list --archived\n  switchboard sessions list --json | jq '.[].key'"
    )]
    List {
        /// Only these kinds (main, group, cron, hook, node, other); repeatable.
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
        /// Only sessions active within this many minutes.
        #[arg(long, value_name = "MINUTES")]
        active: Option<u64>,
        /// At most this many rows.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON rows instead of a table.
        #[arg(long)]
        json: bool,
        /// Include archived sessions (marked "(archived)" in the table, `archived: true` in JSON).
        #[arg(long)]
        archived: bool,
    },
    /// One session's entry and its latest messages.
    #[command(after_help = "Example:\n  switchboard sessions show agent:main:main --messages 20")]
    Show {
        key: String,
        /// How many recent messages to print.
        #[arg(long, default_value_t = 10)]
        messages: usize,
        /// Include tool results.
        #[arg(long)]
        tools: bool,
        #[arg(long)]
        json: bool,
    },
    /// Change a session's settings: today, its send-policy override.
    #[command(
        long_about = "Change a session's settings. --send-policy sets the session's own send \
policy, which wins over every session.sendPolicy rule and the default: deny blocks outbound \
delivery from it and sends into it; allow lets them through; inherit removes the override so \
the config decides again. The owner's console and /send keep working on a denied session.",
        after_help = "Examples:\n  switchboard sessions patch agent:main:discord:group:42 --send-policy deny\n  \
switchboard sessions patch agent:main:discord:group:42 --send-policy inherit\n  \
switchboard sessions show agent:main:discord:group:42    # shows the effective policy and why"
    )]
    Patch {
        key: String,
        /// The session's send-policy override: allow (or on), deny (or off), or inherit to
        /// remove it and follow session.sendPolicy.
        #[arg(long, value_name = "allow|deny|inherit", value_parser = PolicyChange::parse)]
        send_policy: Option<PolicyChange>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the run executing on a session now (queued runs are left alone).
    #[command(
        long_about = "Stop the run executing on a session now, as a run timeout stops it: its \
model request is dropped, the run ends `aborted`, an agent-to-agent exchange it belongs to ends, \
and the session stays usable. Runs queued behind it still run. Runs execute in the process that \
started them, so abort on that engine: with --connect for a gateway's (`switchboard serve`).",
        after_help = "Examples:\n  switchboard --connect ws://127.0.0.1:18789 sessions abort agent:main:main\n  \
switchboard sessions abort agent:main:main --run 0190f5d2-…"
    )]
    Abort {
        key: String,
        /// Only this run.
        #[arg(long = "run", value_name = "RUN_ID")]
        run_id: Option<String>,
        /// Print `{key, runIds}` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a session's transcript as OpenClaw-compatible JSONL, or every session as an
    /// OpenClaw state folder.
    #[command(
        after_help = "Examples:\n  switchboard sessions export agent:main:main > main.jsonl\n  \
switchboard sessions export agent:main:main --out main.jsonl\n  switchboard sessions export --all --out ./openclaw-state\n\n\
An existing file is never replaced without --force; a folder, device or FIFO never is."
    )]
    Export {
        /// The session (omit with --all).
        key: Option<String>,
        /// Export every session as agents/<id>/sessions/{sessions.json,<sessionId>.jsonl}.
        #[arg(long)]
        all: bool,
        /// Output file (one session) or folder (--all). One session defaults to stdout.
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Replace existing files (regular files or symlinks, never a device or folder).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Write the documented default config.
    #[command(
        after_help = "Example:\n  switchboard config init            # to the default config path\n  switchboard config init ./config.json5 --force"
    )]
    Init {
        /// Where to write (default: the config path in use).
        file: Option<PathBuf>,
        /// Overwrite an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Validate a config: prints every problem with its line, exits 1 if there are any.
    #[command(after_help = "Example:\n  switchboard config check ./config.json5")]
    Check { file: Option<PathBuf> },
}

/// A failure that should exit with a particular code after printing its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExitError {
    pub code: i32,
    pub message: String,
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    ExitError {
        code: EXIT_USAGE,
        message: message.into(),
    }
    .into()
}

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
        let config = if let Some(path) = &self.config {
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
        Ok(config)
    }

    fn config_path(&self) -> Result<PathBuf> {
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
        switchboard::state_folder::open_engine_for_reading(&dir, config)
            .with_context(|| format!("cannot open the state folder {}", dir.display()))
    }

    /// The API for a command that only reads. No start-up work: it would write, and the
    /// folder may be read-only.
    async fn reading_api(&self) -> Result<Arc<dyn SessionsApi>> {
        if self.connect.is_some() {
            return self.remote_api().await;
        }
        Ok(Arc::new(self.open_engine_for_reading()?))
    }

    /// The engine a command that writes runs on: the gateway's (`--connect`), or this
    /// state folder's, started (its start-up work drained before exit).
    async fn attach(&self) -> Result<Attached> {
        if self.connect.is_some() {
            return Ok(Attached::Remote(self.remote_api().await?));
        }
        let engine = self.open_engine()?;
        let api = engine.start();
        Ok(Attached::Local(engine, api))
    }

    /// The token `--connect` offers: `--token`, else the environment's, else the state
    /// folder's `gateway-token`, but only to a loopback URL whose port this folder's own
    /// running `serve` is listening on (its record in `<state>/gateways/`): whatever else
    /// listens on a local port (another user's program, a tunnel to another gateway) never
    /// gets it. Without a token the command stops here, before dialling, saying why.
    fn gateway_token(&self, target: &str) -> Result<String> {
        use switchboard::server::{listening, token};
        if let Some(t) = self
            .token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            return Ok(t.to_string());
        }
        if let Ok(t) = std::env::var(token::TOKEN_ENV) {
            let t = t.trim();
            if !t.is_empty() {
                return Ok(t.to_string());
            }
        }
        let dir = self.state_dir();
        let file = dir.join(token::TOKEN_FILE);
        let why = match loopback_addrs(target) {
            None => "it is not a loopback address (the state folder's token is offered only \
to this machine's own gateway)"
                .to_string(),
            Some(addrs) => match listening::own_for_all(&dir, &addrs) {
                Some(records) if records.iter().all(|r| r.token_file) => {
                    match token::read_private(&file)? {
                        Some(t) => return Ok(t),
                        None => format!("{} is missing or empty", file.display()),
                    }
                }
                Some(_) => format!(
                    "the gateway of {} there takes its token from its config or environment, \
not from {}",
                    dir.display(),
                    file.display()
                ),
                None => format!(
                    "no `switchboard serve` of the state folder {} is listening there ({}), so \
{} is not offered to whatever is",
                    dir.display(),
                    addrs
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    file.display()
                ),
            },
        };
        Err(anyhow!(
            "no gateway token for {}: {why}. Pass --token TOKEN or set ${}",
            safe_line(target),
            token::TOKEN_ENV
        ))
    }

    /// `--connect`: dial the gateway now, so an unreachable or refusing one is reported at
    /// once (exit 1), never waited on. Our own gateway is spoken to in its own methods; any
    /// other (OpenClaw's) in OpenClaw's, chosen from what `hello-ok` lists.
    async fn remote_api(&self) -> Result<Arc<dyn SessionsApi>> {
        use switchboard::protocol::switchboard::method;
        use switchboard::remote::openclaw::OpenClawApi;
        use switchboard::remote::rpc::Rpc;
        use switchboard::remote::{DialError, LinkOptions, RemoteApi, device};
        let target = self
            .connect
            .clone()
            .ok_or_else(|| anyhow!("no --connect address"))?;
        let token = self.gateway_token(&target)?;
        let mut options = LinkOptions::new(target.clone(), Some(token));
        options.tls_ca = self.tls_ca.clone();
        // OpenClaw grants an operator's scopes only to a signed device; ours checks one when
        // offered. One key per state folder, created on first use.
        match device::load_or_create(&self.state_dir()) {
            Ok(identity) => options.device = Some(Arc::new(identity)),
            Err(e) => tracing::warn!(error = %e, "no device identity; connecting without one"),
        }
        let link = dial_patiently(&target, options).await.map_err(|e| match e {
            DialError::Refused(reason) => {
                let pairing = if reason.to_ascii_lowercase().contains("pairing") {
                    " (the gateway does not know this device yet: approve it on the gateway's \
host with `openclaw devices list` then `openclaw devices approve <id>`, or attach through an SSH \
tunnel so it connects from loopback, which OpenClaw pairs by itself)"
                } else {
                    ""
                };
                anyhow!(
                    "cannot attach to {}: refused: {}{pairing}",
                    safe_line(&target),
                    safe_line(&reason)
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
        let ours = link
            .hello()
            .is_some_and(|h| h.features.methods.iter().any(|m| m == method::SESSIONS));
        tracing::info!(%target, ours, "attached to a gateway");
        let link: Arc<dyn Rpc> = Arc::new(link);
        Ok(if ours {
            RemoteApi::new(link)
        } else {
            Arc::new(OpenClawApi::new(link))
        })
    }

    /// Refuses `--connect` for a command that works on a local state folder only.
    fn local_only(&self, command: &str) -> Result<()> {
        if self.connect.is_some() {
            return Err(usage(format!(
                "`{command}` works on a local state folder only, not over --connect; run it on \
the gateway's machine"
            )));
        }
        Ok(())
    }
}

/// Every address a `ws://` or `wss://` URL on this machine may be dialled at (an IP literal,
/// or all that `localhost` resolves to; the gateway's default port when none is given), or
/// `None` when it is not on this machine (any address not loopback).
fn loopback_addrs(target: &str) -> Option<Vec<std::net::SocketAddr>> {
    use std::net::ToSocketAddrs;
    let (host, port) = switchboard::remote::link::host_port(target).ok()?;
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
enum Attached {
    /// This state folder's engine, started.
    Local(Engine, Arc<dyn SessionsApi>),
    /// A gateway's engine.
    Remote(Arc<dyn SessionsApi>),
}

impl Attached {
    fn api(&self) -> &Arc<dyn SessionsApi> {
        match self {
            Attached::Local(_, api) | Attached::Remote(api) => api,
        }
    }

    /// Everything a local engine started (start-up work too) ends before exit; a gateway's
    /// engine carries on by itself.
    async fn drain(&self, waiting: &Waiting) {
        if let Attached::Local(engine, _) = self {
            waiting.drain(engine).await;
        }
    }
}

/// An API error as the command line reports it: unusable input exits 2.
fn api_error(e: ApiError) -> anyhow::Error {
    match e {
        ApiError::BadInput(m) => usage(m),
        other => other.into(),
    }
}

/// A session named on the command line, as every other call takes it (canonical).
async fn existing_key(api: &dyn SessionsApi, raw: &str) -> Result<String> {
    match api.resolve_key(raw, KeyPurpose::Existing).await {
        Ok(k) => Ok(k.key),
        Err(ApiError::NotFound(m)) => Err(anyhow!("{m} (see `switchboard sessions list`)")),
        Err(e) => Err(api_error(e)),
    }
}

pub async fn run(cli: Cli, log: Option<PathBuf>) -> Result<()> {
    match &cli.command {
        None => console(&cli, log).await,
        Some(Command::Demo { pace_ms }) => {
            cli.local_only("demo")?;
            demo(&cli, *pace_ms, log).await
        }
        Some(Command::Tool(args)) => tool(&cli, args).await,
        Some(Command::Inject(args)) => inject(&cli, args).await,
        Some(Command::Sessions(cmd)) => sessions(&cli, cmd).await,
        Some(Command::Exchanges(args)) => exchanges_cmd::run(&cli, args).await,
        Some(Command::ImportOpenclaw { dir }) => {
            cli.local_only("import-openclaw")?;
            import(&cli, dir).await
        }
        Some(Command::Config(cmd)) => {
            cli.local_only("config")?;
            config_cmd(&cli, cmd)
        }
        Some(Command::Keys { markdown, defaults }) => keys(*markdown, *defaults),
        Some(Command::Serve(args)) => {
            cli.local_only("serve")?;
            serve(&cli, args, log).await
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
    options: switchboard::remote::LinkOptions,
) -> std::result::Result<switchboard::remote::Link, switchboard::remote::DialError> {
    use switchboard::remote::{DialError, Link};
    let give_up = std::time::Instant::now() + FIRST_DIAL_PATIENCE;
    let mut delays = switchboard::remote::link::redial_delays();
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

/// `serve`: the engine headless behind the gateway until SIGINT or SIGTERM.
async fn serve(cli: &Cli, args: &ServeArgs, log: Option<PathBuf>) -> Result<()> {
    use switchboard::server::{self, token};
    let config = cli.load_config()?;
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
            Some(server::tls::acceptor(cert, key).map_err(|e| usage(format!("TLS: {e}")))?)
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
    let dir = cli.state_dir();
    let (secret, source) = token::resolve(config.gateway.auth.token.as_deref(), &dir)?;
    let engine = cli.open_engine()?;
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr()?;
    let api = engine.start();
    say_log(&log);
    let from = match &source {
        token::TokenSource::Config => "the config's gateway.auth.token".to_string(),
        token::TokenSource::Env => format!("${}", token::TOKEN_ENV),
        token::TokenSource::File(path) => format!(
            "in {} (read it with: cat {})",
            path.display(),
            path.display()
        ),
    };
    say(&format!("gateway token: {from}"));
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
    let stop = stop_signal()?;
    say(&format!("gateway listening on {scheme}://{local}"));
    tracing::info!(%local, "gateway listening");
    // What a read-only client must not learn of this machine (private_paths.rs).
    let private = [Some(dir.clone()), cli.config_path().ok(), log.clone()];
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
    let options = server::Options {
        read_only_token: config.gateway.auth.read_only_token.clone(),
        // Within the range clap checked, so it fits any usize this runs on.
        max_payload: usize::try_from(args.max_payload)
            .unwrap_or(switchboard::server::DEFAULT_MAX_PAYLOAD),
        max_connections,
        // Fewer than the connections, so connected clients keep places of their own.
        max_handshakes: server::DEFAULT_MAX_HANDSHAKES.min(max_connections.div_ceil(2)),
        max_buffered_bytes: args.max_buffered_bytes,
        max_queued_bytes: args.max_queued_bytes,
        private_paths: server::PrivatePaths::new(private.into_iter().flatten()),
        ..server::Options::new(secret)
    };
    server::run_with_tls(listener, api, options, tls, stop).await;
    tracing::info!("gateway stopped accepting; draining the engine");
    if tokio::time::timeout(Duration::from_secs(30), engine.idle())
        .await
        .is_err()
    {
        tracing::warn!(running = ?engine.still_running(), "work still running at exit; it resumes at the next start");
    }
    say("gateway stopped");
    Ok(())
}

/// A line on stderr for a long-running command: a reader that went away must not stop it
/// (`eprintln!` would panic).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "switchboard: {line}");
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

/// The terminal the console would draw on, checked before anything is started: none at
/// all (stdin or stdout not a tty, `ssh host switchboard demo` without -t) or `TERM=dumb`
/// is refused with exit 2, before raw mode could fail with an OS error.
fn console_terminal() -> Result<switchboard::tui::theme::Theme> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(usage("the console needs a terminal (with ssh, use ssh -t)"));
    }
    switchboard::tui::theme::Theme::from_env().map_err(|e| usage(e.to_string()))
}

/// The keymap the console uses: the defaults plus `<config dir>/switchboard/keymap.json5`.
fn load_keymap() -> Result<switchboard::tui::keymap::Keymap> {
    use switchboard::tui::keymap::Keymap;
    Ok(
        match dirs::config_dir().map(|d| d.join("switchboard").join("keymap.json5")) {
            Some(path) if path.exists() => {
                let text = switchboard::config::text_limits::read_capped(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .map_err(|e| usage(format!("{}: {e}", path.display())))?;
                Keymap::with_overrides(&text)
                    .map_err(|e| usage(format!("{}: {e}", path.display())))?
            }
            _ => Keymap::defaults(),
        },
    )
}

/// `keys`: the key reference, from the same keymap the console loads.
fn keys(markdown: bool, defaults: bool) -> Result<()> {
    use switchboard::tui::{keymap::Keymap, keys_doc};
    let keymap = if defaults {
        Keymap::defaults()
    } else {
        load_keymap()?
    };
    let out = if markdown {
        keys_doc::markdown(&keymap)
    } else {
        keys_doc::text(&keymap)
    };
    print!("{out}");
    Ok(())
}

/// The console's options: the keymap (defaults plus `<config dir>/switchboard/keymap.json5`)
/// and NO_COLOR.
fn console_options(attached: String) -> Result<switchboard::tui::Options> {
    let keymap = load_keymap()?;
    Ok(switchboard::tui::Options {
        attached,
        keymap,
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        theme: console_terminal()?,
        notices: Vec::new(),
    })
}

fn say_log(log: &Option<PathBuf>) {
    // Printed before the screen is taken, so it is still there after quitting.
    if let Some(path) = log {
        eprintln!("switchboard: logging to {}", path.display());
    }
}

/// No command: the console on the embedded engine, or an overview when not on a terminal.
async fn console(cli: &Cli, log: Option<PathBuf>) -> Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return overview(cli).await;
    }
    if let Some(target) = &cli.connect {
        let api = cli.remote_api().await?;
        let options = console_options(safe_line(target).into_owned())?;
        say_log(&log);
        return switchboard::tui::run(api, options).await;
    }
    let config = cli.load_config()?;
    let notices = config::warnings(&config)
        .iter()
        .map(|w| format!("config: {w}"))
        .collect();
    let dir = cli.state_dir();
    let engine = switchboard::state_folder::open_engine(&dir, config)
        .with_context(|| format!("cannot open the state folder {}", dir.display()))?;
    let mut options = console_options(dir.display().to_string())?;
    options.notices = notices;
    say_log(&log);
    switchboard::tui::run(engine.start(), options).await
}

/// `switchboard demo`: a temporary state, the demo agents, traffic, and the console.
async fn demo(_cli: &Cli, pace_ms: u64, log: Option<PathBuf>) -> Result<()> {
    // Refused before a state folder is made or traffic started.
    console_terminal()?;
    let dir = tempfile_dir()?;
    let config = switchboard::demo::demo_config()?;
    let engine = switchboard::state_folder::open_engine(&dir, config)
        .with_context(|| format!("cannot open the demo state {}", dir.display()))?;
    // Seeding runs beside the console, which draws at once and fills in as it lands.
    let traffic = switchboard::demo::start(
        engine.start(),
        // Below about 200 ms the demo's agents cannot keep up and the queues only grow.
        std::time::Duration::from_millis(pace_ms.max(200)),
    );
    let options = console_options(format!("demo {}", dir.display()))?;
    say_log(&log);
    let result = switchboard::tui::run(engine.start(), options).await;
    traffic.abort();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A fresh folder under the system temp dir for the demo's state.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-demo-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

async fn overview(cli: &Cli) -> Result<()> {
    let status = cli.reading_api().await?.status().await?;
    match &cli.connect {
        Some(target) => println!("Switchboard gateway: {}", safe_line(target)),
        None => println!("Switchboard state: {}", status.attached),
    }
    println!("Sessions: {}", status.sessions);
    println!();
    println!("Try:");
    println!("  switchboard inject agent:main:main \"hello\" --channel telegram --sender alice");
    println!("  switchboard sessions list");
    println!("  switchboard tool sessions_history '{{\"sessionKey\": \"main\"}}'");
    println!("  switchboard --help");
    Ok(())
}

/// The most parameter text read from stdin: far beyond any real call, and short of what
/// would make the parse itself the problem.
const MAX_STDIN_PARAMS: u64 = 16 << 20;

fn read_params(raw: Option<&str>) -> Result<Value> {
    let text = match raw {
        None => return Ok(Value::Object(Default::default())),
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_STDIN_PARAMS + 1)
                .read_to_end(&mut bytes)
                .context("cannot read parameters from stdin")?;
            if bytes.len() as u64 > MAX_STDIN_PARAMS {
                return Err(usage(format!(
                    "the parameters on stdin are larger than {} MiB",
                    MAX_STDIN_PARAMS >> 20
                )));
            }
            // Bytes that are not text are the caller's mistake, like invalid JSON.
            String::from_utf8(bytes).map_err(|e| {
                usage(format!(
                    "the parameters on stdin are not valid UTF-8 (at byte {}); pass one JSON object as text",
                    e.utf8_error().valid_up_to()
                ))
            })?
        }
        Some(s) => s.to_string(),
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "invalid JSON parameters: {e}. Pass one JSON object, e.g. '{{\"limit\": 5}}'"
        ))
    })?;
    if !value.is_object() {
        return Err(usage(
            "the parameters must be a JSON object, e.g. '{\"limit\": 5}'",
        ));
    }
    Ok(value)
}

async fn tool(cli: &Cli, args: &ToolArgs) -> Result<()> {
    let params = read_params(args.json.as_deref())?;
    // Start-up work (finishing what a stopped run of the engine left) begins here, like any
    // start, and is drained before exit.
    let attached = cli.attach().await?;
    let api = attached.api();
    let requester = match api.resolve_key(&args.as_key, KeyPurpose::Requester).await {
        Ok(k) => k.key,
        Err(ApiError::BadInput(m)) => return Err(usage(format!("--as: {m}"))),
        Err(e) => return Err(e.into()),
    };
    let result = api
        .call_tool(ToolCall {
            tool: args.name.clone(),
            params,
            requester,
            sandboxed: args.sandboxed,
        })
        .await
        .map_err(api_error)?;
    print_json(&result.result)?;
    // Whatever the call set off (a send's reply-back loop and announce) finishes before we
    // exit, so a following `sessions_history` shows all of it.
    let waiting = Waiting::new();
    waiting.work(api.as_ref(), result.work).await?;
    attached.drain(&waiting).await;
    Ok(())
}

/// How often a command waiting for the work it set off says what it still waits for.
/// `SWITCHBOARD_WAIT_REPORT_SECS` shortens it for tests, which cannot wait 30 s.
fn wait_report_every() -> Duration {
    std::env::var("SWITCHBOARD_WAIT_REPORT_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(Duration::from_secs(30), Duration::from_secs)
}

/// A command's waits for what it set off. Every wait is bounded by the work's own timeouts,
/// but some are long (a scripted delay, a 60 s exchange step), so a wait is never a silent
/// one: every `wait_report_every()` stderr says what is still running and for how long.
struct Waiting {
    started: Instant,
    every: Duration,
}

impl Waiting {
    fn new() -> Waiting {
        Waiting {
            started: Instant::now(),
            every: wait_report_every(),
        }
    }

    fn report(&self, tasks: &[(String, Duration)]) {
        let mut line = format!(
            "{} task(s) still running after {:.0?}",
            tasks.len(),
            self.started.elapsed()
        );
        for (i, (what, age)) in tasks.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            line.push_str(&format!("{sep}{what} (for {age:.1?})"));
        }
        eprintln!("still waiting: {}", safe_line(&line));
    }

    /// The run's end (its reply), reporting what of `work` still runs meanwhile.
    async fn run(&self, api: &dyn SessionsApi, run_id: &str, work: WorkId) -> Result<RunResult> {
        loop {
            let asked = Instant::now();
            let result = api.wait_run(run_id, self.every).await?;
            if result.status != "running" {
                return Ok(result);
            }
            // A run this engine does not execute is answered from its record at once:
            // wait out the slice before asking again.
            if let Some(rest) = self.every.checked_sub(asked.elapsed()) {
                tokio::time::sleep(rest).await;
            }
            self.report(&api.still_running(work).await?);
        }
    }

    /// Everything one call set off.
    async fn work(&self, api: &dyn SessionsApi, work: WorkId) -> Result<()> {
        while !api.wait_work(work, self.every).await? {
            self.report(&api.still_running(work).await?);
        }
        Ok(())
    }

    /// Everything this engine started (start-up work too, which exit must not cut off).
    async fn drain(&self, engine: &Engine) {
        let idle = engine.idle();
        tokio::pin!(idle);
        loop {
            tokio::select! {
                () = &mut idle => return,
                () = tokio::time::sleep(self.every) => self.report(&engine.still_running()),
            }
        }
    }
}

/// JSON for scripts, with every character a terminal could act on escaped (`\uXXXX`), so
/// `--json` piped to a screen is as safe as the tables; parsed, the strings are unchanged.
fn print_json(v: &Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    text_safety::write_json(&mut out, v, true)?;
    writeln!(out)?;
    Ok(())
}

async fn inject(cli: &Cli, args: &InjectArgs) -> Result<()> {
    // The cheap checks before touching the state folder (the engine makes them too).
    if args.text.trim().is_empty() {
        return Err(usage("the message text is empty"));
    }
    if args.key.trim().eq_ignore_ascii_case("current") {
        return Err(usage("inject needs a real session key, not \"current\""));
    }
    let attached = cli.attach().await?;
    let api = attached.api();
    let from = Sender {
        channel: args.channel.clone(),
        chat_type: args.chat_type.map(|c| {
            match c {
                ChatTypeArg::Direct => "direct",
                ChatTypeArg::Group => "group",
                ChatTypeArg::Channel => "channel",
            }
            .to_string()
        }),
        display_name: args.display_name.clone(),
        sender: args.sender.clone(),
        owner: args.owner,
    };
    // Subscribed first, so nothing the message sets off is missed.
    let events = api.subscribe();
    let receipt = api
        .send(SendRequest {
            key: args.key.clone(),
            text: args.text.clone(),
            from,
            idempotency_key: None,
        })
        .await
        .map_err(api_error)?;
    // An OpenClaw gateway does not say where the message landed (seq 0): no number then.
    let place = if receipt.seq > 0 {
        format!(" (message {})", receipt.seq)
    } else {
        String::new()
    };
    eprintln!(
        "{} {}{place}",
        if receipt.created {
            "created"
        } else {
            "recorded in"
        },
        receipt.display_key,
    );
    let waiting = Waiting::new();
    if let Some(reply) = &receipt.command_reply {
        println!("{}", safe_text(reply));
        // Work resumed at start-up (a pending sub-agent announce) still finishes first.
        attached.drain(&waiting).await;
        return Ok(());
    }
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let printer = tokio::spawn(crate::progress::print(events, !args.quiet, stopped));
    let reply = match &receipt.run_id {
        Some(run_id) => Some(waiting.run(api.as_ref(), run_id, receipt.work).await?),
        None => None,
    };
    // Everything the message set off (sends, their loops and announces) ends before exit.
    waiting.work(api.as_ref(), receipt.work).await?;
    attached.drain(&waiting).await;
    let _ = stop.send(());
    let _ = printer.await;
    match reply {
        Some(o) if o.status == "ok" => {
            if !o.reply.is_empty() {
                // The agent's words: shown, never obeyed by the terminal.
                println!("{}", safe_text(&o.reply));
            }
            Ok(())
        }
        Some(o) => Err(anyhow!(
            "the agent's run ended {}: {}",
            o.status,
            o.error.unwrap_or_default()
        )),
        None => Ok(()),
    }
}

fn parse_kinds(names: &[String]) -> Result<Vec<SessionKind>> {
    names
        .iter()
        .map(|n| {
            SessionKind::parse(n).ok_or_else(|| {
                usage(format!(
                    "unknown kind {n:?} (kinds: main, group, cron, hook, node, other)"
                ))
            })
        })
        .collect()
}

/// `sessions list --json`'s rows: the owner's `sessions_list`-shaped object of each session,
/// with its effective send policy (`sendPolicyEffective`). The page carries them (`entries`):
/// one request, however many rows (over `--connect`, each request is a round trip). A
/// gateway too old to fill them is asked row by row; a session deleted meanwhile is left out.
async fn owner_rows(api: &dyn SessionsApi, query: SessionsQuery) -> Result<Vec<Value>> {
    let page = api
        .sessions(SessionsQuery {
            entries: true,
            ..query
        })
        .await?;
    let mut rows = Vec::with_capacity(page.rows.len());
    for row in page.rows {
        let (mut v, policy) = match row.entry {
            Some(entry) => (entry, row.policy),
            None => match api.session(&row.key).await? {
                Some(detail) => (detail.entry, detail.row.policy),
                None => continue,
            },
        };
        if v.is_object() {
            v["sendPolicyEffective"] = policy.to_json();
            rows.push(v);
        }
    }
    Ok(rows)
}

async fn sessions(cli: &Cli, cmd: &SessionsCommand) -> Result<()> {
    match cmd {
        SessionsCommand::List {
            kinds,
            active,
            limit,
            json,
            archived,
        } => {
            let kinds = parse_kinds(kinds)?;
            let api = cli.reading_api().await?;
            let query = SessionsQuery {
                kinds,
                active_since: active.map(|m| {
                    let minutes = i64::try_from(m).unwrap_or(i64::MAX).max(1);
                    chrono::Utc::now()
                        .timestamp_millis()
                        .saturating_sub(minutes.saturating_mul(60_000))
                }),
                archived: *archived,
                limit: *limit,
                ..SessionsQuery::default()
            };
            let rows = owner_rows(api.as_ref(), query.clone()).await?;
            if *json {
                return print_json(&Value::Array(rows));
            }
            // "No sessions yet" would be wrong when only archived ones matched; one more
            // page, on the empty path only, tells the two apart.
            if rows.is_empty()
                && !*archived
                && !api
                    .sessions(SessionsQuery {
                        archived: true,
                        limit: 1,
                        ..query
                    })
                    .await?
                    .rows
                    .is_empty()
            {
                println!("No sessions to show; archived ones are hidden (add --archived).");
                return Ok(());
            }
            print_table(&rows);
            Ok(())
        }
        SessionsCommand::Show {
            key,
            messages,
            tools,
            json,
        } => {
            let api = cli.reading_api().await?;
            let (row, lines, policy, left_out) =
                show_session(api.as_ref(), key, *messages, *tools).await?;
            if *json {
                let mut v = row;
                v["sendPolicyEffective"] = policy.to_json();
                v["messages"] = Value::Array(
                    lines
                        .iter()
                        .filter_map(|l| l.message.clone())
                        .collect::<Vec<_>>(),
                );
                return print_json(&v);
            }
            print_show(&row, &lines, &policy);
            if left_out > 0 {
                println!(
                    "({left_out} older messages left out to fit the gateway's frame limit; ask \
for fewer with --messages)"
                );
            }
            Ok(())
        }
        SessionsCommand::Patch {
            key,
            send_policy,
            json,
        } => patch(cli, key, *send_policy, *json).await,
        SessionsCommand::Abort { key, run_id, json } => {
            abort(cli, key, run_id.as_deref(), *json).await
        }
        SessionsCommand::Export {
            key,
            all,
            out,
            force,
        } => {
            cli.local_only("sessions export")?;
            let overwrite = if *force {
                Overwrite::Replace
            } else {
                Overwrite::Refuse
            };
            export(cli, key.as_deref(), *all, out.as_deref(), overwrite).await
        }
    }
}

/// `sessions abort`: stop what runs on a session, then say what was stopped.
async fn abort(cli: &Cli, raw: &str, run_id: Option<&str>, json: bool) -> Result<()> {
    let attached = cli.attach().await?;
    let api = attached.api();
    let key = existing_key(api.as_ref(), raw).await?;
    let done = api
        .abort(&key, run_id)
        .await
        .map_err(api_error)
        .with_context(|| format!("cannot abort runs of {key}"))?;
    attached.drain(&Waiting::new()).await;
    if json {
        return print_json(&serde_json::json!({ "key": key, "runIds": done.run_ids }));
    }
    if done.run_ids.is_empty() {
        let where_ = match attached {
            Attached::Local(..) => {
                " in this process (runs execute in the process that started them: abort in the \
                 console, or with --connect on the gateway's engine)"
            }
            Attached::Remote(_) => "",
        };
        println!("{key}: nothing was running{where_}");
    } else {
        for id in &done.run_ids {
            println!("{key}: aborted run {id}");
        }
    }
    Ok(())
}

/// `sessions patch`: set or remove the send-policy override, then report the effective policy.
async fn patch(cli: &Cli, raw: &str, change: Option<PolicyChange>, json: bool) -> Result<()> {
    let Some(change) = change else {
        return Err(usage(
            "nothing to change: pass --send-policy allow|deny|inherit",
        ));
    };
    let attached = cli.attach().await?;
    let api = attached.api();
    let key = existing_key(api.as_ref(), raw).await?;
    let patched = api
        .patch(PatchRequest {
            key: key.clone(),
            send_policy: Some(change),
        })
        .await
        .map_err(api_error)
        .with_context(|| format!("cannot patch {key}"))?;
    attached.drain(&Waiting::new()).await;
    if json {
        return print_json(&serde_json::json!({
            "key": patched.display_key,
            "sendPolicy": patched.send_policy,
            "sendPolicyEffective": patched.effective.to_json(),
        }));
    }
    let change = match change.stored() {
        Some(p) => format!("set to {p}"),
        None => "removed (the config decides)".to_string(),
    };
    println!(
        "{}: send policy override {change}; effective: {}",
        patched.display_key, patched.effective.summary
    );
    Ok(())
}

/// One session's owner row, its latest transcript lines (each with its stored message) and
/// its effective send policy.
async fn show_session(
    api: &dyn SessionsApi,
    raw: &str,
    messages: usize,
    tools: bool,
) -> Result<(Value, Vec<TranscriptLine>, PolicyView, usize)> {
    let key = existing_key(api, raw).await?;
    let detail = api
        .session(&key)
        .await?
        .ok_or_else(|| anyhow!("no session found: {key}"))?;
    let (lines, left_out) = if messages == 0 {
        (Vec::new(), 0)
    } else {
        let page = api
            .transcript(TranscriptQuery {
                key: key.clone(),
                before: None,
                limit: messages,
                tools,
                raw: true,
            })
            .await?;
        if !page.exists {
            return Err(anyhow!("no session found: {key}"));
        }
        (page.lines, page.left_out)
    };
    Ok((detail.entry, lines, detail.row.policy, left_out))
}

fn relative(ms: i64) -> String {
    let now = chrono::Utc::now().timestamp_millis();
    let secs = ((now - ms) / 1000).max(0);
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

fn field<'a>(row: &'a Value, name: &str) -> &'a str {
    row.get(name).and_then(Value::as_str).unwrap_or("")
}

/// A row's field as a table cell shows it: one line, nothing the terminal would act on.
fn cell(row: &Value, name: &str) -> String {
    safe_line(field(row, name)).into_owned()
}

fn print_table(rows: &[Value]) {
    if rows.is_empty() {
        println!("No sessions yet. Record one with: switchboard inject agent:main:main \"hello\"");
        return;
    }
    let key_w = rows
        .iter()
        .map(|r| cell(r, "key").chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 60);
    println!(
        "{:<6} {:<key_w$} {:<10} {:<9} {:<6} NAME",
        "KIND", "KEY", "CHANNEL", "UPDATED", "POLICY"
    );
    for r in rows {
        let updated = r
            .get("updatedAt")
            .and_then(Value::as_i64)
            .map(relative)
            .unwrap_or_default();
        // Names are stored as given (they are labels, not identities) and escaped here.
        let mut name = safe_line(
            r.get("displayName")
                .or_else(|| r.get("label"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
        .into_owned();
        // Marked in the last column so the fixed-width columns scripts may cut stay put.
        if r.get("archived").and_then(Value::as_bool) == Some(true) {
            name = if name.is_empty() {
                "(archived)".to_string()
            } else {
                format!("{name} (archived)")
            };
        }
        println!(
            "{:<6} {:<key_w$} {:<10} {:<9} {:<6} {}",
            cell(r, "kind"),
            cell(r, "key"),
            cell(r, "channel"),
            updated,
            policy_cell(r),
            name
        );
    }
}

/// `allow`, `deny`, or `deny*`/`allow*` when the session's own override decides.
fn policy_cell(row: &Value) -> String {
    let Some(eff) = row.get("sendPolicyEffective") else {
        return String::new();
    };
    let marker = if field(eff, "source") == "override" {
        "*"
    } else {
        ""
    };
    format!("{}{marker}", field(eff, "policy"))
}

/// How many characters of one message `sessions show` prints; a 10 MB message would bury
/// the terminal (and everything after it). `sessions export` and `--json` have the whole text.
const SHOW_MESSAGE_CHARS: usize = 4_000;

/// The first `max` characters of `text`, and how many characters were left out.
fn cap_chars(text: &str, max: usize) -> (&str, usize) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], text[at..].chars().count()),
        None => (text, 0),
    }
}

fn print_show(row: &Value, lines: &[TranscriptLine], policy: &PolicyView) {
    let width = 16;
    if let Some(obj) = row.as_object() {
        for (k, v) in obj {
            let text = match v {
                Value::String(s) => safe_line(s).into_owned(),
                other => text_safety::to_json_string(other, false)
                    .unwrap_or_else(|_| safe_line(&other.to_string()).into_owned()),
            };
            println!("{:<width$} {text}", safe_line(k));
        }
    }
    println!("{:<width$} {}", "send policy", policy.summary);
    println!();
    if lines.is_empty() {
        println!("(no messages)");
    }
    for line in lines {
        let m = line.message.as_ref();
        let role = m
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let from = m
            .and_then(|m| m.get("provenance"))
            .filter(|p| p.get("kind").and_then(Value::as_str) == Some("inter_session"))
            .and_then(|p| p.get("sourceSessionKey").and_then(Value::as_str))
            .map(|s| format!(" (from {})", safe_line(s)))
            .unwrap_or_default();
        let (shown, more) = cap_chars(&line.text, SHOW_MESSAGE_CHARS);
        println!("{}{from}: {}", safe_line(role), safe_text(shown));
        if more > 0 {
            println!("  … ({more} more characters; `sessions export` has all)");
        }
    }
}

async fn export(
    cli: &Cli,
    key: Option<&str>,
    all: bool,
    out: Option<&Path>,
    overwrite: Overwrite,
) -> Result<()> {
    let engine = cli.open_engine_for_reading()?;
    if all {
        if key.is_some() {
            return Err(usage("give either a session key or --all, not both"));
        }
        let dir = out.ok_or_else(|| usage("--all needs --out FOLDER"))?;
        let report = engine.export_openclaw(dir, overwrite).await?;
        eprintln!(
            "exported {} sessions ({} lines) to {}",
            report.sessions,
            report.lines,
            dir.display()
        );
        return Ok(());
    }
    let raw = key.ok_or_else(|| usage("name a session key, or pass --all --out FOLDER"))?;
    let api: Arc<dyn SessionsApi> = Arc::new(engine.clone());
    // The file operations stay engine calls (they work on this machine's state folder).
    let key = existing_key(api.as_ref(), raw).await?;
    let lines = match out {
        Some(path) => engine.export_session_to_file(&key, path, overwrite)?,
        None => {
            // Lines are stored as their agents wrote them; on the way to a terminal (or a
            // pipe) the characters that could drive one are escaped, the values unchanged.
            let mut w =
                text_safety::SafeJsonText::new(std::io::BufWriter::new(std::io::stdout().lock()));
            let n = engine.export_session_jsonl(&key, &mut w)?;
            w.flush()?;
            n
        }
    };
    eprintln!("exported {key}: {lines} lines");
    Ok(())
}

async fn import(cli: &Cli, dir: &Path) -> Result<()> {
    let engine = cli.open_engine()?;
    let report = engine.import_openclaw(dir).await?;
    for w in &report.warnings {
        eprintln!("warning: {}", safe_line(w));
    }
    for n in &report.source_notes {
        eprintln!("transcript: {}", safe_line(n));
    }
    if report.source_notes_total > report.source_notes.len() {
        eprintln!(
            "transcript: … and {} more sessions like these",
            report.source_notes_total - report.source_notes.len()
        );
    }
    for c in &report.conflicts {
        println!("conflict: {}", safe_line(c));
    }
    let mut summary = format!(
        "imported {} new sessions ({} lines); updated {} ({} lines appended, {} entries replaced); {} unchanged; {} conflicts",
        report.sessions_imported,
        report.lines_imported,
        report.sessions_updated,
        report.lines_appended,
        report.entries_updated,
        report.sessions_present,
        report.conflicts.len()
    );
    if !report.skipped.is_empty() {
        let skips: Vec<String> = report
            .skipped
            .iter()
            .map(|(reason, n)| reason.describe(*n))
            .collect();
        summary.push_str(&format!("; skipped {}", skips.join(", ")));
    }
    println!("{summary}");
    if report.changed_nothing() {
        println!("nothing changed");
    }
    Ok(())
}

fn config_cmd(cli: &Cli, cmd: &ConfigCommand) -> Result<()> {
    match cmd {
        ConfigCommand::Init { file, force } => {
            let path = match file {
                Some(p) => p.clone(),
                None => cli.config_path()?,
            };
            config::write_default(&path, *force)?;
            println!("wrote {}", path.display());
            Ok(())
        }
        ConfigCommand::Check { file } => {
            let path = match file {
                Some(p) => p.clone(),
                None => cli.config_path()?,
            };
            let problems = config::check_file(&path)?;
            if problems.is_empty() {
                // A value used other than as written is a warning, not an error: the config
                // works (exit 0), but the owner learns what is used instead.
                let warnings = config::check_file_warnings(&path)?;
                for w in &warnings {
                    let line = w.line.map(|l| format!(":{l}")).unwrap_or_default();
                    eprintln!(
                        "{}{line}: {}: warning: {}",
                        path.display(),
                        safe_line(&w.path),
                        safe_text(&w.message)
                    );
                }
                match warnings.len() {
                    0 => println!("{}: ok", path.display()),
                    n => println!("{}: ok, {n} warning(s)", path.display()),
                }
                return Ok(());
            }
            for p in &problems {
                let mut at = path.display().to_string();
                if let Some(line) = p.line {
                    at.push_str(&format!(":{line}"));
                }
                let message = safe_text(&p.message);
                if p.path.is_empty() {
                    eprintln!("{at}: {message}");
                } else {
                    eprintln!("{at}: {}: {message}", safe_line(&p.path));
                }
            }
            Err(ExitError {
                code: 1,
                message: format!("{} problem(s) in {}", problems.len(), path.display()),
            }
            .into())
        }
    }
}
