//! Zoom and navigation, copy and search (issue 26 items 4 and 5): `z` zooms the focused pane
//! over the whole body and back; `1` `2` `3` focus the panes and Tab cycles them without
//! landing in the composer; the `:` command line takes every key, completes with Tab, runs
//! the console's views and the session commands, and says so when a command is unknown; the
//! help names the transcript's search; a search hit selects its message so `y` copies it,
//! and `y` copies the line the pane marks, never a hidden tool call.
//!
//! Keys go through `map_event` with the default keymap, as the app loop sends them; pictures
//! are insta snapshots of `view::draw` on a `TestBackend`. Hand-built states, fixed clock.

use crate::common::screen::{render, text};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use switchboard_tui::action::Action;
use switchboard_tui::effects::Effect;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::{Focus, Pane, SessionRow, State, TranscriptLine};
use switchboard_tui::update::Console;
use switchboard_tui::view;
use switchboard_types::api::SessionKind;

use crate::common::fake_api;
use crate::tui_transcript::tline;

const NOW: i64 = 1_750_000_000_000;
const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:slack:group:incidents";

/// A user line, a tool call with its result, the agent's reply, then `more` exchanges of
/// chat: enough to fill a zoomed pane.
fn lines(more: i64) -> Vec<TranscriptLine> {
    let mut l = vec![
        tline(1, "user", "alice", "please check the deploy"),
        tline(
            2,
            "tool",
            "agent",
            "sessions_send({\"sessionKey\":\"agent:ops:main\",\"message\":\"status?\"})",
        ),
        tline(3, "result", "sessions_send", "{\"status\":\"ok\"}"),
        tline(4, "assistant", "agent", "The deploy is green."),
    ];
    for i in 0..more {
        let seq = 5 + 2 * i;
        l.push(tline(seq, "user", "alice", &format!("question {i}")));
        l.push(tline(seq + 1, "assistant", "agent", &format!("answer {i}")));
    }
    l
}

/// Two sessions (`MAIN` selected, its `lines` loaded) on a `w`×`h` screen.
fn console(w: u16, h: u16, lines: Vec<TranscriptLine>) -> Console {
    let mut s = State::new("/srv/switchboard/state".into(), NOW);
    s.width = w;
    s.height = h;
    s.sessions.rows = vec![
        SessionRow::from_api(&fake_api::row(MAIN, "main", SessionKind::Main, NOW)),
        SessionRow::from_api(&fake_api::row(OPS, "#incidents", SessionKind::Group, NOW)),
    ];
    s.sessions.total = 2;
    s.sessions.matching = 2;
    s.transcript.total = lines.last().map(|l| l.seq).unwrap_or(0);
    s.transcript.lines = lines;
    s.transcript.key = Some(MAIN.into());
    let mut c = Console::new(s);
    // What the first batch works out (the policy slot), the sessions page answered.
    sessions_asked(&mut c);
    c
}

/// The console's loads worked out (as after each batch), each sessions page it asks for
/// answered with the two rows at once; the queries asked.
fn sessions_asked(c: &mut Console) -> Vec<switchboard_types::api::SessionsQuery> {
    let mut asked = Vec::new();
    for e in c.refresh() {
        if let Effect::LoadSessions { generation, query } = e {
            let page = switchboard_types::api::SessionsPage {
                rows: vec![
                    fake_api::row(MAIN, "main", SessionKind::Main, NOW),
                    fake_api::row(OPS, "#incidents", SessionKind::Group, NOW),
                ],
                offset: 0,
                matching: Some(2),
                total: 2,
                order: Default::default(),
            };
            c.update(Action::SessionsLoaded {
                generation,
                result: Box::new(Ok(page)),
            });
            asked.push(query);
        }
    }
    asked
}

/// A key as the terminal sends it, mapped by the default keymap and handled; the effects.
fn press_with(c: &mut Console, code: KeyCode, modifiers: KeyModifiers) -> Vec<Effect> {
    let keymap = Keymap::defaults();
    let actions = switchboard_tui::map_event(
        Event::Key(KeyEvent::new(code, modifiers)),
        &c.state,
        &keymap,
    );
    actions.into_iter().flat_map(|a| c.update(a)).collect()
}

fn press(c: &mut Console, code: KeyCode) -> Vec<Effect> {
    press_with(c, code, KeyModifiers::NONE)
}

/// Typed keys, one by one, as the terminal sends them.
fn type_keys(c: &mut Console, text: &str) -> Vec<Effect> {
    text.chars()
        .flat_map(|ch| press(c, KeyCode::Char(ch)))
        .collect::<Vec<_>>()
}

fn screen(c: &Console) -> String {
    text(&render(&c.state, c.state.width, c.state.height))
}

fn status_text(c: &Console) -> String {
    c.state
        .flash
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Zoom
// ---------------------------------------------------------------------------------------------

/// At 80×24 the transcript has 8 text rows; `2` `z` gives it every row but the header and
/// the three lines of status, notice and hints (20, of which 17 of text), and `z` again
/// puts the layout back.
#[test]
fn a_zoomed_transcript_at_80x24_uses_the_whole_screen() {
    let mut c = console(80, 24, lines(20));
    let before = view::regions_for(&c.state).transcript;
    press(&mut c, KeyCode::Char('2'));
    assert_eq!(c.state.focus, Focus::Transcript);
    press(&mut c, KeyCode::Char('z'));
    assert_eq!(c.state.zoom, Some(Pane::Transcript));
    let r = view::regions_for(&c.state);
    assert_eq!((r.transcript.x, r.transcript.y), (0, 1));
    assert_eq!((r.transcript.width, r.transcript.height), (80, 20));
    assert!(r.sessions.is_empty() && r.rounds.is_empty() && r.composer.is_empty());
    assert!(before.height < 12, "{before:?}");
    let shown = screen(&c);
    assert!(!shown.contains("┌ Sessions"), "{shown}");
    assert!(!shown.contains("┌ Rounds"), "{shown}");
    assert!(shown.contains("answer 19"), "{shown}");
    insta::assert_snapshot!(shown);
    press(&mut c, KeyCode::Char('z'));
    assert_eq!(c.state.zoom, None);
    assert_eq!(view::regions_for(&c.state).transcript, before);
}

/// The zoom follows the focus: `3` while zoomed shows the rounds pane zoomed; writing
/// (`i`) brings the composer back below the zoomed pane.
#[test]
fn the_zoom_follows_the_focus_and_the_composer_shows_when_written_in() {
    let mut c = console(80, 24, lines(3));
    let asked_previews = |c: &mut Console| sessions_asked(c).iter().any(|q| q.previews);
    assert!(
        !asked_previews(&mut c),
        "no room for the last message at 80"
    );
    press(&mut c, KeyCode::Char('z'));
    assert_eq!(c.state.zoom, Some(Pane::Sessions));
    assert!(screen(&c).contains("┌ Sessions"));
    assert!(
        asked_previews(&mut c),
        "zoomed, the sessions pane shows the last message: rows with it are asked for"
    );
    press(&mut c, KeyCode::Char('3'));
    assert_eq!(c.state.zoom, Some(Pane::Rounds));
    let shown = screen(&c);
    assert!(shown.contains("┌ Rounds"), "{shown}");
    assert!(!shown.contains("┌ Sessions"), "{shown}");
    assert!(
        shown
            .lines()
            .last()
            .unwrap_or("")
            .contains("z zoom the pane / restore"),
        "the way back is in the hint bar:\n{shown}"
    );
    press(&mut c, KeyCode::Char('1'));
    press(&mut c, KeyCode::Char('i'));
    assert_eq!(c.state.focus, Focus::Composer);
    let r = view::regions_for(&c.state);
    assert!(!r.composer.is_empty() && !r.sessions.is_empty());
    assert!(screen(&c).contains("┌ Write to agent:main:main"));
    // `z` typed in the composer is text, not a zoom.
    press(&mut c, KeyCode::Char('z'));
    assert_eq!(c.state.composer.text(), "z");
    assert_eq!(c.state.zoomed(), Some(Pane::Sessions));
    // Whatever moves the focus, the pane focused is the one drawn: from the transcript,
    // `i` then Esc (which leaves the composer for the sessions pane).
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('2'));
    press(&mut c, KeyCode::Char('i'));
    assert_eq!(
        c.state.zoomed(),
        Some(Pane::Transcript),
        "written in: the last pane"
    );
    press(&mut c, KeyCode::Esc);
    assert_eq!(c.state.focus, Focus::Sessions);
    assert_eq!(c.state.zoomed(), Some(Pane::Sessions));
    let r = view::regions_for(&c.state);
    assert!(!r.sessions.is_empty() && r.transcript.is_empty());
}

/// The exchange view over a zoomed pane takes the rows the zoom took from the composer:
/// nothing of the pane shows between the view and the status line.
#[test]
fn the_exchange_view_over_a_zoomed_pane_reaches_the_status_line() {
    let mut c = console(80, 24, lines(1));
    press(&mut c, KeyCode::Char('3'));
    press(&mut c, KeyCode::Char('z'));
    c.state.rounds.exchange_view = Some(switchboard_tui::exchanges::ExchangeView::new(
        crate::tui_exchanges::summary("x1", "send", MAIN, OPS, NOW),
        1,
    ));
    let shown = screen(&c);
    let rows: Vec<&str> = shown.lines().collect();
    assert!(rows[1].starts_with("┌ Exchange"), "{shown}");
    assert!(
        rows[20].starts_with('└') && rows[19].contains("esc close"),
        "the view (its keys on its last row) ends above the status line:\n{shown}"
    );
    assert!(rows[21].starts_with(" send:"), "{shown}");
}

// ---------------------------------------------------------------------------------------------
// Number keys and Tab
// ---------------------------------------------------------------------------------------------

#[test]
fn number_keys_focus_the_panes_and_tab_never_lands_in_the_composer() {
    let mut c = console(120, 40, lines(2));
    for (key, focus) in [
        ('3', Focus::Rounds),
        ('2', Focus::Transcript),
        ('1', Focus::Sessions),
    ] {
        press(&mut c, KeyCode::Char(key));
        assert_eq!(c.state.focus, focus, "{key}");
    }
    for expected in [
        Focus::Transcript,
        Focus::Rounds,
        Focus::Sessions,
        Focus::Transcript,
    ] {
        press(&mut c, KeyCode::Tab);
        assert_eq!(c.state.focus, expected);
    }
    press(&mut c, KeyCode::BackTab);
    press(&mut c, KeyCode::BackTab);
    assert_eq!(
        c.state.focus,
        Focus::Rounds,
        "back from the first pane: the last"
    );
    // The composer is entered by its own key, and Tab (nothing to complete) leaves it for
    // the first pane.
    press(&mut c, KeyCode::Char('i'));
    assert_eq!(c.state.focus, Focus::Composer);
    press(&mut c, KeyCode::Tab);
    assert_eq!(c.state.focus, Focus::Sessions);
    // Digits typed in a text box are text.
    press(&mut c, KeyCode::Char('/'));
    type_keys(&mut c, "12");
    assert_eq!(c.state.focus, Focus::Filter);
    assert_eq!(c.state.sessions.filter, "12");
}

// ---------------------------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------------------------

/// `:` opens the line in any pane; the letters after it are the line's (`t` does not
/// toggle tool calls, `r`… nothing else fires); Tab shows the candidates, then completes.
#[test]
fn the_command_line_takes_the_letters_and_completes_with_tab() {
    let mut c = console(80, 24, lines(3));
    press(&mut c, KeyCode::Char('2'));
    press(&mut c, KeyCode::Char(':'));
    assert!(
        c.state.command.is_some(),
        "the line opens in the transcript"
    );
    type_keys(&mut c, "tr");
    assert!(
        !c.state.transcript.tools,
        "t typed after : is text, not a toggle"
    );
    press(&mut c, KeyCode::Tab);
    let line = c.state.command.clone().expect("open");
    assert_eq!(line.text, "tra");
    assert_eq!(line.candidates, vec![":traffic", ":transcript"]);
    let shown = screen(&c);
    assert!(shown.contains(" :traffic  :transcript"), "{shown}");
    assert!(
        shown.lines().last().unwrap_or("").starts_with(":tra▏"),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
    type_keys(&mut c, "f");
    press(&mut c, KeyCode::Tab);
    assert_eq!(c.state.command.as_ref().expect("open").text, "traffic");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.command.is_none());
    assert!(c.state.traffic.open, ":traffic opens the traffic view");
    assert_eq!(c.state.focus, Focus::Transcript);
    // In the traffic view too; `:sessions` goes back to a pane.
    type_keys(&mut c, ":sessions");
    assert!(c.state.traffic.open, "nothing ran before Enter");
    press(&mut c, KeyCode::Enter);
    assert!(!c.state.traffic.open);
    assert_eq!(c.state.focus, Focus::Sessions);
}

#[test]
fn each_view_command_does_what_it_names() {
    let mut c = console(120, 40, lines(1));
    type_keys(&mut c, ":exchanges");
    press(&mut c, KeyCode::Enter);
    assert_eq!(c.state.focus, Focus::Rounds);
    assert!(c.state.rounds.all, "every session's exchanges");
    type_keys(&mut c, ":transcript");
    press(&mut c, KeyCode::Enter);
    assert_eq!(c.state.focus, Focus::Transcript);
    type_keys(&mut c, ":messages");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.notices_open);
    press(&mut c, KeyCode::Esc);
    assert!(!c.state.notices_open);
    type_keys(&mut c, ":help");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.help);
    press(&mut c, KeyCode::Esc);
    type_keys(&mut c, ":q");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.quit, ":q quits");
    let mut c = console(120, 40, lines(1));
    type_keys(&mut c, ":quit");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.quit);
}

/// `:send off` is the composer's `/send off`, on the selected session, and leaves the draft
/// alone; a wrong argument or an unknown command is said in the status line.
#[test]
fn session_commands_run_as_in_the_composer_and_mistakes_are_said() {
    let mut c = console(120, 40, lines(1));
    c.state.composer.set_text("a draft");
    type_keys(&mut c, ":send of");
    press(&mut c, KeyCode::Tab);
    let effects = press(&mut c, KeyCode::Enter);
    assert_eq!(
        effects,
        vec![Effect::Send {
            key: MAIN.into(),
            text: "/send off".into()
        }]
    );
    assert_eq!(c.state.composer.text(), "a draft", "the draft is kept");
    type_keys(&mut c, ":send maybe");
    let effects = press(&mut c, KeyCode::Enter);
    assert!(effects.is_empty());
    assert!(
        status_text(&c).starts_with("Usage: :send on|off|inherit"),
        "{}",
        status_text(&c)
    );
    type_keys(&mut c, ":frobnicate now");
    press(&mut c, KeyCode::Enter);
    let said = status_text(&c);
    assert!(said.starts_with("unknown command :frobnicate"), "{said}");
    assert!(c.state.flash.as_ref().is_some_and(|f| f.error));
    assert!(screen(&c).contains("unknown command :frobnicate"));
    type_keys(&mut c, ":status");
    press(&mut c, KeyCode::Enter);
    assert!(c.state.card.is_some(), ":status opens the status card");
}

#[test]
fn esc_ctrl_c_and_backspace_on_an_empty_line_close_it() {
    let mut c = console(120, 40, lines(1));
    type_keys(&mut c, ":tra");
    press(&mut c, KeyCode::Esc);
    assert!(c.state.command.is_none());
    assert!(!c.state.traffic.open, "nothing ran");
    type_keys(&mut c, ":x");
    press_with(&mut c, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(c.state.command.is_none());
    assert!(!c.state.quit, "Ctrl+C closes the line, it does not quit");
    type_keys(&mut c, ":a");
    press(&mut c, KeyCode::Backspace);
    assert!(c.state.command.is_some());
    press(&mut c, KeyCode::Backspace);
    assert!(c.state.command.is_none());
    // A paste goes into the line, its first line only.
    press(&mut c, KeyCode::Char(':'));
    c.update(Action::Paste("traffic\nrm -rf".into()));
    assert_eq!(c.state.command.as_ref().expect("open").text, "traffic");
}

// ---------------------------------------------------------------------------------------------
// Help
// ---------------------------------------------------------------------------------------------

#[test]
fn the_help_names_the_search_the_zoom_the_panes_and_the_command_line() {
    let mut c = console(80, 24, lines(1));
    press(&mut c, KeyCode::Char('?'));
    let shown = screen(&c);
    for wanted in [
        "filter / transcript: search",
        "next search hit",
        "zoom the pane / restore",
        "command line",
        "transcript pane",
    ] {
        assert!(shown.contains(wanted), "{wanted}:\n{shown}");
    }
    insta::assert_snapshot!(shown);
}

// ---------------------------------------------------------------------------------------------
// Search and copy
// ---------------------------------------------------------------------------------------------

/// Typing a search selects the newest hit's message, and `n`/`N` move the selection with
/// the hit: `y` copies it with no `[`/`]` first.
#[test]
fn a_search_hit_selects_its_message_so_y_copies_it() {
    let mut c = console(120, 40, lines(5));
    press(&mut c, KeyCode::Char('2'));
    press(&mut c, KeyCode::Char('/'));
    type_keys(&mut c, "answer [12]");
    press(&mut c, KeyCode::Enter);
    assert_eq!(c.state.focus, Focus::Transcript);
    // answer 2 is seq 10, answer 1 seq 8.
    assert_eq!(c.state.transcript.view.cursor, Some(10));
    let effects = press(&mut c, KeyCode::Char('y'));
    assert_eq!(
        effects,
        vec![Effect::Copy {
            text: "answer 2".into()
        }]
    );
    press(&mut c, KeyCode::Char('N'));
    assert_eq!(c.state.transcript.view.cursor, Some(8));
    let effects = press(&mut c, KeyCode::Char('y'));
    assert_eq!(
        effects,
        vec![Effect::Copy {
            text: "answer 1".into()
        }]
    );
    let shown = screen(&c);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("▌") && l.contains("answer 1")),
        "the hit's message is marked:\n{shown}"
    );
}

/// A tool call selected, then tool calls hidden: the pane marks the line before it and `y`
/// copies that line, not the hidden call.
#[test]
fn y_copies_the_line_shown_not_a_hidden_tool_call() {
    let mut c = console(120, 40, lines(0));
    press(&mut c, KeyCode::Char('2'));
    press(&mut c, KeyCode::Char('t'));
    assert!(c.state.transcript.tools);
    // `[` selects the newest message, `[` again the tool call above it.
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('['));
    assert_eq!(c.state.transcript.view.cursor, Some(2));
    press(&mut c, KeyCode::Char('t'));
    assert!(!c.state.transcript.tools);
    let effects = press(&mut c, KeyCode::Char('y'));
    assert_eq!(
        effects,
        vec![Effect::Copy {
            text: "please check the deploy".into()
        }],
        "the call is hidden: the line marked is copied"
    );
    let shown = screen(&c);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("▌") && l.contains("please check the deploy")),
        "{shown}"
    );
    assert!(!shown.contains("sessions_send"), "{shown}");
}
