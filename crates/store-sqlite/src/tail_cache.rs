//! A memo, valid for one write transaction, of each session's id and last transcript line,
//! so a burst of appends to the same sessions skips two index lookups per append.
//!
//! It lives on the writer thread and is only armed while the writer holds a transaction
//! open (nothing else can write then: the transaction holds the database's write lock).
//! Outside an armed transaction every call is a no-op, so direct callers of `queries` (tests,
//! tools) always read the database. Any change to a transcript other than an append, and
//! any rollback, forgets everything.

use std::cell::RefCell;
use std::collections::HashMap;

/// What `append_lines` needs to continue a transcript.
#[derive(Clone)]
pub(crate) struct Tail {
    pub session_id: String,
    pub seq: i64,
    pub parent: Option<String>,
    /// A lower bound of the session's stored `updated_at` (`i64::MIN`: unknown).
    pub updated_at: i64,
}

thread_local! {
    static TAILS: RefCell<Option<HashMap<String, Tail>>> = const { RefCell::new(None) };
}

/// A transaction began on this thread: start an empty memo.
pub(crate) fn arm() {
    TAILS.with(|t| *t.borrow_mut() = Some(HashMap::new()));
}

/// The transaction ended (commit or rollback): stop memoising.
pub(crate) fn disarm() {
    TAILS.with(|t| *t.borrow_mut() = None);
}

/// Forget every memo (a rollback to a savepoint, or a transcript changed by other means).
pub(crate) fn invalidate() {
    TAILS.with(|t| {
        if let Some(map) = t.borrow_mut().as_mut() {
            map.clear();
        }
    });
}

pub(crate) fn get(key: &str) -> Option<Tail> {
    TAILS.with(|t| t.borrow().as_ref().and_then(|m| m.get(key).cloned()))
}

pub(crate) fn put(key: &str, tail: Tail) {
    TAILS.with(|t| {
        if let Some(map) = t.borrow_mut().as_mut() {
            map.insert(key.to_string(), tail);
        }
    });
}
