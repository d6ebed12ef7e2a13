//! The composer as an editor and the slash commands it gained (issue 14 item 4): snapshots of
//! a multi-line draft with the cursor mid-line, completion candidates, the `/status` card and
//! the `/agents` picker at 80×24 and at the 60×16 minimum; then the console driven through
//! `Console::update` over a real engine: cursor and word motions edit the right place and the
//! stored message is what was fixed, Ctrl+C clears a draft and then quits, Tab completes or
//! leaves, `/new` from a console with no session, `/abort` with and without a run, `/status`
//! with parent and children, `/agents` picking an agent, a 1,000-line paste, the draft cap,
//! and a resize during an edit.

use crate::common;
use crate::common::screen::{render, text};

use std::sync::Arc;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::cards::{Card, StatusInfo};
use switchboard_tui::composer::MAX_DRAFT_BYTES;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::{Focus, SessionRow, State};
use switchboard_tui::update::Console;
use switchboard_tui::{map_event, view};
use switchboard_types::api::{
    AgentInfo, KeyPurpose, PolicyView, SendRequest, Sender, SessionDetail, SessionKind,
    SessionRow as ApiRow, SessionsApi, ToolCall, TranscriptQuery,
};

use common::console_driver::Driver;

const NOW: i64 = 1_750_000_000_000;
const ME: &str = "agent:main:main";
const TG1: &str = "agent:main:telegram:direct:1234";
const TG2: &str = "agent:main:telegram:direct:5678";
const DEV: &str = "agent:work:discord:group:dev";

// -------------------------------------------------------------------------------------------
// Drawing
// -------------------------------------------------------------------------------------------

/// Where the terminal's cursor is, relative to the composer's text area (None: hidden).
fn cursor_cell(state: &State) -> Option<(u16, u16)> {
    let keymap = Keymap::defaults();
    let mut t = Terminal::new(TestBackend::new(state.width, state.height)).expect("test terminal");
    t.draw(|f| view::draw(f, state, &keymap)).expect("draw");
    let b = t.backend();
    if !b.cursor_visible() {
        return None;
    }
    let at = b.cursor_position();
    let c = view::regions_for(state).composer;
    Some((at.x - c.x - 1, at.y - c.y - 1))
}

fn row(key: &str, name: &str, kind: SessionKind) -> SessionRow {
    SessionRow {
        key: key.into(),
        source: None,
        kind,
        name: name.into(),
        channel: "telegram".into(),
        updated_at: NOW - 60_000,
        policy: "allow".parse().unwrap(),
        policy_override: false,
        policy_detail: "default (session.sendPolicy.default)".into(),
        policy_words: "allow · default".into(),
        archived: false,
        named: name != key,
        preview: None,
    }
}

/// A console with a few sessions, the main one selected, the composer focused.
fn state(w: u16, h: u16) -> State {
    let mut s = State::new("/srv/switchboard/state".into(), NOW);
    (s.width, s.height) = (w, h);
    s.sessions.rows = vec![
        row(ME, "main", SessionKind::Main),
        row(TG1, "Alice", SessionKind::Other),
        row(TG2, "Bob", SessionKind::Other),
        row(DEV, "#dev", SessionKind::Group),
    ];
    s.sessions.total = 4;
    s.sessions.selected_policy = Some("allow · default".into());
    s.focus = Focus::Composer;
    s
}

fn key(code: KeyCode, m: KeyModifiers) -> Action {
    Action::Key(KeyEvent::new(code, m))
}

fn plain(code: KeyCode) -> Action {
    key(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> Action {
    key(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn alt(c: char) -> Action {
    key(KeyCode::Char(c), KeyModifiers::ALT)
}

fn type_into(c: &mut Console, text: &str) {
    for ch in text.chars() {
        c.update(plain(KeyCode::Char(ch)));
    }
}

#[test]
fn a_multi_line_draft_with_the_cursor_mid_line() {
    for (w, h) in [(80, 24), (60, 16)] {
        let mut c = Console::new(state(w, h));
        type_into(&mut c, "please check teh deploy");
        c.update(key(KeyCode::Enter, KeyModifiers::ALT));
        type_into(&mut c, "and the rollback");
        c.update(ctrl('j'));
        type_into(&mut c, "thanks");
        // Up twice (not history: the cursor is not on the first line), then two words on,
        // to the start of `teh`.
        c.update(plain(KeyCode::Up));
        c.update(plain(KeyCode::Up));
        c.update(ctrl('a'));
        for _ in 0..2 {
            c.update(alt('f'));
        }
        let s = &c.state;
        assert_eq!(s.composer.cursor(), (0, 13), "at `teh`");
        let buf = render(s, w, h);
        let shown = text(&buf);
        assert!(shown.contains("│please check teh deploy"), "{shown}");
        assert!(shown.contains("│and the rollback"), "{shown}");
        assert!(shown.contains("│thanks"), "{shown}");
        assert!(shown.contains("line 1/3"), "{shown}");
        assert_eq!(
            cursor_cell(s),
            Some((13, 0)),
            "the cursor is drawn where it is"
        );
        insta::assert_snapshot!(format!("composer_multi_line_{w}x{h}"), shown);
    }
}

#[test]
fn completion_candidates_show_under_the_box() {
    for (w, h) in [(80, 24), (60, 16)] {
        let mut c = Console::new(state(w, h));
        type_into(&mut c, "/ask tele");
        c.update(plain(KeyCode::Tab));
        let s = &c.state;
        assert_eq!(
            s.composer.text(),
            "/ask agent:main:telegram:direct:",
            "the common start of both keys"
        );
        assert_eq!(s.composer.candidates, vec![TG1, TG2]);
        assert_eq!(s.focus, Focus::Composer, "Tab completed: it stays");
        let shown = text(&render(s, w, h));
        assert!(
            shown.contains("agent:main:telegram:direct:1234  agent:main:"),
            "{shown}"
        );
        insta::assert_snapshot!(format!("composer_candidates_{w}x{h}"), shown);
    }
}

/// Issue 26: a session updated this second read "updated now ago" on the `/status` card;
/// each age is a whole phrase now.
#[test]
fn the_status_card_says_how_long_ago_in_words() {
    for (age, want) in [
        (0, "updated just now"),
        (5_000, "updated 5 s ago"),
        (120_000, "updated 2 min ago"),
    ] {
        let mut d = detail(ME, json!({}));
        d.row.updated_at = NOW - age;
        let info = StatusInfo {
            detail: Some(d),
            children: Vec::new(),
            scanned: 0,
            deliveries: None,
            counts: None,
        };
        let rows = switchboard_tui::cards::status_rows(&info, false, NOW, None);
        let runtime = rows
            .iter()
            .find(|(k, _)| k == "runtime")
            .map(|(_, v)| v.as_str());
        assert_eq!(
            runtime,
            Some(format!("idle · {want}").as_str()),
            "age {age}"
        );
    }
}

fn detail(key: &str, entry: Value) -> SessionDetail {
    SessionDetail {
        row: ApiRow {
            key: key.into(),
            display_key: key.into(),
            kind: SessionKind::Main,
            agent_id: "main".into(),
            channel: "telegram".into(),
            name: "Alice (Telegram)".into(),
            label: None,
            display_name: Some("Alice (Telegram)".into()),
            session_id: "5ef82674".into(),
            updated_at: NOW - 120_000,
            policy: PolicyView {
                policy: "deny".parse().unwrap(),
                source: "override".parse().unwrap(),
                rule: None,
                matched: None,
                detail: "override (set with /send off)".into(),
                summary: "deny, from override".into(),
            },
            running: true,
            archived: false,
            agents_stopped: false,
            entry: None,
            last_message: None,
        },
        entry,
    }
}

#[test]
fn the_status_card() {
    for (w, h) in [(80, 24), (60, 16)] {
        let mut c = Console::new(state(w, h));
        c.state.sessions.running.insert(ME.into());
        type_into(&mut c, "/status");
        let effects = c.update(plain(KeyCode::Enter));
        assert!(
            format!("{effects:?}").contains("LoadStatus"),
            "asks for the session: {effects:?}"
        );
        assert!(matches!(
            c.state.card,
            Some(Card::Status { rows: None, .. })
        ));
        c.update(Action::StatusLoaded {
            key: ME.into(),
            result: Box::new(Ok(StatusInfo {
                detail: Some(detail(
                    ME,
                    json!({ "model": "scripted", "totalTokens": 1234, "contextTokens": 130,
                            "spawnedBy": "agent:main:cron:nightly" }),
                )),
                children: vec!["agent:main:subagent:7f3e".into()],
                scanned: 4,
                deliveries: None,
                counts: None,
            })),
        });
        let shown = text(&render(&c.state, w, h));
        for want in [
            "Status · agent:main:main",
            "scripted (last run)",
            "1234 total · context 130",
            "running now",
            "deny · override",
            "agent:main:cron:nightly",
            "agent:main:subagent:7f3e",
        ] {
            assert!(shown.contains(want), "{want} in\n{shown}");
        }
        insta::assert_snapshot!(format!("status_card_{w}x{h}"), shown);
        c.update(plain(KeyCode::Esc));
        assert_eq!(c.state.card, None, "Esc closes it");
        assert_eq!(c.state.focus, Focus::Composer);
    }
}

#[test]
fn the_agent_picker() {
    for (w, h) in [(80, 24), (60, 16)] {
        let mut c = Console::new(state(w, h));
        type_into(&mut c, "/agents");
        c.update(plain(KeyCode::Enter));
        assert!(matches!(c.state.card, Some(Card::Agents { selected: 0 })));
        c.update(Action::AgentsLoaded(Box::new(Ok(vec![
            AgentInfo {
                id: "main".into(),
                model: "openai/gpt-5-mini".into(),
                is_default: true,
                may_spawn: vec!["work".into()],
                context_tokens: None,
            },
            AgentInfo {
                id: "work".into(),
                model: "scripted".into(),
                is_default: false,
                may_spawn: vec![],
                context_tokens: None,
            },
            AgentInfo {
                id: "ops".into(),
                model: "scripted".into(),
                is_default: false,
                may_spawn: vec!["*".into()],
                context_tokens: None,
            },
        ]))));
        c.update(plain(KeyCode::Down));
        let shown = text(&render(&c.state, w, h));
        for want in [
            "main",
            "openai/gpt-5-mini",
            "default",
            "spawns: itself, work",
            "spawns: any agent",
        ] {
            assert!(shown.contains(want), "{want} in\n{shown}");
        }
        insta::assert_snapshot!(format!("agent_picker_{w}x{h}"), shown);
        c.update(plain(KeyCode::Enter));
        assert_eq!(c.state.card, None);
        assert_eq!(c.state.composer.text(), "/spawn --agent work ");
        assert_eq!(c.state.focus, Focus::Composer);
    }
}

// -------------------------------------------------------------------------------------------
// Keys (no engine needed: the editor is the console's own)
// -------------------------------------------------------------------------------------------

#[test]
fn cursor_and_word_motions_edit_the_right_place() {
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "hello wrld");
    for _ in 0..3 {
        c.update(plain(KeyCode::Left));
    }
    type_into(&mut c, "o");
    assert_eq!(c.state.composer.text(), "hello world");
    c.update(ctrl('a'));
    type_into(&mut c, "> ");
    c.update(plain(KeyCode::End));
    c.update(alt('b'));
    c.update(ctrl('k'));
    assert_eq!(c.state.composer.text(), "> hello ");
    c.update(ctrl('y'));
    assert_eq!(
        c.state.composer.text(),
        "> hello world",
        "yank puts the kill back"
    );
    c.update(key(KeyCode::Left, KeyModifiers::CONTROL));
    c.update(key(KeyCode::Left, KeyModifiers::CONTROL));
    c.update(plain(KeyCode::Delete));
    assert_eq!(
        c.state.composer.text(),
        "> ello world",
        "Delete takes the next character"
    );
    c.update(ctrl('e'));
    c.update(ctrl('w'));
    assert_eq!(c.state.composer.text(), "> ello ");
    c.update(ctrl('u'));
    assert_eq!(
        c.state.composer.text(),
        "",
        "Ctrl+U kills to the line's start"
    );
    c.update(ctrl('_'));
    assert_eq!(c.state.composer.text(), "> ello ", "undo");
    c.update(plain(KeyCode::Home));
    c.update(alt('f'));
    assert_eq!(
        c.state.composer.cursor(),
        (0, 2),
        "Alt+f goes to the next word"
    );
}

#[test]
fn ctrl_c_clears_the_draft_then_quits() {
    let keymap = Keymap::defaults();
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "half a thought");
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    let actions = map_event(Event::Key(ctrl_c), &c.state, &keymap);
    assert!(
        matches!(actions.as_slice(), [Action::Key(_)]),
        "in the composer Ctrl+C is the composer's: {actions:?}"
    );
    for a in actions {
        c.update(a);
    }
    assert!(!c.state.quit, "the first Ctrl+C only clears");
    assert_eq!(c.state.composer.text(), "");
    let flash = c
        .state
        .flash
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default();
    assert!(flash.contains("draft cleared"), "{flash}");
    c.update(ctrl('y'));
    assert_eq!(
        c.state.composer.text(),
        "half a thought",
        "Ctrl+Y brings it back"
    );
    c.update(ctrl('c'));
    assert!(!c.state.quit);
    for a in map_event(Event::Key(ctrl_c), &c.state, &keymap) {
        c.update(a);
    }
    assert!(c.state.quit, "Ctrl+C with an empty draft quits");

    // Outside the composer it quits at once, draft or not; so does `q`.
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "kept");
    c.update(plain(KeyCode::Esc));
    assert_eq!(c.state.focus, Focus::Sessions);
    assert_eq!(
        c.state.composer.text(),
        "kept",
        "Esc leaves with the draft kept"
    );
    let actions = map_event(Event::Key(ctrl_c), &c.state, &keymap);
    assert!(matches!(actions.as_slice(), [Action::Intent(Intent::Quit)]));
    let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    let actions = map_event(Event::Key(q), &c.state, &keymap);
    assert!(matches!(actions.as_slice(), [Action::Intent(Intent::Quit)]));
}

#[test]
fn tab_completes_or_leaves() {
    let keymap = Keymap::defaults();
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "just words");
    let tab = KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE);
    for a in map_event(Event::Key(tab), &c.state, &keymap) {
        c.update(a);
    }
    assert_eq!(
        c.state.focus,
        Focus::Sessions,
        "nothing to complete: Tab leaves"
    );
    assert_eq!(c.state.composer.text(), "just words");

    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "/st");
    c.update(plain(KeyCode::Tab));
    assert_eq!(c.state.composer.text(), "/status ");
    assert_eq!(c.state.focus, Focus::Composer);
    c.state.composer.set_text("/ask disc");
    c.update(plain(KeyCode::Tab));
    assert_eq!(c.state.composer.text(), format!("/ask {DEV} "));
    // The message after the key is text: Tab goes on to the next pane.
    type_into(&mut c, "hi");
    c.update(plain(KeyCode::Tab));
    assert_eq!(c.state.focus, Focus::Sessions);
    // Agent ids after `--agent`, once loaded.
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "/spawn --agent w");
    c.update(Action::AgentsLoaded(Box::new(Ok(vec![AgentInfo {
        id: "work".into(),
        model: "scripted".into(),
        is_default: false,
        may_spawn: vec![],
        context_tokens: None,
    }]))));
    c.update(plain(KeyCode::Tab));
    assert_eq!(c.state.composer.text(), "/spawn --agent work ");
}

#[test]
fn history_only_from_the_first_or_last_line() {
    let mut c = Console::new(state(80, 24));
    c.state.composer.history.push("older message".into());
    type_into(&mut c, "line one");
    c.update(key(KeyCode::Enter, KeyModifiers::ALT));
    type_into(&mut c, "line two");
    c.update(plain(KeyCode::Up));
    assert_eq!(c.state.composer.cursor().0, 0, "Up moved to the first line");
    assert_eq!(c.state.composer.text(), "line one\nline two");
    c.update(plain(KeyCode::Up));
    assert_eq!(
        c.state.composer.text(),
        "older message",
        "from the first line: history"
    );
}

#[test]
fn unknown_commands_list_every_command() {
    let mut c = Console::new(state(80, 24));
    type_into(&mut c, "/frobnicate");
    c.update(plain(KeyCode::Enter));
    let err = c.state.composer.error.clone().unwrap_or_default();
    for cmd in [
        "/send", "/spawn", "/ask", "/status", "/abort", "/agents", "/new", "/help",
    ] {
        assert!(err.contains(cmd), "{cmd} in {err}");
    }
    assert_eq!(c.state.composer.text(), "/frobnicate", "the draft is kept");
}

#[test]
fn a_thousand_line_paste_goes_in_whole_and_too_much_is_refused() {
    let mut c = Console::new(state(80, 24));
    c.update(plain(KeyCode::Esc));
    let paste: String = (1..=1000).map(|i| format!("line {i}\r\n")).collect();
    c.update(Action::Paste(paste.clone()));
    let s = &c.state;
    assert_eq!(s.focus, Focus::Composer);
    assert_eq!(s.composer.text(), paste.replace("\r\n", "\n"));
    assert_eq!(s.composer.lines().len(), 1001);
    let shown = text(&render(s, 80, 24));
    assert!(shown.contains("line 1001/1001"), "{shown}");
    assert!(
        shown.contains("│line 1000"),
        "the end, where the cursor is: {shown}"
    );

    // More than the cap: refused, said, draft kept.
    let before = c.state.composer.text();
    c.update(Action::Paste("x".repeat(MAX_DRAFT_BYTES)));
    let err = c.state.composer.error.clone().unwrap_or_default();
    assert!(err.contains("1024 KiB"), "{err}");
    assert_eq!(c.state.composer.text(), before);
    let shown = text(&render(&c.state, 80, 24));
    assert!(shown.contains("✗ Not inserted"), "{shown}");
}

#[test]
fn a_resize_during_an_edit_keeps_draft_and_cursor() {
    let mut c = Console::new(state(120, 40));
    type_into(&mut c, "first\nsecond line");
    c.update(plain(KeyCode::Up));
    c.update(plain(KeyCode::End));
    let before = (c.state.composer.text(), c.state.composer.cursor());
    c.update(Action::Resize(60, 16));
    assert_eq!((c.state.composer.text(), c.state.composer.cursor()), before);
    assert_eq!(cursor_cell(&c.state), Some((5, 0)));
    c.update(Action::Resize(10, 5));
    let small = text(&render(&c.state, 10, 5));
    assert!(small.contains("too small"), "{small}");
    c.update(Action::Resize(80, 24));
    assert_eq!((c.state.composer.text(), c.state.composer.cursor()), before);
}

#[test]
fn the_box_grows_to_six_lines_and_the_panes_give_room() {
    let mut s = state(80, 24);
    let one = view::regions_for(&s);
    s.composer.set_text("1\n2\n3\n4\n5\n6\n7\n8");
    let grown = view::regions_for(&s);
    assert_eq!(one.composer.height, 3);
    assert_eq!(grown.composer.height, 8, "six lines and the border");
    assert_eq!(
        grown.sessions.height + 5,
        one.sessions.height,
        "the panes above gave the room"
    );
    let mut s = state(60, 16);
    s.composer.set_text("1\n2\n3\n4\n5\n6\n7\n8");
    let r = view::regions_for(&s);
    assert!(
        r.sessions.height >= 6,
        "the panes keep their minimum: {r:?}"
    );
    assert_eq!(r.hints.y, 15);
}

// -------------------------------------------------------------------------------------------
// Over a real engine
// -------------------------------------------------------------------------------------------

fn config() -> Value {
    json!({
        "tools": { "sessions": { "visibility": "all" }, "agentToAgent": { "enabled": true } },
        "agents": { "list": [
            { "id": "main", "default": true, "model": "scripted", "subagents": { "allowAgents": ["work"] },
              "script": [
                { "when": { "step": "message", "text": "slow" }, "reply": "finally", "delayMs": 300000 },
                { "when": { "step": "subagent" }, "reply": "child did {{text}}" },
                { "when": { "step": "message" }, "reply": "ok: {{text}}" },
              ] },
            { "id": "work", "model": "scripted" },
        ] },
    })
}

async fn console(bench: &common::Bench) -> (Driver, Arc<dyn SessionsApi>) {
    let mut state = State::new("test".into(), NOW);
    (state.width, state.height) = (120, 40);
    let api = bench.engine.start();
    let mut d = Driver::new(api.clone(), state);
    d.settle().await;
    (d, api)
}

fn type_keys(d: &mut Driver, text: &str) {
    d.intent(Intent::Compose);
    d.type_text(text);
}

/// The status line's message once it starts with `start` (the answers to the owner's own
/// commands are shown there directly, not reported as background flashes).
async fn flash_starting(d: &mut Driver, start: &str) -> (String, bool) {
    d.until(&format!("a message starting {start}"), |s| {
        s.flash.as_ref().is_some_and(|f| f.text.starts_with(start))
    })
    .await;
    let f = d.console.state.flash.clone().expect("waited for it");
    (f.text, f.error)
}

async fn transcript(api: &Arc<dyn SessionsApi>, key: &str) -> Vec<String> {
    let page = api
        .transcript(TranscriptQuery {
            key: key.into(),
            limit: 100,
            ..TranscriptQuery::default()
        })
        .await
        .expect("transcript");
    page.lines.into_iter().map(|l| l.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_multi_line_message_is_stored_as_fixed() {
    let b = common::bench(config());
    let (mut d, api) = console(&b).await;
    type_keys(&mut d, "/new main first");
    d.key(KeyCode::Enter);
    d.until("main selected", |s| s.sessions.selected_key() == Some(ME))
        .await;
    d.intent(Intent::Compose);
    d.type_text("the deploy is fixde");
    d.act(key(KeyCode::Enter, KeyModifiers::ALT));
    d.type_text("thanks");
    d.act(plain(KeyCode::Up));
    d.act(plain(KeyCode::End));
    d.act(plain(KeyCode::Backspace));
    d.act(plain(KeyCode::Backspace));
    d.type_text("ed");
    d.key(KeyCode::Enter);
    d.until("the message in the pane", |s| {
        s.transcript
            .lines
            .iter()
            .any(|l| l.text == "the deploy is fixed\nthanks")
    })
    .await;
    let stored = transcript(&api, ME).await;
    assert!(
        stored.iter().any(|t| t == "the deploy is fixed\nthanks"),
        "{stored:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_starts_a_session_from_an_empty_console() {
    let b = common::bench(config());
    let (mut d, api) = console(&b).await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        None,
        "nothing to select yet"
    );
    // Without /new a message has nowhere to go.
    type_keys(&mut d, "hello?");
    d.key(KeyCode::Enter);
    let err = d.console.state.composer.error.clone().unwrap_or_default();
    assert!(err.contains("/new"), "{err}");
    d.console.state.composer.set_text("");

    let tg = api
        .resolve_key("telegram:direct:42", KeyPurpose::Inbound)
        .await
        .expect("resolves")
        .key;
    d.type_text("/new telegram:direct:42 hi there");
    d.key(KeyCode::Enter);
    d.until("the new session selected", |s| {
        s.sessions.selected_key() == Some(tg.as_str())
    })
    .await;
    d.until("its first message", |s| {
        s.transcript.lines.iter().any(|l| l.text == "hi there")
    })
    .await;

    // `/new <key>` alone: the next message starts it.
    let later = api
        .resolve_key("later", KeyPurpose::Inbound)
        .await
        .expect("resolves")
        .key;
    d.intent(Intent::Compose);
    d.type_text("/new later");
    d.key(KeyCode::Enter);
    d.until("the composer writing to it", |s| {
        s.composer.target.as_deref() == Some(later.as_str())
    })
    .await;
    let (flash, _) = flash_starting(&mut d, "agent:").await;
    assert!(flash.contains("is new"), "{flash}");
    d.type_text("first words");
    d.key(KeyCode::Enter);
    d.until("the started session selected", |s| {
        s.sessions.selected_key() == Some(later.as_str()) && s.composer.target.is_none()
    })
    .await;
    // The session can be listed (and so selected) a moment before its first message's commit
    // lands: wait for the message, bounded, rather than read once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !transcript(&api, &later)
        .await
        .contains(&"first words".to_string())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first message never reached the new session"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_says_what_it_stopped() {
    let b = common::bench(config());
    let (mut d, api) = console(&b).await;
    type_keys(&mut d, "/new main hello");
    d.key(KeyCode::Enter);
    d.until("main selected and idle", |s| {
        s.sessions.selected_key() == Some(ME) && !s.sessions.running.contains(ME)
    })
    .await;
    d.intent(Intent::Compose);
    d.type_text("/abort");
    d.key(KeyCode::Enter);
    let (flash, error) = flash_starting(&mut d, "/abort").await;
    assert!(!error);
    assert_eq!(flash, format!("/abort: nothing running in {ME}"));
    d.console.state.flash = None;

    api.send(SendRequest {
        key: ME.into(),
        text: "slow".into(),
        from: Sender::owner(),
        idempotency_key: None,
    })
    .await
    .expect("sent");
    d.until("the slow run going", |s| s.sessions.running.contains(ME))
        .await;
    d.type_text("/abort");
    d.key(KeyCode::Enter);
    let (flash, error) = flash_starting(&mut d, "/abort").await;
    assert!(!error, "{flash}");
    assert!(
        flash.starts_with(&format!("/abort: stopped 1 run in {ME}")),
        "{flash}"
    );
    d.until("the run ended", |s| !s.sessions.running.contains(ME))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_parent_and_children_and_agents_pick() {
    let b = common::bench(config());
    let (mut d, api) = console(&b).await;
    type_keys(&mut d, "/new main hello");
    d.key(KeyCode::Enter);
    d.until("main selected", |s| s.sessions.selected_key() == Some(ME))
        .await;
    let spawned = api
        .call_tool(ToolCall {
            tool: "sessions_spawn".into(),
            params: json!({ "task": "count" }),
            requester: ME.into(),
            sandboxed: false,
        })
        .await
        .expect("spawned");
    let child = spawned.result["childSessionKey"]
        .as_str()
        .expect("a child key")
        .to_string();
    d.intent(Intent::Compose);
    d.type_text("/status");
    d.key(KeyCode::Enter);
    d.until("the card", |s| {
        matches!(&s.card, Some(Card::Status { rows: Some(_), .. }))
    })
    .await;
    let shown = text(&render(&d.console.state, 120, 40));
    assert!(shown.contains(&child), "the child listed:\n{shown}");
    assert!(
        shown.contains("allow · "),
        "the policy and its source:\n{shown}"
    );
    d.key(KeyCode::Esc);
    d.intent(Intent::Compose);
    d.type_text(&format!("/status {child}"));
    d.key(KeyCode::Enter);
    d.until(
        "the child's card",
        |s| matches!(&s.card, Some(Card::Status { rows: Some(_), key }) if *key == child),
    )
    .await;
    let Some(Card::Status {
        rows: Some(rows), ..
    }) = &d.console.state.card
    else {
        unreachable!("waited for it");
    };
    let parent = rows
        .iter()
        .find(|(l, _)| l == "parent")
        .map(|(_, v)| v.clone());
    assert_eq!(parent.as_deref(), Some(ME), "{rows:?}");
    d.key(KeyCode::Esc);

    d.intent(Intent::Compose);
    d.type_text("/agents");
    d.key(KeyCode::Enter);
    d.until("the agents", |s| s.agents.is_some()).await;
    let shown = text(&render(&d.console.state, 120, 40));
    assert!(
        shown.contains("spawns: itself, work"),
        "main's allowAgents:\n{shown}"
    );
    d.key(KeyCode::Down);
    d.key(KeyCode::Enter);
    assert_eq!(d.console.state.composer.text(), "/spawn --agent work ");
    d.type_text("summarise");
    d.key(KeyCode::Enter);
    let (flash, error) = loop {
        let r = d.report().await;
        if r.0.starts_with("sessions_spawn") {
            break r;
        }
    };
    assert!(!error, "{flash}");
    assert!(
        flash.contains("agent:work:subagent:"),
        "spawned under work: {flash}"
    );
}

// -------------------------------------------------------------------------------------------
// Any input
// -------------------------------------------------------------------------------------------

mod any_input {
    use super::*;
    use proptest::prelude::*;

    fn any_key() -> impl Strategy<Value = Action> {
        let codes = prop_oneof![
            any::<char>().prop_map(KeyCode::Char),
            prop::sample::select(vec![
                'a', ' ', '/', ':', '\n', '\r', '\t', '\u{1b}', 'é', '界', '🇩'
            ])
            .prop_map(KeyCode::Char),
            prop::sample::select(vec![
                KeyCode::Left,
                KeyCode::Right,
                KeyCode::Up,
                KeyCode::Down,
                KeyCode::Home,
                KeyCode::End,
                KeyCode::Backspace,
                KeyCode::Delete,
                KeyCode::Tab,
                KeyCode::Enter,
                KeyCode::PageUp,
                KeyCode::PageDown,
            ]),
        ];
        let mods = prop::sample::select(vec![
            KeyModifiers::NONE,
            KeyModifiers::CONTROL,
            KeyModifiers::ALT,
            KeyModifiers::SHIFT,
            KeyModifiers::CONTROL | KeyModifiers::ALT,
        ]);
        prop_oneof![
            8 => (codes, mods).prop_map(|(c, m)| key(c, m)),
            1 => "[a-z/:\\n\\r\\t\u{1b}\u{202e}界 ]{0,40}".prop_map(Action::Paste),
            1 => (60u16..130, 16u16..45).prop_map(|(w, h)| Action::Resize(w, h)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Whatever is typed or pasted, the console neither panics nor leaves the cursor
        /// outside the draft, and every frame draws (the console never sends from these:
        /// Enter's effects are only collected).
        #[test]
        fn the_composer_survives_any_keys(actions in prop::collection::vec(any_key(), 1..60)) {
            let mut c = Console::new(state(80, 24));
            for a in actions {
                if c.state.quit || c.state.focus != Focus::Composer {
                    c.state.quit = false;
                    c.state.card = None;
                    c.state.help = false;
                    c.state.focus = Focus::Composer;
                }
                c.update(a);
                let s = &c.state;
                let (row, col) = s.composer.cursor();
                prop_assert!(row < s.composer.lines().len());
                prop_assert!(col <= s.composer.lines()[row].chars().count());
                prop_assert!(s.composer.lines().iter().all(|l| !l.contains('\n')));
                let (w, h) = (s.width, s.height);
                let _ = render(s, w, h);
            }
        }
    }
}

#[test]
fn the_terminal_cursor_shows_only_while_writing_and_nothing_covers_the_box() {
    let mut c = Console::new(state(120, 40));
    type_into(&mut c, "hello");
    assert_eq!(cursor_cell(&c.state), Some((5, 0)));
    c.update(Action::Intent(Intent::Help));
    assert_eq!(cursor_cell(&c.state), None, "the help covers the composer");
    c.update(Action::Intent(Intent::Help));
    assert_eq!(cursor_cell(&c.state), Some((5, 0)));
    c.update(plain(KeyCode::Esc));
    assert_eq!(cursor_cell(&c.state), None, "not writing: no cursor");
}

/// A message the gateway did not take (its link is down) comes back to the draft with why
/// beside it, and Enter sends it again once the link is back. Before, the draft was cleared
/// at Enter and the message was gone but for a line in the status bar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_gives_the_draft_back_and_enter_sends_it_again() {
    use crate::common::fake_api::FakeApi;
    use switchboard_types::api::ApiError;
    let api = Arc::new(FakeApi::with_sessions(2, 1));
    let key = api.data.lock().expect("fake").rows[0].key.clone();
    let mut state = State::new("test".into(), NOW);
    (state.width, state.height) = (120, 40);
    let mut d = Driver::new(api.clone(), state);
    d.settle().await;
    assert_eq!(d.console.state.sessions.selected_key(), Some(key.as_str()));
    api.fail_sends(Some(ApiError::Unavailable(
        "the gateway is unreachable (reconnecting)".into(),
    )));
    type_keys(&mut d, "the deploy is fixed");
    d.key(KeyCode::Enter);
    d.until("the draft is back", |s| s.composer.error.is_some())
        .await;
    let c = &d.console.state.composer;
    assert_eq!(c.text(), "the deploy is fixed");
    let why = c.error.clone().unwrap_or_default();
    assert!(
        why.contains("Not sent") && why.contains("unreachable"),
        "{why}"
    );
    let shown = text(&render(&d.console.state, 120, 40));
    assert!(shown.contains("Not sent to"), "{shown}");
    assert!(api.data.lock().expect("fake").sent.is_empty());

    // The link is back: Enter sends the same text, and the draft empties.
    api.fail_sends(None);
    d.key(KeyCode::Enter);
    d.until("sent", |s| s.composer.text().is_empty()).await;
    d.settle().await;
    let sent: Vec<String> = api
        .data
        .lock()
        .expect("fake")
        .sent
        .iter()
        .map(|r| r.text.clone())
        .collect();
    assert_eq!(sent, ["the deploy is fixed"]);
    assert!(d.console.state.composer.error.is_none());

    // A failure that comes back after the owner started another message leaves that one
    // alone; the unsent one is in the draft history.
    type_keys(&mut d, "next one");
    d.act(Action::Unsent {
        key: key.clone(),
        text: "lost?".into(),
        error: "the gateway is unreachable".into(),
    });
    assert_eq!(d.console.state.composer.text(), "next one");
    assert_eq!(
        d.console.state.composer.history.last().map(String::as_str),
        Some("lost?")
    );
}

/// The console opens on the session it is told to (the demo's liveliest), once the list has
/// it; a key the owner presses before then keeps the selection where the owner put it (a
/// draft begun on one session is never carried to another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_opens_on_its_session_unless_the_owner_moved_first() {
    use crate::common::fake_api::FakeApi;
    let api = Arc::new(FakeApi::with_sessions(5, 1));
    let wanted = api.data.lock().expect("fake").rows[3].key.clone();
    let open = |api: Arc<FakeApi>| {
        let mut state = State::new("test".into(), NOW);
        (state.width, state.height) = (120, 40);
        let mut d = Driver::new(api, state);
        d.console.open_on(wanted.clone());
        d
    };
    let mut d = open(api.clone());
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some(wanted.as_str())
    );

    let mut d = open(api.clone());
    d.intent(Intent::Compose);
    d.type_text("half a thought");
    d.settle().await;
    assert_ne!(
        d.console.state.sessions.selected_key(),
        Some(wanted.as_str())
    );
    assert_eq!(d.console.state.composer.text(), "half a thought");
}

/// The owner's answer to `/send off` stays in the status line when the engine's event for
/// the same change arrives after it; the event is a notice in its own line. Before, the
/// event's flash replaced the answer when it came second (an e2e test saw it 1 time in 5).
#[test]
fn the_owners_answer_stays_when_the_policy_event_comes_after_it() {
    use switchboard_tui::action::Action;
    use switchboard_tui::update::Console;
    use switchboard_types::api::{EngineEvent, PolicySetting};
    let mut c = Console::new(switchboard_tui::state::State::new("x".into(), 0));
    let _ = c.update(Action::Flash("Send policy set to off.".into(), false));
    let _ = c.update(Action::Engine(Box::new(EngineEvent::PolicyChanged {
        key: "agent:main:main".into(),
        policy: PolicySetting::Deny,
        by: "/send".into(),
    })));
    let flash = c.state.flash.clone().expect("the answer");
    assert_eq!(flash.text, "Send policy set to off.");
    let notice = c.state.notice.clone().expect("the event's notice");
    assert!(notice.text.contains("set to deny (by /send)"), "{notice:?}");
}
