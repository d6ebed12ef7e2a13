//! `switchboard inject`: a message into a session as if from outside, its agent's reply printed.

use anyhow::{Result, anyhow};

use switchboard_types::api::{RunStatus, SendRequest, Sender};
use switchboard_types::text_safety::{safe_line, safe_text};

use serde_json::json;

use super::args::{ChatTypeArg, Cli, InjectArgs};
use super::print::{print_json, shown_key};
use super::waiting::Waiting;
use super::{api_error, usage};

pub(crate) async fn inject(cli: &Cli, args: &InjectArgs) -> Result<()> {
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
        shown_key(&receipt.key, &receipt.display_key),
    );
    let waiting = Waiting::new();
    if let Some(reply) = &receipt.command_reply {
        if args.json {
            print_json(&json!({ "key": receipt.key, "commandReply": reply }))?;
        } else {
            println!("{}", safe_text(reply));
        }
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
    // An OpenClaw gateway does not record every end: said when it was taken from silence.
    let inferred = api.work_end_inferred(receipt.work);
    if let Some(why) = &inferred {
        eprintln!("end inferred: {}", safe_line(why));
    }
    attached.drain(&waiting).await;
    let _ = stop.send(());
    let _ = printer.await;
    if args.json {
        print_json(&json!({
            "key": receipt.key,
            "runId": receipt.run_id,
            "status": reply.as_ref().map(|o| o.status.as_str()),
            "reply": reply.as_ref().map(|o| o.reply.as_str()),
            "error": reply.as_ref().and_then(|o| o.error.as_deref()),
            "endInferred": inferred,
        }))?;
        return match reply {
            Some(o) if o.status != RunStatus::Ok => {
                Err(anyhow!("the agent's run ended {}", o.status))
            }
            _ => Ok(()),
        };
    }
    match reply {
        Some(o) if o.status == RunStatus::Ok => {
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
