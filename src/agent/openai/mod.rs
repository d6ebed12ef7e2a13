//! The `openai` backend: an agent on an OpenAI-compatible chat-completions server. A turn
//! loops model → tool calls (run through the engine's `ToolRunner`) → model, up to the
//! provider's step limit; the last text is the reply.

mod client;
pub mod limit;
mod providers;
mod stream;
pub mod tools;

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Agent, AgentError, BoxFuture, Reply, ToolRunner, Turn, Usage};
use crate::config::ModelProvider;
use client::ProviderClient;
pub use providers::Providers;

/// An agent running `model` on one provider.
pub struct OpenAiAgent {
    client: Arc<ProviderClient>,
    model: String,
    system_prompt: Option<String>,
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
            model: model.to_string(),
            system_prompt,
            max_steps: provider
                .max_steps
                .unwrap_or(ModelProvider::DEFAULT_MAX_STEPS)
                .clamp(1, ModelProvider::MAX_STEPS),
        }
    }

    /// The opening messages: the system prompt with the engine's injected context (OpenClaw
    /// puts the agent-to-agent context in the system prompt too), then the turn's text.
    fn opening(&self, turn: &Turn) -> Vec<Value> {
        let system: Vec<&str> = [self.system_prompt.as_deref(), turn.context.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.trim().is_empty())
            .collect();
        let mut messages = Vec::with_capacity(2);
        if !system.is_empty() {
            messages.push(json!({ "role": "system", "content": system.join("\n\n") }));
        }
        messages.push(json!({ "role": "user", "content": turn.text }));
        messages
    }

    async fn run_turn(&self, turn: &Turn, tools: &dyn ToolRunner) -> Result<Reply, AgentError> {
        let mut messages = self.opening(turn);
        let mut usage: Option<Usage> = None;
        for step in 1..=self.max_steps {
            let last = step == self.max_steps;
            let mut body = json!({
                "model": self.model,
                "messages": messages,
                "tools": tools::definitions(),
            });
            if last {
                // The last call may not use tools, so a model that keeps calling them still
                // gets to answer.
                body["tool_choice"] = json!("none");
            }
            tracing::debug!(model = %self.model, step, "model request");
            let on_delta = |offset: usize, delta: &str| tools.reply_delta(step, offset, delta);
            let client::Completion { message, usage: u } = (self.client.limit)
                .run(self.client.complete(body, &on_delta))
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
                let result = run_call(call, tools).await;
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
}

/// One tool call's result as the model will see it: the engine's result, or an error the
/// model can correct (an unknown tool, arguments that are not a JSON object).
async fn run_call(call: &Value, tools: &dyn ToolRunner) -> Value {
    let name = call
        .pointer("/function/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !tools::NAMES.contains(&name) {
        return json!({
            "status": "error",
            "error": format!("unknown tool {name:?}; the tools are {}", tools::NAMES.join(", ")),
        });
    }
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
        Ok(args @ Value::Object(_)) => tools.call(name, &args).await,
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
