//! Agent backends: what produces a session's replies. The engine hands an agent one turn
//! (the incoming text, the step, the round, who asked, the injected context) plus a way to
//! call session tools as that session; the agent returns its reply or fails.

pub mod openai;
pub mod scripted;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use switchboard_types::config::{Config, ModelProvider, ThinkingLevel};

/// A boxed future, so backends can be used as `dyn Agent`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Which part of the work a turn belongs to (DESIGN §3.3 `when.step`).
pub use switchboard_types::api::Step;

/// One turn as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The session the turn runs in (canonical key).
    pub session_key: String,
    /// The agent running it.
    pub agent_id: String,
    pub step: Step,
    /// Ping-pong round as the spec numbers them: 1 is the target's reply to the original
    /// send, 2 the requester's answer to that, and so on. 0 outside exchanges.
    pub round: u32,
    /// The other party's session key in an exchange (the requester of a send for
    /// the target, the target for the requester); `None` for an inbound user message.
    pub from: Option<String>,
    /// The incoming message text.
    pub text: String,
    /// Context the engine injects (the spec's agent-to-agent context lines), if any.
    pub context: Option<String>,
    /// Where the incoming text came from when another session sent it (not a person).
    pub provenance: Option<Provenance>,
}

/// The origin of an inter-session message, as OpenClaw tells the model (its
/// `[Inter-session message] sourceSession=… sourceChannel=… sourceTool=…` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub source_session: String,
    pub source_channel: Option<String>,
    /// `sessions_send`, `sessions_spawn`, `subagent_announce`.
    pub source_tool: String,
}

impl Provenance {
    /// The provenance a recorded transcript message carries, when another session sent it
    /// (`provenance.kind == "inter_session"`).
    pub fn of_message(message: &Value) -> Option<Provenance> {
        let p = message.get("provenance")?;
        if p.get("kind").and_then(Value::as_str) != Some("inter_session") {
            return None;
        }
        let field = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Provenance {
            source_session: field("sourceSessionKey")?,
            source_channel: field("sourceChannel"),
            source_tool: field("sourceTool").unwrap_or_else(|| "sessions_send".into()),
        })
    }
}

/// What produced a turn, as its transcript lines name it (OpenClaw's `api`, `provider` and
/// `model` fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    pub api: String,
    pub provider: String,
    pub model: String,
}

impl ModelRef {
    /// The scripted backend, for `agent_id`.
    pub fn scripted(agent_id: &str) -> ModelRef {
        ModelRef {
            api: "scripted".into(),
            provider: "switchboard".into(),
            model: format!("scripted/{agent_id}"),
        }
    }
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

    /// `call`, recorded under the model's own tool call id when it gave one.
    fn call_with_id<'a>(
        &'a self,
        id: Option<&'a str>,
        name: &'a str,
        args: &'a Value,
    ) -> BoxFuture<'a, Value> {
        let _ = id;
        self.call(name, args)
    }

    /// The session tools this turn's session may call (the same policy that refuses a
    /// call decides it), in the spec's order; a backend offers only these.
    fn allowed_tools(&self) -> Vec<&'static str> {
        openai::tools::NAMES.to_vec()
    }

    /// The session's transcript before this turn's incoming message: at most `limit`
    /// messages (OpenClaw's message shape, tool calls and results included), oldest first.
    /// Shared, not copied: a model turn reads a window of them every time.
    fn history(&self, limit: usize) -> BoxFuture<'_, Vec<std::sync::Arc<Value>>> {
        let _ = limit;
        Box::pin(async { Vec::new() })
    }

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

    /// What the transcript names as the producer of this agent's messages.
    fn model_ref(&self, agent_id: &str) -> ModelRef {
        ModelRef::scripted(agent_id)
    }
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
    backend_with_overrides(config, providers, agent_id, model, None)
}

/// Like `backend_with_model`, with the session's thinking level (a spawn's `thinking`)
/// winning over the agent's (`thinkingLevel`, else `agents.defaults.thinkingLevel`). The
/// system prompt is always the agent's own.
pub fn backend_with_overrides(
    config: &Config,
    providers: &openai::Providers,
    agent_id: &str,
    model: Option<&str>,
    thinking: Option<ThinkingLevel>,
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
                Some((id, p, name)) => Box::new(
                    openai::OpenAiAgent::new(
                        providers,
                        id,
                        p,
                        name,
                        agent.and_then(|a| a.system_prompt_text().map(str::to_string)),
                    )
                    .with_thinking(thinking.or(config.thinking_level(agent_id))),
                ),
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
