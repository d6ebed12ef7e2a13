//! `switchboard pairing`: the direct-message pairings of the channels (`dmPolicy:
//! "pairing"`): `list` the codes waiting and the senders approved, `approve CHANNEL CODE` to
//! let a sender in. Through the API, so `--connect` works on a gateway's.

use std::sync::Arc;

use anyhow::Result;
use switchboard_types::api::SessionsApi;
use switchboard_types::api::pairing::Pairing;
use switchboard_types::api::time::now_ms;
use switchboard_types::text_safety::safe_line;

use super::args::{Cli, PairingCommand};
use super::print::{local_time, print_columns, print_json};
use super::{EXIT_USAGE, ExitError, api_error};

pub async fn run(cli: &Cli, command: &PairingCommand) -> Result<()> {
    match command {
        PairingCommand::List { channel, json } => list(cli, channel.clone(), *json).await,
        PairingCommand::Approve { channel, code } => approve(cli, channel, code).await,
    }
}

/// Where a pairing stands, in words.
fn state(p: &Pairing, now: i64) -> String {
    match p.approved_at {
        Some(at) => format!("approved {}", local_time(at)),
        None => format!(
            "waiting (expires in {} min)",
            (p.expires_at - now).max(0).saturating_add(59_999) / 60_000
        ),
    }
}

async fn list(cli: &Cli, channel: Option<String>, json: bool) -> Result<()> {
    let api = cli.reading_api().await?;
    let rows = api.pairings(channel.clone()).await.map_err(api_error)?;
    if json {
        return print_json(&serde_json::to_value(&rows)?);
    }
    if rows.is_empty() {
        match channel {
            Some(c) => eprintln!("no pairings on {}", safe_line(&c)),
            None => eprintln!("no pairings"),
        }
        return Ok(());
    }
    let now = now_ms();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|p| {
            vec![
                safe_line(&p.channel).into_owned(),
                safe_line(&p.sender).into_owned(),
                safe_line(p.display_name.as_deref().unwrap_or("-")).into_owned(),
                p.code.clone(),
                state(p, now),
            ]
        })
        .collect();
    print_columns(&["CHANNEL", "SENDER", "NAME", "CODE", "STATE"], &table, 40);
    Ok(())
}

async fn approve(cli: &Cli, channel: &str, code: &str) -> Result<()> {
    // Here: this folder's engine, not started (the running `serve` reads the approval from
    // the store at the sender's next message); else the gateway's.
    let api: Arc<dyn SessionsApi> = if cli.is_local()? {
        Arc::new(cli.open_engine()?)
    } else {
        cli.reading_api().await?
    };
    match api
        .approve_pairing(channel, code)
        .await
        .map_err(api_error)?
    {
        Some(p) => {
            let name = p
                .display_name
                .as_deref()
                .map(|n| format!(" ({})", safe_line(n)))
                .unwrap_or_default();
            println!(
                "approved {} sender {}{name}: their next message is answered",
                safe_line(&p.channel),
                safe_line(&p.sender)
            );
            Ok(())
        }
        None => Err(ExitError {
            code: EXIT_USAGE,
            message: format!(
                "no code {} waits on {}: it may be mistyped, expired (codes last an hour) or \
                 approved already; `switchboard pairing list` shows the ones waiting",
                safe_line(code),
                safe_line(channel)
            ),
        }
        .into()),
    }
}
