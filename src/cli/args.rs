//! The command line's clap definitions: every command, option and `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use switchboard_types::api::PolicySetting;

/// The heading the options every command takes are listed under, after the command's own.
const GLOBAL: &str = "Global options";

/// The global options that only say where a remote engine is.
const REMOTE: &[&str] = &["connect", "token", "tls_ca", "no_local"];

/// The global options each command has no use for, hidden from its `--help` (still parsed:
/// a local-only command refuses `--connect` with a message). Space-separated command paths;
/// a command's subcommands inherit what it hides.
const NOT_APPLICABLE: &[(&str, &[&str])] = &[
    ("demo", REMOTE),
    ("import-openclaw", REMOTE),
    ("serve", REMOTE),
    ("sessions export", REMOTE),
    ("backup", REMOTE),
    ("store", REMOTE),
    // Config files only: no state folder, no gateway.
    (
        "config",
        &["state_dir", "connect", "token", "tls_ca", "no_local"],
    ),
    // The keymap file (<config dir>/switchboard/keymap.json5) only.
    (
        "keys",
        &[
            "state_dir",
            "config",
            "connect",
            "token",
            "tls_ca",
            "no_local",
        ],
    ),
];

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
switchboard --connect ws://127.0.0.1:18789 sessions list\n\n\
Several gateways at once, beside the local folder (sessions named SOURCE/KEY):\n  \
switchboard --connect home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789 \
--token team=TOKEN sessions list\n  switchboard gateways",
    after_help = "State: --state-dir, else $SWITCHBOARD_STATE_DIR, else the platform data folder.\n\
Store: SQLite in the state folder, unless --store postgres://… (else $SWITCHBOARD_STORE, else the config's storage.url).\n\
Config: --config, else $SWITCHBOARD_CONFIG, else <config dir>/switchboard/config.json5 (missing = built-in defaults).\n\
Console keys: ? in the console; remap them in <config dir>/switchboard/keymap.json5 (defaults: assets/keymap.json5).\n\
NO_COLOR=1 gives a monochrome console; logs go to <state>/logs/switchboard.log.\n\
--connect: the console, tool, inject and sessions list|show|patch|abort run on the gateway's engine; \
the token is --token, else $SWITCHBOARD_GATEWAY_TOKEN, else <state>/gateway-token, offered only to a \
loopback URL whose port this state folder's own running `serve` listens on (recorded in <state>/gateways/).\n\
Named gateways (--connect NAME=URL, repeatable, or the config's `gateways`): the console and every \
command run on all of them and the local folder (unless --no-local) at once; a session is \
NAME/KEY (a bare KEY when one source alone has it). Each one's token: --token NAME=TOKEN, else \
$SWITCHBOARD_TOKEN_<NAME> (upper case, - as _), else the config's tokenFile or tokenEnv."
)]
pub struct Cli {
    /// The state folder (holds switchboard.db and logs/).
    #[arg(long, global = true, env = "SWITCHBOARD_STATE_DIR", value_name = "DIR", help_heading = GLOBAL)]
    pub state_dir: Option<PathBuf>,
    /// The JSON5 config file.
    #[arg(long, global = true, env = "SWITCHBOARD_CONFIG", value_name = "FILE", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,
    /// Run on a gateway's engine instead of a local state folder (ws://HOST:PORT, wss://…).
    /// Repeat as NAME=URL to attach to several gateways at once, beside the local folder
    /// (their sessions are then NAME/KEY; this replaces the config's `gateways`).
    #[arg(long, global = true, value_name = "[NAME=]URL", help_heading = GLOBAL)]
    pub connect: Vec<String>,
    /// The gateway token for --connect (else $SWITCHBOARD_GATEWAY_TOKEN, else the state
    /// folder's gateway-token file, only for the port this folder's own `serve` listens on).
    /// With named gateways: NAME=TOKEN, repeatable (else $SWITCHBOARD_TOKEN_<NAME>, else the
    /// config entry's tokenFile or tokenEnv).
    #[arg(long, global = true, value_name = "[NAME=]TOKEN", help_heading = GLOBAL)]
    pub token: Vec<String>,
    /// Keep the engine's state in this PostgreSQL database (postgres://USER[:PASSWORD]@HOST[:PORT]/DB)
    /// instead of the state folder's SQLite database; overrides the config's `storage.url`.
    /// The state folder still holds logs, tokens and instance locks.
    #[arg(long, global = true, env = "SWITCHBOARD_STORE", value_name = "URL", help_heading = GLOBAL)]
    pub store: Option<String>,
    /// A CA certificate (PEM) to trust for a wss:// gateway (every gateway given without a
    /// tlsCa of its own in the config).
    #[arg(long, global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub tls_ca: Option<PathBuf>,
    /// With named gateways (--connect NAME=URL or the config's `gateways`): leave the local
    /// state folder out of the sources.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub no_local: bool,
    /// How the log file's events are written: `text` (a readable line each) or `json` (one
    /// JSON object per line, for log shippers).
    #[arg(long, global = true, value_enum, default_value_t = crate::logging::LogFormat::Text,
          env = "SWITCHBOARD_LOG_FORMAT", value_name = "FORMAT", help_heading = GLOBAL)]
    pub log_format: crate::logging::LogFormat,
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
with ping-pong rounds, announces are queued for their chats or skipped, sub-agents are spawned, and one group's \
send policy denies sends. Your own sessions are not touched: the demo runs on a temporary folder \
that is removed on quit (only its log goes to the usual state folder's logs/). Press ? for keys, q to quit.",
        after_help = "Examples:\n  switchboard demo\n  switchboard demo --pace-ms 500     # busier\n  NO_COLOR=1 switchboard demo"
    )]
    Demo {
        /// Milliseconds between two demo messages (0 to 600000, ten minutes).
        #[arg(long, default_value_t = 1500, value_name = "MS",
              value_parser = clap::value_parser!(u64).range(0..=600_000))]
        pace_ms: u64,
    },
    /// List, show, patch and export sessions (the owner's view: every session).
    #[command(
        subcommand,
        after_help = "Examples:\n  switchboard sessions list\n  switchboard sessions show agent:main:main --messages 20\n  \
switchboard sessions patch agent:main:discord:group:42 --send-policy deny\n  switchboard sessions export --all --out ./openclaw-state\n\n\
Several sources (the local folder and named gateways: --connect NAME=URL, or the config's \
gateways): list and show read all of them; the table gains a SOURCE column, --json rows a \
\"source\" field, and keys are SOURCE/KEY (a bare key is taken when one source alone has it):\n  \
switchboard --connect home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789 sessions list\n  \
switchboard sessions show team/agent:main:main"
    )]
    Sessions(SessionsCommand),
    /// Agent-to-agent exchanges, newest first; `exchanges show ID` for one in full.
    #[command(
        after_help = "Examples:\n  switchboard exchanges\n  switchboard exchanges --session agent:main:main --limit 50\n  \
switchboard exchanges --from agent:main:main --to agent:ops:main --since 2h\n  \
switchboard exchanges --status running --status interrupted\n  \
switchboard exchanges --since 2026-11-27T09:00:00Z --json\n  switchboard exchanges show 0193a4c2   # a unique start of an id\n  \
switchboard --connect home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789 exchanges   # all sources, a SOURCE column\n\n\
The table has a header row; notes (that more match than --limit shows, that none match) go to \
stderr, so stdout is only the table. Filters other than --session and --since are applied to the pages read (the newest 10000 \
exchanges at most; a note says when that bound stopped the search).\n\nWith --connect to an OpenClaw gateway, exchanges are rebuilt from what its transcripts record (forwarded messages' provenance, replies, hidden REPLY_SKIP lines); a field its record cannot say reads \"not recorded by OpenClaw\". Ids there are <target key>#<line number>."
    )]
    Exchanges(ExchangesArgs),
    /// Outbound deliveries (replies and announces handed to channels), newest first, with
    /// their status: queued, sending, sent (the channel's message id), retrying (the next
    /// attempt), failed (the reason); `deliveries retry ID` sends a failed one again.
    #[command(
        after_help = "Examples:\n  switchboard deliveries\n  switchboard deliveries --failed\n  \
switchboard deliveries --json | jq '.[] | select(.status == \"retrying\")'\n  \
switchboard deliveries retry 42\n\n\
Deliveries are sent by `switchboard serve` (or the console) for the channels the config \
enables (channels.telegram, channels.discord, channels.webhook.<name>); with none, they stay \
queued. A channel whose credentials \
were refused (HTTP 401/403) is stopped: its deliveries say so and wait until the config is \
fixed and serve restarted. See README, \"Channels\"."
    )]
    Deliveries(DeliveriesArgs),
    /// Who may write to the bots directly under `dmPolicy: "pairing"`: the codes waiting
    /// and the senders approved; `pairing approve CHANNEL CODE` lets a sender in.
    #[command(
        subcommand,
        after_help = "Examples:\n  switchboard pairing list\n  switchboard pairing list telegram --json\n  \
switchboard pairing approve telegram K7MQ2ZXA\n\n\
A sender a channel does not know (not in its allowFrom) gets a code of 8 letters instead of an \
answer; it can be approved for an hour. At most 3 codes wait per channel: more strangers get no \
answer until one is approved or expires. Works over --connect too. See README, \"Channels\"."
    )]
    Pairing(PairingCommand),
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
    #[command(
        subcommand,
        after_help = "Examples:\n  switchboard config init\n  switchboard config check ./config.json5"
    )]
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
    /// The sources commands and the console attach to: the local folder and each gateway,
    /// with its link state, server version and what it does not expose.
    #[command(
        long_about = "List the sources the console and the read commands attach to: the local \
state folder (named by the config's localSource, default \"local\"; left out with --no-local) \
and each gateway named with --connect NAME=URL or in the config's `gateways` section. Every \
gateway is dialled at once, each waited for at most 5 s, and reported as it is: connected (with \
its server's version and round trip), refused (a bad token, pairing: it will not be retried), \
unreachable (with the reason), or still connecting. The exit code is 0 whatever their states.",
        after_help = "Examples:\n  switchboard gateways\n  \
switchboard --connect home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789 \
gateways   # tokens: --token NAME=TOKEN or $SWITCHBOARD_TOKEN_<NAME>\n  switchboard gateways --json | jq '.[] | select(.state != \"connected\")'\n\n\
Config (<config dir>/switchboard/config.json5):\n  localSource: \"home\",\n  gateways: [\n    \
{ name: \"team\", url: \"wss://team.example.com:18789\", tokenFile: \"team.token\" },\n    \
{ name: \"oc\", url: \"ws://127.0.0.1:18790\", tokenEnv: \"OPENCLAW_GATEWAY_TOKEN\" },\n  ],"
    )]
    Gateways {
        /// Print JSON rows (`name`, `kind`, `target`, `state`, `message`, `server`,
        /// `protocol`, `rttMs`, `unavailable`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Copy the state folder's database to one file, consistent while it is in use.
    #[command(
        long_about = "Copy the state folder's database (every session, transcript, run and \
exchange) to FILE with SQLite's online backup API: one consistent snapshot, taken while a \
gateway or a console keeps using the folder (they are not paused). The copy is written beside \
FILE first, checked (PRAGMA quick_check, sessions counted) and synced, then renamed to FILE, so \
FILE is either a whole backup or not there. To restore: stop what uses the folder, then copy \
FILE to <state>/switchboard.db (and remove any switchboard.db-wal beside it).",
        after_help = "Examples:\n  switchboard backup --out /var/backups/switchboard-$(date +%F).db\n  \
switchboard --state-dir /srv/switchboard backup --out nightly.db --force"
    )]
    Backup {
        /// Where the copy goes (refused if it exists, unless --force).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// The state folder's store: check it.
    #[command(
        subcommand,
        after_help = "Examples:\n  switchboard store check\n  switchboard store check --json | jq .ok"
    )]
    Store(StoreCommand),
    /// Run the engine headless behind a WebSocket gateway (OpenClaw's protocol v4).
    #[command(
        long_about = "Run the engine without a console, behind a WebSocket gateway speaking \
OpenClaw's gateway protocol v4 (connect.challenge, connect with the gateway token, hello-ok; \
methods health, sessions.list, chat.history, chat.send, tools.invoke). The token is config \
gateway.auth.token, else $SWITCHBOARD_GATEWAY_TOKEN, else one generated into \
<state>/gateway-token (created 0600; a token file others may read, or a symlink there, is \
refused); it is never printed. While it runs, its address is recorded in <state>/gateways/ so \
Switchboard clients on this machine offer that token only to it. It also sends the outbox's \
deliveries through the channels the config enables (channels.webhook.<name>; it prints \
\"channels up: …\"), and accepts webhook messages at POST /hooks/<name> with \
\"Authorization: Bearer <the hook's secret>\" on the same port. Chat channels that bring \
messages in start beside it: Telegram's poller (channels.telegram) and Discord's gateway \
connection (channels.discord; it prints \"discord channel: gateway via …\"); across the nodes \
of one PostgreSQL database one node polls or holds the gateway per bot. SIGINT or SIGTERM stops \
accepting, closes the connections, records the deliveries in flight, lets running work finish \
(up to 30 s) and exits 0.",
        after_help = "Examples:\n  switchboard serve\n  switchboard serve --bind 127.0.0.1:0   # any free port; the address is printed\n  \
SWITCHBOARD_GATEWAY_TOKEN=$(cat ~/.gw-token) switchboard serve --bind 127.0.0.1:18790\n  \
switchboard serve --bind 0.0.0.0:18789 --tls-cert fullchain.pem --tls-key privkey.pem   # wss://\n  \
switchboard serve --demo   # demo agents talking; attach a console with the line it prints"
    )]
    Serve(ServeArgs),
}

/// `sessions patch --agent-sends`: the narrower stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentSends {
    /// Agent-to-agent sends into the session are refused.
    Off,
    /// They follow the session's send policy again.
    Inherit,
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
          default_value_t = switchboard_server::DEFAULT_MAX_PAYLOAD as u64,
          value_parser = clap::value_parser!(u64).range(
              switchboard_protocol::MIN_MAX_PAYLOAD as u64
                  ..=switchboard_protocol::MAX_PAYLOAD_CEILING as u64))]
    pub max_payload: u64,
    /// Connections open at once; past it new ones are turned away (HTTP 503) until one
    /// closes. Lowered to fit the process's descriptor limit (`ulimit -n`) if needed.
    #[arg(long, value_name = "N", default_value_t = switchboard_server::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// How far one client may fall behind, in bytes of frames queued for it, before it is
    /// disconnected as lagged (hello-ok's policy.maxBufferedBytes).
    #[arg(long, value_name = "BYTES", default_value_t = switchboard_server::DEFAULT_MAX_BUFFERED_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_buffered_bytes: usize,
    /// Bytes of frames queued for all clients together; past it, the clients furthest
    /// behind are disconnected as lagged.
    #[arg(long, value_name = "BYTES", default_value_t = switchboard_server::DEFAULT_MAX_QUEUED_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_queued_bytes: usize,
    /// Serve the demo instead: its agents on a fresh temporary state (removed at exit), talking
    /// as in `switchboard demo`, so a console attached to the gateway has traffic to show.
    /// Ignores --config and the state folder.
    #[arg(long)]
    pub demo: bool,
    /// With --demo: milliseconds between two demo messages (200 to 600000).
    #[arg(long, default_value_t = 1500, value_name = "MS", requires = "demo",
          value_parser = clap::value_parser!(u64).range(200..=600_000))]
    pub demo_pace_ms: u64,
    /// Answer `GET /metrics` (Prometheus' text format) on the gateway's port. Off by default:
    /// anyone who reaches the port could read it.
    #[arg(long)]
    pub metrics: bool,
    /// Answer `/metrics`, `/healthz` and `/readyz` on a port of their own (e.g.
    /// 127.0.0.1:9464), for a scraper that should not reach the gateway.
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind: Option<String>,
}

/// `tool`'s TOOL help: every tool the engine has, from the engine's own list.
fn tool_names_help() -> String {
    format!(
        "The tool to run: {}",
        switchboard_engine::TOOL_NAMES.join(", ")
    )
}

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// The tool to run (one of the engine's: every name is listed here).
    #[arg(value_name = "TOOL", help = tool_names_help())]
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
    /// The channel it arrived on (telegram, discord, webchat, …). On an OpenClaw gateway
    /// (--connect) a channel other than webchat goes by its `agent` method (recorded as arrived
    /// there; nothing is sent out).
    #[arg(long)]
    pub channel: Option<String>,
    /// The chat's type. Refused on an OpenClaw gateway, which cannot record it.
    #[arg(long, value_enum)]
    pub chat_type: Option<ChatTypeArg>,
    /// A label for the chat (e.g. a group's name). Refused on an OpenClaw gateway, which
    /// cannot record it.
    #[arg(long)]
    pub display_name: Option<String>,
    /// Who sent it (a user or chat id on that channel). Refused on an OpenClaw gateway,
    /// which cannot record it.
    #[arg(long)]
    pub sender: Option<String>,
    /// The sender is the owner (needed for owner-only commands such as /send).
    #[arg(long)]
    pub owner: bool,
    /// Print only the reply, not the progress of the exchanges it sets off.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the outcome as JSON on stdout (`key`, `runId`, `status`, `reply`, `error`, and
    /// `endInferred`: on an OpenClaw gateway, why the end of what it set off was taken from
    /// silence, since OpenClaw records no exchange's end; null when recorded).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, newest activity first.
    #[command(
        after_help = "Examples:\n  switchboard sessions list\n  switchboard sessions list --kind group --kind cron --active 60\n  switchboard sessions list --archived\n  switchboard sessions list --json | jq '.[].key'\n  \
switchboard --connect team=wss://team.example.com:18789 sessions list --json | jq '.[] | [.source, .key]'\n\n\
With several sources (the local folder and named gateways) the table's first column is SOURCE \
and each --json row has \"source\"; its \"key\" stays SOURCE/KEY, as every command takes it. A \
source that cannot attach within 5 s is named on stderr and left out."
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
    #[command(
        after_help = "Examples:\n  switchboard sessions show agent:main:main --messages 20\n  \
switchboard --connect home=ws://127.0.0.1:18789 --connect team=wss://team.example.com:18789 \
sessions show team/agent:main:main   # the session on team\n\n\
With several sources, KEY is SOURCE/KEY, or a bare key only one source has; the output starts \
with its source (--json: \"source\")."
    )]
    Show {
        key: String,
        /// How many recent messages to print.
        #[arg(long, default_value_t = 10)]
        messages: usize,
        /// Include tool results.
        #[arg(long)]
        tools: bool,
        /// Print the session's entry with `sendPolicyEffective` and its `messages` as JSON.
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
switchboard sessions patch agent:ops:slack:group:incidents --agent-sends off   # agents stop, people still hear it\n  \
switchboard sessions show agent:main:discord:group:42    # shows the effective policy and why"
    )]
    Patch {
        key: String,
        /// The session's send-policy override: allow (or on), deny (or off), or inherit to
        /// remove it and follow session.sendPolicy.
        #[arg(long, value_name = "allow|deny|inherit", value_parser = str::parse::<PolicySetting>)]
        send_policy: Option<PolicySetting>,
        /// Stop only agent-to-agent sends into the session (off), leaving its replies and
        /// announces to its channel alone, or lift that stop (inherit: sends follow the send
        /// policy). Not on an OpenClaw gateway.
        #[arg(long, value_name = "off|inherit")]
        agent_sends: Option<AgentSends>,
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
pub enum StoreCommand {
    /// Check the store: integrity, schema, orphan rows, seq gaps, counters, work left running.
    #[command(
        long_about = "Check the store without changing it (safe while a gateway serves it): the \
state folder's SQLite database, or the PostgreSQL database --store (or $SWITCHBOARD_STORE, or \
the config's storage.url) names. Reports the schema version against this build's, transcript \
lines that belong to no session (an import cut short leaves them), transcripts whose lines are \
not numbered 0, 1, 2, … without a gap, the per-kind session counters against the sessions, rows \
kept from deleted sessions, and the runs, exchanges and sub-agents recorded as still running \
(the next start recovers them unless a process is running them now); on SQLite also its \
integrity check. Exits 1 when the store is damaged or holds orphan lines, gaps or drifted \
counters.",
        after_help = "Examples:\n  switchboard store check\n  switchboard --state-dir /srv/switchboard store check --json\n  switchboard --store postgres://me@db.example.com/switchboard store check"
    )]
    Check {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy everything the engine keeps from one store to another, resumably, then verify.
    #[command(
        long_about = "Copy everything the engine keeps (sessions with their entries exactly as \
stored, transcripts line for line, runs, exchanges, sub-agents, the outbox, import marks and \
unexpired idempotency keys) from one store to another: a state folder (SQLite) or a \
postgres:// URL, either way. Stop what writes to the source first (a gateway, a console).\n\n\
Each session lands in the destination with everything it owns in one transaction, so an \
interrupted copy (Ctrl-C, a killed process, the destination unreachable for a while) never \
leaves half a session; run the same command again and it goes on where it stopped. A \
destination that holds other data is refused unless --force.\n\n\
At the end both sides are verified: rows counted per table, and every session compared \
(its row, and a SHA-256 over its entry and every transcript line in seq order). Any \
difference is named (session key and what differs) and the command exits 1. Progress goes \
to stderr.",
        after_help = "Examples:\n  switchboard store copy --from ~/.switchboard --to postgres://switchboard@db.internal/switchboard\n  \
switchboard store copy --from postgres://switchboard@db.internal/switchboard --to /srv/switchboard-local\n  \
switchboard store copy --from ./state --to postgres://localhost/sb --json | jq .ok"
    )]
    Copy {
        /// The store to copy from: a state folder, or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long, value_name = "FOLDER|URL")]
        from: String,
        /// The store to copy to (made when missing): a state folder, or a postgres:// URL.
        #[arg(long, value_name = "FOLDER|URL")]
        to: String,
        /// Copy into a destination that already holds other data: its sessions are kept as
        /// they are (never overwritten or deleted); a source session under a key it has is not
        /// copied, and the verification names it.
        #[arg(long)]
        force: bool,
        /// Print the report as JSON (no progress on stderr).
        #[arg(long)]
        json: bool,
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

/// `exchanges --status`: the statuses an exchange has (`ExchangeStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExchangeStatusArg {
    /// Its reply-back loop or announce is still going.
    Running,
    /// It ended (however: see the ENDED column).
    Done,
    /// The engine stopped during it.
    Interrupted,
    /// A send policy or the chain limit refused the send.
    Refused,
}

impl ExchangeStatusArg {
    pub fn status(self) -> switchboard_types::api::ExchangeStatus {
        use switchboard_types::api::ExchangeStatus;
        match self {
            ExchangeStatusArg::Running => ExchangeStatus::Running,
            ExchangeStatusArg::Done => ExchangeStatus::Done,
            ExchangeStatusArg::Interrupted => ExchangeStatus::Interrupted,
            ExchangeStatusArg::Refused => ExchangeStatus::Refused,
        }
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DeliveriesArgs {
    #[command(subcommand)]
    pub retry: Option<DeliveriesCommand>,
    /// Only deliveries that failed (given up after the last retry, or refused).
    #[arg(long)]
    pub failed: bool,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub limit: u32,
    /// Print JSON rows instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// Send a failed (or retrying) delivery again now, its attempts counted afresh; the
    /// running `serve` picks it up.
    #[command(after_help = "Example:\n  switchboard deliveries retry 42")]
    Retry {
        /// The delivery's id (the ID column of `switchboard deliveries`).
        id: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// The codes waiting for approval and the senders approved, by channel.
    #[command(
        after_help = "Examples:\n  switchboard pairing list\n  switchboard pairing list discord --json"
    )]
    List {
        /// Only this channel's (telegram, discord).
        channel: Option<String>,
        /// Print JSON rows instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Let the sender who was given CODE on CHANNEL write to the bot.
    #[command(after_help = "Example:\n  switchboard pairing approve telegram K7MQ2ZXA")]
    Approve {
        /// The channel the code came from (telegram, discord).
        channel: String,
        /// The code the sender was told (case does not matter).
        code: String,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ExchangesArgs {
    #[command(subcommand)]
    pub show: Option<ExchangesCommand>,
    /// Only exchanges with this session (key or session id) as requester or target.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Only exchanges this session started (the requester).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Only exchanges sent to this session (the target).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Only exchanges with this status; repeatable.
    #[arg(long, value_enum, value_name = "STATUS")]
    pub status: Vec<ExchangeStatusArg>,
    /// Only exchanges started since then: an age (30s, 10m, 2h, 1day, 1h 30m) or a time
    /// (RFC 3339: 2026-11-27T09:00:00Z, 2026-11-27 09:00:00+01:00).
    #[arg(long, value_name = "AGE|TIME", value_parser = parse_since)]
    pub since: Option<Since>,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
    /// Print the API's JSON page (`exchanges`, `more`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--since`: a moment, in ms since the epoch, or an age taken back from now when the
/// command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    Ago(std::time::Duration),
    At(i64),
}

impl Since {
    /// The moment in ms since the epoch, an age counted back from `now_ms`.
    pub fn at(self, now_ms: i64) -> i64 {
        match self {
            Since::At(ms) => ms,
            Since::Ago(d) => {
                now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }
        }
    }
}

fn parse_since(raw: &str) -> Result<Since, String> {
    let raw = raw.trim();
    if let Ok(d) = humantime::parse_duration(raw) {
        return Ok(Since::Ago(d));
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(Since::At(t.timestamp_millis()));
    }
    if let Ok(t) = chrono::DateTime::parse_from_str(raw, "%Y-%m-%d %H:%M:%S%:z") {
        return Ok(Since::At(t.timestamp_millis()));
    }
    Err(format!(
        "{raw:?} is neither an age (30s, 10m, 2h, 1day) nor an RFC 3339 time \
(2026-11-27T09:00:00Z)"
    ))
}

#[derive(Debug, Subcommand)]
pub enum ExchangesCommand {
    /// One exchange in full: every turn, how it ended, the announce.
    #[command(
        after_help = "Examples:\n  switchboard exchanges show 0193a4c2-5b7e-7d01-9c3e-2f0a1b2c3d4e\n  \
switchboard exchanges show 0193a4c2      # a unique start of the id will do\n  \
switchboard exchanges show 0193a4c2 --json | jq '.turns[].text'"
    )]
    Show {
        /// The exchange's id (the ID column of `switchboard exchanges`), or a start of it that
        /// only one exchange has.
        id: String,
        /// Print the API's JSON (`summary`, `turns`, `announce`) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// What a command does with the state folder. It decides whether starting the log may
/// create the folder: only a command that writes there makes one; the others log into an
/// existing folder or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateUse {
    /// Records sessions, runs or the device identity of `--connect`: makes the folder.
    Writes,
    /// Reads what is there; a missing folder is an error ("no state folder at …").
    Reads,
    /// Does not touch the state (`keys`, `config`).
    Ignores,
}

/// Both stdin and stdout are a terminal: the console can run (else no command prints an
/// overview).
pub(crate) fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}

impl Cli {
    pub fn state_use(&self) -> StateUse {
        // Over --connect the state folder holds the device identity the gateway knows
        // this machine by, created on first use.
        if !self.connect.is_empty() {
            return StateUse::Writes;
        }
        match &self.command {
            // The console writes; off a terminal it prints an overview, which only reads.
            None if !on_terminal() => StateUse::Reads,
            None
            | Some(Command::Demo { .. })
            | Some(Command::Tool(_))
            | Some(Command::Inject(_))
            | Some(Command::ImportOpenclaw { .. })
            | Some(Command::Serve(_)) => StateUse::Writes,
            Some(Command::Sessions(cmd)) => match cmd {
                SessionsCommand::List { .. }
                | SessionsCommand::Show { .. }
                | SessionsCommand::Export { .. } => StateUse::Reads,
                SessionsCommand::Patch { .. } | SessionsCommand::Abort { .. } => StateUse::Writes,
            },
            Some(Command::Deliveries(a)) if a.retry.is_some() => StateUse::Writes,
            Some(Command::Deliveries(_)) => StateUse::Reads,
            Some(Command::Pairing(PairingCommand::Approve { .. })) => StateUse::Writes,
            Some(Command::Pairing(PairingCommand::List { .. })) => StateUse::Reads,
            Some(Command::Exchanges(_))
            | Some(Command::Gateways { .. })
            | Some(Command::Backup { .. })
            | Some(Command::Store(_)) => StateUse::Reads,
            Some(Command::Config(_)) | Some(Command::Keys { .. }) => StateUse::Ignores,
        }
    }
}

impl Cli {
    /// The command line as parsed and as `--help` shows it: clap's definition, with the
    /// global options a command has no use for hidden from its help (`NOT_APPLICABLE`; they
    /// stay global, so `switchboard --connect URL sessions list` and `sessions list --connect
    /// URL` both work, and a local-only command refuses `--connect`).
    pub fn command_line() -> clap::Command {
        let cmd = <Cli as clap::CommandFactory>::command();
        // A hidden copy of each option in the command that has no use for it: clap
        // propagates a global option only where no option of that id exists yet (and on to
        // the command's own subcommands, hidden), and values still reach the top level.
        let globals: Vec<clap::Arg> = cmd.get_arguments().cloned().collect();
        NOT_APPLICABLE.iter().fold(cmd, |cmd, (path, ids)| {
            let hidden: Vec<clap::Arg> = globals
                .iter()
                .filter(|a| ids.contains(&a.get_id().as_str()))
                .map(|a| a.clone().hide(true))
                .collect();
            hide_options(cmd, &path.split(' ').collect::<Vec<_>>(), &hidden)
        })
    }

    /// The arguments of this process, parsed (or clap's message and exit on bad input).
    pub fn parse_args() -> Cli {
        use clap::FromArgMatches;
        let matches = Self::command_line().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

fn hide_options(cmd: clap::Command, path: &[&str], hidden: &[clap::Arg]) -> clap::Command {
    match path {
        [] => cmd.args(hidden.iter().cloned()),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| hide_options(sub, rest, hidden)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_ages_and_rfc_3339_times() {
        let now = 1_800_000_000_000;
        let at = |raw: &str| parse_since(raw).map(|s| s.at(now));
        assert_eq!(at("10m"), Ok(now - 600_000));
        assert_eq!(at("2h 30m"), Ok(now - 9_000_000));
        assert_eq!(at("1day"), Ok(now - 86_400_000));
        assert_eq!(at("2026-11-27T09:00:00Z"), Ok(1_795_770_000_000));
        assert_eq!(at("2026-11-27 10:00:00+01:00"), Ok(1_795_770_000_000));
        // An age past the epoch saturates; it never wraps.
        assert!(at("100000000years").is_ok_and(|t| t < 0));
        let err = parse_since("yesterday-ish").expect_err("not a time");
        assert!(err.contains("RFC 3339"), "{err}");
    }
}
