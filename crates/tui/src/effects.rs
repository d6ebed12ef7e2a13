//! The console's effects and the runner that carries them out against a `SessionsApi`, in
//! tokio tasks off the UI task; each result comes back as an `Action` tagged with what it
//! was for, so `update` can drop what is no longer wanted.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::action::Action;
use switchboard_types::api::{
    ExchangesQuery, OutboxQuery, SendRequest, Sender, SessionsApi, SessionsQuery, ToolCall,
    TranscriptQuery,
};

/// Work `update` asks for; it never does it itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// A page of sessions for the filters and window of this generation.
    LoadSessions {
        generation: u64,
        query: SessionsQuery,
    },
    /// A transcript page for the selection of this generation.
    LoadTranscript {
        generation: u64,
        query: TranscriptQuery,
    },
    /// A page of exchanges for a list's (`list`) scope of this generation.
    LoadExchanges {
        list: crate::exchanges::ListId,
        generation: u64,
        query: ExchangesQuery,
    },
    /// One exchange in full, for the exchange view of this generation.
    LoadExchange { generation: u64, id: String },
    /// A message from the owner into a session (canonical key).
    Send { key: String, text: String },
    /// The traffic view's history: counts per pair and minute since `since` (ms).
    LoadTraffic { generation: u64, since: i64 },
    /// A session tool called as the `requester` session's agent.
    CallTool {
        requester: String,
        tool: &'static str,
        params: Value,
    },
    /// The configured agents, once (completion and the agent picker).
    LoadAgents,
    /// One session and its children, for the `/status` card.
    LoadStatus { key: String },
    /// Stop what runs in a session now (`/abort`).
    Abort { key: String },
    /// After a traffic stop: abort what runs in these sessions now, on a gateway whose send
    /// policy does not stop an exchange already running (nothing, on ours).
    Halt { keys: Vec<String> },
    /// Stop (or let again) only the agent-to-agent sends into these sessions
    /// (`SessionsApi::set_agent_sends`): the traffic view's narrower stop and its undo.
    AgentSends { keys: Vec<String>, stopped: bool },
    /// `/new`: resolve `raw` as a session to send into and, with `text`, send the first
    /// message (which starts it).
    NewSession { raw: String, text: Option<String> },
    /// The deliveries of session `key` (the selected one), for its transcript's marks.
    LoadDeliveries { key: String },
    /// How many deliveries stand in each status (the header, `/status`).
    LoadDeliveryCounts,
    /// Put this text on the owner's clipboard (OSC 52): written to the terminal by the
    /// loop, which owns it; the runner has nothing to do for it.
    Copy { text: String },
}

/// Runs effects against the API and posts their results to the console's queue.
pub struct Runner {
    api: Arc<dyn SessionsApi>,
    tx: UnboundedSender<Action>,
    /// The owner's messages, in the order typed, to the one task that sends them: one task
    /// per message would let them race to the engine out of order.
    outbox: UnboundedSender<(String, String)>,
}

impl Runner {
    /// A runner on the current tokio runtime.
    pub fn new(api: Arc<dyn SessionsApi>, tx: UnboundedSender<Action>) -> Runner {
        let (outbox, mut queue) = unbounded_channel::<(String, String)>();
        let (sender_api, report) = (api.clone(), tx.clone());
        tokio::spawn(async move {
            while let Some((key, text)) = queue.recv().await {
                let request = SendRequest {
                    key: key.clone(),
                    text: text.clone(),
                    from: Sender::owner(),
                    idempotency_key: None,
                };
                // Only the recording is waited for (the engine returns once the message is
                // stored), so a long run does not hold up the next message.
                let done = match sender_api.send(request).await {
                    Ok(r) => match r.command_reply {
                        Some(reply) => Action::Flash(reply, false),
                        None => Action::Flash(format!("sent to {}", r.key), false),
                    },
                    Err(e) => Action::Unsent {
                        key,
                        text,
                        error: e.to_string(),
                    },
                };
                let _ = report.send(done);
            }
        });
        Runner { api, tx, outbox }
    }

    /// Start every effect; returns at once.
    pub fn run(&self, effects: Vec<Effect>) {
        for effect in effects {
            self.start(effect);
        }
    }

    fn start(&self, effect: Effect) {
        let (api, tx) = (self.api.clone(), self.tx.clone());
        match effect {
            Effect::LoadSessions { generation, query } => {
                tokio::spawn(async move {
                    let result = Box::new(api.sessions(query).await);
                    let _ = tx.send(Action::SessionsLoaded { generation, result });
                });
            }
            Effect::LoadTranscript { generation, query } => {
                tokio::spawn(async move {
                    let key = query.key.clone();
                    let result = Box::new(api.transcript(query).await);
                    let _ = tx.send(Action::TranscriptLoaded {
                        generation,
                        key,
                        result,
                    });
                });
            }
            Effect::LoadExchanges {
                list,
                generation,
                query,
            } => {
                tokio::spawn(async move {
                    let before = query.before.clone();
                    let result = Box::new(api.exchanges(query).await);
                    let _ = tx.send(Action::ExchangesLoaded {
                        list,
                        generation,
                        before,
                        result,
                    });
                });
            }
            Effect::LoadExchange { generation, id } => {
                tokio::spawn(async move {
                    let result = Box::new(api.exchange(&id).await);
                    let _ = tx.send(Action::ExchangeLoaded {
                        generation,
                        id,
                        result,
                    });
                });
            }
            Effect::LoadTraffic { generation, since } => {
                tokio::spawn(async move {
                    let result = Box::new(api.traffic(since).await);
                    let _ = tx.send(Action::TrafficLoaded { generation, result });
                });
            }
            Effect::Send { key, text } => {
                if let Err(unsent) = self.outbox.send((key, text)) {
                    // The sending task is gone (the runtime is shutting down): say so, lose
                    // nothing silently.
                    let (key, text) = unsent.0;
                    let _ = self.tx.send(Action::Unsent {
                        key,
                        text,
                        error: "the console is closing".into(),
                    });
                }
            }
            Effect::CallTool {
                requester,
                tool,
                params,
            } => {
                tokio::spawn(async move {
                    let call = ToolCall {
                        tool: tool.to_string(),
                        params,
                        requester,
                        sandboxed: false,
                    };
                    let report = match api.call_tool(call).await {
                        Ok(r) => tool_report(tool, &r.result),
                        Err(e) => Action::Flash(format!("{tool}: {e}"), true),
                    };
                    let _ = tx.send(report);
                });
            }
            Effect::LoadDeliveries { key } => {
                tokio::spawn(async move {
                    let query = OutboxQuery {
                        limit: crate::deliveries::SESSION_ROWS,
                        session_key: Some(key.clone()),
                        ..OutboxQuery::default()
                    };
                    let result = Box::new(api.deliveries(query).await);
                    let _ = tx.send(Action::DeliveriesLoaded { key, result });
                });
            }
            Effect::LoadDeliveryCounts => {
                tokio::spawn(async move {
                    let result = Box::new(api.delivery_counts().await);
                    let _ = tx.send(Action::DeliveryCountsLoaded(result));
                });
            }
            Effect::Copy { .. } => {}
            other => super::cards::run(other, api, tx),
        }
    }
}

/// What the status line says about a tool's result.
fn tool_report(tool: &str, r: &Value) -> Action {
    let status = r["status"].as_str().unwrap_or("?");
    match r["error"].as_str() {
        Some(e) if switchboard_types::api::is_send_policy_refusal(e) => Action::Flash(
            format!(
                "{tool}: refused by the target's send policy; `/send on` in that session allows it. {e}"
            ),
            true,
        ),
        Some(e) => Action::Flash(format!("{tool}: {status}: {e}"), true),
        None => {
            let what = r["childSessionKey"]
                .as_str()
                .or(r["sessionKey"].as_str())
                .unwrap_or("");
            Action::Flash(format!("{tool}: {status} {what}"), false)
        }
    }
}
