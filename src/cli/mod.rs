//! The command line: `args` holds the clap definitions; each command group has its own
//! module (`sessions`, `exchanges`, `tool`, `inject`, `transfer`, `config`, `serve`,
//! `console`, `gateways`), `attach` what a command runs on (`sources` when it is several), `print` the output they share. Output for
//! scripts goes to stdout; every problem goes to stderr with what to do about it.

mod args;
mod attach;
mod config;
mod console;
mod deliveries;
mod exchanges;
mod gateways;
mod inject;
mod monitor;
mod pairing;
mod print;
mod serve;
mod sessions;
mod sources;
mod store;
mod tool;
mod transfer;
mod waiting;

use std::path::PathBuf;

use anyhow::{Result, anyhow};

use switchboard_types::api::{ApiError, KeyPurpose, SessionsApi};

pub use args::{Cli, Command, StateUse, StoreCommand};

/// Exit code for input the program cannot use (bad JSON, unknown tool, missing parameter).
pub const EXIT_USAGE: i32 = 2;

/// A failure that should exit with a particular code after printing its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExitError {
    pub code: i32,
    pub message: String,
}

pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    ExitError {
        code: EXIT_USAGE,
        message: message.into(),
    }
    .into()
}

/// An API error as the command line reports it: unusable input exits 2.
pub(crate) fn api_error(e: ApiError) -> anyhow::Error {
    match e {
        ApiError::BadInput(m) => usage(m),
        other => other.into(),
    }
}

/// A session named on the command line, as every other call takes it (canonical).
pub(crate) async fn existing_key(api: &dyn SessionsApi, raw: &str) -> Result<String> {
    match api.resolve_key(raw, KeyPurpose::Existing).await {
        Ok(k) => Ok(k.key),
        Err(ApiError::NotFound(m)) => Err(anyhow!("{m} (see `switchboard sessions list`)")),
        Err(e) => Err(api_error(e)),
    }
}

pub async fn run(cli: Cli, log: Option<PathBuf>) -> Result<()> {
    match &cli.command {
        None => console::console(&cli, log).await,
        Some(Command::Demo { pace_ms }) => {
            cli.local_only("demo")?;
            console::demo(&cli, *pace_ms, log).await
        }
        Some(Command::Tool(args)) => tool::tool(&cli, args).await,
        Some(Command::Inject(args)) => inject::inject(&cli, args).await,
        Some(Command::Sessions(cmd)) => sessions::sessions(&cli, cmd).await,
        Some(Command::Exchanges(args)) => exchanges::run(&cli, args).await,
        Some(Command::Deliveries(args)) => deliveries::run(&cli, args).await,
        Some(Command::Pairing(command)) => pairing::run(&cli, command).await,
        Some(Command::ImportOpenclaw { dir }) => {
            cli.local_only("import-openclaw")?;
            transfer::import(&cli, dir).await
        }
        Some(Command::Config(cmd)) => {
            cli.local_only("config")?;
            config::config_cmd(&cli, cmd)
        }
        Some(Command::Keys { markdown, defaults }) => console::keys(*markdown, *defaults),
        Some(Command::Gateways { json }) => gateways::gateways(&cli, *json).await,
        Some(Command::Store(StoreCommand::Check { json })) => {
            cli.local_only("store")?;
            store::check(&cli, *json).await
        }
        Some(Command::Store(StoreCommand::Copy {
            from,
            to,
            force,
            json,
        })) => {
            cli.local_only("store")?;
            store::copy(from, to, *force, *json).await
        }
        Some(Command::Backup { out, force }) => {
            cli.local_only("backup")?;
            transfer::backup(&cli, out, *force).await
        }
        Some(Command::Serve(args)) => {
            cli.local_only("serve")?;
            serve::serve(&cli, args, log).await
        }
    }
}
