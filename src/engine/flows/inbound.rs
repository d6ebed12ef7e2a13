//! Messages arriving from outside (a channel, the console, `switchboard inject`): the
//! session is created on first contact with its channel facts, the user message recorded,
//! and a run of the session's agent started (or the owner's `/send` command handled).

use serde_json::{Map, Value, json};

use crate::engine::Engine;
use crate::engine::events::EngineEvent;
use crate::engine::session::key::SessionKey;
use crate::engine::session::policy::{self, SendCommand};
use crate::engine::flows::runs::{RunHandle, RunRequest};
use crate::engine::storage::StorageError;
use crate::engine::storage::queries::TranscriptRow;
use crate::engine::session::store::{SessionInit, now_ms};

/// Who sent an inbound message and over what.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inbound {
    pub channel: Option<String>,
    /// `direct` | `group` | `channel`.
    pub chat_type: Option<String>,
    pub display_name: Option<String>,
    pub sender: Option<String>,
    /// The sender is the gateway's owner (owner-only commands such as `/send`).
    pub owner: bool,
}

/// What recording an inbound message did.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundRecorded {
    pub key: SessionKey,
    pub created: bool,
    pub row: TranscriptRow,
}

impl Engine {
    internal_fn! {
        /// Record `text` arriving in session `key` (created if new).
        async fn record_inbound(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<InboundRecorded, StorageError> {
            let chat_type = from
                .chat_type
                .clone()
                .or_else(|| crate::engine::session::key::chat_type_of(key.rest()).map(str::to_string));
            // In a group the sender is one member, not where replies go: the group's own id
            // (from its key) is the route, so the sender is not recorded as `to`.
            let group = matches!(chat_type.as_deref(), Some("group" | "channel"));
            let to = if group { None } else { from.sender.clone() };
            let init = SessionInit {
                channel: from.channel.clone(),
                chat_type,
                display_name: from.display_name.clone(),
                to: to.clone(),
                ..SessionInit::default()
            };
            let (_, created) = self.store().ensure(key, init).await?;
            if !created && from.channel.is_some() {
                // A known session learns the route its latest message came by.
                let channel = from.channel.clone();
                let display_name = from.display_name.clone();
                self.store()
                    .patch(key, move |e| {
                        if let Some(ch) = &channel {
                            e.last_channel = Some(ch.clone());
                            let dc = e.delivery_context.get_or_insert_with(Default::default);
                            dc.channel = Some(ch.clone());
                            if to.is_some() {
                                dc.to = to.clone();
                                e.last_to = to.clone();
                            }
                        }
                        if display_name.is_some() {
                            e.display_name = display_name.clone();
                        }
                        Ok(())
                    })
                    .await?;
            }
            let mut message = Map::new();
            message.insert("role".into(), json!("user"));
            message.insert("content".into(), json!([{ "type": "text", "text": text }]));
            message.insert("timestamp".into(), json!(now_ms()));
            message.insert("provenance".into(), json!({ "kind": "external_user" }));
            if let Some(sender) = &from.sender {
                message.insert("senderLabel".into(), json!(sender));
            }
            if from.owner {
                message.insert("senderIsOwner".into(), json!(true));
            }
            let row = self
                .store()
                .append_message(key, Value::Object(message))
                .await?;
            Ok(InboundRecorded {
                key: key.clone(),
                created,
                row,
            })
        }
    }
}

/// What an inbound message set off.
#[derive(Debug)]
pub struct Received {
    pub recorded: InboundRecorded,
    /// The run answering it (none for an owner command, which the engine answers itself).
    pub run: Option<RunHandle>,
    /// The engine's own reply to an owner command (`/send …`).
    pub command_reply: Option<String>,
}

impl Engine {
    internal_fn! {
        /// An inbound message: recorded, then either handled as the owner's `/send` command or
        /// answered by a run of the session's agent (cron/hook/node keys use the default agent).
        ///
        /// The owner's `/send` works whatever the session's policy is, so `/send on` always
        /// undoes `/send off`. From anyone else it is an ordinary message (OpenClaw ignores
        /// the command silently; the agent still sees the text).
        async fn receive(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<Received, StorageError> {
            let recorded = self.record_inbound(key, text, from).await?;
            let command = if from.owner {
                policy::parse_send_command(text)
            } else {
                None
            };
            if let Some(cmd) = command {
                if let SendCommand::Set(p) = cmd {
                    let value = p.map(|p| p.as_str().to_string());
                    self.store()
                        .patch(key, move |e| {
                            e.send_policy = value.clone();
                            Ok(())
                        })
                        .await?;
                    self.events().emit(EngineEvent::PolicyChanged {
                        key: key.to_string(),
                        policy: p.map(|p| p.as_str()).unwrap_or("inherit").to_string(),
                        by: "/send".into(),
                    });
                }
                let reply = policy::send_command_reply(&cmd);
                self.store()
                    .append_message(
                        key,
                        json!({
                            "role": "assistant",
                            "content": [{ "type": "text", "text": reply }],
                            "stopReason": "stop",
                            "timestamp": now_ms(),
                            "__switchboard": { "command": "send" },
                        }),
                    )
                    .await?;
                return Ok(Received {
                    recorded,
                    run: None,
                    command_reply: Some(reply),
                });
            }
            let agent = key
                .agent_id(&self.store().scheme().default_agent)
                .to_string();
            let mut req = RunRequest::reply_to(key.clone(), text);
            req.sandboxed = self.config().agent_sandboxed(&agent);
            let run = self.start_run(req);
            Ok(Received {
                recorded,
                run: Some(run),
                command_reply: None,
            })
        }
    }
}
