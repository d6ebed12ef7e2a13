//! Sessions as data: keys, entries, the store over them, who may see and send to which
//! (visibility, send policy), and the text a transcript holds (sanitising, extraction).

internal! {
    mod openclaw_text;
    mod policy;
    mod sanitize;
    mod store;
    mod transcript_text;
    mod visibility;
}
pub use switchboard_types::entry;
pub use switchboard_types::key;
