//! The recent transcript messages of sessions whose agents run on a model, kept in memory so
//! a model turn reads only the lines added since the last one (a history window of ~50 lines
//! read and parsed from SQLite was most of the engine's own time in a model turn).
//!
//! Always checked against the store: each read asks for the session's newest `seq` and fetches
//! what is newer, so lines written by another process, or by this one outside a model turn,
//! are seen. Transcripts are append-only per session id (a reset or delete makes a new id).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::session::store::SessionStore;
use switchboard_store::StoreError;

/// Sessions kept; past this the whole cache is dropped (cheap to rebuild, bounded memory).
const MAX_SESSIONS: usize = 256;

#[derive(Default)]
struct Tail {
    /// The newest `seq` the cache has read (all message lines up to it are in `rows`, or
    /// the oldest were let go).
    last_seq: i64,
    /// `(seq, the line's message)`, oldest first, at most `window` of them; shared with the
    /// turns that read them, so a read copies no JSON.
    rows: VecDeque<(i64, Arc<Value>)>,
    /// The window this tail was filled for; a larger one is read afresh.
    window: usize,
}

#[derive(Default)]
pub(crate) struct HistoryCache {
    tails: Mutex<HashMap<String, Tail>>,
}

impl HistoryCache {
    /// The messages of the newest `window` message lines of `session_id` (tool lines
    /// included), oldest first.
    pub(crate) async fn tail(
        &self,
        store: &SessionStore,
        session_id: &str,
        window: usize,
    ) -> Result<Vec<Arc<Value>>, StoreError> {
        let newest = store.last_seq(session_id).await?;
        let cached = {
            let tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
            tails
                .get(session_id)
                .filter(|t| t.last_seq <= newest && t.window >= window)
                .map(|t| t.last_seq)
        };
        let rows = match cached {
            // Only what is newer; more than a window of it means a fresh read is as cheap.
            Some(seen) => store.after(session_id, seen, window + 1).await?,
            None => Vec::new(),
        };
        let fresh = cached.is_none() || rows.len() > window;
        let rows = if fresh {
            store.tail(session_id, window, true).await?
        } else {
            rows
        };
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        if tails.len() >= MAX_SESSIONS && !tails.contains_key(session_id) {
            tails.clear();
        }
        let tail = tails.entry(session_id.to_string()).or_default();
        if fresh {
            tail.rows.clear();
            tail.window = window;
        }
        for r in rows {
            // Another reader may have added these already (two runs of one session in
            // different lanes): only what is newer goes in.
            if tail.rows.back().is_none_or(|(seq, _)| r.seq > *seq) {
                let mut line = r.line;
                // Messages only: history reads also return OpenClaw's shown notices
                // (`switchboard_store::notice`), which are for the owner, not the model.
                if let Some(message) = line.get_mut("message").map(Value::take) {
                    tail.rows.push_back((r.seq, Arc::new(message)));
                }
            }
        }
        while tail.rows.len() > tail.window {
            tail.rows.pop_front();
        }
        tail.last_seq = newest.max(tail.rows.back().map_or(0, |(seq, _)| *seq));
        let skip = tail.rows.len().saturating_sub(window);
        Ok(tail.rows.iter().skip(skip).map(|(_, m)| m.clone()).collect())
    }
}
