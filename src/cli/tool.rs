//! `switchboard tool`: one session tool called as an agent would, its JSON result printed.

use std::io::Read;

use anyhow::{Context, Result};
use serde_json::Value;

use switchboard_types::api::{ApiError, KeyPurpose, ToolCall};

use super::args::{Cli, ToolArgs};
use super::print::print_json;
use super::waiting::Waiting;
use super::{api_error, usage};

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

pub(crate) async fn tool(cli: &Cli, args: &ToolArgs) -> Result<()> {
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
