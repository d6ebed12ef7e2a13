//! PostgreSQL's `text` cannot hold NUL (U+0000), which SQLite's can and which hostile or
//! odd input brings (a task, a label, a model's reply, a name derived from a message). Free
//! text bound to a column goes through `pg`, which puts U+FFFD (the replacement character)
//! in its place, so such a write is stored instead of failing. Transcript lines and entries
//! never need it: they are JSON text, where NUL is always escaped (`\u0000`) and kept exact.

use std::borrow::Cow;

/// `s` as PostgreSQL can store it.
pub fn pg(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// `pg` for an optional column.
pub fn pg_opt(s: Option<&str>) -> Option<Cow<'_, str>> {
    s.map(pg)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nul_becomes_the_replacement_character_and_nothing_else_changes() {
        assert_eq!(super::pg("a\0b"), "a\u{FFFD}b");
        assert!(matches!(
            super::pg("plain é"),
            std::borrow::Cow::Borrowed("plain é")
        ));
        assert_eq!(super::pg_opt(None), None);
    }
}
