//! `switchboard exchanges`: agent-to-agent exchanges from the command line, newest first
//! (all, or one session's), and `exchanges show ID` with every turn, how it ended and the
//! announce; `--json` prints the API's own shapes.

use anyhow::{Result, anyhow};
use switchboard_types::api::{
    AnnounceOutcome, ExchangeEnd, ExchangeKind, ExchangeSummary, ExchangesQuery, SessionsApi,
};
use switchboard_types::text_safety::safe_line;

use super::args::{Cli, ExchangesArgs, ExchangesCommand};
use super::print::print_json;
use super::{api_error, existing_key};

fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "-".into())
}

/// What a gateway's record cannot say (an exchange rebuilt from OpenClaw's transcripts).
const NOT_RECORDED: &str = "not recorded by OpenClaw";

/// How an exchange ended, in one word or two.
fn how(e: &ExchangeSummary) -> String {
    match e.kind {
        ExchangeKind::Refused => "refused by policy".into(),
        ExchangeKind::Chain => "chain limit".into(),
        ExchangeKind::Send => match e.ended_reason {
            Some(ExchangeEnd::NotRecorded) => NOT_RECORDED,
            Some(r) => r.as_str(),
            None => e.status.as_str(),
        }
        .to_string(),
    }
}

/// An announce's outcome in a word (or what the record cannot say).
fn announced(outcome: Option<AnnounceOutcome>) -> &'static str {
    match outcome {
        None => "-",
        Some(AnnounceOutcome::NotRecorded) => NOT_RECORDED,
        Some(o) => o.as_str(),
    }
}

pub async fn run(cli: &Cli, args: &ExchangesArgs) -> Result<()> {
    let api = cli.reading_api().await?;
    match &args.show {
        Some(ExchangesCommand::Show { id, json }) => show(api.as_ref(), id, *json).await,
        None => list(api.as_ref(), args).await,
    }
}

async fn list(api: &dyn SessionsApi, args: &ExchangesArgs) -> Result<()> {
    let key = match &args.session {
        Some(raw) => Some(existing_key(api, raw).await?),
        None => None,
    };
    let page = api
        .exchanges(ExchangesQuery {
            key,
            before: None,
            since: None,
            limit: args.limit as usize,
        })
        .await
        .map_err(api_error)?;
    if args.json {
        return print_json(&serde_json::to_value(&page)?);
    }
    if page.exchanges.is_empty() {
        println!("No agent-to-agent exchanges yet.");
        return Ok(());
    }
    for e in &page.exchanges {
        println!(
            "{}  {} → {}  {} round(s)  {}  announce {}  {}",
            clock(e.started_at),
            safe_line(&e.requester),
            safe_line(&e.target),
            e.rounds,
            safe_line(&how(e)),
            announced(e.announce),
            safe_line(&e.id)
        );
    }
    if page.more {
        println!("(more: raise --limit)");
    }
    Ok(())
}

async fn show(api: &dyn SessionsApi, id: &str, json: bool) -> Result<()> {
    let Some(d) = api.exchange(id).await.map_err(api_error)? else {
        return Err(anyhow!(
            "no exchange {} (see `switchboard exchanges`)",
            safe_line(id)
        ));
    };
    if json {
        return print_json(&serde_json::to_value(&d)?);
    }
    let s = &d.summary;
    println!("{} → {}", safe_line(&s.requester), safe_line(&s.target));
    println!(
        "{} · {} · {} round(s) · started {}",
        s.kind,
        s.status,
        s.rounds,
        clock(s.started_at)
    );
    println!("Message: {}", safe_line(&s.message));
    for t in &d.turns {
        let took = t
            .ended_at
            .map(|e| format!(" · {} ms", e - t.started_at))
            .unwrap_or_default();
        let tokens = match (t.tokens_in, t.tokens_out) {
            (Some(i), Some(o)) => format!(" · tokens {i}/{o}"),
            _ => String::new(),
        };
        println!(
            "Round {} · {} → {} · {}{took}{tokens} · {}",
            t.round,
            safe_line(&t.speaker),
            safe_line(&t.listener),
            clock(t.started_at),
            t.status
        );
        let text = if t.text.is_empty() {
            t.error.clone().unwrap_or_default()
        } else {
            t.text.clone()
        };
        for l in text.lines() {
            println!("  {}", safe_line(l));
        }
    }
    println!(
        "Ended: {}{}",
        safe_line(&how(s)),
        if s.detail.is_empty() {
            String::new()
        } else {
            format!(" · {}", safe_line(&s.detail))
        }
    );
    if let Some(a) = &d.announce {
        println!(
            "Announce: {} · {}",
            announced(Some(a.outcome)),
            safe_line(&a.detail)
        );
        if let Some(t) = &a.text {
            for l in t.lines() {
                println!("  {}", safe_line(l));
            }
        }
    }
    Ok(())
}
