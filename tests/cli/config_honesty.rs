//! Config values that load but are not used as written are reported with the value used
//! instead: by `switchboard config check` (a warning, exit 0) and at start-up (a warning in
//! the log). Values that cannot be used at all stay errors (exit 1).

use std::process::Output;

use crate::common;

use common::CliBench;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn turns(v: &str) -> String {
    format!(
        "{{\n  session: {{\n    agentToAgent: {{\n      maxPingPongTurns: {v},\n    }},\n  }},\n}}\n"
    )
}

#[test]
fn ping_pong_turns_above_five_are_a_warning_with_the_value_used() {
    let b = CliBench::new(&turns("9"));
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "usable, so not an error: {err}");
    assert!(
        err.contains("config.json5:4: session.agentToAgent.maxPingPongTurns: warning: 9 ")
            && err.contains("5 will be used"),
        "{err}"
    );
    assert!(stdout(&out).contains("ok, 1 warning"), "{}", stdout(&out));
}

#[test]
fn ping_pong_turns_below_zero_or_fractional_say_what_is_used() {
    for (v, used) in [("-1", "0 will be used"), ("2.5", "2 will be used")] {
        let b = CliBench::new(&turns(v));
        let out = b.run(&["config", "check"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{v}: {err}");
        assert!(
            err.contains("maxPingPongTurns: warning") && err.contains(used),
            "{v}: {err}"
        );
    }
}

#[test]
fn a_config_in_range_has_no_warning() {
    let b = CliBench::new(&turns("3"));
    let out = b.run(&["config", "check"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "");
    assert!(stdout(&out).ends_with(": ok\n"), "{}", stdout(&out));
}

#[test]
fn unusable_values_stay_errors() {
    for (text, says) in [
        (
            "{\n  agents: { defaults: { subagents: { runTimeoutSeconds: -5 } } },\n}\n",
            "runTimeoutSeconds",
        ),
        (
            "{\n  tools: { sessions: { visibility: \"everyone\" } },\n}\n",
            "visibility",
        ),
    ] {
        let b = CliBench::new(text);
        let out = b.run(&["config", "check"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{text}: {err}");
        assert!(
            err.contains(says) && err.contains("config.json5:2"),
            "{text}: {err}"
        );
    }
}

#[test]
fn start_up_logs_the_value_used_instead() {
    let b = CliBench::new(&turns("9"));
    // A command that starts the engine (a read-only one needs an existing state folder).
    let out = b.run(&["tool", "sessions_list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(b.state.join("logs/switchboard.log")).unwrap();
    assert!(
        log.contains("WARN") && log.contains("maxPingPongTurns") && log.contains("5 will be used"),
        "{log}"
    );
}

/// Issue "a gateway that holds", item 10: `gateway.bind: "lan"` and `gateway.auth.mode:
/// "none" | "password"` passed `config check` and were ignored by `serve` (which listened on
/// loopback with a token). Each unsupported value is now an error of both, naming the field,
/// the value, what is supported and what to use instead.
#[test]
fn unsupported_gateway_values_fail_config_check_and_serve_saying_what_is_supported() {
    for (config, path, wants) in [
        (
            "{ gateway: { bind: 'lan' } }",
            "gateway.bind",
            &[
                "\"lan\" is OpenClaw's and is not supported by switchboard serve",
                "supported: \"loopback\"",
                "switchboard serve --bind ADDRESS:PORT",
            ][..],
        ),
        (
            "{ gateway: { bind: 'tailnet' } }",
            "gateway.bind",
            &["\"tailnet\"", "supported: \"loopback\""][..],
        ),
        (
            "{ gateway: { auth: { mode: 'none' } } }",
            "gateway.auth.mode",
            &[
                "\"none\" is OpenClaw's and is not supported",
                "supported: \"token\"",
            ][..],
        ),
        (
            "{ gateway: { auth: { mode: 'password', password: 'hunter2' } } }",
            "gateway.auth.mode",
            &[
                "\"password\"",
                "supported: \"token\"",
                "gateway.auth.password: is not used",
            ][..],
        ),
    ] {
        let b = CliBench::new(config);
        let check = b.run(&["config", "check"]);
        let err = stderr(&check);
        assert_eq!(check.status.code(), Some(1), "{config}: {err}");
        assert!(err.contains(&format!("{path}: ")), "{config}: {err}");
        for w in wants {
            assert!(err.contains(w), "{config}: wants {w:?} in {err}");
        }
        // serve refuses to start on it (it would otherwise listen, ignoring the value).
        let serve = b
            .command(&["serve", "--bind", "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = stderr(&serve);
        assert_ne!(serve.status.code(), Some(0), "{config}: {err}");
        assert!(
            err.contains(&format!("{path}: ")) && err.contains(wants[0]),
            "{config}: {err}"
        );
    }
    // The supported values still pass.
    let b = CliBench::new("{ gateway: { bind: 'loopback', auth: { mode: 'token' } } }");
    let out = b.run(&["config", "check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `channels.telegram` that cannot work is an error naming the key and what to do; OpenClaw's
/// settings this build does not use (and channels it has not built) load, each a warning.
#[test]
fn config_check_explains_a_telegram_channel_that_cannot_work() {
    let b = CliBench::new(
        "{\n  channels: {\n    telegram: {\n      apiRoot: \"ftp://x\",\n      dmPolicy: \"allowlist\",\n    },\n  },\n}\n",
    );
    let out = b
        .command(&["config", "check"])
        .env_remove("TELEGRAM_BOT_TOKEN")
        .output()
        .expect("config check");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("channels.telegram.botToken") && err.contains("TELEGRAM_BOT_TOKEN"),
        "{err}"
    );
    assert!(err.contains("channels.telegram.apiRoot"), "{err}");

    // A webhook without its secret, a secret Telegram refuses, a path under /hooks/.
    let b = CliBench::new(
        "{ channels: { telegram: { botToken: \"1:x\", webhookUrl: \"https://b.example.com/tg\" } } }",
    );
    let err = stderr(&b.run(&["config", "check"]));
    assert!(
        err.contains("channels.telegram.webhookSecret: missing"),
        "{err}"
    );
    let b = CliBench::new(
        "{ channels: { telegram: { botToken: \"1:x\", webhookUrl: \"https://b.example.com/tg\",\
         webhookSecret: \"has space\", webhookPath: \"/hooks/tg\" } } }",
    );
    let err = stderr(&b.run(&["config", "check"]));
    assert!(
        err.contains("channels.telegram.webhookSecret") && err.contains("A-Z a-z 0-9 _ -"),
        "{err}"
    );
    assert!(err.contains("channels.telegram.webhookPath"), "{err}");
    assert!(
        !err.contains("has space"),
        "a secret is never repeated: {err}"
    );

    let b = CliBench::new(
        "{\n  channels: {\n    telegram: {\n      botToken: \"1:x\",\n      dmPolicy: \"everyone\",\n    },\n  },\n}\n",
    );
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dmPolicy") && err.contains("everyone"),
        "{err}"
    );

    let b = CliBench::new(
        "{\n  channels: {\n    telegram: {\n      botToken: \"1:x\",\n      dmPolicy: \"open\",\n      streamMode: \"partial\",\n    },\n    whatsapp: { enabled: true },\n  },\n}\n",
    );
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "usable: {err}");
    assert!(
        err.contains("channels.telegram.streamMode: warning")
            && err.contains("channels.whatsapp: warning"),
        "{err}"
    );
}

/// `channels.discord` that cannot work is an error naming the key and what to do (no token,
/// an unknown policy, a gateway URL that is not ws(s)://); OpenClaw's older `dm.policy`
/// shape loads; OpenClaw's keys not used here are warnings.
#[test]
fn config_check_explains_a_discord_channel_that_cannot_work() {
    let b = CliBench::new(
        "{\n  channels: {\n    discord: {\n      gatewayUrl: \"https://gateway.discord.gg\",\n      dmPolicy: \"open\",\n    },\n  },\n}\n",
    );
    let out = b
        .command(&["config", "check"])
        .env_remove("DISCORD_BOT_TOKEN")
        .output()
        .expect("config check");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("channels.discord.token") && err.contains("DISCORD_BOT_TOKEN"),
        "{err}"
    );
    assert!(
        err.contains("channels.discord.gatewayUrl") && err.contains("ws(s)://"),
        "{err}"
    );

    for (line, value) in [
        ("groupPolicy: \"everyone\"", "everyone"),
        ("dm: { policy: \"friends\" }", "friends"),
    ] {
        let b = CliBench::new(&format!(
            "{{\n  channels: {{\n    discord: {{\n      token: \"x\",\n      {line},\n    }},\n  }},\n}}\n"
        ));
        let out = b.run(&["config", "check"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{line}: {err}");
        assert!(err.contains(value), "{line}: {err}");
    }

    let b = CliBench::new(
        "{\n  channels: {\n    discord: {\n      token: \"x\",\n      dm: { policy: \"allowlist\", allowFrom: [\"42\"] },\n      guilds: { \"10\": { requireMention: false, slug: \"ops\", channels: { \"100\": { allow: true } } } },\n      historyLimit: 20,\n    },\n  },\n}\n",
    );
    let out = b.run(&["config", "check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "usable: {err}");
    assert!(
        err.contains("channels.discord.historyLimit: warning")
            && err.contains("channels.discord.guilds.10.slug: warning")
            && !err.contains("allowFrom"),
        "{err}"
    );
}
