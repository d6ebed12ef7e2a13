//! Loading the JSON5 config: syntax, shape (unknown keys, types, enum values) and meaning checks,
//! every problem reported at once with its dotted key path and source line; `config init`'s writer.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::value::{MapDeserializer, SeqDeserializer, StrDeserializer};
use serde::de::{self, Deserializer, Expected, IntoDeserializer, Unexpected, Visitor};
use serde_json::Value;

use super::model::{Config, ModelProvider, limits, regex_body};
use super::source::{self, Seg, Source, format_path};
use super::text_limits;
use switchboard_types::key;

/// The documented default config, as `switchboard config init` writes it.
pub const DEFAULT_CONFIG_TEXT: &str = include_str!("../../../assets/default-config.json5");

/// Bounds the remove-and-retry loop; a file with more shape errors than this is not worth listing.
const MAX_SHAPE_PROBLEMS: usize = 200;

/// One thing wrong with a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// 1-based source line, when the offending key (or its nearest parent) could be located.
    pub line: Option<usize>,
    /// Dotted key path such as `tools.sessions.visibility` or `agents.list[1].id`; empty for the
    /// file as a whole (syntax errors, a top level that is not an object).
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot access config file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", render_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<ConfigProblem>,
    },
    #[error("config file {path} already exists; pass --force to overwrite it")]
    Exists { path: PathBuf },
}

/// `FILE:LINE: path: message`, one problem per line, the way compilers print them so editors
/// can jump to each.
fn render_problems(file: &Path, problems: &[ConfigProblem]) -> String {
    if problems.is_empty() {
        return format!("invalid config {}", file.display());
    }
    let mut out = String::new();
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&file.display().to_string());
        if let Some(line) = p.line {
            out.push_str(&format!(":{line}"));
        }
        out.push_str(": ");
        if !p.path.is_empty() {
            out.push_str(&p.path);
            out.push_str(": ");
        }
        out.push_str(&p.message);
    }
    out
}

/// Parses and validates a config text, returning every problem found (never just the first).
/// A text holding nothing but whitespace and comments is the built-in default config.
/// A `systemPromptFile` is read relative to the current folder (see `load_file`).
pub fn parse_str(src: &str) -> Result<Config, Vec<ConfigProblem>> {
    parse_with(src, false, None)
}

/// `parse_str`, plus, when `environment`, what the environment makes unusable; relative
/// `systemPromptFile`s are read from `base` (the config file's folder).
fn parse_with(
    src: &str,
    environment: bool,
    base: Option<&Path>,
) -> Result<Config, Vec<ConfigProblem>> {
    // A BOM is invisible in editors and changes no line numbers, so it is not worth an error.
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    // Before anything recursive (or quadratic in depth) sees the text.
    if let Err(limit) = text_limits::check(src) {
        return Err(vec![ConfigProblem {
            line: limit.line,
            path: String::new(),
            message: limit.message,
        }]);
    }
    if source::is_blank(src) {
        return Ok(Config::default());
    }
    let source = match Source::parse(src) {
        Ok(source) => source,
        Err(e) => {
            let (line, message) = source::syntax_error(src, &e);
            return Err(vec![ConfigProblem {
                line,
                path: String::new(),
                message,
            }]);
        }
    };
    let mut problems = Vec::new();
    let mut reported = HashSet::new();
    let mut removals = Removals::default();
    let mut work = source.value.clone();

    let mut rounds = 0;
    let mut config = loop {
        rounds += 1;
        if rounds > MAX_SHAPE_PROBLEMS {
            problems.push(ConfigProblem {
                line: None,
                path: String::new(),
                message: format!("too many problems; stopped looking after {MAX_SHAPE_PROBLEMS}"),
            });
            return Err(sorted(problems));
        }
        let err = match serde_path_to_error::deserialize::<_, Config>(StrictValue(&work)) {
            Ok(config) => break config,
            Err(err) => err,
        };
        let working = segments_of(err.path());
        let message = err.inner().to_string();
        if working.is_empty() {
            problems.push(ConfigProblem {
                line: source.line_of(&[]),
                path: String::new(),
                message: root_message(&message),
            });
            return Err(sorted(problems));
        }
        let original = removals.to_original(&working);
        let path = format_path(&original);
        // A required key dropped for a bad value comes back as "missing"; it was already said.
        let echo = message
            .strip_prefix("missing field `")
            .is_some_and(|field| {
                let mut field_path = original.clone();
                field_path.push(Seg::Key(field.trim_end_matches('`').to_string()));
                reported.contains(&format_path(&field_path))
            });
        if !echo {
            let mut text = humanize(&message);
            // serde_json has no NaN or Infinity, so JSON5's become null; name what was written.
            if let Some(word) = source.non_finite.get(&path)
                && let Some(head) = text.strip_suffix("got null")
            {
                text = format!("{head}got {word} (only finite numbers are allowed)");
            }
            // A ranged setting names its own range rather than its Rust type's.
            if let Some(range) = limits::range_of(&path)
                && text.starts_with("expected ")
                && let Some((_, got)) = text.rsplit_once(", got ")
            {
                text = range.problem(got);
            }
            problems.push(ConfigProblem {
                line: source.line_of(&original),
                path: path.clone(),
                message: text,
            });
            reported.insert(path);
        }
        // Dropping the offending node lets serde fall back to the default and reach the next
        // problem; if it cannot be dropped, retrying would only report the same one again.
        if !remove_node(&mut work, &working) {
            return Err(sorted(problems));
        }
        removals.note_removed(&original);
    };

    let mut semantic = semantic_problems(&config, &removals);
    semantic.extend(read_prompt_files(&mut config, &removals, base));
    super::gateways::resolve_paths(&mut config, base);
    if environment {
        semantic.extend(environment_problems(&config));
        semantic.extend(super::gateways::environment_problems(&config));
    }
    for (segs, message) in semantic {
        let path = format_path(&segs);
        // A node already reported for its shape was replaced by its default, which says nothing
        // about what the user wrote.
        if reported.contains(&path) {
            continue;
        }
        problems.push(ConfigProblem {
            line: source.line_of(&segs),
            path,
            message,
        });
    }

    if problems.is_empty() {
        Ok(config)
    } else {
        Err(sorted(problems))
    }
}

/// Reads and validates a config file.
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let text = read(path)?;
    parse_with(&text, false, path.parent()).map_err(|problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    })
}

/// Every problem in a config file (empty when it is valid); an error only when it cannot be read.
pub fn check_file(path: &Path) -> Result<Vec<ConfigProblem>, ConfigError> {
    let text = match read(path) {
        Ok(text) => text,
        Err(ConfigError::Invalid { problems, .. }) => return Ok(problems),
        Err(e) => return Err(e),
    };
    Ok(parse_with(&text, true, path.parent())
        .err()
        .unwrap_or_default())
}

/// The values of a valid config file that will be used other than as written
/// (`warnings::warnings`), each with its source line; empty for an invalid file, whose
/// problems `check_file` reports.
pub fn check_file_warnings(path: &Path) -> Result<Vec<ConfigProblem>, ConfigError> {
    let text = match read(path) {
        Ok(text) => text,
        Err(ConfigError::Invalid { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let Ok(config) = parse_with(&text, false, path.parent()) else {
        return Ok(Vec::new());
    };
    let src = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Ok(source) = Source::parse(src) else {
        return Ok(Vec::new());
    };
    Ok(super::warnings::warnings(&config)
        .into_iter()
        .map(|w| {
            let segs: Vec<Seg> = w.path.split('.').map(|k| Seg::Key(k.to_string())).collect();
            ConfigProblem {
                line: source.line_of(&segs),
                path: w.path,
                message: w.message,
            }
        })
        .collect())
}

/// Writes [`DEFAULT_CONFIG_TEXT`] to `path`, creating its folder; an existing file is kept
/// unless `force`.
pub fn write_default(path: &Path, force: bool) -> Result<(), ConfigError> {
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ConfigError::Io { path: p, source }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    if force {
        return std::fs::write(path, DEFAULT_CONFIG_TEXT).map_err(io_err(path));
    }
    // create_new rather than an exists() check, so a file appearing meanwhile is not clobbered.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(ConfigError::Exists {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(io_err(path)(e)),
    };
    file.write_all(DEFAULT_CONFIG_TEXT.as_bytes())
        .map_err(io_err(path))
}

/// The file's text, never more than [`text_limits::MAX_BYTES`] of it: a larger file is an
/// invalid config (one problem), not something to read into memory.
fn read(path: &Path) -> Result<String, ConfigError> {
    let capped = text_limits::read_capped(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    capped.map_err(|limit| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems: vec![ConfigProblem {
            line: limit.line,
            path: String::new(),
            message: limit.message,
        }],
    })
}

fn sorted(mut problems: Vec<ConfigProblem>) -> Vec<ConfigProblem> {
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    problems
}

// ---------------------------------------------------------------------------------------------
// Key paths

fn segments_of(path: &serde_path_to_error::Path) -> Vec<Seg> {
    let mut out = Vec::new();
    for seg in path.iter() {
        match seg {
            serde_path_to_error::Segment::Seq { index } => out.push(Seg::Index(*index)),
            serde_path_to_error::Segment::Map { key } => out.push(Seg::Key(key.clone())),
            // Nothing in the model is a data-carrying enum; past an unknown step the path means
            // nothing, so the problem is pinned to the deepest known node.
            _ => break,
        }
    }
    out
}

/// Which array elements were dropped while hunting for problems, so a path in the trimmed value
/// can be turned back into the path the user wrote.
#[derive(Debug, Default)]
struct Removals {
    /// original path of an array → original indices removed from it
    removed: HashMap<String, Vec<usize>>,
}

impl Removals {
    fn to_original(&self, working: &[Seg]) -> Vec<Seg> {
        let mut out: Vec<Seg> = Vec::with_capacity(working.len());
        for seg in working {
            match seg {
                Seg::Key(k) => out.push(Seg::Key(k.clone())),
                Seg::Index(i) => {
                    let gone = self.removed.get(&format_path(&out));
                    let original = match gone {
                        None => *i,
                        Some(gone) => (0..).filter(|o| !gone.contains(o)).nth(*i).unwrap_or(*i),
                    };
                    out.push(Seg::Index(original));
                }
            }
        }
        out
    }

    fn note_removed(&mut self, original: &[Seg]) {
        if let Some((Seg::Index(i), parent)) = original.split_last() {
            self.removed
                .entry(format_path(parent))
                .or_default()
                .push(*i);
        }
    }
}

fn remove_node(value: &mut Value, segs: &[Seg]) -> bool {
    let Some((last, parent)) = segs.split_last() else {
        return false;
    };
    let mut node = value;
    for seg in parent {
        let next = match (seg, node) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k),
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match (last, node) {
        (Seg::Key(k), Value::Object(m)) => m.shift_remove(k).is_some(),
        (Seg::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
            true
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

fn root_message(serde_msg: &str) -> String {
    let got = serde_msg
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.rsplit_once(", expected "))
        .map(|(unexp, _)| describe_unexpected(unexp));
    match got {
        Some(got) => format!("the config must be an object ({{ … }}), got {got}"),
        None => humanize(serde_msg),
    }
}

/// Rewrites serde's wording (backticks, Rust type names) into what a config author understands.
fn humanize(msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (name, tail) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = backticked(tail);
        if expected.is_empty() {
            return format!("unknown key \"{name}\" (this object takes no keys)");
        }
        let hint = if expected.len() > 1 {
            closest(name, &expected)
                .map(|c| format!(", did you mean \"{c}\"?"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        return format!(
            "unknown key \"{name}\"{hint} (expected one of: {})",
            expected.join(", ")
        );
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (name, tail) = rest.split_once('`').unwrap_or((rest, ""));
        return format!(
            "expected one of {}, got \"{name}\"",
            quoted_list(&backticked(tail))
        );
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`');
        return format!("missing required key \"{name}\"");
    }
    if let Some(rest) = msg.strip_prefix("duplicate field `") {
        let name = rest.trim_end_matches('`');
        return format!(
            "\"{name}\" is given more than once (an alias of a key counts as the same key)"
        );
    }
    let typed = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "));
    if let Some((unexp, exp)) = typed.and_then(|rest| rest.rsplit_once(", expected ")) {
        return format!(
            "expected {}, got {}",
            describe_expected(exp),
            describe_unexpected(unexp)
        );
    }
    msg.to_string()
}

/// The `a`, `b` names in serde's "expected `a` or `b`" / "one of `a`, `b`" lists.
fn backticked(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_expected(exp: &str) -> String {
    if exp.starts_with("one of `") || exp.starts_with('`') {
        return format!("one of {}", quoted_list(&backticked(exp)));
    }
    if exp.starts_with("struct ") || exp == "a map" {
        return "an object".to_string();
    }
    match exp {
        "u8" => "a whole number from 0 to 255".to_string(),
        "u16" => "a whole number from 0 to 65535".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a whole number (0 or more)".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "a list".to_string(),
        other => other.to_string(),
    }
}

fn describe_unexpected(unexp: &str) -> String {
    if let Some(s) = unexp.strip_prefix("string ") {
        return s.to_string();
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(v) = unexp.strip_prefix(prefix) {
            return v.trim_matches('`').to_string();
        }
    }
    match unexp {
        "sequence" => "a list".to_string(),
        "map" => "an object".to_string(),
        "unit value" => "null".to_string(),
        other => other.to_string(),
    }
}

/// The candidate a typo most likely meant, if one is close enough to be worth suggesting.
fn closest<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    candidates
        .iter()
        // Optimal string alignment: a swap of neighbours, the commonest typo in a key name,
        // is one edit.
        .map(|c| (strsim::osa_distance(&name, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

// ---------------------------------------------------------------------------------------------
// Meaning checks (after the shape is right)

/// OpenClaw gateway settings that `switchboard serve` does not honour: an error each (not a
/// warning), since serving on another address or without the token than the owner wrote is
/// worse than not starting. Each names the value, what is supported and what to use.
fn gateway_problems(
    gateway: &super::model::GatewayConfig,
    at: impl Fn(&[Seg]) -> Vec<Seg>,
) -> Vec<(Vec<Seg>, String)> {
    use super::model::{GatewayAuthMode, GatewayBind};
    let k = |s: &str| Seg::Key(s.to_string());
    let supported = |values: &[&str]| {
        values
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    if gateway.bind != GatewayBind::Loopback {
        out.push((
            at(&[k("gateway"), k("bind")]),
            format!(
                "\"{}\" is OpenClaw's and is not supported by switchboard serve (supported: {}, \
                 which is 127.0.0.1); to listen on another address, remove this and run \
                 `switchboard serve --bind ADDRESS:PORT` (with --tls-cert and --tls-key, or \
                 --insecure)",
                gateway.bind.as_str(),
                supported(GatewayBind::SUPPORTED)
            ),
        ));
    }
    if gateway.auth.mode != GatewayAuthMode::Token {
        out.push((
            at(&[k("gateway"), k("auth"), k("mode")]),
            format!(
                "\"{}\" is OpenClaw's and is not supported by switchboard serve (supported: {}); \
                 every client proves itself with the gateway token (gateway.auth.token, else \
                 $SWITCHBOARD_GATEWAY_TOKEN, else <state>/gateway-token)",
                gateway.auth.mode.as_str(),
                supported(GatewayAuthMode::SUPPORTED)
            ),
        ));
    }
    if gateway.auth.password.is_some() {
        out.push((
            at(&[k("gateway"), k("auth"), k("password")]),
            "is not used by switchboard serve (it has no password mode); remove it and set \
             gateway.auth.token instead"
                .to_string(),
        ));
    }
    out
}

/// Problems serde cannot see, as (original key path, message).
fn semantic_problems(config: &Config, removals: &Removals) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    let at = |segs: &[Seg]| removals.to_original(segs);
    let k = |s: &str| Seg::Key(s.to_string());

    let main_key = config.session.main_key.trim();
    if main_key.is_empty() {
        out.push((
            at(&[k("session"), k("mainKey")]),
            "must not be empty (the default is \"main\")".to_string(),
        ));
    } else if main_key.contains(':') {
        out.push((
            at(&[k("session"), k("mainKey")]),
            format!(
                "\"{main_key}\" must not contain \":\" (session keys are agent:<agentId>:<mainKey>, so a \":\" \
                 would split it)"
            ),
        ));
    }

    if config.gateway.port == 0 {
        out.push((
            at(&[k("gateway"), k("port")]),
            "port 0 is not allowed: pick a port from 1 to 65535 (the default is 18789)".to_string(),
        ));
    }

    out.extend(gateway_problems(&config.gateway, at));
    out.extend(super::gateways::problems(config, &at));
    if let Some(discord) = config.channels.discord.as_ref().filter(|d| d.enabled) {
        let dc = |name: &str| at(&[k("channels"), k("discord"), k(name)]);
        if discord.token().is_none() {
            out.push((
                dc("token"),
                format!(
                    "missing: the Discord channel needs its bot's token (Developer Portal → your \
                     application → Bot → Reset Token), here or in ${}; or set \
                     channels.discord.enabled to false",
                    switchboard_types::config::channels::DISCORD_TOKEN_ENV
                ),
            ));
        }
        if let Some(root) = &discord.api_root
            && !has_scheme(root, &["https://", "http://"])
        {
            out.push((
                dc("apiRoot"),
                "must be an http(s) URL (the default is https://discord.com/api/v10)".into(),
            ));
        }
        if let Some(url) = &discord.gateway_url
            && !has_scheme(url, &["wss://", "ws://"])
        {
            out.push((
                dc("gatewayUrl"),
                "must be a ws(s):// URL (leave it out to ask Discord for its gateway)".into(),
            ));
        }
        if !discord.ids_are_text() {
            out.push((
                dc("allowFrom"),
                "entries (and guilds.<id>.users) are user ids (numbers or strings) or usernames"
                    .into(),
            ));
        }
    }
    if let Some(telegram) = config.channels.telegram.as_ref().filter(|t| t.enabled) {
        let tg = |name: &str| at(&[k("channels"), k("telegram"), k(name)]);
        if telegram.token().is_none() {
            out.push((
                tg("botToken"),
                format!(
                    "missing: the Telegram channel needs its bot's token (from @BotFather), here \
                     or in ${}; or set channels.telegram.enabled to false",
                    switchboard_types::config::channels::TELEGRAM_TOKEN_ENV
                ),
            ));
        }
        if let Some(root) = &telegram.api_root
            && !has_scheme(root, &["https://", "http://"])
        {
            out.push((
                tg("apiRoot"),
                "must be an http(s) URL (the default is https://api.telegram.org)".into(),
            ));
        }
        if telegram.allow_from.len() != telegram.allow_from_text().len() {
            out.push((
                tg("allowFrom"),
                "entries are user ids (numbers or strings) or @usernames".into(),
            ));
        }
        if let Some(url) = &telegram.webhook_url {
            if !has_scheme(url, &["https://", "http://"]) {
                out.push((
                    tg("webhookUrl"),
                    "must be the public https:// URL Telegram posts updates to (it reaches \
                     this gateway's webhookPath)"
                        .into(),
                ));
            }
            match telegram.webhook_secret.as_deref() {
                None => out.push((
                    tg("webhookSecret"),
                    "missing: a webhook needs a secret (1 to 256 of A-Z a-z 0-9 _ -) that \
                     Telegram sends with each update; anyone could post updates otherwise"
                        .into(),
                )),
                Some(s) if !switchboard_types::config::channels::webhook_secret_ok(s) => {
                    out.push((
                        tg("webhookSecret"),
                        "must be 1 to 256 of A-Z a-z 0-9 _ - (what Telegram accepts)".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(path) = &telegram.webhook_path
            && (!path.starts_with('/') || path.starts_with("/hooks/") || path.contains('?'))
        {
            out.push((
                tg("webhookPath"),
                "must be a path of this gateway (like /telegram-webhook), not under /hooks/ \
                 (the generic webhooks') and without a query"
                    .into(),
            ));
        }
    }
    out.extend(super::channels::problems(config, &at));
    if let Some(url) = &config.storage.url
        && !switchboard_types::config::is_postgres_url(url)
    {
        out.push((
            at(&[k("storage"), k("url")]),
            "must be a postgres:// URL (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE); \
             leave it out to keep the state folder's SQLite database"
                .to_string(),
        ));
    }

    // Numbers outside their range (the shape was right: a whole number of the field's type).
    let mut check_range = |segs: Vec<Seg>, value: u64| {
        if let Some(range) = limits::range_of(&format_path(&segs))
            && !range.contains(value)
        {
            out.push((segs, range.problem(&value.to_string())));
        }
    };
    let a2a = &config.session.agent_to_agent;
    check_range(
        at(&[k("session"), k("agentToAgent"), k("maxChainHops")]),
        a2a.max_chain_hops.into(),
    );
    let sub = &config.agents.defaults.subagents;
    let sub_path = |name: &str| at(&[k("agents"), k("defaults"), k("subagents"), k(name)]);
    check_range(sub_path("archiveAfterMinutes"), sub.archive_after_minutes);
    check_range(sub_path("runTimeoutSeconds"), sub.run_timeout_seconds);
    check_range(
        sub_path("maxChildrenPerAgent"),
        sub.max_children_per_agent.into(),
    );
    check_range(sub_path("maxSpawnDepth"), sub.max_spawn_depth.into());
    for (i, agent) in config.agents.list.iter().enumerate() {
        for (j, rule) in agent.script.iter().enumerate() {
            let rule_path = |names: &[&str]| {
                let mut p = vec![
                    k("agents"),
                    k("list"),
                    Seg::Index(i),
                    k("script"),
                    Seg::Index(j),
                ];
                p.extend(names.iter().map(|n| k(n)));
                at(&p)
            };
            check_range(rule_path(&["delayMs"]), rule.delay_ms);
            check_range(rule_path(&["streamMs"]), rule.stream_ms);
            if let Some(round) = rule.when.round {
                check_range(rule_path(&["when", "round"]), round.into());
            }
            if let Some(tokens) = rule.tokens {
                check_range(rule_path(&["tokens", "in"]), tokens.input);
                check_range(rule_path(&["tokens", "out"]), tokens.output);
            }
        }
    }

    for (id, p) in &config.models.providers {
        if let Some(n) = p.max_concurrent
            && !(1..=ModelProvider::MAX_CONCURRENT).contains(&n)
        {
            out.push((
                at(&[k("models"), k("providers"), k(id), k("maxConcurrent")]),
                format!(
                    "expected a whole number from 1 to {} (model requests to provider \"{id}\" in \
                     flight at once, shared by every agent on it; the default is {}), got {n}",
                    ModelProvider::MAX_CONCURRENT,
                    ModelProvider::DEFAULT_MAX_CONCURRENT
                ),
            ));
        }
    }

    let mut seen_ids: HashMap<String, Vec<Seg>> = HashMap::new();
    let mut default_at: Option<Vec<Seg>> = None;
    for (i, agent) in config.agents.list.iter().enumerate() {
        let entry = at(&[k("agents"), k("list"), Seg::Index(i)]);
        let field = |name: &str| {
            let mut p = entry.clone();
            p.push(k(name));
            p
        };

        if agent.id.is_empty() {
            out.push((
                field("id"),
                "missing agent id: every entry of agents.list needs an \"id\" such as \"main\""
                    .to_string(),
            ));
        } else if !key::is_valid_agent_id(&agent.id) {
            out.push((
                field("id"),
                format!(
                    "invalid agent id \"{}\": use 1 to 64 letters, digits, \"_\" or \"-\", starting with a letter or digit",
                    agent.id
                ),
            ));
        } else {
            let normalized = key::normalize_agent_id(&agent.id);
            match seen_ids.get(&normalized) {
                Some(first) => out.push((
                    field("id"),
                    format!(
                        "duplicate agent id \"{}\" ({} has the same id)",
                        agent.id,
                        format_path(first)
                    ),
                )),
                None => {
                    seen_ids.insert(normalized, entry.clone());
                }
            }
        }

        if agent.default {
            match &default_at {
                Some(first) => out.push((
                    field("default"),
                    format!(
                        "only one agent may have default: true ({} already has it)",
                        format_path(first)
                    ),
                )),
                None => default_at = Some(entry.clone()),
            }
        }

        if let Some(model) = &agent.model
            && let Some(message) = model_problem(model).or_else(|| provider_problem(config, model))
        {
            out.push((field("model"), message));
        }

        for (j, rule) in agent.script.iter().enumerate() {
            let Some(text) = &rule.when.text else {
                continue;
            };
            let Some(pattern) = regex_body(text) else {
                continue;
            };
            if let Err(e) = regex::Regex::new(pattern) {
                let mut p = field("script");
                p.extend([Seg::Index(j), k("when"), k("text")]);
                out.push((
                    p,
                    format!(
                        "invalid regular expression {text}: {}",
                        regex_error_summary(&e)
                    ),
                ));
            }
        }
    }
    out
}

fn model_problem(model: &str) -> Option<String> {
    if model == "scripted" {
        return None;
    }
    match model.split_once('/') {
        Some((provider, name)) if !provider.trim().is_empty() && !name.trim().is_empty() => None,
        Some(_) => Some(format!(
            "model \"{model}\" needs both parts of \"<provider>/<model>\", for example \"ollama/llama3.2\""
        )),
        None => Some(format!(
            "model \"{model}\" must be \"scripted\" or \"<provider>/<model>\": write it as \"<provider>/{model}\", \
             for example \"ollama/{model}\", with the provider defined under models.providers"
        )),
    }
}

/// Why a well-formed `provider/model` cannot run: its provider is not defined, or speaks an
/// `api` this build has no backend for.
fn provider_problem(config: &Config, model: &str) -> Option<String> {
    let (provider, _) = model.split_once('/')?;
    let Some(p) = config.models.providers.get(provider) else {
        let known: Vec<&str> = config.models.providers.keys().map(String::as_str).collect();
        let hint = if known.is_empty() {
            "none is defined".to_string()
        } else {
            format!("defined: {}", known.join(", "))
        };
        return Some(format!(
            "model \"{model}\" names provider \"{provider}\", which models.providers does not define ({hint}); \
             add models.providers.{provider}: {{ baseUrl: \"http://127.0.0.1:11434/v1\", api: \"openai-completions\" }}"
        ));
    };
    match p.api.as_deref() {
        None | Some(ModelProvider::OPENAI_COMPLETIONS) => None,
        Some(other) => Some(format!(
            "model \"{model}\" uses provider \"{provider}\", whose api \"{other}\" has no backend here: \
             only \"openai-completions\" (OpenAI-compatible chat completions) is supported"
        )),
    }
}

/// The longest system prompt file read: a prompt is text for a model's context window, so a
/// larger file is a mistake (a binary, a log), not a prompt.
const MAX_PROMPT_FILE_BYTES: u64 = 1024 * 1024;

/// Reads every `agents.list[].systemPromptFile` into the agent's config; a file that cannot be
/// read (or is not text, or is too large) is a problem naming the path tried.
fn read_prompt_files(
    config: &mut Config,
    removals: &Removals,
    base: Option<&Path>,
) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    for (i, agent) in config.agents.list.iter_mut().enumerate() {
        let Some(file) = agent.system_prompt_file.clone() else {
            continue;
        };
        let at = removals.to_original(&[
            Seg::Key("agents".into()),
            Seg::Key("list".into()),
            Seg::Index(i),
            Seg::Key("systemPromptFile".into()),
        ]);
        if agent.system_prompt.is_some() {
            out.push((
                at,
                "set either systemPrompt or systemPromptFile, not both".to_string(),
            ));
            continue;
        }
        let path = match base {
            Some(dir) if Path::new(&file).is_relative() => dir.join(&file),
            _ => Path::new(&file).to_path_buf(),
        };
        let read = std::fs::metadata(&path)
            .and_then(|m| {
                if m.len() > MAX_PROMPT_FILE_BYTES {
                    Err(std::io::Error::other(format!(
                        "it is {} bytes, more than the {MAX_PROMPT_FILE_BYTES} a prompt may have",
                        m.len()
                    )))
                } else {
                    std::fs::read(&path)
                }
            })
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| std::io::Error::other("it is not UTF-8 text"))
            });
        match read {
            Ok(text) => agent.system_prompt_from_file = Some(text),
            Err(e) => out.push((
                at,
                format!("cannot read the system prompt file {}: {e}", path.display()),
            )),
        }
    }
    out
}

/// What only the environment can tell (`config check` reports it; loading does not, since the
/// variable may be set by the time a run needs it): a provider's `apiKeyEnv` that is unset.
fn environment_problems(config: &Config) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    for (id, p) in &config.models.providers {
        if let Some(var) = &p.api_key_env
            && std::env::var_os(var).is_none_or(|v| v.is_empty())
        {
            out.push((
                vec![
                    Seg::Key("models".into()),
                    Seg::Key("providers".into()),
                    Seg::Key(id.clone()),
                    Seg::Key("apiKeyEnv".into()),
                ],
                format!(
                    "the environment variable {var} is not set (or empty), so provider \"{id}\" has no API key; \
                     runs on its models will fail until it is set"
                ),
            ));
        }
    }
    out
}

/// The regex crate's message is a multi-line excerpt; the `error:` line is what went wrong.
fn regex_error_summary(e: &regex::Error) -> String {
    let full = e.to_string();
    full.lines()
        .find_map(|l| l.trim_start().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or(full)
}

// ---------------------------------------------------------------------------------------------
// A strict view of a JSON value for serde

/// Deserializes like `&serde_json::Value`, except that an array is refused where an object
/// (struct) is expected: serde's derive accepts `[a, b]` as a struct's fields in order, which in
/// a config file would silently give positional meaning to a list.
struct StrictValue<'a>(&'a Value);

type StrictError = serde_json::Error;

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            (_, _, Some(f)) => Unexpected::Float(f),
            _ => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// "one of `a`, `b`" for an enum given something other than a string.
struct OneOfVariants(&'static [&'static str]);

impl Expected for OneOfVariants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one of ")?;
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{v}`")?;
        }
        Ok(())
    }
}

impl<'de> IntoDeserializer<'de, StrictError> for StrictValue<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for StrictValue<'de> {
    type Error = StrictError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, StrictError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (_, Some(i), _) => visitor.visit_i64(i),
                (_, _, Some(f)) => visitor.visit_f64(f),
                _ => Err(de::Error::invalid_type(unexpected(self.0), &visitor)),
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter().map(StrictValue));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Object(map) => {
                let entries = map
                    .iter()
                    .map(|(k, v)| (StrDeserializer::<StrictError>::new(k), StrictValue(v)));
                let mut access = MapDeserializer::new(entries);
                let out = visitor.visit_map(&mut access)?;
                access.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, StrictError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, StrictError> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, StrictError> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(StrDeserializer::<StrictError>::new(s)),
            other => Err(de::Error::invalid_type(
                unexpected(other),
                &OneOfVariants(variants),
            )),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, StrictError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// Whether `url` starts with one of `schemes` (in any case).
fn has_scheme(url: &str, schemes: &[&str]) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    schemes.iter().any(|s| lower.starts_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_array_elements_map_back_to_the_written_index() {
        let mut r = Removals::default();
        let list = |i| {
            vec![
                Seg::Key("agents".into()),
                Seg::Key("list".into()),
                Seg::Index(i),
            ]
        };
        r.note_removed(&list(0));
        r.note_removed(&list(2));
        assert_eq!(r.to_original(&list(0)), list(1));
        assert_eq!(r.to_original(&list(1)), list(3));
    }

    #[test]
    fn serde_messages_become_plain_words() {
        assert_eq!(
            humanize("unknown field `visibilty`, expected `visibility`"),
            "unknown key \"visibilty\" (expected one of: visibility)"
        );
        assert_eq!(
            humanize(
                "unknown variant `everything`, expected one of `self`, `tree`, `agent`, `all`"
            ),
            "expected one of \"self\", \"tree\", \"agent\", \"all\", got \"everything\""
        );
        assert_eq!(
            humanize("invalid value: integer `70000`, expected u16"),
            "expected a whole number from 0 to 65535, got 70000"
        );
        assert_eq!(
            humanize("invalid type: string \"5\", expected f64"),
            "expected a number, got \"5\""
        );
        assert!(
            humanize("unknown field `modle`, expected one of `id`, `model`")
                .contains("did you mean \"model\"?")
        );
    }
}
