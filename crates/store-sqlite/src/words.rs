//! Stored words (statuses, kinds, reasons, outcomes) read back into the API's enums: a
//! word this build does not know is a conversion error naming the column, not a string
//! that slips through to a comparison.

use std::str::FromStr;

use switchboard_types::api::UnknownWord;

/// Column `idx` of `r` as the enum whose wire word it holds.
pub fn word<T: FromStr<Err = UnknownWord>>(
    r: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<T> {
    let text: String = r.get(idx)?;
    parse(idx, &text)
}

/// Column `idx` of `r` as the enum, when not NULL.
pub fn word_opt<T: FromStr<Err = UnknownWord>>(
    r: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<T>> {
    let text: Option<String> = r.get(idx)?;
    text.map(|t| parse(idx, &t)).transpose()
}

fn parse<T: FromStr<Err = UnknownWord>>(idx: usize, text: &str) -> rusqlite::Result<T> {
    text.parse().map_err(|e: UnknownWord| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}
