//! Counted nouns as every front end prints them ("1 exchange", "2 exchanges"): one helper,
//! so no screen or command says "1 exchanges" or hedges with "round(s)".

use std::fmt::Display;

/// `n` and the noun agreeing with it, for nouns whose plural adds an `s`:
/// `count(1, "exchange")` is `1 exchange`, `count(0, "pair")` is `0 pairs`.
pub fn count<N: Copy + Display + PartialEq + From<u8>>(n: N, one: &str) -> String {
    if n == N::from(1) {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// `n` and the noun agreeing with it, for a plural of another shape (`entry`/`entries`).
pub fn count_as<N: Copy + Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    format!("{n} {}", noun(n, one, many))
}

/// The noun alone, agreeing with `n` (for sentences that place the number elsewhere).
pub fn noun<'a, N: PartialEq + From<u8>>(n: N, one: &'a str, many: &'a str) -> &'a str {
    if n == N::from(1) { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(0usize, "exchange"), "0 exchanges");
        assert_eq!(count(1u32, "exchange"), "1 exchange");
        assert_eq!(count(2u64, "round"), "2 rounds");
        assert_eq!(count(1i64, "pair"), "1 pair");
        assert_eq!(count_as(1usize, "entry", "entries"), "1 entry");
        assert_eq!(count_as(3usize, "entry", "entries"), "3 entries");
        assert_eq!(noun(1u8, "is", "are"), "is");
        assert_eq!(noun(11u8, "is", "are"), "are");
    }
}
