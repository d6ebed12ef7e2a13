//! Switchboard's Telegram channel, the parts that know Telegram (docs/ARCHITECTURE.md,
//! "Channels"): a Bot API client for the calls the channel makes (`bot.rs`), Telegram's
//! answers as typed errors (`error.rs`), the update and message types (`types.rs`),
//! splitting a reply at Telegram's length limit (`split.rs`), and OpenClaw's rules for who may
//! talk to the bot and where a message goes (`access.rs`). The outbox drain and the engine
//! are elsewhere; nothing here writes state.

pub mod access;
pub mod bot;
pub mod error;
pub mod poll;
pub mod split;
pub mod types;

pub use access::{Access, Admit, DmPolicy, GroupPolicy, GroupRule, Ignored};
pub use bot::{Bot, DEFAULT_API_ROOT, update_of};
pub use error::TelegramError;
pub use poll::{Inbox, LONG_POLL, Stopped};
pub use split::{MAX_MESSAGE, split};
pub use types::{Chat, ChatKind, Message, MessageEntity, Update, User};
