//! The typed handshake payloads: `connect.challenge`, `connect` params and `hello-ok`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The payload of the server's first frame, the event `connect.challenge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectChallenge {
    pub nonce: String,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The params of the client's first request, `connect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectParams {
    pub min_protocol: u32,
    pub max_protocol: u32,
    pub client: ClientInfo,
    pub role: String,
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthParams>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceAuth>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who is connecting: `client.id` must be a gateway-known id, `mode` one of its modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub id: String,
    pub version: String,
    pub platform: String,
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `connect.auth`: the shared gateway token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `connect.device`: the device identity and its Ed25519 signature over the v3 payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAuth {
    /// Hex SHA-256 of the raw public key.
    pub id: String,
    /// Base64url of the raw 32-byte key.
    pub public_key: String,
    /// Base64url signature.
    pub signature: String,
    /// The challenge's `ts`.
    pub signed_at: u64,
    /// The challenge's `nonce`.
    pub nonce: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `type` of a `hello-ok` payload; anything else is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloOkTag {
    #[serde(rename = "hello-ok")]
    HelloOk,
}

/// The payload of the `res` answering `connect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloOk {
    #[serde(rename = "type")]
    pub tag: HelloOkTag,
    pub protocol: u32,
    pub server: ServerInfo,
    pub features: Features,
    /// Gateway state at connect time; its keys differ between gateways, so kept as JSON.
    pub snapshot: Value,
    pub policy: Policy,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `hello-ok.server`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub version: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `hello-ok.features`: what the server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub methods: Vec<String>,
    pub events: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `hello-ok.policy`: the limits the client must respect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub max_payload: u64,
    pub max_buffered_bytes: u64,
    pub tick_interval_ms: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
