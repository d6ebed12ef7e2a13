//! Outbound delivery to a session's channel (announces, replies to channel messages): the
//! route, the send-policy gate, and the `outbox` row a channel adapter will send from (none
//! ship yet, so rows stay `queued`).

use std::sync::Arc;

use switchboard_store::{OutboxRow, OutboxStatus};
use crate::context::Context;
use switchboard_types::entry::SessionEntry;
use crate::events::EngineEvent;
use switchboard_types::api::SendKind;
use switchboard_types::key::{SessionKey, group_channel_of};

use switchboard_store::StoreError;
use crate::session::store::now_ms;

/// Where a session's outbound messages go (reference §5.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub channel: String,
    pub to: String,
    pub account_id: Option<String>,
    pub thread_id: Option<String>,
}

/// What happened to one outbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Queued in the outbox for `route`.
    Queued { route: Route, outbox_id: i64 },
    /// The send policy refused it; `reason` says which rule or override.
    Blocked { reason: String },
    /// The session has no external route (no channel and recipient known).
    NoRoute,
}

/// Channels that are not an outside destination: the console and engine-internal sessions.
fn is_internal(channel: &str) -> bool {
    matches!(channel, "webchat" | "internal" | "unknown" | "")
}

/// The route for `key`: a group/channel key names its own (`<chan>` + `group:<id>` /
/// `channel:<id>`); otherwise the entry's delivery context (`channel` and `to` both needed).
pub fn route_for(key: &SessionKey, entry: &SessionEntry) -> Option<Route> {
    let ctx = entry.delivery_context.clone().unwrap_or_default();
    let account_id = ctx.account_id.clone().or(entry.last_account_id.clone());
    let thread_id = ctx.thread_id.as_ref().map(|t| match t {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    if let Some(channel) = group_channel_of(key.rest()) {
        let rest = key.rest();
        let after = &rest[channel.len() + 1..];
        let mut parts = after.splitn(3, ':');
        if let (Some(kind), Some(id)) = (parts.next(), parts.next())
            && !is_internal(channel)
        {
            // A forum topic's session (`…:group:<id>:topic:<thread>`) answers in its topic.
            let topic = parts
                .next()
                .and_then(|rest| rest.strip_prefix("topic:"))
                .map(str::to_string);
            return Some(Route {
                channel: channel.to_string(),
                to: format!("{kind}:{id}"),
                account_id,
                thread_id: thread_id.or(topic),
            });
        }
    }
    let channel = entry.effective_last_channel()?;
    let to = entry.effective_last_to()?;
    if is_internal(channel) {
        return None;
    }
    Some(Route {
        channel: channel.to_string(),
        to: to.to_string(),
        account_id,
        thread_id,
    })
}

/// The delivery service: what leaves a session for its channel. Needs nothing of the other
/// services, only the shared context.
#[derive(Clone)]
pub struct Delivery {
    ctx: Arc<Context>,
}

impl Delivery {
    pub(crate) fn new(ctx: Arc<Context>) -> Delivery {
        Delivery { ctx }
    }

    internal_fn! {
        /// Send `text` out of session `key` (`kind`: `announce` | `reply`), if its policy and
        /// route allow.
        async fn deliver(
            &self,
            key: &SessionKey,
            kind: SendKind,
            text: &str,
            run_id: Option<&str>,
            exchange_id: Option<&str>,
        ) -> Result<Delivered, StoreError> {
            let Some(stored) = self.ctx.store().get(key).await? else {
                return Ok(Delivered::NoRoute);
            };
            let Some(route) = route_for(key, &stored.entry) else {
                return Ok(Delivered::NoRoute);
            };
            let decision = self.ctx.judge_policy(key, &stored.entry, kind, None);
            if !decision.is_allowed() {
                return Ok(Delivered::Blocked {
                    reason: format!(
                        "send policy of {key} denies outbound messages: {}",
                        decision.source
                    ),
                });
            }
            let row = OutboxRow {
                id: 0,
                created_at: now_ms(),
                session_key: key.to_string(),
                kind: kind.as_str().to_string(),
                channel: route.channel.clone(),
                to: route.to.clone(),
                account_id: route.account_id.clone(),
                thread_id: route.thread_id.clone(),
                text: text.to_string(),
                status: OutboxStatus::Queued,
                run_id: run_id.map(str::to_string),
                flow_id: exchange_id.map(str::to_string),
                ..OutboxRow::default()
            };
            let outbox_id = self.ctx.store().backend().insert_outbox(row).await?;
            self.ctx.events().emit(EngineEvent::Delivery {
                key: key.to_string(),
                kind,
                channel: route.channel.clone(),
                to: route.to.clone(),
                account_id: route.account_id.clone(),
                text: text.to_string(),
                outbox_id,
            });
            Ok(Delivered::Queued { route, outbox_id })
        }
    }

    internal_fn! {
        /// A session's outbox, oldest first.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests read it
        async fn outbox(&self, key: &SessionKey) -> Result<Vec<OutboxRow>, StoreError> {
            self.ctx.store().backend().outbox_of(key.as_str()).await
        }
    }
}
