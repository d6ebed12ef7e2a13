//! Session keys as users meet them through the tools: the `main`/`current`/`global`/`unknown`
//! aliases, `session.mainKey` and `session.scope`, kinds and the `kinds` filter, the row's
//! `channel`, plus property tests that key handling never panics and is stable.

use proptest::prelude::*;
use serde_json::{Value, json};
use switchboard_config::Config;
use switchboard_engine::Engine;
use switchboard_engine::inbound::Inbound;
use switchboard_engine::store::SessionInit;
use switchboard_engine::tools::ToolContext;
use switchboard_types::key::{
    self, KeyScheme, SessionKey, SessionKind, chat_type_of, classify_input, group_channel_of,
    normalize_agent_id,
};
use tempfile::TempDir;

const ME: &str = "agent:main:main";

struct Bench {
    engine: Engine,
    _dir: TempDir,
}

fn config(v: Value) -> Config {
    serde_json::from_value(v).expect("test config is valid")
}

fn bench(cfg: Value) -> Bench {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = crate::common::open_engine(dir.path(), config(cfg)).expect("engine opens");
    Bench { engine, _dir: dir }
}

/// Visibility `all` plus agent-to-agent (and `extra` sections), so listing hides nothing
/// but reserved rows.
fn open_config(extra: Value) -> Value {
    let mut v = json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } }
    });
    if let (Some(base), Some(more)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in more {
            base.insert(k.clone(), val.clone());
        }
    }
    v
}

fn key(raw: &str) -> SessionKey {
    SessionKey::from_canonical(raw)
}

impl Bench {
    async fn ensure(&self, k: &str, init: SessionInit) {
        self.engine
            .store()
            .ensure(&key(k), init)
            .await
            .expect("ensure");
    }

    async fn session(&self, k: &str) {
        self.ensure(k, SessionInit::default()).await;
    }

    async fn inbound(&self, k: &str, channel: &str, chat_type: Option<&str>) {
        let from = Inbound {
            channel: Some(channel.into()),
            chat_type: chat_type.map(str::to_string),
            sender: Some("u1".into()),
            ..Inbound::default()
        };
        self.engine
            .record_inbound(&key(k), "hi", &from)
            .await
            .expect("inbound");
    }

    async fn call(&self, tool: &str, requester: &str, params: Value) -> Value {
        let ctx = ToolContext::new(key(requester), false);
        self.engine
            .call_tool(tool, &params, &ctx)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
    }

    async fn list_as(&self, requester: &str, params: Value) -> Value {
        self.call("sessions_list", requester, params).await
    }

    /// The key a `sessions_history` call resolved `input` to (or its error).
    async fn resolve_as(&self, requester: &str, input: &str) -> String {
        let h = self
            .call(
                "sessions_history",
                requester,
                json!({ "sessionKey": input }),
            )
            .await;
        match h["sessionKey"].as_str() {
            Some(k) if h.get("status").is_none() => k.to_string(),
            _ => format!("{}: {}", h["status"], h["error"]),
        }
    }
}

/// `(key, field)` for every row, checking `count`.
fn rows(list: &Value, field: &str) -> Vec<(String, String)> {
    let rows = list["sessions"].as_array().expect("sessions array");
    assert_eq!(list["count"], json!(rows.len()));
    let mut out: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r[field].as_str().unwrap_or("<absent>").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn row_keys(list: &Value) -> Vec<String> {
    rows(list, "key").into_iter().map(|(k, _)| k).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// main / current / mainKey
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn main_means_the_requester_agents_main_session() {
    let b = bench(open_config(json!({})));
    b.session(ME).await;
    b.session("agent:ops:main").await;
    b.session("agent:ops:work").await;
    assert_eq!(
        b.resolve_as("agent:ops:work", "main").await,
        "agent:ops:main"
    );
    assert_eq!(b.resolve_as(ME, "main").await, ME);
    assert_eq!(
        b.resolve_as("agent:ops:work", "MAIN").await,
        "agent:ops:main"
    );
    // A canonical main key is shown as itself, not as `main`.
    let list = b
        .list_as("agent:ops:work", json!({ "kinds": ["main"] }))
        .await;
    assert_eq!(
        rows(&list, "kind"),
        pairs(&[("agent:main:main", "main"), ("agent:ops:main", "main")])
    );
}

#[tokio::test]
async fn requester_key_main_is_the_default_agents_main() {
    let b = bench(json!({}));
    assert_eq!(b.engine.requester_key("main").unwrap().as_str(), ME);
    assert_eq!(
        b.engine.requester_key("agent:Ops:Main").unwrap().as_str(),
        "agent:ops:main"
    );
    let ops_default = bench(json!({
        "agents": { "list": [{ "id": "main" }, { "id": "Ops", "default": true }] }
    }));
    assert_eq!(
        ops_default.engine.requester_key("main").unwrap().as_str(),
        "agent:ops:main"
    );
    assert!(b.engine.requester_key("   ").is_err());
}

#[tokio::test]
async fn custom_main_key_is_honoured() {
    let b = bench(open_config(json!({ "session": { "mainKey": "Home" } })));
    b.session("agent:ops:home").await;
    b.session("agent:ops:work").await;
    b.session("agent:main:home").await;
    assert_eq!(
        b.resolve_as("agent:ops:work", "main").await,
        "agent:ops:home"
    );
    assert_eq!(
        b.resolve_as("agent:ops:work", "home").await,
        "agent:ops:home"
    );
    assert_eq!(
        b.resolve_as("agent:ops:work", "agent:ops:main").await,
        "agent:ops:home",
        "the literal main rest is an alias of the main key"
    );
    assert_eq!(
        b.engine.requester_key("main").unwrap().as_str(),
        "agent:main:home"
    );
    let list = b
        .list_as("agent:ops:work", json!({ "kinds": ["main"] }))
        .await;
    assert_eq!(
        rows(&list, "kind"),
        pairs(&[("agent:main:home", "main"), ("agent:ops:home", "main")])
    );
}

#[tokio::test]
async fn changing_main_key_reclassifies_stored_sessions() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine =
            crate::common::open_engine(dir.path(), config(open_config(json!({})))).unwrap();
        let store = engine.store();
        for k in [ME, "agent:main:home"] {
            store.ensure(&key(k), SessionInit::default()).await.unwrap();
        }
    }
    let engine = crate::common::open_engine(
        dir.path(),
        config(open_config(json!({ "session": { "mainKey": "home" } }))),
    )
    .unwrap();
    let ctx = ToolContext::new(key("agent:main:home"), false);
    let list = engine
        .call_tool("sessions_list", &json!({ "kinds": ["main"] }), &ctx)
        .await
        .unwrap();
    assert_eq!(row_keys(&list), ["agent:main:home"]);
}

#[tokio::test]
async fn current_means_the_requester() {
    let b = bench(json!({}));
    b.session(ME).await;
    b.session("agent:main:work").await;
    assert_eq!(
        b.resolve_as("agent:main:work", "current").await,
        "agent:main:work"
    );
    assert_eq!(b.resolve_as(ME, "Current").await, ME);
}

#[tokio::test]
async fn bare_keys_belong_to_the_default_agent() {
    let b = bench(open_config(json!({})));
    b.session("agent:main:cron:nightly").await;
    b.session(ME).await;
    assert_eq!(
        b.resolve_as("agent:ops:main", "cron:nightly").await,
        "agent:main:cron:nightly"
    );
    assert_eq!(
        b.resolve_as(ME, "Agent:Main:Cron:Nightly").await,
        "agent:main:cron:nightly"
    );
}

// ---------------------------------------------------------------------------------------------
// global / unknown
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn global_scope_shows_the_shared_session_as_main() {
    for visibility in ["tree", "agent", "all"] {
        let b = bench(json!({
            "session": { "scope": "global" },
            "tools": { "sessions": { "visibility": visibility }, "agentToAgent": { "enabled": true } },
        }));
        let me = b.engine.requester_key("main").unwrap();
        assert_eq!(me.as_str(), "global");
        b.session("global").await;
        b.session("unknown").await;
        b.engine
            .store()
            .append_message(&me, json!({ "role": "user", "content": "shared" }))
            .await
            .unwrap();

        let list = b.list_as("global", json!({})).await;
        assert_eq!(
            rows(&list, "kind"),
            pairs(&[("main", "main")]),
            "{visibility}"
        );
        assert!(
            !list.to_string().contains("\"global\""),
            "{visibility}: {list}"
        );
        let mains = b.list_as("global", json!({ "kinds": ["main"] })).await;
        assert_eq!(row_keys(&mains), ["main"]);

        for input in ["main", "global", "current"] {
            let h = b
                .call("sessions_history", "global", json!({ "sessionKey": input }))
                .await;
            assert_eq!(h["sessionKey"], "main", "{visibility} {input}: {h}");
            assert_eq!(h["messages"][0]["content"], "shared");
        }
    }
}

#[tokio::test]
async fn per_sender_scope_never_lists_global_or_unknown() {
    let b = bench(open_config(json!({})));
    b.session(ME).await;
    b.session("global").await;
    b.session("unknown").await;
    for params in [json!({}), json!({ "kinds": ["main", "other"] })] {
        let list = b.list_as(ME, params).await;
        assert_eq!(row_keys(&list), [ME]);
    }
}

#[tokio::test]
async fn unknown_is_never_listed_under_global_scope_either() {
    let b = bench(json!({
        "session": { "scope": "global" },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
    }));
    b.session("global").await;
    b.session("unknown").await;
    b.session("agent:main:work").await;
    let list = b.list_as("global", json!({})).await;
    assert_eq!(row_keys(&list), ["agent:main:work", "main"]);
}

// ---------------------------------------------------------------------------------------------
// kinds and the kinds filter
// ---------------------------------------------------------------------------------------------

/// One session of every kind, with the kind each must report.
const KINDS: &[(&str, &str)] = &[
    ("agent:main:main", "main"),
    ("agent:main:discord:group:123", "group"),
    ("agent:main:slack:channel:c1", "group"),
    ("agent:main:dm-7", "group"), // by the entry's chatType
    ("agent:main:cron:nightly", "cron"),
    ("agent:main:hook:5f0c", "hook"),
    ("agent:main:node-7", "node"),
    ("agent:main:node:8", "node"),
    ("agent:main:subagent:abc", "other"),
    ("agent:main:dashboard:xyz", "other"),
];

async fn every_kind() -> Bench {
    let b = bench(open_config(json!({})));
    for (k, _) in KINDS {
        let init = SessionInit {
            chat_type: (*k == "agent:main:dm-7").then(|| "group".to_string()),
            ..SessionInit::default()
        };
        b.ensure(k, init).await;
    }
    b
}

#[tokio::test]
async fn canonical_keys_classify_by_their_rest() {
    let b = every_kind().await;
    let list = b.list_as(ME, json!({})).await;
    assert_eq!(rows(&list, "kind"), pairs(KINDS));
}

#[tokio::test]
async fn kinds_filter_selects_each_kind() {
    let b = every_kind().await;
    for kind in ["main", "group", "cron", "hook", "node", "other"] {
        let list = b.list_as(ME, json!({ "kinds": [kind] })).await;
        let want: Vec<(&str, &str)> = KINDS.iter().copied().filter(|(_, k)| *k == kind).collect();
        assert_eq!(rows(&list, "kind"), pairs(&want), "kinds [{kind}]");
    }
}

#[tokio::test]
async fn kinds_filter_is_lenient() {
    let b = every_kind().await;
    let of = |kinds: &[&str]| -> Vec<(String, String)> {
        pairs(
            &KINDS
                .iter()
                .copied()
                .filter(|(_, k)| kinds.contains(k))
                .collect::<Vec<_>>(),
        )
    };
    let list = b.list_as(ME, json!({ "kinds": ["GROUP", " Cron "] })).await;
    assert_eq!(
        rows(&list, "kind"),
        of(&["group", "cron"]),
        "case-insensitive"
    );
    let list = b.list_as(ME, json!({ "kinds": ["hook", "bogus"] })).await;
    assert_eq!(rows(&list, "kind"), of(&["hook"]), "unknown names ignored");
    let list = b.list_as(ME, json!({ "kinds": ["bogus", "direct"] })).await;
    assert_eq!(rows(&list, "kind"), pairs(KINDS), "all unknown: no filter");
    let list = b.list_as(ME, json!({ "kinds": [] })).await;
    assert_eq!(rows(&list, "kind"), pairs(KINDS), "empty: no filter");
}

// ---------------------------------------------------------------------------------------------
// The channel field
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn channel_field_rules() {
    let b = bench(open_config(json!({})));
    // Groups: the channel recorded on the entry, even after traffic from elsewhere.
    b.inbound("agent:main:discord:group:1", "discord", None)
        .await;
    b.inbound("agent:main:discord:group:1", "telegram", None)
        .await;
    // A group by chatType with no channel hint in its key.
    b.inbound("agent:main:team-room", "slack", Some("group"))
        .await;
    // Direct chats: the last channel.
    b.inbound(ME, "telegram", Some("direct")).await;
    b.inbound(ME, "whatsapp", Some("direct")).await;
    // Cron/hook/node: internal, whatever channel they were created with.
    for k in [
        "agent:main:cron:daily",
        "agent:main:hook:h1",
        "agent:main:node-n1",
    ] {
        b.inbound(k, "discord", None).await;
    }
    // Nothing known: unknown.
    b.session("agent:main:subagent:s1").await;
    b.ensure(
        "agent:main:quiet-room",
        SessionInit {
            chat_type: Some("group".into()),
            ..SessionInit::default()
        },
    )
    .await;

    let list = b.list_as(ME, json!({})).await;
    assert_eq!(
        rows(&list, "channel"),
        pairs(&[
            ("agent:main:discord:group:1", "discord"),
            ("agent:main:team-room", "slack"),
            (ME, "whatsapp"),
            ("agent:main:cron:daily", "internal"),
            ("agent:main:hook:h1", "internal"),
            ("agent:main:node-n1", "internal"),
            ("agent:main:subagent:s1", "unknown"),
            ("agent:main:quiet-room", "unknown"),
        ])
    );
    // The route the group's last message came by is still reported, as lastChannel.
    assert_eq!(
        rows(&list, "lastChannel")
            .into_iter()
            .find(|(k, _)| k == "agent:main:discord:group:1")
            .unwrap()
            .1,
        "telegram"
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn schemes() -> impl Strategy<Value = KeyScheme> {
    ("[a-z0-9_-]{1,12}", any::<bool>(), "[a-z0-9_-]{1,12}").prop_map(
        |(main_key, global_scope, default_agent)| KeyScheme {
            main_key,
            global_scope,
            default_agent,
        },
    )
}

/// Strings that look like keys often enough to reach every branch.
fn key_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "(agent)?:{0,2}[A-Za-z0-9 _!-]{0,8}(:{1,2}[A-Za-z0-9 _.-]{0,8}){0,4}",
        "(main|MAIN|global|unknown|current|home| main )",
        "(cron|hook|node|acp):[a-z0-9]{0,6}",
        "[a-z]{1,6}:(group|channel|direct|dm|thread):[a-z0-9]{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn key_handling_never_panics(raw in key_like(), agent in any::<String>(), scheme in schemes()) {
        let id = normalize_agent_id(&agent);
        prop_assert!(!id.is_empty() && id.len() <= 64, "{id:?}");
        prop_assert!(id.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-'), "{id:?}");
        prop_assert!(!id.starts_with('-') && !id.ends_with('-'), "{id:?}");
        let _ = classify_input(&raw);
        let _ = key::looks_like_session_id(&raw);
        let _ = group_channel_of(&raw);
        let _ = chat_type_of(&raw);
        let k = SessionKey::from_canonical(raw.clone());
        let _ = k.agent_parts();
        let _ = k.subagent_depth();
        let _ = scheme.kind(&k, Some("group"));
        let _ = scheme.kind(&k, None);
        let _ = scheme.display(&k);
        let _ = scheme.canonicalize(&raw, &agent);
    }

    #[test]
    fn canonicalize_is_idempotent(raw in key_like(), agent in any::<String>(), other in any::<String>(), scheme in schemes()) {
        if let Ok(once) = scheme.canonicalize(&raw, &agent) {
            let twice = scheme.canonicalize(once.as_str(), &other);
            prop_assert_eq!(Ok(&once), twice.as_ref(), "raw {:?}", raw);
            // Canonical keys are lowercase and either reserved or agent-scoped.
            prop_assert_eq!(once.as_str(), once.as_str().to_ascii_lowercase());
            prop_assert!(
                once.is_global() || once.is_unknown() || once.agent_parts().is_some(),
                "{:?}", once
            );
            // Their kind does not depend on how they were written.
            prop_assert_eq!(scheme.kind(&once, None), scheme.kind(&twice.unwrap(), None));
        }
    }

    #[test]
    fn agent_ids_normalise_idempotently(raw in any::<String>()) {
        let once = normalize_agent_id(&raw);
        prop_assert_eq!(normalize_agent_id(&once), once.clone());
        prop_assert!(once.len() <= 64);
    }

    #[test]
    fn kind_names_parse_case_insensitively(kind in prop::sample::select(SessionKind::ALL.to_vec()), upper in any::<bool>()) {
        let name = if upper { kind.as_str().to_uppercase() } else { kind.as_str().to_string() };
        prop_assert_eq!(SessionKind::parse(&name), Some(kind));
    }
}

#[tokio::test]
async fn bare_key_with_leading_colon_canonicalizes_to_a_fixed_point() {
    let b = bench(open_config(json!({})));
    b.session(ME).await;
    // What `switchboard inject :notes …` / `--as :notes` do with a stray colon.
    let created = b.engine.requester_key(":notes").unwrap();
    b.engine
        .store()
        .ensure(&created, SessionInit::default())
        .await
        .unwrap();
    let list = b.list_as(ME, json!({ "kinds": ["other"] })).await;
    let shown = row_keys(&list).pop().unwrap();
    assert_eq!(
        b.resolve_as(ME, &shown).await,
        shown,
        "the listed key reads back"
    );

    let scheme = KeyScheme::default();
    assert_eq!(
        scheme.canonicalize(":notes", "main").unwrap().as_str(),
        "agent:main:notes"
    );
    assert!(
        scheme.canonicalize(":", "main").is_err(),
        "nothing left to name"
    );
}
