//! The sessions pane, the status line and the terminal themes as the owner sees them
//! (issue 14 items 1, 6, 7): column headers and names cut in the middle at 80/120/200
//! columns, the last-message column, the sort toggle (`s`) and the order held while the
//! owner moves, the policy slot for each policy source next to an answer and a notice, the
//! notices log (`M`), ASCII mode, and the help overlay at 60×16.
//!
//! Hand-built states are drawn with `view::draw` on a `TestBackend`; the driven ones go
//! through `Console::update` over the fake API (tests/common). Snapshots: tests/tui/snapshots/.

use crate::common;
use crate::common::screen::{render, screen, text};

use std::sync::Arc;

use switchboard_tui::action::{Action, Intent};
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::{SessionRow, State};
use switchboard_tui::theme::Theme;
use switchboard_tui::view;
use switchboard_types::api::{
    EngineEvent, LineRole, PolicyView, SessionKind, SessionRow as ApiRow,
};
use unicode_width::UnicodeWidthStr;

use common::console_driver::Driver;
use common::fake_api::{self, FakeApi};

const NOW: i64 = 1_750_000_000_000;
const MIN: i64 = 60_000;

/// Clock times blanked (`12:34:56` → `HH:MM:SS`): the notices log shows local times.
fn redact(screen: &str) -> String {
    let clock = regex::Regex::new(r"\b\d{2}:\d{2}:\d{2}\b").expect("regex");
    clock.replace_all(screen, "HH:MM:SS").into_owned()
}

fn policy(policy: &str, source: &str, rule: Option<usize>, matched: Option<&str>) -> PolicyView {
    PolicyView {
        policy: policy.parse().unwrap(),
        source: source.parse().unwrap(),
        rule,
        matched: matched.map(str::to_string),
        detail: "unused by the console".into(),
        summary: String::new(),
    }
}

/// A row as the engine lists it: `name` None means no display name (the key is shown).
fn api_row(key: &str, name: Option<&str>, age: i64, last: Option<&str>) -> ApiRow {
    let mut r = fake_api::row(key, name.unwrap_or(key), SessionKind::Other, NOW - age);
    r.display_name = name.map(str::to_string);
    r.channel = "telegram".into();
    r.last_message = last.map(str::to_string);
    r
}

/// The rows the issue complained about: keys that differ only at their end.
fn telegram_rows() -> Vec<SessionRow> {
    let mut rows = [
        api_row(
            "agent:main:telegram:direct:1234",
            None,
            MIN,
            Some("can you move the standup to 10?"),
        ),
        api_row(
            "agent:main:telegram:direct:5678",
            None,
            2 * MIN,
            Some("thanks!"),
        ),
        api_row(
            "agent:main:telegram:group:-100987654",
            None,
            3 * MIN,
            Some("deploy went out, all green"),
        ),
        api_row(
            "agent:support:feishu:group:研究チーム研究チーム",
            None,
            4 * MIN,
            Some("研究の進捗はどうですか"),
        ),
        api_row("agent:main:main", Some("Alice (Telegram)"), 5 * MIN, None),
    ];
    rows[2].policy = policy("deny", "override", None, None);
    rows.iter().map(SessionRow::from_api).collect()
}

fn state_with(rows: Vec<SessionRow>) -> State {
    let mut s = State::new("/home/owner/.local/share/switchboard".into(), NOW);
    s.sessions.total = rows.len() as u64;
    s.sessions.matching = rows.len() as u64;
    s.sessions.selected_policy = rows.first().map(|r| r.policy_line());
    s.sessions.rows = rows;
    s
}

/// The sessions pane's lines (inside its border) at `w`×`h`.
fn sessions_pane(state: &State, w: u16, h: u16) -> Vec<String> {
    let r = view::regions(w, h).sessions;
    screen(state, w, h)
        .lines()
        .skip(r.y as usize)
        .take(r.height as usize)
        .map(|l| l.chars().take(r.width as usize + 4).collect())
        .collect()
}

#[test]
fn headers_and_names_keep_the_distinguishing_end_at_80_120_200_columns() {
    let state = state_with(telegram_rows());
    for (w, h) in [(80u16, 24u16), (120, 40), (200, 40)] {
        let pane = sessions_pane(&state, w, h);
        let shown = pane.join("\n");
        // Column headers under the title (the kind gives way to the name when narrow).
        assert!(
            pane[1].contains("name") && pane[1].contains("age"),
            "{w}: {shown}"
        );
        assert_eq!(pane[1].contains("kind"), w >= 120, "{w}: {shown}");
        assert!(pane[1].contains("policy"), "{w}: {shown}");
        // The two direct chats are told apart by their ends, never cut to the same prefix.
        assert!(
            shown.contains("1234") && shown.contains("5678"),
            "{w}: {shown}"
        );
        // A display name is shown from its start.
        assert!(shown.contains("Alice"), "{w}: {shown}");
        insta::assert_snapshot!(format!("sessions_pane_{w}x{h}"), shown);
    }
}

#[test]
fn the_last_message_column_shows_when_the_pane_is_wide() {
    let state = state_with(telegram_rows());
    let wide = sessions_pane(&state, 200, 40).join("\n");
    assert!(wide.contains("last message"), "{wide}");
    assert!(wide.contains("can you move the stand"), "{wide}");
    let narrow = sessions_pane(&state, 120, 40).join("\n");
    assert!(!narrow.contains("can you move"), "{narrow}");
}

#[test]
fn cjk_keys_are_cut_in_the_middle_by_columns_not_characters() {
    let state = state_with(telegram_rows());
    for w in [60u16, 80, 120] {
        let r = view::regions(w, 24).sessions;
        let buf = render(&state, w, 24);
        let t = text(&buf);
        for line in t.lines().skip(r.y as usize).take(r.height as usize) {
            let pane: String = line.chars().collect();
            assert!(pane.width() <= w as usize, "{w}: {line:?}");
        }
        if w >= 80 {
            assert!(t.contains("チーム"), "{w}: the key's end stays: {t}");
        }
    }
}

#[test]
fn the_policy_slot_says_each_source_in_plain_words() {
    let cases = [
        (
            policy("allow", "default", None, None),
            "send: allow · default",
        ),
        (
            policy("deny", "override", None, None),
            "send: deny · set here with /send off",
        ),
        (
            policy(
                "deny",
                "rule",
                Some(1),
                Some("channel=discord chatType=group"),
            ),
            "send: deny · rule 1: channel=discord, chatType=group",
        ),
        (
            policy("allow", "unconfigured", None, None),
            "send: allow · no session.sendPolicy configured",
        ),
        // Longer than half the line: with no answer beside it, it is shown whole.
        (
            policy(
                "deny",
                "rule",
                Some(2),
                Some("channel=discord chatType=group keyPrefix=agent:support:discord:group:"),
            ),
            "send: deny · rule 2: channel=discord, chatType=group, keyPrefix=agent:support:discord:group:",
        ),
    ];
    let mut shots = Vec::new();
    for (p, words) in cases {
        let mut row = api_row("agent:main:main", Some("Alice"), MIN, None);
        row.policy = p;
        let state = state_with(vec![SessionRow::from_api(&row)]);
        let r = view::regions(120, 40);
        let s = screen(&state, 120, 40);
        let status = s.lines().nth(r.status.y as usize).unwrap_or("").to_string();
        assert!(status.contains(words), "{status:?} lacks {words:?}");
        shots.push(status);
    }
    insta::assert_snapshot!("policy_slot_each_source", shots.join("\n"));
}

fn driven(n: usize) -> (Arc<FakeApi>, Driver) {
    driven_with(FakeApi::with_sessions(n, 2))
}

fn driven_with(api: FakeApi) -> (Arc<FakeApi>, Driver) {
    let api = Arc::new(api);
    let mut state = State::new("fake".into(), NOW);
    state.width = 120;
    state.height = 40;
    let d = Driver::new(api.clone(), state);
    (api, d)
}

fn status_and_notice(d: &Driver) -> (String, String) {
    let r = view::regions(120, 40);
    let s = screen(&d.console.state, 120, 40);
    let line = |y: u16| s.lines().nth(y as usize).unwrap_or("").to_string();
    (line(r.status.y), line(r.notice.y))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_never_hides_the_policy_slot_or_the_owners_answer() {
    let (api, mut d) = driven(3);
    d.settle().await;
    // The owner's own action answers in the status line…
    d.intent(Intent::ToggleTools);
    // …then agents elsewhere are refused, several times.
    for _ in 0..3 {
        api.emit(EngineEvent::PolicyDecision {
            key: "agent:main:s002".into(),
            action: switchboard_types::api::SendKind::Send,
            allowed: false,
            source: "rule 1 (channel=discord chatType=group)".into(),
            requester: None,
        });
    }
    d.settle().await;
    let (status, notice) = status_and_notice(&d);
    assert!(status.contains("send: allow · default"), "{status:?}");
    assert!(status.contains("tool calls shown"), "{status:?}");
    assert!(
        notice.contains("agent:main:s002: sessions_send refused"),
        "{notice:?}"
    );
    insta::assert_snapshot!("status_and_notice_lines", format!("{status}\n{notice}"));
    // The log has all four, with times; `M` opens it and esc closes it.
    assert_eq!(d.console.state.notices.len(), 4);
    d.intent(Intent::Notices);
    let log = redact(&screen(&d.console.state, 120, 40));
    assert!(log.contains("Notices (4 of the last 200)"), "{log}");
    assert!(log.contains("HH:MM:SS   tool calls shown"), "{log}");
    assert_eq!(
        log.matches("HH:MM:SS · agent:main:s002").count(),
        3,
        "{log}"
    );
    insta::assert_snapshot!("notices_log", log);
    d.intent(Intent::Notices);
    assert!(!d.console.state.notices_open);
    // `:messages` typed in the composer opens it too, and sends nothing.
    d.intent(Intent::Compose);
    d.type_text(":messages");
    d.key(crossterm::event::KeyCode::Enter);
    assert!(d.console.state.notices_open);
    assert!(d.console.state.composer.is_empty());
    d.settle().await;
    assert!(
        api.data.lock().expect("fake lock").sent.is_empty(),
        "nothing was sent"
    );
}

/// A delivery the drain gave up on is a notice naming it, why, and how to send it again;
/// its other states (sending, retrying, sent) are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_a_notice_with_the_command_that_retries_it() {
    use switchboard_types::api::OutboxStatus;
    let (api, mut d) = driven(3);
    d.settle().await;
    let update = |status, error: Option<&str>| EngineEvent::DeliveryUpdated {
        outbox_id: 7,
        channel: "webhook".into(),
        status,
        attempt: 3,
        message_id: None,
        next_at: None,
        error: error.map(str::to_string),
    };
    api.emit(update(OutboxStatus::Sending, None));
    api.emit(update(OutboxStatus::Retrying, Some("HTTP 500")));
    d.settle().await;
    assert!(d.console.state.notices.is_empty());
    api.emit(update(
        OutboxStatus::Failed,
        Some("HTTP 500 (gave up after 3 attempts)"),
    ));
    d.settle().await;
    let (_, notice) = status_and_notice(&d);
    assert!(
        notice.contains("delivery 7 to webhook failed: HTTP 500 (gave up after 3 attempts)"),
        "{notice:?}"
    );
    let logged: Vec<_> = d.console.state.notices.iter().collect();
    assert_eq!(logged.len(), 1);
    assert!(logged[0].error);
    assert!(logged[0].text.contains("`switchboard deliveries retry 7`"));
}

/// The rows' keys in the pane's order.
fn order(d: &Driver) -> Vec<String> {
    d.console
        .state
        .sessions
        .rows
        .iter()
        .map(|r| r.key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_holds_while_the_owner_moves_and_resorts_after_a_pause() {
    let (api, mut d) = driven(6);
    d.settle().await;
    let before = order(&d);
    assert_eq!(before[0], "agent:main:s000");
    // The owner moves down the list; meanwhile the last session gets a message.
    d.intent(Intent::Down);
    d.intent(Intent::Down);
    api.append("agent:main:s005", LineRole::User, "owner", "hello");
    d.settle().await;
    assert_eq!(order(&d), before, "rows moved under the owner's cursor");
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:s002")
    );
    assert!(
        d.console
            .state
            .sessions
            .order
            .marked
            .contains("agent:main:s005")
    );
    let pane = sessions_pane(&d.console.state, 120, 40).join("\n");
    assert!(pane.contains("+other") || pane.contains(" +"), "{pane}");
    insta::assert_snapshot!("held_order_marked", pane);
    // A pause (two ticks without a movement key): the list re-sorts, the mark goes, and
    // the selection stays on the same session.
    d.act(Action::Tick);
    d.act(Action::Tick);
    d.settle().await;
    assert_eq!(order(&d)[0], "agent:main:s005");
    assert!(d.console.state.sessions.order.marked.is_empty());
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:s002")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s_cycles_the_sort_activity_name_unread() {
    let fake = FakeApi::with_sessions(4, 2);
    {
        let mut data = fake.data.lock().expect("fake lock");
        for (r, name) in data
            .rows
            .iter_mut()
            .zip(["delta", "alpha", "charlie", "bravo"])
        {
            r.name = name.into();
            r.display_name = Some(name.into());
        }
    }
    let (api, mut d) = driven_with(fake);
    d.settle().await;
    let names = |d: &Driver| -> Vec<String> {
        d.console
            .state
            .sessions
            .rows
            .iter()
            .map(|r| r.name.clone())
            .collect()
    };
    assert_eq!(names(&d), ["delta", "alpha", "charlie", "bravo"]);
    d.intent(Intent::CycleSort);
    d.settle().await;
    assert_eq!(names(&d), ["alpha", "bravo", "charlie", "delta"]);
    let pane = sessions_pane(&d.console.state, 120, 40).join("\n");
    assert!(pane.contains("[by name]"), "{pane}");
    // Unread: messages to sessions not shown (the selection is `alpha`'s, s001).
    for _ in 0..3 {
        api.append("agent:main:s003", LineRole::User, "owner", "x");
    }
    api.append("agent:main:s002", LineRole::User, "owner", "x");
    d.settle().await;
    d.intent(Intent::CycleSort);
    d.settle().await;
    assert_eq!(&names(&d)[..2], ["bravo", "charlie"]);
    let pane = sessions_pane(&d.console.state, 120, 40).join("\n");
    assert!(pane.contains("[by unread]"), "{pane}");
    insta::assert_snapshot!("sorted_by_unread", pane);
    d.intent(Intent::CycleSort);
    d.settle().await;
    assert_eq!(
        names(&d)[0],
        "charlie",
        "activity: the newest message first"
    );
}

#[test]
fn ascii_mode_draws_no_box_drawing_or_unicode_marks() {
    let mut state = state_with(telegram_rows());
    state.theme = Theme::detect(Some("vt100"), None).expect("vt100");
    state
        .sessions
        .running
        .insert("agent:main:telegram:direct:1234".into());
    let s = screen(&state, 80, 24);
    for c in ['─', '│', '┌', '┐', '└', '┘', '●', '…', '·'] {
        assert!(!s.contains(c), "{c:?} in ASCII mode:\n{s}");
    }
    assert!(s.contains("+-"), "{s}");
    assert!(s.contains("@"), "the running mark's stand-in: {s}");
    insta::assert_snapshot!("ascii_mode_80x24", s);
}

#[test]
fn help_lays_out_at_60x16_with_columns_apart_and_a_legend() {
    let mut state = state_with(telegram_rows());
    state.help = true;
    let buf = render(&state, 60, 16);
    let s = text(&buf);
    assert!(s.contains("running"), "the legend: {s}");
    // Every line of the overlay stays inside the screen and its box.
    let top = s
        .lines()
        .position(|l| l.contains("Keys"))
        .expect("the help box");
    let left = s
        .lines()
        .nth(top)
        .and_then(|l| l.find('┌'))
        .expect("corner");
    for line in s.lines().skip(top).take_while(|l| !l.contains('└')) {
        let inside: String = line.chars().skip(left + 1).collect();
        // Two entries are never glued: each column's cell ends in a blank.
        assert!(
            !inside.contains("…j") && !inside.contains("quith"),
            "{line:?}"
        );
    }
    // It scrolls, and every intent's keys appear at the start of a cell on some screen.
    assert!(s.contains("↓ more"), "{s}");
    let max = switchboard_tui::view::help_max_scroll(&{
        let mut st = state.clone();
        st.width = 60;
        st.height = 16;
        st
    });
    assert!(max > 0);
    let mut screens = vec![s.clone()];
    for scroll in 1..=max {
        let mut st = state.clone();
        st.help_scroll = scroll;
        screens.push(text(&render(&st, 60, 16)));
    }
    let last = screens.last().cloned().unwrap_or_default();
    assert!(last.contains("↑ more above"), "{last}");
    let keymap = Keymap::defaults();
    for i in Intent::ALL.iter().filter(|i| **i != Intent::CycleSource) {
        let keys = keymap.keys_for(*i);
        assert!(
            screens
                .iter()
                .any(|s| s.contains(&format!(" {keys} ")) || s.contains(&format!("│{keys} "))),
            "{keys}: {screens:?}"
        );
    }
    insta::assert_snapshot!("help_60x16_scrolled_to_the_end", last);
    insta::assert_snapshot!("help_60x16", s);
}

#[test]
fn the_header_shortens_the_path_before_the_counts() {
    let mut state = state_with(telegram_rows());
    state.attached = "/home/owner/some/very/long/path/to/the/state/folder/of/switchboard".into();
    let s = screen(&state, 100, 24);
    let header = s.lines().next().unwrap_or("");
    assert!(header.contains("5 sessions"), "{header}");
    assert!(
        header.contains("0 sub-agents"),
        "the counts are whole: {header}"
    );
    assert!(
        header.contains("…") && header.contains("switchboard"),
        "the path's end stays: {header}"
    );
    // At the minimum width the path gives way entirely, the counts stay.
    let s = screen(&state, 60, 16);
    let header = s.lines().next().unwrap_or("");
    assert!(
        header.contains("5 sessions") && header.contains("0 sub"),
        "{header}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_selects_the_row_under_it_below_the_column_headers() {
    let (_api, mut d) = driven(6);
    d.settle().await;
    let r = view::regions(120, 40).sessions;
    // Border, then the headers, then the rows: the third row is at y + 4.
    d.act(Action::Click(r.x + 5, r.y + 4));
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:s002")
    );
    // A click on the headers selects nothing new.
    d.act(Action::Click(r.x + 5, r.y + 1));
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:s002")
    );
}

#[test]
fn keys_scroll_a_help_taller_than_the_screen_and_closing_starts_it_over() {
    let mut state = state_with(telegram_rows());
    state.width = 60;
    state.height = 16;
    let mut c = switchboard_tui::update::Console::new(state);
    let keymap = Keymap::defaults();
    let press = |c: &mut switchboard_tui::update::Console, code| {
        let k = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
        for a in switchboard_tui::map_event(crossterm::event::Event::Key(k), &c.state, &keymap) {
            c.update(a);
        }
    };
    use crossterm::event::KeyCode;
    press(&mut c, KeyCode::Char('?'));
    assert!(c.state.help);
    let max = view::help_max_scroll(&c.state);
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(c.state.help_scroll, 1);
    press(&mut c, KeyCode::Char('G'));
    assert_eq!(c.state.help_scroll, max);
    // Past the end it stays at the end; one up is one row up at once.
    press(&mut c, KeyCode::Char('j'));
    press(&mut c, KeyCode::Char('k'));
    assert_eq!(c.state.help_scroll, max - 1);
    // The selection under the help did not move meanwhile.
    assert_eq!(c.state.sessions.selected, 0);
    press(&mut c, KeyCode::Esc);
    assert!(!c.state.help);
    press(&mut c, KeyCode::Char('?'));
    assert_eq!(c.state.help_scroll, 0);
}

/// The names of the rows in the pane's order.
fn names(d: &Driver) -> Vec<String> {
    d.console
        .state
        .sessions
        .rows
        .iter()
        .map(|r| r.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorting_by_name_shows_the_first_names_of_every_session_not_of_the_loaded_window() {
    use switchboard_engine::store::SessionInit;
    use switchboard_types::key::SessionKey;
    let b = common::bench(serde_json::json!({}));
    // 1,000 sessions, the oldest with the names that come first: the newest 400 (what the
    // activity window holds) start at "name 0600".
    for i in 0..1_000 {
        let init = SessionInit {
            display_name: Some(if i % 2 == 0 {
                format!("Name {i:04}")
            } else {
                format!("name {i:04}")
            }),
            ..SessionInit::default()
        };
        b.engine
            .store()
            .ensure(
                &SessionKey::from_canonical(format!("agent:main:dm-{i}")),
                init,
            )
            .await
            .expect("ensure");
    }
    let api = b.engine.start();
    let mut state = State::new("engine".into(), NOW);
    state.width = 120;
    state.height = 40;
    let mut d = Driver::new(api, state);
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.rows.len(),
        400,
        "a window, not everything"
    );
    d.intent(Intent::CycleSort);
    d.settle().await;
    assert_eq!(
        &names(&d)[..4],
        ["Name 0000", "name 0001", "Name 0002", "name 0003"]
    );
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:dm-0")
    );
    let pane = sessions_pane(&d.console.state, 120, 40);
    assert!(pane[0].contains("[by name]"), "{}", pane[0]);
    assert!(!pane[0].contains("loaded"), "{}", pane[0]);
    insta::assert_snapshot!("sorted_by_name_over_every_session", pane.join("\n"));
    // The end of the list is the end of every name (the window moves as for activity).
    d.intent(Intent::Bottom);
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("agent:main:dm-999")
    );
    assert_eq!(names(&d).last().map(String::as_str), Some("name 0999"));
    // Unread stays the console's order of the loaded (newest-first) window.
    d.intent(Intent::CycleSort);
    d.settle().await;
    let pane = sessions_pane(&d.console.state, 120, 40);
    assert!(pane[0].contains("[by unread, 400 loaded]"), "{}", pane[0]);
    assert!(names(&d).contains(&"Name 0998".to_string()));
    assert!(!names(&d).contains(&"Name 0000".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_ignores_the_name_order_gets_the_loaded_rows_sorted_and_says_so() {
    let fake = FakeApi::with_sessions(600, 2);
    {
        let mut data = fake.data.lock().expect("fake lock");
        data.ignore_order = true;
        let n = data.rows.len();
        for (i, r) in data.rows.iter_mut().enumerate() {
            // Newest first: the last names belong to the newest sessions.
            r.name = format!("n{:04}", n - i);
            r.display_name = Some(r.name.clone());
        }
    }
    let (_api, mut d) = driven_with(fake);
    d.settle().await;
    d.intent(Intent::CycleSort);
    d.settle().await;
    // The loaded window (the 400 newest) in name order: the best the console can do.
    assert_eq!(&names(&d)[..2], ["n0201", "n0202"]);
    let pane = sessions_pane(&d.console.state, 120, 40);
    assert!(pane[0].contains("[by name, 400 loaded]"), "{}", pane[0]);
}
