//! The sessions service: sessions as front ends see them (rows, pages, transcripts, key
//! resolution, the policy patch) and messages arriving into them (inbound.rs: recorded in
//! each session's order, then answered by a run).

use std::sync::Arc;


use crate::context::Context;
use crate::runs::{Runs, lane};
use crate::session::policy;
use crate::session::transcript_text;
use switchboard_store::SessionScan;
use switchboard_store::StoreError;
use switchboard_store::{PageFilter, StoredSession, TranscriptRow};
use switchboard_types::api::*;
use switchboard_types::key::{KeyError, KeyInput, SessionKey, classify_input};

/// The most transcript lines one page returns.
pub const TRANSCRIPT_PAGE_MAX: usize = 20_000;
/// The most sessions one page returns.
pub const SESSIONS_PAGE_MAX: usize = 5_000;
/// The sessions service (see the module comment).
pub struct Sessions {
    pub(crate) ctx: Arc<Context>,
    pub(crate) runs: Arc<Runs>,
    /// Each session's line of incoming messages: recorded in the order they were sent.
    pub(crate) intake: lane::Lanes,
}

impl Sessions {
    pub(crate) fn new(ctx: Arc<Context>, runs: Arc<Runs>) -> Sessions {
        Sessions {
            ctx,
            runs,
            intake: lane::Lanes::default(),
        }
    }

    pub(crate) fn row_of(&self, s: &StoredSession) -> SessionRow {
        let scheme = self.ctx.store().scheme();
        let display_key = scheme.display(&s.key);
        let name = s.entry.shown_name(&display_key).to_string();
        SessionRow {
            key: s.key.to_string(),
            display_key,
            kind: s.kind,
            agent_id: s.agent_id.clone(),
            channel: crate::tools::row::channel_of(s),
            name,
            label: s.entry.label.clone(),
            display_name: s.entry.display_name.clone(),
            session_id: s.entry.session_id.clone(),
            updated_at: s.updated_at(),
            policy: PolicyView::from(&policy::evaluate(self.ctx.config(), &s.key, &s.entry)),
            running: self.runs.runner().is_running(s.key.as_str()),
            archived: s.entry.archived_at.is_some(),
            agents_stopped: s.entry.agent_send_policy.is_some(),
            entry: None,
            last_message: None,
        }
    }

    /// A page's row, with the owner entry when the query asks for it (built from the row
    /// already read, so a listing with entries costs no more reads than one without).
    fn listed_row(&self, s: &StoredSession, q: &SessionsQuery) -> SessionRow {
        let mut row = self.row_of(s);
        if q.entries {
            row.entry = Some(crate::tools::owner_entry(&self.ctx, s));
        }
        row
    }

    /// Each row's last message (its start), for a query that asks for `previews`: one
    /// index lookup from the end of each row's transcript, all in one statement.
    async fn fill_previews(&self, rows: &mut [SessionRow]) -> Result<(), StoreError> {
        let ids: Vec<String> = rows.iter().map(|r| r.session_id.clone()).collect();
        let last = self.ctx.store().backend().last_messages(ids).await?;
        apply_previews(rows, last);
        Ok(())
    }

    /// A text filter decodes rows as it goes (names live in the entry): up to the page's
    /// end, and on through every match when a count is asked.
    async fn sessions_matching_text(&self, q: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let scheme = self.ctx.store().scheme();
        let scan = SessionScan {
            kinds: (!q.kinds.is_empty()).then(|| q.kinds.clone()),
            updated_since: q.active_since,
            by_name: q.order == SessionsOrder::Name,
            // Without a count, the page's end is as far as a scan with no text goes.
            wanted: (!q.count && q.text.is_empty()).then(|| q.offset.saturating_add(q.limit)),
            ..SessionScan::default()
        };
        let needle = q.text.to_lowercase();
        let end = q.offset.saturating_add(q.limit);
        let mut rows = Vec::new();
        let mut matching = 0u64;
        self.ctx.store()
            .scan(&scan, |s| {
                let listed = !s.key.is_unknown() && (!s.key.is_global() || scheme.global_scope);
                if !listed || (s.entry.archived_at.is_some() && !q.archived) {
                    return true;
                }
                if !needle.is_empty() {
                    let name = s.entry.name();
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
            total: self.ctx.store().count().await?,
            order: q.order,
        })
    }

    /// What one page read narrows to, for a query without text and with at most one kind.
    fn page_filter(&self, q: &SessionsQuery) -> PageFilter {
        PageFilter {
            kind: q.kinds.first().copied(),
            updated_since: q.active_since,
            archived: q.archived,
            show_global: self.ctx.store().scheme().global_scope,
            by_name: q.order == SessionsOrder::Name,
        }
    }

    /// `sessions_page` as keys and revisions, for the queries it answers with one page read
    /// (no text, at most one kind, no previews); `None` for the others.
    pub(crate) async fn revisions_page(
        &self,
        q: &SessionsQuery,
    ) -> Result<Option<RevisionsPage>, StoreError> {
        if !q.text.is_empty() || q.kinds.len() > 1 || q.previews {
            return Ok(None);
        }
        let filter = self.page_filter(q);
        let limit = q.limit.min(SESSIONS_PAGE_MAX);
        let page = self
            .ctx
            .store()
            .backend()
            .page_revisions(filter, q.offset, limit, q.count)
            .await?;
        let runner = self.runs.runner();
        let rows = page
            .rows
            .into_iter()
            .map(|r| {
                let running = runner.is_running(r.key.as_str());
                let revision = RowRevision {
                    rev: r.revision.rev,
                    updated_at: r.revision.updated_at,
                    running,
                };
                (r.key.to_string(), r.agent_id, revision)
            })
            .collect();
        Ok(Some(RevisionsPage {
            rows,
            matching: page.matching,
            total: page.total,
        }))
    }

    /// The named sessions' rows with their owner entries, each with its revision as read.
    pub(crate) async fn rows_by_key(
        &self,
        keys: Vec<String>,
    ) -> Result<Vec<(SessionRow, RowRevision)>, StoreError> {
        let keys = keys.into_iter().map(SessionKey::from_canonical).collect();
        let read = self.ctx.store().backend().sessions_by_key(keys).await?;
        let q = SessionsQuery {
            entries: true,
            ..SessionsQuery::default()
        };
        Ok(read
            .into_iter()
            .map(|(s, revision)| {
                let row = self.listed_row(&s, &q);
                let revision = RowRevision {
                    rev: revision.rev,
                    updated_at: revision.updated_at,
                    running: row.running,
                };
                (row, revision)
            })
            .collect())
    }

    pub(crate) async fn sessions_page(&self, q: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let mut q = q.clone();
        q.limit = q.limit.min(SESSIONS_PAGE_MAX);
        if !q.text.is_empty() || q.kinds.len() > 1 {
            return self.sessions_matching_text(&q).await;
        }
        let filter = self.page_filter(&q);
        // One read for the whole page: keys, rows, previews and the counts.
        let page = self
            .ctx
            .store()
            .backend()
            .page_sessions(filter, q.offset, q.limit, q.count, q.previews)
            .await?;
        let mut rows: Vec<_> = page.rows.iter().map(|s| self.listed_row(s, &q)).collect();
        if q.previews {
            apply_previews(&mut rows, page.last);
        }
        Ok(SessionsPage {
            rows,
            offset: q.offset,
            matching: page.matching,
            total: page.total,
            order: q.order,
        })
    }

    pub(crate) async fn transcript_page(&self, q: &TranscriptQuery) -> Result<TranscriptPage, StoreError> {
        let key = SessionKey::from_canonical(q.key.clone());
        // The id alone: the entry (up to 30 KB from OpenClaw) is not decoded for a page.
        let Some(sid) = self.ctx.store().session_id_of(&key).await? else {
            return Ok(TranscriptPage {
                key: q.key.clone(),
                exists: false,
                ..TranscriptPage::default()
            });
        };
        let limit = q.limit.clamp(1, TRANSCRIPT_PAGE_MAX);
        let (rows, last_seq) = self
            .ctx
            .store()
            .backend()
            .transcript_page(&sid, q.before, limit, q.tools)
            .await?;
        Ok(TranscriptPage {
            key: q.key.clone(),
            exists: true,
            lines: rows
                .into_iter()
                .filter_map(|r| transcript_text::line_of(r.seq, r.line, q.raw, q.bare))
                .collect(),
            last_seq,
            left_out: 0,
        })
    }

    /// An existing session named by key or session id.
    async fn find_existing(&self, raw: &str) -> Result<SessionKey, ApiError> {
        let scheme = self.ctx.store().scheme();
        let key = match scheme.canonicalize(raw, &scheme.default_agent) {
            Err(e @ KeyError::Forbidden { .. }) => return Err(e.into()),
            other => other.ok(),
        };
        if let Some(k) = &key
            && self.ctx.store().get(k).await?.is_some()
        {
            return Ok(k.clone());
        }
        if let KeyInput::Candidate(s) = classify_input(raw)
            && let Some(k) = self
                .ctx
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

    pub(crate) async fn resolve(&self, raw: &str, purpose: KeyPurpose) -> Result<SessionKey, ApiError> {
        let scheme = self.ctx.store().scheme();
        match purpose {
            KeyPurpose::Existing => self.find_existing(raw).await,
            KeyPurpose::Requester => Ok(self.ctx.requester_key(raw)?),
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

    /// Set or lift the session's stop of agent-to-agent sends into it (its entry's
    /// `agentSendPolicy`), as the owner asks.
    pub(crate) async fn set_agent_sends(
        &self,
        key: &str,
        stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        let key = SessionKey::from_canonical(key.to_string());
        if self.ctx.store().get(&key).await?.is_none() {
            return Err(ApiError::NotFound(format!("no session found: {key}")));
        }
        let stored = self
            .ctx
            .store()
            .patch(&key, move |e| {
                e.agent_send_policy =
                    stopped.then(|| switchboard_types::entry::AGENT_SENDS_STOPPED.to_string());
                Ok(())
            })
            .await?;
        self.ctx.events().emit(crate::events::EngineEvent::AgentSendsChanged {
            key: key.to_string(),
            stopped,
            by: "patch".into(),
        });
        Ok(AgentSendsResult {
            key: stored.key.to_string(),
            display_key: self.ctx.store().scheme().display(&stored.key),
            stopped: stored.entry.agent_send_policy.is_some(),
        })
    }

    pub(crate) async fn patch_session(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        let Some(change) = request.send_policy else {
            return Err(ApiError::BadInput(
                "nothing to change: give a send policy (allow, deny or inherit)".into(),
            ));
        };
        let key = SessionKey::from_canonical(request.key.clone());
        if self.ctx.store().get(&key).await?.is_none() {
            return Err(ApiError::NotFound(format!("no session found: {key}")));
        }
        let value = change.stored().map(str::to_string);
        let stored = self
            .ctx
            .store()
            .patch(&key, move |e| {
                // The writer may run this closure twice (batch replay), so it clones each time.
                e.send_policy = value.clone();
                Ok(())
            })
            .await?;
        self.ctx.events()
            .emit(crate::events::EngineEvent::PolicyChanged {
                key: key.to_string(),
                policy: change,
                by: "patch".into(),
            });
        let decision = policy::evaluate(self.ctx.config(), &stored.key, &stored.entry);
        Ok(PatchResult {
            key: stored.key.to_string(),
            display_key: self.ctx.store().scheme().display(&stored.key),
            // As evaluation reads it: a stored word that is not allow/deny is no override.
            send_policy: stored
                .entry
                .send_policy
                .as_deref()
                .and_then(|p| p.parse().ok()),
            effective: PolicyView::from(&decision),
        })
    }
}

/// Each row's last message line (`last`, in `rows`' order) as its one-line preview.
fn apply_previews(rows: &mut [SessionRow], last: Vec<Option<TranscriptRow>>) {
    /// Enough for the widest preview column; the rest would only cross the wire.
    const PREVIEW_CHARS: usize = 120;
    for (row, last) in rows.iter_mut().zip(last) {
        row.last_message = last.and_then(|r| {
            let line = transcript_text::line_of(r.seq, r.line, false, false)?;
            let one: String = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
            Some(one.chars().take(PREVIEW_CHARS).collect())
        });
    }
}
