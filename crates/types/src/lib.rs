//! The vocabulary every Switchboard crate shares: the API's types and its async trait,
//! session keys, the typed settings, text limits and safety checks. No I/O beyond the
//! trait's signatures; nothing here knows a database, a socket or a terminal.

pub mod api;
pub mod config;
pub mod entry;
pub mod json_size;
pub mod key;
pub mod split;
pub mod text_safety;
pub mod words;
