//! `RemoteApi`: `SessionsApi` over a gateway connection, in Switchboard's own dialect
//! (`protocol::switchboard`): every call is one request carrying the API's serde types, so
//! the answers are exactly the remote engine's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
// tokio's clock, so a paused test clock drives the wait slices.
use tokio::time::Instant;

use super::rpc::{Rpc, WireEvent};
use switchboard_protocol::switchboard::{
    AbortParams, AgentSendsParams, AgentsResult, ApprovePairingParams, DeleteResult,
    DeliveriesResult, DeliveryCountsResult, DeliveryParams, EVENT, ExchangeParams, GAP, GapPayload,
    KeyParams, PairingsParams, PairingsResult, ResolveParams, StillRunningResult, TrafficParams,
    TrafficResult, WaitRunParams, WaitWorkParams, WaitWorkResult, WorkParams, decode, method,
};
use switchboard_types::api::pairing::Pairing;
use switchboard_types::api::{
    AbortOutcome, AgentInfo, AgentSendsResult, ApiError, DeliveryCounts, EventStream,
    ExchangeDetail, ExchangesPage, ExchangesQuery, Fed, KeyPurpose, Link, OutboxQuery, OutboxRow,
    PatchRequest, PatchResult, ResolvedKey, RunResult, SendReceipt, SendRequest, Sequenced,
    SessionDetail, SessionsApi, SessionsPage, SessionsQuery, Status, ToolCall, ToolResult,
    TrafficCount, TranscriptPage, TranscriptQuery, WorkId,
};

/// The longest one wait request asks the server for: well inside the link's request
/// timeout, so a long wait is a series of short requests, never a timed-out one.
const WAIT_SLICE: Duration = Duration::from_secs(20);

/// Events buffered for the API's subscribers.
const FEED_BUFFER: usize = 4096;

pub struct RemoteApi {
    rpc: Arc<dyn Rpc>,
    feed: broadcast::Sender<Fed>,
    /// Set once `switchboard.subscribe` has been asked for.
    subscribing: AtomicBool,
    /// False while the subscribe request is in flight: calls wait for it, so a call made
    /// after `subscribe()` reaches the server after the subscription (nothing it sets off
    /// is missed).
    subscribed: watch::Sender<bool>,
}

impl RemoteApi {
    /// The API over `rpc`; its events are fed to subscribers from now on.
    pub fn new(rpc: Arc<dyn Rpc>) -> Arc<RemoteApi> {
        let (feed, _) = broadcast::channel(FEED_BUFFER);
        let (subscribed, _) = watch::channel(true);
        let api = Arc::new(RemoteApi {
            rpc: rpc.clone(),
            feed: feed.clone(),
            subscribing: AtomicBool::new(false),
            subscribed,
        });
        let mut wire = rpc.events();
        tokio::spawn(async move {
            loop {
                let fed = match wire.recv().await {
                    Ok(WireEvent::Event { event, payload }) => match feed_item(&event, payload) {
                        Some(f) => f,
                        None => continue,
                    },
                    Ok(WireEvent::Reconnected) => Fed::Gap(0),
                    Err(broadcast::error::RecvError::Lagged(n)) => Fed::Gap(n),
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                // No subscriber yet is fine: a later one starts from its own `subscribe`.
                let _ = feed.send(fed);
            }
        });
        api
    }

    /// Waits for a subscribe request in flight (see `subscribed`).
    async fn settled(&self) {
        let mut rx = self.subscribed.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|done| *done)).await;
    }

    async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        m: &str,
        params: P,
    ) -> Result<R, ApiError> {
        self.settled().await;
        let params = serde_json::to_value(params).map_err(|e| ApiError::BadInput(e.to_string()))?;
        let v = self
            .rpc
            .request(m, params)
            .await
            .map_err(|e| e.into_api())?;
        decode(&format!("{m} result"), v).map_err(ApiError::Unavailable)
    }
}

/// A wire event as an item of the feed (`None`: not one of ours).
fn feed_item(event: &str, payload: Value) -> Option<Fed> {
    match event {
        EVENT => match decode::<Sequenced>("switchboard.event", payload) {
            Ok(e) => Some(Fed::Event(e)),
            Err(e) => {
                // An event we cannot read is an event missed: reload rather than guess.
                tracing::warn!(error = %e, "unreadable switchboard.event");
                Some(Fed::Gap(1))
            }
        },
        GAP => Some(Fed::Gap(
            decode::<GapPayload>("switchboard.gap", payload).map_or(0, |g| g.missed),
        )),
        _ => None,
    }
}

/// `limit` from now; a limit past any clock's range is a year (never a panic).
fn deadline(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait]
impl SessionsApi for RemoteApi {
    async fn status(&self) -> Result<Status, ApiError> {
        self.call(method::STATUS, json!({})).await
    }

    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        self.call(method::SESSIONS, query).await
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        self.call(method::SESSION, KeyParams { key: key.into() })
            .await
    }

    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        self.call(method::TRANSCRIPT, query).await
    }

    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        self.call(
            method::RESOLVE_KEY,
            ResolveParams {
                raw: raw.into(),
                purpose,
            },
        )
        .await
    }

    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        self.call(method::SEND, request).await
    }

    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        let until = deadline(limit);
        loop {
            let asked = Instant::now();
            let slice = until.saturating_duration_since(asked).min(WAIT_SLICE);
            let r: RunResult = self
                .call(
                    method::WAIT_RUN,
                    WaitRunParams {
                        run_id: run_id.into(),
                        timeout_ms: ms(slice),
                    },
                )
                .await?;
            // Asked again only when the server waited the whole slice: one that answers
            // `running` at once (a run it does not execute) is not asked in a busy loop.
            if r.status.is_over() || Instant::now() >= until || asked.elapsed() < slice {
                return Ok(r);
            }
        }
    }

    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        let until = deadline(limit);
        loop {
            let asked = Instant::now();
            let slice = until.saturating_duration_since(asked).min(WAIT_SLICE);
            let r: WaitWorkResult = self
                .call(
                    method::WAIT_WORK,
                    WaitWorkParams {
                        work,
                        timeout_ms: ms(slice),
                    },
                )
                .await?;
            if r.done || Instant::now() >= until || asked.elapsed() < slice {
                return Ok(r.done);
            }
        }
    }

    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        let r: StillRunningResult = self
            .call(method::STILL_RUNNING, WorkParams { work })
            .await?;
        Ok(r.running
            .into_iter()
            .map(|i| (i.label, Duration::from_millis(i.age_ms)))
            .collect())
    }

    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
        self.call(method::CALL_TOOL, call).await
    }

    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        self.call(method::PATCH, request).await
    }

    async fn set_agent_sends(
        &self,
        key: &str,
        stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        self.call(
            method::AGENT_SENDS,
            AgentSendsParams {
                key: key.into(),
                stopped,
            },
        )
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        let r: DeleteResult = self
            .call(method::DELETE, KeyParams { key: key.into() })
            .await?;
        Ok(r.deleted)
    }

    async fn abort(&self, key: &str, run_id: Option<&str>) -> Result<AbortOutcome, ApiError> {
        self.call(
            method::ABORT,
            AbortParams {
                key: key.into(),
                run_id: run_id.map(str::to_string),
            },
        )
        .await
    }

    async fn exchanges(&self, query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        self.call(method::EXCHANGES, query).await
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        self.call(method::EXCHANGE, ExchangeParams { id: id.into() })
            .await
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        let r: TrafficResult = self.call(method::TRAFFIC, TrafficParams { since }).await?;
        Ok(r.counts)
    }

    async fn deliveries(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, ApiError> {
        let r: DeliveriesResult = self.call(method::DELIVERIES, query).await?;
        Ok(r.deliveries)
    }

    async fn delivery_counts(&self) -> Result<Option<DeliveryCounts>, ApiError> {
        let r: DeliveryCountsResult = self.call(method::DELIVERY_COUNTS, json!({})).await?;
        Ok(r.counts)
    }

    async fn retry_delivery(&self, id: i64) -> Result<Option<OutboxRow>, ApiError> {
        self.call(method::RETRY_DELIVERY, DeliveryParams { id })
            .await
    }

    async fn pairings(&self, channel: Option<String>) -> Result<Vec<Pairing>, ApiError> {
        let r: PairingsResult = self
            .call(method::PAIRINGS, PairingsParams { channel })
            .await?;
        Ok(r.pairings)
    }

    async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<Pairing>, ApiError> {
        let params = ApprovePairingParams {
            channel: channel.to_string(),
            code: code.to_string(),
        };
        self.call(method::APPROVE_PAIRING, params).await
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        let r: AgentsResult = self.call(method::AGENTS, json!({})).await?;
        Ok(r.agents)
    }

    fn subscribe(&self) -> EventStream {
        let stream = EventStream::remote(self.feed.subscribe());
        if !self.subscribing.swap(true, Ordering::SeqCst) {
            // Outside a runtime nothing can be sent; the stream then only ever closes.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                self.subscribed.send_replace(false);
                let rpc = self.rpc.clone();
                let done = self.subscribed.clone();
                let feed = self.feed.clone();
                rt.spawn(async move {
                    if let Err(e) = rpc.request(method::SUBSCRIBE, json!({})).await {
                        // Without a subscription no event comes: say so as a gap, so the
                        // subscriber at least reloads, and log why.
                        tracing::warn!(error = %e, "switchboard.subscribe failed");
                        let _ = feed.send(Fed::Gap(0));
                    }
                    done.send_replace(true);
                });
            }
        }
        stream
    }

    fn link(&self) -> Option<Link> {
        Some(Link {
            target: self.rpc.target(),
            state: self.rpc.state(),
            unavailable: None,
        })
    }
}
