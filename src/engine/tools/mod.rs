//! The session tools as an agent sees them: JSON parameters in, JSON result out. Errors a
//! model should read are results (`status: "error" | "forbidden"`); unusable input is a
//! `ToolInputError` (the CLI exits 2 on it).

pub(crate) mod agents;
pub mod context;
mod history;
mod list;
pub mod params;
mod resolve;
pub(crate) mod row;
mod send;
mod spawn;

use serde_json::Value;

use super::Engine;
pub use context::{TOOL_NAMES, ToolContext, ToolError, ToolInputError};
pub(crate) use context::failure;

pub use list::{owner_entry, owner_row};

impl Engine {
    internal_fn! {
        /// Run one session tool exactly as an agent would.
        async fn call_tool(
            &self,
            name: &str,
            params: &Value,
            ctx: &ToolContext,
        ) -> Result<Value, ToolError> {
            // Sub-agents get no session tools unless `tools.subagents.tools` grants them.
            if TOOL_NAMES.contains(&name)
                && let Some(refusal) =
                    crate::engine::flows::spawn::subagent_refusal(self.config(), &ctx.requester, name)
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
}
