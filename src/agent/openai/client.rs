//! One provider's HTTP side: `POST {baseUrl}/chat/completions` with the key, the configured
//! headers, a per-request timeout, and retries (with backoff, honouring `Retry-After`) on
//! 429, 5xx and connection errors. Errors name the status and a short body excerpt, never
//! the key.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use super::limit::Limiter;
use crate::config::ModelProvider;

/// The longest `Retry-After` honoured; a server asking for more gets its error reported.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The first backoff when the server does not say; doubled per retry.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How much of an error body an error message quotes.
const BODY_EXCERPT_CHARS: usize = 200;

/// A provider's client, built once per provider and engine (`Providers`).
pub struct ProviderClient {
    id: String,
    url: String,
    config: ModelProvider,
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
            reqwest::Client::builder()
                .timeout(timeout)
                .default_headers(headers)
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

    /// One chat completion: the response JSON, after any retries.
    pub async fn complete(&self, body: &Value) -> Result<Value, String> {
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
        let mut attempt = 0u32;
        loop {
            let mut request = http.post(&self.url).json(body);
            if let Some(key) = &key {
                request = request.header(AUTHORIZATION, format!("Bearer {key}"));
            }
            let (problem, wait) = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        let text = response.text().await.map_err(|e| {
                            format!("provider \"{}\": reading the response failed: {e}", self.id)
                        })?;
                        return serde_json::from_str(&text).map_err(|e| {
                            format!(
                                "provider \"{}\": the response is not JSON ({e}): {}",
                                self.id,
                                excerpt(&text)
                            )
                        });
                    }
                    let retry_after = retry_after(response.headers());
                    let text = response.text().await.unwrap_or_default();
                    let problem = format!(
                        "provider \"{}\": HTTP {status} from {}: {}",
                        self.id,
                        self.url,
                        excerpt(&text)
                    );
                    if !retryable(status) {
                        return Err(problem);
                    }
                    (problem, retry_after)
                }
                Err(e) if e.is_connect() || e.is_timeout() || e.is_request() => {
                    let what = if e.is_timeout() {
                        "timed out"
                    } else {
                        "could not connect"
                    };
                    (format!("provider \"{}\": {what}: {e}", self.id), None)
                }
                Err(e) => return Err(format!("provider \"{}\": {e}", self.id)),
            };
            if attempt >= max_retries {
                let tries = attempt + 1;
                return Err(format!("{problem} (after {tries} attempts)"));
            }
            let wait = match wait {
                Some(w) if w > MAX_RETRY_AFTER => return Err(problem),
                Some(w) => w,
                None => FIRST_BACKOFF.saturating_mul(1 << attempt.min(6)),
            };
            tracing::debug!(provider = %self.id, attempt, ?wait, "retrying model request: {problem}");
            tokio::time::sleep(wait).await;
            attempt += 1;
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

/// The first characters of a body, on one line.
fn excerpt(text: &str) -> String {
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
