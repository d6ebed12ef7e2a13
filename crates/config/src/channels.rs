//! The `channels` section: each webhook is checked field by field, so a channel that cannot
//! work (no url, no secret, a name the gateway's `/hooks/<name>` cannot carry) is reported
//! where it was written, with what to write instead. Secrets are never repeated in a message.

use super::model::Config;
use super::source::Seg;

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// The shortest secret accepted: it is a bearer credential anyone who can reach the gateway
/// may try to guess.
pub const MIN_SECRET_LEN: usize = 16;

/// Whether `name` can be a webhook's name: 1 to 64 of a-z, A-Z, 0-9, `-`, `_` (it is a URL
/// path segment and part of session keys).
pub fn name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    (!ok).then(|| {
        format!(
            "webhook name {name:?} must be 1 to 64 of a-z, A-Z, 0-9, '-', '_' (it is the path \
             /hooks/<name> and part of session keys hook:<name>:…)"
        )
    })
}

/// What is wrong with `channels`, as (key path, message).
pub(crate) fn problems(
    config: &Config,
    at: &dyn Fn(&[Seg]) -> Vec<Seg>,
) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    for (name, hook) in &config.channels.webhook {
        let field = |f: &str| at(&[k("channels"), k("webhook"), k(name), k(f)]);
        if let Some(p) = name_problem(name) {
            out.push((at(&[k("channels"), k("webhook"), k(name)]), p));
        }
        if !hook.is_enabled() {
            continue;
        }
        let url = hook.url.trim().to_ascii_lowercase();
        if url.is_empty() {
            out.push((
                field("url"),
                format!(
                    "missing: the address webhook {name:?} POSTs deliveries to, such as \
                     \"https://example.com/switchboard\" (or set \"enabled\": false)"
                ),
            ));
        } else if !(url.starts_with("http://") || url.starts_with("https://")) {
            out.push((
                field("url"),
                "must be an http:// or https:// address".to_string(),
            ));
        }
        if hook.secret.is_empty() {
            out.push((
                field("secret"),
                format!(
                    "missing: the shared secret that signs deliveries \
                     (X-Switchboard-Signature) and that POST /hooks/{name} must present as \
                     \"Authorization: Bearer <secret>\"; make one with `openssl rand -hex 32`"
                ),
            ));
        } else if hook.secret.len() < MIN_SECRET_LEN {
            out.push((
                field("secret"),
                format!(
                    "too short ({} characters): at least {MIN_SECRET_LEN}; make one with \
                     `openssl rand -hex 32`",
                    hook.secret.len()
                ),
            ));
        }
        if let Some(t) = hook.timeout_seconds
            && !(1..=300).contains(&t)
        {
            out.push((
                field("timeoutSeconds"),
                format!("{t} is out of range: 1 to 300 seconds (the default is 10)"),
            ));
        }
        let retry = &hook.retry;
        let rfield = |f: &str| at(&[k("channels"), k("webhook"), k(name), k("retry"), k(f)]);
        if let Some(a) = retry.attempts
            && !(1..=100).contains(&a)
        {
            out.push((
                rfield("attempts"),
                format!("{a} is out of range: 1 to 100 sends in all (the default is 8)"),
            ));
        }
        if let (Some(min), Some(max)) = (retry.min_delay_ms, retry.max_delay_ms)
            && min > max
        {
            out.push((
                rfield("minDelayMs"),
                format!("{min} is more than maxDelayMs ({max})"),
            ));
        }
    }
    out
}
