//! The session engine: keys, storage, session entries, transcripts, tools. No terminal or
//! network code lives here; front ends talk to it through `api`.

pub mod key;
