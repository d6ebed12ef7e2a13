//! The bounded decoder: text to `Frame`, refusing oversize or malformed input with a clear error.

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use super::frame::{Event, Frame, Request, Response};

/// Why a frame could not be decoded (or encoded).
#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    /// Also covers nesting deeper than serde_json's recursion limit.
    #[error("frame is not valid JSON: {0}")]
    BadJson(serde_json::Error),
    #[error("frame is a JSON {0}, not an object")]
    NotAnObject(&'static str),
    #[error("frame has no `type` string")]
    MissingType,
    #[error("unknown frame type `{0}` (expected req, res or event)")]
    UnknownType(String),
    #[error("`{kind}` frame has no `{field}`")]
    MissingField {
        kind: &'static str,
        field: &'static str,
    },
    #[error("`{kind}` frame is malformed: {message}")]
    Malformed { kind: &'static str, message: String },
    #[error("{what} does not match the expected shape at `{path}`: {message}")]
    Payload {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("frame could not be encoded: {0}")]
    Encode(serde_json::Error),
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Reads one frame kind, naming the first required field that is absent.
fn body<T: DeserializeOwned>(
    kind: &'static str,
    required: &[&'static str],
    obj: serde_json::Map<String, Value>,
) -> Result<T, ProtocolError> {
    if let Some(field) = required.iter().find(|f| !obj.contains_key(**f)) {
        return Err(ProtocolError::MissingField { kind, field });
    }
    serde_json::from_value(Value::Object(obj)).map_err(|e| ProtocolError::Malformed {
        kind,
        message: e.to_string(),
    })
}

impl Frame {
    /// Decodes one text frame, refusing text over `max_bytes` before parsing it.
    pub fn decode(text: &str, max_bytes: usize) -> Result<Frame, ProtocolError> {
        if text.len() > max_bytes {
            return Err(ProtocolError::TooLarge {
                len: text.len(),
                max: max_bytes,
            });
        }
        let v: Value = serde_json::from_str(text).map_err(ProtocolError::BadJson)?;
        Frame::from_value(v)
    }

    /// Reads a frame from parsed JSON.
    pub fn from_value(v: Value) -> Result<Frame, ProtocolError> {
        let mut obj = match v {
            Value::Object(obj) => obj,
            other => return Err(ProtocolError::NotAnObject(kind_of(&other))),
        };
        let kind = match obj.shift_remove("type") {
            Some(Value::String(s)) => s,
            _ => return Err(ProtocolError::MissingType),
        };
        match kind.as_str() {
            "req" => body::<Request>("req", &["id", "method"], obj).map(Frame::Req),
            "res" => body::<Response>("res", &["id", "ok"], obj).map(Frame::Res),
            "event" => body::<Event>("event", &["event"], obj).map(Frame::Event),
            _ => Err(ProtocolError::UnknownType(kind)),
        }
    }
}
