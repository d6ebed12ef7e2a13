//! What a connection subscribed to, and the tasks that turn engine events into its event
//! frames (`switchboard.subscribe`: every engine event as `switchboard.event`).

use std::sync::Arc;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::outbox::Outbox;
use crate::api::{EventStream, SessionsApi, StreamItem};
use crate::protocol::switchboard::{self, GapPayload, SubscribeResult};

/// A connection's subscriptions; their tasks end with it (dropped → aborted).
#[derive(Default)]
pub struct Subscriptions {
    switchboard: Option<JoinHandle<()>>,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        if let Some(task) = self.switchboard.take() {
            task.abort();
        }
    }
}

impl Subscriptions {
    /// `switchboard.subscribe`: the stream is opened before the answer is queued and
    /// forwarded only after it, so no event is lost and none overtakes the answer. A
    /// second call keeps the one stream.
    pub fn subscribe_switchboard(
        &mut self,
        api: &Arc<dyn SessionsApi>,
        outbox: &Arc<Outbox>,
        id: String,
    ) {
        if self.switchboard.is_some() {
            let _ = outbox.response(id, Ok(answer()));
            return;
        }
        let stream = api.subscribe();
        if outbox.response(id, Ok(answer())).is_err() {
            return;
        }
        self.switchboard = Some(tokio::spawn(forward(stream, outbox.clone())));
    }
}

fn answer() -> Value {
    // The engine's current number is not part of `SessionsApi`; the first event's `seq`
    // tells the client where the stream starts.
    serde_json::to_value(SubscribeResult { seq: None }).unwrap_or(Value::Null)
}

/// Every engine event as a `switchboard.event`, and word of any gap, until the engine's
/// stream or the connection ends.
async fn forward(mut stream: EventStream, outbox: Arc<Outbox>) {
    loop {
        let queued = match stream.next().await {
            StreamItem::Event(e) => match serde_json::to_value(&e) {
                Ok(v) => outbox.event(switchboard::EVENT, v),
                Err(err) => {
                    tracing::error!(error = %err, "an engine event could not be encoded");
                    continue;
                }
            },
            StreamItem::Missed(missed) => {
                tracing::warn!(missed, "a subscriber's engine stream lost events");
                match serde_json::to_value(GapPayload { missed }) {
                    Ok(v) => outbox.event(switchboard::GAP, v),
                    Err(_) => continue,
                }
            }
            StreamItem::Closed => return,
        };
        if queued.is_err() {
            return;
        }
    }
}
