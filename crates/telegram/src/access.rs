//! Who may talk to the bot and where their message goes, with OpenClaw's settings
//! (`channels.telegram.dmPolicy`, `allowFrom`, `groupPolicy`, `groups.<chatId|*>.requireMention`):
//! a direct chat from an allowed sender goes to the agent's main session (the spec's "main
//! direct chat bucket"), a group's message to `agent:<id>:telegram:group:<chatId>` (a forum
//! topic: `…:topic:<threadId>`) when the group is allowed and, where required, the bot was
//! mentioned. Anything else is ignored with the reason, for the channel to count.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::types::{ChatKind, Message, User};

/// Direct chats and groups, as the config says them (`dmPolicy`: `open`, `allowlist`,
/// `pairing`, OpenClaw's default, where a sender not in `allowFrom` is `Admit::Unpaired` and
/// pairs with a code the owner approves, `disabled`; `groupPolicy`: `open`, `allowlist` (the
/// chats named in `groups`, or all with a `*` entry), `disabled`).
pub use switchboard_types::config::channels::{DmPolicy, GroupPolicy};

/// One group's settings (`groups.<chatId>` or `groups."*"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupRule {
    /// Only messages that mention the bot (or answer it) are taken; OpenClaw's default.
    #[serde(default)]
    pub require_mention: Option<bool>,
    /// `false` leaves the group out whatever the policy.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// The access settings of the Telegram channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub dm_policy: DmPolicy,
    /// Senders allowed in direct chats: user ids, `@usernames`, or `*`.
    pub allow_from: Vec<String>,
    pub group_policy: GroupPolicy,
    pub groups: BTreeMap<String, GroupRule>,
}

/// Why a message was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// No text or caption (a sticker, a join).
    NoText,
    /// Sent by a bot (this one included).
    FromBot,
    /// A channel post or a chat kind the bot does not serve.
    NotAChat,
    /// A direct chat from a sender not allowed.
    SenderNotAllowed,
    DirectsDisabled,
    /// A group not allowed.
    GroupNotAllowed,
    GroupsDisabled,
    /// A group message that does not mention the bot where that is required.
    NotMentioned,
}

impl Ignored {
    pub fn as_str(self) -> &'static str {
        match self {
            Ignored::NoText => "no text",
            Ignored::FromBot => "from a bot",
            Ignored::NotAChat => "not a chat",
            Ignored::SenderNotAllowed => "sender not allowed",
            Ignored::DirectsDisabled => "direct chats disabled",
            Ignored::GroupNotAllowed => "group not allowed",
            Ignored::GroupsDisabled => "groups disabled",
            Ignored::NotMentioned => "bot not mentioned",
        }
    }
}

/// What becomes of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// A direct chat: the agent's main session; replies go to `chat_id`.
    Direct {
        chat_id: i64,
        sender: String,
        display_name: String,
        text: String,
    },
    /// A direct chat from a sender not in `allowFrom` under `dmPolicy: "pairing"`: the
    /// inbox asks whether the owner approved them (else tells them a code).
    Unpaired {
        chat_id: i64,
        sender: String,
        display_name: String,
        text: String,
    },
    /// A group (or a forum topic in one).
    Group {
        chat_id: i64,
        thread_id: Option<i64>,
        title: Option<String>,
        sender: String,
        display_name: String,
        text: String,
    },
    Ignored(Ignored),
}

impl Admit {
    /// The session key for agent `agent_id`.
    pub fn key(&self, agent_id: &str) -> Option<String> {
        match self {
            Admit::Direct { .. } => Some(format!("agent:{agent_id}:main")),
            // Not known yet: the inbox decides.
            Admit::Unpaired { .. } => None,
            Admit::Group {
                chat_id, thread_id, ..
            } => Some(match thread_id {
                Some(t) => format!("agent:{agent_id}:telegram:group:{chat_id}:topic:{t}"),
                None => format!("agent:{agent_id}:telegram:group:{chat_id}"),
            }),
            Admit::Ignored(_) => None,
        }
    }
}

impl Access {
    /// Decide about `msg`, received by `bot`.
    pub fn admit(&self, msg: &Message, bot: &User) -> Admit {
        let Some(text) = msg.body().filter(|t| !t.trim().is_empty()) else {
            return Admit::Ignored(Ignored::NoText);
        };
        let Some(from) = &msg.from else {
            return Admit::Ignored(Ignored::NotAChat);
        };
        if from.is_bot {
            return Admit::Ignored(Ignored::FromBot);
        }
        let sender = from.id.to_string();
        let display_name = from.display_name();
        match msg.chat.kind {
            ChatKind::Private => {
                let allowed = match self.dm_policy {
                    DmPolicy::Open => true,
                    DmPolicy::Disabled => return Admit::Ignored(Ignored::DirectsDisabled),
                    DmPolicy::Allowlist | DmPolicy::Pairing => self.allows(from),
                };
                if !allowed && self.dm_policy == DmPolicy::Pairing {
                    return Admit::Unpaired {
                        chat_id: msg.chat.id,
                        sender,
                        display_name,
                        text: text.to_string(),
                    };
                }
                if !allowed {
                    return Admit::Ignored(Ignored::SenderNotAllowed);
                }
                Admit::Direct {
                    chat_id: msg.chat.id,
                    sender,
                    display_name,
                    text: text.to_string(),
                }
            }
            ChatKind::Group | ChatKind::Supergroup => {
                let rule = self
                    .groups
                    .get(&msg.chat.id.to_string())
                    .or_else(|| self.groups.get("*"));
                match self.group_policy {
                    GroupPolicy::Disabled => return Admit::Ignored(Ignored::GroupsDisabled),
                    GroupPolicy::Allowlist if rule.is_none() => {
                        return Admit::Ignored(Ignored::GroupNotAllowed);
                    }
                    _ => {}
                }
                if rule.and_then(|r| r.enabled) == Some(false) {
                    return Admit::Ignored(Ignored::GroupNotAllowed);
                }
                let require_mention = rule.and_then(|r| r.require_mention).unwrap_or(true);
                if require_mention && !msg.mentions(bot) {
                    return Admit::Ignored(Ignored::NotMentioned);
                }
                Admit::Group {
                    chat_id: msg.chat.id,
                    thread_id: msg.message_thread_id.filter(|_| msg.chat.is_forum),
                    title: msg.chat.title.clone(),
                    sender,
                    display_name,
                    text: text.to_string(),
                }
            }
            ChatKind::Channel | ChatKind::Other => Admit::Ignored(Ignored::NotAChat),
        }
    }

    /// Whether `allowFrom` names `user` (by id, `@username` in any case, or `*`).
    fn allows(&self, user: &User) -> bool {
        let id = user.id.to_string();
        let handle = user.username.as_deref().map(str::to_lowercase);
        self.allow_from.iter().any(|entry| {
            let entry = entry.trim();
            entry == "*"
                || entry == id
                || entry
                    .strip_prefix('@')
                    .is_some_and(|u| Some(u.to_lowercase()) == handle)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bot() -> User {
        serde_json::from_value(
            json!({"id": 999, "is_bot": true, "first_name": "Helper", "username": "helper_bot"}),
        )
        .expect("bot")
    }

    fn message(v: serde_json::Value) -> Message {
        serde_json::from_value(v).expect("message")
    }

    fn direct(from: i64, username: &str, text: &str) -> Message {
        message(json!({"message_id": 1, "date": 0, "text": text,
            "from": {"id": from, "first_name": "Ann", "last_name": "Lee", "username": username},
            "chat": {"id": from, "type": "private"}}))
    }

    fn group(chat: i64, text: &str, entities: serde_json::Value) -> Message {
        message(
            json!({"message_id": 2, "date": 0, "text": text, "entities": entities,
            "from": {"id": 7, "first_name": "Bo"},
            "chat": {"id": chat, "type": "supergroup", "title": "Ops"}}),
        )
    }

    #[test]
    fn direct_chats_follow_dm_policy_and_allow_from() {
        let mut access = Access {
            dm_policy: DmPolicy::Allowlist,
            allow_from: vec!["@ANN".into(), "42".into()],
            ..Access::default()
        };
        let admitted = access.admit(&direct(5, "ann", "hi"), &bot());
        assert_eq!(admitted.key("main").as_deref(), Some("agent:main:main"));
        assert!(
            matches!(&admitted, Admit::Direct { display_name, .. } if display_name == "Ann Lee")
        );
        assert!(matches!(
            access.admit(&direct(42, "x", "hi"), &bot()),
            Admit::Direct { .. }
        ));
        assert_eq!(
            access.admit(&direct(6, "eve", "hi"), &bot()),
            Admit::Ignored(Ignored::SenderNotAllowed)
        );
        access.dm_policy = DmPolicy::Pairing;
        assert!(matches!(
            access.admit(&direct(6, "eve", "hi"), &bot()),
            Admit::Unpaired { chat_id: 6, .. }
        ));
        assert!(
            matches!(
                access.admit(&direct(42, "x", "hi"), &bot()),
                Admit::Direct { .. }
            ),
            "allowFrom needs no pairing"
        );
        access.dm_policy = DmPolicy::Open;
        assert!(matches!(
            access.admit(&direct(6, "eve", "hi"), &bot()),
            Admit::Direct { .. }
        ));
        access.dm_policy = DmPolicy::Disabled;
        assert_eq!(
            access.admit(&direct(5, "ann", "hi"), &bot()),
            Admit::Ignored(Ignored::DirectsDisabled)
        );
    }

    #[test]
    fn groups_need_to_be_allowed_and_to_mention_the_bot() {
        let mut access = Access::default();
        let mention = json!([{"type": "mention", "offset": 0, "length": 11}]);
        let said = group(-100, "@helper_bot status?", mention.clone());
        assert_eq!(
            access.admit(&said, &bot()),
            Admit::Ignored(Ignored::GroupNotAllowed)
        );
        access.groups.insert("*".into(), GroupRule::default());
        let admitted = access.admit(&said, &bot());
        assert_eq!(
            admitted.key("ops").as_deref(),
            Some("agent:ops:telegram:group:-100")
        );
        let unaddressed = group(-100, "lunch?", json!([]));
        assert_eq!(
            access.admit(&unaddressed, &bot()),
            Admit::Ignored(Ignored::NotMentioned)
        );
        access.groups.insert(
            "-100".into(),
            GroupRule {
                require_mention: Some(false),
                enabled: None,
            },
        );
        assert!(matches!(
            access.admit(&unaddressed, &bot()),
            Admit::Group { .. }
        ));
        access.group_policy = GroupPolicy::Disabled;
        assert_eq!(
            access.admit(&said, &bot()),
            Admit::Ignored(Ignored::GroupsDisabled)
        );
    }

    #[test]
    fn a_reply_to_the_bot_counts_as_a_mention_and_bots_are_ignored() {
        let access = Access {
            group_policy: GroupPolicy::Open,
            ..Access::default()
        };
        let reply = message(json!({"message_id": 3, "date": 0, "text": "thanks",
            "from": {"id": 7, "first_name": "Bo"},
            "chat": {"id": -5, "type": "group"},
            "reply_to_message": {"message_id": 2, "date": 0, "text": "done",
                "from": {"id": 999, "is_bot": true, "first_name": "Helper"},
                "chat": {"id": -5, "type": "group"}}}));
        assert!(matches!(access.admit(&reply, &bot()), Admit::Group { .. }));
        let from_bot = message(json!({"message_id": 4, "date": 0, "text": "@helper_bot hi",
            "from": {"id": 12, "is_bot": true, "first_name": "Other"},
            "chat": {"id": -5, "type": "group"}}));
        assert_eq!(
            access.admit(&from_bot, &bot()),
            Admit::Ignored(Ignored::FromBot)
        );
        let sticker = message(json!({"message_id": 5, "date": 0,
            "from": {"id": 7, "first_name": "Bo"}, "chat": {"id": -5, "type": "group"}}));
        assert_eq!(
            access.admit(&sticker, &bot()),
            Admit::Ignored(Ignored::NoText)
        );
    }

    #[test]
    fn a_forum_topic_has_its_own_session_and_mentions_count_in_utf16() {
        let access = Access {
            group_policy: GroupPolicy::Open,
            ..Access::default()
        };
        // "😀 " is three UTF-16 units: the mention starts at 3.
        let topic = message(
            json!({"message_id": 6, "date": 0, "text": "😀 @Helper_Bot go",
            "message_thread_id": 77,
            "entities": [{"type": "mention", "offset": 3, "length": 11}],
            "from": {"id": 7, "first_name": "Bo"},
            "chat": {"id": -100200, "type": "supergroup", "is_forum": true}}),
        );
        assert_eq!(
            access.admit(&topic, &bot()).key("main").as_deref(),
            Some("agent:main:telegram:group:-100200:topic:77")
        );
    }
}
