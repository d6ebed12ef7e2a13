//! The size of a value's compact JSON, counted without building it: what history caps and
//! the gateway's frame limit measure.

use serde_json::Value;

/// Counts bytes without keeping them: sizing a value need not allocate its serialization.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// UTF-8 length of the compact JSON of `value` (same bytes as `serde_json::to_vec`).
/// Serializing a `Value` into an infallible writer cannot fail; if it somehow did, the size
/// counts as unbounded, so the value is dropped or cut rather than under-counted.
pub fn json_len(value: &Value) -> usize {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}
