//! The scripted backend (DESIGN §3.3): rules from config, first match replies. Offline and
//! deterministic, for demos and tests.

use std::borrow::Cow;
use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use super::{Agent, AgentError, BoxFuture, Reply, ToolRunner, Turn, Usage};
use switchboard_types::config::ScriptRule;
use switchboard_types::config::regex_body;

/// An agent that answers from a list of [`ScriptRule`]s.
pub struct ScriptedAgent {
    rules: Vec<Rule>,
}

/// A rule with its `when.text` prepared, so regexes are compiled once, not per turn.
struct Rule {
    script: ScriptRule,
    text: TextMatch,
}

enum TextMatch {
    Any,
    Substring(String),
    Regex(Regex),
    /// A `/…/` that does not compile. The config loader rejects these, but a rule built by
    /// hand must not panic: it just never matches.
    Never,
}

impl ScriptedAgent {
    pub fn new(rules: Vec<ScriptRule>) -> ScriptedAgent {
        let rules = rules
            .into_iter()
            .map(|script| {
                let text = match script.when.text.as_deref() {
                    None => TextMatch::Any,
                    Some(t) => match regex_body(t) {
                        Some(pattern) => {
                            Regex::new(pattern).map_or(TextMatch::Never, TextMatch::Regex)
                        }
                        None => TextMatch::Substring(t.to_string()),
                    },
                };
                Rule { script, text }
            })
            .collect();
        ScriptedAgent { rules }
    }

    /// The first rule matching `turn`, with its regex groups (`None` for a rule without a
    /// regex, so `$1` stays literal there).
    fn choose(&self, turn: &Turn) -> Option<(&ScriptRule, Option<Vec<String>>)> {
        self.rules.iter().find_map(|rule| {
            let when = &rule.script.when;
            if when.step.is_some_and(|s| s != turn.step)
                || when.round.is_some_and(|r| r != turn.round)
            {
                return None;
            }
            if let Some(pattern) = &when.from {
                // A pattern asks for a requester; a user message has none.
                if !glob_match(pattern, turn.from.as_deref()?) {
                    return None;
                }
            }
            let groups = match &rule.text {
                TextMatch::Any => None,
                TextMatch::Substring(s) => {
                    if !turn.text.contains(s.as_str()) {
                        return None;
                    }
                    None
                }
                TextMatch::Regex(re) => {
                    let caps = re.captures(&turn.text)?;
                    let groups = caps
                        .iter()
                        .map(|g| g.map_or(String::new(), |m| m.as_str().to_string()))
                        .collect();
                    Some(groups)
                }
                TextMatch::Never => return None,
            };
            Some((&rule.script, groups))
        })
    }
}

impl Agent for ScriptedAgent {
    fn run<'a>(
        &'a self,
        turn: &'a Turn,
        tools: &'a dyn ToolRunner,
    ) -> BoxFuture<'a, Result<Reply, AgentError>> {
        Box::pin(async move {
            let Some((rule, groups)) = self.choose(turn) else {
                return Ok(Reply::default());
            };
            let mut vars = Vars {
                turn,
                round: turn.round.to_string(),
                result: String::new(),
                result_value: Value::Null,
                groups: groups.as_deref(),
            };
            // Each call sees the previous call's result as {{result}}; after the loop it is
            // the last one's.
            for call in &rule.tools {
                let args = substitute_json(&call.args, &vars);
                vars.result_value = tools.call(&call.name, &args).await;
                vars.result = vars.result_value.to_string();
            }
            if rule.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(rule.delay_ms)).await;
            }
            if let Some(error) = &rule.error {
                return Err(AgentError::Failed(substitute(error, &vars)));
            }
            let text = rule
                .reply
                .as_deref()
                .map(|r| substitute(r, &vars))
                .unwrap_or_default();
            if rule.stream_ms > 0 {
                stream_words(&text, rule.stream_ms, tools).await;
            }
            Ok(Reply {
                text,
                usage: rule.tokens.map(|t| Usage {
                    input: t.input,
                    output: t.output,
                }),
            })
        })
    }
}

/// Reports `text` through `reply_delta` one word (with the whitespace after it) at a time,
/// pausing `pause_ms` after each, as a streaming model's single call (step 1) would.
async fn stream_words(text: &str, pause_ms: u64, tools: &dyn ToolRunner) {
    let mut offset = 0;
    for word in text.split_inclusive(char::is_whitespace) {
        tools.reply_delta(1, offset, word);
        offset += word.len();
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// Case-sensitive glob where `*` matches any run of characters (including none).
fn glob_match(pattern: &str, s: &str) -> bool {
    let mut pieces = pattern.split('*');
    // `split` always yields at least one piece: the part before the first `*`.
    let Some(rest) = pieces.next().and_then(|first| s.strip_prefix(first)) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty(); // no `*` at all: an exact match
    };
    // Taking each middle piece at its leftmost occurrence leaves the most room for the rest.
    let mut rest = rest;
    for piece in middle {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// What placeholders expand to in one turn.
struct Vars<'a> {
    turn: &'a Turn,
    round: String,
    result: String,
    /// The last result as JSON, for `{{result.<field>…}}`.
    result_value: Value,
    groups: Option<&'a [String]>,
}

impl Vars<'_> {
    /// The placeholder at the start of `s`, if any: its value and how many bytes it spans.
    fn lookup(&self, s: &str) -> Option<(Cow<'_, str>, usize)> {
        if let Some(inner) = s.strip_prefix("{{") {
            let end = inner.find("}}")?;
            let value = match &inner[..end] {
                "text" => Cow::Borrowed(self.turn.text.as_str()),
                "sessionKey" => Cow::Borrowed(self.turn.session_key.as_str()),
                "from" => Cow::Borrowed(self.turn.from.as_deref().unwrap_or("")),
                "round" => Cow::Borrowed(self.round.as_str()),
                "result" => Cow::Borrowed(self.result.as_str()),
                // `{{result.reply}}`, `{{result.sessions.0.key}}`: one field of the result.
                name => {
                    let path = name.strip_prefix("result.")?;
                    let found = path
                        .split('.')
                        .try_fold(&self.result_value, |v, step| match v {
                            Value::Array(items) => items.get(step.parse::<usize>().ok()?),
                            other => other.get(step),
                        });
                    Cow::Owned(match found {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    })
                }
            };
            return Some((value, end + 4));
        }
        let digit = s
            .strip_prefix('$')?
            .bytes()
            .next()
            .filter(u8::is_ascii_digit)?;
        let groups = self.groups?;
        let value = groups
            .get(usize::from(digit - b'0'))
            .map_or("", String::as_str);
        Some((Cow::Borrowed(value), 2))
    }
}

/// Expands placeholders in one left-to-right pass: inserted values are never rescanned, so an
/// incoming `{{round}}` comes out as written.
fn substitute(template: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '$']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        match vars.lookup(rest) {
            Some((value, len)) => {
                out.push_str(&value);
                rest = &rest[len..];
            }
            // Not a placeholder: keep the (one-byte, ASCII) `{` or `$` and go on after it.
            None => {
                out.push_str(&rest[..1]);
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Tool args with every string value substituted (object keys are left as written).
fn substitute_json(value: &Value, vars: &Vars) -> Value {
    match value {
        Value::String(s) => Value::String(substitute(s, vars)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute_json(v, vars)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_json(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    use serde_json::json;

    use super::*;
    use crate::agent::Step;
    use switchboard_types::config::{ScriptTokens, ScriptToolCall, ScriptWhen};

    /// Records every call and answers `{"n": <call number>, "tool": <name>}`.
    #[derive(Default)]
    struct FakeTools {
        calls: Mutex<Vec<(String, Value)>>,
    }

    impl ToolRunner for FakeTools {
        fn call<'a>(&'a self, name: &'a str, args: &'a Value) -> BoxFuture<'a, Value> {
            let mut calls = self.calls.lock().unwrap();
            calls.push((name.to_string(), args.clone()));
            let result = json!({ "n": calls.len(), "tool": name });
            Box::pin(async move { result })
        }
    }

    fn turn(text: &str) -> Turn {
        Turn {
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            step: Step::Message,
            round: 0,
            from: None,
            text: text.into(),
            context: None,
            provenance: None,
        }
    }

    fn when_text(text: &str) -> ScriptWhen {
        ScriptWhen {
            text: Some(text.into()),
            ..ScriptWhen::default()
        }
    }

    fn rule(when: ScriptWhen, reply: &str) -> ScriptRule {
        ScriptRule {
            when,
            reply: Some(reply.into()),
            ..ScriptRule::default()
        }
    }

    async fn reply(rules: Vec<ScriptRule>, turn: &Turn) -> String {
        let agent = ScriptedAgent::new(rules);
        agent.run(turn, &FakeTools::default()).await.unwrap().text
    }

    #[tokio::test]
    async fn first_matching_rule_wins() {
        let rules = vec![
            rule(when_text("zzz"), "no"),
            rule(when_text("ell"), "first"),
            rule(ScriptWhen::default(), "catch-all"),
        ];
        assert_eq!(reply(rules.clone(), &turn("hello")).await, "first");
        assert_eq!(reply(rules, &turn("bye")).await, "catch-all");
    }

    #[tokio::test]
    async fn substring_versus_regex() {
        // Without slashes `^h.` is a literal substring.
        let rules = vec![
            rule(when_text("^h."), "literal"),
            rule(when_text("/^h./"), "regex"),
        ];
        assert_eq!(reply(rules.clone(), &turn("hello")).await, "regex");
        assert_eq!(reply(rules.clone(), &turn("say ^h. now")).await, "literal");
        assert_eq!(reply(rules, &turn("oh")).await, "");
        // A lone "/" is a substring, not an empty regex.
        assert_eq!(
            reply(vec![rule(when_text("/"), "slash")], &turn("a/b")).await,
            "slash"
        );
        assert_eq!(
            reply(vec![rule(when_text("/"), "slash")], &turn("ab")).await,
            ""
        );
    }

    #[tokio::test]
    async fn regex_groups_fill_dollar_digits() {
        let rules = vec![rule(
            when_text("/^(\\w+) (\\d+)(x)?/"),
            "[$0] $2 $1 [$3] $9 $a $",
        )];
        assert_eq!(
            reply(rules, &turn("ping 42 rest")).await,
            "[ping 42] 42 ping []  $a $"
        );
        // Without a regex there are no groups, and `$1` is plain text.
        let rules = vec![rule(when_text("cost"), "costs $5")];
        assert_eq!(reply(rules, &turn("cost?")).await, "costs $5");
    }

    #[tokio::test]
    async fn bad_regex_never_matches() {
        let rules = vec![
            rule(when_text("/(/"), "bad"),
            rule(ScriptWhen::default(), "ok"),
        ];
        assert_eq!(reply(rules, &turn("(")).await, "ok");
    }

    #[tokio::test]
    async fn step_round_and_from() {
        let rules = vec![
            rule(
                ScriptWhen {
                    step: Some(Step::Announce),
                    ..ScriptWhen::default()
                },
                "announce",
            ),
            rule(
                ScriptWhen {
                    step: Some(Step::Reply),
                    round: Some(2),
                    ..ScriptWhen::default()
                },
                "round two",
            ),
            rule(
                ScriptWhen {
                    from: Some("agent:*:sub*".into()),
                    ..ScriptWhen::default()
                },
                "from sub",
            ),
            rule(
                ScriptWhen {
                    from: Some("*".into()),
                    ..ScriptWhen::default()
                },
                "from anyone",
            ),
            rule(ScriptWhen::default(), "user"),
        ];
        let mut t = turn("x");
        t.step = Step::Announce;
        assert_eq!(reply(rules.clone(), &t).await, "announce");

        t.step = Step::Reply;
        t.round = 2;
        assert_eq!(reply(rules.clone(), &t).await, "round two");

        t.round = 3;
        t.from = Some("agent:ops:subagent:1".into());
        assert_eq!(reply(rules.clone(), &t).await, "from sub");

        // Case-sensitive.
        t.from = Some("agent:ops:Subagent:1".into());
        assert_eq!(reply(rules.clone(), &t).await, "from anyone");

        // Even `*` needs a requester.
        t.from = None;
        assert_eq!(reply(rules, &t).await, "user");
    }

    #[test]
    fn glob() {
        assert!(glob_match("abc", "abc"));
        assert!(!glob_match("abc", "abcd"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*c", "abbbc"));
        assert!(glob_match("a*c", "ac"));
        assert!(!glob_match("a*c", "acb"));
        assert!(glob_match("*b*b", "abab"));
        assert!(!glob_match("a*a", "a"));
        assert!(glob_match("agent:*:main", "agent:ops:main"));
    }

    #[tokio::test]
    async fn tools_run_in_order_with_substituted_args() {
        let rules = vec![ScriptRule {
            when: when_text("/go (\\w+)/"),
            tools: vec![
                ScriptToolCall {
                    name: "sessions_list".into(),
                    args: json!({ "label": "$1", "n": 5, "list": ["{{sessionKey}}", true] }),
                },
                ScriptToolCall {
                    name: "sessions_send".into(),
                    args: json!({ "message": "prev={{result}} round={{round}}" }),
                },
            ],
            reply: Some("done: {{result}}".into()),
            ..ScriptRule::default()
        }];
        let tools = FakeTools::default();
        let mut t = turn("go west");
        t.round = 1;
        let out = ScriptedAgent::new(rules).run(&t, &tools).await.unwrap();
        assert_eq!(out.text, r#"done: {"n":2,"tool":"sessions_send"}"#);
        assert_eq!(out.usage, None);
        let calls = tools.calls.lock().unwrap();
        assert_eq!(
            *calls,
            vec![
                (
                    "sessions_list".to_string(),
                    json!({ "label": "west", "n": 5, "list": ["agent:main:main", true] })
                ),
                (
                    "sessions_send".to_string(),
                    json!({ "message": r#"prev={"n":1,"tool":"sessions_list"} round=1"# })
                ),
            ]
        );
    }

    #[tokio::test]
    async fn error_rule_fails_with_substituted_message() {
        let rules = vec![ScriptRule {
            when: when_text("/fail (.*)/"),
            error: Some("boom: $1 in {{sessionKey}}".into()),
            reply: Some("unused".into()),
            tokens: Some(ScriptTokens {
                input: 1,
                output: 2,
            }),
            ..ScriptRule::default()
        }];
        let out = ScriptedAgent::new(rules)
            .run(&turn("fail hard"), &FakeTools::default())
            .await;
        assert_eq!(
            out,
            Err(AgentError::Failed("boom: hard in agent:main:main".into()))
        );
    }

    #[tokio::test]
    async fn tokens_become_usage() {
        let rules = vec![ScriptRule {
            tokens: Some(ScriptTokens {
                input: 12,
                output: 34,
            }),
            ..ScriptRule::default()
        }];
        let out = ScriptedAgent::new(rules)
            .run(&turn("hi"), &FakeTools::default())
            .await;
        // No `reply`: the text is empty, the usage still counts.
        assert_eq!(
            out,
            Ok(Reply {
                text: String::new(),
                usage: Some(Usage {
                    input: 12,
                    output: 34
                })
            })
        );
    }

    #[tokio::test]
    async fn no_match_is_an_empty_reply() {
        let tools = FakeTools::default();
        let out = ScriptedAgent::new(vec![rule(when_text("x"), "y")])
            .run(&turn("a"), &tools)
            .await;
        assert_eq!(
            out,
            Ok(Reply {
                text: String::new(),
                usage: None
            })
        );
        let out = ScriptedAgent::new(Vec::new()).run(&turn("a"), &tools).await;
        assert_eq!(out, Ok(Reply::default()));
    }

    #[tokio::test]
    async fn substitution_is_single_pass() {
        let rules = vec![rule(
            ScriptWhen::default(),
            "{{text}}|{{from}}|{{round}}|{{nope}}|{{{text}}}",
        )];
        let mut t = turn("{{round}} $1 {{sessionKey}}");
        t.round = 4;
        assert_eq!(
            reply(rules, &t).await,
            "{{round}} $1 {{sessionKey}}||4|{{nope}}|{{{round}} $1 {{sessionKey}}}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delay_waits_on_tokio_timer() {
        let rules = vec![ScriptRule {
            delay_ms: 1000,
            ..rule(ScriptWhen::default(), "late")
        }];
        let agent = ScriptedAgent::new(rules);
        let tools = FakeTools::default();
        let t = turn("hi");
        let mut fut = agent.run(&t, &tools);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    }
}

#[cfg(test)]
mod stream_tests {
    use std::sync::Mutex;

    use super::*;
    use switchboard_types::config::ScriptWhen;

    /// Records every delta; tool calls are not expected.
    #[derive(Default)]
    struct Deltas(Mutex<Vec<(u32, usize, String)>>);

    impl ToolRunner for Deltas {
        fn call<'a>(&'a self, _name: &'a str, _args: &'a Value) -> BoxFuture<'a, Value> {
            Box::pin(async { Value::Null })
        }
        fn reply_delta(&self, step: u32, offset: usize, delta: &str) {
            self.0
                .lock()
                .expect("deltas lock")
                .push((step, offset, delta.to_string()));
        }
    }

    fn turn() -> Turn {
        Turn {
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            step: crate::agent::Step::Message,
            round: 0,
            from: None,
            text: "hi".into(),
            context: None,
            provenance: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stream_ms_reports_the_reply_word_by_word_then_returns_it_whole() {
        let rule = ScriptRule {
            when: ScriptWhen::default(),
            reply: Some("héllo  big\nworld".into()),
            stream_ms: 30,
            ..ScriptRule::default()
        };
        let tools = Deltas::default();
        let reply = ScriptedAgent::new(vec![rule])
            .run(&turn(), &tools)
            .await
            .expect("reply");
        assert_eq!(reply.text, "héllo  big\nworld");
        let deltas = tools.0.into_inner().expect("deltas");
        assert_eq!(
            deltas,
            vec![
                (1, 0, "héllo ".to_string()),
                (1, 7, " ".to_string()),
                (1, 8, "big\n".to_string()),
                (1, 12, "world".to_string()),
            ]
        );
        // Offsets chain: each is the byte length of everything before it.
        let joined: String = deltas.iter().map(|d| d.2.as_str()).collect();
        assert_eq!(joined, reply.text);
    }

    #[tokio::test]
    async fn without_stream_ms_nothing_is_streamed() {
        let rule = ScriptRule {
            reply: Some("plain".into()),
            ..ScriptRule::default()
        };
        let tools = Deltas::default();
        let reply = ScriptedAgent::new(vec![rule])
            .run(&turn(), &tools)
            .await
            .expect("reply");
        assert_eq!(reply.text, "plain");
        assert!(tools.0.into_inner().expect("deltas").is_empty());
    }
}

#[cfg(test)]
mod result_field_tests {
    use super::*;
    use serde_json::json;
    use switchboard_types::config::{ScriptToolCall, ScriptWhen};

    struct Canned;

    impl ToolRunner for Canned {
        fn call<'a>(&'a self, _name: &'a str, _args: &'a Value) -> BoxFuture<'a, Value> {
            Box::pin(async {
                json!({ "status": "ok", "reply": "pong", "n": 3, "rows": [{ "key": "a" }] })
            })
        }
    }

    #[tokio::test]
    async fn result_fields_are_reachable_by_dotted_paths() {
        let rule = ScriptRule {
            when: ScriptWhen::default(),
            tools: vec![ScriptToolCall {
                name: "sessions_send".into(),
                args: json!({}),
            }],
            reply: Some(
                "{{result.reply}}|{{result.n}}|{{result.rows.0.key}}|{{result.missing}}|".into(),
            ),
            ..ScriptRule::default()
        };
        let turn = Turn {
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            step: crate::agent::Step::Message,
            round: 0,
            from: None,
            text: "x".into(),
            context: None,
            provenance: None,
        };
        let reply = ScriptedAgent::new(vec![rule])
            .run(&turn, &Canned)
            .await
            .expect("reply");
        assert_eq!(reply.text, "pong|3|a||");
    }
}
