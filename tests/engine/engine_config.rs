//! Config loading: the shipped default, the fixtures under `tests/fixtures/{valid,invalid}`,
//! every problem reported with its key path and line, and `config init`'s writer.

use std::path::{Path, PathBuf};

use switchboard_config::{
    ChatType, Config, ConfigError, ConfigProblem, DEFAULT_CONFIG_TEXT, GatewayBind,
    SandboxVisibility, SessionScope, Visibility, check_file, load_file, parse_str, write_default,
};
use switchboard_types::api::SendPolicy;

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json5"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn fixture(kind: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
        .join(name)
}

fn problems_of(src: &str) -> Vec<ConfigProblem> {
    match parse_str(src) {
        Ok(_) => panic!("expected problems, the config parsed"),
        Err(problems) => problems,
    }
}

/// (line, path, a piece of the message)
type Expected = (usize, &'static str, &'static str);

fn assert_problems(what: &str, problems: &[ConfigProblem], expected: &[Expected]) {
    let listing: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems.len(),
        expected.len(),
        "{what}: wrong number of problems:\n{}",
        listing.join("\n")
    );
    for (line, path, piece) in expected {
        let found = problems
            .iter()
            .any(|p| p.line == Some(*line) && p.path == *path && p.message.contains(piece));
        assert!(
            found,
            "{what}: no problem at line {line}, {path}, containing {piece:?}; got:\n{}",
            listing.join("\n")
        );
    }
}

#[test]
fn default_config_parses_without_problems() {
    let config = parse_str(DEFAULT_CONFIG_TEXT)
        .unwrap_or_else(|p| panic!("default config has problems: {p:#?}"));
    assert_eq!(config.agents.list.len(), 2);
}

#[test]
fn default_config_states_the_built_in_defaults() {
    let mut config = parse_str(DEFAULT_CONFIG_TEXT).unwrap();
    // The file adds example agents and an empty send policy (same effect as none); everything
    // else it writes out must be exactly what an absent key means.
    let policy = config.session.send_policy.take().unwrap();
    assert!(policy.rules.is_empty());
    assert_eq!(policy.default, Some(SendPolicy::Allow));
    config.agents.list.clear();
    assert_eq!(config, Config::default());
}

#[test]
fn default_config_documents_the_expected_values() {
    let config = parse_str(DEFAULT_CONFIG_TEXT).unwrap();
    assert_eq!(config.session.scope, SessionScope::PerSender);
    assert_eq!(config.session.main_key, "main");
    assert_eq!(config.session.agent_to_agent.max_ping_pong_turns(), 5);
    assert_eq!(config.session.agent_to_agent.max_chain_hops, 12);
    assert_eq!(config.tools.sessions.visibility, Visibility::Tree);
    assert!(!config.tools.agent_to_agent.enabled);
    assert_eq!(
        config.agents.defaults.sandbox.session_tools_visibility,
        SandboxVisibility::Spawned
    );
    assert_eq!(config.agents.defaults.subagents.archive_after_minutes, 60);
    assert_eq!(config.agents.defaults.subagents.max_children_per_agent, 5);
    assert_eq!(config.gateway.port, 18789);
    assert_eq!(config.gateway.bind, GatewayBind::Loopback);
    assert!(config.models.providers.is_empty());

    let main = &config.agents.list[0];
    assert_eq!(
        (main.id.as_str(), main.default, main.model.as_deref()),
        ("main", true, Some("scripted"))
    );
    assert_eq!(main.script[0].when.text.as_deref(), Some("/^ping/"));
    assert_eq!(
        main.script[0].reply.as_deref(),
        Some("pong from {{sessionKey}}")
    );
    assert_eq!(
        main.script.last().unwrap().reply.as_deref(),
        Some("Received: {{text}}")
    );
    assert!(main.script.last().unwrap().when.text.is_none());
    let work = &config.agents.list[1];
    assert_eq!(
        (work.id.as_str(), work.default, work.model.as_deref()),
        ("work", false, Some("scripted"))
    );
    assert_eq!(config.default_agent_id(), "main");
}

#[test]
fn every_valid_fixture_parses() {
    for path in fixtures("valid") {
        let problems = check_file(&path).unwrap();
        assert!(
            problems.is_empty(),
            "{} has problems: {problems:#?}",
            path.display()
        );
        load_file(&path).unwrap();
    }
}

#[test]
fn valid_fixtures_mean_what_they_say() {
    let config = load_file(&fixture("valid", "comments-only.json5")).unwrap();
    assert_eq!(config, Config::default());

    let config = load_file(&fixture("valid", "strict-json.json5")).unwrap();
    assert_eq!(config.session.scope, SessionScope::Global);
    assert_eq!(config.key_scheme().main_key, "home");
    // Out-of-range ping-pong values are accepted and clamped where they are used.
    assert_eq!(config.session.agent_to_agent.max_ping_pong_turns, 99.0);
    assert_eq!(config.session.agent_to_agent.max_ping_pong_turns(), 5);
    assert_eq!(config.tools.sessions.visibility, Visibility::All);

    let config = load_file(&fixture("valid", "design-example.json5")).unwrap();
    let ops = config.agent("ops").unwrap();
    assert_eq!(ops.model.as_deref(), Some("ollama/llama3.2"));
    assert!(config.agent_sandboxed("ops"));
    assert_eq!(
        config.models.providers["ollama"].base_url,
        "http://127.0.0.1:11434/v1"
    );
}

/// Every invalid fixture with the problems it must produce. A fixture missing here fails the
/// test, so each new one gets its expectations written down.
const INVALID: &[(&str, &[Expected])] = &[
    (
        "unknown-key.json5",
        &[(
            5,
            "tools.sessions.visibilty",
            r#"unknown key "visibilty" (expected one of: visibility)"#,
        )],
    ),
    (
        "bad-enum.json5",
        &[
            (
                3,
                "tools.sessions.visibility",
                r#"expected one of "self", "tree", "agent", "all", got "everything""#,
            ),
            (
                5,
                "gateway.bind",
                r#"expected one of "loopback", "lan", "auto", "tailnet", "custom", got "public""#,
            ),
        ],
    ),
    (
        "wrong-types.json5",
        &[
            (
                4,
                "session.agentToAgent.maxPingPongTurns",
                r#"expected a number, got "5""#,
            ),
            (
                8,
                "tools.agentToAgent.enabled",
                r#"expected true or false, got "yes""#,
            ),
            (
                8,
                "tools.agentToAgent.allow",
                r#"expected a list, got "main""#,
            ),
            (
                11,
                "gateway.port",
                "expected a whole number from 0 to 65535, got 70000",
            ),
        ],
    ),
    (
        "three-mistakes.json5",
        &[
            (3, "session.mainkey", r#"did you mean "mainKey"?"#),
            (
                7,
                "agents.defaults.subagents.archiveAfterMinutes",
                r#"got "an hour""#,
            ),
            (
                11,
                "agents.list[1].id",
                r#"duplicate agent id "Main" (agents.list[0] has the same id)"#,
            ),
        ],
    ),
    (
        "deep-unknown.json5",
        &[(
            10,
            "agents.list[1].subagents.maxDepth",
            r#"unknown key "maxDepth" (expected one of: allowAgents)"#,
        )],
    ),
    (
        "agents.json5",
        &[
            (5, "agents.list[1].id", r#"invalid agent id "bad id""#),
            (6, "agents.list[2].id", r#"duplicate agent id "main""#),
            (
                7,
                "agents.list[3].default",
                "only one agent may have default: true (agents.list[0] already has it)",
            ),
            (
                7,
                "agents.list[3].model",
                r#"write it as "<provider>/llama3.2""#,
            ),
            (8, "agents.list[4].model", "needs both parts"),
            (9, "agents.list[5].id", "missing agent id"),
            (
                15,
                "agents.list[6].script[1].when.text",
                "invalid regular expression /unclosed (group/: unclosed group",
            ),
        ],
    ),
    (
        "session-and-gateway.json5",
        &[
            (
                3,
                "session.scope",
                r#"expected one of "per-sender", "global", got "per-user""#,
            ),
            (4, "session.mainKey", r#"must not contain ":""#),
            (7, "gateway.port", "port 0 is not allowed"),
            (8, "gateway.auth.token", "expected a string, got 12345"),
        ],
    ),
    (
        "openclaw-gateway.json5",
        &[
            (
                3,
                "gateway.bind",
                r#""lan" is OpenClaw's and is not supported by switchboard serve (supported: "loopback""#,
            ),
            (
                5,
                "gateway.auth.mode",
                r#""password" is OpenClaw's and is not supported by switchboard serve (supported: "token")"#,
            ),
            (
                6,
                "gateway.auth.password",
                "is not used by switchboard serve",
            ),
        ],
    ),
    (
        "empty-main-key.json5",
        &[(2, "session.mainKey", "must not be empty")],
    ),
    (
        "send-policy.json5",
        &[
            (
                5,
                "session.sendPolicy.rules[0]",
                r#"missing required key "action""#,
            ),
            (
                6,
                "session.sendPolicy.rules[1].match.chatType",
                r#"got "private""#,
            ),
            (
                7,
                "session.sendPolicy.rules[2].match.to",
                r#"unknown key "to""#,
            ),
            (
                8,
                "session.sendPolicy.rules[3].match",
                r#""channel" is given more than once"#,
            ),
            (
                9,
                "session.sendPolicy.rules[4].action",
                r#"expected one of "allow", "deny", got "block""#,
            ),
            (11, "session.sendPolicy.default", r#"got "maybe""#),
        ],
    ),
    (
        "syntax-error.json5",
        // Column 20: just after `"main"`, where the comma belongs (json5 0.4's pest stopped
        // at the start of `"main"`, column 14).
        &[(3, "", "syntax error at column 20")],
    ),
    (
        "unterminated-string.json5",
        &[(3, "", "syntax error at column")],
    ),
    (
        "not-an-object.json5",
        &[(2, "", "the config must be an object")],
    ),
    (
        "list-for-object.json5",
        &[
            (3, "tools.sessions", "expected an object, got a list"),
            (6, "agents.list", "expected a list, got an object"),
        ],
    ),
    (
        "shifted-list.json5",
        &[
            (4, "agents.list[0]", r#"expected an object, got "main""#),
            (6, "agents.list[2].extra", r#"unknown key "extra""#),
            (
                7,
                "agents.list[3].id",
                r#"duplicate agent id "a" (agents.list[1] has the same id)"#,
            ),
        ],
    ),
    (
        "non-finite.json5",
        &[(3, "session.agentToAgent.maxPingPongTurns", "got NaN")],
    ),
    (
        "out-of-range.json5",
        &[
            (
                4,
                "session.agentToAgent.maxChainHops",
                "expected a whole number from 1 to 100 (sends in one agent-to-agent chain; the default is 12), got 4294967295",
            ),
            (
                9,
                "agents.defaults.subagents.archiveAfterMinutes",
                "from 0 to 525600 (minutes; 0 never archives, at most a year), got 1000000000000000",
            ),
            (
                10,
                "agents.defaults.subagents.runTimeoutSeconds",
                "from 0 to 86400 (seconds; 0 means no limit, at most a day), got 86401",
            ),
            (
                11,
                "agents.defaults.subagents.maxChildrenPerAgent",
                "from 1 to 20",
            ),
            (12, "agents.defaults.subagents.maxSpawnDepth", "from 1 to 5"),
            (
                19,
                "agents.list[0].script[1].delayMs",
                "from 0 to 600000 (milliseconds, at most ten minutes), got 600001",
            ),
            (20, "agents.list[0].script[1].when.round", "from 0 to 5"),
            (
                21,
                "agents.list[0].script[1].tokens.in",
                "from 0 to 10000000",
            ),
            (
                21,
                "agents.list[0].script[1].tokens.out",
                "from 0 to 10000000 (tokens in one turn), got -1",
            ),
        ],
    ),
];

#[test]
fn every_invalid_fixture_reports_its_problems() {
    let files = fixtures("invalid");
    for path in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        let Some((_, expected)) = INVALID.iter().find(|(n, _)| *n == name) else {
            panic!("invalid fixture {name} has no expectations in INVALID");
        };
        let problems = check_file(path).unwrap();
        assert_problems(name, &problems, expected);
    }
    for (name, _) in INVALID {
        assert!(
            files.iter().any(|p| p.ends_with(name)),
            "INVALID names a missing fixture {name}"
        );
    }
}

#[test]
fn three_different_mistakes_are_all_reported() {
    let problems = check_file(&fixture("invalid", "three-mistakes.json5")).unwrap();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "session.mainkey",
            "agents.defaults.subagents.archiveAfterMinutes",
            "agents.list[1].id"
        ],
        "problems come in file order"
    );
}

#[test]
fn unknown_key_deep_inside_an_agent_names_its_full_path() {
    let src = "{\n  agents: {\n    list: [\n      { id: 'main' },\n      { id: 'work', subagents: {\n          allowAgent: ['main'] } },\n    ],\n  },\n}\n";
    let problems = problems_of(src);
    assert_problems(
        "deep",
        &problems,
        &[(
            6,
            "agents.list[1].subagents.allowAgent",
            r#"unknown key "allowAgent" (expected one of: allowAgents)"#,
        )],
    );
}

#[test]
fn surface_is_an_alias_of_channel() {
    let config = parse_str(
        "{ session: { sendPolicy: { rules: [ { match: { surface: 'discord', chatType: 'group' }, action: 'deny' } ] } } }",
    )
    .unwrap();
    let rule = &config.session.send_policy.as_ref().unwrap().rules[0];
    assert_eq!(rule.match_.channel.as_deref(), Some("discord"));
    assert_eq!(rule.match_.chat_type, Some(ChatType::Group));
    assert_eq!(rule.action, SendPolicy::Deny);

    let config = load_file(&fixture("valid", "send-policy.json5")).unwrap();
    let policy = config.session.send_policy.unwrap();
    assert_eq!(policy.rules[0].match_.channel.as_deref(), Some("discord"));
    assert_eq!(
        policy.rules[1].match_.chat_type.map(ChatType::normalized),
        Some("direct")
    );
    assert_eq!(policy.default, Some(SendPolicy::Deny));
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let problems = problems_of("{\n  session: {\n    mainKey: 'main',,\n  },\n}\n");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, Some(3));
    assert_eq!(problems[0].path, "");
    assert!(
        problems[0].message.starts_with("syntax error at column 21"),
        "{}",
        problems[0].message
    );

    let problems = check_file(&fixture("invalid", "syntax-error.json5")).unwrap();
    assert!(
        problems[0].message.contains("comma missing before line 4"),
        "{}",
        problems[0].message
    );
}

#[test]
fn problems_after_a_removed_element_keep_the_written_index() {
    let src = "{ agents: { list: [\n 5,\n { id: 'x', default: true },\n { id: 'y', default: true },\n] } }";
    let problems = problems_of(src);
    assert_problems(
        "shifted",
        &problems,
        &[
            (2, "agents.list[0]", "expected an object, got 5"),
            (
                4,
                "agents.list[2].default",
                "(agents.list[1] already has it)",
            ),
        ],
    );
}

#[test]
fn a_required_key_with_a_bad_value_is_reported_once() {
    let problems = problems_of("{ session: { sendPolicy: { rules: [ { action: 'nope' } ] } } }");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "session.sendPolicy.rules[0].action");
}

#[test]
fn out_of_range_ping_pong_turns_are_not_errors() {
    for (written, used) in [("-3", 0), ("2.7", 2), ("0", 0), ("7", 5)] {
        let src = format!("{{ session: {{ agentToAgent: {{ maxPingPongTurns: {written} }} }} }}");
        let config = parse_str(&src).unwrap_or_else(|p| panic!("{written}: {p:?}"));
        assert_eq!(
            config.session.agent_to_agent.max_ping_pong_turns(),
            used,
            "{written}"
        );
    }
}

#[test]
fn empty_file_means_the_defaults() {
    assert_eq!(parse_str("").unwrap(), Config::default());
    assert_eq!(parse_str("\u{feff}  \n").unwrap(), Config::default());
}

#[test]
fn problem_display_omits_unknown_parts() {
    let full = ConfigProblem {
        line: Some(4),
        path: "gateway.port".into(),
        message: "bad".into(),
    };
    assert_eq!(full.to_string(), "line 4: gateway.port: bad");
    let bare = ConfigProblem {
        line: None,
        path: String::new(),
        message: "bad".into(),
    };
    assert_eq!(bare.to_string(), "bad");
}

#[test]
fn invalid_error_lists_every_problem_with_the_file_name() {
    let path = fixture("invalid", "bad-enum.json5");
    let err = load_file(&path).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { ref problems, .. } if problems.len() == 2));
    let text = err.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let file = path.display();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        format!(
            r#"{file}:3: tools.sessions.visibility: expected one of "self", "tree", "agent", "all", got "everything""#
        )
    );
    assert!(
        lines[1].starts_with(&format!("{file}:5: gateway.bind: ")),
        "{text}"
    );
}

#[test]
fn unreadable_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json5");
    assert!(matches!(check_file(&missing), Err(ConfigError::Io { .. })));
    assert!(matches!(load_file(&missing), Err(ConfigError::Io { .. })));
}

#[test]
fn write_default_creates_folders_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/switchboard/config.json5");
    write_default(&path, false).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), DEFAULT_CONFIG_TEXT);
    load_file(&path).unwrap();

    std::fs::write(&path, "{ gateway: { port: 1234 } }").unwrap();
    let err = write_default(&path, false).unwrap_err();
    assert!(matches!(err, ConfigError::Exists { .. }));
    let message = err.to_string();
    assert!(
        message.contains("already exists") && message.contains("--force"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{ gateway: { port: 1234 } }",
        "file left alone"
    );

    write_default(&path, true).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), DEFAULT_CONFIG_TEXT);
}

#[test]
fn nesting_deeper_than_128_is_one_problem_with_its_line() {
    // 7,000 levels overflowed the parser's stack and aborted every command.
    let deep = format!(
        "{{\n  tools: {{}},\n  session: {}{}\n}}",
        "[".repeat(7_000),
        "]".repeat(7_000)
    );
    let problems = problems_of(&deep);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, Some(3));
    assert!(
        problems[0]
            .message
            .starts_with("nested more than 128 levels deep at column 139"),
        "{}",
        problems[0].message
    );
    // 30,000 unclosed brackets took the parser 17 s and 1.3 GB.
    let problems = problems_of(&"[".repeat(30_000));
    assert!(
        problems[0]
            .message
            .contains("nested more than 128 levels deep")
    );
}

#[test]
fn nesting_up_to_the_limit_still_parses_on_a_small_stack() {
    // 9 levels down to `args`, then 119 more: exactly 128, the deepest accepted.
    let src = format!(
        "{{ agents: {{ list: [ {{ id: 'main', script: [ {{ tools: [ {{ name: 'sessions_list', args: {{ x: {}{} }} }} ] }} ] }} ] }} }}",
        "[".repeat(119),
        "]".repeat(119)
    );
    // A test thread's stack (2 MiB) is smaller than the main thread's; the parser must fit.
    let config = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || parse_str(&src))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(
        config.agents.list[0].script[0].tools[0].name,
        "sessions_list"
    );
}

#[test]
fn brackets_in_strings_and_comments_do_not_count_as_nesting() {
    let src = format!(
        "{{\n  // {open}\n  /* {open} */\n  session: {{ mainKey: \"{open}\" }},\n  agents: {{ list: [ {{ id: 'main', name: '{curly}' }} ] }},\n}}",
        open = "[".repeat(300),
        curly = "{".repeat(300)
    );
    let config = parse_str(&src).unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(config.session.main_key, "[".repeat(300));
    assert_eq!(
        config.agents.list[0].name.as_deref(),
        Some("{".repeat(300).as_str())
    );
}

#[test]
fn a_file_over_256_kib_is_one_problem_and_is_not_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json5");
    let mut text = String::from("{\n// ");
    text.push_str(&"x".repeat(3 << 20));
    text.push_str("\n}\n");
    std::fs::write(&path, &text).unwrap();
    let problems = check_file(&path).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .message
            .contains("larger than 256 KiB (3145736 bytes)"),
        "{}",
        problems[0].message
    );
    assert!(matches!(load_file(&path), Err(ConfigError::Invalid { .. })));
}
