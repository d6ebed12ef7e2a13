//! Who calls a tool and how a call fails: the types a run needs to call tools, kept
//! apart from the tools themselves so `engine::runs` does not import the tools that start runs.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::agent::BoxFuture;

use crate::chain::Chain;
use switchboard_types::key::SessionKey;
use switchboard_store::StoreError;

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
    Storage(#[from] StoreError),
}

/// A result that reports failure to the model, with OpenClaw's `{status, error}` shape.
pub(crate) fn failure(status: &str, error: impl Into<String>) -> Value {
    json!({ "status": status, "error": error.into() })
}

/// The session tools as a run calls them: the tools service implements it. The runs service
/// names only this trait (here, in a leaf), so runs/ depends on no service that starts runs
/// itself (exchanges, spawns, the tools), and no module imports back into runs/.
pub trait ToolHost: Send + Sync {
    /// The tools `ctx`'s session may call at all.
    fn allowed_tools(&self, ctx: &ToolContext) -> Vec<&'static str>;
    /// Run one session tool as the run's agent called it. Takes the host by `Arc`: a tool
    /// that starts runs of its own (a send, a spawn) hands them the same host.
    fn call_tool<'a>(
        self: Arc<Self>,
        name: &'a str,
        params: &'a Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}
