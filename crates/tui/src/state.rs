//! The console's model: one struct per pane (sessions, transcript, rounds, composer,
//! traffic) and what they share (screen, focus, overlays, status line). Plain data, filled by
//! `update`, read by `view`.

use switchboard_types::api;

/// How many transcript lines the pane loads at first (the newest ones), and how many more
/// each time the user scrolls to the top of what is loaded.
pub const TRANSCRIPT_WINDOW: usize = 400;
/// The most the pane ever holds; `switchboard sessions export` is the way to read more.
pub const TRANSCRIPT_MAX: usize = 20_000;

/// Which pane has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Sessions,
    Transcript,
    Rounds,
    Composer,
    Filter,
    /// Typing a search in the transcript (`/` with the transcript focused).
    Search,
}

impl Focus {
    /// The pane this focus is in: the filter box is the sessions pane's, the search box the
    /// transcript's; the composer is no pane (it is written to, not moved in or zoomed).
    pub fn pane(self) -> Option<Pane> {
        match self {
            Focus::Sessions | Focus::Filter => Some(Pane::Sessions),
            Focus::Transcript | Focus::Search => Some(Pane::Transcript),
            Focus::Rounds => Some(Pane::Rounds),
            Focus::Composer => None,
        }
    }
}

/// The panes, in the order Tab cycles through them and the number keys name them (`1`
/// sessions, `2` transcript, `3` rounds). The composer is not among them: it is entered by
/// its own key (`i`, or Enter on a session), so Tab never lands in a text box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Sessions,
    Transcript,
    Rounds,
}

impl Pane {
    pub const ALL: [Pane; 3] = [Pane::Sessions, Pane::Transcript, Pane::Rounds];

    /// The focus of the pane itself (not its filter or search box).
    pub fn focus(self) -> Focus {
        match self {
            Pane::Sessions => Focus::Sessions,
            Pane::Transcript => Focus::Transcript,
            Pane::Rounds => Focus::Rounds,
        }
    }

    /// How the status line names it.
    pub fn name(self) -> &'static str {
        match self {
            Pane::Sessions => "sessions",
            Pane::Transcript => "transcript",
            Pane::Rounds => "rounds",
        }
    }
}

pub use super::composer::Composer;
// The panes' row types live with their panes; named here too, beside the state that holds them.
pub use super::rounds::{ExchangeRounds, RoundView, SpawnView};
pub use super::sessions::SessionRow;
pub use super::transcript::TranscriptLine;

/// The status line's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub error: bool,
    pub until_tick: u64,
    /// The answer to something the owner just did (not a background notice).
    pub owner: bool,
}

/// The whole console state.
#[derive(Debug, Clone)]
pub struct State {
    /// What the console is attached to (state folder or gateway URL).
    pub attached: String,
    /// The gateway connection under a remote API (read, never waited on, when drawing).
    pub link: Option<switchboard_types::api::Link>,
    /// The sources merged, when several are (else empty: one engine, bare keys).
    pub sources: crate::sources::Sources,
    pub now_ms: i64,
    pub ticks: u64,
    pub width: u16,
    pub height: u16,
    pub focus: Focus,
    /// Zoomed (`z`): the pane that was focused when zoomed or last since. What is drawn
    /// zoomed is `zoomed()`: the focused pane, whatever moved the focus there.
    pub zoom: Option<Pane>,
    /// The `:` command line, while it is open (it takes every key until Enter or Esc).
    pub command: Option<crate::command_line::CommandLine>,
    pub help: bool,
    /// The help's first row shown (it scrolls when the screen is too small for every key).
    pub help_scroll: usize,
    pub mouse: bool,
    pub quit: bool,
    /// What the terminal can show (ASCII borders, colours).
    pub theme: crate::theme::Theme,
    /// Every owner's answer and background notice, with times (`M` shows them).
    pub notices: crate::status::Notices,
    /// The notices log overlay is open.
    pub notices_open: bool,
    /// The newest background notice, in its own line (never over the owner's answer).
    pub notice: Option<Flash>,

    /// The sessions pane: the window of rows, the selection, filters and marks.
    pub sessions: crate::sessions::SessionsPane,
    /// The transcript pane: the selected session's loaded lines, its view and toggles.
    pub transcript: crate::transcript::TranscriptPane,
    /// The rounds pane: exchanges and spawns as they happen, the paged list, the open one.
    pub rounds: crate::rounds::RoundsPane,

    pub composer: Composer,
    /// The configured agents, once loaded (`None`: not yet).
    pub agents: Option<Vec<api::AgentInfo>>,
    /// The overlay a slash command opened (`/status`, `/agents`).
    pub card: Option<super::cards::Card>,
    pub flash: Option<Flash>,
    /// The traffic view: per-pair counts over the last hour, and the view's own state.
    pub traffic: crate::traffic::Traffic,
    /// The drill-down list (a pair's or a session's exchanges), over the traffic view or
    /// the panes; the exchange view opens over it.
    pub drill: Option<crate::drill::Drill>,
    /// Sessions' display names by key, for rows that name sessions outside their pane.
    pub names: crate::names::Names,
    /// How deliveries to channels stand: the counts, the selected session's.
    pub deliveries: crate::deliveries::Deliveries,
}

impl State {
    pub fn new(attached: String, now_ms: i64) -> State {
        State {
            attached,
            link: None,
            sources: Default::default(),
            now_ms,
            ticks: 0,
            width: 80,
            height: 24,
            focus: Focus::Sessions,
            zoom: None,
            command: None,
            help: false,
            help_scroll: 0,
            mouse: false,
            quit: false,
            theme: Default::default(),
            notices: Default::default(),
            notices_open: false,
            notice: None,
            sessions: Default::default(),
            transcript: Default::default(),
            rounds: Default::default(),
            composer: Composer::default(),
            agents: None,
            card: None,
            flash: None,
            traffic: Default::default(),
            drill: None,
            names: Default::default(),
            deliveries: crate::deliveries::Deliveries::new(),
        }
    }

    /// The pane drawn over the whole body of the screen, if zoomed: the focused one (so a
    /// focus moved by any means, Esc from the composer, a jump from the exchange view, is
    /// never to a pane not drawn), or while the composer is written in, the last one.
    pub fn zoomed(&self) -> Option<Pane> {
        self.zoom.map(|last| self.focus.pane().unwrap_or(last))
    }

    /// Show `text` in the status line for a few seconds.
    pub fn flash(&mut self, text: impl Into<String>, error: bool) {
        let text = text.into();
        self.log(&text, error, true);
        self.flash = Some(Flash {
            text,
            error,
            until_tick: self.ticks + 5,
            owner: true,
        });
    }

    /// A background notice (something agents did): in a line of its own, so it hides
    /// neither the answer to the owner's own last action nor the policy slot.
    pub fn notice(&mut self, text: impl Into<String>, error: bool) {
        let text = text.into();
        self.log(&text, error, false);
        self.notice = Some(Flash {
            text,
            error,
            until_tick: self.ticks + 5,
            owner: false,
        });
    }

    fn log(&mut self, text: &str, error: bool, owner: bool) {
        self.notices.push(crate::status::Notice {
            at_ms: self.now_ms,
            text: text.to_string(),
            error,
            owner,
        });
    }
}
