//! `switchboard exchanges`: agent-to-agent exchanges from the command line, newest first
//! (all, or filtered by session, requester, target, status and start), with a header row
//! and notes on stderr; `exchanges show ID` (or a unique start of it) with every turn, how
//! it ended and the announce; `--json` prints the API's own shapes.

use std::io::Write;

use anyhow::{Result, anyhow};
use serde_json::Value;
use switchboard_types::api::source::SessionRef;
use switchboard_types::api::time::now_ms;
use switchboard_types::api::{
    AnnounceOutcome, ExchangeDetail, ExchangeEnd, ExchangeKind, ExchangeStatus, ExchangeSummary,
    ExchangesPage, ExchangesQuery, SessionsApi, announce_line,
};
use switchboard_types::text_safety::safe_line;
use switchboard_types::words::count;

use super::args::{Cli, ExchangesArgs, ExchangesCommand};
use super::print::{local_time, print_columns, print_json};
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
        return print_json(&with_source(
            serde_json::to_value(ExchangesPage {
                exchanges,
                more: more.unwrap_or(true),
            })?,
            !api.sources().is_empty(),
        ));
    }
    let filtered = !filter.is_empty() || args.since.is_some() || args.session.is_some();
    if exchanges.is_empty() {
        note(if filtered {
            "no agent-to-agent exchanges match"
        } else {
            "no agent-to-agent exchanges yet"
        });
    } else {
        print_table(&exchanges, !api.sources().is_empty());
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

/// A reference's source and what it names there (`None`: one source, no names).
fn source_of(reference: &str) -> (Option<&str>, &str) {
    let r = SessionRef::parse(reference);
    (r.source, r.key)
}

/// The table; with several sources, a SOURCE column first and the keys and ids in the
/// others bare (the source says where they are).
fn print_table(exchanges: &[ExchangeSummary], several: bool) {
    let bare = |reference: &str| -> String {
        let shown = if several {
            source_of(reference).1
        } else {
            reference
        };
        safe_line(shown).into_owned()
    };
    let rows: Vec<Vec<String>> = exchanges
        .iter()
        .map(|e| {
            let mut row = Vec::with_capacity(7);
            if several {
                row.push(source_of(&e.id).0.unwrap_or("-").to_string());
            }
            row.extend([
                local_time(e.started_at),
                format!("{} → {}", bare(&e.requester), bare(&e.target)),
                e.rounds.to_string(),
                safe_line(&how(e)).into_owned(),
                announced(e.announce).to_string(),
                bare(&e.id),
            ]);
            row
        })
        .collect();
    let header = [
        "SOURCE",
        "STARTED",
        "FROM → TO",
        "ROUNDS",
        "ENDED",
        "ANNOUNCE",
        "ID",
    ];
    print_columns(&header[usize::from(!several)..], &rows, 80);
}

/// An exchange (or a page's) as JSON; with several sources, each exchange gains the
/// `source` it is on (its ids and keys stay `source/…`, as every command takes them).
fn with_source(mut v: Value, several: bool) -> Value {
    if !several {
        return v;
    }
    let add = |e: &mut Value| {
        let source = e
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| source_of(id).0)
            .map(str::to_string);
        if let (Some(obj), Some(source)) = (e.as_object_mut(), source) {
            obj.insert("source".into(), Value::String(source));
        }
    };
    if let Some(list) = v.get_mut("exchanges").and_then(Value::as_array_mut) {
        list.iter_mut().for_each(add);
    }
    if let Some(summary) = v.get_mut("summary") {
        add(summary);
    }
    v
}

/// The exchange `raw` names: its id, or the start of exactly one exchange's id (the newest
/// `SCAN_MAX` are looked through). Several: an error listing them.
async fn resolve_id(api: &dyn SessionsApi, raw: &str) -> Result<Option<ExchangeDetail>> {
    let several = !api.sources().is_empty();
    // With several sources an id that names none is looked for on all of them (below).
    if (!several || source_of(raw).0.is_some())
        && let Some(d) = api.exchange(raw).await.map_err(api_error)?
    {
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
                .filter(|e| {
                    e.id.starts_with(raw) || (several && source_of(&e.id).1.starts_with(raw))
                })
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
    let several = !api.sources().is_empty();
    if json {
        return print_json(&with_source(serde_json::to_value(&d)?, several));
    }
    let s = &d.summary;
    if several && let (Some(source), _) = source_of(&s.id) {
        println!("Source: {source}");
    }
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
