//! The session tools as an agent sees them: JSON parameters in, JSON result out. Errors a
//! model should read are results (`status: "error" | "forbidden"`); unusable input is a
//! `ToolInputError` (the CLI exits 2 on it).

mod history;
mod list;
pub mod params;
mod resolve;
mod row;

use serde_json::{Value, json};

use super::Engine;
use super::key::SessionKey;
use super::storage::StorageError;

pub use list::{owner_row, owner_rows};
pub use resolve::Resolved;

/// The tools this engine offers, in the order `--help` lists them.
pub const TOOL_NAMES: &[&str] = &["sessions_list", "sessions_history"];

/// Who is calling: the requester's session (canonical) and whether it runs sandboxed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    pub requester: SessionKey,
    pub sandboxed: bool,
}

/// Input the tool cannot work with at all (OpenClaw raises these as tool input errors).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolInputError {
    #[error("unknown tool: {0} (known tools: {known})", known = TOOL_NAMES.join(", "))]
    UnknownTool(String),
    #[error("{0} required")]
    Missing(String),
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Input(#[from] ToolInputError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A result that reports failure to the model, with OpenClaw's `{status, error}` shape.
pub(crate) fn failure(status: &str, error: impl Into<String>) -> Value {
    json!({ "status": status, "error": error.into() })
}

impl Engine {
    /// Run one session tool exactly as an agent would.
    pub async fn call_tool(
        &self,
        name: &str,
        params: &Value,
        ctx: &ToolContext,
    ) -> Result<Value, ToolError> {
        match name {
            "sessions_list" => list::run(self, params, ctx),
            "sessions_history" => history::run(self, params, ctx),
            other => Err(ToolInputError::UnknownTool(other.to_string()).into()),
        }
    }
}
