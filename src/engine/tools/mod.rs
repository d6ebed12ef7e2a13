//! The session tools as an agent sees them: JSON parameters in, JSON result out. Errors a
//! model should read are results (`status: "error" | "forbidden"`); unusable input is a
//! `ToolInputError` (the CLI exits 2 on it).

pub(crate) mod agents;
mod history;
mod list;
pub mod params;
mod resolve;
pub(crate) mod row;
mod send;
mod spawn;

use serde_json::{Value, json};

use super::Engine;
use super::key::SessionKey;
use super::runs::Chain;
use super::storage::StorageError;

pub use list::{owner_row, owner_rows};
pub use resolve::Resolved;

/// The tools this engine offers, in the order `--help` lists them.
pub const TOOL_NAMES: &[&str] = &[
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "agents_list",
];

/// Who is calling: the requester's session (canonical), whether it runs sandboxed, and,
/// for calls made inside a run, the chain and waiters that run belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    pub requester: SessionKey,
    pub sandboxed: bool,
    /// The agent-to-agent chain the calling run continues (`None`: a person's call).
    pub chain: Option<Chain>,
    /// Sessions blocked waiting on the calling run.
    pub waiting: Vec<SessionKey>,
    /// The calling run, if any.
    pub run_id: Option<String>,
}

impl ToolContext {
    /// A call made from outside any run (the CLI, the console, a test).
    pub fn new(requester: SessionKey, sandboxed: bool) -> ToolContext {
        ToolContext {
            requester,
            sandboxed,
            chain: None,
            waiting: Vec::new(),
            run_id: None,
        }
    }
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
        // Sub-agents get no session tools unless `tools.subagents.tools` grants them.
        if TOOL_NAMES.contains(&name)
            && let Some(refusal) =
                super::spawn::subagent_refusal(self.config(), &ctx.requester, name)
        {
            return Ok(failure("forbidden", refusal));
        }
        match name {
            "sessions_list" => list::run(self, params, ctx),
            "sessions_history" => history::run(self, params, ctx),
            "sessions_send" => send::run(self, params, ctx).await,
            "sessions_spawn" => spawn::run(self, params, ctx).await,
            "agents_list" => agents::run(self, params, ctx),
            other => Err(ToolInputError::UnknownTool(other.to_string()).into()),
        }
    }
}
