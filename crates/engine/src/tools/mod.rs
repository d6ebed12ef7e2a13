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

use std::sync::Arc;

use crate::agent::BoxFuture;
use crate::context::Context;
use crate::exchange::Exchanges;
use crate::tools::context::ToolHost;
use crate::spawn::Spawns;
pub use context::{TOOL_NAMES, ToolContext, ToolError, ToolInputError};
pub(crate) use context::failure;

pub use list::owner_entry;

/// The tools service: the session tools as agents (and `SessionsApi::call_tool`) call
/// them. The read tools need only the shared context; `sessions_send` starts exchanges and
/// `sessions_spawn` sub-agents, whose runs call tools through this same service.
pub struct Tools {
    ctx: Arc<Context>,
    exchanges: Arc<Exchanges>,
    spawns: Arc<Spawns>,
}

impl Tools {
    pub(crate) fn new(ctx: Arc<Context>, exchanges: Arc<Exchanges>, spawns: Arc<Spawns>) -> Tools {
        Tools {
            ctx,
            exchanges,
            spawns,
        }
    }

    internal_fn! {
        /// The session tools `ctx`'s session may call at all, in `TOOL_NAMES` order: the
        /// ones `call_tool`'s gate (the sub-agent tool policy) does not refuse whatever the
        /// parameters, less `sessions_spawn` for a sandboxed session that has no sandboxed
        /// agent to spawn under (the sandbox clamp refuses every spawn then). Otherwise the
        /// sandbox clamp and the agent-to-agent gate narrow what a tool reaches (which
        /// sessions, which agents), not whether it may be called, so the tool stays offered.
        fn allowed_tools(&self, ctx: &ToolContext) -> Vec<&'static str> {
            let config = self.ctx.config();
            TOOL_NAMES
                .iter()
                .copied()
                .filter(|name| {
                    crate::spawn::subagent_refusal(config, &ctx.requester, name)
                        .is_none()
                })
                .filter(|name| *name != "sessions_spawn" || self.may_spawn_somewhere(ctx))
                .collect()
        }
    }

    /// Whether some agent passes `sessions_spawn`'s sandbox rule for `ctx` (a sandboxed
    /// requester spawns only under sandboxed agents: its own, or one its allowlist names).
    fn may_spawn_somewhere(&self, ctx: &ToolContext) -> bool {
        let config = self.ctx.config();
        let own = ctx
            .requester
            .agent_id(&self.ctx.store().scheme().default_agent)
            .to_string();
        // Unsandboxed, or sandboxed with an agent of its own that is: its own agent will do.
        if !ctx.sandboxed || config.agent_sandboxed(&own) {
            return true;
        }
        let (any, allowed) = agents::spawn_allowlist(config, &own);
        config.agents.list.iter().any(|a| {
            let id = switchboard_types::key::normalize_agent_id(&a.id);
            a.sandboxed && (any || allowed.contains(&id))
        })
    }

    internal_fn! {
        /// Run one session tool exactly as an agent would.
        async fn call_tool(
            self: &Arc<Self>,
            name: &str,
            params: &Value,
            ctx: &ToolContext,
        ) -> Result<Value, ToolError> {
            // Sub-agents get no session tools unless `tools.subagents.tools` grants them.
            if TOOL_NAMES.contains(&name)
                && let Some(refusal) =
                    crate::spawn::subagent_refusal(self.ctx.config(), &ctx.requester, name)
            {
                return Ok(failure("forbidden", refusal));
            }
            match name {
                "sessions_list" => list::run(&self.ctx, params, ctx).await,
                "sessions_history" => history::run(&self.ctx, params, ctx).await,
                "sessions_send" => send::run(self, params, ctx).await,
                "sessions_spawn" => spawn::run(self, params, ctx).await,
                "agents_list" => agents::run(&self.ctx, params, ctx),
                other => Err(ToolInputError::UnknownTool(other.to_string()).into()),
            }
        }
    }
}

impl ToolHost for Tools {
    fn allowed_tools(&self, ctx: &ToolContext) -> Vec<&'static str> {
        Tools::allowed_tools(self, ctx)
    }

    fn call_tool<'a>(
        self: Arc<Self>,
        name: &'a str,
        params: &'a Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { Tools::call_tool(&self, name, params, ctx).await })
    }
}
