//! The console's header over `--connect`: the gateway's address and the link's state in
//! each of its states, drawn on a `TestBackend`; the header reads the state as it is when
//! drawn (a change shows on the next frame, no event needed), and a reason from the network
//! is shown escaped and kept short.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::view;
use switchboard_types::api::{Link, LinkState};
use tokio::sync::watch;

const TARGET: &str = "ws://h:18789";

/// The header row of a 120×40 console whose link is in `link`.
fn header(link: LinkState) -> String {
    let (_tx, rx) = watch::channel(link);
    header_of(rx)
}

fn header_of(rx: watch::Receiver<LinkState>) -> String {
    let mut state = State::new("unused for a remote console".into(), 1_750_000_000_000);
    state.width = 120;
    state.height = 40;
    state.link = Some(Link {
        target: TARGET.into(),
        state: rx,
        unavailable: None,
    });
    header_row(&state)
}

/// The header row of `state` drawn on a 120×40 terminal.
fn header_row(state: &State) -> String {
    let keymap = Keymap::defaults();
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    terminal
        .draw(|f| view::draw(f, state, &keymap))
        .expect("draw");
    let buf = terminal.backend().buffer();
    (0..buf.area.width)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect::<String>()
        .trim_end()
        .to_string()
}

fn connected(rtt_ms: Option<u64>, resynced: bool) -> LinkState {
    LinkState::Connected {
        protocol: 4,
        server: "switchboard 0.1.0".into(),
        rtt_ms,
        resynced,
    }
}

#[test]
fn header_connected() {
    insta::assert_snapshot!(header(connected(Some(3), false)));
}

#[test]
fn header_connected_before_the_first_round_trip() {
    insta::assert_snapshot!(header(connected(None, false)));
}

#[test]
fn header_resynced() {
    insta::assert_snapshot!(header(connected(Some(3), true)));
}

#[test]
fn header_connecting() {
    insta::assert_snapshot!(header(LinkState::Connecting { attempt: 2 }));
}

#[test]
fn header_reconnecting() {
    insta::assert_snapshot!(header(LinkState::Reconnecting {
        attempt: 3,
        retry_in_ms: 1_600,
        message: "the gateway closed the connection".into(),
    }));
}

#[test]
fn header_refused() {
    insta::assert_snapshot!(header(LinkState::Failed {
        message: "INVALID_REQUEST: unauthorized: gateway token missing or wrong".into(),
    }));
}

#[test]
fn a_reason_from_the_network_is_escaped_and_short() {
    let shown = header(LinkState::Failed {
        message: format!("\u{1b}]0;pwned\u{7}{}", "x".repeat(200)),
    });
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    // The counts after the reason stay on screen.
    assert!(shown.contains("0 sessions"), "{shown}");
}

#[test]
fn a_state_change_shows_on_the_next_frame() {
    let (tx, rx) = watch::channel(connected(Some(3), false));
    assert!(header_of(rx.clone()).contains("connected v4 · 3 ms"));
    tx.send_replace(LinkState::Reconnecting {
        attempt: 1,
        retry_in_ms: 250,
        message: "reset".into(),
    });
    assert!(
        header_of(rx).contains("reconnecting in 1s (attempt 1): reset"),
        "the header draws the state as it is now"
    );
}

/// On an OpenClaw gateway, what it does not expose is said in the rounds pane and the header
/// says `exchanges n/a`, instead of zeros that look like "no traffic".
#[test]
fn an_engine_without_rounds_says_so_instead_of_showing_zero() {
    let (_tx, rx) = watch::channel(connected(Some(3), false));
    let mut state = State::new("unused for a remote console".into(), 1_750_000_000_000);
    state.width = 120;
    state.height = 40;
    state.link = Some(Link {
        target: TARGET.into(),
        state: rx,
        unavailable: Some(
            "Not available: an OpenClaw gateway does not expose exchanges,\nrounds, announces or sub-agents (a Switchboard engine shows them).".into(),
        ),
    });
    let keymap = Keymap::defaults();
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    terminal
        .draw(|f| view::draw(f, &state, &keymap))
        .expect("draw");
    let buf = terminal.backend().buffer();
    let screen: Vec<String> = (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect();
    assert!(screen[0].contains("exchanges n/a"), "{}", screen[0]);
    assert!(!screen[0].contains("0 exchanges"), "{}", screen[0]);
    let text = screen.join("\n");
    assert!(
        text.contains("Not available: an OpenClaw gateway"),
        "{text}"
    );
    assert!(!text.contains("No exchanges or sub-agents"), "{text}");
    insta::assert_snapshot!(text);
}

/// At every width the header has room for only part of the gateway's address, it shows the
/// host whole (with or without its scheme) or leaves the address out: never a cut host
/// (`ws:…27.0.0.1:18911`, as an owner saw it at 100 columns).
#[test]
fn a_narrow_header_never_cuts_the_gateway_host() {
    for width in 60..=140u16 {
        let (_tx, rx) = watch::channel(connected(Some(3), false));
        let mut state = State::new("unused".into(), 1_750_000_000_000);
        state.width = width;
        state.height = 40;
        state.link = Some(Link {
            target: "ws://127.0.0.1:18911".into(),
            state: rx,
            unavailable: None,
        });
        let keymap = Keymap::defaults();
        let mut terminal = Terminal::new(TestBackend::new(width, 40)).expect("terminal");
        terminal
            .draw(|f| view::draw(f, &state, &keymap))
            .expect("draw");
        let buf = terminal.backend().buffer();
        let row: String = (0..buf.area.width)
            .map(|x| buf[(x, 0)].symbol().to_string())
            .collect();
        let shows_host = row.contains("127.0.0.1:18911");
        assert!(shows_host || !row.contains("18911"), "width {width}: {row}");
        assert!(
            !row.contains("ws:…") && !row.contains("…27."),
            "width {width}: {row}"
        );
    }
}

/// Issue 26 item 3: over `--connect` the exchange count still names its session, and the
/// name is cut before the gateway's address is (at 120 columns both fit; the address was
/// dropped whole when the name took its room).
#[test]
fn the_exchange_scope_gives_way_before_the_gateways_address() {
    use switchboard_tui::exchanges::{Exchanges, Scope};
    let (_tx, rx) = watch::channel(connected(Some(3), false));
    let mut state = State::new("unused".into(), 1_750_000_000_000);
    state.width = 120;
    state.height = 40;
    let target = "ws://10.0.0.5:18789";
    state.link = Some(Link {
        target: target.into(),
        state: rx,
        unavailable: None,
    });
    let key = "agent:main:telegram:direct:123456789";
    state.rounds.exchanges = Exchanges::shown(Scope::Session(key.into()), Vec::new(), false);
    state.sessions.total = 12;
    let header = header_row(&state);
    assert!(
        header.contains(&format!("{target} · connected v4")),
        "{header}"
    );
    // The name, cut in the middle to the room left (16 columns when there is room).
    let name = header
        .split("0 exchanges (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_default();
    assert!(name.contains('…') && name.ends_with("789"), "{header}");
    // Without a link to keep whole, the name has its 16 columns.
    state.link = None;
    let header = header_row(&state);
    assert!(
        header.contains("0 exchanges (…irect:123456789)"),
        "{header}"
    );
}

/// The counts' long words give way before the gateway's host does: with many sessions and a
/// long host, "sub-agents" and "exchanges" become "sub" and "exch" and the host stays
/// (before, the host was dropped whole while the long words stayed).
#[test]
fn the_host_stays_before_the_counts_long_words() {
    let (_tx, rx) = watch::channel(connected(Some(12), false));
    let mut state = State::new("unused".into(), 1_750_000_000_000);
    state.width = 120;
    state.height = 40;
    state.sessions.total = 1_234_567;
    state.link = Some(Link {
        target: "wss://gateway.example.internal:18789/switchboard".into(),
        state: rx,
        unavailable: None,
    });
    let header = header_row(&state);
    assert!(
        header.contains("gateway.example.internal:18789"),
        "{header}"
    );
    assert!(header.contains(" sub · 0 exch"), "{header}");
    assert!(header.contains("connected v4 · 12 ms"), "{header}");
    assert!(header.contains("1234567 sessions"), "{header}");
}
