//! Send-policy evaluation (reference §6.2): every rule form, rule order, the default, the
//! per-session override, and where each decision says it came from. Configs are written as
//! JSON5 text and loaded by the crate's own parser, so aliases (`surface`, `dm`) go through
//! the same path as a user's file.

use serde_json::json;
use switchboard_config::{Config, parse_str};
use switchboard_engine::policy::{PolicyDecision, PolicySource, SendPolicy, evaluate};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::SessionKey;

fn config(src: &str) -> Config {
    match parse_str(src) {
        Ok(c) => c,
        Err(problems) => panic!("config did not parse: {problems:?}"),
    }
}

/// A config with only `session.sendPolicy` set to `policy` (JSON5 text).
fn with_policy(policy: &str) -> Config {
    config(&format!("{{ session: {{ sendPolicy: {policy} }} }}"))
}

fn key(s: &str) -> SessionKey {
    SessionKey::from_canonical(s)
}

fn entry() -> SessionEntry {
    SessionEntry::new(0)
}

fn entry_with(f: impl FnOnce(&mut SessionEntry)) -> SessionEntry {
    let mut e = entry();
    f(&mut e);
    e
}

fn rule(index: usize, description: &str) -> PolicySource {
    PolicySource::Rule {
        index,
        description: description.to_string(),
    }
}

#[track_caller]
fn assert_decision(got: PolicyDecision, policy: SendPolicy, source: PolicySource) {
    assert_eq!(got, PolicyDecision { policy, source });
}

const DISCORD_GROUPS_DENIED: &str = "{ rules: [ { match: { channel: 'discord', chatType: 'group' }, action: 'deny' } ], default: 'allow' }";

#[test]
fn no_config_allows_everything() {
    let c = Config::default();
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Allow,
        PolicySource::Unconfigured,
    );
}

#[test]
fn channel_rule_uses_entry_then_last_channel_then_key() {
    let c = with_policy("{ rules: [ { match: { channel: 'discord' }, action: 'deny' } ] }");
    let deny = || rule(1, "channel=discord");
    // From the entry's channel (any case).
    let e = entry_with(|e| e.channel = Some("Discord".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &e),
        SendPolicy::Deny,
        deny(),
    );
    // From lastChannel when the entry has no channel.
    let e = entry_with(|e| e.last_channel = Some("discord".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &e),
        SendPolicy::Deny,
        deny(),
    );
    // The entry's channel comes first: a telegram entry on a discord-looking key is telegram.
    let e = entry_with(|e| {
        e.channel = Some("telegram".into());
        e.last_channel = Some("discord".into());
    });
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Allow,
        PolicySource::Default,
    );
    // An empty channel is no channel: the key decides.
    let e = entry_with(|e| e.channel = Some("  ".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:channel:7"), &e),
        SendPolicy::Deny,
        deny(),
    );
    // Derived from the key's `<chan>:group|channel:<id>` shape only.
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Deny,
        deny(),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn surface_is_channel() {
    let c = with_policy(
        "{ rules: [ { match: { surface: 'discord', chatType: 'group' }, action: 'deny' } ] }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Deny,
        rule(1, "channel=discord chatType=group"),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:slack:group:1"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn chat_type_rule() {
    let c = with_policy(DISCORD_GROUPS_DENIED);
    let deny = || rule(1, "channel=discord chatType=group");
    // From the entry.
    let e = entry_with(|e| {
        e.channel = Some("discord".into());
        e.chat_type = Some("group".into());
    });
    assert_decision(
        evaluate(&c, &key("agent:main:dm-7"), &e),
        SendPolicy::Deny,
        deny(),
    );
    // The entry says direct: the group-looking key does not override it.
    let e = entry_with(|e| e.chat_type = Some("direct".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Allow,
        PolicySource::Default,
    );
    // Derived from the key when the entry has none (or an unknown word).
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Deny,
        deny(),
    );
    let e = entry_with(|e| e.chat_type = Some("supergroup".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Deny,
        deny(),
    );
    // A discord channel is not a group.
    assert_decision(
        evaluate(&c, &key("agent:main:discord:channel:1"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn dm_is_direct_in_rules_entries_and_keys() {
    let c = with_policy("{ rules: [ { match: { chatType: 'dm' }, action: 'deny' } ] }");
    let deny = || rule(1, "chatType=direct");
    let e = entry_with(|e| e.chat_type = Some("direct".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &e),
        SendPolicy::Deny,
        deny(),
    );
    let e = entry_with(|e| e.chat_type = Some("DM".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &e),
        SendPolicy::Deny,
        deny(),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:telegram:dm:42"), &entry()),
        SendPolicy::Deny,
        deny(),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:telegram:direct:42"), &entry()),
        SendPolicy::Deny,
        deny(),
    );
    let c = with_policy("{ rules: [ { match: { chatType: 'direct' }, action: 'deny' } ] }");
    let e = entry_with(|e| e.chat_type = Some("dm".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &e),
        SendPolicy::Deny,
        rule(1, "chatType=direct"),
    );
    // No chat type known at all: a chatType rule cannot match.
    assert_decision(
        evaluate(&c, &key("agent:main:x"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn key_prefix_matches_raw_or_stripped_key() {
    let c = with_policy(
        "{ rules: [ { match: { keyPrefix: 'cron:' }, action: 'deny' }, { match: { keyPrefix: 'agent:ops:' }, action: 'deny' } ] }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:cron:nightly"), &entry()),
        SendPolicy::Deny,
        rule(1, "keyPrefix=cron:"),
    );
    assert_decision(
        evaluate(&c, &key("agent:ops:main"), &entry()),
        SendPolicy::Deny,
        rule(2, "keyPrefix=agent:ops:"),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:hook:cron:x"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn raw_key_prefix_matches_the_raw_key_only() {
    let c = with_policy(
        "{ rules: [ { match: { rawKeyPrefix: 'cron:' }, action: 'deny' }, { match: { rawKeyPrefix: 'agent:main:hook:' }, action: 'deny' } ] }",
    );
    // The stripped form `cron:` must NOT match a raw-key prefix.
    assert_decision(
        evaluate(&c, &key("agent:main:cron:nightly"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
    assert_decision(
        evaluate(&c, &key("agent:main:hook:gmail"), &entry()),
        SendPolicy::Deny,
        rule(2, "rawKeyPrefix=agent:main:hook:"),
    );
    assert_decision(
        evaluate(&c, &key("agent:ops:hook:gmail"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn every_given_field_must_match() {
    let c = with_policy(
        "{ rules: [ { match: { channel: 'discord', keyPrefix: 'discord:group:9' }, action: 'deny' } ] }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:99"), &entry()),
        SendPolicy::Deny,
        rule(1, "channel=discord keyPrefix=discord:group:9"),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
}

#[test]
fn first_matching_deny_wins_over_an_earlier_allow() {
    let c = with_policy(
        "{ rules: [ { match: { channel: 'discord' }, action: 'allow' }, { match: { chatType: 'group' }, action: 'deny' }, { match: { keyPrefix: 'discord:' }, action: 'deny' } ], default: 'allow' }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &entry()),
        SendPolicy::Deny,
        rule(2, "chatType=group"),
    );
}

#[test]
fn a_matching_allow_is_remembered_over_the_default() {
    let c = with_policy(
        "{ rules: [ { match: { channel: 'slack' }, action: 'deny' }, { match: { channel: 'telegram' }, action: 'allow' }, { match: {}, action: 'allow' } ], default: 'deny' }",
    );
    // Two allows match; the first is reported.
    let e = entry_with(|e| e.channel = Some("telegram".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &e),
        SendPolicy::Allow,
        rule(2, "channel=telegram"),
    );
    // An empty match matches every session.
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &entry()),
        SendPolicy::Allow,
        rule(3, "any session"),
    );
    let e = entry_with(|e| e.channel = Some("slack".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &e),
        SendPolicy::Deny,
        rule(1, "channel=slack"),
    );
}

#[test]
fn default_deny_and_missing_default() {
    let c = with_policy(
        "{ rules: [ { match: { channel: 'webchat' }, action: 'allow' } ], default: 'deny' }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &entry()),
        SendPolicy::Deny,
        PolicySource::Default,
    );
    let e = entry_with(|e| e.last_channel = Some("webchat".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &e),
        SendPolicy::Allow,
        rule(1, "channel=webchat"),
    );
    // A sendPolicy with no default and no matching rule allows.
    let c = with_policy("{ rules: [] }");
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &entry()),
        SendPolicy::Allow,
        PolicySource::Default,
    );
    let c = with_policy("{ default: 'deny' }");
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &entry()),
        SendPolicy::Deny,
        PolicySource::Default,
    );
}

#[test]
fn override_beats_rules_and_default() {
    let c = with_policy(DISCORD_GROUPS_DENIED);
    let e = entry_with(|e| e.send_policy = Some("allow".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Allow,
        PolicySource::Override,
    );
    let e = entry_with(|e| e.send_policy = Some("deny".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:main"), &e),
        SendPolicy::Deny,
        PolicySource::Override,
    );
    // Also without any config, and whatever the case of the stored value.
    let e = entry_with(|e| e.send_policy = Some(" Deny ".into()));
    assert_decision(
        evaluate(&Config::default(), &key("agent:main:main"), &e),
        SendPolicy::Deny,
        PolicySource::Override,
    );
    // A value that is neither allow nor deny is no override.
    let e = entry_with(|e| e.send_policy = Some("off".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Deny,
        rule(1, "channel=discord chatType=group"),
    );
}

#[test]
fn matching_is_case_insensitive() {
    let c = with_policy(
        "{ rules: [ { match: { channel: ' DisCord ', keyPrefix: 'Agent:Main:DISCORD:' }, action: 'deny' } ] }",
    );
    let e = entry_with(|e| e.channel = Some("DISCORD".into()));
    assert_decision(
        evaluate(&c, &key("agent:main:discord:group:1"), &e),
        SendPolicy::Deny,
        rule(1, "channel=discord keyPrefix=agent:main:discord:"),
    );
    // Keys read back from an import may not be lowercase; they still match.
    assert_decision(
        evaluate(&c, &key("agent:main:Discord:Group:1"), &entry()),
        SendPolicy::Deny,
        rule(1, "channel=discord keyPrefix=agent:main:discord:"),
    );
}

#[test]
fn reserved_keys_compare_whole() {
    let c = with_policy("{ rules: [ { match: { keyPrefix: 'glob' }, action: 'deny' } ] }");
    assert_decision(
        evaluate(&c, &key("global"), &entry()),
        SendPolicy::Deny,
        rule(1, "keyPrefix=glob"),
    );
}

#[test]
fn legacy_key_shapes_give_a_chat_type() {
    let c = with_policy(
        "{ rules: [ { match: { chatType: 'group' }, action: 'deny' }, { match: { chatType: 'channel' }, action: 'deny' } ] }",
    );
    assert_decision(
        evaluate(&c, &key("agent:main:12036-3025@g.us"), &entry()),
        SendPolicy::Deny,
        rule(1, "chatType=group"),
    );
    assert_decision(
        evaluate(&c, &key("agent:main:discord:guild-1:channel-2"), &entry()),
        SendPolicy::Deny,
        rule(2, "chatType=channel"),
    );
}

#[test]
fn decisions_explain_themselves() {
    let c = with_policy(DISCORD_GROUPS_DENIED);
    let d = evaluate(&c, &key("agent:main:discord:group:1"), &entry());
    assert_eq!(
        d.source.to_string(),
        "rule 1 (channel=discord chatType=group)"
    );
    assert_eq!(
        d.to_string(),
        "deny, from rule 1 (channel=discord chatType=group)"
    );
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({
            "policy": "deny",
            "source": "rule",
            "rule": 1,
            "match": "channel=discord chatType=group",
            "detail": "rule 1 (channel=discord chatType=group)"
        })
    );

    let e = entry_with(|e| e.send_policy = Some("deny".into()));
    let d = evaluate(&c, &key("agent:main:main"), &e);
    assert_eq!(d.to_string(), "deny, from override (set on this session)");
    assert!(d.is_override());
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"policy": "deny", "source": "override", "detail": "override (set on this session)"})
    );

    let d = evaluate(&c, &key("agent:main:main"), &entry());
    assert_eq!(
        d.to_string(),
        "allow, from default (session.sendPolicy.default)"
    );
    assert_eq!(d.to_json()["source"], "default");

    let d = evaluate(&Config::default(), &key("agent:main:main"), &entry());
    assert_eq!(d.to_string(), "allow, no session.sendPolicy configured");
    assert_eq!(
        d.to_json(),
        json!({"policy": "allow", "source": "unconfigured", "detail": "no session.sendPolicy configured"})
    );
}
