//! The exchanges the rounds pane and the drill-down list show, and the exchange view Enter
//! opens: pages of `SessionsApi::exchanges` (newest first, the next page asked for when the
//! cursor nears the end of what is loaded), a cursor, the head reloaded when an engine event
//! says exchanges changed; the view's exchange loaded in full by id. A pair's list is the
//! requester's pages with the target checked here (the API narrows by one session). Plain
//! data and the decisions about it; `update` calls in here, `view` draws it, the runner does
//! the loading.

use crate::action::Intent;
use crate::effects::Effect;
use switchboard_types::api::{
    ApiError, EngineEvent, ExchangeDetail, ExchangeSummary, ExchangesPage, ExchangesQuery,
};
use switchboard_types::text_safety::{safe_line, safe_text};

use crate::traffic::agent_of;

/// Exchanges asked for per page.
pub const EXCHANGES_PAGE: usize = 100;
/// How close to the end of what is loaded the cursor may come before the next page is asked.
const LOAD_MARGIN: usize = 10;

/// Which exchanges the list holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scope {
    /// Not chosen yet (before the first refresh): nothing is loaded.
    #[default]
    Nothing,
    All,
    Session(String),
    /// One pair's exchanges, from `requester` into `target` (a traffic row).
    Pair(PairEnds),
}

/// The two ends of a traffic row: session keys, or agents (`agent:main`) when the view
/// counts by agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairEnds {
    pub requester: String,
    pub target: String,
    pub by_agent: bool,
}

impl Scope {
    /// The session the API narrows the pages to: a pair's requester (its target is checked
    /// here); an agent pair cannot be narrowed to one session, so it scans every page.
    fn key(&self) -> Option<String> {
        match self {
            Scope::Session(k) => Some(k.clone()),
            Scope::Pair(p) if !p.by_agent => Some(p.requester.clone()),
            _ => None,
        }
    }

    /// Whether an exchange of the pages asked for belongs in the list (keys as the API
    /// gives them, before they are made safe for the screen).
    pub fn keeps(&self, e: &ExchangeSummary) -> bool {
        match self {
            Scope::Pair(p) if p.by_agent => {
                agent_of(&e.requester) == p.requester && agent_of(&e.target) == p.target
            }
            Scope::Pair(p) => e.requester == p.requester && e.target == p.target,
            _ => true,
        }
    }
}

/// Which list a load is for (the rounds pane's and the drill-down's load at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListId {
    #[default]
    Rounds,
    Drill,
}

/// The rounds pane's list.
#[derive(Debug, Clone, Default)]
pub struct Exchanges {
    /// Newest first; texts already made safe for the screen.
    pub entries: Vec<ExchangeSummary>,
    /// Older exchanges exist beyond the last entry.
    pub more: bool,
    pub cursor: usize,
    /// Entries that arrived at the head of the list above the cursor (which keeps its
    /// exchange): the newest `new_above` are ones the owner has not moved past yet, and the
    /// pane says so when they are above what it shows.
    pub new_above: usize,
    /// The owner has moved the cursor in this scope. Until then it stays on the newest
    /// exchange as new ones arrive (nothing was chosen to keep).
    pub moved: bool,
    pub scope: Scope,
    /// Why the list could not be read (shown in the pane).
    pub error: Option<String>,
    /// The first page has arrived for this scope.
    pub loaded: bool,
    /// A session to select in the sessions pane once a page shows it (a jump from the
    /// exchange view).
    pub jump: Option<String>,
    /// The list the loads are for.
    pub list: ListId,
    /// The last exchange of the last page read (the next page's `before`): with a filter
    /// (a pair) it need not be in `entries`.
    scan_end: Option<String>,
    /// The first exchange of the last head page read: the next head page holding it proves
    /// the two overlap, even when no exchange of the list is in it.
    scan_head: Option<String>,
    generation: u64,
    view_generation: u64,
    head_dirty: bool,
    want_more: bool,
    /// The load under way: its generation and `before`.
    in_flight: Option<(u64, Option<String>)>,
}

/// A summary as the console keeps it: agents' words escaped where they enter.
fn safe_summary(mut s: ExchangeSummary) -> ExchangeSummary {
    s.message = safe_line(&s.message).into_owned();
    s.detail = safe_line(&s.detail).into_owned();
    s.requester = safe_line(&s.requester).into_owned();
    s.target = safe_line(&s.target).into_owned();
    s
}

impl Exchanges {
    /// A list as loaded for `scope` (the first page, as a load would leave it).
    pub fn shown(scope: Scope, entries: Vec<ExchangeSummary>, more: bool) -> Exchanges {
        Exchanges {
            scan_end: entries.last().map(|e| e.id.clone()),
            entries: entries.into_iter().map(safe_summary).collect(),
            more,
            scope,
            loaded: true,
            ..Exchanges::default()
        }
    }

    /// An empty list for `list`, loading `scope` at the next refresh.
    pub fn new(list: ListId, scope: Scope) -> Exchanges {
        Exchanges {
            list,
            scope,
            head_dirty: true,
            ..Exchanges::default()
        }
    }

    /// A new generation for an exchange view being opened.
    pub fn next_view_generation(&mut self) -> u64 {
        self.view_generation += 1;
        self.view_generation
    }

    /// The load the list needs now, if any (one at a time); `wanted` is the scope the
    /// pane should show. A new scope starts over.
    pub fn refresh(&mut self, wanted: Scope) -> Option<Effect> {
        if wanted != self.scope {
            let jump = self.jump.take();
            *self = Exchanges {
                generation: self.generation + 1,
                view_generation: self.view_generation,
                head_dirty: true,
                scope: wanted,
                jump,
                list: self.list,
                ..Exchanges::default()
            };
        }
        if self.scope == Scope::Nothing || self.in_flight.is_some() {
            return None;
        }
        let before = if self.head_dirty {
            self.head_dirty = false;
            None
        } else if self.want_more && self.more {
            self.want_more = false;
            Some(self.scan_end.clone()?)
        } else {
            return None;
        };
        self.in_flight = Some((self.generation, before.clone()));
        Some(Effect::LoadExchanges {
            list: self.list,
            generation: self.generation,
            query: ExchangesQuery {
                key: self.scope.key(),
                before,
                since: None,
                limit: EXCHANGES_PAGE,
            },
        })
    }

    /// Loads wanted or under way.
    pub fn pending(&self) -> bool {
        self.in_flight.is_some() || (self.head_dirty && self.scope != Scope::Nothing)
    }

    /// A page arrived. The newest page replaces the head of the list (what is older and
    /// already loaded stays, so the cursor keeps its exchange); a next page is appended if
    /// it continues the list as it is now.
    pub fn loaded(
        &mut self,
        generation: u64,
        before: Option<String>,
        result: Result<ExchangesPage, ApiError>,
    ) {
        if self
            .in_flight
            .as_ref()
            .is_some_and(|(g, _)| *g == generation)
        {
            self.in_flight = None;
        }
        if generation != self.generation {
            return;
        }
        let page = match result {
            Ok(p) => p,
            Err(e) => {
                self.error = Some(format!("cannot list exchanges: {e}"));
                return;
            }
        };
        self.error = None;
        let raw_ids: std::collections::HashSet<String> =
            page.exchanges.iter().map(|e| e.id.clone()).collect();
        let raw_first = page.exchanges.first().map(|e| e.id.clone());
        let raw_last = page.exchanges.last().map(|e| e.id.clone());
        let fresh: Vec<ExchangeSummary> = page
            .exchanges
            .into_iter()
            .filter(|e| self.scope.keeps(e))
            .map(safe_summary)
            .collect();
        match before {
            None => {
                // The cursor keeps its exchange once the owner has moved it; until then it
                // follows the newest.
                let kept = self
                    .entries
                    .get(self.cursor)
                    .filter(|_| self.moved)
                    .map(|e| e.id.clone());
                // The last exchange of the list the page holds again; older ones stay when
                // the page overlaps what was read (that exchange, or the last head read).
                let last_known = self.entries.iter().rposition(|e| raw_ids.contains(&e.id));
                let overlaps = last_known.is_some()
                    || self.scan_head.as_ref().is_some_and(|h| raw_ids.contains(h));
                if page.more && overlaps {
                    let tail = match last_known {
                        Some(j) => self.entries.split_off(j + 1),
                        None => std::mem::take(&mut self.entries),
                    };
                    self.entries = fresh;
                    self.entries.extend(tail);
                } else {
                    self.entries = fresh;
                    self.more = page.more;
                    self.scan_end = raw_last;
                }
                self.scan_head = raw_first;
                if let Some(id) = kept
                    && let Some(i) = self.entries.iter().position(|e| e.id == id)
                {
                    // What is above the cursor's exchange now and was not before is new.
                    self.new_above += i.saturating_sub(self.cursor);
                    self.cursor = i;
                }
                self.new_above = self.new_above.min(self.cursor);
                self.loaded = true;
            }
            Some(b) => {
                if self.scan_end.as_ref() == Some(&b) {
                    self.entries.extend(fresh);
                    self.more = page.more;
                    self.scan_end = raw_last;
                }
            }
        }
        self.cursor = self.cursor.min(self.entries.len().saturating_sub(1));
        // A filtered page may keep few exchanges or none: read on while the list does not
        // reach past the cursor's margin (one page at a time, each bounded).
        self.want_more_near_end();
    }

    fn want_more_near_end(&mut self) {
        if self.more && self.cursor + LOAD_MARGIN >= self.entries.len() {
            self.want_more = true;
        }
    }

    /// Move the cursor; nearing the end of what is loaded asks for the next page.
    pub fn move_cursor(&mut self, intent: Intent, page: usize) {
        let last = self.entries.len().saturating_sub(1);
        self.cursor = match intent {
            Intent::Down => (self.cursor + 1).min(last),
            Intent::Up => self.cursor.saturating_sub(1),
            Intent::PageDown => (self.cursor + page).min(last),
            Intent::PageUp => self.cursor.saturating_sub(page),
            Intent::Top => 0,
            _ => last,
        };
        self.moved = true;
        // Moving up to (or past) the new ones: they are seen.
        self.new_above = self.new_above.min(self.cursor);
        self.want_more_near_end();
    }

    pub fn selected(&self) -> Option<&ExchangeSummary> {
        self.entries.get(self.cursor)
    }

    /// An engine event: does it change the list? (Exchanges starting, rounds, ends,
    /// announces, refused and chain-stopped sends.)
    pub fn event(&mut self, e: &EngineEvent) {
        if matches!(
            e,
            EngineEvent::ExchangeStarted { .. }
                | EngineEvent::ExchangeRound { .. }
                | EngineEvent::ExchangeLoopEnded { .. }
                | EngineEvent::Announce { .. }
                | EngineEvent::ExchangeEnded { .. }
                | EngineEvent::ChainStopped { .. }
                | EngineEvent::PolicyDecision { allowed: false, .. }
                | EngineEvent::ExternalChange
                | EngineEvent::SessionDeleted { .. }
        ) {
            self.head_dirty = true;
        }
    }

    /// Everything may be stale (events were missed).
    pub fn reload(&mut self) {
        self.head_dirty = true;
    }

    /// What the header says: how many exchanges the list can reach now, `+` when older
    /// ones are still to load.
    pub fn count_label(&self) -> String {
        let n = self.entries.len();
        // "1+ exchanges": more than one is loaded or known.
        let noun = if self.more {
            "exchanges"
        } else {
            switchboard_types::words::noun(n, "exchange", "exchanges")
        };
        format!("{n}{} {noun}", if self.more { "+" } else { "" })
    }
}

/// A delivery's words from the channel (its error, its message id) made safe for the screen.
fn safe_delivery(row: &mut switchboard_types::api::OutboxRow) {
    row.last_error = row.last_error.as_deref().map(|e| safe_line(e).into_owned());
    row.message_id = row.message_id.as_deref().map(|m| safe_line(m).into_owned());
}

/// The exchange view (Enter on an exchange): its summary from the list at once, the full
/// exchange when loaded.
#[derive(Debug, Clone)]
pub struct ExchangeView {
    pub summary: ExchangeSummary,
    /// Texts already made safe for the screen.
    pub detail: Option<ExchangeDetail>,
    /// A message shown in the view instead of (or above) the exchange: it vanished, a
    /// session in it was deleted, a load failed.
    pub notice: Option<String>,
    /// Lines scrolled down from the top.
    pub scroll: usize,
    generation: u64,
    dirty: bool,
    in_flight: bool,
}

impl ExchangeView {
    pub fn new(summary: ExchangeSummary, generation: u64) -> ExchangeView {
        ExchangeView {
            summary,
            detail: None,
            notice: None,
            scroll: 0,
            generation,
            dirty: true,
            in_flight: false,
        }
    }

    pub fn id(&self) -> &str {
        &self.summary.id
    }

    /// The load the view needs now, if any.
    pub fn refresh(&mut self) -> Option<Effect> {
        if !self.dirty || self.in_flight {
            return None;
        }
        self.dirty = false;
        self.in_flight = true;
        Some(Effect::LoadExchange {
            generation: self.generation,
            id: self.summary.id.clone(),
        })
    }

    pub fn pending(&self) -> bool {
        self.dirty || self.in_flight
    }

    pub fn loaded(
        &mut self,
        generation: u64,
        id: &str,
        result: Result<Option<ExchangeDetail>, ApiError>,
    ) {
        if generation != self.generation || id != self.summary.id {
            return;
        }
        self.in_flight = false;
        match result {
            Ok(Some(mut d)) => {
                d.summary = safe_summary(d.summary);
                for t in &mut d.turns {
                    t.text = safe_text(&t.text).into_owned();
                    t.error = t.error.as_deref().map(|e| safe_line(e).into_owned());
                }
                if let Some(a) = &mut d.announce {
                    a.text = a.text.as_deref().map(|t| safe_text(t).into_owned());
                    a.detail = safe_line(&a.detail).into_owned();
                    if let Some(row) = &mut a.delivery {
                        // The text is the announce's, beside it; the rest is the channel's.
                        row.text.clear();
                        safe_delivery(row);
                    }
                }
                self.summary = d.summary.clone();
                self.detail = Some(d);
                if self
                    .notice
                    .as_deref()
                    .is_some_and(|n| n.starts_with("cannot"))
                {
                    self.notice = None;
                }
            }
            Ok(None) => {
                self.detail = None;
                self.notice = Some("This exchange no longer exists (it was removed).".into());
            }
            Err(e) => self.notice = Some(format!("cannot read this exchange: {e}")),
        }
    }

    /// An engine event: reload when it is about this exchange; say so when one of its two
    /// sessions is deleted.
    pub fn event(&mut self, e: &EngineEvent) {
        let about_this = match e {
            EngineEvent::ExchangeRound { exchange_id, .. }
            | EngineEvent::ExchangeLoopEnded { exchange_id, .. }
            | EngineEvent::Announce { exchange_id, .. }
            | EngineEvent::ExchangeEnded { exchange_id, .. } => exchange_id == &self.summary.id,
            EngineEvent::ExternalChange => true,
            EngineEvent::SessionDeleted { key } => {
                if key == &self.summary.requester || key == &self.summary.target {
                    self.notice = Some(format!("{} was deleted.", safe_line(key)));
                }
                false
            }
            EngineEvent::DeliveryUpdated { .. } => {
                // The announce's delivery moved on: shown as it is, no reload.
                let row = self
                    .detail
                    .as_mut()
                    .and_then(|d| d.announce.as_mut())
                    .and_then(|a| a.delivery.as_mut());
                if let Some(row) = row
                    && row.apply(e)
                {
                    safe_delivery(row);
                }
                // A load under way may answer with the delivery as it was before this.
                self.in_flight
            }
            _ => false,
        };
        if about_this {
            self.dirty = true;
        }
    }

    /// Scroll, within `max` (the last screenful's first line).
    pub fn scroll_by(&mut self, intent: Intent, page: usize, max: usize) {
        self.scroll = match intent {
            Intent::Down => self.scroll + 1,
            Intent::Up => self.scroll.saturating_sub(1),
            Intent::PageDown => self.scroll + page,
            Intent::PageUp => self.scroll.saturating_sub(page),
            Intent::Top => 0,
            _ => max,
        }
        .min(max);
    }
}
