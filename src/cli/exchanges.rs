//! `switchboard exchanges`: agent-to-agent exchanges from the command line, newest first
//! (all, or filtered by session, requester, target, status and start), with a header row
//! and notes on stderr; `exchanges show ID` (or a unique start of it) with every turn, how
//! it ended and the announce; `--json` prints the API's own shapes.

use std::io::Write;

use anyhow::{Result, anyhow};
use switchboard_types::api::time::now_ms;
use switchboard_types::api::{
    AnnounceOutcome, ExchangeDetail, ExchangeEnd, ExchangeKind, ExchangeStatus, ExchangeSummary,
    ExchangesPage, ExchangesQuery, SessionsApi, announce_line,
};
use switchboard_types::text_safety::safe_line;
use switchboard_types::words::count;

use super::args::{Cli, ExchangesArgs, ExchangesCommand};
use super::print::{local_time, print_json};
use super::{api_error, existing_key};

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
        Some(o) => o.shown(),
    }
}

pub async fn run(cli: &Cli, args: &ExchangesArgs) -> Result<()> {
    let api = cli.reading_api().await?;
    match &args.show {
        Some(ExchangesCommand::Show { id, json }) => show(api.as_ref(), id, *json).await,
        None => list(api.as_ref(), args).await,
    }
}

/// Exchanges read per request while filtering or looking up a short id.
const SCAN_PAGE: usize = 500;
/// The most exchanges a filter or a short-id lookup looks through (newest first): a bound on
/// the requests one command makes, far past what a list is read for.
const SCAN_MAX: usize = 10_000;

/// The note when a filter stopped at `SCAN_MAX` before it could tell whether more match.
fn scan_stopped() -> String {
    format!(
        "looked through the newest {SCAN_MAX} exchanges only; older ones may match: narrow \
with --session or --since"
    )
}

/// What `exchanges` keeps of a page beyond what the API filters itself (`key`, `since`).
struct Filter {
    from: Option<String>,
    to: Option<String>,
    statuses: Vec<ExchangeStatus>,
}

impl Filter {
    fn is_empty(&self) -> bool {
        self.from.is_none() && self.to.is_none() && self.statuses.is_empty()
    }

    fn keeps(&self, e: &ExchangeSummary) -> bool {
        self.from.as_deref().is_none_or(|k| e.requester == k)
            && self.to.as_deref().is_none_or(|k| e.target == k)
            && (self.statuses.is_empty() || self.statuses.contains(&e.status))
    }
}

/// The newest exchanges `query` and `filter` keep, at most `limit`, and whether more do
/// (`None`: the scan stopped at `SCAN_MAX` before it could tell).
async fn matching(
    api: &dyn SessionsApi,
    mut query: ExchangesQuery,
    filter: &Filter,
    limit: usize,
) -> Result<(Vec<ExchangeSummary>, Option<bool>)> {
    if filter.is_empty() {
        query.limit = limit;
        let page = api.exchanges(query).await.map_err(api_error)?;
        return Ok((page.exchanges, Some(page.more)));
    }
    query.limit = SCAN_PAGE;
    let mut kept = Vec::new();
    let mut scanned = 0;
    loop {
        let page = api.exchanges(query.clone()).await.map_err(api_error)?;
        scanned += page.exchanges.len();
        query.before = page.exchanges.last().map(|e| e.id.clone());
        for e in page.exchanges {
            if filter.keeps(&e) {
                // One past the limit says whether there are more.
                if kept.len() == limit {
                    return Ok((kept, Some(true)));
                }
                kept.push(e);
            }
        }
        if !page.more || query.before.is_none() {
            return Ok((kept, Some(false)));
        }
        if scanned >= SCAN_MAX {
            return Ok((kept, None));
        }
    }
}

async fn list(api: &dyn SessionsApi, args: &ExchangesArgs) -> Result<()> {
    let key_of = async |raw: &Option<String>| -> Result<Option<String>> {
        Ok(match raw {
            Some(raw) => Some(existing_key(api, raw).await?),
            None => None,
        })
    };
    let session = key_of(&args.session).await?;
    let from = key_of(&args.from).await?;
    let to = key_of(&args.to).await?;
    // The API narrows by one session at either end (`--session`, else the requester or
    // target named); the ends named are checked exactly here.
    let key = session.or_else(|| from.clone()).or_else(|| to.clone());
    let filter = Filter {
        from,
        to,
        statuses: args.status.iter().map(|s| s.status()).collect(),
    };
    let query = ExchangesQuery {
        key,
        before: None,
        since: args.since.map(|s| s.at(now_ms())),
        limit: 0,
    };
    let (exchanges, more) = matching(api, query, &filter, args.limit as usize).await?;
    if args.json {
        if more.is_none() {
            // `more: true` cannot say "not looked"; the note can.
            note(&scan_stopped());
        }
        return print_json(&serde_json::to_value(ExchangesPage {
            exchanges,
            more: more.unwrap_or(true),
        })?);
    }
    let filtered = !filter.is_empty() || args.since.is_some() || args.session.is_some();
    if exchanges.is_empty() {
        note(if filtered {
            "no agent-to-agent exchanges match"
        } else {
            "no agent-to-agent exchanges yet"
        });
    } else {
        print_table(&exchanges);
    }
    match more {
        Some(true) => note(&format!(
            "more match than these {}: raise --limit",
            count(exchanges.len(), "exchange")
        )),
        Some(false) => {}
        None => note(&scan_stopped()),
    }
    Ok(())
}

/// A note about the output (never the output itself): on stderr, so stdout stays the table.
fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "({text})");
}

fn print_table(exchanges: &[ExchangeSummary]) {
    let rows: Vec<[String; 6]> = exchanges
        .iter()
        .map(|e| {
            [
                local_time(e.started_at),
                format!("{} → {}", safe_line(&e.requester), safe_line(&e.target)),
                e.rounds.to_string(),
                safe_line(&how(e)).into_owned(),
                announced(e.announce).to_string(),
                safe_line(&e.id).into_owned(),
            ]
        })
        .collect();
    let header = ["STARTED", "FROM → TO", "ROUNDS", "ENDED", "ANNOUNCE", "ID"];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
                .min(80)
        })
        .collect();
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                out.push_str(c);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out
    };
    println!("{}", line(header));
    for r in &rows {
        println!(
            "{}",
            line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]].map(String::as_str))
        );
    }
}

/// The exchange `raw` names: its id, or the start of exactly one exchange's id (the newest
/// `SCAN_MAX` are looked through). Several: an error listing them.
async fn resolve_id(api: &dyn SessionsApi, raw: &str) -> Result<Option<ExchangeDetail>> {
    if let Some(d) = api.exchange(raw).await.map_err(api_error)? {
        return Ok(Some(d));
    }
    if raw.is_empty() {
        return Ok(None);
    }
    let mut query = ExchangesQuery {
        limit: SCAN_PAGE,
        ..ExchangesQuery::default()
    };
    let mut found: Vec<String> = Vec::new();
    let mut scanned = 0;
    loop {
        let page = api.exchanges(query.clone()).await.map_err(api_error)?;
        scanned += page.exchanges.len();
        query.before = page.exchanges.last().map(|e| e.id.clone());
        found.extend(
            page.exchanges
                .into_iter()
                .filter(|e| e.id.starts_with(raw))
                .map(|e| e.id),
        );
        if !page.more || query.before.is_none() || scanned >= SCAN_MAX {
            break;
        }
    }
    match found.as_slice() {
        [] => Ok(None),
        [one] => api.exchange(one).await.map_err(api_error),
        many => {
            const SHOWN: usize = 10;
            let mut list: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|id| format!("  {}", safe_line(id)))
                .collect();
            if many.len() > SHOWN {
                list.push(format!("  … and {} more", many.len() - SHOWN));
            }
            Err(anyhow!(
                "{} start with {}; give more of the id:\n{}",
                count(many.len(), "exchange id"),
                safe_line(raw),
                list.join("\n")
            ))
        }
    }
}

async fn show(api: &dyn SessionsApi, id: &str, json: bool) -> Result<()> {
    let Some(d) = resolve_id(api, id).await? else {
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
        "{} · {} · {} · started {}",
        s.kind,
        s.status,
        count(s.rounds, "round"),
        local_time(s.started_at)
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
            local_time(t.started_at),
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
        let route = match (&a.channel, &a.to) {
            (Some(c), Some(t)) => Some((c.as_str(), t.as_str())),
            _ => None,
        };
        let said = announce_line(a.outcome, announced(Some(a.outcome)), route, &a.detail);
        println!("Announce: {}", safe_line(&said));
        if let Some(t) = &a.text {
            for l in t.lines() {
                println!("  {}", safe_line(l));
            }
        }
    }
    Ok(())
}
