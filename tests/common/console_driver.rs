//! The console driven as the app loop drives it, without a terminal: actions go through
//! `Console::update`, effects to the runner (against any `SessionsApi`), results and engine
//! events back in; `settle` repeats that until no load is wanted or under way.

use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::Runner;
use switchboard_tui::state::State;
use switchboard_tui::update::Console;
use switchboard_types::api::{EventStream, SessionsApi, StreamItem};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

pub struct Driver {
    pub console: Console,
    runner: Runner,
    rx: UnboundedReceiver<Action>,
    events: EventStream,
    /// Background reports (status-line flashes) seen so far, in order.
    pub flashes: Vec<(String, bool)>,
    /// How many of `flashes` `report` has handed out.
    reported: usize,
}

impl Driver {
    /// A console on `api` (call inside a tokio runtime), subscribed to its events first.
    pub fn new(api: Arc<dyn SessionsApi>, state: State) -> Driver {
        let events = api.subscribe();
        let (tx, rx) = unbounded_channel();
        let runner = Runner::new(api, tx);
        let mut console = Console::new(state);
        runner.run(console.refresh());
        Driver {
            console,
            runner,
            rx,
            events,
            flashes: Vec::new(),
            reported: 0,
        }
    }

    /// One action, then the loads it calls for (as the loop does after each batch).
    pub fn act(&mut self, a: Action) {
        let effects = self.console.update(a);
        self.runner.run(effects);
        let effects = self.console.refresh();
        self.runner.run(effects);
    }

    pub fn intent(&mut self, i: Intent) {
        self.act(Action::Intent(i));
    }

    pub fn key(&mut self, code: KeyCode) {
        self.act(Action::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }

    /// A key as the terminal delivers it, mapped as the app loop maps it (default keymap).
    pub fn press(&mut self, code: KeyCode) {
        let k = KeyEvent::new(code, KeyModifiers::NONE);
        let keymap = switchboard_tui::keymap::Keymap::defaults();
        for a in switchboard_tui::map_event(
            crossterm::event::Event::Key(k),
            &self.console.state,
            &keymap,
        ) {
            self.act(a);
        }
    }

    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    /// Hand every queued engine event and result to the console; true if there were any.
    pub fn pump(&mut self) -> bool {
        let mut any = false;
        while let Some(item) = self.events.try_next() {
            any = true;
            match item {
                StreamItem::Event(e) => self.act(Action::Engine(Box::new(e.event))),
                StreamItem::Missed(_) => self.act(Action::Lagged),
                StreamItem::Closed => break,
            }
        }
        while let Ok(a) = self.rx.try_recv() {
            any = true;
            if let Action::Flash(t, e) = &a {
                self.flashes.push((t.clone(), *e));
            }
            self.act(a);
        }
        let effects = self.console.refresh();
        self.runner.run(effects);
        any
    }

    /// Pump until no load is wanted or under way and nothing more arrives (up to 15 s).
    pub async fn settle(&mut self) {
        let mut quiet = 0;
        for _ in 0..3000 {
            let any = self.pump();
            if !any && !self.console.pending() {
                quiet += 1;
                // Twice in a row: a result posted just after the last look is not missed.
                if quiet >= 2 {
                    return;
                }
            } else {
                quiet = 0;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the console did not settle within 15 s");
    }

    /// Pump until `done` holds (up to 15 s; nothing is timed).
    pub async fn until(&mut self, what: &str, done: impl Fn(&State) -> bool) {
        for _ in 0..1500 {
            self.pump();
            if done(&self.console.state) && !self.console.pending() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "timed out waiting for {what} (condition holds: {}, loads pending: {})",
            done(&self.console.state),
            self.console.pending()
        );
    }

    /// Wait for the next background report (a status-line flash) not yet handed out.
    pub async fn report(&mut self) -> (String, bool) {
        for _ in 0..1500 {
            self.pump();
            if self.flashes.len() > self.reported {
                self.reported += 1;
                return self.flashes[self.reported - 1].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no report within 15 s");
    }
}
