//! One provider's HTTP side: `POST {baseUrl}/chat/completions` with the key, the configured
//! headers, timeouts, and retries (with backoff, honouring `Retry-After`) on 429, 5xx and
//! connection errors. Errors name the status and a short body excerpt, never the key.
//!
//! `timeoutSeconds` bounds connecting plus waiting for the response head, then each gap
//! between body chunks, never the whole body: a healthy stream may run longer than it.
//! Retries happen only before the body is read; a body that fails part-way fails the call.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};
use serde::Serialize;
use serde_json::Value;

use super::limit::Limiter;
use super::stream;
use crate::agent::Usage;
use switchboard_types::config::ModelProvider;

/// The longest `Retry-After` honoured; a server asking for more gets its error reported.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The first backoff when the server does not say; doubled per retry.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How much of an error body an error message quotes.
const BODY_EXCERPT_CHARS: usize = 200;
/// The largest non-streamed response body read (a streamed one is capped by
/// `stream::MAX_REPLY_BYTES` on what it assembles).
const MAX_BODY_BYTES: usize = 2 * stream::MAX_REPLY_BYTES;

/// One chat-completions request, serialised from borrowed parts (fields left `None` are
/// left out).
#[derive(Debug, Serialize)]
pub struct Request<'a> {
    pub model: &'a str,
    pub messages: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a [&'static Value]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
}

/// `stream_options` of a streamed request.
#[derive(Debug, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// One model call's outcome, streamed or not: the assistant message as the API shapes it
/// (`content`, `tool_calls`), and the usage when known.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub message: Value,
    pub usage: Option<Usage>,
}

/// A provider's client, built once per provider and engine (`Providers`).
pub struct ProviderClient {
    id: String,
    url: String,
    config: ModelProvider,
    /// Connect + response head, then each gap between body chunks.
    timeout: Duration,
    /// `Err` when the client cannot be built (bad header names …): every request says why.
    http: Result<reqwest::Client, String>,
    /// Requests in flight to this provider, at most `maxConcurrent`.
    pub limit: Limiter,
}

impl ProviderClient {
    pub fn new(id: &str, config: &ModelProvider) -> ProviderClient {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let timeout = Duration::from_secs(
            config
                .timeout_seconds
                .unwrap_or(ModelProvider::DEFAULT_TIMEOUT_SECONDS)
                .clamp(1, ModelProvider::MAX_TIMEOUT_SECONDS),
        );
        let http = extra_headers(config).and_then(|headers| {
            // rustls with `ring` and the web roots, as every other TLS client here.
            let tls = switchboard_protocol::tls_client::config(
                switchboard_protocol::tls_client::web_roots(),
            )
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
            reqwest::Client::builder()
                .connect_timeout(timeout)
                .default_headers(headers)
                .tls_backend_preconfigured(tls)
                .build()
                .map_err(|e| format!("cannot build an HTTP client: {e}"))
        });
        let max_concurrent = config
            .max_concurrent
            .unwrap_or(ModelProvider::DEFAULT_MAX_CONCURRENT)
            .clamp(1, ModelProvider::MAX_CONCURRENT);
        ProviderClient {
            id: id.to_string(),
            url,
            config: config.clone(),
            timeout,
            http,
            limit: Limiter::new(max_concurrent as usize),
        }
    }

    /// The key, read now (so a variable set after start-up counts); `None` for a server
    /// that needs none.
    fn key(&self) -> Result<Option<String>, String> {
        if let Some(key) = &self.config.api_key {
            return Ok(Some(key.clone()));
        }
        match &self.config.api_key_env {
            None => Ok(None),
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(Some(v)),
                _ => Err(format!(
                    "provider \"{}\": the environment variable {var} (apiKeyEnv) is not set",
                    self.id
                )),
            },
        }
    }

    /// One model call: sends `body` (asking for a stream when the provider streams), and
    /// returns the assembled message and usage. `on_delta(offset, text)` hears each piece
    /// of reply text of a streamed answer as it arrives.
    ///
    /// Every error it returns has the provider's secrets taken out (`redact`): whatever a
    /// server quotes back (a debugging proxy echoing the request, "invalid key sk-…") never
    /// reaches the run's error, the log, stderr or a transcript.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_delta: &(dyn Fn(usize, &str) + Sync),
    ) -> Result<Completion, String> {
        let key = self.key().ok().flatten();
        self.complete_unredacted(request, on_delta)
            .await
            .map_err(|e| self.redact(&e, key.as_deref()))
    }

    async fn complete_unredacted(
        &self,
        mut request: Request<'_>,
        on_delta: &(dyn Fn(usize, &str) + Sync),
    ) -> Result<Completion, String> {
        if self.config.stream.unwrap_or(ModelProvider::DEFAULT_STREAM) {
            request.stream = Some(true);
            request.stream_options = Some(StreamOptions {
                include_usage: true,
            });
        }
        // Serialised once; a retry sends the same bytes.
        let body = serde_json::to_vec(&request)
            .map_err(|e| format!("provider \"{}\": cannot encode the request: {e}", self.id))?;
        let model = request.model;
        let response = self.send(&body).await?;
        // The answer's own content type decides, so a server that ignores `stream` works.
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if streamed {
            stream::assemble(response.bytes_stream(), self.timeout, on_delta)
                .await
                .map_err(|e| format!("provider \"{}\": {e}", self.id))
        } else {
            let text = self.read_body(response).await?;
            completion_of(&text, model).map_err(|e| format!("provider \"{}\": {e}", self.id))
        }
    }

    /// Sends the request until a success status, retrying as configured: the response with
    /// its body unread. A retry waits what the server asked (`Retry-After`, up to a minute:
    /// longer is not worth holding the turn for) or 250 ms doubling.
    async fn send(&self, body: &[u8]) -> Result<reqwest::Response, String> {
        use backon::Retryable;
        let http = self
            .http
            .as_ref()
            .map_err(|e| format!("provider \"{}\": {e}", self.id))?;
        let key = self.key()?;
        let max_retries = self
            .config
            .max_retries
            .unwrap_or(ModelProvider::DEFAULT_MAX_RETRIES)
            .min(ModelProvider::MAX_RETRIES);
        let delays = backon::ExponentialBuilder::default()
            .with_min_delay(FIRST_BACKOFF)
            .with_max_delay(FIRST_BACKOFF.saturating_mul(64))
            .with_max_times(max_retries as usize);
        // Counted for the messages; an atomic only because the future must be `Send`.
        let tries = std::sync::atomic::AtomicU32::new(0);
        let outcome = (|| {
            tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.attempt(http, key.as_deref(), body)
        })
        .retry(delays)
        .sleep(tokio::time::sleep)
        .when(|f| match f {
            Failure::Again { wait, .. } => wait.is_none_or(|w| w <= MAX_RETRY_AFTER),
            Failure::Final(_) => false,
        })
        // The server's wait replaces ours, but never a retry ours does not allow (`None`:
        // out of retries).
        .adjust(|f, delay| match (f, delay) {
            (Failure::Again { wait: Some(w), .. }, Some(_)) => Some(*w),
            (_, delay) => delay,
        })
        .notify(|f, wait| {
            let attempt = tries.load(std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(provider = %self.id, attempt, ?wait, "retrying model request: {f}");
        })
        .await;
        outcome.map_err(|f| match f {
            // Out of retries (not a wait too long to honour): say how many were made.
            Failure::Again { problem, wait } if wait.is_none_or(|w| w <= MAX_RETRY_AFTER) => {
                let tries = tries.load(std::sync::atomic::Ordering::Relaxed);
                format!("{problem} (after {tries} attempts)")
            }
            Failure::Again { problem, .. } | Failure::Final(problem) => problem,
        })
    }

    /// One request: the response on a success status, else what went wrong and whether
    /// (and when) it is worth another try.
    async fn attempt(
        &self,
        http: &reqwest::Client,
        key: Option<&str>,
        body: &[u8],
    ) -> Result<reqwest::Response, Failure> {
        let mut request = http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(key) = key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_elapsed) => Err(Failure::Again {
                problem: format!(
                    "provider \"{}\": timed out: no answer within {} s (timeoutSeconds)",
                    self.id,
                    self.timeout.as_secs()
                ),
                wait: None,
            }),
            Ok(Ok(response)) => {
                let status = response.status();
                if status.is_success() {
                    return Ok(response);
                }
                let retry_after = retry_after(response.headers());
                let text = self.read_body(response).await.unwrap_or_default();
                // A server may quote the request back (a debugging proxy, "invalid key
                // sk-…"): redacted here already, since the retry logs it.
                let text = self.redact(&text, key);
                let problem = format!(
                    "provider \"{}\": HTTP {status} from {}: {}",
                    self.id,
                    self.url,
                    excerpt(&text)
                );
                if !retryable(status) {
                    return Err(Failure::Final(problem));
                }
                Err(Failure::Again {
                    problem,
                    wait: retry_after,
                })
            }
            Ok(Err(e)) if e.is_connect() || e.is_timeout() || e.is_request() => {
                let what = if e.is_timeout() {
                    "timed out"
                } else {
                    "could not connect"
                };
                Err(Failure::Again {
                    problem: format!("provider \"{}\": {what}: {}", self.id, causes(&e)),
                    wait: None,
                })
            }
            Ok(Err(e)) => Err(Failure::Final(format!("provider \"{}\": {e}", self.id))),
        }
    }

    /// A whole (non-streamed) body as text, chunk by chunk under the idle timeout, capped.
    async fn read_body(&self, response: reqwest::Response) -> Result<String, String> {
        let failed = |what: String| {
            format!(
                "provider \"{}\": reading the response failed: {what}",
                self.id
            )
        };
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.timeout, chunks.next())
                .await
                .map_err(|_| {
                    failed(format!(
                        "timed out: no data for {} s after {} bytes (timeoutSeconds)",
                        self.timeout.as_secs(),
                        body.len()
                    ))
                })?;
            match next {
                None => break,
                Some(Err(e)) => return Err(failed(format!("{e} after {} bytes", body.len()))),
                Some(Ok(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(failed(format!(
                            "the body is larger than {} MiB",
                            MAX_BODY_BYTES >> 20
                        )));
                    }
                    body.extend_from_slice(&chunk);
                }
            }
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// A non-streamed response body as a completion: `choices[0].message` and `usage`.
fn completion_of(text: &str, model: &str) -> Result<Completion, String> {
    let response: Value = serde_json::from_str(text)
        .map_err(|e| format!("the response is not JSON ({e}): {}", excerpt(text)))?;
    let message = response
        .pointer("/choices/0/message")
        .cloned()
        .ok_or_else(|| format!("model {model}: the response has no choices[0].message"))?;
    Ok(Completion {
        message,
        usage: usage_of(&response),
    })
}

/// `usage` of a response or of a stream's usage chunk, when it gives either count.
pub(super) fn usage_of(response: &Value) -> Option<Usage> {
    let u = response.get("usage")?;
    let input = u.get("prompt_tokens").and_then(Value::as_u64);
    let output = u.get("completion_tokens").and_then(Value::as_u64);
    if input.is_none() && output.is_none() {
        return None;
    }
    Some(Usage {
        input: input.unwrap_or(0),
        output: output.unwrap_or(0),
    })
}

/// An error and its causes on one line: reqwest's own message ("error sending request")
/// leaves out the reason (refused, a certificate no root vouches for, …) that its sources
/// hold.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Why one request failed.
#[derive(Debug)]
enum Failure {
    /// Worth another try, after `wait` when the server said (`Retry-After`).
    Again {
        problem: String,
        wait: Option<Duration>,
    },
    /// Another try would fail the same way.
    Final(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Again { problem, .. } | Failure::Final(problem) => f.write_str(problem),
        }
    }
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// `Retry-After` in seconds (the HTTP-date form is rare from model servers and is treated as
/// absent, so the normal backoff applies).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(86_400.0)))
}

fn extra_headers(config: &ModelProvider) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in &config.headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: {name:?} is not a valid header name"))?;
        // The value may be a secret: the message names the header only.
        let mut v = HeaderValue::from_str(value)
            .map_err(|_| format!("headers: the value of {name:?} is not a valid header value"))?;
        v.set_sensitive(true);
        map.insert(n, v);
    }
    Ok(map)
}

/// Header values shorter than this are not treated as secrets (`redact`): replacing `1` or
/// `yes` everywhere in a message would garble it, and no credential is that short.
const MIN_SECRET_CHARS: usize = 6;

impl ProviderClient {
    /// `text` with the provider's secrets replaced by their names: the key by `<apiKey>`,
    /// each `headers` value by `<headers.NAME>`, and the credential part of a value of the
    /// form `<scheme> <credential>` (`Bearer …`, `Basic …`) on its own too, since a server
    /// quotes a token without its scheme. Longest first, so a value holding another is
    /// replaced whole.
    fn redact(&self, text: &str, key: Option<&str>) -> String {
        let mut secrets: Vec<(&str, String)> = Vec::new();
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            secrets.push((k, "<apiKey>".to_string()));
        }
        for (name, value) in &self.config.headers {
            let label = format!("<headers.{name}>");
            let value = value.trim();
            if value.chars().count() >= MIN_SECRET_CHARS {
                secrets.push((value, label.clone()));
            }
            if let Some((_, credential)) = value.rsplit_once(char::is_whitespace)
                && credential.chars().count() >= MIN_SECRET_CHARS
            {
                secrets.push((credential, label));
            }
        }
        secrets.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        let mut out = text.to_string();
        for (secret, label) in secrets {
            if out.contains(secret) {
                out = out.replace(secret, &label);
            }
        }
        out
    }
}

/// The first characters of a body, on one line.
pub(super) fn excerpt(text: &str) -> String {
    let one_line: String = text
        .chars()
        .take(BODY_EXCERPT_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > BODY_EXCERPT_CHARS {
        format!("{}…", one_line.trim_end())
    } else if one_line.trim().is_empty() {
        "(empty body)".to_string()
    } else {
        one_line.trim().to_string()
    }
}
