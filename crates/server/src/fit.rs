//! Frames made to fit the `maxPayload` the gateway advertises, so a client that honours it
//! can read every frame we send: a history is paged (oldest entries left for the next page)
//! and any text still too long is cut with a visible marker, as `sessions_history` cuts
//! (`\n…(truncated)…`); what cannot be made to fit is refused, never sent oversize.

use serde_json::Value;

pub use switchboard_types::json_size::json_len;

/// Appended to a cut text (`…` is U+2026), as `sessions_history` marks its cuts.
pub const TRUNCATION_MARKER: &str = "\n…(truncated)…";

/// Bytes of a frame besides its payload (`{"type":"res","id":…,"ok":true,"payload":…}`, an
/// event's name and `seq`), left out of the payload's budget. An id longer than this is the
/// client's to answer for: the frame guard still catches it.
pub const ENVELOPE: usize = 1024;

/// Strings are never cut shorter than this: below it, cutting more would only garble.
const MIN_CUT: usize = 256;

/// The payload budget of a frame under `max_payload`.
pub fn budget(max_payload: usize) -> usize {
    max_payload.saturating_sub(ENVELOPE)
}

/// Cuts the longest strings in `value` (each keeps its head and gains the marker) until the
/// JSON fits in `budget`: first by what is over (so a text just too long loses only its
/// tail), then halving, so it ends in a few passes whatever the escaping. True when it fits
/// (it was cut if it had to be); false when even strings cut short leave it too big (its
/// shape is the bulk).
pub fn cut_to_fit(value: &mut Value, budget: usize) -> bool {
    let mut len = json_len(value);
    if len <= budget {
        return true;
    }
    let mut cap = longest_string(value);
    let mut passes = 0;
    while len > budget {
        if cap <= MIN_CUT {
            return false;
        }
        let over = len - budget + 2 * TRUNCATION_MARKER.len();
        cap = if passes < 2 && over < cap / 2 {
            cap - over
        } else {
            cap / 2
        }
        .max(MIN_CUT);
        passes += 1;
        cut_strings(value, cap);
        len = json_len(value);
    }
    true
}

fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

/// Every string longer than `cap` bytes cut to its first `cap` bytes (on a character
/// boundary) plus the marker; object keys are left alone.
fn cut_strings(value: &mut Value, cap: usize) {
    match value {
        Value::String(s) if s.len() > cap => {
            let mut end = cap;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            // A text cut before keeps one marker: its old one is past the new cut.
            s.truncate(end);
            s.push_str(TRUNCATION_MARKER);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cut_strings(v, cap)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_strings(v, cap)),
        _ => {}
    }
}

/// Pages `object[field]` (an array, oldest first) into what `budget` leaves once the rest of
/// the object is counted.
pub fn page_field(
    object: &mut Value,
    field: &str,
    budget: usize,
    placeholder: impl Fn(&Value) -> Value,
) -> Paged {
    let Some(Value::Array(items)) = object.get_mut(field).map(std::mem::take) else {
        return Paged::default();
    };
    let rest = json_len(object);
    let mut items = items;
    let paged = page(&mut items, budget.saturating_sub(rest), placeholder);
    object[field] = Value::Array(items);
    paged
}

/// What `page` did to a list of entries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Paged {
    /// Oldest entries were left out (a client pages back for them).
    pub dropped: usize,
    /// Some text was cut.
    pub cut: bool,
}

/// Fits `items` (oldest first) into `budget` bytes of JSON array: an entry bigger than a
/// quarter of the budget has its texts cut to that (so one huge message leaves room for its
/// neighbours), then the oldest entries are left out until the rest fits. The newest entry
/// is always kept, cut as far as needed; if nothing can make it fit, it is replaced by
/// `placeholder(entry)`.
pub fn page(items: &mut Vec<Value>, budget: usize, placeholder: impl Fn(&Value) -> Value) -> Paged {
    let mut paged = Paged::default();
    let per_item = budget / 4;
    let mut sizes = Vec::with_capacity(items.len());
    for item in items.iter_mut() {
        let mut len = json_len(item);
        if len > per_item {
            if !cut_to_fit(item, per_item) {
                *item = placeholder(item);
            }
            paged.cut = true;
            len = json_len(item);
        }
        sizes.push(len);
    }
    // Keep the longest run of newest entries that fits: "[" + items joined by "," + "]".
    let mut total = 2usize;
    let mut first = items.len();
    while first > 0 {
        let next = total
            .saturating_add(sizes[first - 1])
            .saturating_add(usize::from(first < items.len()));
        if next > budget {
            break;
        }
        total = next;
        first -= 1;
    }
    paged.dropped = first;
    items.drain(..first);
    paged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_huge_text_is_cut_with_the_marker_until_it_fits() {
        // Quotes double when escaped: the budget is about the JSON, not the text.
        let mut v = json!({"text": "\"".repeat(100_000), "n": 1});
        assert!(cut_to_fit(&mut v, 10_000));
        assert!(json_len(&v) <= 10_000);
        let text = v["text"].as_str().expect("text");
        assert!(text.starts_with("\"\"\"") && text.ends_with(TRUNCATION_MARKER));
        assert_eq!(text.matches(TRUNCATION_MARKER).count(), 1);
        // A text that already fits is untouched.
        let mut small = json!({"text": "hello"});
        assert!(cut_to_fit(&mut small, 100));
        assert_eq!(small, json!({"text": "hello"}));
        // Bulk that is not text cannot be cut.
        let mut numbers = json!((0..10_000).collect::<Vec<_>>());
        assert!(!cut_to_fit(&mut numbers, 1000));
    }

    #[test]
    fn a_page_keeps_the_newest_that_fit_and_cuts_a_huge_one() {
        let mut items: Vec<Value> = (0..10)
            .map(|i| json!({"i": i, "t": "x".repeat(1000)}))
            .collect();
        items.push(json!({"i": 10, "t": "é".repeat(1_000_000)}));
        let paged = page(&mut items, 8_000, |_| json!({"omitted": true}));
        assert!(paged.cut);
        assert!(json_len(&Value::Array(items.clone())) <= 8_000);
        assert_eq!(items.last().expect("newest")["i"], 10);
        assert!(paged.dropped > 0 && paged.dropped < 10, "{paged:?}");
        assert_eq!(items.len(), 11 - paged.dropped);
        let newest = items.last().expect("newest")["t"].as_str().expect("t");
        assert!(newest.ends_with(TRUNCATION_MARKER));
    }
}
