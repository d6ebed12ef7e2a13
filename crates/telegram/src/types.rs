//! The Bot API's objects the channel reads (https://core.telegram.org/bots/api#available-types),
//! only the fields it uses; anything else in Telegram's JSON is ignored, and a field missing
//! that the API marks optional is `None`.

use serde::Deserialize;

/// One incoming update (`getUpdates`); only messages are taken, the rest skipped by id.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub message_id: i64,
    /// The forum topic (a supergroup's thread) the message is in.
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub from: Option<User>,
    pub chat: Chat,
    #[serde(default)]
    pub date: i64,
    #[serde(default)]
    pub text: Option<String>,
    /// A photo's or a document's caption: taken as the text when there is none.
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    /// The message this one answers (a reply to the bot counts as addressing it).
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
}

impl Message {
    /// What the sender wrote: the text, else the caption.
    pub fn body(&self) -> Option<&str> {
        self.text.as_deref().or(self.caption.as_deref())
    }

    fn body_entities(&self) -> &[MessageEntity] {
        if self.text.is_some() {
            &self.entities
        } else {
            &self.caption_entities
        }
    }

    /// Whether the message names the bot: an `@username` mention of it, a text mention of
    /// its user, a `/command@username`, or a reply to one of its messages.
    pub fn mentions(&self, bot: &User) -> bool {
        let body = self.body().unwrap_or_default();
        let handle = bot
            .username
            .as_deref()
            .map(|u| format!("@{}", u.to_lowercase()));
        let named = self.body_entities().iter().any(|e| match e.kind.as_str() {
            "mention" | "bot_command" => match (&handle, e.slice(body)) {
                (Some(handle), Some(text)) => text.to_lowercase().ends_with(handle.as_str()),
                _ => false,
            },
            "text_mention" => e.user.as_ref().is_some_and(|u| u.id == bot.id),
            _ => false,
        });
        named
            || self
                .reply_to_message
                .as_ref()
                .and_then(|m| m.from.as_ref())
                .is_some_and(|u| u.id == bot.id)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: ChatKind,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub is_forum: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    Private,
    Group,
    Supergroup,
    Channel,
    /// A kind this build does not know (Telegram adds them): ignored like a channel post.
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

impl User {
    /// How a person is shown: first and last name, else the username.
    pub fn display_name(&self) -> String {
        let name = match &self.last_name {
            Some(last) if !last.is_empty() => format!("{} {last}", self.first_name),
            _ => self.first_name.clone(),
        };
        match (&self.username, name.trim().is_empty()) {
            (Some(u), true) => format!("@{u}"),
            _ => name.trim().to_string(),
        }
    }
}

/// A marked span of a message (mentions, commands), in UTF-16 code units as Telegram counts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    #[serde(default)]
    pub user: Option<User>,
}

impl MessageEntity {
    /// The span's text in `body` (`None` when the offsets do not fit it).
    pub fn slice<'a>(&self, body: &'a str) -> Option<&'a str> {
        let (mut start, mut end, mut units) = (None, None, 0usize);
        for (i, c) in body.char_indices() {
            if units == self.offset {
                start = Some(i);
            }
            if units == self.offset + self.length {
                end = Some(i);
            }
            units += c.len_utf16();
        }
        if units == self.offset + self.length {
            end = Some(body.len());
        }
        body.get(start?..end?)
    }
}
