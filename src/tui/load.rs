//! Reading what the panes show from the engine: a window of sessions (never all 100,000),
//! the newest lines of the selected transcript, as plain rows for `State`.

use serde_json::Value;

use super::state::{SessionRow, TranscriptLine};
use crate::engine::Engine;
use crate::engine::key::{SessionKey, SessionKind};
use crate::engine::policy;
use crate::engine::storage::StorageError;
use crate::engine::storage::queries::SessionScan;
use crate::engine::tools::row::channel_of;
use crate::text_safety::{safe_line, safe_text};

/// How many transcript lines the pane loads at first (the newest ones), and how many more
/// each time the user scrolls to the top of what is loaded.
pub const TRANSCRIPT_WINDOW: usize = 400;
/// The most the pane ever holds; `switchboard sessions export` is the way to read more.
pub const TRANSCRIPT_MAX: usize = 20_000;

/// What the sessions pane is filtered by.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    pub kind: Option<SessionKind>,
    pub text: &'a str,
    pub archived: bool,
    /// Only sessions updated at or after this time (ms).
    pub active_since: Option<i64>,
}

/// A window of the sessions matching `filter`, newest first: `limit` rows from position
/// `start`, and how many match in all. Without a text filter the window comes straight from
/// the indexes (only its rows are decoded), so a jump 100,000 rows deep costs one index walk;
/// a text filter decodes rows as it goes.
pub fn sessions_window(
    engine: &Engine,
    filter: &Filter<'_>,
    start: usize,
    limit: usize,
    count: bool,
) -> Result<(Vec<SessionRow>, Option<u64>), StorageError> {
    if !filter.text.is_empty() {
        let all = sessions(engine, filter, start + limit)?;
        let total = all.len() as u64;
        return Ok((all.into_iter().skip(start).collect(), Some(total)));
    }
    let kind = filter.kind.map(|k| k.as_str().to_string());
    let since = filter.active_since;
    let archived = filter.archived;
    let (keys, total) = engine.store().storage().read(|c| {
        // Archived sessions are sub-agents whose archive timer fired (`spawns.archived_at`,
        // also set on their entry): an anti-join on that small set, not a JSON look into
        // every row, keeps this an index walk.
        // With nothing archived (the usual case) the clause is left out altogether.
        let any_archived: bool = c
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM spawns WHERE archived_at IS NOT NULL)")?
            .query_row([], |r| r.get(0))?;
        let where_ = if any_archived {
            "(?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR updated_at >= ?2)
             AND (?3 OR key NOT IN (SELECT child_key FROM spawns WHERE archived_at IS NOT NULL))"
        } else {
            "(?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR updated_at >= ?2) AND (?3 OR 1)"
        };
        let total = if count {
            Some(
                c.prepare_cached(&format!("SELECT count(*) FROM sessions WHERE {where_}"))?
                    .query_row(rusqlite::params![kind, since, archived], |r| r.get::<_, i64>(0))?
                    as u64,
            )
        } else {
            None
        };
        let mut stmt = c.prepare_cached(&format!(
            "SELECT key FROM sessions WHERE {where_} ORDER BY updated_at DESC, key LIMIT ?4 OFFSET ?5"
        ))?;
        let keys = stmt
            .query_map(
                rusqlite::params![kind, since, archived, limit as i64, start as i64],
                |r| r.get::<_, String>(0),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((keys, total))
    })?;
    let mut rows = Vec::with_capacity(keys.len());
    for key in keys {
        if let Some(s) = engine.store().get(&SessionKey::from_canonical(key))? {
            rows.push(row_of(engine, &s));
        }
    }
    Ok((rows, total))
}

fn row_of(engine: &Engine, s: &crate::engine::storage::queries::StoredSession) -> SessionRow {
    let name = s
        .entry
        .display_name
        .clone()
        .or(s.entry.label.clone())
        .unwrap_or_else(|| s.key.to_string());
    let decision = policy::evaluate(engine.config(), &s.key, &s.entry);
    SessionRow {
        key: s.key.to_string(),
        kind: s.kind,
        // Names are labels, stored as given: escaped for the screen here.
        name: safe_line(&name).into_owned(),
        channel: channel_of(s),
        updated_at: s.updated_at(),
        policy: decision.policy.as_str(),
        policy_override: decision.is_override(),
        archived: s.entry.archived_at.is_some(),
    }
}

/// The newest `limit` sessions matching the filters.
pub fn sessions(
    engine: &Engine,
    filter: &Filter<'_>,
    limit: usize,
) -> Result<Vec<SessionRow>, StorageError> {
    let (kind, text, archived) = (filter.kind, filter.text, filter.archived);
    let scan = SessionScan {
        kinds: kind.map(|k| vec![k]),
        updated_since: filter.active_since,
        ..SessionScan::default()
    };
    let needle = text.to_lowercase();
    let mut rows = Vec::new();
    engine.store().scan(&scan, |s| {
        if s.entry.archived_at.is_some() && !archived {
            return true;
        }
        let name = s
            .entry
            .display_name
            .clone()
            .or(s.entry.label.clone())
            .unwrap_or_else(|| s.key.to_string());
        if !needle.is_empty()
            && !s.key.as_str().to_lowercase().contains(&needle)
            && !name.to_lowercase().contains(&needle)
        {
            return true;
        }
        rows.push(row_of(engine, &s));
        rows.len() < limit
    })?;
    Ok(rows)
}

/// The newest transcript lines of `key` (tool calls and results included; the pane hides
/// them unless asked), and how many lines the transcript has.
pub fn transcript(
    engine: &Engine,
    key: &str,
    window: usize,
) -> Result<(Vec<TranscriptLine>, i64), StorageError> {
    let Some(s) = engine.store().get(&SessionKey::from_canonical(key))? else {
        return Ok((Vec::new(), 0));
    };
    let rows = engine
        .store()
        .tail(&s.entry.session_id, window.clamp(1, TRANSCRIPT_MAX), true)?;
    let total = rows.last().map(|r| r.seq).unwrap_or(0);
    let lines = rows
        .into_iter()
        .filter_map(|r| line_of(r.seq, &r.line))
        .collect();
    Ok((lines, total))
}

/// One stored transcript line as the pane shows it (`None` for non-message lines).
pub fn line_of(seq: i64, line: &Value) -> Option<TranscriptLine> {
    let m = line.get("message")?;
    let role = m.get("role")?.as_str()?;
    let timestamp = m.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    match m.get("content") {
        Some(Value::String(s)) => texts.push(s.clone()),
        Some(Value::Array(parts)) => {
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            texts.push(t.to_string());
                        }
                    }
                    Some("toolCall") => calls.push(format!(
                        "{}({})",
                        p.get("name").and_then(Value::as_str).unwrap_or("?"),
                        p.get("arguments").map(Value::to_string).unwrap_or_default()
                    )),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    let prov = m.get("provenance");
    let from = match (
        role,
        prov.and_then(|p| p.get("kind")).and_then(Value::as_str),
    ) {
        ("user", Some("inter_session")) => format!(
            "from {} via {}",
            prov.and_then(|p| p.get("sourceSessionKey"))
                .and_then(Value::as_str)
                .unwrap_or("?"),
            prov.and_then(|p| p.get("sourceTool"))
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        ("user", _) => m
            .get("senderLabel")
            .and_then(Value::as_str)
            .map(|s| {
                if m.get("senderIsOwner").and_then(Value::as_bool) == Some(true) {
                    format!("{s} (owner)")
                } else {
                    s.to_string()
                }
            })
            .unwrap_or_else(|| {
                if m.get("senderIsOwner").and_then(Value::as_bool) == Some(true) {
                    "owner".to_string()
                } else {
                    "user".to_string()
                }
            }),
        ("toolResult", _) => m
            .get("toolName")
            .and_then(Value::as_str)
            .unwrap_or("tool")
            .to_string(),
        _ => "agent".to_string(),
    };
    let (role, text) = match role {
        "assistant" if !calls.is_empty() => ("tool", calls.join(", ")),
        "assistant" if m.get("stopReason").and_then(Value::as_str) == Some("error") => (
            "error",
            m.get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("the run failed")
                .to_string(),
        ),
        "assistant" => ("assistant", texts.join("\n")),
        "toolResult" => ("result", texts.join("\n")),
        "user" => ("user", texts.join("\n")),
        _ => ("note", texts.join("\n")),
    };
    if text.is_empty() && role == "assistant" {
        return None;
    }
    Some(TranscriptLine {
        seq,
        role,
        timestamp,
        from: safe_line(&from).into_owned(),
        text: safe_text(&text).into_owned(),
    })
}
