//! The owner's slash commands the gateway answers itself when an owner's client (scope
//! `operator.admin`) sends them with `chat.send`: `/status` (a status card, as OpenClaw's),
//! `/abort` (stops the session's run). `/send on|off|inherit` is the engine's (it records
//! the command and the policy); `/new` cannot reset a session here and says what to do.
//! Anyone else's slash text is an ordinary message, as before.

use std::sync::Arc;

use serde_json::Value;

use super::methods::api_failure;
use switchboard_protocol::ErrorShape;
use switchboard_types::api::SessionsApi;

/// A command the gateway answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slash {
    Status,
    Abort,
    New,
}

/// The whole message as one of the gateway's commands (case-insensitive, surrounding
/// spaces ignored; `/new` may carry words, which name a model in OpenClaw and are ignored).
pub fn parse(text: &str) -> Option<Slash> {
    let text = text.trim();
    let (word, rest) = text
        .split_once(char::is_whitespace)
        .map_or((text, ""), |(w, r)| (w, r.trim()));
    match word.to_ascii_lowercase().as_str() {
        "/status" if rest.is_empty() => Some(Slash::Status),
        "/abort" | "/stop" if rest.is_empty() => Some(Slash::Abort),
        "/new" | "/reset" => Some(Slash::New),
        _ => None,
    }
}

/// The command's reply text, its work done.
pub async fn answer(
    api: &Arc<dyn SessionsApi>,
    key: &str,
    command: Slash,
) -> Result<String, ErrorShape> {
    match command {
        Slash::Status => status(api, key).await,
        Slash::Abort => {
            let done = api.abort(key, None).await.map_err(api_failure)?;
            Ok(if done.run_ids.is_empty() {
                "⚙️ Nothing to abort.".to_string()
            } else {
                "⚙️ Agent was aborted.".to_string()
            })
        }
        Slash::New => Ok(
            "⚙️ This gateway keeps one transcript per session key and does not \
reset it: start a new session with sessions.create (OpenClaw's TUI does this for /new)."
                .to_string(),
        ),
    }
}

/// OpenClaw's `/status` card, with the lines our engine can fill.
async fn status(api: &Arc<dyn SessionsApi>, key: &str) -> Result<String, ErrorShape> {
    let detail = api.session(key).await.map_err(api_failure)?;
    let entry = detail.as_ref().map(|d| &d.entry);
    let field = |name: &str| entry.and_then(|e| e.get(name)).filter(|v| !v.is_null());
    let number = |name: &str| field(name).and_then(Value::as_u64);
    let mut lines = vec![format!("🔀 Switchboard {}", env!("CARGO_PKG_VERSION"))];
    let agent = detail.as_ref().map(|d| d.row.agent_id.clone());
    let configured = match &agent {
        Some(id) => api
            .agents()
            .await
            .map_err(api_failure)?
            .into_iter()
            .find(|a| &a.id == id),
        None => None,
    };
    let own = field("model").and_then(Value::as_str).map(str::to_string);
    // The configured window fits the session when it runs the agent's configured model.
    let window = number("contextTokens").or_else(|| {
        configured
            .as_ref()
            .filter(|a| own.as_ref().is_none_or(|m| a.model.ends_with(m.as_str())))
            .and_then(|a| a.context_tokens)
    });
    let model = own
        .or(configured.map(|a| a.model))
        .unwrap_or_else(|| "unknown".into());
    lines.push(format!("🧠 Model: {model}"));
    match (number("inputTokens"), number("outputTokens")) {
        (Some(i), Some(o)) => lines.push(format!("🧮 Tokens: {i} in / {o} out")),
        _ => lines.push("🧮 Tokens: not recorded".into()),
    }
    if let (Some(total), Some(context)) = (number("totalTokens"), window.filter(|w| *w > 0)) {
        // As OpenClaw's card writes it: "📚 Context: 130/128k (0%)".
        let pct = (total.saturating_mul(100) + context / 2) / context;
        lines.push(format!(
            "📚 Context: {total}/{} ({}%)",
            compact(context),
            pct.min(999)
        ));
    }
    match &detail {
        Some(d) => {
            lines.push(format!("🧵 Session: {}", d.row.key));
            lines.push(format!("⚙️ Send policy: {}", d.row.policy.summary));
            if d.row.running {
                lines.push("🏃 A run is going".into());
            }
        }
        None => lines.push(format!("🧵 Session: {key} (no messages yet)")),
    }
    Ok(lines.join("\n"))
}

/// A token count as OpenClaw's cards write it: 950, 1.5k, 128k, 1.1m.
fn compact(n: u64) -> String {
    let short = |v: f64, unit: &str, decimals: usize| {
        let text = format!("{v:.decimals$}");
        let text = text.strip_suffix(".0").map(str::to_string).unwrap_or(text);
        format!("{text}{unit}")
    };
    match n {
        0..1_000 => n.to_string(),
        1_000..10_000 => short(n as f64 / 1e3, "k", 1),
        10_000..1_000_000 => short(n as f64 / 1e3, "k", 0),
        _ => short(n as f64 / 1e6, "m", 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_command_is_one() {
        assert_eq!(parse(" /STATUS "), Some(Slash::Status));
        assert_eq!(parse("/abort"), Some(Slash::Abort));
        assert_eq!(parse("/new gpt-5"), Some(Slash::New));
        assert_eq!(parse("/status please"), None);
        assert_eq!(parse("/statusx"), None);
        assert_eq!(parse("/send off"), None, "the engine's");
        assert_eq!(parse("what is /status"), None);
    }

    #[test]
    fn token_counts_read_as_openclaw_writes_them() {
        let shown: Vec<String> = [950, 1_500, 128_000, 200_000, 1_100_000]
            .into_iter()
            .map(compact)
            .collect();
        assert_eq!(shown, ["950", "1.5k", "128k", "200k", "1.1m"]);
    }
}
