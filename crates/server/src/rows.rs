//! `sessions.list` rows as the gateway last rendered them, kept between calls and used again
//! while the session's revision says the row is unchanged.
//!
//! A row in OpenClaw's shape costs a read of the entry, its decode, two map builds and a
//! serialisation (0.4 ms of a 50-row list, BENCHMARKS.md, issue 25); an owner's list after a
//! change re-renders only the rows that changed. What a row shows depends on the session's
//! entry and columns (its revision: `RowRevision::rev`, new on every write of the entry),
//! its last activity (`updated_at`: appends), whether it runs, and the shape of the answer
//! (the configured models, `includeDerivedTitles`): all of that is the key of a kept row.
//! Bounded by bytes; past the bound the oldest rows go.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use switchboard_types::api::RowRevision;

/// The rendered rows kept at most, in bytes of JSON (about 5,000 of OpenClaw's imported
/// rows, 770 bytes each).
pub const BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// The kept rows of one gateway, shared by its connections.
#[derive(Default)]
pub struct RowCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    rows: HashMap<String, Kept>,
    /// Keys in the order they were kept, oldest first (a key kept again appears twice; the
    /// older mention is skipped when it comes up).
    order: VecDeque<(String, u64)>,
    bytes: usize,
    /// Numbers each put, so `order` can tell a stale mention from the live one.
    puts: u64,
}

struct Kept {
    revision: RowRevision,
    shape: u64,
    put: u64,
    text: Arc<RawValue>,
}

impl RowCache {
    /// The row kept for `key`, when it was rendered at this revision and for this shape.
    pub fn get(&self, key: &str, revision: RowRevision, shape: u64) -> Option<Arc<RawValue>> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .rows
            .get(key)
            .filter(|k| k.revision == revision && k.shape == shape)
            .map(|k| k.text.clone())
    }

    /// Keep `text` as `key`'s row at `revision` for `shape` (replacing what was kept).
    pub fn put(&self, key: String, revision: RowRevision, shape: u64, text: Arc<RawValue>) {
        let len = text.get().len();
        if len > BUDGET_BYTES / 8 {
            // One row that large is not worth holding others out for.
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *inner;
        inner.puts += 1;
        let put = inner.puts;
        if let Some(old) = inner.rows.insert(
            key.clone(),
            Kept {
                revision,
                shape,
                put,
                text,
            },
        ) {
            inner.bytes -= old.text.get().len();
        }
        inner.bytes += len;
        inner.order.push_back((key, put));
        while inner.bytes > BUDGET_BYTES {
            let Some((oldest, at)) = inner.order.pop_front() else {
                break;
            };
            if inner.rows.get(&oldest).is_some_and(|k| k.put == at)
                && let Some(gone) = inner.rows.remove(&oldest)
            {
                inner.bytes -= gone.text.get().len();
            }
        }
        // Mentions of rows kept again pile up in `order`: drop them when they outnumber the
        // rows, so its length stays within twice theirs.
        if inner.order.len() > 2 * inner.rows.len() + 64 {
            let rows = &inner.rows;
            inner
                .order
                .retain(|(k, at)| rows.get(k).is_some_and(|kept| kept.put == *at));
        }
    }

    /// How many rows and bytes are kept.
    #[cfg(test)]
    pub fn size(&self) -> (usize, usize) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (inner.rows.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Arc<RawValue> {
        Arc::from(RawValue::from_string(s.to_string()).expect("json"))
    }

    fn rev(rev: i64, updated_at: i64, running: bool) -> RowRevision {
        RowRevision {
            rev,
            updated_at,
            running,
        }
    }

    /// A kept row comes back only for the revision and shape it was rendered at: a new
    /// revision, a new activity time, a run starting, or another answer shape each miss.
    #[test]
    fn a_row_is_used_again_only_while_nothing_it_shows_moved() {
        let cache = RowCache::default();
        cache.put("a".into(), rev(1, 10, false), 7, text(r#"{"key":"a"}"#));
        assert!(cache.get("a", rev(1, 10, false), 7).is_some());
        for (r, shape) in [
            (rev(2, 10, false), 7),
            (rev(1, 11, false), 7),
            (rev(1, 10, true), 7),
            (rev(1, 10, false), 8),
        ] {
            assert!(cache.get("a", r, shape).is_none(), "{r:?} {shape}");
        }
        assert!(cache.get("b", rev(1, 10, false), 7).is_none());
        cache.put(
            "a".into(),
            rev(2, 10, false),
            7,
            text(r#"{"key":"a","v":2}"#),
        );
        assert_eq!(
            cache
                .get("a", rev(2, 10, false), 7)
                .map(|t| t.get().to_string()),
            Some(r#"{"key":"a","v":2}"#.to_string())
        );
        assert_eq!(cache.size().0, 1);
    }

    /// Past the byte budget the oldest rows go; rows kept again many times do not grow the
    /// bookkeeping without bound.
    #[test]
    fn the_budget_holds_and_the_oldest_go_first() {
        let cache = RowCache::default();
        let row = format!(r#"{{"pad":"{}"}}"#, "x".repeat(1000));
        let n = BUDGET_BYTES / row.len() + 100;
        for i in 0..n {
            cache.put(format!("k{i}"), rev(1, 1, false), 0, text(&row));
        }
        let (rows, bytes) = cache.size();
        assert!(bytes <= BUDGET_BYTES, "{bytes}");
        assert!(rows < n);
        assert!(
            cache.get("k0", rev(1, 1, false), 0).is_none(),
            "the oldest went"
        );
        assert!(
            cache
                .get(&format!("k{}", n - 1), rev(1, 1, false), 0)
                .is_some()
        );
        for i in 0..10_000 {
            cache.put("same".into(), rev(i, 1, false), 0, text(r#"{"k":1}"#));
        }
        let inner = cache.inner.lock().expect("lock");
        assert!(inner.order.len() <= 2 * inner.rows.len() + 64 + 1);
        // A row larger than an eighth of the budget is not kept at all.
        drop(inner);
        let huge = format!(r#""{}""#, "y".repeat(BUDGET_BYTES / 8 + 1));
        cache.put("huge".into(), rev(1, 1, false), 0, text(&huge));
        assert!(cache.get("huge", rev(1, 1, false), 0).is_none());
    }
}
