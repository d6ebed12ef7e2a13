//! `switchboard deliveries`: what was handed to channels and how each delivery stands
//! (queued, sending, sent with the channel's message id, retrying with the next attempt,
//! failed with the reason), newest first; `deliveries retry ID` makes a failed one due now.
//! Read from the local store (the gateway protocol has no outbox method yet).

use anyhow::{Result, anyhow};
use serde_json::json;
use switchboard_store::{OutboxQuery, OutboxRow, OutboxStatus};
use switchboard_types::api::time::now_ms;
use switchboard_types::text_safety::safe_line;

use super::args::{Cli, DeliveriesArgs, DeliveriesCommand};
use super::print::{local_time, print_columns, print_json};
use super::{EXIT_USAGE, ExitError};

pub async fn run(cli: &Cli, args: &DeliveriesArgs) -> Result<()> {
    match &args.retry {
        Some(DeliveriesCommand::Retry { id }) => retry(cli, *id).await,
        None => list(cli, args).await,
    }
}

/// The status column: the word, and when a retry is due or why it failed.
fn state(row: &OutboxRow, now: i64) -> String {
    match row.status {
        OutboxStatus::Retrying => match row.next_at {
            Some(at) if at > now => {
                format!("retrying (next attempt in {} s)", (at - now + 999) / 1000)
            }
            _ => "retrying (due now)".to_string(),
        },
        OutboxStatus::Sent => match &row.message_id {
            Some(id) => format!("sent ({id})"),
            None => "sent".to_string(),
        },
        s => s.as_str().to_string(),
    }
}

/// The row as stored (camelCase fields, the status as its word).
fn json_row(row: &OutboxRow) -> serde_json::Value {
    // Plain strings and numbers: it always serialises.
    serde_json::to_value(row).unwrap_or_else(|_| json!({}))
}

async fn list(cli: &Cli, args: &DeliveriesArgs) -> Result<()> {
    let engine = cli.open_engine_for_reading()?;
    let rows = engine
        .backend()
        .list_outbox(OutboxQuery {
            failed_only: args.failed,
            limit: args.limit,
        })
        .await?;
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
    let now = now_ms();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                local_time(r.created_at),
                safe_line(&format!("{}:{}", r.channel, r.to)).into_owned(),
                state(r, now),
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
    let engine = cli.open_engine()?;
    let Some(row) = engine.backend().retry_outbox(id, now_ms()).await? else {
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
            engine.delivery_updated(&row);
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
