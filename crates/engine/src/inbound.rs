//! Messages arriving from outside (a channel, the console, `switchboard inject`): the
//! session is created on first contact with its channel facts, the user message recorded,
//! and a run of the session's agent started (or the owner's `/send` command handled).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::sessions::Sessions;
use switchboard_types::api::{ApiError, KeyPurpose, SendReceipt, SendRequest, WorkId};
use crate::events::EngineEvent;
use switchboard_types::key::SessionKey;
use crate::session::policy::{self, PolicySetting, SendCommand};
use crate::agent::Step;
use crate::runs::{RunHandle, RunRequest};
use crate::tools::context::ToolHost;
use switchboard_store::StoreError;
use switchboard_store::idempotency::{self, message_hash};
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

impl Sessions {
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
        let (_, created) = self.ctx.store().ensure(key, init).await?;
        if !created && from.channel.is_some() {
            let channel = from.channel.clone();
            let display_name = from.display_name.clone();
            self.ctx.store()
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
                .ctx
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

impl Sessions {
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
            tools: &Arc<dyn ToolHost>,
        ) -> Result<Received, StoreError> {
            match self.receive_keyed(key, text, from, None, tools).await? {
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
            tools: &Arc<dyn ToolHost>,
        ) -> Result<Intake, StoreError> {
            if let Some(k) = idempotency_key {
                let found = self
                    .ctx
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
                .agent_id(&self.ctx.store().scheme().default_agent)
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
                owner: self.ctx.instance_id().to_string(),
                started_at: now,
            });
            // The message, its run and its key commit together; a key another call
            // recorded since the read above keeps all of them out.
            let pending = self.ctx.store().submit_inbound(InboundWrite {
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
            req.sandboxed = self.ctx.config().agent_sandboxed(&agent);
            req.start_recorded = true;
            let run = self.runs.start_with_id(run_id, req, tools);
            Ok(Intake::Received(Received {
                recorded,
                run: Some(run),
                command_reply: None,
            }))
        }
    }
}

impl Sessions {
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
            self.ctx.store()
                .patch(key, move |e| {
                    e.send_policy = value.clone();
                    Ok(())
                })
                .await?;
            self.ctx.events().emit(EngineEvent::PolicyChanged {
                key: key.to_string(),
                policy: PolicySetting::from_policy(p),
                by: "/send".into(),
            });
        }
        self.ctx.store()
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

impl Sessions {
    pub(crate) async fn send_in_order(
        self: &Arc<Self>,
        request: SendRequest,
        tools: &Arc<dyn ToolHost>,
    ) -> Result<SendReceipt, ApiError> {
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
        let place = self.intake.enter(key.as_str());
        let from = Inbound {
            channel: request.from.channel.map(|c| c.trim().to_ascii_lowercase()),
            chat_type: request.from.chat_type,
            display_name: request.from.display_name,
            sender: request.from.sender,
            owner: request.from.owner,
        };
        let group = self.ctx.tracker().open_group();
        let work = WorkId(group.id);
        // Once the call has begun, it is carried through on a task of its own: a caller
        // that goes away (a dropped future, a closed connection) must not leave a message
        // recorded and never answered, nor its place in line held.
        let (sessions, tools) = (self.clone(), tools.clone());
        let text = request.text;
        let idempotency_key = request.idempotency_key;
        // What a repeat is compared by (the text itself may be megabytes: not kept twice).
        let text_hash = idempotency_key
            .as_ref()
            .map(|_| idempotency::message_hash(&text));
        let what = format!("recording a message into {key}");
        let k = key.clone();
        let recording = self.ctx.tracker().spawn(what, async move {
            let turn = place.turn().await;
            let received = group
                .scope(sessions.receive_keyed(&k, &text, &from, idempotency_key.as_deref(), &tools))
                .await;
            drop(turn);
            received
        });
        let intake = recording
            .await
            .map_err(|e| ApiError::Unavailable(format!("recording the message stopped: {e}")))??;
        let scheme = self.ctx.store().scheme();
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
