//! The `openai` backend: an agent on an OpenAI-compatible chat-completions server. A turn
//! loops model → tool calls (run through the engine's `ToolRunner`) → model, up to the
//! provider's step limit; the last text is the reply.

mod client;
mod context;
pub mod limit;
mod providers;
mod stream;
pub mod tools;

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Agent, AgentError, BoxFuture, ModelRef, Reply, ToolRunner, Turn, Usage};
use client::ProviderClient;
pub use providers::Providers;
use switchboard_types::config::{ModelProvider, ThinkingLevel};

/// An agent running `model` on one provider.
pub struct OpenAiAgent {
    client: Arc<ProviderClient>,
    provider_id: String,
    model: String,
    system_prompt: Option<String>,
    thinking: Option<ThinkingLevel>,
    max_steps: u32,
}

impl OpenAiAgent {
    /// `providers` hands out the provider's shared client (and its request limiter).
    pub fn new(
        providers: &Providers,
        provider_id: &str,
        provider: &ModelProvider,
        model: &str,
        system_prompt: Option<String>,
    ) -> OpenAiAgent {
        OpenAiAgent {
            client: providers.client(provider_id, provider),
            provider_id: provider_id.to_string(),
            model: model.to_string(),
            system_prompt,
            thinking: None,
            max_steps: provider
                .max_steps
                .unwrap_or(ModelProvider::DEFAULT_MAX_STEPS)
                .clamp(1, ModelProvider::MAX_STEPS),
        }
    }

    /// The thinking level its requests carry (`reasoning_effort`).
    pub fn with_thinking(mut self, thinking: Option<ThinkingLevel>) -> OpenAiAgent {
        self.thinking = thinking;
        self
    }

    /// The opening messages: the system prompt with the engine's injected context (OpenClaw
    /// puts the agent-to-agent context in the system prompt too), the session's recent
    /// history, then the turn's text.
    fn opening(&self, turn: &Turn, history: Vec<Value>) -> Vec<Value> {
        let system: Vec<&str> = [self.system_prompt.as_deref(), turn.context.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.trim().is_empty())
            .collect();
        let mut messages = Vec::with_capacity(history.len() + 2);
        if !system.is_empty() {
            messages.push(json!({ "role": "system", "content": system.join("\n\n") }));
        }
        messages.extend(history);
        messages.push(context::user_message(turn));
        messages
    }

    async fn run_turn(&self, turn: &Turn, tools: &dyn ToolRunner) -> Result<Reply, AgentError> {
        let history = context::history(tools.history(context::HISTORY_READ).await);
        let mut messages = self.opening(turn, history);
        let offered = tools.allowed_tools();
        // No tools at all: the key is left out (an empty array is rejected by some servers).
        let definitions = (!offered.is_empty()).then(|| tools::definitions_of(&offered));
        let mut usage: Option<Usage> = None;
        for step in 1..=self.max_steps {
            let last = step == self.max_steps;
            // Serialised from borrowed parts: the history is not copied into a body per step.
            let request = client::Request {
                model: &self.model,
                messages: &messages,
                tools: definitions.as_deref(),
                // The last call may not use tools, so a model that keeps calling them still
                // gets to answer.
                tool_choice: (last && definitions.is_some()).then_some("none"),
                reasoning_effort: self.thinking.and_then(ThinkingLevel::reasoning_effort),
                stream: None,
                stream_options: None,
            };
            tracing::debug!(model = %self.model, step, "model request");
            let on_delta = |offset: usize, delta: &str| tools.reply_delta(step, offset, delta);
            let client::Completion { message, usage: u } = (self.client.limit)
                .run(self.client.complete(request, &on_delta))
                .await
                .map_err(AgentError::Failed)?;
            if let Some(u) = u {
                let total = usage.get_or_insert_with(Usage::default);
                total.input += u.input;
                total.output += u.output;
            }
            let calls = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty())
                .cloned();
            let Some(calls) = calls else {
                let text = message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                return Ok(Reply { text, usage });
            };
            if last {
                break;
            }
            messages.push(message);
            for call in &calls {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                let result = run_call(call, tools, &offered).await;
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": id,
                    "content": result.to_string(),
                }));
            }
        }
        Err(AgentError::Failed(format!(
            "model {} was still calling tools after {} model calls (the step limit, maxSteps)",
            self.model, self.max_steps
        )))
    }
}

impl Agent for OpenAiAgent {
    fn run<'a>(
        &'a self,
        turn: &'a Turn,
        tools: &'a dyn ToolRunner,
    ) -> BoxFuture<'a, Result<Reply, AgentError>> {
        Box::pin(self.run_turn(turn, tools))
    }

    fn model_ref(&self, _agent_id: &str) -> ModelRef {
        ModelRef {
            api: ModelProvider::OPENAI_COMPLETIONS.to_string(),
            provider: self.provider_id.clone(),
            model: self.model.clone(),
        }
    }
}

/// One tool call's result as the model will see it: the engine's result, or an error the
/// model can correct (an unknown tool or one not offered, arguments that are not a JSON
/// object).
async fn run_call(call: &Value, tools: &dyn ToolRunner, offered: &[&str]) -> Value {
    let name = call
        .pointer("/function/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !offered.contains(&name) {
        return json!({
            "status": "error",
            "error": format!("unknown tool {name:?}; the tools are {}", offered.join(", ")),
        });
    }
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty());
    let raw = call
        .pointer("/function/arguments")
        .cloned()
        .unwrap_or(Value::Null);
    // The API sends arguments as a JSON string; some servers send the object itself.
    let args = match raw {
        Value::String(s) if s.trim().is_empty() => Ok(json!({})),
        Value::String(s) => serde_json::from_str::<Value>(&s).map_err(|e| e.to_string()),
        Value::Null => Ok(json!({})),
        other => Ok(other),
    };
    match args {
        Ok(args @ Value::Object(_)) => tools.call_with_id(id, name, &args).await,
        Ok(other) => json!({
            "status": "error",
            "error": format!("{name}: arguments must be a JSON object, got {other}"),
        }),
        Err(e) => json!({
            "status": "error",
            "error": format!("{name}: the arguments are not valid JSON ({e})"),
        }),
    }
}
