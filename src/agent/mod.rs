//! Agent backends: what produces a session's replies. The engine hands an agent one turn
//! (the incoming text, the step, the round, who asked, the injected context) plus a way to
//! call session tools as that session; the agent returns its reply or fails.

pub mod openai;
pub mod scripted;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::config::{Config, ModelProvider, ScriptStep};

/// A boxed future, so backends can be used as `dyn Agent`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Which part of a flow a turn belongs to (DESIGN §3.3 `when.step`).
pub type Step = ScriptStep;

/// One turn as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The session the turn runs in (canonical key).
    pub session_key: String,
    /// The agent running it.
    pub agent_id: String,
    pub step: Step,
    /// Ping-pong round as the spec numbers them: 1 is the target's reply to the original
    /// send, 2 the requester's answer to that, and so on. 0 outside agent-to-agent flows.
    pub round: u32,
    /// The other party's session key in an agent-to-agent flow (the requester of a send for
    /// the target, the target for the requester); `None` for an inbound user message.
    pub from: Option<String>,
    /// The incoming message text.
    pub text: String,
    /// Context the engine injects (the spec's agent-to-agent context lines), if any.
    pub context: Option<String>,
}

/// Token usage of one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

/// What a finished turn produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// The final assistant text (may be empty: "no reply").
    pub text: String,
    pub usage: Option<Usage>,
}

/// Why a turn failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The agent itself failed (a scripted `error`, a model server error …).
    #[error("{0}")]
    Failed(String),
    /// No backend can run this agent's model.
    #[error(
        "no backend for model {0:?}: it must be \"scripted\" or \"<provider>/<model>\" with the \
         provider defined under models.providers (api \"openai-completions\")"
    )]
    NoBackend(String),
}

/// Session tools as the turn's session calls them. The engine records each call as an
/// assistant `toolCall` message plus a `toolResult` message, and returns the result JSON
/// (input errors come back as `{status: "error", error}` results, as a model would see them).
///
/// It is also where a streaming backend reports the reply as it grows: `reply_delta` becomes
/// an engine event at once (the transcript line is still written once, at the end).
pub trait ToolRunner: Send + Sync {
    fn call<'a>(&'a self, name: &'a str, args: &'a Value) -> BoxFuture<'a, Value>;

    /// `delta` was appended to the text of model call `step` (1-based) of this turn, whose
    /// text was `offset` bytes long before it. Cheap and non-blocking; the default drops it.
    fn reply_delta(&self, step: u32, offset: usize, delta: &str) {
        let _ = (step, offset, delta);
    }
}

/// A backend.
pub trait Agent: Send + Sync {
    fn run<'a>(
        &'a self,
        turn: &'a Turn,
        tools: &'a dyn ToolRunner,
    ) -> BoxFuture<'a, Result<Reply, AgentError>>;
}

/// The backend for `agent_id` under `config`: scripted for model `"scripted"` (or no model),
/// `openai` for `provider/model` with an openai-completions provider, otherwise one that
/// fails every turn saying why.
pub fn backend_for(
    config: &Config,
    providers: &openai::Providers,
    agent_id: &str,
) -> Box<dyn Agent> {
    backend_with_model(config, providers, agent_id, None)
}

/// Like `backend_for`, with the session's model override (a spawn's `model`) winning over
/// the agent's configured model. `providers` are the engine's shared provider clients.
pub fn backend_with_model(
    config: &Config,
    providers: &openai::Providers,
    agent_id: &str,
    model: Option<&str>,
) -> Box<dyn Agent> {
    let agent = config.agent(agent_id);
    match model.or(agent.and_then(|a| a.model.as_deref())) {
        None | Some("scripted") => Box::new(scripted::ScriptedAgent::new(
            agent.map(|a| a.script.clone()).unwrap_or_default(),
        )),
        Some(other) => {
            let provider = other.split_once('/').and_then(|(id, name)| {
                let p = config.models.providers.get(id)?;
                let usable = matches!(
                    p.api.as_deref(),
                    None | Some(ModelProvider::OPENAI_COMPLETIONS)
                ) && !name.is_empty();
                usable.then_some((id, p, name))
            });
            match provider {
                Some((id, p, name)) => Box::new(openai::OpenAiAgent::new(
                    providers,
                    id,
                    p,
                    name,
                    agent.and_then(|a| a.system_prompt.clone()),
                )),
                None => Box::new(Unavailable(other.to_string())),
            }
        }
    }
}

/// An agent whose model has no backend in this build: every turn fails, saying so.
struct Unavailable(String);

impl Agent for Unavailable {
    fn run<'a>(
        &'a self,
        _turn: &'a Turn,
        _tools: &'a dyn ToolRunner,
    ) -> BoxFuture<'a, Result<Reply, AgentError>> {
        let err = AgentError::NoBackend(self.0.clone());
        Box::pin(async move { Err(err) })
    }
}
