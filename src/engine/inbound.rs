//! Messages arriving from outside (a channel, the console, `switchboard inject`): the
//! session is created on first contact with its channel facts, and the user message recorded.

use serde_json::{Map, Value, json};

use super::Engine;
use super::key::SessionKey;
use super::storage::StorageError;
use super::storage::queries::TranscriptRow;
use super::store::{SessionInit, now_ms};

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
    /// Record `text` arriving in session `key` (created if new).
    pub async fn record_inbound(
        &self,
        key: &SessionKey,
        text: &str,
        from: &Inbound,
    ) -> Result<InboundRecorded, StorageError> {
        let chat_type = from
            .chat_type
            .clone()
            .or_else(|| super::key::chat_type_of(key.rest()).map(str::to_string));
        let init = SessionInit {
            channel: from.channel.clone(),
            chat_type,
            display_name: from.display_name.clone(),
            to: from.sender.clone(),
            ..SessionInit::default()
        };
        let (_, created) = self.store().ensure(key, init).await?;
        if !created && from.channel.is_some() {
            // A known session learns the route its latest message came by.
            let channel = from.channel.clone();
            let to = from.sender.clone();
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
