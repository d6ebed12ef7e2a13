//! Console behaviour through `Console::update` over a real engine (no terminal): reading back
//! through a long transcript, `/spawn` and `/ask` from the composer, a remapped keymap in the
//! help and hint bar, a reload after the event stream lagged, and what the engine does seen
//! through the console (a `/send off` stored, the first session arriving, another process's
//! deletion).

use crate::common;
use crate::common::screen::cells as screen;

use std::sync::Arc;

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use switchboard_engine::inbound::Inbound;
use switchboard_engine::store::SessionInit;
use switchboard_store_sqlite::queries::NewLine;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::{Focus, State};
use switchboard_types::api::{LineRole, SendRequest, Sender, SessionsApi, TranscriptQuery};
use switchboard_types::key::SessionKey;

use common::console_driver::Driver;

const ME: &str = "agent:main:main";

fn config() -> Value {
    json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "session": { "agentToAgent": { "maxPingPongTurns": 0 } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "subagents": { "allowAgents": ["work"] },
              "script": [{ "when": { "step": "subagent" }, "reply": "child did {{text}}" }] },
            { "id": "work", "model": "scripted", "script": [
                { "when": { "step": "message" }, "reply": "work heard {{text}}" },
                { "when": { "step": "announce" }, "reply": "ANNOUNCE_SKIP" },
            ] },
        ] },
    })
}

/// A console on the engine's API, settled (everything it asked for has arrived).
async fn console(bench: &common::Bench) -> (Driver, Arc<dyn SessionsApi>) {
    let mut state = State::new("test".into(), 1_795_353_349_734);
    state.width = 120;
    state.height = 40;
    let api = bench.engine.start();
    let mut d = Driver::new(api.clone(), state);
    d.settle().await;
    (d, api)
}

/// Type `text` into the composer and press Enter.
fn type_text(d: &mut Driver, text: &str) {
    d.intent(Intent::Compose);
    d.type_text(text);
    d.key(KeyCode::Enter);
}

/// Create session `k` holding `lines` (user messages with these texts).
async fn session_with(b: &common::Bench, k: &str, lines: impl IntoIterator<Item = String>) {
    let key = SessionKey::from_canonical(k);
    b.engine
        .store()
        .ensure(&key, SessionInit::default())
        .await
        .unwrap();
    let lines: Vec<NewLine> = lines
        .into_iter()
        .map(|t| {
            NewLine::message(json!({ "role": "user", "content": [{ "type": "text", "text": t }] }))
        })
        .collect();
    if !lines.is_empty() {
        b.engine.store().append(&key, lines).await.unwrap();
    }
}

/// Move the selection down to session `k`.
async fn select(d: &mut Driver, k: &str) {
    d.settle().await;
    let at = d
        .console
        .state
        .sessions
        .rows
        .iter()
        .position(|r| r.key == k)
        .unwrap();
    d.intent(Intent::Top);
    for _ in 0..at {
        d.intent(Intent::Down);
    }
    d.settle().await;
    assert_eq!(d.console.state.sessions.selected_key(), Some(k));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_top_of_a_long_transcript_is_its_first_line_loaded_as_one_page() {
    let b = common::bench(config());
    session_with(&b, ME, (0..1000).map(|n| format!("line {n}"))).await;
    let (mut c, _api) = console(&b).await;
    assert_eq!(
        c.console.state.transcript.lines.len(),
        400,
        "only the newest window at first"
    );
    c.intent(Intent::FocusNext);
    assert_eq!(c.console.state.focus, Focus::Transcript);
    c.intent(Intent::Top);
    c.settle().await;
    // The top loads the oldest page (not everything in between) and shows its first line.
    assert_eq!(
        c.console.state.transcript.lines.len(),
        400,
        "the oldest window, not the whole transcript"
    );
    assert!(!c.console.state.transcript.follow);
    assert!(screen(&c.console.state, &Keymap::defaults()).contains("line 0"));
    c.intent(Intent::Bottom);
    assert!(
        c.console.state.transcript.follow,
        "back at the end, following again"
    );
    c.settle().await;
    assert!(screen(&c.console.state, &Keymap::defaults()).contains("line 999"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_ask_from_the_composer_report_in_the_status_line() {
    let b = common::bench(config());
    for k in [ME, "agent:work:main"] {
        session_with(&b, k, []).await;
    }
    let (mut c, _api) = console(&b).await;
    select(&mut c, ME).await;
    type_text(&mut c, "/spawn tidy the logs");
    let (text, error) = c.report().await;
    assert!(!error, "{text}");
    assert!(
        text.starts_with("sessions_spawn: accepted agent:main:subagent:"),
        "{text}"
    );
    type_text(&mut c, "/ask agent:work:main how are you");
    let (text, error) = c.report().await;
    assert!(!error, "{text}");
    assert_eq!(text, "sessions_send: accepted agent:work:main");
    b.engine.idle().await;
    let work = b
        .engine
        .store()
        .get(&SessionKey::from_canonical("agent:work:main"))
        .await
        .unwrap()
        .unwrap();
    let rows = b
        .engine
        .store()
        .tail(&work.entry.session_id, 10, false)
        .await
        .unwrap();
    assert!(
        rows.iter()
            .any(|r| r.line.to_string().contains("work heard how are you"))
    );
    assert_eq!(
        b.engine
            .spawns_of(&SessionKey::from_canonical(ME))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remapped_key_shows_in_the_help_and_the_hint_bar() {
    let b = common::bench(config());
    let (mut c, _api) = console(&b).await;
    let keymap =
        Keymap::with_overrides(r#"{ "x": "quit", "q": null, "F": "filter", "/": null }"#).unwrap();
    let hints = screen(&c.console.state, &keymap);
    assert!(hints.contains("ctrl+c/x quit"), "{hints}");
    assert!(hints.contains("F filter sessions"), "{hints}");
    c.intent(Intent::Help);
    let help = screen(&c.console.state, &keymap);
    assert!(help.contains("ctrl+c/x quit"), "{help}");
    assert!(!help.contains(" q        quit"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_lag_the_console_reloads_what_it_missed() {
    let b = common::bench(config());
    let (mut c, _api) = console(&b).await;
    assert!(c.console.state.sessions.rows.is_empty());
    b.engine
        .store()
        .ensure(&SessionKey::from_canonical(ME), SessionInit::default())
        .await
        .unwrap();
    // The events were dropped (the console fell behind); Lagged makes it catch up.
    c.act(Action::Lagged);
    c.settle().await;
    assert_eq!(c.console.state.sessions.selected_key(), Some(ME));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_focuses_the_pane_under_it() {
    let b = common::bench(config());
    let (mut c, _api) = console(&b).await;
    c.intent(Intent::ToggleMouse);
    assert!(c.console.state.mouse);
    let r = switchboard_tui::view::regions(c.console.state.width, c.console.state.height);
    for (x, y, focus) in [
        (r.transcript.x + 2, r.transcript.y + 2, Focus::Transcript),
        (r.rounds.x + 2, r.rounds.y + 2, Focus::Rounds),
        (r.composer.x + 2, r.composer.y + 1, Focus::Composer),
        (r.sessions.x + 2, r.sessions.y + 2, Focus::Sessions),
    ] {
        c.act(Action::Click(x, y));
        assert_eq!(c.console.state.focus, focus, "click at {x},{y}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_pane_scrolls_through_thousands_with_a_window() {
    let b = common::bench(config());
    let mut set = tokio::task::JoinSet::new();
    for n in 0..2000 {
        let engine = b.engine.clone();
        set.spawn(async move {
            engine
                .store()
                .ensure(
                    &SessionKey::from_canonical(format!("agent:main:dm-{n:04}")),
                    SessionInit::default(),
                )
                .await
                .unwrap();
        });
    }
    while set.join_next().await.is_some() {}
    let (mut c, _api) = console(&b).await;
    assert_eq!(c.console.state.sessions.session_count(), 2000);
    assert!(
        c.console.state.sessions.rows.len() <= 400,
        "only a window is loaded"
    );
    c.intent(Intent::Bottom);
    c.settle().await;
    assert_eq!(c.console.state.sessions.selected, 1999);
    let oldest = c
        .console
        .state
        .sessions
        .selected_key()
        .expect("a selection")
        .to_string();
    assert!(c.console.state.sessions.offset > 0, "the window moved down");
    // The oldest really is the last one in newest-first order.
    let newest_first = {
        let mut all: Vec<(i64, String)> = Vec::new();
        b.engine
            .store()
            .scan(&Default::default(), |s| {
                all.push((s.updated_at(), s.key.to_string()));
                true
            })
            .await
            .unwrap();
        all
    };
    assert_eq!(
        newest_first.last().map(|r| r.1.clone()),
        Some(oldest.clone())
    );
    let shown = screen(&c.console.state, &Keymap::defaults());
    assert!(shown.contains("Sessions 2000/2000"), "{shown}");
    // Paging up moves through the window and beyond it.
    for _ in 0..20 {
        c.intent(Intent::PageUp);
        c.settle().await;
    }
    assert!(
        c.console.state.sessions.selected < 1999 - 400,
        "{}",
        c.console.state.sessions.selected
    );
    assert!(c.console.state.sessions.selected_key().is_some());
    c.intent(Intent::Top);
    c.settle().await;
    assert_eq!(
        (
            c.console.state.sessions.selected,
            c.console.state.sessions.offset
        ),
        (0, 0)
    );
    assert_eq!(
        c.console.state.sessions.selected_key(),
        Some(newest_first[0].1.as_str())
    );
}

/// Three agents forwarding in a cycle: the send the chain limit stops is an entry of its own
/// in the rounds pane (as the engine recorded it), with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stopped_by_the_chain_limit_shows_in_the_rounds_pane() {
    let forward = |to: &str| {
        json!([{ "when": { "step": "message" },
                 "tools": [{ "name": "sessions_send", "args": { "sessionKey": to, "message": "pass it on", "timeoutSeconds": 0 } }],
                 "reply": "forwarded" }])
    };
    let b = common::bench(json!({
        "session": { "agentToAgent": { "maxPingPongTurns": 0, "maxChainHops": 4 } },
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "a", "default": true, "model": "scripted", "script": forward("agent:b:main") },
            { "id": "b", "model": "scripted", "script": forward("agent:c:main") },
            { "id": "c", "model": "scripted", "script": forward("agent:a:main") },
        ] },
    }));
    let (mut c, api) = console(&b).await;
    c.intent(Intent::ToggleRoundsScope);
    for k in ["agent:b:main", "agent:c:main"] {
        b.engine
            .store()
            .ensure(&SessionKey::from_canonical(k), SessionInit::default())
            .await
            .unwrap();
    }
    api.send(SendRequest {
        key: "agent:a:main".into(),
        text: "start the chain".into(),
        from: Sender::default(),
        idempotency_key: None,
    })
    .await
    .unwrap();
    b.engine.idle().await;
    c.until("the stopped send", |s| {
        s.rounds
            .exchanges
            .entries
            .first()
            .is_some_and(|e| e.kind.as_str() == "chain")
    })
    .await;
    let shown = screen(&c.console.state, &Keymap::defaults());
    assert!(
        shown.contains("agent:b:main → agent:c:main · chain limit"),
        "{shown}"
    );
    assert!(
        shown.contains("✗ 5 sends > session.agentToAgent.maxChainHops 4"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_notices_do_not_hide_the_answer_to_the_owners_action() {
    let b = common::bench(config());
    let (mut c, _api) = console(&b).await;
    c.act(Action::Flash("⚙️ Send policy set to off.".into(), false));
    c.act(Action::Engine(Box::new(
        switchboard_engine::events::EngineEvent::PolicyDecision {
            key: "agent:support:discord:group:random".into(),
            action: "reply".parse().unwrap(),
            allowed: false,
            source: "rule 1".into(),
            requester: None,
        },
    )));
    assert_eq!(
        c.console.state.flash.as_ref().map(|f| f.text.as_str()),
        Some("⚙️ Send policy set to off.")
    );
    // The notice has a line of its own meanwhile, and both are in the log.
    assert!(
        c.console
            .state
            .notice
            .as_ref()
            .is_some_and(|f| f.error && f.text.contains("refused"))
    );
    assert_eq!(c.console.state.notices.len(), 2);
    // Once it has gone, notices still show in their line.
    for _ in 0..6 {
        c.act(Action::Tick);
    }
    c.act(Action::Engine(Box::new(
        switchboard_engine::events::EngineEvent::PolicyDecision {
            key: "agent:support:discord:group:random".into(),
            action: "reply".parse().unwrap(),
            allowed: false,
            source: "rule 1".into(),
            requester: None,
        },
    )));
    assert!(
        c.console
            .state
            .notice
            .as_ref()
            .is_some_and(|f| f.error && f.text.contains("refused"))
    );
}

/// Lines sent one Enter after another reach the transcript in the order they were typed
/// (each Enter used to start its own task, and the tasks raced to the store: L1 L2 L3 L6 L4 L5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_owner_messages_sent_quickly_are_stored_in_the_order_typed() {
    let b = common::bench(config());
    session_with(&b, ME, []).await;
    let (mut c, api) = console(&b).await;
    select(&mut c, ME).await;
    let sent: Vec<String> = (1..=100).map(|i| format!("L{i}")).collect();
    for line in &sent {
        type_text(&mut c, line);
    }
    for _ in &sent {
        let (text, error) = c.report().await;
        assert!(!error, "{text}");
    }
    let page = api
        .transcript(TranscriptQuery {
            key: ME.into(),
            limit: 1000,
            ..TranscriptQuery::default()
        })
        .await
        .unwrap();
    let stored: Vec<String> = page
        .lines
        .iter()
        .filter(|l| l.role == LineRole::User)
        .map(|l| l.text.clone())
        .collect();
    assert_eq!(stored, sent);
    // And the console shows them in that order too.
    c.until("the last line on screen", |s| {
        s.transcript.lines.last().is_some_and(|l| l.text == "L100")
    })
    .await;
    let shown: Vec<&str> = c
        .console
        .state
        .transcript
        .lines
        .iter()
        .filter(|l| l.role == "user")
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(shown, sent);
}

/// The transcript always belongs to the selected session. Clearing a filter one Backspace at
/// a time moved the selection to another session while the pane kept showing the old one's
/// messages (and the composer then wrote to a session the owner was not reading).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clearing_a_filter_never_leaves_another_sessions_transcript_on_screen() {
    let b = common::bench(config());
    let keys: Vec<String> = (0..12)
        .map(|i| format!("agent:main:visitor-88{i:02}"))
        .chain((0..30).map(|i| format!("agent:main:other-{i}")))
        .collect();
    for k in &keys {
        session_with(&b, k, [format!("I am {k}")]).await;
    }
    let (mut c, _api) = console(&b).await;
    let shown_matches_selection = |c: &Driver| {
        let selected = c
            .console
            .state
            .sessions
            .selected_key()
            .unwrap_or("")
            .to_string();
        assert_eq!(
            c.console.state.transcript.key.as_deref(),
            Some(selected.as_str())
        );
        let last = c
            .console
            .state
            .transcript
            .lines
            .last()
            .map(|l| l.text.clone())
            .unwrap_or_default();
        assert_eq!(last, format!("I am {selected}"), "selected {selected}");
    };
    c.intent(Intent::Filter);
    for ch in "visitor-8805".chars() {
        c.key(KeyCode::Char(ch));
        c.settle().await;
    }
    c.key(KeyCode::Enter);
    c.settle().await;
    assert_eq!(
        c.console.state.sessions.selected_key(),
        Some("agent:main:visitor-8805")
    );
    shown_matches_selection(&c);
    c.intent(Intent::Filter);
    while !c.console.state.sessions.filter.is_empty() {
        c.key(KeyCode::Backspace);
        c.settle().await;
        shown_matches_selection(&c);
    }
}

/// A message from Alice on Telegram into `k` (created if new), as `switchboard inject` does.
async fn from_alice(b: &common::Bench, k: &str, text: &str) {
    let from = Inbound {
        channel: Some("telegram".into()),
        chat_type: Some("direct".into()),
        display_name: Some("Alice (Telegram)".into()),
        sender: Some("alice".into()),
        ..Inbound::default()
    };
    let received = b
        .engine
        .receive(&SessionKey::from_canonical(k), text, &from)
        .await
        .expect("receive");
    drop(received);
    b.engine.idle().await;
}

/// The send policy stored in `k`'s entry (`None`: it follows the config).
async fn stored_policy(b: &common::Bench, k: &str) -> Option<String> {
    b.engine
        .store()
        .get(&SessionKey::from_canonical(k))
        .await
        .expect("read")
        .expect("session exists")
        .entry
        .send_policy
}

/// `/send off` from the composer is carried out by the engine: the override is stored and
/// the row shows it; `/send inherit` removes it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_send_off_from_the_console_sets_the_stored_policy() {
    let b = common::bench(config());
    from_alice(&b, ME, "hello").await;
    let (mut c, _api) = console(&b).await;
    select(&mut c, ME).await;
    assert_eq!(stored_policy(&b, ME).await, None);
    type_text(&mut c, "/send off");
    assert_eq!(c.console.state.composer.error, None);
    let (reply, error) = c.report().await;
    assert!(
        !error && reply.contains("Send policy set to off"),
        "{reply}"
    );
    c.until("the override to show", |s| {
        s.sessions
            .rows
            .iter()
            .any(|r| r.key == ME && r.policy.as_str() == "deny" && r.policy_override)
    })
    .await;
    assert_eq!(stored_policy(&b, ME).await.as_deref(), Some("deny"));

    type_text(&mut c, "/send inherit");
    let (reply, error) = c.report().await;
    assert!(!error, "{reply}");
    c.until("the override to go", |s| {
        s.sessions
            .rows
            .iter()
            .any(|r| r.key == ME && r.policy.as_str() == "allow" && !r.policy_override)
    })
    .await;
    assert_eq!(stored_policy(&b, ME).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_session_to_arrive_in_an_empty_console_shows_its_transcript() {
    let b = common::bench(config());
    let (mut c, _api) = console(&b).await;
    assert!(c.console.state.sessions.rows.is_empty());
    from_alice(&b, ME, "hello").await;
    c.until("the session to be listed", |s| !s.sessions.rows.is_empty())
        .await;
    c.settle().await;
    let s = &c.console.state;
    assert_eq!(s.sessions.selected_key(), Some(ME));
    assert!(
        s.transcript.lines.iter().any(|l| l.text == "hello"),
        "the transcript pane shows the selected session's messages:\n{}",
        screen(s, &Keymap::defaults())
    );
    assert!(
        s.sessions.selected_policy.is_some(),
        "the status line shows its policy"
    );
    assert!(
        s.sessions.unread.get(ME).is_none_or(|n| *n == 0),
        "the selected session has no unread count"
    );
}

/// Another process deleted a session: its commit reaches this console as an
/// `ExternalChange` event (there is no polling on ticks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_by_another_process_is_noticed() {
    const OTHER: &str = "agent:work:main";
    let b = common::bench(config());
    from_alice(&b, ME, "hello").await;
    from_alice(&b, OTHER, "disk alert").await;
    let (mut c, _api) = console(&b).await;
    select(&mut c, OTHER).await;
    let config: switchboard_config::Config =
        serde_json::from_value(config()).expect("test config is valid");
    let other = switchboard::state_folder::open_engine(b.engine.state_dir(), config)
        .expect("a second engine on the same folder");
    assert!(
        other.start().delete(OTHER).await.expect("delete"),
        "it was there"
    );
    c.until("the deletion noticed", |s| {
        s.sessions.rows.iter().all(|r| r.key != OTHER)
    })
    .await;
    assert_eq!(c.console.state.sessions.selected_key(), Some(ME));
}
