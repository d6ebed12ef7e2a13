//! The console's model: what is on screen and why (sessions window, selected transcript,
//! exchange timeline, composer, toggles). Plain data, filled by `update`, read by `view`.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::api::{self, AnnounceOutcome, ExchangeEnd, PolicySetting, RunStatus, SessionKind};
use crate::text_safety::{safe_line, safe_text};

/// How many transcript lines the pane loads at first (the newest ones), and how many more
/// each time the user scrolls to the top of what is loaded.
pub const TRANSCRIPT_WINDOW: usize = 400;
/// The most the pane ever holds; `switchboard sessions export` is the way to read more.
pub const TRANSCRIPT_MAX: usize = 20_000;

/// One row of the sessions pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub key: String,
    pub kind: SessionKind,
    /// Display name, or the key when there is none.
    pub name: String,
    pub channel: String,
    pub updated_at: i64,
    /// `allow` / `deny`, and whether it is this session's own override.
    pub policy: PolicySetting,
    pub policy_override: bool,
    /// Where the policy comes from, in words (the status line shows it).
    pub policy_detail: String,
    /// The policy in plain words, for the status line's policy slot.
    pub policy_words: String,
    pub archived: bool,
    /// It has a display name or label (else `name` is its key, shortened in the middle).
    pub named: bool,
    /// The start of its last message, escaped (the preview column).
    pub preview: Option<String>,
}

impl SessionRow {
    /// A row as the API lists it, made safe for the screen: names are labels stored as
    /// given, so they are escaped here, where they enter the console.
    pub fn from_api(r: &api::SessionRow) -> SessionRow {
        SessionRow {
            key: r.key.clone(),
            kind: r.kind,
            name: safe_line(&r.name).into_owned(),
            channel: safe_line(&r.channel).into_owned(),
            updated_at: r.updated_at,
            policy: r.policy.policy,
            policy_override: r.policy.is_override(),
            policy_detail: safe_line(&r.policy.detail).into_owned(),
            policy_words: safe_line(&crate::tui::status::policy_words(&r.policy)).into_owned(),
            archived: r.archived,
            named: r.display_name.is_some() || r.label.is_some(),
            preview: r.last_message.as_deref().map(|m| safe_line(m).into_owned()),
        }
    }

    /// What the status line's policy slot says about this session's send policy.
    pub fn policy_line(&self) -> String {
        self.policy_words.clone()
    }
}

/// One transcript line as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLine {
    pub seq: i64,
    /// `user`, `assistant`, `tool`, `result`, `error`, `note`.
    pub role: &'static str,
    pub timestamp: i64,
    /// Who: the sender label, `inter-session from <key> via <tool>`, or the agent.
    pub from: String,
    pub text: String,
}

impl TranscriptLine {
    /// A line as the API returns it (raw agent text), escaped for the screen.
    pub fn from_api(l: &api::TranscriptLine) -> TranscriptLine {
        TranscriptLine {
            seq: l.seq,
            role: l.role.as_str(),
            timestamp: l.timestamp,
            from: safe_line(&l.from).into_owned(),
            text: crate::tui::cells::stable(&safe_text(&l.text)).into_owned(),
        }
    }
}

/// One round of an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundView {
    pub round: u32,
    pub speaker: String,
    pub text: String,
    pub status: RunStatus,
}

/// A `sessions_send` exchange as the rounds pane draws it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExchangeRounds {
    pub exchange_id: String,
    pub requester: String,
    pub target: String,
    pub message: String,
    pub rounds: Vec<RoundView>,
    /// How the loop ended, with detail.
    pub loop_end: Option<(ExchangeEnd, String)>,
    /// The announce's outcome and detail.
    pub announce: Option<(AnnounceOutcome, String)>,
    pub done: bool,
    pub started: i64,
}

/// A spawned sub-agent as the rounds pane draws it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnView {
    pub requester: String,
    pub child: String,
    pub label: String,
    pub status: String,
    pub runtime_ms: Option<i64>,
    pub tokens: Option<(u64, u64)>,
    pub announce: Option<String>,
    pub started: i64,
}

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
    pub const CYCLE: [Focus; 4] = [
        Focus::Sessions,
        Focus::Transcript,
        Focus::Rounds,
        Focus::Composer,
    ];
}

pub use super::composer::Composer;

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
    pub link: Option<crate::api::Link>,
    pub now_ms: i64,
    pub ticks: u64,
    pub width: u16,
    pub height: u16,
    pub focus: Focus,
    pub help: bool,
    /// The help's first row shown (it scrolls when the screen is too small for every key).
    pub help_scroll: usize,
    pub mouse: bool,
    pub quit: bool,
    /// What the terminal can show (ASCII borders, colours).
    pub theme: crate::tui::theme::Theme,
    /// Every owner's answer and background notice, with times (`M` shows them).
    pub notices: crate::tui::status::Notices,
    /// The notices log overlay is open.
    pub notices_open: bool,
    /// The newest background notice, in its own line (never over the owner's answer).
    pub notice: Option<Flash>,
    /// How the sessions pane is ordered, and the rows marked with new activity.
    pub order: crate::tui::sessions_order::Order,

    /// A window of the sessions matching the filters, starting at `sessions_offset` in that
    /// (newest-first) order; `selected` is a position in the whole order, not the window.
    pub sessions: Vec<SessionRow>,
    pub total_sessions: u64,
    /// How many sessions match the filters (0 = not known: the window is all there is).
    pub matching_sessions: u64,
    pub selected: usize,
    pub sessions_offset: usize,
    pub filter: String,
    pub kind_filter: Option<SessionKind>,
    /// Only sessions active within this many minutes.
    pub active_within: Option<i64>,
    pub show_archived: bool,
    pub running: HashSet<String>,
    pub unread: HashMap<String, u32>,

    pub transcript: Vec<TranscriptLine>,
    /// The session `transcript` was read from: whenever the selection names another, the
    /// transcript is reloaded before the next frame, so the pane never shows one session's
    /// lines under another's title.
    pub transcript_key: Option<String>,
    /// Lines the selected session has in all (the pane holds only the newest window).
    pub transcript_total: i64,
    /// Where the paused view sits, its message cursor, open tool cards, horizontal scroll,
    /// the loaded window's place and the search (`tui::transcript`).
    pub transcript_view: crate::tui::transcript::TranscriptView,
    /// How many of the newest lines are loaded (grows as the user scrolls back).
    pub transcript_window: usize,
    pub tools: bool,
    pub timestamps: bool,
    pub wrap: bool,
    pub follow: bool,
    /// Replies being streamed, shown provisionally under their session's transcript.
    pub streams: crate::tui::streams::Streams,

    pub exchange_rounds: BTreeMap<String, ExchangeRounds>,
    pub spawns: BTreeMap<String, SpawnView>,
    pub rounds_all: bool,
    pub rounds_scroll: usize,
    /// The rounds pane's list of exchanges (paged from the engine) and the open exchange.
    pub exchanges: crate::tui::exchanges::Exchanges,
    pub exchange_view: Option<crate::tui::exchanges::ExchangeView>,

    pub composer: Composer,
    /// The configured agents, once loaded (`None`: not yet).
    pub agents: Option<Vec<api::AgentInfo>>,
    /// The overlay a slash command opened (`/status`, `/agents`).
    pub card: Option<super::cards::Card>,
    pub flash: Option<Flash>,
    /// Effective policy of the selected session and where it comes from (status line).
    pub selected_policy: Option<String>,
    /// The traffic view: per-pair counts over the last hour, and the view's own state.
    pub traffic: crate::tui::traffic::Traffic,
}

impl State {
    pub fn new(attached: String, now_ms: i64) -> State {
        State {
            attached,
            link: None,
            now_ms,
            ticks: 0,
            width: 80,
            height: 24,
            focus: Focus::Sessions,
            help: false,
            help_scroll: 0,
            mouse: false,
            quit: false,
            theme: Default::default(),
            notices: Default::default(),
            notices_open: false,
            notice: None,
            order: Default::default(),
            sessions: Vec::new(),
            total_sessions: 0,
            matching_sessions: 0,
            selected: 0,
            sessions_offset: 0,
            filter: String::new(),
            kind_filter: None,
            active_within: None,
            show_archived: false,
            running: HashSet::new(),
            unread: HashMap::new(),
            transcript: Vec::new(),
            transcript_key: None,
            transcript_total: 0,
            transcript_view: Default::default(),
            transcript_window: TRANSCRIPT_WINDOW,
            tools: false,
            timestamps: true,
            wrap: true,
            follow: true,
            streams: Default::default(),
            exchange_rounds: BTreeMap::new(),
            spawns: BTreeMap::new(),
            rounds_all: false,
            rounds_scroll: 0,
            exchanges: Default::default(),
            exchange_view: None,
            composer: Composer::default(),
            agents: None,
            card: None,
            flash: None,
            selected_policy: None,
            traffic: Default::default(),
        }
    }

    pub fn selected_key(&self) -> Option<&str> {
        let i = self.selected.checked_sub(self.sessions_offset)?;
        self.sessions.get(i).map(|r| r.key.as_str())
    }

    /// How many sessions the pane can scroll through.
    pub fn session_count(&self) -> usize {
        (self.matching_sessions as usize).max(self.sessions_offset + self.sessions.len())
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
        self.notices.push(crate::tui::status::Notice {
            at_ms: self.now_ms,
            text: text.to_string(),
            error,
            owner,
        });
    }
}

/// Exchanges touching `key` (or all), newest last.
pub fn exchanges_for<'a>(s: &'a State, key: Option<&str>) -> Vec<&'a ExchangeRounds> {
    let mut v: Vec<&ExchangeRounds> = s
        .exchange_rounds
        .values()
        .filter(|f| s.rounds_all || key.is_none_or(|k| f.requester == k || f.target == k))
        .collect();
    v.sort_by_key(|f| f.started);
    v
}
