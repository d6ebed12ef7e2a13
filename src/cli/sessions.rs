//! `switchboard sessions list|show|patch|abort|export`: the owner's view of sessions.

use anyhow::{Context, Result, anyhow};
use serde_json::Value;

use switchboard_engine::Overwrite;
use switchboard_types::api::source::{SessionRef, SourceKind};
use switchboard_types::api::time::{AgoStyle, ago};
use switchboard_types::api::{
    LineRole, PatchRequest, PolicySetting, PolicyView, SessionKind, SessionsApi, SessionsQuery,
    TranscriptLine, TranscriptQuery,
};
use switchboard_types::text_safety::{self, safe_line, safe_text};

use super::args::{AgentSends, Cli, SessionsCommand};
use super::attach::Attached;
use super::print::{cell, field, local_time, print_json, shown_key};
use super::transfer::export;
use super::waiting::Waiting;
use super::{api_error, existing_key, usage};

fn parse_kinds(names: &[String]) -> Result<Vec<SessionKind>> {
    names
        .iter()
        .map(|n| {
            SessionKind::parse(n).ok_or_else(|| {
                usage(format!(
                    "unknown kind {n:?} (kinds: main, group, cron, hook, node, other)"
                ))
            })
        })
        .collect()
}

/// `sessions list --json`'s rows: the owner's `sessions_list`-shaped object of each session,
/// with its effective send policy (`sendPolicyEffective`). The page carries them (`entries`):
/// one request, however many rows (over `--connect`, each request is a round trip). A
/// gateway too old to fill them is asked row by row; a session deleted meanwhile is left out.
///
/// With several sources each row gains its `source`; its `key` stays `source/key`, as every
/// command takes it (a script passes it back as it is).
async fn owner_rows(api: &dyn SessionsApi, query: SessionsQuery) -> Result<Vec<Value>> {
    let several = !api.sources().is_empty();
    let page = api
        .sessions(SessionsQuery {
            entries: true,
            ..query
        })
        .await?;
    let mut rows = Vec::with_capacity(page.rows.len());
    for row in page.rows {
        let (mut v, policy) = match row.entry {
            Some(entry) => (entry, row.policy),
            None => match api.session(&row.key).await? {
                Some(detail) => (detail.entry, detail.row.policy),
                None => continue,
            },
        };
        if v.is_object() {
            v["sendPolicyEffective"] = policy.to_json();
            if several {
                add_source(&mut v, &row.key);
            }
            rows.push(v);
        }
    }
    Ok(rows)
}

pub(crate) async fn sessions(cli: &Cli, cmd: &SessionsCommand) -> Result<()> {
    match cmd {
        SessionsCommand::List {
            kinds,
            active,
            limit,
            json,
            archived,
        } => {
            let kinds = parse_kinds(kinds)?;
            let api = cli.reading_api().await?;
            let query = SessionsQuery {
                kinds,
                active_since: active.map(|m| {
                    let minutes = i64::try_from(m).unwrap_or(i64::MAX).max(1);
                    chrono::Utc::now()
                        .timestamp_millis()
                        .saturating_sub(minutes.saturating_mul(60_000))
                }),
                archived: *archived,
                limit: *limit,
                ..SessionsQuery::default()
            };
            let rows = owner_rows(api.as_ref(), query.clone()).await?;
            if *json {
                return print_json(&Value::Array(rows));
            }
            // "No sessions yet" would be wrong when only archived ones matched; one more
            // page, on the empty path only, tells the two apart.
            if rows.is_empty()
                && !*archived
                && !api
                    .sessions(SessionsQuery {
                        archived: true,
                        limit: 1,
                        ..query
                    })
                    .await?
                    .rows
                    .is_empty()
            {
                println!("No sessions to show; archived ones are hidden (add --archived).");
                return Ok(());
            }
            print_table(&rows, !api.sources().is_empty());
            Ok(())
        }
        SessionsCommand::Show {
            key,
            messages,
            tools,
            json,
        } => {
            let api = cli.reading_api().await?;
            let (mut row, lines, policy, left_out) =
                show_session(api.as_ref(), key, *messages, *tools).await?;
            if !api.sources().is_empty()
                && let Some(key) = row.get("key").and_then(Value::as_str).map(str::to_string)
            {
                add_source(&mut row, &key);
            }
            if *json {
                let mut v = row;
                v["sendPolicyEffective"] = policy.to_json();
                v["messages"] = Value::Array(
                    lines
                        .iter()
                        .filter_map(|l| l.message.clone())
                        .collect::<Vec<_>>(),
                );
                return print_json(&v);
            }
            print_show(&row, &lines, &policy);
            if left_out > 0 {
                println!(
                    "({left_out} older messages left out to fit the gateway's frame limit; ask \
for fewer with --messages)"
                );
            }
            Ok(())
        }
        SessionsCommand::Patch {
            key,
            send_policy,
            agent_sends,
            json,
        } => patch(cli, key, *send_policy, *agent_sends, *json).await,
        SessionsCommand::Abort { key, run_id, json } => {
            abort(cli, key, run_id.as_deref(), *json).await
        }
        SessionsCommand::Export {
            key,
            all,
            out,
            force,
        } => {
            cli.local_only("sessions export")?;
            let overwrite = if *force {
                Overwrite::Replace
            } else {
                Overwrite::Refuse
            };
            export(cli, key.as_deref(), *all, out.as_deref(), overwrite).await
        }
    }
}

/// `sessions abort`: stop what runs on a session, then say what was stopped.
pub(crate) async fn abort(cli: &Cli, raw: &str, run_id: Option<&str>, json: bool) -> Result<()> {
    let attached = cli.attach().await?;
    let api = attached.api();
    let key = existing_key(api.as_ref(), raw).await?;
    let done = api
        .abort(&key, run_id)
        .await
        .map_err(api_error)
        .with_context(|| format!("cannot abort runs of {key}"))?;
    attached.drain(&Waiting::new()).await;
    if json {
        return print_json(&serde_json::json!({ "key": key, "runIds": done.run_ids }));
    }
    if done.run_ids.is_empty() {
        // Only a session of the local folder runs in this process.
        let on_local = match SessionRef::parse(&key).source {
            None => true,
            Some(source) => api
                .sources()
                .iter()
                .any(|s| s.name == source && s.kind == SourceKind::Local),
        };
        let where_ = match attached {
            Attached::Local(..) if on_local => {
                " in this process (runs execute in the process that started them: abort in the \
                 console, or with --connect on the gateway's engine)"
            }
            Attached::Local(..) | Attached::Remote(_) => "",
        };
        println!("{key}: nothing was running{where_}");
    } else {
        for id in &done.run_ids {
            println!("{key}: aborted run {id}");
        }
    }
    Ok(())
}

/// `sessions patch`: set or remove the send-policy override, then report the effective policy.
pub(crate) async fn patch(
    cli: &Cli,
    raw: &str,
    change: Option<PolicySetting>,
    agent_sends: Option<AgentSends>,
    json: bool,
) -> Result<()> {
    if change.is_none() && agent_sends.is_none() {
        return Err(usage(
            "nothing to change: pass --send-policy allow|deny|inherit or --agent-sends off|inherit",
        ));
    }
    let attached = cli.attach().await?;
    let api = attached.api();
    let key = existing_key(api.as_ref(), raw).await?;
    let mut out = serde_json::Map::new();
    let mut said = Vec::new();
    if let Some(agents) = agent_sends {
        let done = api
            .set_agent_sends(&key, agents == AgentSends::Off)
            .await
            .map_err(api_error)
            .with_context(|| format!("cannot change agent sends into {key}"))?;
        let shown = shown_key(&key, &done.display_key);
        out.insert("key".into(), shown.clone().into());
        out.insert("agentSendsStopped".into(), done.stopped.into());
        said.push(if done.stopped {
            format!(
                "{}: agent-to-agent sends into it stopped; its replies and announces to its \
                 channel go on",
                shown
            )
        } else {
            format!(
                "{}: agent-to-agent sends into it follow its send policy again",
                shown
            )
        });
    }
    if let Some(change) = change {
        let patched = api
            .patch(PatchRequest {
                key: key.clone(),
                send_policy: Some(change),
            })
            .await
            .map_err(api_error)
            .with_context(|| format!("cannot patch {key}"))?;
        let shown = shown_key(&key, &patched.display_key);
        out.insert("key".into(), shown.clone().into());
        out.insert("sendPolicy".into(), serde_json::json!(patched.send_policy));
        out.insert("sendPolicyEffective".into(), patched.effective.to_json());
        let change = match change.stored() {
            Some(p) => format!("set to {p}"),
            None => "removed (the config decides)".to_string(),
        };
        said.push(format!(
            "{}: send policy override {change}; effective: {}",
            shown, patched.effective.summary
        ));
    }
    attached.drain(&Waiting::new()).await;
    if json {
        return print_json(&serde_json::Value::Object(out));
    }
    for line in said {
        println!("{line}");
    }
    Ok(())
}

/// One session's owner row, its latest transcript lines (each with its stored message) and
/// its effective send policy.
async fn show_session(
    api: &dyn SessionsApi,
    raw: &str,
    messages: usize,
    tools: bool,
) -> Result<(Value, Vec<TranscriptLine>, PolicyView, usize)> {
    let key = existing_key(api, raw).await?;
    let detail = api
        .session(&key)
        .await?
        .ok_or_else(|| anyhow!("no session found: {key}"))?;
    let (lines, left_out) = if messages == 0 {
        (Vec::new(), 0)
    } else {
        let page = api
            .transcript(TranscriptQuery {
                key: key.clone(),
                before: None,
                limit: messages,
                tools,
                raw: true,
                bare: false,
            })
            .await?;
        if !page.exists {
            return Err(anyhow!("no session found: {key}"));
        }
        (page.lines, page.left_out)
    };
    Ok((detail.entry, lines, detail.row.policy, left_out))
}

/// `source` first in a row of several sources, from its `source/key` reference.
fn add_source(v: &mut Value, key: &str) {
    if let (Some(source), Some(obj)) = (SessionRef::parse(key).source, v.as_object_mut()) {
        let mut with = serde_json::Map::with_capacity(obj.len() + 1);
        with.insert("source".into(), Value::String(source.to_string()));
        with.extend(std::mem::take(obj));
        *obj = with;
    }
}

fn print_table(rows: &[Value], several: bool) {
    if rows.is_empty() {
        // With several sources a session is named with its source.
        let key = if several {
            "SOURCE/agent:main:main"
        } else {
            "agent:main:main"
        };
        println!("No sessions yet. Record one with: switchboard inject {key} \"hello\"");
        return;
    }
    // With several sources, SOURCE first and the key bare beside it.
    let key = |r: &Value| -> String {
        let k = cell(r, "key");
        if several {
            SessionRef::parse(&k).key.to_string()
        } else {
            k
        }
    };
    let key_w = rows
        .iter()
        .map(|r| key(r).chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 60);
    let source_w = rows
        .iter()
        .map(|r| cell(r, "source").chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let source = |text: &str| {
        if several {
            format!("{text:<source_w$} ")
        } else {
            String::new()
        }
    };
    println!(
        "{}{:<6} {:<key_w$} {:<10} {:<10} {:<6} NAME",
        source("SOURCE"),
        "KIND",
        "KEY",
        "CHANNEL",
        "UPDATED",
        "POLICY"
    );
    for r in rows {
        let updated = r
            .get("updatedAt")
            .and_then(Value::as_i64)
            .map(|ms| ago(chrono::Utc::now().timestamp_millis(), ms, AgoStyle::Words))
            .unwrap_or_default();
        // Names are stored as given (they are labels, not identities) and escaped here.
        let mut name = safe_line(
            r.get("displayName")
                .or_else(|| r.get("label"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
        .into_owned();
        // Marked in the last column so the fixed-width columns scripts may cut stay put.
        if r.get("archived").and_then(Value::as_bool) == Some(true) {
            name = if name.is_empty() {
                "(archived)".to_string()
            } else {
                format!("{name} (archived)")
            };
        }
        println!(
            "{}{:<6} {:<key_w$} {:<10} {:<10} {:<6} {}",
            source(&cell(r, "source")),
            cell(r, "kind"),
            key(r),
            cell(r, "channel"),
            updated,
            policy_cell(r),
            name
        );
    }
}

/// `allow`, `deny`, or `deny*`/`allow*` when the session's own override decides.
fn policy_cell(row: &Value) -> String {
    let Some(eff) = row.get("sendPolicyEffective") else {
        return String::new();
    };
    let source = field(eff, "source").parse::<switchboard_types::api::PolicySourceKind>();
    let marker = if source == Ok(switchboard_types::api::PolicySourceKind::Override) {
        "*"
    } else {
        ""
    };
    format!("{}{marker}", field(eff, "policy"))
}

/// How many characters of one message `sessions show` prints; a 10 MB message would bury
/// the terminal (and everything after it). `sessions export` and `--json` have the whole text.
const SHOW_MESSAGE_CHARS: usize = 4_000;

/// The first `max` characters of `text`, and how many characters were left out.
fn cap_chars(text: &str, max: usize) -> (&str, usize) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], text[at..].chars().count()),
        None => (text, 0),
    }
}

fn print_show(row: &Value, lines: &[TranscriptLine], policy: &PolicyView) {
    let width = 16;
    let now = chrono::Utc::now().timestamp_millis();
    if let Some(obj) = row.as_object() {
        for (k, v) in obj {
            let text = match (v, v.as_i64()) {
                (Value::String(s), _) => safe_line(s).into_owned(),
                // A moment (`updatedAt`, `createdAt`, …) in local time and how long ago, not
                // milliseconds since the epoch.
                (_, Some(ms)) if k.ends_with("At") => {
                    format!("{} ({})", local_time(ms), ago(now, ms, AgoStyle::Words))
                }
                (other, _) => text_safety::to_json_string(other, false)
                    .unwrap_or_else(|_| safe_line(&other.to_string()).into_owned()),
            };
            println!("{:<width$} {text}", safe_line(k));
        }
    }
    println!("{:<width$} {}", "send policy", policy.summary);
    println!();
    if lines.is_empty() {
        println!("(no messages)");
    }
    for line in lines {
        let (shown, more) = cap_chars(&line.text, SHOW_MESSAGE_CHARS);
        // A line without a recorded time (0) says so rather than showing 1970.
        let at = if line.timestamp > 0 {
            local_time(line.timestamp)
        } else {
            "-".to_string()
        };
        println!("{at}  {} {}", safe_line(&speaker(line)), safe_text(shown));
        if more > 0 {
            println!("  … ({more} more characters; `sessions export` has all)");
        }
    }
}

/// Who a line is from, as the console's transcript labels it: the sender's name (`alice
/// (owner)`, `from agent:ops:main via sessions_send`) for a message that came in, `agent:`
/// for what the session's agent said or called, `← tool` for a tool's result.
fn speaker(line: &TranscriptLine) -> String {
    match line.role {
        LineRole::User => format!("{}:", line.from),
        LineRole::Assistant | LineRole::Tool => "agent:".to_string(),
        LineRole::Result => format!("← {}", line.from),
        LineRole::Error => "✗ error:".to_string(),
        LineRole::Note => "·".to_string(),
    }
}
