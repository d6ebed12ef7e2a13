//! Streamed chat completions: a `text/event-stream` body (server-sent events, parsed by the
//! `eventsource-stream` crate) assembled into the message a non-streamed answer carries
//! (`content`, `tool_calls` joined by `index`) plus usage, each piece of text reported as it
//! arrives. Every way a stream can go wrong ends in an error saying what and where.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use super::client::{Completion, excerpt, usage_of};
use crate::agent::Usage;

/// The most reply one model call may assemble (text plus tool arguments).
pub const MAX_REPLY_BYTES: usize = 4 << 20;
/// The most bytes read without a complete event: bounds what the SSE parser buffers (a
/// line that never ends, bytes that are not UTF-8) however the server misbehaves.
const MAX_EVENT_BYTES: usize = 2 * MAX_REPLY_BYTES;
/// The most tool calls one answer may carry.
const MAX_TOOL_CALLS: usize = 128;

/// Reads `body` to its end (or `[DONE]`), waiting at most `idle` for each piece, and
/// assembles it; `on_delta(offset, text)` hears each piece of reply text, `offset` being the
/// bytes of text before it.
pub async fn assemble<S, B, E>(
    body: S,
    idle: Duration,
    on_delta: &(dyn Fn(usize, &str) + Sync),
) -> Result<Completion, String>
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: fmt::Display + Send,
{
    let read = Arc::new(AtomicUsize::new(0));
    // Bytes read when the last complete event came out of the parser.
    let mark = Arc::new(AtomicUsize::new(0));
    let (counter, limit) = (read.clone(), mark.clone());
    let counted = body.map(move |piece| match piece {
        Ok(bytes) => {
            let total =
                counter.fetch_add(bytes.as_ref().len(), Ordering::Relaxed) + bytes.as_ref().len();
            if total - limit.load(Ordering::Relaxed) > MAX_EVENT_BYTES {
                Err(ReadError::NoEvent)
            } else {
                Ok(bytes)
            }
        }
        Err(e) => Err(ReadError::Transport(e.to_string())),
    });
    let mut events = std::pin::pin!(counted.eventsource());
    let mut reply = Assembler::default();
    loop {
        let bytes = || read.load(Ordering::Relaxed);
        let Ok(next) = tokio::time::timeout(idle, events.next()).await else {
            return Err(reply.failed(
                bytes(),
                format!(
                    "timed out: no data for {} s (timeoutSeconds)",
                    idle.as_secs()
                ),
            ));
        };
        let event = match next {
            None => return reply.finish(false).map_err(|e| reply.failed(bytes(), e)),
            Some(Ok(event)) => event,
            Some(Err(EventStreamError::Transport(e))) => {
                return Err(reply.failed(bytes(), e));
            }
            Some(Err(EventStreamError::Utf8(e))) => {
                return Err(reply.failed(bytes(), format!("the stream is not UTF-8 ({e})")));
            }
            Some(Err(EventStreamError::Parser(e))) => {
                let what = format!("the stream is not server-sent events ({e})");
                return Err(reply.failed(bytes(), what));
            }
        };
        mark.store(bytes(), Ordering::Relaxed);
        match reply.event(&event.event, &event.data, on_delta) {
            Ok(Flow::More) => {}
            Ok(Flow::Done) => return reply.finish(true).map_err(|e| reply.failed(bytes(), e)),
            Err(e) => return Err(reply.failed(bytes(), e)),
        }
    }
}

/// Why the body could not be read further.
enum ReadError {
    Transport(String),
    NoEvent,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Transport(e) => write!(f, "reading the stream failed: {e}"),
            ReadError::NoEvent => write!(
                f,
                "more than {} MiB arrived without a complete event",
                MAX_EVENT_BYTES >> 20
            ),
        }
    }
}

/// Whether the stream goes on.
enum Flow {
    More,
    Done,
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// The answer so far.
#[derive(Default)]
struct Assembler {
    text: String,
    /// By the `index` the chunks give.
    calls: BTreeMap<u64, Call>,
    usage: Option<Usage>,
    /// Chunks carrying text or tool arguments: the output tokens when the server sends no
    /// usage.
    pieces: u64,
    /// Events read.
    events: usize,
    /// Bytes of text plus tool arguments.
    size: usize,
    /// A `finish_reason` was seen.
    finished: bool,
}

impl Assembler {
    fn failed(&self, bytes: usize, what: impl fmt::Display) -> String {
        format!(
            "the streamed reply failed after {} events ({bytes} bytes): {what}",
            self.events
        )
    }

    fn grow(&mut self, by: usize) -> Result<(), String> {
        self.size += by;
        if self.size > MAX_REPLY_BYTES {
            return Err(format!(
                "the reply is larger than {} MiB, the cap on one model answer",
                MAX_REPLY_BYTES >> 20
            ));
        }
        Ok(())
    }

    fn event(
        &mut self,
        kind: &str,
        data: &str,
        on_delta: &(dyn Fn(usize, &str) + Sync),
    ) -> Result<Flow, String> {
        self.events += 1;
        if kind == "error" {
            return Err(format!("the server sent an error: {}", error_text(data)));
        }
        if kind != "message" {
            // Keep-alives and other event types carry no part of the answer.
            return Ok(Flow::More);
        }
        if data.trim() == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("a data line is not JSON ({e}): {}", excerpt(data)))?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(format!("the server sent an error: {}", error_text(data)));
        }
        if let Some(u) = usage_of(&chunk) {
            self.usage = Some(u);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Flow::More);
        };
        if let Some(delta) = choice.get("delta") {
            // `reasoning_content` (a thinking model's thoughts) is not part of the reply.
            if let Some(text) = non_empty(delta.get("content")) {
                self.grow(text.len())?;
                on_delta(self.text.len(), text);
                self.text.push_str(text);
                self.pieces += 1;
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (i, part) in calls.iter().enumerate() {
                    self.add_call_part(i, part)?;
                }
            }
        }
        if choice.get("finish_reason").is_some_and(|r| !r.is_null()) {
            self.finished = true;
        }
        Ok(Flow::More)
    }

    /// One `delta.tool_calls[i]`: the id and name come once (or repeated), the arguments in
    /// pieces to concatenate.
    fn add_call_part(&mut self, position: usize, part: &Value) -> Result<(), String> {
        let index = part
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_TOOL_CALLS {
            return Err(format!(
                "more than {MAX_TOOL_CALLS} tool calls in one answer"
            ));
        }
        let arguments = non_empty(part.pointer("/function/arguments"));
        if let Some(args) = arguments {
            self.grow(args.len())?;
            self.pieces += 1;
        }
        let call = self.calls.entry(index).or_default();
        if let Some(id) = non_empty(part.get("id")).filter(|_| call.id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) =
            non_empty(part.pointer("/function/name")).filter(|_| call.name.is_empty())
        {
            call.name = name.to_string();
        }
        if let Some(args) = arguments {
            call.arguments.push_str(args);
        }
        Ok(())
    }

    /// The assembled answer; `done` when `[DONE]` came. A stream that ends with neither
    /// `[DONE]` nor a `finish_reason` was cut short.
    fn finish(&mut self, done: bool) -> Result<Completion, String> {
        if !done && !self.finished {
            return Err(
                "the stream ended before [DONE] or a finish_reason (the connection was cut?)"
                    .to_string(),
            );
        }
        let calls: Vec<Value> = std::mem::take(&mut self.calls)
            .into_values()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })
            })
            .collect();
        let text = std::mem::take(&mut self.text);
        let content = if calls.is_empty() || !text.is_empty() {
            Value::String(text)
        } else {
            Value::Null
        };
        let mut message = json!({ "role": "assistant", "content": content });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        // A server that sends no usage chunk (no `stream_options` support): each chunk of
        // text or arguments counts as one output token, the input is unknown (0).
        let usage = self.usage.unwrap_or(Usage {
            input: 0,
            output: self.pieces,
        });
        Ok(Completion {
            message,
            usage: Some(usage),
        })
    }
}

fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// What an error event says: its `error.message` (or `message`), else the data itself.
fn error_text(data: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(data).ok();
    let message = parsed.as_ref().and_then(|v| {
        let e = v.get("error").unwrap_or(v);
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    excerpt(&message.unwrap_or_else(|| data.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[Value]) -> Result<Completion, String> {
        let mut reply = Assembler::default();
        for e in events {
            let data = json!({ "choices": [{ "index": 0, "delta": e, "finish_reason": null }] });
            reply.event("message", &data.to_string(), &|_, _| {})?;
        }
        reply.finish(true)
    }

    #[test]
    fn a_server_repeating_id_and_name_in_every_chunk_gets_them_once() {
        let part = |args: &str| {
            json!({ "tool_calls": [{ "index": 0, "id": "c1", "type": "function",
                                     "function": { "name": "agents_list", "arguments": args } }] })
        };
        let done = feed(&[part("{\"a\""), part(": 1}")]).unwrap();
        assert_eq!(
            done.message["tool_calls"],
            json!([{ "id": "c1", "type": "function",
                     "function": { "name": "agents_list", "arguments": "{\"a\": 1}" } }])
        );
        assert_eq!(done.message["content"], Value::Null);
    }

    #[test]
    fn calls_without_an_index_are_told_apart_by_position() {
        let done = feed(&[json!({ "tool_calls": [
            { "id": "x", "function": { "name": "sessions_list", "arguments": "{}" } },
            { "id": "y", "function": { "name": "agents_list", "arguments": "{}" } },
        ] })])
        .unwrap();
        let names: Vec<&str> = done.message["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["sessions_list", "agents_list"]);
    }

    #[test]
    fn too_many_tool_calls_fail_rather_than_grow() {
        let many: Vec<Value> = (0..=MAX_TOOL_CALLS)
            .map(|i| json!({ "index": i, "id": format!("c{i}") }))
            .collect();
        let err = feed(&[json!({ "tool_calls": many })]).unwrap_err();
        assert!(err.contains("more than 128 tool calls"), "{err}");
    }

    #[test]
    fn text_with_tool_calls_keeps_both() {
        let done = feed(&[
            json!({ "content": "Let me look." }),
            json!({ "tool_calls": [{ "index": 0, "id": "c", "function": { "name": "agents_list" } }] }),
        ])
        .unwrap();
        assert_eq!(done.message["content"], "Let me look.");
        assert_eq!(done.message["tool_calls"][0]["function"]["arguments"], "");
        assert_eq!(
            done.usage,
            Some(Usage {
                input: 0,
                output: 1
            })
        );
    }
}
