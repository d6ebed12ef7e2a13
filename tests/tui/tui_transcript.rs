//! The transcript pane (issue 14 item 5): search with highlighted hits and a counter, `n`/`N`
//! wrapping around, invalid and oversized patterns, searching while lines arrive and while
//! the session is deleted; `g` reaching line 1 of a long transcript in one load (and `G`
//! back); a paused view that stays put as wrapped and hidden lines arrive; tool calls as
//! cards, collapsed and opened with the message cursor; wrap off with `…` and sideways
//! scrolling; the streaming spinner; copying the selected message (OSC 52).
//!
//! Pictures are insta snapshots of `view::draw` on a `TestBackend` (tests/tui/snapshots/);
//! behaviour is `Console::update` driven over the fake API (tests/common/fake_api.rs).
//! Everything is deterministic: fixed clock, fixed timestamps, nothing timed.

use crate::common;
use crate::common::screen::{render, text};

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossterm::event::KeyCode;
use ratatui::style::Modifier;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::Effect;
use switchboard_tui::state::{Focus, SessionRow, State, TranscriptLine};
use switchboard_tui::streams::Delta;
use switchboard_tui::update::Console;
use switchboard_tui::view;
use switchboard_types::api::{LineRole, SessionKind, TranscriptLine as ApiLine};
use unicode_width::UnicodeWidthStr;

use common::console_driver::Driver;
use common::fake_api::{self, Data, FakeApi};

const NOW: i64 = 1_750_000_000_000;
const MAIN: &str = "agent:main:main";

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

fn screen(state: &State) -> String {
    text(&render(state, state.width, state.height))
}

/// The transcript pane's text rows (inside its border, above the indicator line), read
/// from the cells (a wide character's covered cell skipped), trailing blanks trimmed.
fn transcript_pane(state: &State) -> String {
    let r = view::regions(state.width, state.height).transcript;
    let buf = render(state, state.width, state.height);
    let mut rows = Vec::new();
    for y in r.y + 1..r.y + r.height - 2 {
        let mut line = String::new();
        let mut skip = 0usize;
        for x in r.x + 1..r.x + r.width - 1 {
            let symbol = buf[(x, y)].symbol();
            if skip > 0 {
                skip -= 1;
                continue;
            }
            line.push_str(symbol);
            skip = symbol.width().saturating_sub(1);
        }
        rows.push(line.trim_end().to_string());
    }
    rows.join("\n")
}

/// The pane's indicator line (its last row inside the border).
fn indicator(state: &State) -> String {
    let r = view::regions(state.width, state.height).transcript;
    screen(state)
        .lines()
        .nth((r.y + r.height - 2) as usize)
        .unwrap_or("")
        .chars()
        .skip(r.x as usize + 1)
        .take(r.width as usize - 2)
        .collect::<String>()
        .trim_end()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Hand-built states
// ---------------------------------------------------------------------------------------------

/// A transcript line at `NOW` plus `seq` seconds (also the navigation tests').
pub(crate) fn tline(seq: i64, role: &'static str, from: &str, text: &str) -> TranscriptLine {
    TranscriptLine {
        seq,
        role,
        timestamp: NOW + seq * 1_000,
        from: from.into(),
        text: text.into(),
    }
}

/// One session (`MAIN`) selected with `lines` loaded, the transcript focused, 120×40.
fn state_with(lines: Vec<TranscriptLine>) -> State {
    let mut s = State::new("/srv/switchboard/state".into(), NOW);
    s.width = 120;
    s.height = 40;
    s.sessions.rows = vec![SessionRow::from_api(&fake_api::row(
        MAIN,
        "main",
        SessionKind::Main,
        NOW,
    ))];
    s.sessions.total = 1;
    s.sessions.matching = 1;
    s.transcript.total = lines.last().map(|l| l.seq).unwrap_or(0);
    s.transcript.lines = lines;
    s.transcript.key = Some(MAIN.into());
    s.focus = Focus::Transcript;
    s
}

fn tool_transcript() -> Vec<TranscriptLine> {
    vec![
        tline(
            1,
            "user",
            "owner",
            "ask ops to deploy, then spawn a checker",
        ),
        tline(
            2,
            "tool",
            "agent",
            "On it.\nsessions_send({\"sessionKey\":\"agent:ops:main\",\"message\":\"deploy release 1.4 to production now please\",\"timeoutSeconds\":30})",
        ),
        tline(
            3,
            "result",
            "sessions_send",
            "{\n  \"status\": \"ok\",\n  \"reply\": \"deployed 1.4\"\n}",
        ),
        tline(
            4,
            "tool",
            "agent",
            "sessions_spawn({\"task\":\"check the deploy\"})",
        ),
        tline(
            5,
            "result",
            "sessions_spawn",
            "{\"status\":\"error\",\"error\":\"spawn not allowed for agent main\"}",
        ),
        tline(
            6,
            "assistant",
            "agent",
            "Deployed; the checker was refused.",
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Driven over the fake API
// ---------------------------------------------------------------------------------------------

fn fake_with(lines: Vec<ApiLine>) -> Arc<FakeApi> {
    let mut data = Data::default();
    data.rows
        .push(fake_api::row(MAIN, "main", SessionKind::Main, NOW));
    data.lines.insert(MAIN.into(), lines);
    Arc::new(FakeApi::new(data))
}

fn numbered(n: i64) -> Vec<ApiLine> {
    (1..=n).map(|i| fake_api::line(MAIN, i)).collect()
}

async fn driver(api: Arc<FakeApi>) -> Driver {
    let mut state = State::new("/srv/switchboard/state".into(), NOW);
    state.width = 120;
    state.height = 40;
    let mut d = Driver::new(api, state);
    d.settle().await;
    d.intent(Intent::FocusNext);
    assert_eq!(d.console.state.focus, Focus::Transcript);
    d
}

async fn search(d: &mut Driver, query: &str) {
    d.intent(Intent::Filter);
    assert_eq!(d.console.state.focus, Focus::Search);
    d.type_text(query);
    d.key(KeyCode::Enter);
    d.settle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_view_does_not_move_as_fifty_wrapped_and_hidden_lines_arrive() {
    let api = fake_with(numbered(60));
    let mut d = driver(api.clone()).await;
    d.intent(Intent::PageUp);
    d.settle().await;
    assert!(
        !d.console.state.transcript.follow,
        "scrolling up pauses follow"
    );
    let before = transcript_pane(&d.console.state);
    assert!(before.contains("says #"), "{before}");
    // Replies long enough to wrap over several rows, and tool calls and results (hidden
    // while tools are off): neither may move what the owner is reading.
    for i in 0..25 {
        api.append(
            MAIN,
            LineRole::Assistant,
            "agent",
            &format!("reply {i}: {}", "lorem ipsum dolor sit amet ".repeat(8)),
        );
        if i % 2 == 0 {
            api.append(
                MAIN,
                LineRole::Tool,
                "agent",
                "sessions_list({\"limit\":5})",
            );
        } else {
            api.append(
                MAIN,
                LineRole::Result,
                "sessions_list",
                "{\"status\":\"ok\"}",
            );
        }
    }
    d.until("the 50 new lines loaded", |s| s.transcript.total == 110)
        .await;
    let after = transcript_pane(&d.console.state);
    assert_eq!(before, after, "the paused view stays where it was");
    assert!(!d.console.state.transcript.follow);
    // `G` goes to the newest, following again.
    d.intent(Intent::Bottom);
    d.settle().await;
    assert!(d.console.state.transcript.follow);
    assert!(transcript_pane(&d.console.state).contains("reply 24"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_view_stays_put_when_more_lines_arrive_than_a_window_holds() {
    let api = fake_with(numbered(60));
    let mut d = driver(api.clone()).await;
    d.intent(Intent::PageUp);
    d.settle().await;
    let before = transcript_pane(&d.console.state);
    // 500 lines in ten bursts, each loaded: more than the 400-line window.
    for burst in 0..10 {
        for _ in 0..50 {
            api.append(MAIN, LineRole::User, "owner", "more");
        }
        let total = 60 + 50 * (burst + 1);
        d.until("the burst loaded", |s| s.transcript.total == total)
            .await;
    }
    assert_eq!(before, transcript_pane(&d.console.state));
    assert!(!d.console.state.transcript.follow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g_reaches_line_one_of_5000_in_one_load_without_holding_them_all() {
    let api = fake_with(numbered(5_000));
    let mut d = driver(api.clone()).await;
    assert!(transcript_pane(&d.console.state).contains("says #5000"));
    let loads = api.answered.load(Ordering::SeqCst);
    d.intent(Intent::Top);
    d.settle().await;
    let pane = transcript_pane(&d.console.state);
    assert!(
        pane.lines()
            .next()
            .is_some_and(|l| l.ends_with("agent:main:main says #1")),
        "the first line at the top:\n{pane}"
    );
    assert!(
        api.answered.load(Ordering::SeqCst) - loads <= 2,
        "a few loads, not one per page"
    );
    assert!(
        d.console.state.transcript.lines.len() <= 400,
        "only a window is held ({} lines)",
        d.console.state.transcript.lines.len()
    );
    assert!(indicator(&d.console.state).contains("(lines 1–400 of 5000)"));
    // Paging down from the start moves the window along: line 1000 is reached.
    for _ in 0..60 {
        d.intent(Intent::PageDown);
        d.settle().await;
        if transcript_pane(&d.console.state).contains("says #1000\n") {
            break;
        }
    }
    assert!(
        transcript_pane(&d.console.state).contains("says #1000"),
        "paged down to line 1000"
    );
    assert!(d.console.state.transcript.lines.len() <= 20_000);
    // `G`: the newest lines, following again.
    d.intent(Intent::Bottom);
    d.settle().await;
    assert!(d.console.state.transcript.follow);
    assert!(transcript_pane(&d.console.state).contains("says #5000"));
    assert!(indicator(&d.console.state).contains("(newest 400 of 5000 lines)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_counts_hits_and_n_and_shift_n_wrap_around() {
    let api = fake_with(numbered(30));
    let mut d = driver(api).await;
    search(&mut d, "says #2").await;
    // `#2` and `#20`…`#29`: the newest is current.
    assert_eq!(d.console.state.focus, Focus::Transcript);
    assert!(
        indicator(&d.console.state).starts_with("/says #2  11/11"),
        "{}",
        indicator(&d.console.state)
    );
    d.intent(Intent::SearchNext);
    assert!(indicator(&d.console.state).starts_with("/says #2  1/11"));
    let pane = transcript_pane(&d.console.state);
    assert!(
        pane.contains("says #2\n") || pane.ends_with("says #2"),
        "the first hit is on screen:\n{pane}"
    );
    d.intent(Intent::SearchPrev);
    assert!(indicator(&d.console.state).starts_with("/says #2  11/11"));
    d.intent(Intent::SearchPrev);
    assert!(indicator(&d.console.state).starts_with("/says #2  10/11"));
    // The current hit is drawn reversed and bold (visible with NO_COLOR), the others
    // reversed.
    let s = d.console.state.clone();
    let on_screen = regex::Regex::new(r"says #2\d?$").expect("regex");
    let hit_lines = transcript_pane(&s)
        .lines()
        .filter(|l| on_screen.is_match(l))
        .count();
    assert!(hit_lines >= 2, "{}", transcript_pane(&s));
    let buf = render(&s, 120, 40);
    let mut reversed = 0;
    let mut current = 0;
    for cell in buf.content() {
        if cell.modifier.contains(Modifier::REVERSED) && cell.symbol() == "#" {
            reversed += 1;
            if cell.modifier.contains(Modifier::BOLD) {
                current += 1;
            }
        }
    }
    assert_eq!(
        (reversed, current),
        (hit_lines, 1),
        "every hit on screen highlighted, one current"
    );
    // Esc in the box ends the search: nothing highlighted, the toggles are back.
    d.intent(Intent::Filter);
    d.key(KeyCode::Esc);
    assert!(!d.console.state.transcript.view.search.active());
    assert!(indicator(&d.console.state).starts_with("tools:off"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_outside_the_transcript_does_nothing() {
    let api = fake_with(numbered(30));
    let mut d = driver(api).await;
    search(&mut d, "#1").await;
    let current = d.console.state.transcript.view.search.current;
    d.intent(Intent::FocusNext);
    d.intent(Intent::SearchNext);
    d.intent(Intent::SearchPrev);
    assert_eq!(d.console.state.transcript.view.search.current, current);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_regex_is_searched_as_typed_and_a_huge_one_refused() {
    let mut lines = numbered(10);
    lines.push(ApiLine {
        text: "call f(x with an open paren".into(),
        ..fake_api::line(MAIN, 11)
    });
    let api = fake_with(lines);
    let mut d = driver(api).await;
    search(&mut d, "f(x").await;
    let ind = indicator(&d.console.state);
    assert!(
        ind.contains("1/1") && ind.contains("not a valid regex: matching the text as typed"),
        "{ind}"
    );
    d.intent(Intent::Filter);
    d.key(KeyCode::Esc);
    search(&mut d, r"\w{1000}{1000}").await;
    let ind = indicator(&d.console.state);
    assert!(ind.contains("-/0") && ind.contains("refused"), "{ind}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searching_while_lines_arrive_keeps_the_current_hit_and_counts_new_ones() {
    let api = fake_with(numbered(30));
    let mut d = driver(api.clone()).await;
    search(&mut d, "says #1").await;
    // #1, #10…#19: newest current; then go to the first.
    assert!(indicator(&d.console.state).starts_with("/says #1  11/11"));
    d.intent(Intent::SearchNext);
    assert!(indicator(&d.console.state).starts_with("/says #1  1/11"));
    for _ in 0..5 {
        api.append(MAIN, LineRole::User, "owner", "again says #1 here");
    }
    d.until("the new lines loaded", |s| s.transcript.total == 35)
        .await;
    assert!(
        indicator(&d.console.state).starts_with("/says #1  1/16"),
        "{}",
        indicator(&d.console.state)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_deleted_while_searching_leaves_an_empty_search_not_a_panic() {
    let api = fake_with(numbered(30));
    let mut d = driver(api.clone()).await;
    d.intent(Intent::Filter);
    d.type_text("says");
    assert!(indicator(&d.console.state).contains("30/30"));
    api.remove(MAIN);
    d.settle().await;
    let s = &d.console.state;
    assert!(s.transcript.lines.is_empty());
    assert!(
        indicator(s).contains("-/0"),
        "no hits in lines no longer shown: {}",
        indicator(s)
    );
    assert!(screen(s).contains("was deleted"), "{}", screen(s));
    // Typing on in the box is fine too.
    d.type_text(" #1");
    d.settle().await;
    assert!(
        indicator(&d.console.state).contains("/says #1▏  -/0"),
        "{}",
        indicator(&d.console.state)
    );
}

// ---------------------------------------------------------------------------------------------
// Tool cards, the cursor, copying
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_cards_collapsed() {
    let mut s = state_with(tool_transcript());
    s.transcript.tools = true;
    let shown = transcript_pane(&s);
    assert!(
        shown.contains("⚙ sessions_send ok · sessionKey: \"agent:ops:main\""),
        "{shown}"
    );
    assert!(
        shown.contains("⚙ sessions_spawn error · task: \"check the deploy\""),
        "{shown}"
    );
    assert!(
        !shown.contains("deployed 1.4"),
        "results only inside an open card:\n{shown}"
    );
    insta::assert_snapshot!(shown);
    // `t` hides them all.
    s.transcript.tools = false;
    assert!(!transcript_pane(&s).contains("⚙"));
}

#[test]
fn a_selected_tool_card_opens_with_enter() {
    let mut c = Console::new(state_with(tool_transcript()));
    c.state.transcript.tools = true;
    // `[` selects the newest message on screen, then the card above it.
    c.update(Action::Intent(Intent::SelectPrev));
    assert_eq!(c.state.transcript.view.cursor, Some(6));
    c.update(Action::Intent(Intent::SelectPrev));
    c.update(Action::Intent(Intent::SelectPrev));
    assert_eq!(
        c.state.transcript.view.cursor,
        Some(2),
        "results are inside cards, skipped"
    );
    c.update(Action::Intent(Intent::Open));
    let shown = transcript_pane(&c.state);
    assert!(
        shown.contains("\"message\": \"deploy release 1.4 to production now please\""),
        "{shown}"
    );
    assert!(shown.contains("result (ok):"), "{shown}");
    assert!(shown.contains("\"reply\": \"deployed 1.4\""), "{shown}");
    assert_eq!(
        c.state.focus,
        Focus::Transcript,
        "Enter in the transcript does not compose"
    );
    insta::assert_snapshot!(shown);
    c.update(Action::Intent(Intent::Open));
    assert!(
        !transcript_pane(&c.state).contains("result (ok):"),
        "Enter again closes it"
    );
}

#[test]
fn an_open_card_is_bounded_in_height() {
    let big: String = (0..200).map(|i| format!("row {i}\n")).collect();
    let mut lines = tool_transcript();
    lines[2].text = big;
    let mut c = Console::new(state_with(lines));
    c.state.transcript.tools = true;
    c.state.transcript.view.cursor = Some(2);
    c.update(Action::Intent(Intent::Open));
    let shown = transcript_pane(&c.state);
    assert!(shown.contains("… 190 more lines"), "{shown}");
    assert!(!shown.contains("row 10\n"), "{shown}");
}

#[test]
fn y_copies_the_selected_message_through_an_effect() {
    let mut c = Console::new(state_with(tool_transcript()));
    let effects = c.update(Action::Intent(Intent::Copy));
    assert!(effects.is_empty(), "nothing selected, nothing copied");
    c.update(Action::Intent(Intent::SelectPrev));
    let effects = c.update(Action::Intent(Intent::Copy));
    assert_eq!(
        effects,
        vec![Effect::Copy {
            text: "Deployed; the checker was refused.".into()
        }]
    );
    let flash = c.state.flash.as_ref().map(|f| f.text.clone());
    assert_eq!(flash.as_deref(), Some("copied 34 characters"));
    // A huge message is cut to 100 KB, and the status line says so.
    let mut lines = tool_transcript();
    lines[5].text = "x".repeat(300_000);
    let mut c = Console::new(state_with(lines));
    c.state.transcript.view.cursor = Some(6);
    let effects = c.update(Action::Intent(Intent::Copy));
    match effects.as_slice() {
        [Effect::Copy { text }] => assert_eq!(text.len(), 100 * 1024),
        other => panic!("{other:?}"),
    }
    assert!(
        c.state
            .flash
            .as_ref()
            .is_some_and(|f| f.text.starts_with("copied the first 102400 characters"))
    );
}

// ---------------------------------------------------------------------------------------------
// Wrap off, streaming
// ---------------------------------------------------------------------------------------------

fn long_lines() -> Vec<TranscriptLine> {
    vec![
        tline(1, "user", "owner", "short line"),
        tline(
            2,
            "assistant",
            "agent",
            &format!(
                "BEGIN {} END",
                (0..40)
                    .map(|i| format!("w{i:02}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ),
        tline(
            3,
            "user",
            "owner",
            "the 宽字符 line with wide characters across the edge of the pane here",
        ),
    ]
}

#[test]
fn wrap_off_cuts_with_an_ellipsis_and_scrolls_sideways() {
    let mut c = Console::new(state_with(long_lines()));
    c.state.transcript.wrap = false;
    let shown = transcript_pane(&c.state);
    assert!(
        shown.lines().any(|l| l.trim_end().ends_with('…')),
        "{shown}"
    );
    assert!(!shown.contains("END"), "{shown}");
    insta::assert_snapshot!("wrap_off_at_column_1", shown);
    for _ in 0..16 {
        c.update(Action::Intent(Intent::ScrollRight));
    }
    let shown = transcript_pane(&c.state);
    assert!(shown.contains("END"), "{shown}");
    assert!(
        shown.lines().all(|l| l.is_empty() || l.starts_with('…')),
        "{shown}"
    );
    assert!(
        indicator(&c.state).contains("→col 129"),
        "{}",
        indicator(&c.state)
    );
    insta::assert_snapshot!("wrap_off_scrolled_right", shown);
    for _ in 0..20 {
        c.update(Action::Intent(Intent::ScrollLeft));
    }
    assert_eq!(c.state.transcript.view.hscroll, 0);
    // With wrap on, sideways keys only say how to use them.
    c.state.transcript.wrap = true;
    c.update(Action::Intent(Intent::ScrollRight));
    assert_eq!(c.state.transcript.view.hscroll, 0);
}

#[test]
fn a_streaming_reply_has_a_spinner_that_moves_only_while_it_streams() {
    let mut s = state_with(long_lines());
    s.transcript.streams.delta(
        Delta {
            run_id: "run-1",
            key: MAIN,
            agent_id: "main",
            step: 0,
            offset: 0,
            text: "Working on the",
        },
        NOW,
    );
    let first = transcript_pane(&s);
    assert!(
        first.contains("agent: Working on the▍ streaming… ⠙"),
        "{first}"
    );
    insta::assert_snapshot!(first);
    // A tick turns it.
    s.ticks += 1;
    assert!(transcript_pane(&s).contains("▍ streaming… ⠹"));
    // So does a delta.
    s.transcript.streams.delta(
        Delta {
            run_id: "run-1",
            key: MAIN,
            agent_id: "main",
            step: 0,
            offset: 14,
            text: " deploy",
        },
        NOW,
    );
    assert!(transcript_pane(&s).contains("Working on the deploy▍ streaming… ⠸"));
    // Done: no spinner, and ticks change nothing on screen (an idle console writes nothing).
    s.transcript.streams.reply_appended("run-1", 4, true);
    let done = transcript_pane(&s);
    assert!(!done.contains("streaming"), "{done}");
    s.ticks += 1;
    assert_eq!(done, transcript_pane(&s));
}

/// Issue 26 item 3: lines in time order, ties in arrival order. A reply stored after the
/// line that quotes it (its time is when it was made: 11:46:06 under 11:46:07) sat below
/// it; a line with no time keeps its place after the line before it. The cursor walks the
/// lines in the order shown and the search highlights the moved line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_are_in_time_order_with_ties_in_arrival_order() {
    let at = |seq: i64, ms: i64, text: &str| ApiLine {
        timestamp: ms,
        text: text.into(),
        ..fake_api::line(MAIN, seq)
    };
    let lines = vec![
        at(1, NOW, "one"),
        at(2, NOW + 7_000, "as ops said: \"mitigated\" (quoting)"),
        at(3, NOW + 6_000, "mitigated (the reply)"),
        at(4, NOW + 7_000, "same second, after"),
        at(5, 0, "no time: stays after the line before"),
    ];
    let api = fake_with(lines);
    let mut d = driver(api).await;
    let order: Vec<i64> = d
        .console
        .state
        .transcript
        .lines
        .iter()
        .map(|l| l.seq)
        .collect();
    assert_eq!(order, [1, 3, 2, 4, 5]);
    let shown = screen(&d.console.state);
    let reply = shown.find("mitigated (the reply)").expect("the reply");
    let quote = shown.find("(quoting)").expect("the quote");
    assert!(
        reply < quote,
        "the reply above the line quoting it:\n{shown}"
    );
    // The cursor from the bottom up: 5, 4, 2, 3 (as shown, not by seq).
    let mut walked = Vec::new();
    for _ in 0..4 {
        d.intent(Intent::SelectPrev);
        walked.push(d.console.state.transcript.view.cursor);
    }
    assert_eq!(walked, [Some(5), Some(4), Some(2), Some(3)]);
    search(&mut d, "mitigated").await;
    let search = &d.console.state.transcript.view.search;
    assert_eq!(search.hits.len(), 2);
    for seq in [2, 3] {
        assert_eq!(search.hits_in(seq).count(), 1, "the hit in line {seq}");
    }
}

/// Issue 26 item 7: under vt100 (ASCII marks) the selected message's mark is `>`, not a
/// `|` that beside the pane's `|` border read as a second border; the streaming mark too.
#[test]
fn ascii_marks_never_look_like_borders() {
    let mut s = state_with(tool_transcript());
    s.width = 80;
    s.height = 24;
    s.theme = switchboard_tui::theme::Theme::detect(Some("vt100"), None).expect("vt100");
    let mut c = Console::new(s);
    c.update(Action::Intent(Intent::SelectPrev));
    let shown = screen(&c.state);
    assert!(shown.is_ascii(), "{shown}");
    // The two panes' borders meet as `||`; a third `|` would be the mark.
    assert!(!shown.contains("|||"), "a mark beside a border:\n{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.contains("||>") && l.contains("Deployed")),
        "the selected message marked with >:\n{shown}"
    );
    insta::assert_snapshot!("ascii_selected_message_80x24", shown);
}
