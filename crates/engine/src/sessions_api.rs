//! The engine's side of `SessionsApi`: every front end's request answered from the store,
//! the key scheme and the send policy, here and nowhere else, so front ends never need them.

use std::time::Duration;

use async_trait::async_trait;

use super::Engine;
use super::tools::{TOOL_NAMES, ToolContext, ToolError};
use switchboard_types::api::*;
use switchboard_types::key::SessionKey;

/// How long `abort` waits for an aborted run to record its end (a write, so normally
/// milliseconds; a stuck disk must not hold the caller forever).
const ABORT_SETTLE: Duration = Duration::from_secs(10);

/// The most deliveries one `deliveries` call returns.
pub const MAX_DELIVERIES: u32 = 1000;

impl From<ToolError> for ApiError {
    fn from(e: ToolError) -> ApiError {
        match e {
            ToolError::Input(e) => ApiError::BadInput(e.to_string()),
            ToolError::Storage(e) => e.into(),
        }
    }
}

#[async_trait]
impl SessionsApi for Engine {
    async fn note_failed_connect(
        &self,
        peer: Option<String>,
        limit: switchboard_types::api::ConnectLimit,
    ) -> Option<std::time::Duration> {
        match self
            .store()
            .backend()
            .note_failed_connect(peer, limit)
            .await
        {
            Ok(wait) => wait,
            Err(e) => {
                // The gateway's own limit still holds.
                tracing::debug!(error = %e, "counting a failed connect in the store failed");
                None
            }
        }
    }

    async fn status(&self) -> Result<Status, ApiError> {
        // A node whose lease lapsed or was lost is not to be counted on (`/readyz`, the
        // watchdog), whatever its store answers.
        if let Some(trouble) = self.standing().trouble() {
            return Err(ApiError::Storage {
                kind: switchboard_types::api::StorageKind::Other,
                message: trouble,
            });
        }
        Ok(Status {
            attached: self.state_dir().display().to_string(),
            sessions: self.store().count().await?,
        })
    }

    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        Ok(self.sessions.sessions_page(&query).await?)
    }

    async fn session_revisions(
        &self,
        query: &SessionsQuery,
    ) -> Result<Option<RevisionsPage>, ApiError> {
        Ok(self.sessions.revisions_page(query).await?)
    }

    async fn sessions_by_key(
        &self,
        keys: Vec<String>,
    ) -> Result<Vec<(SessionRow, RowRevision)>, ApiError> {
        Ok(self.sessions.rows_by_key(keys).await?)
    }

    async fn set_agent_sends(
        &self,
        key: &str,
        stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        self.sessions.set_agent_sends(key, stopped).await
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        let key = SessionKey::from_canonical(key);
        // Read as a view (a row and the owner's fields is all a detail shows), once: a
        // second read decoded the whole entry again (up to 30 KB from OpenClaw).
        let Some(s) = self.store().view(&key).await? else {
            return Ok(None);
        };
        let entry = super::tools::owner_entry(&self.ctx, &s);
        Ok(Some(SessionDetail {
            row: self.sessions.row_of(&s),
            entry,
        }))
    }

    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        Ok(self.sessions.transcript_page(&query).await?)
    }

    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        let key = self.sessions.resolve(raw, purpose).await?;
        Ok(ResolvedKey {
            display_key: self.store().scheme().display(&key),
            // Not `get(..).await`: this call must not wait (see `exists_now`).
            exists: self.store().exists_now(&key)?,
            key: key.to_string(),
        })
    }

    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        self.sessions
            .send_in_order(request, &self.tool_host())
            .await
    }

    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        self.runs.result(run_id, limit).await
    }

    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        Ok(self.tracker().group_idle_for(work.0, limit).await)
    }

    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        Ok(self.tracker().group_running(work.0))
    }

    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
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
            .scope(self.tools.call_tool(&call.tool, &call.params, &ctx))
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

    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        self.sessions.patch_session(request).await
    }

    async fn create(&self, key: &str, parent: Option<&str>) -> Result<bool, ApiError> {
        let key = SessionKey::from_canonical(key);
        // Made by an operator's client: a direct webchat session, as OpenClaw records it.
        let init = crate::session::store::SessionInit {
            channel: Some("webchat".into()),
            chat_type: Some("direct".into()),
            ..Default::default()
        };
        let (_, created) = self.store().ensure(&key, init).await?;
        if created && let Some(parent) = parent {
            let parent = parent.to_string();
            self.store()
                .patch(&key, move |e| {
                    e.parent_session_key = Some(parent.clone());
                    Ok(())
                })
                .await?;
        }
        Ok(created)
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
            if let Some(mut run) = self.runs.live(id)
                && run.wait_for(ABORT_SETTLE).await.is_none()
            {
                tracing::warn!(run_id = %id, "an aborted run has not recorded its end yet");
            }
        }
        Ok(AbortOutcome { run_ids })
    }

    async fn exchanges(&self, query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        Ok(self.exchanges.exchanges_page(&query).await?)
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        Ok(self.exchanges.exchange_detail(id).await?)
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        Ok(self.exchanges.traffic_since(since).await?)
    }

    async fn deliveries(&self, mut query: OutboxQuery) -> Result<Vec<OutboxRow>, ApiError> {
        // A gateway client asks for as many as it likes; a page is bounded.
        query.limit = query.limit.clamp(1, MAX_DELIVERIES);
        Ok(self.store().backend().list_outbox(query).await?)
    }

    async fn delivery_counts(&self) -> Result<Option<DeliveryCounts>, ApiError> {
        Ok(Some(self.store().backend().count_outbox().await?))
    }

    async fn retry_delivery(&self, id: i64) -> Result<Option<OutboxRow>, ApiError> {
        let row = self
            .store()
            .backend()
            .retry_outbox(id, time::now_ms())
            .await?;
        if let Some(row) = row.as_ref().filter(|r| r.status == OutboxStatus::Queued) {
            // The console and the drain hear of it: the drain wakes and sends it.
            self.delivery_updated(row);
        }
        Ok(row)
    }

    async fn pairing_ask(
        &self,
        request: pairing::PairingRequest,
    ) -> Result<pairing::PairingAnswer, ApiError> {
        let store = self.store().backend();
        let now = time::now_ms();
        // The common case, an approved sender's next message, is a read.
        if let Some(p) = store.pairing_of(&request.channel, &request.sender).await? {
            if p.approved_at.is_some() {
                return Ok(pairing::PairingAnswer::Approved);
            }
            if p.expires_at > now {
                return Ok(pairing::PairingAnswer::Waiting);
            }
        }
        let mut random = [0u8; pairing::CODE_LEN];
        getrandom::fill(&mut random)
            .map_err(|e| ApiError::storage(format!("no randomness for a pairing code: {e}")))?;
        let code = pairing::code_from(random);
        Ok(store
            .request_pairing(
                request,
                &code,
                now,
                pairing::CODE_TTL_MS,
                pairing::PENDING_MAX,
            )
            .await?)
    }

    async fn pairings(&self, channel: Option<String>) -> Result<Vec<pairing::Pairing>, ApiError> {
        Ok(self
            .store()
            .backend()
            .pairings(channel, time::now_ms())
            .await?)
    }

    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<pairing::Pairing>, ApiError> {
        let approved = self
            .store()
            .backend()
            .approve_pairing(channel, &pairing::typed_code(code), time::now_ms())
            .await?;
        if let Some(p) = &approved {
            tracing::info!(channel, sender = %p.sender, "pairing approved");
        }
        Ok(approved)
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        Ok(super::tools::agents::configured(self.config()))
    }

    fn subscribe(&self) -> EventStream {
        self.watch_other_processes();
        EventStream::new(self.events().subscribe_numbered())
    }
}
