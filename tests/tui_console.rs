//! Console behaviour through `Console::update` over a real engine (no terminal): reading back
//! through a long transcript, `/spawn` and `/ask` from the composer, a remapped keymap in the
//! help and hint bar, and a reload after the event stream lagged.

mod common;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use switchboard::engine::key::SessionKey;
use switchboard::engine::storage::queries::NewLine;
use switchboard::engine::store::SessionInit;
use switchboard::tui::action::{Action, Intent};
use switchboard::tui::keymap::Keymap;
use switchboard::tui::state::{Focus, State};
use switchboard::tui::update::Console;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

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

fn console(bench: &common::Bench) -> (Console, UnboundedReceiver<Action>) {
    let (tx, rx) = unbounded_channel();
    let mut state = State::new("test".into(), 1_795_353_349_734);
    state.width = 120;
    state.height = 40;
    (Console::new(bench.engine.clone(), state, tx), rx)
}

fn screen(state: &State, keymap: &Keymap) -> String {
    let mut t = Terminal::new(TestBackend::new(state.width, state.height)).unwrap();
    t.draw(|f| switchboard::tui::view::draw(f, state, keymap))
        .unwrap();
    let buf = t.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn type_text(c: &mut Console, text: &str) {
    c.update(Action::Intent(Intent::Compose));
    for ch in text.chars() {
        c.update(Action::Key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char(ch),
            crossterm::event::KeyModifiers::NONE,
        )));
    }
    c.update(Action::Key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Enter,
        crossterm::event::KeyModifiers::NONE,
    )));
}

/// Wait for the background task's report (a status-line flash) and apply it.
async fn report(c: &mut Console, rx: &mut UnboundedReceiver<Action>) -> (String, bool) {
    let a = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
        .await
        .expect("a report")
        .expect("the channel is open");
    let out = match &a {
        Action::Flash(t, e) => (t.clone(), *e),
        other => panic!("unexpected {other:?}"),
    };
    c.update(a);
    out
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
fn select(c: &mut Console, k: &str) {
    let at = c.state.sessions.iter().position(|r| r.key == k).unwrap();
    for _ in 0..at {
        c.update(Action::Intent(Intent::Down));
    }
    assert_eq!(c.state.selected_key(), Some(k));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_to_the_top_of_a_long_transcript_loads_older_lines() {
    let b = common::bench(config());
    session_with(&b, ME, (0..1000).map(|n| format!("line {n}"))).await;
    let (mut c, _rx) = console(&b);
    assert_eq!(
        c.state.transcript.len(),
        400,
        "only the newest window at first"
    );
    c.update(Action::Intent(Intent::FocusNext));
    assert_eq!(c.state.focus, Focus::Transcript);
    c.update(Action::Intent(Intent::Top));
    c.refresh();
    assert_eq!(c.state.transcript.len(), 1000, "the top loads the rest");
    assert!(!c.state.follow);
    assert!(screen(&c.state, &Keymap::defaults()).contains("line 0"));
    c.update(Action::Intent(Intent::Bottom));
    assert!(c.state.follow, "back at the end, following again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_ask_from_the_composer_report_in_the_status_line() {
    let b = common::bench(config());
    for k in [ME, "agent:work:main"] {
        session_with(&b, k, []).await;
    }
    let (mut c, mut rx) = console(&b);
    select(&mut c, ME);
    type_text(&mut c, "/spawn tidy the logs");
    let (text, error) = report(&mut c, &mut rx).await;
    assert!(!error, "{text}");
    assert!(
        text.starts_with("sessions_spawn: accepted agent:main:subagent:"),
        "{text}"
    );
    type_text(&mut c, "/ask agent:work:main how are you");
    let (text, error) = report(&mut c, &mut rx).await;
    assert!(!error, "{text}");
    assert_eq!(text, "sessions_send: accepted agent:work:main");
    b.engine.idle().await;
    let work = b
        .engine
        .store()
        .get(&SessionKey::from_canonical("agent:work:main"))
        .unwrap()
        .unwrap();
    let rows = b
        .engine
        .store()
        .tail(&work.entry.session_id, 10, false)
        .unwrap();
    assert!(
        rows.iter()
            .any(|r| r.line.to_string().contains("work heard how are you"))
    );
    assert_eq!(
        b.engine
            .spawns_of(&SessionKey::from_canonical(ME))
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remapped_key_shows_in_the_help_and_the_hint_bar() {
    let b = common::bench(config());
    let (mut c, _rx) = console(&b);
    let keymap =
        Keymap::with_overrides(r#"{ "x": "quit", "q": null, "F": "filter", "/": null }"#).unwrap();
    let hints = screen(&c.state, &keymap);
    assert!(hints.contains("ctrl+c/x quit"), "{hints}");
    assert!(hints.contains("F filter sessions"), "{hints}");
    c.update(Action::Intent(Intent::Help));
    let help = screen(&c.state, &keymap);
    assert!(help.contains("ctrl+c/x   quit"), "{help}");
    assert!(!help.contains("q          quit"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_lag_the_console_reloads_what_it_missed() {
    let b = common::bench(config());
    let (mut c, _rx) = console(&b);
    assert!(c.state.sessions.is_empty());
    b.engine
        .store()
        .ensure(&SessionKey::from_canonical(ME), SessionInit::default())
        .await
        .unwrap();
    // The events were dropped (the console fell behind); Lagged makes it catch up.
    c.update(Action::Lagged);
    c.refresh();
    assert_eq!(c.state.selected_key(), Some(ME));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_focuses_the_pane_under_it() {
    let b = common::bench(config());
    let (mut c, _rx) = console(&b);
    c.update(Action::Intent(Intent::ToggleMouse));
    assert!(c.state.mouse);
    let r = switchboard::tui::view::regions(c.state.width, c.state.height);
    for (x, y, focus) in [
        (r.transcript.x + 2, r.transcript.y + 2, Focus::Transcript),
        (r.rounds.x + 2, r.rounds.y + 2, Focus::Rounds),
        (r.composer.x + 2, r.composer.y + 1, Focus::Composer),
        (r.sessions.x + 2, r.sessions.y + 2, Focus::Sessions),
    ] {
        c.update(Action::Click(x, y));
        assert_eq!(c.state.focus, focus, "click at {x},{y}");
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
    let (mut c, _rx) = console(&b);
    assert_eq!(c.state.session_count(), 2000);
    assert!(c.state.sessions.len() <= 400, "only a window is loaded");
    c.update(Action::Intent(Intent::Bottom));
    c.refresh();
    assert_eq!(c.state.selected, 1999);
    let oldest = c.state.selected_key().expect("a selection").to_string();
    assert!(c.state.sessions_offset > 0, "the window moved down");
    // The oldest really is the last one in newest-first order.
    let newest_first = {
        let mut all: Vec<(i64, String)> = Vec::new();
        b.engine
            .store()
            .scan(&Default::default(), |s| {
                all.push((s.updated_at(), s.key.to_string()));
                true
            })
            .unwrap();
        all
    };
    assert_eq!(
        newest_first.last().map(|r| r.1.clone()),
        Some(oldest.clone())
    );
    let shown = screen(&c.state, &Keymap::defaults());
    assert!(shown.contains("Sessions 2000/2000"), "{shown}");
    // Paging up moves through the window and beyond it.
    for _ in 0..20 {
        c.update(Action::Intent(Intent::PageUp));
        c.refresh();
    }
    assert!(c.state.selected < 1999 - 400, "{}", c.state.selected);
    assert!(c.state.selected_key().is_some());
    c.update(Action::Intent(Intent::Top));
    c.refresh();
    assert_eq!((c.state.selected, c.state.sessions_offset), (0, 0));
    assert_eq!(c.state.selected_key(), Some(newest_first[0].1.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stopped_by_the_chain_limit_shows_in_the_rounds_pane() {
    let b = common::bench(config());
    let (mut c, _rx) = console(&b);
    c.update(Action::Intent(Intent::ToggleRoundsScope));
    c.update(Action::Engine(Box::new(
        switchboard::engine::events::EngineEvent::ChainStopped {
            chain_id: "c1".into(),
            hops: 13,
            max_hops: 12,
            requester: "agent:b:main".into(),
            target: "agent:c:main".into(),
        },
    )));
    let shown = screen(&c.state, &Keymap::defaults());
    assert!(shown.contains("agent:b:main → agent:c:main"), "{shown}");
    assert!(shown.contains("not sent: chain limit reached"), "{shown}");
    assert!(shown.contains("maxChainHops 12"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_notices_do_not_hide_the_answer_to_the_owners_action() {
    let b = common::bench(config());
    let (mut c, _rx) = console(&b);
    c.update(Action::Flash("⚙️ Send policy set to off.".into(), false));
    c.update(Action::Engine(Box::new(
        switchboard::engine::events::EngineEvent::PolicyDecision {
            key: "agent:support:discord:group:random".into(),
            action: "reply".into(),
            allowed: false,
            source: "rule 1".into(),
        },
    )));
    assert_eq!(
        c.state.flash.as_ref().map(|f| f.text.as_str()),
        Some("⚙️ Send policy set to off.")
    );
    // Once it has gone, notices show again.
    for _ in 0..6 {
        c.update(Action::Tick);
    }
    c.update(Action::Engine(Box::new(
        switchboard::engine::events::EngineEvent::PolicyDecision {
            key: "agent:support:discord:group:random".into(),
            action: "reply".into(),
            allowed: false,
            source: "rule 1".into(),
        },
    )));
    assert!(
        c.state
            .flash
            .as_ref()
            .is_some_and(|f| f.error && f.text.contains("refused"))
    );
}

/// Lines sent one Enter after another reach the transcript in the order they were typed
/// (each Enter used to start its own task, and the tasks raced to the store: L1 L2 L3 L6 L4 L5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_messages_sent_quickly_are_stored_in_the_order_typed() {
    let b = common::bench(config());
    let key = SessionKey::from_canonical(ME);
    session_with(&b, ME, []).await;
    let (mut c, mut rx) = console(&b);
    select(&mut c, ME);
    let sent: Vec<String> = (1..=24).map(|i| format!("L{i}")).collect();
    for line in &sent {
        type_text(&mut c, line);
    }
    for _ in &sent {
        let (text, error) = report(&mut c, &mut rx).await;
        assert!(!error, "{text}");
    }
    b.engine.idle().await;
    let session = b.engine.store().get(&key).unwrap().unwrap();
    let lines = b
        .engine
        .store()
        .tail(&session.entry.session_id, 1000, true)
        .unwrap();
    let stored: Vec<String> = lines
        .iter()
        .filter(|r| r.line["message"]["role"] == "user")
        .map(|r| {
            r.line["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(stored, sent);
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
    let (mut c, _rx) = console(&b);
    let shown_matches_selection = |c: &Console| {
        let selected = c.state.selected_key().unwrap_or("").to_string();
        let last = c
            .state
            .transcript
            .last()
            .map(|l| l.text.clone())
            .unwrap_or_default();
        assert_eq!(last, format!("I am {selected}"), "selected {selected}");
    };
    let key = |c: &mut Console, code: crossterm::event::KeyCode| {
        c.update(Action::Key(crossterm::event::KeyEvent::new(
            code,
            crossterm::event::KeyModifiers::NONE,
        )));
        c.refresh();
    };
    c.update(Action::Intent(Intent::Filter));
    for ch in "visitor-8805".chars() {
        key(&mut c, crossterm::event::KeyCode::Char(ch));
    }
    key(&mut c, crossterm::event::KeyCode::Enter);
    assert_eq!(c.state.selected_key(), Some("agent:main:visitor-8805"));
    shown_matches_selection(&c);
    c.update(Action::Intent(Intent::Filter));
    while !c.state.filter.is_empty() {
        key(&mut c, crossterm::event::KeyCode::Backspace);
        shown_matches_selection(&c);
    }
}
