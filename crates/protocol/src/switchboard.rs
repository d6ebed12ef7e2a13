//! Switchboard's own methods and event on OpenClaw's framing: `SessionsApi` carried call for
//! call, in the API's serde types, so a remote engine answers exactly as an embedded one.
//! OpenClaw clients never see these unless they ask (`features.methods` lists them; they
//! ignore what they do not know).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ErrorShape;
use switchboard_types::api::{AgentInfo, ApiError, KeyPurpose, StorageKind, WorkId};

/// Offered in `connect.caps` by a client that wants `switchboard.event` frames (every
/// engine event, numbered) once it calls `switchboard.subscribe`.
pub const CAP: &str = "switchboard.v1";

/// The event carrying one `api::Sequenced` (engine sequence number + `EngineEvent`).
pub const EVENT: &str = "switchboard.event";

/// Sent instead of the events a subscription lost (the gateway fell behind the engine):
/// payload `GapPayload`. The client reloads what it shows, as after a reconnect.
pub const GAP: &str = "switchboard.gap";

/// The payload of `GAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GapPayload {
    /// How many engine events were lost.
    pub missed: u64,
}

/// Method names; params and results are the `api` types named beside each.
pub mod method {
    /// `{}` → `api::Status`
    pub const STATUS: &str = "switchboard.status";
    /// `api::SessionsQuery` → `api::SessionsPage`
    pub const SESSIONS: &str = "switchboard.sessions";
    /// `KeyParams` → `api::SessionDetail | null`
    pub const SESSION: &str = "switchboard.session";
    /// `api::TranscriptQuery` → `api::TranscriptPage`
    pub const TRANSCRIPT: &str = "switchboard.transcript";
    /// `ResolveParams` → `api::ResolvedKey`
    pub const RESOLVE_KEY: &str = "switchboard.resolveKey";
    /// `api::SendRequest` → `api::SendReceipt`
    pub const SEND: &str = "switchboard.send";
    /// `WaitRunParams` → `api::RunResult`
    pub const WAIT_RUN: &str = "switchboard.waitRun";
    /// `WaitWorkParams` → `WaitWorkResult`
    pub const WAIT_WORK: &str = "switchboard.waitWork";
    /// `WorkParams` → `StillRunningResult`
    pub const STILL_RUNNING: &str = "switchboard.stillRunning";
    /// `api::ToolCall` → `api::ToolResult`
    pub const CALL_TOOL: &str = "switchboard.callTool";
    /// `api::PatchRequest` → `api::PatchResult`
    pub const PATCH: &str = "switchboard.patch";
    /// `AgentSendsParams` → `api::AgentSendsResult`
    pub const AGENT_SENDS: &str = "switchboard.agentSends";
    /// `KeyParams` → `DeleteResult`
    pub const DELETE: &str = "switchboard.delete";
    /// `{}` → `AgentsResult`
    pub const AGENTS: &str = "switchboard.agents";
    /// `AbortParams` → `api::AbortOutcome`
    pub const ABORT: &str = "switchboard.abort";
    /// `api::ExchangesQuery` → `api::ExchangesPage`
    pub const EXCHANGES: &str = "switchboard.exchanges";
    /// `ExchangeParams` → `api::ExchangeDetail | null`
    pub const EXCHANGE: &str = "switchboard.exchange";
    /// `TrafficParams` → `TrafficResult`
    pub const TRAFFIC: &str = "switchboard.traffic";
    /// `api::OutboxQuery` → `DeliveriesResult`
    pub const DELIVERIES: &str = "switchboard.deliveries";
    /// `{}` → `DeliveryCountsResult`
    pub const DELIVERY_COUNTS: &str = "switchboard.deliveryCounts";
    /// `DeliveryParams` → `api::OutboxRow | null`
    pub const RETRY_DELIVERY: &str = "switchboard.retryDelivery";
    /// `PairingsParams` → `PairingsResult`
    pub const PAIRINGS: &str = "switchboard.pairings";
    /// `ApprovePairingParams` → `api::pairing::Pairing | null`
    pub const APPROVE_PAIRING: &str = "switchboard.approvePairing";
    /// `{}` → `SubscribeResult`; then `switchboard.event` frames until the connection ends.
    pub const SUBSCRIBE: &str = "switchboard.subscribe";

    /// Every method above, for `hello-ok.features.methods`.
    pub const ALL: &[&str] = &[
        STATUS,
        SESSIONS,
        SESSION,
        TRANSCRIPT,
        RESOLVE_KEY,
        SEND,
        WAIT_RUN,
        WAIT_WORK,
        STILL_RUNNING,
        CALL_TOOL,
        PATCH,
        AGENT_SENDS,
        DELETE,
        AGENTS,
        ABORT,
        EXCHANGES,
        EXCHANGE,
        TRAFFIC,
        DELIVERIES,
        DELIVERY_COUNTS,
        RETRY_DELIVERY,
        PAIRINGS,
        APPROVE_PAIRING,
        SUBSCRIBE,
    ];

    /// Methods that change state: refused on a read-only connection.
    pub const WRITES: &[&str] = &[
        SEND,
        CALL_TOOL,
        PATCH,
        AGENT_SENDS,
        DELETE,
        ABORT,
        RETRY_DELIVERY,
        APPROVE_PAIRING,
    ];
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyParams {
    pub key: String,
}

/// `switchboard.agentSends`: stop (or let again) the agent-to-agent sends into `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSendsParams {
    pub key: String,
    pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortParams {
    pub key: String,
    /// Only this run (when it is running on `key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeParams {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficParams {
    /// ms since the epoch.
    pub since: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficResult {
    pub counts: Vec<switchboard_types::api::TrafficCount>,
}

/// `switchboard.deliveries`: newest first; `left_out` of them did not fit in the frame (the
/// oldest of the page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveriesResult {
    pub deliveries: Vec<switchboard_types::api::OutboxRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryCountsResult {
    /// Absent where deliveries are not recorded.
    pub counts: Option<switchboard_types::api::DeliveryCounts>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PairingsParams {
    pub channel: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingsResult {
    pub pairings: Vec<switchboard_types::api::pairing::Pairing>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovePairingParams {
    pub channel: String,
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryParams {
    pub id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveParams {
    pub raw: String,
    pub purpose: KeyPurpose,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitRunParams {
    pub run_id: String,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitWorkParams {
    pub work: WorkId,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitWorkResult {
    /// Everything the call set off has ended.
    pub done: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkParams {
    pub work: WorkId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StillRunningItem {
    pub label: String,
    pub age_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StillRunningResult {
    pub running: Vec<StillRunningItem>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteResult {
    pub deleted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsResult {
    pub agents: Vec<AgentInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeResult {
    /// The engine's last event number when the subscription began (events after it follow).
    pub seq: Option<u64>,
}

/// Error codes: OpenClaw's `INVALID_REQUEST` for bad input, and one code per other
/// `ApiError` kind so a client rebuilds the same kind (and exit code).
pub mod code {
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    pub const NOT_FOUND: &str = "NOT_FOUND";
    pub const STORAGE: &str = "STORAGE_ERROR";
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    /// The connection's scopes do not allow the method (a read-only token).
    pub const FORBIDDEN: &str = "FORBIDDEN";
}

/// The `error` field carrying an `ApiError::Storage`'s kind.
const STORAGE_KIND: &str = "storageKind";

/// An API failure as the `error` of a `res`.
pub fn error_shape(e: &ApiError) -> ErrorShape {
    let mut extra = Map::new();
    let (c, m) = match e {
        ApiError::BadInput(m) => (code::INVALID_REQUEST, m),
        ApiError::NotFound(m) => (code::NOT_FOUND, m),
        ApiError::Storage { kind, message } => {
            // Our own protocol only: the kind rides beside the message so a client rebuilds
            // it (an older client ignores the field; an older server leaves it out: `other`).
            if *kind != StorageKind::Other {
                extra.insert(STORAGE_KIND.into(), Value::from(kind.as_str()));
            }
            (code::STORAGE, message)
        }
        ApiError::Unavailable(m) => (code::UNAVAILABLE, m),
    };
    ErrorShape {
        code: c.to_string(),
        message: m.clone(),
        extra,
    }
}

/// A `res` error back as the API failure it stands for (unknown codes, such as OpenClaw's
/// own, are the caller's bad input unless they say the service is unavailable).
pub fn api_error(e: &ErrorShape) -> ApiError {
    let m = e.message.clone();
    match e.code.as_str() {
        code::NOT_FOUND => ApiError::NotFound(m),
        code::STORAGE => ApiError::Storage {
            kind: e
                .extra
                .get(STORAGE_KIND)
                .and_then(Value::as_str)
                .and_then(|k| k.parse().ok())
                .unwrap_or(StorageKind::Other),
            message: m,
        },
        code::UNAVAILABLE => ApiError::Unavailable(m),
        _ => ApiError::BadInput(m),
    }
}

/// Reads a method's params or result, naming the field that does not fit.
pub fn decode<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        format!("invalid {what} at `{path}`: {}", e.into_inner())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_error_kind_survives_the_wire() {
        for e in [
            ApiError::BadInput("b".into()),
            ApiError::NotFound("n".into()),
            ApiError::storage("s"),
            ApiError::Storage {
                kind: StorageKind::DiskFull,
                message: "full".into(),
            },
            ApiError::Unavailable("u".into()),
        ] {
            assert_eq!(api_error(&error_shape(&e)), e);
        }
    }

    #[test]
    fn write_methods_are_known_methods() {
        for m in method::WRITES {
            assert!(method::ALL.contains(m));
        }
    }
}
