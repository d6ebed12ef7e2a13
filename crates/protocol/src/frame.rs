//! The envelope: `req`, `res` and `event` frames, keeping every field we do not model.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::decode::ProtocolError;

/// The error code OpenClaw 2026.9.6 answers with for unknown methods and bad params.
pub const INVALID_REQUEST: &str = "INVALID_REQUEST";

/// One text frame of the gateway protocol, tagged on the wire by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    Req(Request),
    Res(Response),
    Event(Event),
}

/// A call: `{type: "req", id, method, params}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: String,
    pub method: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An answer: `{type: "res", id, ok, payload}` or `{type: "res", id, ok: false, error}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    pub ok: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload: Option<Value>,
    /// A payload already written as JSON text, sent as `payload` in place of `payload`
    /// (a gateway that keeps rows it rendered splices them in rather than building and
    /// serialising a `Value` again). Never read: a decoded answer has `payload`.
    #[serde(
        rename(serialize = "payload"),
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    pub rendered: Option<Rendered>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// JSON text checked once when made (`Rendered::new`), written out as it is.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Rendered(Box<serde_json::value::RawValue>);

impl Rendered {
    /// `text` when it is one JSON value; the parse error otherwise.
    pub fn new(text: String) -> Result<Rendered, serde_json::Error> {
        serde_json::value::RawValue::from_string(text).map(Rendered)
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl From<Box<serde_json::value::RawValue>> for Rendered {
    fn from(raw: Box<serde_json::value::RawValue>) -> Rendered {
        Rendered(raw)
    }
}

impl PartialEq for Rendered {
    fn eq(&self, other: &Rendered) -> bool {
        self.get() == other.get()
    }
}

/// A push from the server: `{type: "event", event, payload, seq?, stateVersion?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub event: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload: Option<Value>,
    /// The per-connection event counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Seen as `{"presence": 1, "health": 10}`; kept as JSON because its keys vary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_version: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `error` of a failed `res`: `{code, message, …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorShape {
    /// `INVALID_REQUEST` is the one code the reference gateway was seen to send.
    pub code: String,
    pub message: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Keeps an explicit `null` as `Some(Null)`, so a frame carrying one re-encodes unchanged;
/// only an absent field is `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn typed<T: DeserializeOwned>(what: &'static str, v: Option<&Value>) -> Result<T, ProtocolError> {
    let v = v.cloned().unwrap_or(Value::Null);
    serde_path_to_error::deserialize(v).map_err(|e| ProtocolError::Payload {
        what,
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

impl Request {
    /// The params read as a typed payload (for example `ConnectParams`).
    pub fn params_as<T: DeserializeOwned>(&self) -> Result<T, ProtocolError> {
        typed("params", self.params.as_ref())
    }
}

impl Response {
    /// The payload read as a typed payload (for example `HelloOk`).
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, ProtocolError> {
        typed("payload", self.payload.as_ref())
    }
}

impl Event {
    /// The payload read as a typed payload (for example `ConnectChallenge`).
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, ProtocolError> {
        typed("payload", self.payload.as_ref())
    }
}

impl Frame {
    /// The frame as one line of JSON text.
    pub fn encode(&self) -> Result<String, ProtocolError> {
        serde_json::to_string(self).map_err(ProtocolError::Encode)
    }
}

impl<'de> Deserialize<'de> for Frame {
    /// Through `Frame::from_value`, so serde users get the same checks and messages as
    /// `Frame::decode`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Frame::from_value(v).map_err(serde::de::Error::custom)
    }
}
