//! The engine's side of `SessionsApi`: every front end's request answered from the store,
//! the key scheme and the send policy, here and nowhere else, so front ends never need them.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::Engine;
use super::tools::{TOOL_NAMES, ToolContext, ToolError};
use crate::inbound::{Inbound, Intake};
use crate::session::policy;
use crate::session::transcript_text;
use switchboard_store::SessionScan;
use switchboard_store::StoreError;
use switchboard_store::idempotency;
use switchboard_store::{PageFilter, StoredSession};
use switchboard_types::api::*;
use switchboard_types::key::{KeyError, KeyInput, SessionKey, classify_input};

/// The most transcript lines one page returns.
pub const TRANSCRIPT_PAGE_MAX: usize = 20_000;
/// The most sessions one page returns.
pub const SESSIONS_PAGE_MAX: usize = 5_000;
/// How long `abort` waits for an aborted run to record its end (a write, so normally
/// milliseconds; a stuck disk must not hold the caller forever).
const ABORT_SETTLE: Duration = Duration::from_secs(10);

impl From<ToolError> for ApiError {
    fn from(e: ToolError) -> ApiError {
        match e {
            ToolError::Input(e) => ApiError::BadInput(e.to_string()),
            ToolError::Storage(e) => e.into(),
        }
    }
}

/// The policy decision as front ends show it.
pub(crate) fn policy_view(d: &PolicyDecision) -> PolicyView {
    PolicyView::from(d)
}

impl Engine {
    fn row_of(&self, s: &StoredSession) -> SessionRow {
        let scheme = self.store().scheme();
        let display_key = scheme.display(&s.key);
        let name = s.entry.shown_name(&display_key).to_string();
        SessionRow {
            key: s.key.to_string(),
            display_key,
            kind: s.kind,
            agent_id: s.agent_id.clone(),
            channel: super::tools::row::channel_of(s),
            name,
            label: s.entry.label.clone(),
            display_name: s.entry.display_name.clone(),
            session_id: s.entry.session_id.clone(),
            updated_at: s.updated_at(),
            policy: policy_view(&policy::evaluate(self.config(), &s.key, &s.entry)),
            running: self.runner().is_running(s.key.as_str()),
            archived: s.entry.archived_at.is_some(),
            entry: None,
            last_message: None,
        }
    }

    /// A page's row, with the owner entry when the query asks for it (built from the row
    /// already read, so a listing with entries costs no more reads than one without).
    fn listed_row(&self, s: &StoredSession, q: &SessionsQuery) -> SessionRow {
        let mut row = self.row_of(s);
        if q.entries {
            row.entry = Some(super::tools::owner_entry(self, s));
        }
        row
    }

    /// Each row's last message (its start), for a query that asks for `previews`: one
    /// index lookup from the end of each row's transcript, all in one statement.
    async fn fill_previews(&self, rows: &mut [SessionRow]) -> Result<(), StoreError> {
        /// Enough for the widest preview column; the rest would only cross the wire.
        const PREVIEW_CHARS: usize = 120;
        let ids: Vec<String> = rows.iter().map(|r| r.session_id.clone()).collect();
        let last = self.store().backend().last_messages(ids).await?;
        for (row, last) in rows.iter_mut().zip(last) {
            row.last_message = last.and_then(|r| {
                let line = transcript_text::line_of(r.seq, &r.line, false)?;
                let one: String = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
                Some(one.chars().take(PREVIEW_CHARS).collect())
            });
        }
        Ok(())
    }

    /// A text filter decodes rows as it goes (names live in the entry): up to the page's
    /// end, and on through every match when a count is asked.
    async fn sessions_matching_text(&self, q: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let scheme = self.store().scheme();
        let scan = SessionScan {
            kinds: (!q.kinds.is_empty()).then(|| q.kinds.clone()),
            updated_since: q.active_since,
            by_name: q.order == SessionsOrder::Name,
            ..SessionScan::default()
        };
        let needle = q.text.to_lowercase();
        let end = q.offset.saturating_add(q.limit);
        let mut rows = Vec::new();
        let mut matching = 0u64;
        self.store()
            .scan(&scan, |s| {
                let listed = !s.key.is_unknown() && (!s.key.is_global() || scheme.global_scope);
                if !listed || (s.entry.archived_at.is_some() && !q.archived) {
                    return true;
                }
                if !needle.is_empty() {
                    let name = s.entry.display_name.as_deref().or(s.entry.label.as_deref());
                    let hit = s.key.as_str().to_lowercase().contains(&needle)
                        || scheme.display(&s.key).to_lowercase().contains(&needle)
                        || name.is_some_and(|n| n.to_lowercase().contains(&needle));
                    if !hit {
                        return true;
                    }
                }
                let at = matching as usize;
                matching += 1;
                if at >= q.offset && at < end {
                    rows.push(self.listed_row(&s, q));
                }
                q.count || (matching as usize) < end
            })
            .await?;
        if q.previews {
            self.fill_previews(&mut rows).await?;
        }
        Ok(SessionsPage {
            rows,
            offset: q.offset,
            matching: q.count.then_some(matching),
            total: self.store().count().await?,
            order: q.order,
        })
    }

    async fn sessions_page(&self, q: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let mut q = q.clone();
        q.limit = q.limit.min(SESSIONS_PAGE_MAX);
        if !q.text.is_empty() || q.kinds.len() > 1 {
            return self.sessions_matching_text(&q).await;
        }
        let filter = PageFilter {
            kind: q.kinds.first().copied(),
            updated_since: q.active_since,
            archived: q.archived,
            show_global: self.store().scheme().global_scope,
            by_name: q.order == SessionsOrder::Name,
        };
        let (keys, matching) = self
            .store()
            .backend()
            .page_session_keys(filter, q.offset, q.limit, q.count)
            .await?;
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            // Gone between the two reads (deleted by another process): left out.
            let Some(s) = self.store().get(&key).await? else {
                continue;
            };
            rows.push(self.listed_row(&s, &q));
        }
        if q.previews {
            self.fill_previews(&mut rows).await?;
        }
        Ok(SessionsPage {
            rows,
            offset: q.offset,
            matching,
            total: self.store().count().await?,
            order: q.order,
        })
    }

    async fn transcript_page(&self, q: &TranscriptQuery) -> Result<TranscriptPage, StoreError> {
        let key = SessionKey::from_canonical(q.key.clone());
        let Some(s) = self.store().get(&key).await? else {
            return Ok(TranscriptPage {
                key: q.key.clone(),
                exists: false,
                ..TranscriptPage::default()
            });
        };
        let sid = s.entry.session_id.clone();
        let limit = q.limit.clamp(1, TRANSCRIPT_PAGE_MAX);
        let (rows, last_seq) = self
            .store()
            .backend()
            .transcript_page(&sid, q.before, limit, q.tools)
            .await?;
        Ok(TranscriptPage {
            key: q.key.clone(),
            exists: true,
            lines: rows
                .iter()
                .filter_map(|r| transcript_text::line_of(r.seq, &r.line, q.raw))
                .collect(),
            last_seq,
            left_out: 0,
        })
    }

    /// An existing session named by key or session id.
    async fn find_existing(&self, raw: &str) -> Result<SessionKey, ApiError> {
        let scheme = self.store().scheme();
        let key = match scheme.canonicalize(raw, &scheme.default_agent) {
            Err(e @ KeyError::Forbidden { .. }) => return Err(e.into()),
            other => other.ok(),
        };
        if let Some(k) = &key
            && self.store().get(k).await?.is_some()
        {
            return Ok(k.clone());
        }
        if let KeyInput::Candidate(s) = classify_input(raw)
            && let Some(k) = self
                .store()
                .keys_by_session_id(&s)
                .await?
                .into_iter()
                .next()
        {
            return Ok(k);
        }
        Err(ApiError::NotFound(format!(
            "no session found: {}",
            key.map(|k| k.to_string())
                .unwrap_or_else(|| raw.to_string())
        )))
    }

    async fn resolve(&self, raw: &str, purpose: KeyPurpose) -> Result<SessionKey, ApiError> {
        let scheme = self.store().scheme();
        match purpose {
            KeyPurpose::Existing => self.find_existing(raw).await,
            KeyPurpose::Requester => Ok(self.requester_key(raw)?),
            KeyPurpose::Inbound => {
                if raw.trim().eq_ignore_ascii_case("current") {
                    return Err(ApiError::BadInput(
                        "a message needs a real session key, not \"current\"".into(),
                    ));
                }
                let key = scheme
                    .canonicalize(raw, &scheme.default_agent)
                    .map_err(|e| match e {
                        KeyError::Forbidden { .. } => ApiError::BadInput(e.to_string()),
                        _ => ApiError::BadInput(format!(
                            "{e} (e.g. agent:main:main, agent:main:telegram:group:42, cron:nightly)"
                        )),
                    })?;
                if key.is_unknown() {
                    return Err(ApiError::BadInput(
                        "\"unknown\" is a reserved key and cannot receive messages".into(),
                    ));
                }
                Ok(key)
            }
        }
    }

    async fn send_in_order(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        let key = self.resolve(&request.key, KeyPurpose::Inbound).await?;
        if request.text.trim().is_empty() {
            return Err(ApiError::BadInput("the message text is empty".into()));
        }
        if let Some(k) = &request.idempotency_key {
            check_idempotency_key(k)?;
        }
        // One session's messages are recorded one at a time, in the order the calls came:
        // the place in line is taken before anything is awaited. So a repeat of a key into
        // the same session waits for the first call's record, then finds its key.
        let place = self.intake().enter(key.as_str());
        let from = Inbound {
            channel: request.from.channel.map(|c| c.trim().to_ascii_lowercase()),
            chat_type: request.from.chat_type,
            display_name: request.from.display_name,
            sender: request.from.sender,
            owner: request.from.owner,
        };
        let group = self.tracker().open_group();
        let work = WorkId(group.id);
        // Once the call has begun, it is carried through on a task of its own: a caller
        // that goes away (a dropped future, a closed connection) must not leave a message
        // recorded and never answered, nor its place in line held.
        let engine = self.clone();
        let text = request.text;
        let idempotency_key = request.idempotency_key;
        // What a repeat is compared by (the text itself may be megabytes: not kept twice).
        let text_hash = idempotency_key
            .as_ref()
            .map(|_| idempotency::message_hash(&text));
        let what = format!("recording a message into {key}");
        let k = key.clone();
        let recording = self.tracker().spawn(what, async move {
            let turn = place.turn().await;
            let received = group
                .scope(engine.receive_keyed(&k, &text, &from, idempotency_key.as_deref()))
                .await;
            drop(turn);
            received
        });
        let intake = recording
            .await
            .map_err(|e| ApiError::Unavailable(format!("recording the message stopped: {e}")))??;
        let scheme = self.store().scheme();
        let received = match intake {
            Intake::Received(r) => r,
            Intake::Repeat(first) => {
                let first_key = SessionKey::from_canonical(first.session_key.clone());
                let hash = text_hash.unwrap_or_default();
                repeat_matches(&first, &key, &hash, &scheme.display(&first_key))?;
                return Ok(SendReceipt {
                    display_key: scheme.display(&first_key),
                    key: first.session_key,
                    created: false,
                    seq: first.seq,
                    run_id: first.run_id,
                    command_reply: first.command_reply,
                    work,
                });
            }
        };
        let recorded = &received.recorded;
        Ok(SendReceipt {
            key: recorded.key.to_string(),
            display_key: scheme.display(&recorded.key),
            created: recorded.created,
            seq: recorded.row.seq,
            run_id: received.run.as_ref().map(|r| r.run_id.clone()),
            command_reply: received.command_reply,
            work,
        })
    }

    async fn run_result(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        let handle = self.runs().live(run_id);
        if let Some(mut h) = handle {
            return Ok(match h.wait_for(limit).await {
                Some(o) => RunResult {
                    run_id: run_id.to_string(),
                    status: o.status,
                    reply: o.reply,
                    error: o.error,
                },
                None => still_running(run_id),
            });
        }
        // Not a run of this engine (or long finished): the record says how it ended.
        let Some(row) = self.run(run_id).await? else {
            return Err(ApiError::NotFound(format!("no run {run_id}")));
        };
        if row.status == RunStatus::Running {
            return Ok(still_running(run_id));
        }
        Ok(RunResult {
            run_id: run_id.to_string(),
            status: row.status,
            reply: row.reply.clone().unwrap_or_default(),
            error: row.error.clone(),
        })
    }

    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
        if !TOOL_NAMES.contains(&call.tool.as_str()) {
            return Err(ApiError::BadInput(format!(
                "unknown tool: {} (known tools: {})",
                call.tool,
                TOOL_NAMES.join(", ")
            )));
        }
        let requester = self
            .requester_key(&call.requester)
            .map_err(|e| ApiError::BadInput(format!("the requester: {e}")))?;
        let ctx = ToolContext::new(requester, call.sandboxed);
        let group = self.tracker().open_group();
        let result = group
            .scope(self.call_tool(&call.tool, &call.params, &ctx))
            .await
            .map_err(|e| match e {
                ToolError::Input(e) => ApiError::BadInput(format!("{}: {e}", call.tool)),
                other => other.into(),
            })?;
        Ok(ToolResult {
            result,
            work: WorkId(group.id),
        })
    }

    async fn patch_session(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        let Some(change) = request.send_policy else {
            return Err(ApiError::BadInput(
                "nothing to change: give a send policy (allow, deny or inherit)".into(),
            ));
        };
        let key = SessionKey::from_canonical(request.key.clone());
        if self.store().get(&key).await?.is_none() {
            return Err(ApiError::NotFound(format!("no session found: {key}")));
        }
        let value = change.stored().map(str::to_string);
        let stored = self
            .store()
            .patch(&key, move |e| {
                // The writer may run this closure twice (batch replay), so it clones each time.
                e.send_policy = value.clone();
                Ok(())
            })
            .await?;
        self.events()
            .emit(super::events::EngineEvent::PolicyChanged {
                key: key.to_string(),
                policy: change,
                by: "patch".into(),
            });
        let decision = policy::evaluate(self.config(), &stored.key, &stored.entry);
        Ok(PatchResult {
            key: stored.key.to_string(),
            display_key: self.store().scheme().display(&stored.key),
            // As evaluation reads it: a stored word that is not allow/deny is no override.
            send_policy: stored
                .entry
                .send_policy
                .as_deref()
                .and_then(|p| p.parse().ok()),
            effective: policy_view(&decision),
        })
    }
}

/// A key must be short and printable: it is stored, compared and quoted in refusals.
fn check_idempotency_key(k: &str) -> Result<(), ApiError> {
    let max = idempotency::MAX_KEY_LEN;
    if k.is_empty() || k.len() > max || k.chars().any(char::is_control) {
        return Err(ApiError::BadInput(format!(
            "idempotencyKey must be 1 to {max} bytes without control characters (a UUID is typical)"
        )));
    }
    Ok(())
}

/// A repeat is answered as the first call only when it is the same message to the same
/// session; a key reused for anything else is refused, never mapped to the first run.
fn repeat_matches(
    first: &switchboard_store::KeyRow,
    key: &SessionKey,
    text_hash: &str,
    first_shown: &str,
) -> Result<(), ApiError> {
    let window = idempotency::TTL.as_secs() / 60;
    if first.session_key != key.as_str() {
        return Err(ApiError::BadInput(format!(
            "idempotencyKey {:?} was already used for a message to {first_shown} in the last {window} minutes; a key names one message to one session: use a new key for this one",
            first.key
        )));
    }
    if first.message_hash != text_hash {
        return Err(ApiError::BadInput(format!(
            "idempotencyKey {:?} was already used for a different message to {first_shown} in the last {window} minutes; a retry must repeat the same text, a new message needs a new key",
            first.key
        )));
    }
    Ok(())
}

fn still_running(run_id: &str) -> RunResult {
    RunResult {
        run_id: run_id.to_string(),
        status: RunStatus::Running,
        reply: String::new(),
        error: None,
    }
}

#[async_trait]
impl SessionsApi for Engine {
    async fn status(&self) -> Result<Status, ApiError> {
        Ok(Status {
            attached: self.state_dir().display().to_string(),
            sessions: self.store().count().await?,
        })
    }

    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        Ok(self.sessions_page(&query).await?)
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        let key = SessionKey::from_canonical(key);
        let Some(s) = self.store().get(&key).await? else {
            return Ok(None);
        };
        let entry = super::tools::owner_row(self, &key)
            .await?
            .unwrap_or(Value::Null);
        Ok(Some(SessionDetail {
            row: self.row_of(&s),
            entry,
        }))
    }

    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        Ok(self.transcript_page(&query).await?)
    }

    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        let key = self.resolve(raw, purpose).await?;
        Ok(ResolvedKey {
            display_key: self.store().scheme().display(&key),
            // Not `get(..).await`: this call must not wait (see `exists_now`).
            exists: self.store().exists_now(&key)?,
            key: key.to_string(),
        })
    }

    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        self.send_in_order(request).await
    }

    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        self.run_result(run_id, limit).await
    }

    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        Ok(self.tracker().group_idle_for(work.0, limit).await)
    }

    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        Ok(self.tracker().group_running(work.0))
    }

    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
        self.tool_call(call).await
    }

    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        self.patch_session(request).await
    }

    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        Ok(self
            .store()
            .delete(&SessionKey::from_canonical(key))
            .await?)
    }

    async fn abort(&self, key: &str, run_id: Option<&str>) -> Result<AbortOutcome, ApiError> {
        let run_ids = self.runner().abort(key, run_id);
        if !run_ids.is_empty() {
            tracing::info!(key, ?run_ids, "the owner aborted runs");
        }
        for id in &run_ids {
            // The turn is already dropped; what is left is writing its end.
            if let Some(mut run) = self.runs().live(id)
                && run.wait_for(ABORT_SETTLE).await.is_none()
            {
                tracing::warn!(run_id = %id, "an aborted run has not recorded its end yet");
            }
        }
        Ok(AbortOutcome { run_ids })
    }

    async fn exchanges(&self, query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        Ok(self.exchanges_page(&query).await?)
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        Ok(self.exchange_detail(id).await?)
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        Ok(self.traffic_since(since).await?)
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        Ok(super::tools::agents::configured(self.config()))
    }

    fn subscribe(&self) -> EventStream {
        self.watch_other_processes();
        EventStream::new(self.events().subscribe_numbered())
    }
}
