//! What can happen in the console: user intents (from the keymap), engine events, and
//! results of background work (tagged with what they were for), all on one queue so `update` is the only place state changes.

use switchboard_types::api::{
    AbortOutcome, AgentInfo, ApiError, DeliveryCounts, EngineEvent, ExchangeDetail, ExchangesPage,
    OutboxRow, SessionsPage, TrafficCount, TranscriptPage,
};

/// A user intent, named as in the keymap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intent {
    Quit,
    Help,
    Close,
    FocusNext,
    FocusPrev,
    FocusSessions,
    FocusTranscript,
    FocusRounds,
    Zoom,
    Command,
    Down,
    Up,
    PageDown,
    PageUp,
    Top,
    Bottom,
    Filter,
    Compose,
    Open,
    /// The selected session's exchanges, as a list over the body (the drill-down).
    SessionExchanges,
    /// The exchange view's numbered entries (`[1] requester`, `[2] target`): reached by the
    /// pane keys while the view is open (`exchange_view_intent`), or by a key a user file
    /// binds to them by name.
    JumpRequester,
    JumpTarget,
    ToggleTools,
    ToggleTimestamps,
    ToggleWrap,
    ToggleFollow,
    ToggleRoundsScope,
    CycleKind,
    CycleSource,
    CycleActive,
    ToggleArchived,
    ToggleMouse,
    ToggleTraffic,
    StopPair,
    UndoStop,
    SearchNext,
    SearchPrev,
    ScrollLeft,
    ScrollRight,
    SelectPrev,
    SelectNext,
    Copy,
    CycleSort,
    Notices,
    Repaint,
}

impl Intent {
    /// Every intent, in the order the help lists them.
    pub const ALL: &[Intent] = &[
        Intent::Quit,
        Intent::Help,
        Intent::Close,
        Intent::Command,
        Intent::FocusNext,
        Intent::FocusPrev,
        Intent::FocusSessions,
        Intent::FocusTranscript,
        Intent::FocusRounds,
        Intent::Zoom,
        Intent::Down,
        Intent::Up,
        Intent::PageDown,
        Intent::PageUp,
        Intent::Top,
        Intent::Bottom,
        Intent::Filter,
        Intent::Compose,
        Intent::Open,
        Intent::SessionExchanges,
        Intent::ToggleTools,
        Intent::ToggleTimestamps,
        Intent::ToggleWrap,
        Intent::ToggleFollow,
        Intent::ToggleRoundsScope,
        Intent::CycleKind,
        Intent::CycleSource,
        Intent::CycleActive,
        Intent::ToggleArchived,
        Intent::ToggleMouse,
        Intent::ToggleTraffic,
        Intent::StopPair,
        Intent::UndoStop,
        Intent::SearchNext,
        Intent::SearchPrev,
        Intent::ScrollLeft,
        Intent::ScrollRight,
        Intent::SelectPrev,
        Intent::SelectNext,
        Intent::Copy,
        Intent::CycleSort,
        Intent::Notices,
        Intent::Repaint,
    ];

    /// The name used in the keymap file.
    pub fn name(self) -> &'static str {
        match self {
            Intent::Quit => "quit",
            Intent::Help => "help",
            Intent::Close => "close",
            Intent::FocusNext => "focus-next",
            Intent::FocusPrev => "focus-prev",
            Intent::FocusSessions => "focus-sessions",
            Intent::FocusTranscript => "focus-transcript",
            Intent::FocusRounds => "focus-rounds",
            Intent::Zoom => "zoom",
            Intent::Command => "command",
            Intent::Down => "down",
            Intent::Up => "up",
            Intent::PageDown => "page-down",
            Intent::PageUp => "page-up",
            Intent::Top => "top",
            Intent::Bottom => "bottom",
            Intent::Filter => "filter",
            Intent::Compose => "compose",
            Intent::Open => "open",
            Intent::SessionExchanges => "session-exchanges",
            Intent::JumpRequester => "jump-requester",
            Intent::JumpTarget => "jump-target",
            Intent::ToggleTools => "toggle-tools",
            Intent::ToggleTimestamps => "toggle-timestamps",
            Intent::ToggleWrap => "toggle-wrap",
            Intent::ToggleFollow => "toggle-follow",
            Intent::ToggleRoundsScope => "toggle-rounds-scope",
            Intent::CycleKind => "cycle-kind",
            Intent::CycleSource => "cycle-source",
            Intent::CycleActive => "cycle-active",
            Intent::ToggleArchived => "toggle-archived",
            Intent::ToggleMouse => "toggle-mouse",
            Intent::ToggleTraffic => "toggle-traffic",
            Intent::StopPair => "stop-pair",
            Intent::UndoStop => "undo-stop",
            Intent::SearchNext => "search-next",
            Intent::SearchPrev => "search-prev",
            Intent::ScrollLeft => "scroll-left",
            Intent::ScrollRight => "scroll-right",
            Intent::SelectPrev => "select-prev",
            Intent::SelectNext => "select-next",
            Intent::Copy => "copy",
            Intent::CycleSort => "cycle-sort",
            Intent::Notices => "notices",
            Intent::Repaint => "repaint",
        }
    }

    pub fn parse(name: &str) -> Option<Intent> {
        Intent::ALL
            .iter()
            .chain(&[Intent::JumpRequester, Intent::JumpTarget])
            .copied()
            .find(|i| i.name() == name)
    }

    /// What a key's intent means while the exchange view is open: the view numbers its two
    /// sessions (`[1] requester`, `[2] target`), so the keys of the first two panes go to
    /// them; its own intents as they are; the rest `None` (handled as usual).
    pub fn in_exchange_view(self) -> Option<Intent> {
        match self {
            Intent::FocusSessions | Intent::JumpRequester => Some(Intent::JumpRequester),
            Intent::FocusTranscript | Intent::JumpTarget => Some(Intent::JumpTarget),
            Intent::Close => Some(Intent::Close),
            _ => None,
        }
    }

    /// What the help overlay says: the description, and where a key does something else
    /// in the transcript, that too (the help is where the transcript's search is found).
    pub fn help_text(self) -> &'static str {
        match self {
            Intent::Filter => "filter / transcript: search",
            Intent::SearchNext => "next search hit, selected",
            _ => self.description(),
        }
    }

    /// What the help overlay and the hint bar say.
    pub fn description(self) -> &'static str {
        match self {
            Intent::Quit => "quit",
            Intent::Help => "help",
            Intent::Close => "close the open view",
            Intent::FocusNext => "next pane",
            Intent::FocusPrev => "previous pane",
            Intent::FocusSessions => "sessions pane",
            Intent::FocusTranscript => "transcript pane",
            Intent::FocusRounds => "rounds pane",
            Intent::Zoom => "zoom the pane / restore",
            Intent::Command => "command line; Tab completes",
            Intent::Down => "down",
            Intent::Up => "up",
            Intent::PageDown => "page down",
            Intent::PageUp => "page up",
            Intent::Top => "first / oldest",
            Intent::Bottom => "last / newest",
            Intent::Filter => "filter sessions",
            Intent::Compose => "write to the session",
            Intent::Open => "open the selected item",
            Intent::SessionExchanges => "the session's exchanges",
            Intent::JumpRequester => "exchange: the requester",
            Intent::JumpTarget => "exchange: the target",
            Intent::ToggleTools => "show/hide tool calls",
            Intent::ToggleTimestamps => "show/hide times",
            Intent::ToggleWrap => "wrap long lines",
            Intent::ToggleFollow => "follow new messages",
            Intent::ToggleRoundsScope => "rounds: this session / all",
            Intent::CycleKind => "filter by kind",
            Intent::CycleSource => "filter by source",
            Intent::CycleActive => "filter by recent activity",
            Intent::ToggleArchived => "show archived",
            Intent::ToggleMouse => "mouse capture on/off",
            Intent::ToggleTraffic => "traffic: who sends to whom",
            Intent::StopPair => "traffic: stop the pair",
            Intent::UndoStop => "traffic: undo the stop",
            Intent::SearchNext => "next search hit",
            Intent::SearchPrev => "previous search hit",
            Intent::ScrollLeft => "scroll left (wrap off)",
            Intent::ScrollRight => "scroll right (wrap off)",
            Intent::SelectPrev => "select previous message",
            Intent::SelectNext => "select next message",
            Intent::Copy => "copy the message (OSC 52)",
            Intent::CycleSort => "sort: activity/name/unread",
            Intent::Notices => "notices log",
            Intent::Repaint => "repaint the screen",
        }
    }
}

/// Everything `update` handles.
#[derive(Debug, Clone)]
pub enum Action {
    Intent(Intent),
    /// A key typed while an input box (filter, composer) has focus.
    Key(crossterm::event::KeyEvent),
    Paste(String),
    Resize(u16, u16),
    /// A left click at a screen position (mouse capture on).
    Click(u16, u16),
    Engine(Box<EngineEvent>),
    /// Some events were dropped (the console fell behind): reload everything.
    Lagged,
    /// A second passed: refresh relative times and expire the status line's message.
    Tick,
    /// The gateway connection's state changed: only the header is redrawn.
    LinkChanged,
    /// A background command finished with a message for the status line.
    Flash(String, bool),
    /// The owner's message to `key` was not sent (`error` says why: the gateway's link is
    /// down, the session refused it …): the draft gets it back rather than losing it.
    Unsent {
        key: String,
        text: String,
        error: String,
    },
    /// A page of sessions, for the request of this generation (filters and window).
    SessionsLoaded {
        generation: u64,
        result: Box<Result<SessionsPage, ApiError>>,
    },
    /// A transcript page for `key`, for the request of this generation (selection and
    /// window).
    TranscriptLoaded {
        generation: u64,
        key: String,
        result: Box<Result<TranscriptPage, ApiError>>,
    },
    /// The deliveries of session `key`.
    DeliveriesLoaded {
        key: String,
        result: Box<Result<Vec<OutboxRow>, ApiError>>,
    },
    /// How many deliveries stand in each status.
    DeliveryCountsLoaded(Box<Result<Option<DeliveryCounts>, ApiError>>),
    /// The configured agents (composer completion, the `/agents` picker).
    AgentsLoaded(Box<Result<Vec<AgentInfo>, ApiError>>),
    /// What `/status` asked about `key`.
    StatusLoaded {
        key: String,
        result: Box<Result<super::cards::StatusInfo, ApiError>>,
    },
    /// What `/abort` stopped in `key`.
    Aborted {
        key: String,
        result: Box<Result<AbortOutcome, ApiError>>,
    },
    /// What a traffic stop aborted in each session (a gateway whose send policy does not
    /// stop a running exchange: `Effect::Halt`).
    Halted(Vec<(String, Result<AbortOutcome, ApiError>)>),
    /// What `/new` found and did.
    NewSession(Box<Result<super::cards::NewSession, ApiError>>),
    /// A page of exchanges (`before`: a next page) for a list's (`list`) generation.
    ExchangesLoaded {
        list: super::exchanges::ListId,
        generation: u64,
        before: Option<String>,
        result: Box<Result<ExchangesPage, ApiError>>,
    },
    /// One exchange in full for the exchange view of this generation.
    ExchangeLoaded {
        generation: u64,
        id: String,
        result: Box<Result<Option<ExchangeDetail>, ApiError>>,
    },
    /// The traffic history asked for by the load of this generation.
    TrafficLoaded {
        generation: u64,
        result: Box<Result<Vec<TrafficCount>, ApiError>>,
    },
}
