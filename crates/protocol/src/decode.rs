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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    /// What serde_json itself reads from `text`. Frames are compared as values, not re-parsed
    /// text: without serde_json's `float_roundtrip` feature a parsed float may be one ulp off,
    /// which is the parser's doing, not the frame's.
    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).expect("generated text is JSON")
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".*".prop_map(Value::String),
            prop_oneof![
                Just("req"),
                Just("res"),
                Just("event"),
                Just("type"),
                Just("id"),
                Just("method"),
                Just("ok"),
                Just("payload"),
                Just("error"),
                Just("seq"),
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("type".to_string()),
                            Just("id".to_string()),
                            Just("method".to_string()),
                            Just("ok".to_string()),
                            Just("event".to_string()),
                            Just("params".to_string()),
                            Just("payload".to_string()),
                            Just("error".to_string()),
                            Just("seq".to_string()),
                            ".{0,6}",
                        ],
                        inner
                    ),
                    0..8
                )
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn requests_with_unknown_fields_round_trip_unchanged(
            id in ".{0,10}",
            method in ".{0,10}",
            extra in prop::collection::vec(("[a-z]{1,6}", json_value()), 0..4),
            params in json_value(),
        ) {
            let mut obj = serde_json::Map::new();
            for (k, v) in extra {
                obj.insert(k, v);
            }
            obj.insert("type".into(), "req".into());
            obj.insert("id".into(), id.into());
            obj.insert("method".into(), method.into());
            obj.insert("params".into(), params);
            let v = Value::Object(obj);
            let text = serde_json::to_string(&v).expect("a Value always serialises");
            let frame = Frame::decode(&text, MAX).expect("a well-formed req decodes");
            prop_assert_eq!(serde_json::to_value(&frame).expect("encodes"), parsed(&text));
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,300}") {
            let _ = Frame::decode(&text, MAX);
        }

        #[test]
        fn arbitrary_json_never_panics_and_decoded_frames_round_trip(v in json_value()) {
            let text = serde_json::to_string(&v).expect("a Value always serialises");
            if let Ok(frame) = Frame::decode(&text, MAX) {
                let back = serde_json::to_value(&frame).expect("a decoded frame encodes");
                prop_assert_eq!(back, parsed(&text));
            }
        }
    }

    #[test]
    fn nesting_past_the_recursion_limit_is_an_error_not_a_crash() {
        let depth = 100_000;
        let text = format!(
            r#"{{"type":"req","id":"1","method":"m","params":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        match Frame::decode(&text, usize::MAX) {
            Err(ProtocolError::BadJson(e)) => {
                assert!(e.to_string().contains("recursion limit"), "{e}")
            }
            other => panic!("expected a recursion-limit error, got {other:?}"),
        }
    }

    #[test]
    fn oversize_text_is_refused_before_parsing() {
        // Not even JSON: the size check must come first.
        let text = "x".repeat(101);
        match Frame::decode(&text, 100) {
            Err(ProtocolError::TooLarge { len: 101, max: 100 }) => {}
            other => panic!("expected TooLarge, got {other:?}"),
        }
        let ok = r#"{"type":"event","event":"tick"}"#;
        assert!(Frame::decode(ok, ok.len()).is_ok());
        assert!(matches!(
            Frame::decode(ok, ok.len() - 1),
            Err(ProtocolError::TooLarge { .. })
        ));
    }
}
