//! The exchanges' backfill from an OpenClaw gateway: the newest sessions (`sessions.list`,
//! paged), then each one's recent history (`chat.history`, a few at a time), into the
//! `Book`; senders named by provenance but not listed are looked up once each. Bounded in
//! sessions, lines and requests; a gateway that goes away midway leaves a partial book that
//! says so. Runs in whichever task first asks for exchanges, never the console's UI task.

use std::sync::Mutex;

use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};

use super::exchanges::{Book, MAX_SESSIONS};
use crate::rpc::{Rpc, RpcError};
use switchboard_types::api::ApiError;

/// Rows per `sessions.list` request.
pub const LIST_PAGE: usize = 200;
/// Newest lines read per session.
pub const HISTORY_LINES: usize = 200;
/// `chat.history` requests in flight at once.
const IN_FLIGHT: usize = 8;
/// Senders not listed that are looked up (`sessions.describe`) at most.
const LOOKUPS: usize = 64;

fn locked(m: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    // The book is consistent between calls: a panic elsewhere leaves nothing half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The gateway is gone (as opposed to one request it refused).
fn link_lost(e: &ApiError) -> bool {
    matches!(e, ApiError::Unavailable(_))
}

/// What a backfill read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filled {
    pub sessions: usize,
    pub histories: usize,
    /// The link failed before everything was read.
    pub cut_short: bool,
}

/// Read the newest `max_sessions` sessions and their recent history into `book`.
pub async fn fill(rpc: &dyn Rpc, book: &Mutex<Book>, max_sessions: usize) -> Filled {
    let max_sessions = max_sessions.min(MAX_SESSIONS);
    let mut filled = Filled::default();
    let mut keys: Vec<String> = Vec::new();
    while keys.len() < max_sessions {
        let limit = LIST_PAGE.min(max_sessions - keys.len());
        let page = rpc
            .request(
                "sessions.list",
                json!({ "limit": limit, "offset": keys.len() }),
            )
            .await
            .map_err(RpcError::into_api);
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("openclaw backfill: sessions.list failed: {e}");
                filled.cut_short = true;
                break;
            }
        };
        let rows = page
            .get("sessions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        {
            let mut b = locked(book);
            for r in &rows {
                b.row(r);
            }
        }
        keys.extend(
            rows.iter()
                .filter_map(|r| r.get("key").and_then(Value::as_str))
                .map(str::to_string),
        );
        if rows.len() < limit {
            break;
        }
    }
    filled.sessions = keys.len();
    let mut pages = stream::iter(keys)
        .map(|key| async move {
            let r = rpc
                .request(
                    "chat.history",
                    json!({ "sessionKey": key, "limit": HISTORY_LINES }),
                )
                .await
                .map_err(RpcError::into_api);
            (key, r)
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some((key, r)) = pages.next().await {
        match r {
            Ok(p) => {
                locked(book).history(&key, &p);
                filled.histories += 1;
            }
            Err(e) if link_lost(&e) => {
                tracing::warn!("openclaw backfill: the gateway went away: {e}");
                filled.cut_short = true;
                break;
            }
            // Deleted meanwhile, or refused: that session is left out.
            Err(e) => tracing::warn!("openclaw backfill: chat.history {key} failed: {e}"),
        }
    }
    drop(pages);
    let unseen = locked(book).unseen_sources();
    for key in unseen.into_iter().take(LOOKUPS) {
        match rpc
            .request("sessions.describe", json!({ "key": key }))
            .await
            .map_err(RpcError::into_api)
        {
            Ok(p) if p.get("session").is_some_and(Value::is_object) => locked(book).know(&key),
            Ok(_) => {}
            Err(e) if link_lost(&e) => {
                filled.cut_short = true;
                break;
            }
            Err(_) => {}
        }
    }
    locked(book).partial = filled.cut_short.then(|| {
        format!(
            "the OpenClaw gateway went away during the backfill: {} of {} sessions' history read",
            filled.histories, filled.sessions
        )
    });
    filled
}
