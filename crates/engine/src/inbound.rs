//! Messages arriving from outside (a channel, the console, `switchboard inject`): the
//! session is created on first contact with its channel facts, the user message recorded,
//! and a run of the session's agent started (or the owner's `/send` command handled).

use serde_json::{Map, Value, json};

use crate::Engine;
use crate::events::EngineEvent;
use switchboard_types::key::SessionKey;
use crate::session::policy::{self, PolicySetting, SendCommand};
use crate::agent::Step;
use crate::runs::{RunHandle, RunRequest};
use switchboard_store::StoreError;
use switchboard_store::idempotency::message_hash;
use switchboard_store::{InboundWrite, KeyRow, NewLine, NewRunRecord, TranscriptRow};
use crate::session::store::{SessionInit, now_ms};

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
    /// The session a message from `from` arrives in: created on first contact with the
    /// channel facts, or taught the route its latest message came by. Returns whether it
    /// was created.
    async fn session_for_inbound(
        &self,
        key: &SessionKey,
        from: &Inbound,
    ) -> Result<bool, StoreError> {
        let chat_type = from
            .chat_type
            .clone()
            .or_else(|| switchboard_types::key::chat_type_of(key.rest()).map(str::to_string));
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
        Ok(created)
    }

    internal_fn! {
        /// Record `text` arriving in session `key` (created if new), without starting a run.
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn record_inbound(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<InboundRecorded, StoreError> {
            let created = self.session_for_inbound(key, from).await?;
            let row = self
                .store()
                .append_message(key, inbound_message(text, from, None))
                .await?;
            Ok(InboundRecorded {
                key: key.clone(),
                created,
                row,
            })
        }
    }
}

/// An incoming message as recorded, in OpenClaw's shape (with its `idempotencyKey` as
/// OpenClaw writes it, `<key>:user`, when the sender gave one).
fn inbound_message(text: &str, from: &Inbound, idempotency_key: Option<&str>) -> Value {
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
    if let Some(k) = idempotency_key {
        message.insert("idempotencyKey".into(), json!(format!("{k}:user")));
    }
    Value::Object(message)
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

/// What an inbound message with an idempotency key came to.
#[derive(Debug)]
pub enum Intake {
    /// Recorded now, with whatever it set off.
    Received(Received),
    /// The key was already used within its window: nothing was recorded; this is the send
    /// it names (the caller tells a repeat from a reuse for another message).
    Repeat(KeyRow),
}

impl Engine {
    internal_fn! {
        /// An inbound message: recorded, then either handled as the owner's `/send` command or
        /// answered by a run of the session's agent (cron/hook/node keys use the default agent).
        ///
        /// The owner's `/send` works whatever the session's policy is, so `/send on` always
        /// undoes `/send off`. From anyone else it is an ordinary message (OpenClaw ignores
        /// the command silently; the agent still sees the text).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))] // tests call it
        async fn receive(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
        ) -> Result<Received, StoreError> {
            match self.receive_keyed(key, text, from, None).await? {
                Intake::Received(r) => Ok(r),
                // Without a key nothing is ever a repeat.
                Intake::Repeat(row) => Err(StoreError::rejected(format!(
                    "unexpected repeat of idempotency key {}",
                    row.key
                ))),
            }
        }
    }

    internal_fn! {
        /// `receive`, deduplicated by `idempotency_key` when one is given.
        ///
        /// The message, its run's row (`running`, this instance) and the key are one commit:
        /// once this returns, the run exists for `wait_run` and for crash recovery, which
        /// closes it with a recorded end if this process dies first; and a key is never
        /// stored without its message, nor a message without its key.
        async fn receive_keyed(
            &self,
            key: &SessionKey,
            text: &str,
            from: &Inbound,
            idempotency_key: Option<&str>,
        ) -> Result<Intake, StoreError> {
            if let Some(k) = idempotency_key {
                let found = self
                    .store()
                    .backend()
                    .find_idempotency_key(k, now_ms())
                    .await?;
                if let Some(row) = found {
                    return Ok(Intake::Repeat(row));
                }
            }
            let created = self.session_for_inbound(key, from).await?;
            let command = if from.owner {
                policy::parse_send_command(text)
            } else {
                None
            };
            let command_reply = command.as_ref().map(policy::send_command_reply);
            let agent = key
                .agent_id(&self.store().scheme().default_agent)
                .to_string();
            // Time-ordered (v7): a burst of new runs lands on the same last B-tree page.
            let run_id = command
                .is_none()
                .then(|| uuid::Uuid::now_v7().to_string());
            let now = now_ms();
            let key_row = idempotency_key.map(|k| KeyRow {
                key: k.to_string(),
                session_key: key.to_string(),
                message_hash: message_hash(text),
                run_id: run_id.clone(),
                seq: 0,
                command_reply: command_reply.clone(),
                created_at: now,
            });
            let run_row = run_id.as_ref().map(|run_id| NewRunRecord {
                run_id: run_id.clone(),
                session_key: key.to_string(),
                agent_id: agent.clone(),
                step: Step::Message,
                round: 0,
                exchange_id: None,
                owner: self.instance_id().to_string(),
                started_at: now,
            });
            // The message, its run and its key commit together; a key another call
            // recorded since the read above keeps all of them out.
            let pending = self.store().submit_inbound(InboundWrite {
                key: key.clone(),
                line: NewLine::message(inbound_message(text, from, idempotency_key)),
                run: run_row,
                idempotency: key_row,
                now,
            });
            let (mut rows, repeat) = pending.committed().await?;
            if let Some(row) = repeat {
                return Ok(Intake::Repeat(row));
            }
            let row = rows
                .pop()
                .ok_or_else(|| StoreError::corrupt("append returned no row"))?;
            let recorded = InboundRecorded {
                key: key.clone(),
                created,
                row,
            };
            let (None, Some(run_id)) = (&command, run_id) else {
                let reply = command_reply.unwrap_or_default();
                self.answer_send_command(key, command, &reply).await?;
                return Ok(Intake::Received(Received {
                    recorded,
                    run: None,
                    command_reply: Some(reply),
                }));
            };
            let mut req = RunRequest::reply_to(key.clone(), text);
            req.sandboxed = self.config().agent_sandboxed(&agent);
            req.start_recorded = true;
            let run = self.start_run_with_id(run_id, req);
            Ok(Intake::Received(Received {
                recorded,
                run: Some(run),
                command_reply: None,
            }))
        }
    }
}

impl Engine {
    /// The owner's `/send` command, recorded: the session's policy set (when it sets one)
    /// and the engine's `reply` appended in place of an agent's.
    async fn answer_send_command(
        &self,
        key: &SessionKey,
        command: Option<SendCommand>,
        reply: &str,
    ) -> Result<(), StoreError> {
        if let Some(SendCommand::Set(p)) = command {
            let value = p.map(|p| p.as_str().to_string());
            self.store()
                .patch(key, move |e| {
                    e.send_policy = value.clone();
                    Ok(())
                })
                .await?;
            self.events().emit(EngineEvent::PolicyChanged {
                key: key.to_string(),
                policy: PolicySetting::from_policy(p),
                by: "/send".into(),
            });
        }
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
        Ok(())
    }
}
