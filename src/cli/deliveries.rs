//! `switchboard deliveries`: what was handed to channels and how each delivery stands
//! (queued, sending, sent with the channel's message id, retrying with the next attempt,
//! failed with the reason), newest first; `deliveries retry ID` makes a failed one due now.
//! Through the API, so `--connect` lists and retries a gateway's deliveries.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use serde_json::json;
use switchboard_types::api::{OutboxQuery, OutboxRow, OutboxStatus, SessionsApi};
use switchboard_types::text_safety::safe_line;

use super::args::{Cli, DeliveriesArgs, DeliveriesCommand};
use super::print::{local_time, print_columns, print_json};
use super::{EXIT_USAGE, ExitError, api_error};

pub async fn run(cli: &Cli, args: &DeliveriesArgs) -> Result<()> {
    match &args.retry {
        Some(DeliveriesCommand::Retry { id }) => retry(cli, *id).await,
        None => list(cli, args).await,
    }
}

/// The row as stored (camelCase fields, the status as its word).
fn json_row(row: &OutboxRow) -> serde_json::Value {
    // Plain strings and numbers: it always serialises.
    serde_json::to_value(row).unwrap_or_else(|_| json!({}))
}

async fn list(cli: &Cli, args: &DeliveriesArgs) -> Result<()> {
    let api = cli.reading_api().await?;
    let rows = api
        .deliveries(OutboxQuery {
            failed_only: args.failed,
            limit: args.limit,
            ..OutboxQuery::default()
        })
        .await
        .map_err(api_error)?;
    if args.json {
        return print_json(&serde_json::Value::Array(
            rows.iter().map(json_row).collect(),
        ));
    }
    if rows.is_empty() {
        let what = if args.failed {
            "failed deliveries"
        } else {
            "deliveries"
        };
        eprintln!("no {what}");
        return Ok(());
    }
    let now = switchboard_types::api::time::now_ms();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                local_time(r.created_at),
                safe_line(&format!("{}:{}", r.channel, r.to)).into_owned(),
                // The reason has its own column.
                match r.status {
                    OutboxStatus::Failed => "failed".to_string(),
                    _ => r.state_words(now),
                },
                r.attempt.to_string(),
                safe_line(r.last_error.as_deref().unwrap_or("-")).into_owned(),
                safe_line(&r.session_key).into_owned(),
            ]
        })
        .collect();
    print_columns(
        &[
            "ID",
            "CREATED",
            "CHANNEL",
            "STATUS",
            "ATTEMPTS",
            "LAST ERROR",
            "SESSION",
        ],
        &table,
        60,
    );
    Ok(())
}

async fn retry(cli: &Cli, id: i64) -> Result<()> {
    // Here: this folder's engine, not started (the running `serve` drains it); else the
    // gateway's.
    let api: Arc<dyn SessionsApi> = if cli.is_local()? {
        Arc::new(cli.open_engine()?)
    } else {
        cli.reading_api().await?
    };
    let Some(row) = api.retry_delivery(id).await.map_err(api_error)? else {
        return Err(ExitError {
            code: EXIT_USAGE,
            message: format!(
                "no delivery {id}: `switchboard deliveries` lists them with their ids"
            ),
        }
        .into());
    };
    match row.status {
        OutboxStatus::Queued => {
            println!(
                "delivery {id} is queued again; the running `switchboard serve` sends it \
                 through {}:{}",
                row.channel, row.to
            );
            Ok(())
        }
        other => Err(anyhow!(
            "delivery {id} is {other}, not failed or retrying: nothing to retry"
        )),
    }
}
