//! The console: a terminal UI over a `SessionsApi`. Terminal events, engine events, ticks
//! and load results become `Action`s on one queue; `update` changes `State` and returns
//! `Effect`s, which the runner carries out off the UI task; `view` draws the state
//! (coalesced, in synchronized output, and not at all when nothing on screen changed).

pub mod action;
pub mod cards;
pub mod cells;
pub mod clipboard;
pub mod command_line;
pub mod complete;
pub mod composer;
pub mod deliveries;
pub mod drill;
pub mod effects;
pub mod exchanges;
pub mod keymap;
pub mod keys_doc;
pub mod names;
pub mod rounds;
pub(crate) mod screen;
pub mod search;
pub mod sessions;
pub mod sessions_order;
pub mod sgr;
pub mod sources;
pub mod state;
pub mod status;
pub mod streams;
pub mod terminal;
pub mod theme;
pub mod tool_cards;
pub mod traffic;
pub mod transcript;
pub mod update;
pub mod view;

use std::io::{Write, stdout};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind};
use ratatui::buffer::Buffer;
use tokio::sync::mpsc;

use action::{Action, Intent};
use effects::Runner;
use keymap::Keymap;
use state::{Focus, State};
use switchboard_types::api::{SessionsApi, StreamItem};
use update::Console;

/// Options for a console session.
pub struct Options {
    /// What the header says the console is attached to.
    pub attached: String,
    pub keymap: Keymap,
    /// Strip colours (NO_COLOR): focus and selection stay visible through bold/reverse.
    pub no_color: bool,
    /// What the terminal shows (`theme::Theme::from_env`): ASCII borders, colour depth.
    pub theme: theme::Theme,
    /// Shown as notices when the console opens (config values used other than as written).
    pub notices: Vec<String>,
    /// The session selected once the list has it (the demo opens on its liveliest one,
    /// the same every run); `None`: the first row.
    pub open_on: Option<String>,
}

/// The console's first state: header, theme, and the start-up notices in the notices log.
fn initial_state(options: &Options, now: i64) -> State {
    let mut state = State::new(options.attached.clone(), now);
    state.theme = options.theme;
    for text in &options.notices {
        state.notice(text.clone(), false);
    }
    state
}

pub use switchboard_types::api::time::now_ms;

/// Run the console on `api` until the user quits or the terminal goes away.
pub async fn run(api: Arc<dyn SessionsApi>, options: Options) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Action>();
    let (term_tx, mut term_rx) = mpsc::unbounded_channel::<Option<Event>>();
    // Listening starts here, once, for the whole run: a listener made afresh on each pass of
    // the loop misses a signal that lands while a frame is drawn, and with tokio's handler
    // installed the default action (ending the process) no longer happens either.
    let mut quit_signals = QuitSignals::new();
    // Engine events first, so nothing that happens while the screen is set up is missed.
    let events = api.subscribe();
    let api_link = api.link();
    let sources = sources::Sources::new(api.sources());
    let runner = Runner::new(api, tx.clone());
    let mut guard = terminal::TerminalGuard::enter()?;
    let (w, h) = crossterm::terminal::size()?;
    let mut state = initial_state(&options, now_ms());
    state.link = api_link.clone();
    let source_links: Vec<_> = sources
        .list
        .iter()
        .filter_map(|s| s.state.clone())
        .collect();
    state.sources = sources;
    // A source already refused or lost when the console opens is told at once.
    for (text, error) in state.sources.news() {
        state.notice(text, error);
    }
    state.width = w;
    state.height = h;
    let mut console = Console::new(state);
    if let Some(key) = &options.open_on {
        console.open_on(key.clone());
    }
    runner.run(console.refresh());
    let mut screen = screen::Screen::new(w, h, &options.theme, options.no_color)?;
    read_terminal(term_tx)?;
    let events_task = forward_events(events, tx.clone());
    // The link's state changes (dropped, reconnecting, resynced) redraw the header at once.
    let link_task = state_watch(api_link, tx.clone());
    // So do every source's.
    let source_tasks: Vec<_> = source_links
        .into_iter()
        .map(|state| watch_state(state, tx.clone()))
        .collect();
    let tick_task = tick(tx.clone());

    // Set when the terminal vanished: nothing may be written to it any more.
    let mut gone = false;
    let result: anyhow::Result<()> = async {
        loop {
            // Draw only when the picture changed: an idle console writes nothing.
            if !screen.draw(&console.state, &options.keymap)? {
                gone = true;
                return Ok(());
            }
            if console.state.quit {
                return Ok(());
            }
            let queue = match next_batch(&mut rx, &mut term_rx, &mut quit_signals).await {
                Batch::Queued(queue) => queue,
                Batch::Quit => return Ok(()),
                Batch::Gone => {
                    gone = true;
                    return Ok(());
                }
            };
            for item in queue {
                if matches!(item, Queued::Event(Event::Key(_))) {
                    panic_failpoint("console-panic-on-input");
                }
                let actions = match item {
                    Queued::Action(a) => vec![a],
                    Queued::Event(e) => map_event(e, &console.state, &options.keymap),
                };
                for a in actions {
                    if matches!(a, Action::Intent(Intent::Repaint)) {
                        // Ctrl+L: every cell drawn again.
                        screen.wipe()?;
                        continue;
                    }
                    if is_suspend(&a) {
                        #[cfg(unix)]
                        {
                            guard.suspend()?;
                            screen.wipe()?;
                        }
                        continue;
                    }
                    let effects = console.update(a);
                    write_clipboard(&effects);
                    runner.run(effects);
                }
            }
            runner.run(console.refresh());
            guard.set_mouse(console.state.mouse)?;
        }
    }
    .await;
    events_task.abort();
    tick_task.abort();
    if let Some(t) = link_task {
        t.abort();
    }
    for t in source_tasks {
        t.abort();
    }
    screen.close(gone);
    drop(guard);
    result
}

/// Terminal input on a thread of its own (crossterm's read blocks). `None` means the
/// terminal is gone (an SSH drop): the console quits instead of spinning.
fn read_terminal(term_tx: mpsc::UnboundedSender<Option<Event>>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("switchboard-input".into())
        .spawn(move || {
            loop {
                match crossterm::event::read() {
                    Ok(e) => {
                        if term_tx.send(Some(e)).is_err() {
                            return;
                        }
                    }
                    Err(_) => {
                        let _ = term_tx.send(None);
                        return;
                    }
                }
            }
        })?;
    Ok(())
}

/// The engine's events as actions; missed ones as `Lagged` (what they would have told is
/// reloaded instead).
fn forward_events(
    mut events: switchboard_types::api::EventStream,
    forward: mpsc::UnboundedSender<Action>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let action = match events.next().await {
                StreamItem::Event(e) => Action::Engine(Box::new(e.event)),
                StreamItem::Missed(_) => Action::Lagged,
                StreamItem::Closed => return,
            };
            if forward.send(action).is_err() {
                return;
            }
        }
    })
}

/// `Action::Tick` every second (the clock on screen, the status line's expiry).
fn tick(ticker: mpsc::UnboundedSender<Action>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            if ticker.send(Action::Tick).is_err() {
                return;
            }
        }
    })
}

/// What the loop does next.
enum Batch {
    /// Everything queued (a burst coalesced into one frame).
    Queued(Vec<Queued>),
    /// Stop: the action queue closed or a quit signal came.
    Quit,
    /// Stop: the terminal went away; nothing may be written to it.
    Gone,
}

/// Waits for something, then takes everything queued. Terminal events stay events until
/// their turn: a key's meaning depends on the focus the keys before it left.
async fn next_batch(
    rx: &mut mpsc::UnboundedReceiver<Action>,
    term_rx: &mut mpsc::UnboundedReceiver<Option<Event>>,
    quit_signals: &mut QuitSignals,
) -> Batch {
    let mut queue: Vec<Queued> = Vec::new();
    tokio::select! {
        a = rx.recv() => match a {
            Some(a) => queue.push(Queued::Action(a)),
            None => return Batch::Quit,
        },
        e = term_rx.recv() => match e {
            Some(Some(e)) => queue.push(Queued::Event(e)),
            _ => return Batch::Gone,
        },
        _ = quit_signals.recv() => return Batch::Quit,
    }
    while let Ok(a) = rx.try_recv() {
        queue.push(Queued::Action(a));
    }
    while let Ok(e) = term_rx.try_recv() {
        match e {
            Some(e) => queue.push(Queued::Event(e)),
            None => return Batch::Gone,
        }
    }
    Batch::Queued(queue)
}

/// Copies asked for by `update` go to the terminal as OSC 52 (the loop owns the terminal).
fn write_clipboard(effects: &[effects::Effect]) {
    for e in effects {
        if let effects::Effect::Copy { text } = e {
            let mut out = stdout();
            // A failed write means the terminal is gone: the next frame's draw finds that out
            // and quits.
            let _ = out.write_all(clipboard::osc52(text).as_bytes());
            let _ = out.flush();
        }
    }
}

/// Forwards every change of the link's state as `Action::LinkChanged`.
fn state_watch(
    link: Option<switchboard_types::api::Link>,
    tx: mpsc::UnboundedSender<Action>,
) -> Option<tokio::task::JoinHandle<()>> {
    Some(watch_state(link?.state, tx))
}

/// Forwards every change of one link state as `Action::LinkChanged`.
fn watch_state(
    mut state: tokio::sync::watch::Receiver<switchboard_types::api::LinkState>,
    tx: mpsc::UnboundedSender<Action>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while state.changed().await.is_ok() {
            if tx.send(Action::LinkChanged).is_err() {
                return;
            }
        }
    })
}

/// Panic here if the failpoint `name` is set (`SWITCHBOARD_FAILPOINT`), to test that a
/// panic leaves a usable terminal. The engine's failpoints are its own; the console checks
/// the same variable itself rather than reach into the engine.
fn panic_failpoint(name: &str) {
    if std::env::var("SWITCHBOARD_FAILPOINT").is_ok_and(|v| v == name) {
        panic!("failpoint {name}: a deliberate panic");
    }
}

/// What the loop takes off its queues: an action, or a terminal event still to be mapped.
enum Queued {
    Action(Action),
    Event(Event),
}

/// SIGTERM and SIGHUP (an SSH drop), listened to from the start of the run: either quits
/// cleanly.
struct QuitSignals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl QuitSignals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let streams = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) {
                (Ok(term), Ok(hup)) => Some((term, hup)),
                _ => {
                    tracing::warn!(
                        "cannot listen for SIGTERM/SIGHUP; they end the console as usual"
                    );
                    None
                }
            };
            Self { streams }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves when one of the signals has arrived (also one that came before the call).
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some((term, hup)) = self.streams.as_mut() {
            tokio::select! {
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            return;
        }
        std::future::pending::<()>().await
    }
}

/// The pseudo-action for Ctrl-Z (raw mode delivers it as a key).
fn is_suspend(a: &Action) -> bool {
    matches!(a, Action::Key(k) if k.code == KeyCode::Char('z') && k.modifiers.contains(KeyModifiers::CONTROL))
}

/// A terminal event as actions, depending on what has focus.
pub fn map_event(e: Event, state: &State, keymap: &Keymap) -> Vec<Action> {
    match e {
        Event::Key(k) if k.kind == KeyEventKind::Release => vec![],
        Event::Key(k) => {
            let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
            if ctrl && k.code == KeyCode::Char('z') {
                return vec![Action::Key(k)];
            }
            if ctrl && k.code == KeyCode::Char('c') {
                // In the composer it clears the draft first (update decides); on the command
                // line it closes the line.
                if (state.focus == Focus::Composer && !state.help) || state.command.is_some() {
                    return vec![Action::Key(k)];
                }
                return vec![Action::Intent(Intent::Quit)];
            }
            if keymap.intent(&k) == Some(Intent::Repaint) {
                // Repainting is asked for wherever the keyboard is.
                return vec![Action::Intent(Intent::Repaint)];
            }
            // The command line takes every other key while open (Esc closes it).
            if state.command.is_some() {
                return vec![Action::Key(k)];
            }
            if state.notices_open {
                return match keymap.intent(&k) {
                    Some(Intent::Notices | Intent::Help | Intent::Quit | Intent::Close) => {
                        vec![Action::Intent(Intent::Notices)]
                    }
                    _ => vec![],
                };
            }
            if state.help {
                // Any of these closes the help; other keys are ignored meanwhile.
                return match keymap.intent(&k) {
                    Some(Intent::Help | Intent::Quit | Intent::Close) => {
                        vec![Action::Intent(Intent::Help)]
                    }
                    // A help taller than the screen scrolls.
                    Some(
                        i @ (Intent::Down
                        | Intent::Up
                        | Intent::PageDown
                        | Intent::PageUp
                        | Intent::Top
                        | Intent::Bottom),
                    ) => vec![Action::Intent(i)],
                    _ => vec![],
                };
            }
            if state.drill.is_some() {
                return drill_keys(k, state, keymap);
            }
            if state.traffic.open {
                return traffic_keys(k, state, keymap);
            }
            // The exchange view's own keys (close, go to either session); the rest as usual.
            if state.rounds.exchange_view.is_some()
                && let Some(i) = keymap.intent(&k).and_then(Intent::in_exchange_view)
            {
                return vec![Action::Intent(i)];
            }
            // An overlay a slash command opened takes the keys until it closes.
            if state.card.is_some() {
                return vec![Action::Key(k)];
            }
            // The composer decides Tab itself (complete, else leave).
            if state.focus == Focus::Composer {
                return vec![Action::Key(k)];
            }
            if matches!(state.focus, Focus::Filter | Focus::Search) {
                return match k.code {
                    KeyCode::Tab => vec![Action::Intent(Intent::FocusNext)],
                    KeyCode::BackTab => vec![Action::Intent(Intent::FocusPrev)],
                    _ => vec![Action::Key(k)],
                };
            }
            keymap.intent(&k).map(Action::Intent).into_iter().collect()
        }
        Event::Paste(text) => vec![Action::Paste(text)],
        Event::Resize(w, h) => vec![Action::Resize(w, h)],
        Event::Mouse(m) => match m.kind {
            MouseEventKind::Down(MouseButton::Left) => vec![Action::Click(m.column, m.row)],
            MouseEventKind::ScrollDown => vec![Action::Intent(Intent::Down)],
            MouseEventKind::ScrollUp => vec![Action::Intent(Intent::Up)],
            _ => vec![],
        },
        _ => vec![],
    }
}

/// Keys in the traffic view: moving, quitting, help, closing and the view's own intents (stop a
/// pair, undo, agents/sessions) as the keymap says; a pending confirmation takes the next key.
fn traffic_keys(k: crossterm::event::KeyEvent, state: &State, keymap: &Keymap) -> Vec<Action> {
    if state.traffic.confirm.is_some() {
        // The confirmation takes the next key, whatever it is: y stops, anything else cancels.
        return vec![Action::Key(k)];
    }
    match keymap.intent(&k) {
        Some(
            i @ (Intent::Quit
            | Intent::Help
            | Intent::Close
            | Intent::Down
            | Intent::Up
            | Intent::PageDown
            | Intent::PageUp
            | Intent::Top
            | Intent::Bottom
            | Intent::ToggleTraffic
            | Intent::ToggleRoundsScope
            | Intent::StopPair
            | Intent::UndoStop
            | Intent::Open
            | Intent::Notices
            | Intent::Command),
        ) => vec![Action::Intent(i)],
        _ => vec![],
    }
}

/// Keys while drilled down (a list of exchanges, the exchange view over it): moving,
/// Enter, Esc back, and in the exchange view its numbered sessions; quitting, help, the
/// notices and the command line as anywhere.
fn drill_keys(k: crossterm::event::KeyEvent, state: &State, keymap: &Keymap) -> Vec<Action> {
    let Some(intent) = keymap.intent(&k) else {
        return vec![];
    };
    if state.rounds.exchange_view.is_some()
        && let Some(i) = intent.in_exchange_view()
    {
        return vec![Action::Intent(i)];
    }
    match intent {
        i @ (Intent::Quit
        | Intent::Help
        | Intent::Close
        | Intent::Open
        | Intent::Down
        | Intent::Up
        | Intent::PageDown
        | Intent::PageUp
        | Intent::Top
        | Intent::Bottom
        | Intent::Notices
        | Intent::Command) => vec![Action::Intent(i)],
        _ => vec![],
    }
}

/// NO_COLOR: drop every colour, keep bold/reverse/dim so focus and selection stay visible.
pub fn strip_colors(buf: &mut Buffer) {
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            if let Some(cell) = buf.cell_mut((x, y)) {
                cell.set_fg(ratatui::style::Color::Reset);
                cell.set_bg(ratatui::style::Color::Reset);
            }
        }
    }
}

#[cfg(test)]
mod start_tests {
    use super::*;

    #[test]
    fn start_up_notices_are_in_the_notices_log() {
        let options = Options {
            attached: "here".into(),
            keymap: keymap::Keymap::defaults(),
            no_color: false,
            theme: theme::Theme::default(),
            notices: vec!["config: maxPingPongTurns 9; 5 will be used".into()],
            open_on: None,
        };
        let state = initial_state(&options, 1);
        let texts: Vec<&str> = state.notices.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["config: maxPingPongTurns 9; 5 will be used"]);
    }

    /// A SIGHUP that lands while the loop is not waiting (drawing a frame) still ends the
    /// wait that follows. Listeners made at each wait lost it, and with tokio's handler in
    /// place the process then ignored the signal (CI's SIGTERM e2e test hung on that).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_signal_before_the_wait_is_not_lost() {
        let mut signals = QuitSignals::new();
        // SAFETY: raising a signal in this process; `QuitSignals::new` installed tokio's
        // handler for it, so it does not end the test binary.
        assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
        tokio::time::timeout(Duration::from_secs(10), signals.recv())
            .await
            .expect("the signal raised before the wait ends it");
    }
}

#[cfg(test)]
mod command_line_keys {
    use super::*;
    use crossterm::event::KeyEvent;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> Event {
        Event::Key(KeyEvent::new(code, modifiers))
    }

    /// With the line open, letters that are keys elsewhere (`q`, `t`, `?`) are typed, Ctrl+C
    /// goes to the line (it closes it, it does not quit), and Ctrl+L still repaints.
    #[test]
    fn the_open_line_takes_every_key_but_repaint() {
        let keymap = Keymap::defaults();
        let mut state = State::new("here".into(), 0);
        let colon = map_event(key(KeyCode::Char(':'), KeyModifiers::NONE), &state, &keymap);
        assert!(matches!(colon[..], [Action::Intent(Intent::Command)]));
        state.command = Some(command_line::CommandLine::default());
        for c in ['q', 't', '?', '1', 'z'] {
            let a = map_event(key(KeyCode::Char(c), KeyModifiers::NONE), &state, &keymap);
            assert!(matches!(a[..], [Action::Key(_)]), "{c}: {a:?}");
        }
        let a = map_event(
            key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            &state,
            &keymap,
        );
        assert!(matches!(a[..], [Action::Key(_)]), "{a:?}");
        let a = map_event(
            key(KeyCode::Char('l'), KeyModifiers::CONTROL),
            &state,
            &keymap,
        );
        assert!(matches!(a[..], [Action::Intent(Intent::Repaint)]), "{a:?}");
    }
}

#[cfg(test)]
mod drill_keys_tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn press(c: char, state: &State) -> Vec<Action> {
        let k = Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        map_event(k, state, &Keymap::defaults())
    }

    fn enter(state: &State) -> Vec<Action> {
        let k = Event::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        map_event(k, state, &Keymap::defaults())
    }

    /// The traffic view answers Enter (the pair's exchanges) and `M` (the notices its hint
    /// names: it did nothing there before); drilled down, the list takes Enter, Esc and the
    /// moves, not the panes' keys; the exchange view over it numbers its two sessions.
    #[test]
    fn the_traffic_view_and_the_drill_down_route_their_keys() {
        let mut state = State::new("here".into(), 0);
        state.traffic.open = true;
        assert!(matches!(enter(&state)[..], [Action::Intent(Intent::Open)]));
        assert!(matches!(
            press('M', &state)[..],
            [Action::Intent(Intent::Notices)]
        ));
        state.drill = Some(drill::Drill::new(
            drill::Origin::Traffic,
            exchanges::Scope::All,
        ));
        assert!(matches!(enter(&state)[..], [Action::Intent(Intent::Open)]));
        assert!(matches!(
            press('j', &state)[..],
            [Action::Intent(Intent::Down)]
        ));
        for c in ['S', 'x', 'i', 'z', '1'] {
            assert!(press(c, &state).is_empty(), "{c}");
        }
        state.rounds.exchange_view = Some(exchanges::ExchangeView::new(
            switchboard_types::api::ExchangeSummary {
                id: "e".into(),
                kind: "send".parse().unwrap(),
                requester: "a".into(),
                target: "b".into(),
                message: String::new(),
                started_at: 0,
                ended_at: None,
                status: "done".parse().unwrap(),
                rounds: 0,
                ended_reason: None,
                detail: String::new(),
                announce: None,
            },
            1,
        ));
        assert!(matches!(
            press('1', &state)[..],
            [Action::Intent(Intent::JumpRequester)]
        ));
        // The exchanges key from the panes.
        let panes = State::new("here".into(), 0);
        assert!(matches!(
            press('x', &panes)[..],
            [Action::Intent(Intent::SessionExchanges)]
        ));
    }
}
