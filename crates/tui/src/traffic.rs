//! The traffic view's model: who sends to whom, per pair of sessions and per pair of agents,
//! counted per minute over the last hour in a ring of buckets, with running totals for 1, 5
//! and 60 minutes; updated one engine event at a time, seeded once from the engine's history
//! (`SessionsApi::traffic`), expired as minutes roll over; plus the view's own state (cursor,
//! the stop confirmation, the undo hint).
//!
//! Decisions:
//! - A pair is the exchange's requester → target: every message of an exchange (the message
//!   and each reply round, whoever speaks) counts on that one pair.
//! - The agent of `agent:<id>:…` is `agent:<id>`; any other key (`global`, `unknown`, a legacy
//!   key) is a group of its own, named by the key itself.
//! - A refusal counts on its own pair: the event names the requester. An event without one
//!   (from an engine that predates the field) counts on the most recently active pair into
//!   that session, or on `? → <key>`; the seed from the engine has the real requester.
//! - The 1- and 5-minute columns are sliding windows, estimated from the per-minute ring the
//!   way rate limiters do: the last n whole minutes' buckets (the current one included) plus
//!   the bucket before them weighted by how much of it the window still covers. A count per
//!   calendar minute alone dropped every pair to 0 at each minute's start, busy or not.
//! - A seed replaces what was counted live before it was asked for: it holds all of that
//!   (the engine records an exchange before it sends its events; OpenClaw's book is read
//!   after it sent them), counted at the minute it happened, where a live count is at the
//!   minute the event arrived; merging the two minute by minute (the larger count) counted
//!   an exchange twice whenever the minutes differed (seen on OpenClaw, whose events come
//!   after a re-read, and whose loops ask for the history again when they end). What
//!   arrived after the ask may be in the seed or not: that alone is merged minute by minute
//!   by the larger count (both are lower bounds of the truth there).
//! - Memory is bounded: at most `MAX_PAIRS` pairs per table (the quietest are dropped, and
//!   the view says how many), at most `MAX_OPEN_EXCHANGES` exchanges remembered for their pair.

use std::collections::{BTreeSet, HashMap, VecDeque};

use switchboard_types::api::{
    ApiError, EngineEvent, ExchangeEnd, PolicySetting, SendKind, TrafficCount,
};

/// Minutes of history kept (the ring's length).
pub const MINUTES: usize = 60;
/// Pairs kept per table; beyond this the quietest are dropped.
pub const MAX_PAIRS: usize = 10_000;
/// Exchanges remembered (exchange id → pair) until they end, for events that carry only the id.
const MAX_OPEN_EXCHANGES: usize = 20_000;
/// Target sessions remembered per agent pair (what stopping an agent pair acts on).
const MAX_TARGETS: usize = 1_000;
/// Live counts remembered while a seed is awaited (merged with it when it comes); past this
/// the seed is merged with everything by the larger count, as if none were remembered.
const MAX_SINCE_ASK: usize = 50_000;
const MINUTE_MS: i64 = 60_000;

/// What happened in one pair in one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: u32,
    pub exchanges: u32,
    /// Exchanges that hit the ping-pong cap.
    pub capped: u32,
    /// Sends stopped by the chain limit.
    pub chain: u32,
    /// Sends refused by the target's send policy.
    pub refused: u32,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.messages = self.messages.saturating_add(o.messages);
        self.exchanges = self.exchanges.saturating_add(o.exchanges);
        self.capped = self.capped.saturating_add(o.capped);
        self.chain = self.chain.saturating_add(o.chain);
        self.refused = self.refused.saturating_add(o.refused);
    }

    fn max(&self, o: &Counts) -> Counts {
        Counts {
            messages: self.messages.max(o.messages),
            exchanges: self.exchanges.max(o.exchanges),
            capped: self.capped.max(o.capped),
            chain: self.chain.max(o.chain),
            refused: self.refused.max(o.refused),
        }
    }

    /// `self - o`, for counts known to be at least `o`.
    fn minus(&self, o: &Counts) -> Counts {
        Counts {
            messages: self.messages.saturating_sub(o.messages),
            exchanges: self.exchanges.saturating_sub(o.exchanges),
            capped: self.capped.saturating_sub(o.capped),
            chain: self.chain.saturating_sub(o.chain),
            refused: self.refused.saturating_sub(o.refused),
        }
    }
}

/// One minute of the ring: which minute it holds (minutes since the epoch) and its counts.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    minute: i64,
    counts: Counts,
}

/// One pair's traffic: the ring and its running totals.
#[derive(Debug, Clone)]
pub struct Pair {
    pub requester: String,
    pub target: String,
    ring: Box<[Bucket; MINUTES]>,
    /// Messages in this calendar minute, and in it and the four before (bucket sums, kept
    /// incrementally for sorting; the view shows `Pair::recent`, a sliding window).
    pub messages_1m: u32,
    pub messages_5m: u32,
    /// Everything in the last 60 minutes.
    pub hour: Counts,
    /// When this pair last had an event (ms), to pick the pair a refusal belongs to.
    pub last_at: i64,
    /// The sessions this pair sends into (an agent pair's; a session pair's is its target).
    pub targets: BTreeSet<String>,
}

impl Pair {
    fn new(requester: &str, target: &str) -> Pair {
        Pair {
            requester: requester.to_string(),
            target: target.to_string(),
            ring: Box::new([Bucket::default(); MINUTES]),
            messages_1m: 0,
            messages_5m: 0,
            hour: Counts::default(),
            last_at: 0,
            targets: BTreeSet::new(),
        }
    }

    /// Pings the cap or the chain limit in the last hour: a likely loop.
    pub fn looping(&self) -> bool {
        self.hour.capped > 0 || self.hour.chain > 0
    }

    /// Messages per minute, oldest first, ending at minute `now`.
    pub fn per_minute(&self, now: i64) -> impl Iterator<Item = u32> + '_ {
        (0..MINUTES as i64).map(move |i| {
            let m = now - (MINUTES as i64 - 1) + i;
            let b = &self.ring[slot(m)];
            if b.minute == m { b.counts.messages } else { 0 }
        })
    }

    /// Messages in the `minutes` before `now_ms` (a sliding window, estimated: module docs).
    pub fn recent(&self, minutes: i64, now_ms: i64) -> u32 {
        let now = minute_of(now_ms);
        let at = |m: i64| {
            let b = &self.ring[slot(m)];
            if b.minute == m { b.counts.messages } else { 0 }
        };
        let whole: u32 = (0..minutes)
            .map(|k| at(now - k))
            .fold(0, u32::saturating_add);
        let into = (now_ms - now * MINUTE_MS) as f64 / MINUTE_MS as f64;
        let edge = (f64::from(at(now - minutes)) * (1.0 - into)).round() as u32;
        whole.saturating_add(edge)
    }

    /// Merge `counts` into minute `m` (`now` is the current minute); `max` merges a seed.
    fn put(&mut self, m: i64, now: i64, counts: &Counts, max: bool) {
        let b = &mut self.ring[slot(m)];
        if b.minute != m {
            *b = Bucket {
                minute: m,
                counts: Counts::default(),
            };
        }
        let before = b.counts;
        b.counts = if max {
            before.max(counts)
        } else {
            let mut c = before;
            c.add(counts);
            c
        };
        let delta = b.counts.minus(&before);
        let age = now - m;
        if age < 1 {
            self.messages_1m = self.messages_1m.saturating_add(delta.messages);
        }
        if age < 5 {
            self.messages_5m = self.messages_5m.saturating_add(delta.messages);
        }
        self.hour.add(&delta);
    }

    /// Forget every count (a seed takes their place).
    fn clear_counts(&mut self) {
        *self.ring = [Bucket::default(); MINUTES];
        self.messages_1m = 0;
        self.messages_5m = 0;
        self.hour = Counts::default();
    }

    /// The totals again from the ring, for minute `now` (after the clock moved on).
    fn recount(&mut self, now: i64) {
        let (mut m1, mut m5, mut hour) = (0u32, 0u32, Counts::default());
        for b in self.ring.iter_mut() {
            let age = now - b.minute;
            if !(0..MINUTES as i64).contains(&age) {
                *b = Bucket::default();
                continue;
            }
            if age < 1 {
                m1 = m1.saturating_add(b.counts.messages);
            }
            if age < 5 {
                m5 = m5.saturating_add(b.counts.messages);
            }
            hour.add(&b.counts);
        }
        self.messages_1m = m1;
        self.messages_5m = m5;
        self.hour = hour;
    }
}

fn slot(minute: i64) -> usize {
    minute.rem_euclid(MINUTES as i64) as usize
}

/// The minute (since the epoch) holding `ms`.
pub fn minute_of(ms: i64) -> i64 {
    ms.div_euclid(MINUTE_MS)
}

/// Pairs of one kind (sessions or agents), and their order for the table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    index: HashMap<(String, String), usize>,
    pub pairs: Vec<Pair>,
    /// Indexes into `pairs`, busiest first (messages in 5 minutes, then in 60); rebuilt by
    /// `Traffic::prepare` when something changed.
    pub order: Vec<usize>,
    dirty: bool,
    /// How many of `order`'s first entries are in order.
    sorted: usize,
    /// Pairs dropped to keep the table within `MAX_PAIRS`.
    pub dropped: u64,
}

impl Table {
    fn pair(&mut self, requester: &str, target: &str) -> &mut Pair {
        let key = (requester.to_string(), target.to_string());
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                if self.pairs.len() >= MAX_PAIRS + MAX_PAIRS / 10 {
                    self.shrink();
                }
                self.pairs.push(Pair::new(requester, target));
                self.index.insert(key, self.pairs.len() - 1);
                self.pairs.len() - 1
            }
        };
        self.dirty = true;
        &mut self.pairs[i]
    }

    pub fn get(&self, requester: &str, target: &str) -> Option<&Pair> {
        self.index
            .get(&(requester.to_string(), target.to_string()))
            .map(|&i| &self.pairs[i])
    }

    /// Keep the `MAX_PAIRS` busiest (by the hour's messages, then the latest activity); a
    /// tenth of the cap is let in before this runs, so it runs rarely.
    fn shrink(&mut self) {
        if self.pairs.len() <= MAX_PAIRS {
            return;
        }
        self.pairs.sort_by_key(|p| {
            (
                std::cmp::Reverse(p.hour.messages),
                std::cmp::Reverse(p.last_at),
            )
        });
        self.dropped += (self.pairs.len() - MAX_PAIRS) as u64;
        self.pairs.truncate(MAX_PAIRS);
        self.reindex();
    }

    fn reindex(&mut self) {
        self.index = self
            .pairs
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.requester.clone(), p.target.clone()), i))
            .collect();
        self.order.clear();
        self.dirty = true;
    }

    /// The minute is now `now`: totals again, and pairs with nothing left in the hour go
    /// (unless `keep` wants them, e.g. a stopped pair still to be undone).
    fn roll(&mut self, now: i64, keep: impl Fn(&Pair) -> bool) {
        for p in &mut self.pairs {
            p.recount(now);
        }
        let before = self.pairs.len();
        self.pairs
            .retain(|p| p.hour != Counts::default() || keep(p));
        if self.pairs.len() != before {
            self.reindex();
        }
        self.dirty = true;
    }

    /// Order the pairs, busiest first, at least the first `top` of them: a frame needs only
    /// the rows around the cursor, so the rest is left unordered (O(pairs), not
    /// O(pairs · log pairs), per frame).
    fn sort(&mut self, top: usize) {
        if !self.dirty && self.order.len() == self.pairs.len() && top <= self.sorted {
            return;
        }
        let pairs = &self.pairs;
        self.order.clear();
        self.order.extend(0..pairs.len());
        // Integer keys only (the index breaks ties: first seen first).
        let key = |&i: &usize| {
            (
                std::cmp::Reverse(pairs[i].messages_5m),
                std::cmp::Reverse(pairs[i].hour.messages),
                i,
            )
        };
        if top < self.order.len() {
            self.order.select_nth_unstable_by_key(top, key);
            self.order[..top].sort_unstable_by_key(key);
            self.sorted = top;
        } else {
            self.order.sort_unstable_by_key(key);
            self.sorted = self.order.len();
        }
        self.dirty = false;
    }
}

/// The agent a session key belongs to, as the by-agent table names it (with the key's
/// source when it names one: the same agent on two sources is two agents).
pub fn agent_of(key: &str) -> &str {
    let bare = switchboard_types::api::source::SessionRef::parse(key).key;
    let lead = key.len() - bare.len();
    match bare.strip_prefix("agent:") {
        Some(rest) => match rest.find(':') {
            Some(end) if end > 0 => &key[..lead + 6 + end],
            _ => key,
        },
        None => key,
    }
}

/// Stopping a pair: `/send off` into these sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopPlan {
    /// `requester → target` as the table shows it.
    pub label: String,
    /// The target as the table shows it (a session, or an agent).
    pub target: String,
    pub sessions: Vec<String>,
    /// The sessions sending into them (the pair's other side): with `sessions`, where a
    /// running step is aborted on a gateway whose policy does not stop a running exchange.
    pub requesters: Vec<String>,
    /// Each session's own override before the stop (`Inherit`: none), as the sessions pane
    /// knew it when the stop was confirmed; what undo puts back. `None`: not known (the
    /// session was not on the loaded page), and undo clears the override.
    pub previous: Vec<Option<PolicySetting>>,
    /// The other pairs into these sessions (`requester → target`) a `/send off` stops too.
    pub others: Vec<String>,
    /// Stopped the narrower way (agent-to-agent sends only): undone the same way.
    pub agents_only: bool,
}

/// The `/send` word that sets `p` again.
fn send_word(p: PolicySetting) -> &'static str {
    match p {
        PolicySetting::Allow => "on",
        PolicySetting::Deny => "off",
        PolicySetting::Inherit => "inherit",
    }
}

impl StopPlan {
    /// The confirmation the owner answers: everything `y` affects (the other pairs into the
    /// same sessions, and their replies to their chats, which `/send off` holds back too),
    /// the narrower `a` (agent-to-agent sends only), and `n`.
    pub fn prompt(&self) -> String {
        let on = if self.sessions.len() == 1 && self.sessions[0] == self.target {
            self.target.clone()
        } else {
            format!(
                "{} session{} of {} shown ({})",
                self.sessions.len(),
                if self.sessions.len() == 1 { "" } else { "s" },
                self.target,
                self.sessions.join(", ")
            )
        };
        let also = match self.others.len() {
            0 => String::new(),
            _ => format!(", also stops {}", self.others.join(", ")),
        };
        let (its, it) = if self.sessions.len() == 1 {
            ("its replies to its chat", "it")
        } else {
            ("their replies to their chats", "them")
        };
        // The keys first: at 60 columns the prompt wraps to three lines and what follows
        // them may be cut.
        format!(
            "stop {}? y: /send off · a: agent sends only · n: cancel. /send off on {on}{also}, \
             and holds {its}; a stops only agent sends into {it}, and {its} go on",
            self.label
        )
    }

    fn on(&self) -> String {
        if self.sessions.len() == 1 {
            self.sessions[0].clone()
        } else {
            format!("{} sessions of {}", self.sessions.len(), self.target)
        }
    }
}

/// Where the history seed stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Seed {
    /// Not asked yet (or asked again after missed events).
    #[default]
    Wanted,
    /// Asked; the answer of this generation is awaited.
    Asked(u64),
    Done,
    /// The engine cannot tell: counting live events only, since the console started.
    Unavailable(String),
}

/// What the traffic view needs done (turned into effects by `update`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Owner messages (`/send off`, `/send inherit`) into these sessions.
    Send(Vec<(String, String)>),
    /// A stop: `/send off` messages, then, where the gateway's policy does not stop an
    /// exchange already running (`SessionsApi::policy_stops_exchanges`), the pair's running
    /// steps in these sessions aborted.
    Stop {
        sends: Vec<(String, String)>,
        halt: Vec<String>,
    },
    /// The narrower stop: agent-to-agent sends into `keys` refused (their replies go on).
    StopAgents {
        keys: Vec<String>,
    },
    /// Its undo.
    ResumeAgents {
        keys: Vec<String>,
    },
    Close,
}

/// The traffic model and the view's state.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    pub open: bool,
    pub by_agent: bool,
    /// The pair under the cursor (kept across re-sorting) and its row.
    pub selected: Option<(String, String)>,
    pub cursor: usize,
    /// The current minute (minutes since the epoch).
    pub now: i64,
    /// The clock as last told (ms), for the sliding windows.
    pub now_ms: i64,
    pub sessions: Table,
    pub agents: Table,
    /// `None`: an exchange whose requester is not known for sure (`unattributed`), which
    /// draws no edge and counts in no pair.
    open_exchanges: HashMap<String, Option<(String, String)>>,
    exchange_order: VecDeque<String>,
    /// Sessions whose `/send` is off (set from this view or seen in a policy change).
    pub stopped: BTreeSet<String>,
    pub confirm: Option<StopPlan>,
    /// What `u` undoes.
    pub last_stop: Option<StopPlan>,
    /// The view's answer to the owner's last stop or undo.
    pub note: Option<String>,
    pub seed: Seed,
    seed_generation: u64,
    /// Live counts since the seed was asked for (requester, target, when, counts); `None`
    /// when more came than `MAX_SINCE_ASK`.
    since_ask: Option<Vec<(String, String, i64, Counts)>>,
}

impl Traffic {
    /// The table shown now.
    pub fn table(&self) -> &Table {
        if self.by_agent {
            &self.agents
        } else {
            &self.sessions
        }
    }

    /// Count `counts` at `at_ms` on the session pair and its agent pair (an event: added,
    /// and remembered while a seed is awaited).
    fn live(&mut self, requester: &str, target: &str, at_ms: i64, counts: Counts) {
        if matches!(self.seed, Seed::Asked(_))
            && let Some(log) = &mut self.since_ask
        {
            if log.len() < MAX_SINCE_ASK {
                log.push((requester.to_string(), target.to_string(), at_ms, counts));
            } else {
                self.since_ask = None;
            }
        }
        self.count(requester, target, at_ms, counts, false);
    }

    /// Count `counts` at `at_ms` on the session pair and its agent pair.
    fn count(&mut self, requester: &str, target: &str, at_ms: i64, counts: Counts, max: bool) {
        let m = minute_of(at_ms);
        if m > self.now {
            self.roll(m);
        }
        if self.now - m >= MINUTES as i64 {
            return;
        }
        let now = self.now;
        let p = self.sessions.pair(requester, target);
        p.put(m, now, &counts, max);
        p.last_at = p.last_at.max(at_ms);
        let (ra, ta) = (agent_of(requester), agent_of(target));
        let a = self.agents.pair(ra, ta);
        a.put(m, now, &counts, max);
        a.last_at = a.last_at.max(at_ms);
        if a.targets.len() < MAX_TARGETS || a.targets.contains(target) {
            a.targets.insert(target.to_string());
        }
    }

    /// The clock moved to minute `now`: what left the windows leaves the totals.
    fn roll(&mut self, now: i64) {
        if now <= self.now {
            return;
        }
        self.now = now;
        self.expire();
    }

    /// Totals again for the current minute; pairs with nothing left go (stopped ones stay).
    fn expire(&mut self) {
        let (now, stopped) = (self.now, &self.stopped);
        self.sessions.roll(now, |p| stopped.contains(&p.target));
        self.agents
            .roll(now, |p| p.targets.iter().any(|t| stopped.contains(t)));
    }

    /// A second passed (`now_ms`): expire what the last minute took out of the windows.
    pub fn tick(&mut self, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.roll(minute_of(now_ms));
    }

    /// One engine event at `now_ms`.
    pub fn event(&mut self, e: &EngineEvent, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        match e {
            EngineEvent::ExchangeStarted {
                exchange_id,
                unattributed: true,
                ..
            } => self.remember(exchange_id, None),
            EngineEvent::ExchangeStarted {
                exchange_id,
                requester,
                target,
                ..
            } => {
                self.remember(exchange_id, Some((requester, target)));
                let c = Counts {
                    messages: 1,
                    exchanges: 1,
                    ..Counts::default()
                };
                self.live(requester, target, now_ms, c);
            }
            EngineEvent::ExchangeRound {
                exchange_id,
                round,
                speaker,
                listener,
                ..
            } => {
                // Round 1 is the target's reply; then requester and target alternate.
                let (requester, target) = match self.open_exchanges.get(exchange_id) {
                    Some(Some((r, t))) => (r.clone(), t.clone()),
                    // Its requester is not known: no edge to count it on.
                    Some(None) => return,
                    None if round % 2 == 1 => (listener.clone(), speaker.clone()),
                    None => (speaker.clone(), listener.clone()),
                };
                let c = Counts {
                    messages: 1,
                    ..Counts::default()
                };
                self.live(&requester, &target, now_ms, c);
            }
            EngineEvent::ExchangeLoopEnded {
                exchange_id,
                reason: ExchangeEnd::Cap,
                ..
            } => {
                if let Some(Some((r, t))) = self.open_exchanges.get(exchange_id).cloned() {
                    let c = Counts {
                        capped: 1,
                        ..Counts::default()
                    };
                    self.live(&r, &t, now_ms, c);
                }
            }
            // A gateway that cannot say why a loop stopped (OpenClaw) counts a loop that ran
            // to its cap in its history, not in the event: ask for the history again (the
            // seed merges by taking the larger count, so nothing is counted twice).
            EngineEvent::ExchangeLoopEnded {
                reason: ExchangeEnd::NotRecorded,
                ..
            } => self.lagged(),
            EngineEvent::ExchangeEnded { exchange_id, .. } => {
                self.open_exchanges.remove(exchange_id);
            }
            EngineEvent::ChainStopped {
                requester, target, ..
            } => {
                let c = Counts {
                    chain: 1,
                    exchanges: 1,
                    ..Counts::default()
                };
                self.live(requester, target, now_ms, c);
            }
            EngineEvent::PolicyDecision {
                key,
                action,
                allowed: false,
                requester,
                ..
            } if *action == SendKind::Send => {
                let requester = requester.clone().unwrap_or_else(|| {
                    self.sessions
                        .pairs
                        .iter()
                        .filter(|p| &p.target == key)
                        .max_by_key(|p| p.last_at)
                        .map_or_else(|| "?".to_string(), |p| p.requester.clone())
                });
                let c = Counts {
                    refused: 1,
                    ..Counts::default()
                };
                self.live(&requester, key, now_ms, c);
            }
            EngineEvent::PolicyChanged { key, policy, .. } => {
                if *policy == PolicySetting::Deny {
                    self.stopped.insert(key.clone());
                } else {
                    self.stopped.remove(key);
                }
            }
            _ => {}
        }
    }

    fn remember(&mut self, exchange_id: &str, edge: Option<(&str, &str)>) {
        if self.open_exchanges.len() >= MAX_OPEN_EXCHANGES {
            while let Some(old) = self.exchange_order.pop_front() {
                if self.open_exchanges.remove(&old).is_some() {
                    break;
                }
            }
        }
        self.open_exchanges.insert(
            exchange_id.to_string(),
            edge.map(|(r, t)| (r.to_string(), t.to_string())),
        );
        self.exchange_order.push_back(exchange_id.to_string());
        // Ended open_exchanges leave their ids in the queue: drop those when it grows past twice
        // the map, so it stays bounded too.
        if self.exchange_order.len() > 2 * MAX_OPEN_EXCHANGES {
            let open_exchanges = &self.open_exchanges;
            self.exchange_order
                .retain(|id| open_exchanges.contains_key(id));
        }
    }

    /// Events were missed: the history is asked for again when the view is open.
    pub fn lagged(&mut self) {
        if !matches!(self.seed, Seed::Unavailable(_)) {
            self.seed = Seed::Wanted;
        }
    }

    /// The history load the view needs now: `(generation, since)`.
    pub fn wanted_load(&mut self, now_ms: i64) -> Option<(u64, i64)> {
        if !self.open || self.seed != Seed::Wanted {
            return None;
        }
        // The windows end now, also when nothing happened this minute yet.
        self.roll(minute_of(now_ms));
        self.seed_generation += 1;
        self.seed = Seed::Asked(self.seed_generation);
        self.since_ask = Some(Vec::new());
        let since = (minute_of(now_ms) - (MINUTES as i64 - 1)) * MINUTE_MS;
        Some((self.seed_generation, since))
    }

    /// The engine's history arrived (for the load of `generation`).
    pub fn loaded(&mut self, generation: u64, result: Result<Vec<TrafficCount>, ApiError>) {
        if self.seed != Seed::Asked(generation) {
            return;
        }
        match result {
            Ok(counts) => {
                // Without what came since the ask, nothing can be replaced: merged as is.
                let since_ask = self.since_ask.take();
                if since_ask.is_some() {
                    for p in self.sessions.pairs.iter_mut().chain(&mut self.agents.pairs) {
                        p.clear_counts();
                    }
                }
                let replace = since_ask.is_some();
                for c in counts {
                    let counts = Counts {
                        messages: c.messages,
                        exchanges: c.exchanges,
                        capped: c.capped,
                        chain: c.chain_stopped,
                        refused: c.refused,
                    };
                    self.count(&c.requester, &c.target, c.minute, counts, !replace);
                }
                // Each minute's counts since the ask, merged by the larger count.
                let mut minutes: HashMap<(String, String, i64), Counts> = HashMap::new();
                for (r, t, at, c) in since_ask.unwrap_or_default() {
                    minutes.entry((r, t, minute_of(at))).or_default().add(&c);
                }
                for ((r, t, m), c) in minutes {
                    self.count(&r, &t, m * MINUTE_MS, c, true);
                }
                self.expire();
                self.seed = Seed::Done;
            }
            Err(e) => {
                self.since_ask = None;
                self.seed = Seed::Unavailable(e.to_string());
            }
        }
    }

    /// Before a frame of `rows` rows: order the shown table (as far as the screen and the
    /// cursor need) and put the cursor on the selected pair.
    pub fn prepare(&mut self, rows: usize) {
        if !self.open {
            return;
        }
        let by_agent = self.by_agent;
        let t = if by_agent {
            &mut self.agents
        } else {
            &mut self.sessions
        };
        // Room to move a page down before the next frame orders more.
        t.sort(self.cursor + 2 * rows.max(1));
        let mut found = self.selected.as_ref().and_then(|(r, tg)| {
            let at = *t.index.get(&(r.clone(), tg.clone()))?;
            t.order.iter().position(|&i| i == at)
        });
        if found.is_some_and(|i| i >= t.sorted) {
            // The selected pair fell far down: order everything once to find its row.
            t.sort(usize::MAX);
            found = self.selected.as_ref().and_then(|(r, tg)| {
                let at = *t.index.get(&(r.clone(), tg.clone()))?;
                t.order.iter().position(|&i| i == at)
            });
        }
        match found {
            Some(i) => self.cursor = i,
            None => {
                self.cursor = self.cursor.min(t.order.len().saturating_sub(1));
                self.selected = t
                    .order
                    .get(self.cursor)
                    .map(|&i| (t.pairs[i].requester.clone(), t.pairs[i].target.clone()));
            }
        }
    }

    /// Move the cursor by `delta` rows.
    pub fn move_cursor(&mut self, delta: isize) {
        let t = self.table();
        let last = t.order.len().saturating_sub(1);
        let to = self.cursor.saturating_add_signed(delta).min(last);
        // Beyond the rows ordered so far the pair is picked once the next frame orders them.
        let selected = t
            .order
            .get(to)
            .filter(|_| to < t.sorted)
            .map(|&i| (t.pairs[i].requester.clone(), t.pairs[i].target.clone()));
        self.cursor = to;
        self.selected = selected;
    }

    /// `v`: open (asking for the history the first time) or close.
    pub fn toggle(&mut self) {
        self.open = !self.open;
        self.confirm = None;
    }

    /// Whether the pair sends only into stopped sessions.
    pub fn is_stopped(&self, p: &Pair) -> bool {
        if self.by_agent {
            !p.targets.is_empty() && p.targets.iter().all(|t| self.stopped.contains(t))
        } else {
            self.stopped.contains(&p.target)
        }
    }

    /// A key typed while the view is open.
    /// The answer to a pending stop: `y` stops, anything else cancels (a stop is never done by
    /// a stray key). `previous` tells each session's override now, for the undo.
    pub fn answer(
        &mut self,
        c: char,
        previous: &dyn Fn(&str) -> Option<PolicySetting>,
    ) -> Option<Command> {
        let mut plan = self.confirm.take()?;
        match c {
            'y' | 'Y' => {
                plan.previous = plan.sessions.iter().map(|k| previous(k)).collect();
                Some(self.stop(plan))
            }
            'a' | 'A' => Some(self.stop_agents(plan)),
            _ => {
                self.note = Some(format!("not stopped: {}", plan.label));
                None
            }
        }
    }

    /// Ask to stop the selected pair: the next key confirms or cancels.
    pub fn ask_stop(&mut self) -> Option<Command> {
        self.confirm = self.plan();
        if self.confirm.is_none() {
            self.note = Some("no pair selected: nothing to stop".into());
        }
        None
    }

    /// Count by agent instead of by session, or back.
    pub fn toggle_by_agent(&mut self) {
        self.by_agent = !self.by_agent;
        self.selected = None;
        self.cursor = 0;
    }

    /// Esc: cancel the confirmation, else close the view.
    pub fn escape(&mut self) -> Option<Command> {
        match self.confirm.take() {
            Some(plan) => {
                self.note = Some(format!("not stopped: {}", plan.label));
                None
            }
            None => Some(Command::Close),
        }
    }

    fn plan(&self) -> Option<StopPlan> {
        let (r, t) = self.selected.as_ref()?;
        let p = self.table().get(r, t)?;
        let (sessions, requesters): (Vec<String>, Vec<String>) = if self.by_agent {
            // The target sessions this agent pair still shows traffic into (the last hour),
            // and the sessions of the requesting agent that sent into them.
            let shown: Vec<&Pair> = self
                .sessions
                .pairs
                .iter()
                .filter(|s| agent_of(&s.requester) == p.requester && p.targets.contains(&s.target))
                .collect();
            let targets = p
                .targets
                .iter()
                .filter(|t| shown.iter().any(|s| &s.target == *t))
                .cloned()
                .collect();
            let senders: BTreeSet<String> = shown.iter().map(|s| s.requester.clone()).collect();
            (targets, senders.into_iter().collect())
        } else {
            (vec![p.target.clone()], vec![p.requester.clone()])
        };
        if sessions.is_empty() {
            return None;
        }
        // Every other pair sending into the same sessions: `/send off` stops them too.
        let others: BTreeSet<String> = self
            .sessions
            .pairs
            .iter()
            .filter(|s| sessions.contains(&s.target) && !requesters.contains(&s.requester))
            .map(|s| format!("{} → {}", s.requester, s.target))
            .collect();
        Some(StopPlan {
            label: format!("{} → {}", p.requester, p.target),
            target: p.target.clone(),
            sessions,
            requesters,
            previous: Vec::new(),
            others: others.into_iter().collect(),
            agents_only: false,
        })
    }

    /// The narrower stop: only agent-to-agent sends into the plan's sessions are refused;
    /// their replies to their chats, and the owner's `/send`, are left as they are.
    fn stop_agents(&mut self, mut plan: StopPlan) -> Command {
        plan.agents_only = true;
        self.stopped.extend(plan.sessions.iter().cloned());
        self.note = Some(format!(
            "stopped: agent sends into {}; their replies go on; undo: u here",
            plan.on()
        ));
        let keys = plan.sessions.clone();
        self.last_stop = Some(plan);
        Command::StopAgents { keys }
    }

    fn stop(&mut self, plan: StopPlan) -> Command {
        let sends = plan
            .sessions
            .iter()
            .map(|k| (k.clone(), "/send off".to_string()))
            .collect();
        self.stopped.extend(plan.sessions.iter().cloned());
        let there = if plan.sessions.len() == 1 {
            "there"
        } else {
            "in each"
        };
        let undo = match plan.undo_words()[..] {
            [first, ref rest @ ..] if rest.iter().all(|w| *w == first) => {
                format!("/send {first} {there}")
            }
            _ => "each one's previous /send".to_string(),
        };
        self.note = Some(format!(
            "stopped: /send off on {}; undo: {undo} (or u here)",
            plan.on()
        ));
        let mut halt = plan.sessions.clone();
        halt.extend(
            plan.requesters
                .iter()
                .filter(|r| !plan.sessions.contains(r))
                .cloned(),
        );
        self.last_stop = Some(plan);
        Command::Stop { sends, halt }
    }

    /// Put back what each stopped session had before the stop (its own override, or none).
    pub fn undo(&mut self) -> Option<Command> {
        let Some(plan) = self.last_stop.take() else {
            self.note = Some("nothing to undo".into());
            return None;
        };
        for k in &plan.sessions {
            self.stopped.remove(k);
        }
        if plan.agents_only {
            self.note = Some(format!(
                "undone: agent sends into {} allowed again",
                plan.on()
            ));
            return Some(Command::ResumeAgents {
                keys: plan.sessions,
            });
        }
        let sends: Vec<(String, String)> = plan
            .sessions
            .iter()
            .zip(plan.undo_words())
            .map(|(k, w)| (k.clone(), format!("/send {w}")))
            .collect();
        let restored = match &sends[..] {
            [(_, only)] => only.clone(),
            _ => "each one's previous /send".to_string(),
        };
        self.note = Some(format!("undone: {restored} on {}", plan.on()));
        Some(Command::Send(sends))
    }
}

impl StopPlan {
    /// The `/send` word that restores each session (`inherit` where the value before is
    /// not known).
    fn undo_words(&self) -> Vec<&'static str> {
        self.sessions
            .iter()
            .enumerate()
            .map(|(i, _)| {
                send_word(
                    self.previous
                        .get(i)
                        .copied()
                        .flatten()
                        .unwrap_or(PolicySetting::Inherit),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_750_000_000_000 - 1_750_000_000_000 % MINUTE_MS;

    fn started(id: &str, r: &str, t: &str) -> EngineEvent {
        EngineEvent::ExchangeStarted {
            exchange_id: id.into(),
            chain_id: "c".into(),
            hop: 1,
            requester: r.into(),
            target: t.into(),
            message: "m".into(),
            run_id: "r".into(),
            unattributed: false,
        }
    }

    fn round(id: &str, n: u32, speaker: &str, listener: &str) -> EngineEvent {
        EngineEvent::ExchangeRound {
            exchange_id: id.into(),
            round: n,
            speaker: speaker.into(),
            listener: listener.into(),
            run_id: "r".into(),
            text: "t".into(),
            status: switchboard_types::api::RunStatus::Ok,
        }
    }

    #[test]
    fn windows_expire_as_minutes_roll_over() {
        let mut t = Traffic::default();
        let (a, b) = ("agent:a:main", "agent:b:main");
        t.event(&started("f", a, b), T0);
        t.event(&round("f", 1, b, a), T0 + 1);
        let p = t.sessions.get(a, b).expect("pair");
        assert_eq!((p.messages_1m, p.messages_5m, p.hour.messages), (2, 2, 2));
        t.tick(T0 + MINUTE_MS);
        let p = t.sessions.get(a, b).expect("pair");
        assert_eq!((p.messages_1m, p.messages_5m, p.hour.messages), (0, 2, 2));
        // The window slides: just after the minute turned, the last minute still holds both.
        assert_eq!(p.recent(1, T0 + MINUTE_MS), 2);
        assert_eq!(p.recent(1, T0 + MINUTE_MS + MINUTE_MS / 2), 1);
        assert_eq!(p.recent(1, T0 + 2 * MINUTE_MS), 0);
        assert_eq!(p.recent(5, T0 + 5 * MINUTE_MS - 1), 2);
        assert_eq!(p.recent(5, T0 + 5 * MINUTE_MS + MINUTE_MS / 2), 1);
        t.tick(T0 + 5 * MINUTE_MS);
        let p = t.sessions.get(a, b).expect("pair");
        assert_eq!((p.messages_5m, p.hour.messages), (0, 2));
        t.tick(T0 + 60 * MINUTE_MS);
        assert!(t.sessions.get(a, b).is_none(), "an hour later it is gone");
        assert!(t.agents.get("agent:a", "agent:b").is_none());
    }

    #[test]
    fn a_round_counts_on_the_exchange_pair_whoever_speaks() {
        let mut t = Traffic::default();
        let (a, b) = ("agent:a:main", "agent:b:x");
        t.event(&started("f", a, b), T0);
        t.event(&round("f", 2, a, b), T0);
        t.event(&round("g", 2, a, b), T0); // unknown exchange: even round, the requester speaks
        t.event(&round("h", 3, b, a), T0); // odd round: the target speaks
        assert_eq!(t.sessions.pairs.len(), 1);
        assert_eq!(t.sessions.get(a, b).expect("pair").hour.messages, 4);
        assert_eq!(
            t.agents
                .get("agent:a", "agent:b")
                .expect("agents")
                .hour
                .exchanges,
            1
        );
    }

    #[test]
    fn a_seed_and_live_counts_of_a_minute_are_not_added_twice() {
        let mut t = Traffic {
            open: true,
            ..Traffic::default()
        };
        let (a, b) = ("agent:a:main", "agent:b:main");
        t.event(&started("f", a, b), T0 + 10);
        let (g, since) = t.wanted_load(T0 + 20).expect("a load");
        assert_eq!(since, T0 - 59 * MINUTE_MS);
        let seed = |minute, messages| TrafficCount {
            requester: a.into(),
            target: b.into(),
            minute,
            exchanges: 1,
            messages,
            ..TrafficCount::default()
        };
        t.loaded(g, Ok(vec![seed(T0 - 2 * MINUTE_MS, 6), seed(T0, 1)]));
        let p = t.sessions.get(a, b).expect("pair");
        assert_eq!((p.messages_1m, p.messages_5m, p.hour.exchanges), (1, 7, 2));
        assert_eq!(t.wanted_load(T0), None, "seeded once");
        t.lagged();
        assert!(t.wanted_load(T0).is_some(), "asked again after a lag");
    }

    #[test]
    fn a_seed_replaces_what_was_counted_live_in_another_minute_before_it_was_asked() {
        // An exchange that began at the end of a minute, its events seen in the next one
        // (OpenClaw's come after a re-read): the seed counts it where it began.
        let mut t = Traffic {
            open: true,
            ..Traffic::default()
        };
        let (a, b) = ("agent:a:main", "agent:b:main");
        t.event(&started("f", a, b), T0 + MINUTE_MS + 1_000);
        t.event(&round("f", 1, b, a), T0 + MINUTE_MS + 2_000);
        let (g, _) = t.wanted_load(T0 + MINUTE_MS + 3_000).expect("a load");
        // Asked; a round comes before the answer (the seed may hold it or not).
        t.event(&round("f", 2, a, b), T0 + MINUTE_MS + 4_000);
        let seed = vec![
            TrafficCount {
                requester: a.into(),
                target: b.into(),
                minute: T0,
                exchanges: 1,
                messages: 1,
                ..TrafficCount::default()
            },
            TrafficCount {
                requester: a.into(),
                target: b.into(),
                minute: T0 + MINUTE_MS,
                messages: 2,
                ..TrafficCount::default()
            },
        ];
        t.loaded(g, Ok(seed));
        let p = t.sessions.get(a, b).expect("pair");
        assert_eq!((p.hour.exchanges, p.hour.messages), (1, 3));
        let p = t.agents.get("agent:a", "agent:b").expect("agents");
        assert_eq!((p.hour.exchanges, p.hour.messages), (1, 3));
    }

    #[test]
    fn only_the_rows_a_frame_needs_are_ordered_and_the_last_row_is_the_quietest() {
        let mut t = Traffic {
            open: true,
            ..Traffic::default()
        };
        // Pair i has i + 1 exchanges: the busiest is the last one added.
        for i in 0..500 {
            for n in 0..=i {
                t.event(
                    &started(
                        &format!("f{i}-{n}"),
                        "agent:a:main",
                        &format!("agent:b:{i}"),
                    ),
                    T0,
                );
            }
        }
        t.prepare(10);
        assert_eq!(t.sessions.sorted, 20, "a partial order");
        let busiest =
            |t: &Traffic, row: usize| t.sessions.pairs[t.sessions.order[row]].target.clone();
        for row in 0..20 {
            assert_eq!(busiest(&t, row), format!("agent:b:{}", 499 - row));
        }
        t.move_cursor(isize::MAX / 2);
        t.prepare(10);
        assert_eq!(t.cursor, 499);
        assert_eq!(t.selected.as_ref().map(|s| s.1.as_str()), Some("agent:b:0"));
        assert_eq!(busiest(&t, 499), "agent:b:0");
        t.move_cursor(-1);
        t.prepare(10);
        assert_eq!(t.selected.as_ref().map(|s| s.1.as_str()), Some("agent:b:1"));
    }

    #[test]
    fn agents_group_by_the_key_prefix_and_other_keys_stand_alone() {
        assert_eq!(agent_of("agent:ops:slack:group:x"), "agent:ops");
        assert_eq!(agent_of("global"), "global");
        assert_eq!(agent_of("agent:"), "agent:");
        assert_eq!(agent_of("agent::x"), "agent::x");
        assert_eq!(agent_of("home/agent:ops:slack:group:x"), "home/agent:ops");
        assert_eq!(agent_of("home/global"), "home/global");
    }

    #[test]
    fn the_table_keeps_the_busiest_pairs_and_counts_the_dropped() {
        let mut t = Traffic::default();
        for i in 0..MAX_PAIRS + MAX_PAIRS / 10 + 1 {
            t.event(
                &started(&format!("f{i}"), "agent:a:main", &format!("agent:b:{i}")),
                T0,
            );
        }
        assert!(t.sessions.pairs.len() <= MAX_PAIRS + MAX_PAIRS / 10);
        assert_eq!(t.sessions.dropped, (MAX_PAIRS / 10) as u64);
        assert!(t.open_exchanges.len() <= MAX_OPEN_EXCHANGES);
    }
}
