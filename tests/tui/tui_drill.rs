//! The drill-down (issue 26 item 1): Enter on a traffic pair lists that pair's exchanges,
//! newest first and paged (the API narrows by the requester, the console keeps the target:
//! every one comes once, in order, across pages that hold few or none of them), Enter opens
//! one in the exchange view, Esc walks back one level at a time, and the header's breadcrumb
//! says where the owner is; `x` does the same from a session's row. Rows name sessions as the
//! sessions pane does. `M` opens the notices log from the traffic view, as its hint says.
//!
//! Snapshots live in tests/tui/snapshots/ (`INSTA_UPDATE=always cargo test --test tui tui_drill::`,
//! then read every changed `.snap`). Times are fixed (UTC), nothing is timed.

use crate::common;
use crate::common::screen::screen;

use std::sync::Arc;

use crossterm::event::KeyCode;
use switchboard_tui::drill::Origin;
use switchboard_tui::exchanges::Scope;
use switchboard_tui::state::State;
use switchboard_types::api::{
    ExchangeAnnounce, ExchangeDetail, ExchangeSummary, ExchangeTurn, SessionKind, TrafficCount,
};

use common::console_driver::Driver;
use common::fake_api::{self, FakeApi};

/// 2025-06-15 15:06:40 UTC.
const NOW: i64 = 1_750_000_000_000;
const SEC: i64 = 1_000;
const MIN: i64 = 60 * SEC;

const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:slack:group:incidents";
const SUPPORT: &str = "agent:support:main";
const RESEARCH: &str = "agent:research:main";
const VISITOR: &str = "agent:support:webchat:direct:visitor-8812";

/// Exchanges recorded, newest first: 400 of them, every fifth main → ops, the other even
/// ones main → research, the odd ones the visitor → research (the newest 132 of the visitor's)
/// then support → ops; one visitor → ops, the 331st newest: past the visitor's first page.
const RECORDED: usize = 400;
const VISITOR_TO_OPS: usize = 330;

fn id(i: usize) -> String {
    format!("0193{i:04x}-7c2e-7000-8000-00000000{i:04x}")
}

fn ends(i: usize) -> (&'static str, &'static str) {
    match i {
        VISITOR_TO_OPS => (VISITOR, OPS),
        _ if i.is_multiple_of(5) => (MAIN, OPS),
        _ if i.is_multiple_of(2) => (MAIN, RESEARCH),
        _ if i < VISITOR_TO_OPS => (VISITOR, RESEARCH),
        _ => (SUPPORT, OPS),
    }
}

fn summary(i: usize) -> ExchangeSummary {
    let (requester, target) = ends(i);
    let at = NOW - 30 * SEC - i as i64 * 10 * SEC;
    ExchangeSummary {
        id: id(i),
        kind: "send".parse().unwrap(),
        requester: requester.into(),
        target: target.into(),
        message: format!("status of INC-{}?", 4800 + i),
        started_at: at,
        ended_at: Some(at + 4 * SEC),
        status: "done".parse().unwrap(),
        rounds: 3,
        ended_reason: Some("reply_skip".parse().unwrap()),
        detail: String::new(),
        announce: Some("delivered".parse().unwrap()),
    }
}

fn turn(round: u32, speaker: &str, listener: &str, text: &str, at: i64) -> ExchangeTurn {
    ExchangeTurn {
        round,
        speaker: speaker.into(),
        listener: listener.into(),
        run_id: format!("run-{round}"),
        status: "ok".parse().unwrap(),
        text: text.into(),
        error: None,
        started_at: at,
        ended_at: Some(at + 1_200),
        tokens_in: Some(100 * round as u64),
        tokens_out: Some(20 + round as u64),
    }
}

/// The newest main → ops exchange in full.
fn detail() -> ExchangeDetail {
    let s = summary(0);
    let t0 = s.started_at;
    ExchangeDetail {
        turns: vec![
            turn(1, OPS, MAIN, "Mitigated: p95 back to 310 ms.", t0 + SEC),
            turn(2, MAIN, OPS, "Is a rollback staged?", t0 + 2 * SEC),
            turn(3, OPS, MAIN, "REPLY_SKIP", t0 + 3 * SEC),
        ],
        announce: Some(ExchangeAnnounce {
            outcome: "delivered".parse().unwrap(),
            text: Some("INC-4800 is mitigated.".into()),
            channel: Some("slack".into()),
            to: Some("group:incidents".into()),
            detail: "delivered to slack group:incidents".into(),
            delivery: None,
        }),
        summary: s,
    }
}

fn count(requester: &str, target: &str, ago: i64, exchanges: u32) -> TrafficCount {
    TrafficCount {
        requester: requester.into(),
        target: target.into(),
        minute: (NOW / MIN - ago) * MIN,
        exchanges,
        messages: exchanges * 4,
        ..TrafficCount::default()
    }
}

fn fake() -> Arc<FakeApi> {
    let mut data = fake_api::Data {
        traffic: Some(vec![
            count(MAIN, OPS, 1, 6),
            count(MAIN, OPS, 3, 4),
            count(SUPPORT, OPS, 2, 3),
            count(MAIN, RESEARCH, 4, 2),
            count(VISITOR, OPS, 30, 1),
        ]),
        ..fake_api::Data::default()
    };
    // Named as the sessions pane shows them; the visitor's session has no name (its key).
    for (i, (key, name)) in [
        (MAIN, Some("main")),
        (OPS, Some("ops #incidents")),
        (SUPPORT, Some("support")),
        (RESEARCH, Some("research")),
        (VISITOR, None),
    ]
    .into_iter()
    .enumerate()
    {
        let mut row = fake_api::row(
            key,
            name.unwrap_or(key),
            SessionKind::Main,
            NOW - i as i64 * MIN,
        );
        if name.is_none() {
            row.display_name = None;
        }
        data.rows.push(row);
    }
    data.exchanges = (0..RECORDED).map(summary).collect();
    data.exchange_details.insert(id(0), detail());
    Arc::new(FakeApi::new(data))
}

fn state(w: u16, h: u16) -> State {
    let mut s = State::new("/srv/switchboard/state".into(), NOW);
    s.width = w;
    s.height = h;
    s
}

async fn console(w: u16, h: u16) -> Driver {
    let mut d = Driver::new(fake(), state(w, h));
    d.settle().await;
    d
}

/// The console with the traffic view open (its history loaded), the busiest pair selected.
async fn traffic(w: u16, h: u16) -> Driver {
    let mut d = console(w, h).await;
    d.press(KeyCode::Char('v'));
    d.settle().await;
    assert!(d.console.state.traffic.open);
    d
}

fn shown(d: &Driver) -> String {
    let s = &d.console.state;
    screen(s, s.width, s.height)
}

/// The first line (the header).
fn header(d: &Driver) -> String {
    shown(d)
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

fn drill_ids(d: &Driver) -> Vec<String> {
    let drill = d.console.state.drill.as_ref().expect("drilled down");
    drill.list.entries.iter().map(|e| e.id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_on_a_pair_lists_its_exchanges_then_one_and_esc_walks_back_one_level_at_a_time() {
    let mut d = traffic(100, 30).await;
    let t = &d.console.state.traffic;
    assert_eq!(
        t.selected.as_ref().map(|(r, t)| (r.as_str(), t.as_str())),
        Some((MAIN, OPS))
    );
    // The traffic row names the sessions as the sessions pane does, keys cut in the middle.
    let view = shown(&d);
    assert!(view.contains("main → ops #incidents"), "{view}");
    assert!(
        view.contains("agent:…visitor-8812 → ops #incidents"),
        "{view}"
    );
    insta::assert_snapshot!("drill_0_traffic", view);

    // Enter: the pair's exchanges, newest first.
    d.press(KeyCode::Enter);
    d.settle().await;
    let drill = d.console.state.drill.as_ref().expect("drilled down");
    assert_eq!(drill.origin, Origin::Traffic);
    assert!(
        d.console.state.traffic.open,
        "the traffic view stays under the list"
    );
    assert_eq!(drill_ids(&d)[..3], [id(0), id(5), id(10)]);
    assert_eq!(header(&d), " Switchboard · Traffic › main → ops #incidents");
    insta::assert_snapshot!("drill_1_pair_exchanges", shown(&d));

    // Enter: the newest one in the exchange view, its id in the breadcrumb.
    d.press(KeyCode::Enter);
    d.settle().await;
    let v = d.console.state.rounds.exchange_view.as_ref().expect("view");
    assert_eq!(v.id(), id(0));
    assert!(v.detail.is_some());
    assert_eq!(
        header(&d),
        " Switchboard · Traffic › main → ops #incidents › 01930000…"
    );
    let view = shown(&d);
    assert!(view.contains("Announce: queued for "), "{view}");
    insta::assert_snapshot!("drill_2_exchange", view);

    // Esc: back to the list (the cursor where it was), then the traffic view, then the panes.
    d.press(KeyCode::Esc);
    assert!(d.console.state.rounds.exchange_view.is_none());
    assert!(d.console.state.drill.is_some());
    assert_eq!(header(&d), " Switchboard · Traffic › main → ops #incidents");
    d.press(KeyCode::Esc);
    assert!(d.console.state.drill.is_none());
    assert!(d.console.state.traffic.open);
    assert!(shown(&d).contains(" Traffic · by session"));
    d.press(KeyCode::Esc);
    assert!(!d.console.state.traffic.open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairs_list_pages_through_the_requesters_exchanges_and_holds_each_of_its_own_once() {
    let mut d = traffic(100, 30).await;
    d.press(KeyCode::Enter);
    d.settle().await;
    // To the end, a page at a time as the cursor nears it.
    for _ in 0..20 {
        d.press(KeyCode::Char('G'));
        d.settle().await;
    }
    let want: Vec<String> = (0..RECORDED)
        .filter(|&i| ends(i) == (MAIN, OPS))
        .map(id)
        .collect();
    assert_eq!(want.len(), 79);
    let got = drill_ids(&d);
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    assert_eq!(
        got, want,
        "every main → ops exchange, once, newest first; missing {missing:?}"
    );
    let list = &d.console.state.drill.as_ref().expect("drilled").list;
    assert!(!list.more);
    assert_eq!(list.cursor, want.len() - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_whose_first_pages_hold_none_of_its_exchanges_reads_on_until_it_finds_them() {
    let mut d = traffic(100, 30).await;
    // The visitor's pair is the quietest: the last row.
    d.press(KeyCode::Char('G'));
    d.settle().await;
    let sel = d.console.state.traffic.selected.clone();
    assert_eq!(sel, Some((VISITOR.to_string(), OPS.to_string())));
    d.press(KeyCode::Enter);
    d.settle().await;
    // The visitor's first page (100 of its exchanges, all into research) keeps none: the
    // list reads the next page by itself, from where the first one ended.
    assert_eq!(drill_ids(&d), [id(VISITOR_TO_OPS)]);
    assert!(!d.console.state.drill.as_ref().expect("drilled").list.more);
    let view = shown(&d);
    assert!(
        view.contains("Traffic › agent:support:webchat:direct:visitor-8812 → ops #incidents"),
        "{view}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_agent_a_pair_lists_every_session_of_the_two_agents() {
    let mut d = traffic(100, 30).await;
    d.press(KeyCode::Char('a'));
    d.settle().await;
    let sel = d.console.state.traffic.selected.clone();
    assert_eq!(
        sel,
        Some(("agent:main".to_string(), "agent:ops".to_string()))
    );
    d.press(KeyCode::Enter);
    d.settle().await;
    for _ in 0..20 {
        d.press(KeyCode::Char('G'));
        d.settle().await;
    }
    let want: Vec<String> = (0..RECORDED)
        .filter(|&i| ends(i) == (MAIN, OPS))
        .map(id)
        .collect();
    assert_eq!(drill_ids(&d), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_on_a_session_lists_its_exchanges_and_esc_walks_back_to_the_panes() {
    let mut d = console(100, 30).await;
    assert_eq!(d.console.state.sessions.selected_key(), Some(MAIN));
    d.press(KeyCode::Char('x'));
    d.settle().await;
    let drill = d.console.state.drill.as_ref().expect("drilled down");
    assert_eq!(drill.origin, Origin::Sessions);
    assert_eq!(drill.list.scope, Scope::Session(MAIN.into()));
    // Both ends: main's sends to ops and to research.
    assert_eq!(drill_ids(&d)[..3], [id(0), id(2), id(4)]);
    assert_eq!(header(&d), " Switchboard · Sessions › main · exchanges");
    insta::assert_snapshot!("drill_session_exchanges", shown(&d));
    d.press(KeyCode::Enter);
    d.settle().await;
    assert_eq!(
        header(&d),
        " Switchboard · Sessions › main · exchanges › 01930000…"
    );
    d.press(KeyCode::Esc);
    d.press(KeyCode::Esc);
    assert!(d.console.state.drill.is_none());
    assert!(!d.console.state.traffic.open);
    assert!(shown(&d).contains(" Sessions "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jump_from_the_exchange_view_leaves_the_drill_down_for_the_session() {
    let mut d = traffic(100, 30).await;
    d.press(KeyCode::Enter);
    d.settle().await;
    d.press(KeyCode::Enter);
    d.settle().await;
    // `2`: the target, in the panes.
    d.press(KeyCode::Char('2'));
    d.settle().await;
    let s = &d.console.state;
    assert!(s.drill.is_none() && !s.traffic.open && s.rounds.exchange_view.is_none());
    assert_eq!(s.sessions.selected_key(), Some(OPS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_leaves_the_drill_down_for_the_view_it_names() {
    let mut d = traffic(100, 30).await;
    d.press(KeyCode::Enter);
    d.settle().await;
    d.press(KeyCode::Char(':'));
    d.type_text("traffic");
    d.press(KeyCode::Enter);
    assert!(d.console.state.drill.is_none() && d.console.state.traffic.open);
    d.press(KeyCode::Enter);
    d.settle().await;
    d.press(KeyCode::Char(':'));
    d.type_text("sessions");
    d.press(KeyCode::Enter);
    let s = &d.console.state;
    assert!(s.drill.is_none() && !s.traffic.open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m_in_the_traffic_view_opens_the_notices_log_its_hint_names() {
    let mut d = traffic(100, 30).await;
    d.console.state.flash("a notice", false);
    assert!(
        shown(&d).contains("1 notice (M shows them)"),
        "the hint names it: {}",
        shown(&d)
    );
    d.press(KeyCode::Char('M'));
    assert!(
        d.console.state.notices_open,
        "M did nothing in the traffic view"
    );
    d.press(KeyCode::Char('M'));
    assert!(!d.console.state.notices_open);
    assert!(d.console.state.traffic.open);
}
