//! Agent-to-agent exchanges and sub-agents rebuilt from what an OpenClaw gateway records:
//! the `inter_session` provenance on forwarded turns, the `senderLabel` of forwarded turns
//! without it, the run each reply names (`__openclaw.runId`), the numbering that shows where
//! `chat.history` hid a reply (`__openclaw.seq`, `totalMessages`), and the rows' `spawnedBy`.
//! Pure data and functions: the backfill and the live events feed a `Book`, which builds the
//! same `ExchangeDetail`s our engine records. What the record cannot say is said to be
//! unrecorded (`ExchangeEnd::NotRecorded`, `AnnounceOutcome::NotRecorded`), never guessed.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::map::message_seq;
use switchboard_types::api::{
    AnnounceOutcome, EngineEvent, ExchangeAnnounce, ExchangeDetail, ExchangeEnd, ExchangeKind,
    ExchangeStatus, ExchangeSummary, ExchangeTurn, ExchangesPage, ExchangesQuery,
    RUN_FAILED_NOTICE, RunStatus, SpawnOutcome, TrafficCount, message_text, run_failure,
};

/// What a view shows where OpenClaw's record does not say.
pub const NOT_RECORDED: &str = "not recorded by OpenClaw";
/// The requester of a forwarded turn that names no session (no provenance).
pub const UNKNOWN_REQUESTER: &str = "(sender not recorded by OpenClaw)";
/// The target of a refused send whose result names none.
pub const UNKNOWN_TARGET: &str = "(target not recorded by OpenClaw)";
/// OpenClaw's reply-loop stop word (`chat.history` hides a reply that is exactly it).
const REPLY_SKIP: &str = "REPLY_SKIP";
/// An exchange with no announce seen is taken as over once this long has passed since its
/// last turn: OpenClaw waits at most 60 s for each step (`agent.wait`), so a loop quiet for
/// longer will not go on.
pub const SETTLE_MS: i64 = 90_000;
/// Sessions a book holds (the newest first are read; the rest are not backfilled).
pub const MAX_SESSIONS: usize = 5_000;
/// Lines a book keeps per session (the newest): a 100,000-line history costs no more.
pub const MAX_ITEMS_PER_SESSION: usize = 2_000;
/// The most of one message's text kept (a reply, a forwarded message).
const MAX_TEXT: usize = 16 * 1024;

/// A run's reply as a transcript line records it.
#[derive(Debug, Clone, PartialEq)]
struct Said {
    run_id: String,
    text: String,
    /// When it was written (`__openclaw.recordTimestampMs`, else `timestamp`).
    at: i64,
    tokens_in: Option<u64>,
    tokens_out: Option<u64>,
    error: Option<String>,
}

/// One transcript line, reduced to what exchanges need.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    /// A message forwarded into this session by `sessions_send`: from the named session,
    /// or (`None`) a forwarded turn whose sender is not recorded (a label, no provenance).
    Inbound {
        from: Option<String>,
        label: Option<String>,
        text: String,
        /// When it was sent (`timestamp`).
        at: i64,
        /// When this session's run took it (`__openclaw.recordTimestampMs`, else `at`).
        taken: i64,
    },
    /// What this session's agent said (a run's reply), or its failure.
    Reply(Said),
    /// A sub-agent's completion announce arriving in its requester (provenance
    /// `subagent_announce`, or a run named `announce:v1:<child>:…`).
    SpawnAnnounce { child: String, text: String },
    /// A tool call or its result: part of the run around it; the `sessions_send` calls it
    /// makes (a refused one's message is only here).
    Tool(Vec<SendCall>),
    /// A `sessions_send` OpenClaw refused (its tool result): the target's send policy, or
    /// the sessions' visibility / agent-to-agent rules. Part of the run around it, and an
    /// exchange of its own that never started, as our engine keeps one.
    Refused {
        /// The session it was for, as the result names it (absent when it names none).
        target: Option<String>,
        /// The tool call it answers, whose message it was.
        call: String,
        error: String,
        at: i64,
    },
    /// A line `chat.history` did not return (its number is skipped): an assistant reply that
    /// was exactly `NO_REPLY`, `REPLY_SKIP` or `ANNOUNCE_SKIP`, or commentary.
    Hidden,
    /// Anything else (the owner, a channel user, a note): it ends a run's lines.
    Other,
}

/// A `sessions_send` call in an assistant line.
#[derive(Debug, Clone, PartialEq)]
struct SendCall {
    id: String,
    /// The session it was for (`arguments.sessionKey`; empty when the call names none).
    to: String,
    message: String,
}

/// Refusals a tool result reports, in OpenClaw's words: the visibility and agent-to-agent
/// guards answer `forbidden`; the target's send policy is the `agent` method's error.
const POLICY_REFUSAL: &str = "send blocked by session policy";

/// The refusal a `sessions_send` result reports (`None`: it was not refused: sent, or failed
/// otherwise, like a missing target, which our engine does not keep either).
fn refusal(m: &Value, written: i64) -> Option<Item> {
    let text = m
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find_map(|b| b.get("text").and_then(Value::as_str)))?;
    let result: Value = serde_json::from_str(text).ok()?;
    let error = text_of(&result, "error").unwrap_or("");
    let refused = match text_of(&result, "status") {
        Some("forbidden") => true,
        Some("error") => error.to_ascii_lowercase().contains(POLICY_REFUSAL),
        _ => false,
    };
    refused.then(|| Item::Refused {
        target: text_of(&result, "sessionKey").map(str::to_string),
        call: text_of(m, "toolCallId").unwrap_or("").to_string(),
        error: capped(error.to_string()),
        at: written,
    })
}

/// The `sessions_send` calls in an assistant line's content.
fn send_calls(m: &Value) -> Vec<SendCall> {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "toolCall" && b["name"] == "sessions_send")
        .map(|b| SendCall {
            id: text_of(b, "id").unwrap_or("").to_string(),
            to: b
                .pointer("/arguments/sessionKey")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            message: capped(
                b.pointer("/arguments/message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ),
        })
        .collect()
}

/// The other session a line names: a forwarded message's sender, a refused send's target.
fn peer(item: &Item) -> Option<&str> {
    match item {
        Item::Inbound { from: Some(f), .. } => Some(f),
        Item::Refused {
            target: Some(t), ..
        } => Some(t),
        _ => None,
    }
}

/// What a number `chat.history` skipped stands for.
static HIDDEN: Item = Item::Hidden;

fn text_of<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn capped(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// The child key in a sub-agent announce run's id (`announce:v1:<child key>:<child run>`).
fn announced_child(run_id: &str) -> Option<String> {
    let rest = run_id.strip_prefix("announce:v1:")?;
    let (child, _) = rest.rsplit_once(':')?;
    Some(child.to_string())
}

fn classify(m: &Value) -> Item {
    let role = text_of(m, "role").unwrap_or("");
    let at = m.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
    let written = m
        .pointer("/__openclaw/recordTimestampMs")
        .and_then(Value::as_i64)
        .unwrap_or(at);
    let prov = m.get("provenance").filter(|p| p.is_object());
    let prov_kind = prov.and_then(|p| text_of(p, "kind"));
    let prov_tool = prov.and_then(|p| text_of(p, "sourceTool"));
    let source = prov
        .and_then(|p| text_of(p, "sourceSessionKey"))
        .map(str::to_string);
    let run_id = m
        .get("__openclaw")
        .and_then(|o| text_of(o, "runId"))
        .unwrap_or("")
        .to_string();
    if prov_kind == Some("subagent_announce") || prov_tool == Some("subagent_announce") {
        return Item::SpawnAnnounce {
            child: source.unwrap_or_default(),
            text: capped(message_text(m)),
        };
    }
    if prov_kind == Some("inter_session") {
        return Item::Inbound {
            from: source,
            label: text_of(m, "senderLabel").map(str::to_string),
            text: capped(message_text(m)),
            at,
            taken: written,
        };
    }
    if let Some(label) = text_of(m, "senderLabel").filter(|l| l.starts_with("Forwarded from")) {
        // Display-normalised as forwarded, but without the provenance naming the sender.
        return Item::Inbound {
            from: None,
            label: Some(label.to_string()),
            text: capped(message_text(m)),
            at,
            taken: written,
        };
    }
    match role {
        "toolResult" | "tool" => {
            if text_of(m, "toolName") == Some("sessions_send")
                && let Some(refused) = refusal(m, written)
            {
                return refused;
            }
            Item::Tool(Vec::new())
        }
        "assistant" => {
            let calls = m
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|b| b["type"] == "toolCall"));
            let stop = text_of(m, "stopReason");
            if calls || stop == Some("toolUse") {
                return Item::Tool(send_calls(m));
            }
            if let Some(child) = announced_child(&run_id) {
                return Item::SpawnAnnounce {
                    child,
                    text: capped(message_text(m)),
                };
            }
            let usage = m.get("usage");
            let tokens = |f: &str| usage.and_then(|u| u.get(f)).and_then(Value::as_u64);
            Item::Reply(Said {
                run_id,
                text: capped(message_text(m)),
                at: written,
                tokens_in: tokens("input"),
                tokens_out: tokens("output"),
                error: run_failure(m),
            })
        }
        // The notice OpenClaw writes when a run fails before it replies ("This turn ended
        // before a reply: …"): that run's reply, failed, with the notice as its error.
        "custom" if text_of(m, "customType") == Some(RUN_FAILED_NOTICE) => Item::Reply(Said {
            run_id,
            text: String::new(),
            at: written,
            tokens_in: None,
            tokens_out: None,
            error: Some(capped(message_text(m))),
        }),
        _ => Item::Other,
    }
}

/// One session as the book knows it: its row and its newest lines by number.
#[derive(Debug, Clone, Default)]
struct Record {
    row: Value,
    /// Lines by `__openclaw.seq`, contiguous from the first one read (a number missing in
    /// between is a line `chat.history` hid).
    items: BTreeMap<i64, Item>,
    /// The newest line's number, hidden or not (`totalMessages`).
    total: i64,
}

impl Record {
    fn first(&self) -> Option<i64> {
        self.items.keys().next().copied()
    }

    fn last(&self) -> i64 {
        self.items
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0)
            .max(self.total)
    }

    /// The item at `seq`: a line read, a hidden one, or nothing (before what was read or
    /// after the end).
    fn at(&self, seq: i64) -> Option<&Item> {
        match self.items.get(&seq) {
            Some(i) => Some(i),
            None if self.first().is_some_and(|f| seq > f) && seq <= self.last() => Some(&HIDDEN),
            None => None,
        }
    }

    fn running(&self) -> bool {
        self.row.get("hasActiveRun").and_then(Value::as_bool) == Some(true)
    }

    /// Where an announce from this session goes (`deliveryContext`, else the last route).
    fn route(&self) -> Option<(String, String)> {
        let d = self.row.get("deliveryContext");
        let channel = d
            .and_then(|d| text_of(d, "channel"))
            .or_else(|| text_of(&self.row, "lastChannel"))?;
        let to = d
            .and_then(|d| text_of(d, "to"))
            .or_else(|| text_of(&self.row, "lastTo"))?;
        Some((channel.to_string(), to.to_string()))
    }
}

/// A reply found for a forwarded message.
#[derive(Debug, Clone)]
enum Answer {
    Said { seq: i64, said: Said },
    Hidden { seq: i64 },
    None,
}

/// The reply to the forwarded message at `seq` in `r`: the next reply of the run it started
/// (past its tool calls), a hidden line there, or none (someone else spoke, or nothing yet).
fn answer(r: &Record, seq: i64) -> Answer {
    let mut s = seq + 1;
    while s <= r.last() {
        match r.at(s) {
            Some(Item::Tool(_) | Item::Refused { .. }) => {}
            Some(Item::Reply(said)) => {
                return Answer::Said {
                    seq: s,
                    said: said.clone(),
                };
            }
            Some(Item::Hidden) => return Answer::Hidden { seq: s },
            _ => return Answer::None,
        }
        s += 1;
    }
    Answer::None
}

/// One turn as it is being built (`seq`: where its reply sits in the speaker's record).
#[derive(Debug, Clone)]
struct Building {
    summary: ExchangeSummary,
    turns: Vec<ExchangeTurn>,
    /// The requester as the record names it (`None`: a forwarded turn without provenance).
    requester: Option<String>,
    /// The last line of the exchange in the target's record.
    target_last_seq: i64,
    /// The last round's reply was hidden, or there was none: the loop cannot go on.
    closed: bool,
    /// The round whose forwarded message has no reply in the record (none running).
    unanswered: Option<u32>,
    last_at: i64,
    partial: Vec<String>,
    /// Why its first line may yet turn out to continue an earlier exchange.
    hold: Option<Hold>,
}

/// Why a forwarded line that starts a new exchange in this build may not: a reply-back line
/// forwards the other party's last reply, and the two parties' records reach the book
/// separately (an event for one, a re-read after a run's end for the other), so the reply it
/// forwards may not be read yet. Announced now, such an exchange would vanish once that reply
/// is read (it becomes a round of the earlier one), after the traffic view counted it: an
/// exchange and an edge that never were. It is held until the record decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// The earlier exchange of the pair (this index) waits for a reply the book lacks, or
    /// for the requester's reply to its last turn: held while that one is running.
    Behind(usize),
    /// The target sent to the requester before this line and the requester's record is
    /// read only up to before this line (the exchange this may continue is not read yet):
    /// held while running, until the requester's record is read past it.
    Unread,
}

/// A sub-agent as the record shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnRecord {
    pub requester: String,
    pub child: String,
    pub label: Option<String>,
    pub task: String,
    pub started_at: i64,
    /// `None`: still running.
    pub outcome: Option<SpawnOutcome>,
    pub error: Option<String>,
    pub result: Option<String>,
    pub runtime_ms: i64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The completion announce as recorded in the requester.
    pub announce: Option<String>,
}

/// Everything rebuilt from the records at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Built {
    /// Newest first.
    pub exchanges: Vec<ExchangeDetail>,
    /// Requester and target are both sessions this gateway shows (traffic counts only
    /// these: never an edge to a session the record does not name or we cannot see).
    pub attributed: HashSet<String>,
    /// Exchanges whose loop ran until something other than `REPLY_SKIP` stopped it.
    pub looped: HashSet<String>,
    /// Exchanges the record may yet show to be a reply-back round of an earlier one (the
    /// line it forwards may not have been read yet): not announced, not counted (`Hold`).
    pub held: HashSet<String>,
    pub spawns: Vec<SpawnRecord>,
}

/// The records of the sessions read so far, and what was built from them.
#[derive(Debug, Default)]
pub struct Book {
    records: HashMap<String, Record>,
    /// Sessions known to exist (rows read, or found by name) beyond those with records.
    known: HashSet<String>,
    built: Built,
    /// Why what the book shows may be incomplete (a backfill cut short).
    pub partial: Option<String>,
    /// Sessions changed since the last build: only the exchanges they take part in (and
    /// those not over, which time alone may end) are built again.
    dirty: HashSet<String>,
    /// Per session, the sessions it exchanged messages with (both ways) in the lines held;
    /// a superset after lines are dropped, which only rebuilds a little more.
    peers: HashMap<String, HashSet<String>>,
    /// `built` stands for the records as of the last build, apart from `dirty`: the next
    /// build may be partial. Cleared when that cannot hold (a session forgotten).
    incremental: bool,
    /// The exchanges the console was told of (their start sent as an event, or counted in
    /// `traffic`): once told, an exchange is followed to its end even should a later build
    /// hold it, so it is never announced (nor counted) twice.
    announced: HashSet<String>,
    /// Exchanges found again after their first lines left the book, under another id (and
    /// maybe the other way round): what is left of one already told. Told as nothing and
    /// counted nowhere (see `changes`).
    silenced: HashSet<String>,
}

/// The exchanges of one pair of sessions, built together: every turn of an exchange is a
/// forwarded line between its requester and target (a refused send, a line in its
/// requester naming its target), so no other pair's lines change it. A line naming no other
/// session is in the pair ("", its session).
type Group = (String, String);

fn group_of(s: &ExchangeSummary) -> Group {
    // The session whose record holds it, and the other party (unnamed: "").
    let (session, other) = if s.kind == ExchangeKind::Refused {
        (&s.requester, &s.target)
    } else {
        (&s.target, &s.requester)
    };
    let named = other != UNKNOWN_REQUESTER && other != UNKNOWN_TARGET;
    pair(if named { other } else { "" }, session)
}

/// Peers grow with every pair seen; past this many sessions they are rebuilt from the lines.
const MAX_PEERS: usize = MAX_SESSIONS * 4;

impl Book {
    pub fn built(&self) -> &Built {
        &self.built
    }

    pub fn has(&self, key: &str) -> bool {
        self.records.contains_key(key) || self.known.contains(key)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Sessions whose row says a run is going there.
    pub fn running(&self) -> HashSet<String> {
        self.records
            .iter()
            .filter(|(_, r)| r.running())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Lines held for one session.
    pub fn lines(&self, key: &str) -> usize {
        self.records.get(key).map_or(0, |r| r.items.len())
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// A session known to exist (its row was not read into a record).
    pub fn know(&mut self, key: &str) {
        if self.known.len() < MAX_SESSIONS * 2 && self.known.insert(key.to_string()) {
            self.touched(key);
        }
    }

    /// `key` changed (its lines, its row, whether it is known): its exchanges are built
    /// again, with every peer its lines name.
    fn touched(&mut self, key: &str) {
        self.dirty.insert(key.to_string());
        let Some(r) = self.records.get(key) else {
            return;
        };
        let senders: Vec<String> = r
            .items
            .values()
            .filter_map(peer)
            .map(str::to_string)
            .collect();
        for f in senders {
            if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(&f) {
                // Rebuilt whole from the lines at the next build.
                self.peers.clear();
                self.incremental = false;
            }
            self.peers
                .entry(f.clone())
                .or_default()
                .insert(key.to_string());
            self.peers.entry(key.to_string()).or_default().insert(f);
        }
    }

    /// Sessions named as senders that the book has no row for (to be looked up once).
    pub fn unseen_sources(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .records
            .values()
            .flat_map(|r| r.items.values())
            .filter_map(|i| match i {
                Item::Inbound { from: Some(f), .. } if !self.has(f) => Some(f.clone()),
                _ => None,
            })
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        out.sort();
        out
    }

    /// A `sessions.list` / `sessions.changed` row: the session's entry.
    pub fn row(&mut self, row: &Value) {
        let Some(key) = text_of(row, "key") else {
            return;
        };
        if !self.records.contains_key(key) && self.records.len() >= MAX_SESSIONS {
            self.know(key);
            return;
        }
        self.records.entry(key.to_string()).or_default().row = row.clone();
        self.touched(key);
    }

    pub fn forget(&mut self, key: &str) {
        self.records.remove(key);
        self.known.remove(key);
        // Rare: the next build is a whole one.
        self.incremental = false;
    }

    /// A `chat.history` answer for `key` (a page of its newest lines, and the session's row
    /// where it carries one, `sessionInfo`). Lines already read
    /// stay; a page that does not reach back to them replaces them, so the lines held are
    /// always contiguous and a missing number always means a hidden line.
    pub fn history(&mut self, key: &str, page: &Value) {
        let messages = page
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default();
        let total = page.get("totalMessages").and_then(Value::as_i64);
        let numbered: Vec<(i64, &Value)> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (message_seq(m).unwrap_or(i as i64 + 1), m))
            .collect();
        if !self.records.contains_key(key) && self.records.len() >= MAX_SESSIONS {
            self.know(key);
            return;
        }
        let r = self.records.entry(key.to_string()).or_default();
        // 2026.9.6 answers with the session's row as of now (`hasActiveRun` among it).
        if let Some(info) = page
            .get("sessionInfo")
            .filter(|i| i.is_object() && text_of(i, "key").is_none_or(|k| k == key))
        {
            r.row = info.clone();
        }
        if let Some(&(oldest, _)) = numbered.first()
            && r.items.keys().next_back().is_some_and(|&l| oldest > l + 1)
        {
            r.items.clear();
        }
        for (seq, m) in numbered {
            r.items.insert(seq, classify(m));
        }
        while r.items.len() > MAX_ITEMS_PER_SESSION {
            r.items.pop_first();
        }
        if let Some(t) = total {
            r.total = t;
        }
        self.touched(key);
    }

    /// A `session.message` event's line for `key`, numbered `seq`.
    pub fn message(&mut self, key: &str, seq: i64, message: &Value) {
        if seq <= 0 || (!self.records.contains_key(key) && self.records.len() >= MAX_SESSIONS) {
            return;
        }
        let r = self.records.entry(key.to_string()).or_default();
        if r.items.keys().next_back().is_some_and(|&l| seq > l + 1) && r.total < seq - 1 {
            // Lines between were never read: start again from this one.
            r.items.clear();
        }
        let item = classify(message);
        let sender = peer(&item).map(str::to_string);
        r.items.insert(seq, item);
        r.total = r.total.max(seq);
        while r.items.len() > MAX_ITEMS_PER_SESSION {
            r.items.pop_first();
        }
        // One line: its sender is the only new peer.
        self.dirty.insert(key.to_string());
        if let Some(f) = sender {
            self.peers
                .entry(f.clone())
                .or_default()
                .insert(key.to_string());
            self.peers.entry(key.to_string()).or_default().insert(f);
        }
    }

    /// Rebuild from the records; the engine events the change from the last build stands
    /// for (new exchanges, their new rounds, ends and announces; new or ended sub-agents).
    /// Only the pairs of sessions changed since the last build are built again, with every
    /// exchange not yet over (time alone may end it): the result is the whole build's.
    pub fn rebuild(&mut self, now: i64) -> Vec<EngineEvent> {
        let dirty = std::mem::take(&mut self.dirty);
        if !self.incremental {
            let next = build(&self.records, &self.known, now, None);
            let events = changes(&self.built, &next, &mut self.announced, &mut self.silenced);
            let ids: HashSet<&str> = next
                .exchanges
                .iter()
                .map(|d| d.summary.id.as_str())
                .collect();
            self.announced.retain(|id| ids.contains(id.as_str()));
            self.silenced.retain(|id| ids.contains(id.as_str()));
            self.built = next;
            self.peers = peers_of(&self.records);
            self.incremental = true;
            return events;
        }
        let mut groups: HashSet<Group> = HashSet::new();
        for k in &dirty {
            groups.insert(pair("", k));
            for p in self.peers.get(k).into_iter().flatten() {
                groups.insert(pair(p, k));
            }
        }
        for d in &self.built.exchanges {
            if d.summary.status == ExchangeStatus::Running {
                groups.insert(group_of(&d.summary));
            }
        }
        let part = build(&self.records, &self.known, now, Some(&groups));
        let (before, kept): (Vec<ExchangeDetail>, Vec<ExchangeDetail>) =
            std::mem::take(&mut self.built.exchanges)
                .into_iter()
                .partition(|d| groups.contains(&group_of(&d.summary)));
        for d in &before {
            self.built.attributed.remove(&d.summary.id);
            self.built.looped.remove(&d.summary.id);
            self.built.held.remove(&d.summary.id);
        }
        let old = Built {
            exchanges: before,
            spawns: std::mem::take(&mut self.built.spawns),
            ..Built::default()
        };
        let events = changes(&old, &part, &mut self.announced, &mut self.silenced);
        let ids: HashSet<&str> = part
            .exchanges
            .iter()
            .map(|d| d.summary.id.as_str())
            .collect();
        for d in &old.exchanges {
            if !ids.contains(d.summary.id.as_str()) {
                self.announced.remove(&d.summary.id);
                self.silenced.remove(&d.summary.id);
            }
        }
        let Built {
            exchanges,
            attributed,
            looped,
            held,
            spawns,
        } = part;
        self.built.attributed.extend(attributed);
        self.built.looped.extend(looped);
        self.built.held.extend(held);
        self.built.spawns = spawns;
        self.built.exchanges = merge_newest_first(kept, exchanges);
        events
    }

    /// A page of exchanges as the engine pages them (newest first, `before` an id).
    pub fn page(&self, q: &ExchangesQuery) -> ExchangesPage {
        let limit = q.limit.clamp(1, 1000);
        let matching: Vec<&ExchangeSummary> = self
            .built
            .exchanges
            .iter()
            .map(|d| &d.summary)
            .filter(|s| {
                q.key
                    .as_deref()
                    .is_none_or(|k| s.requester == k || s.target == k)
            })
            .filter(|s| q.since.is_none_or(|t| s.started_at >= t))
            .collect();
        // Past the named one (an id no longer there starts from the top).
        let from = q
            .before
            .as_ref()
            .and_then(|b| matching.iter().position(|s| &s.id == b))
            .map_or(0, |i| i + 1);
        let rest = &matching[from..];
        ExchangesPage {
            exchanges: rest.iter().take(limit).map(|s| (*s).clone()).collect(),
            more: rest.len() > limit,
        }
    }

    pub fn exchange(&self, id: &str) -> Option<ExchangeDetail> {
        self.built
            .exchanges
            .iter()
            .find(|d| d.summary.id == id)
            .cloned()
    }

    /// Traffic per pair and minute since `since`: only exchanges whose both ends the record
    /// names and this gateway shows.
    pub fn traffic(&self, since: i64) -> Vec<TrafficCount> {
        let minute = |ms: i64| ms - ms.rem_euclid(60_000);
        let mut counts: BTreeMap<(String, String, i64), TrafficCount> = BTreeMap::new();
        for d in &self.built.exchanges {
            let s = &d.summary;
            // What the events have not told (held), the seed does not count either.
            if !self.built.attributed.contains(&s.id)
                || !self.announced.contains(&s.id)
                || self.silenced.contains(&s.id)
            {
                continue;
            }
            let mut add = |at: i64, f: &dyn Fn(&mut TrafficCount)| {
                if at < since {
                    return;
                }
                let m = minute(at);
                let c = counts
                    .entry((s.requester.clone(), s.target.clone(), m))
                    .or_insert_with(|| TrafficCount {
                        requester: s.requester.clone(),
                        target: s.target.clone(),
                        minute: m,
                        ..TrafficCount::default()
                    });
                f(c);
            };
            // A refused send: an exchange with no message delivered, as our engine counts it.
            if s.status == ExchangeStatus::Refused {
                add(s.started_at, &|c| {
                    c.exchanges += 1;
                    c.refused += 1;
                });
                continue;
            }
            // A loop stopped by something other than REPLY_SKIP after reply-back turns: on
            // OpenClaw the cap (or a step that never started), counted as the cap is.
            let capped = self.built.looped.contains(&s.id);
            add(s.started_at, &|c| {
                c.exchanges += 1;
                c.messages += 1;
                if capped {
                    c.capped += 1;
                }
            });
            for t in &d.turns {
                add(t.ended_at.unwrap_or(t.started_at), &|c| c.messages += 1);
            }
        }
        counts.into_values().collect()
    }
}

/// Every forwarded message (`refused`: every refused send), oldest first: (time, session,
/// line number); with `only`, those of these pairs (read from their sessions' records alone).
fn inbounds<'a>(
    records: &'a HashMap<String, Record>,
    only: Option<&HashSet<Group>>,
    refused: bool,
) -> Vec<(i64, &'a str, i64)> {
    let of = |(k, r): (&'a String, &'a Record)| {
        r.items.iter().filter_map(move |(seq, i)| {
            let at = match i {
                Item::Inbound { at, .. } if !refused => *at,
                Item::Refused { at, .. } if refused => *at,
                _ => return None,
            };
            only.is_none_or(|g| g.contains(&pair(peer(i).unwrap_or(""), k)))
                .then_some((at, k.as_str(), *seq))
        })
    };
    let mut all: Vec<(i64, &str, i64)> = match only {
        None => records.iter().flat_map(of).collect(),
        Some(groups) => {
            let sessions: HashSet<&str> = groups
                .iter()
                .flat_map(|(a, b)| [a.as_str(), b.as_str()])
                .filter(|k| !k.is_empty())
                .collect();
            sessions
                .into_iter()
                .filter_map(|k| records.get_key_value(k))
                .flat_map(of)
                .collect()
        }
    };
    all.sort_unstable();
    all
}

/// Who exchanged messages with whom, from the lines held.
fn peers_of(records: &HashMap<String, Record>) -> HashMap<String, HashSet<String>> {
    let mut peers: HashMap<String, HashSet<String>> = HashMap::new();
    for (k, r) in records {
        for f in r.items.values().filter_map(peer) {
            peers.entry(f.to_string()).or_default().insert(k.clone());
            peers.entry(k.clone()).or_default().insert(f.to_string());
        }
    }
    peers
}

/// The order exchanges are listed in: newest first, then by id.
fn newest_first(a: &ExchangeDetail, b: &ExchangeDetail) -> std::cmp::Ordering {
    (b.summary.started_at, &b.summary.id).cmp(&(a.summary.started_at, &a.summary.id))
}

fn sort_newest_first(exchanges: &mut [ExchangeDetail]) {
    exchanges.sort_by(newest_first);
}

/// Two lists in that order, merged (no sort of the whole book per event).
fn merge_newest_first(a: Vec<ExchangeDetail>, mut b: Vec<ExchangeDetail>) -> Vec<ExchangeDetail> {
    sort_newest_first(&mut b);
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => newest_first(x, y) != std::cmp::Ordering::Greater,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// The exchanges of the records (`only`: of these pairs) and every sub-agent.
fn build(
    records: &HashMap<String, Record>,
    known: &HashSet<String>,
    now: i64,
    only: Option<&HashSet<Group>>,
) -> Built {
    let mut open: HashMap<Group, usize> = HashMap::new();
    let mut all: Vec<Building> = Vec::new();
    for (at, key, seq) in inbounds(records, only, false) {
        let Some(r) = records.get(key) else { continue };
        let Some(Item::Inbound {
            from,
            label,
            text,
            taken,
            ..
        }) = r.items.get(&seq)
        else {
            continue;
        };
        // A reply-back turn: the other party's last reply, forwarded to this session.
        let continues = from.as_deref().and_then(|f| {
            let i = *open.get(&pair(f, key))?;
            let b = &all[i];
            let last = b.turns.last()?;
            (!b.closed && last.speaker == f && last.text == *text).then_some(i)
        });
        let i = match continues {
            Some(i) => i,
            None => {
                let hold = from
                    .as_deref()
                    .and_then(|f| hold_of(records, &open, &all, f, key, seq, at));
                let requester = from.clone();
                let mut partial = Vec::new();
                let shown_requester = match &requester {
                    Some(k) => k.clone(),
                    None => {
                        partial.push(format!(
                            "the sender of this forwarded message is {NOT_RECORDED}{}",
                            label
                                .as_deref()
                                .map(|l| format!(" (it says \"{l}\")"))
                                .unwrap_or_default()
                        ));
                        UNKNOWN_REQUESTER.to_string()
                    }
                };
                all.push(Building {
                    summary: ExchangeSummary {
                        id: format!("{key}#{seq}"),
                        kind: ExchangeKind::Send,
                        requester: shown_requester,
                        target: key.to_string(),
                        message: text.clone(),
                        started_at: at,
                        ended_at: None,
                        status: ExchangeStatus::Running,
                        rounds: 0,
                        ended_reason: None,
                        detail: String::new(),
                        announce: None,
                    },
                    turns: Vec::new(),
                    requester,
                    target_last_seq: seq,
                    closed: false,
                    unanswered: None,
                    last_at: at,
                    partial,
                    hold,
                });
                all.len() - 1
            }
        };
        let b = &mut all[i];
        // Keyed by the exchange's pair, whichever side this line landed in.
        if let Some(f) = &b.requester {
            open.insert(pair(f, &b.summary.target), i);
        }
        let listener = if key == b.summary.target {
            b.summary.requester.clone()
        } else {
            b.summary.target.clone()
        };
        let round = b.turns.len() as u32 + 1;
        let is_target = key == b.summary.target;
        let mut turn = ExchangeTurn {
            round,
            speaker: key.to_string(),
            listener,
            run_id: String::new(),
            status: RunStatus::Ok,
            text: String::new(),
            error: None,
            started_at: *taken,
            ended_at: None,
            tokens_in: None,
            tokens_out: None,
        };
        b.last_at = b.last_at.max(at);
        if is_target {
            b.target_last_seq = b.target_last_seq.max(seq);
        }
        match answer(r, seq) {
            Answer::Said {
                seq: s,
                said:
                    Said {
                        run_id,
                        text,
                        at: said_at,
                        tokens_in,
                        tokens_out,
                        error,
                    },
            } => {
                turn.run_id = run_id;
                turn.text = text;
                turn.ended_at = Some(said_at.max(*taken));
                turn.tokens_in = tokens_in;
                turn.tokens_out = tokens_out;
                if let Some(e) = error {
                    turn.status = RunStatus::Error;
                    turn.error = Some(e);
                    b.closed = true;
                }
                b.last_at = b.last_at.max(said_at);
                if is_target {
                    b.target_last_seq = b.target_last_seq.max(s);
                }
            }
            Answer::Hidden { seq: s } => {
                // Hidden by chat.history: in a reply-back round only REPLY_SKIP both hides
                // and stops the loop (NO_REPLY and ANNOUNCE_SKIP would be forwarded on).
                if round >= 2 {
                    turn.text = REPLY_SKIP.to_string();
                }
                b.closed = true;
                if is_target {
                    b.target_last_seq = b.target_last_seq.max(s);
                }
            }
            Answer::None => {
                b.closed = true;
                if r.running() && r.last() == seq {
                    turn.status = RunStatus::Running;
                    b.turns.push(turn);
                } else {
                    // No turn is made up for it: the record has only the message.
                    b.unanswered = Some(round);
                }
                continue;
            }
        }
        b.turns.push(turn);
    }
    let mut built = Built::default();
    all.extend(refused_sends(records, only));
    for b in all.iter_mut() {
        if b.summary.status != ExchangeStatus::Refused && finish(b, records, now) {
            built.looped.insert(b.summary.id.clone());
        }
    }
    // Held while what it waits for is open (a settled exchange is not held: the record has
    // had its say).
    let running = |i: usize| all[i].summary.status == ExchangeStatus::Running;
    for (i, b) in all.iter().enumerate() {
        let waits = match b.hold {
            Some(Hold::Behind(prev)) => running(prev),
            Some(Hold::Unread) => true,
            None => false,
        };
        if waits && running(i) {
            built.held.insert(b.summary.id.clone());
        }
    }
    let visible = |k: &str| records.contains_key(k) || known.contains(k);
    for mut b in all {
        let refused = b.summary.status == ExchangeStatus::Refused;
        // The party that may be out of sight: the sender of a forwarded message, the target
        // of a refused send (its requester is the record it is in).
        let other = if refused {
            b.requester.as_ref().map(|_| b.summary.target.clone())
        } else {
            b.requester.clone()
        };
        match &other {
            Some(k) if !visible(k) => {
                b.partial
                    .push(format!("{k} is not visible on this gateway"));
            }
            Some(_) => {
                built.attributed.insert(b.summary.id.clone());
            }
            None => {}
        }
        if !b.partial.is_empty() {
            let note = format!("partial: {}", b.partial.join("; "));
            b.summary.detail = if b.summary.detail.is_empty() {
                note
            } else {
                format!("{}; {note}", b.summary.detail)
            };
        }
        let announce = if refused {
            None
        } else {
            announce_of(&b, records, now)
        };
        b.summary.announce = announce.as_ref().map(|a| a.outcome);
        built.exchanges.push(ExchangeDetail {
            summary: b.summary,
            turns: b.turns,
            announce,
        });
    }
    sort_newest_first(&mut built.exchanges);
    built.spawns = spawns(records);
    built
}

/// The refused sends in the records (`only`: of these pairs), each an exchange that never
/// started, as our engine keeps one: no rounds, status `refused`, reason `policy`, OpenClaw's
/// words as its detail, the message from the call the refusal answers.
fn refused_sends(
    records: &HashMap<String, Record>,
    only: Option<&HashSet<Group>>,
) -> Vec<Building> {
    let mut out = Vec::new();
    for (at, key, seq) in inbounds(records, only, true) {
        let Some(r) = records.get(key) else { continue };
        let Some(Item::Refused {
            target,
            call,
            error,
            ..
        }) = r.items.get(&seq)
        else {
            continue;
        };
        // The call is a line or two before its result, in the same run.
        let message = r
            .items
            .range(..seq)
            .rev()
            .take(64)
            .find_map(|(_, i)| match i {
                Item::Tool(calls) => calls.iter().find(|c| &c.id == call),
                _ => None,
            })
            .map(|c| c.message.clone());
        let mut partial = Vec::new();
        if message.is_none() {
            partial.push(format!("its message is {NOT_RECORDED} in what was read"));
        }
        if target.is_none() {
            partial.push(format!("its target is {NOT_RECORDED}"));
        }
        out.push(Building {
            summary: ExchangeSummary {
                id: format!("{key}#{seq}"),
                kind: ExchangeKind::Refused,
                requester: key.to_string(),
                target: target.clone().unwrap_or_else(|| UNKNOWN_TARGET.to_string()),
                message: message.unwrap_or_default(),
                started_at: at,
                ended_at: Some(at),
                status: ExchangeStatus::Refused,
                rounds: 0,
                ended_reason: Some(ExchangeEnd::Policy),
                detail: format!("refused by OpenClaw: {error}"),
                announce: None,
            },
            turns: Vec::new(),
            requester: target.as_ref().map(|_| key.to_string()),
            target_last_seq: seq,
            closed: true,
            unanswered: None,
            last_at: at,
            partial,
            hold: None,
        });
    }
    out
}

/// Lines of the target's record looked through, back from a forwarded line, for a send of
/// its own to the line's sender (`Hold::Unread`): a ping-pong takes a few lines per turn.
const SEND_LOOKBACK: usize = 200;

/// Whether the forwarded line `seq` in `key` from `from`, sent at `at`, which continues no
/// exchange in this build, may yet turn out to continue one when more is read (`Hold`).
fn hold_of(
    records: &HashMap<String, Record>,
    open: &HashMap<Group, usize>,
    all: &[Building],
    from: &str,
    key: &str,
    seq: i64,
    at: i64,
) -> Option<Hold> {
    if let Some(&i) = open.get(&pair(from, key)) {
        let prev = &all[i];
        let last = prev.turns.last();
        // Certainly new when the earlier one ended on a reply that stops it (an error, a
        // hidden reply), or its last turn is the sender's own reply and this line forwards
        // something else. Otherwise the reply this forwards may be one not read yet.
        let stopped = prev.closed
            && prev.unanswered.is_none()
            && last.is_some_and(|t| t.status != RunStatus::Running);
        let sender_said = !prev.closed && last.is_some_and(|t| t.speaker == from);
        return (!stopped && !sender_said).then_some(Hold::Behind(i));
    }
    // No earlier exchange of the pair is read; one the target started (its first line is in
    // the sender's record) may be, once the sender's record is read past this line.
    let sent_to_sender = records.get(key).is_some_and(|r| {
        r.items
            .range(..seq)
            .rev()
            .take(SEND_LOOKBACK)
            .any(|(_, i)| matches!(i, Item::Tool(calls) if calls.iter().any(|c| c.to == from)))
    });
    let read_past = records
        .get(from)
        .and_then(newest_at)
        .is_some_and(|t| t >= at);
    (sent_to_sender && !read_past).then_some(Hold::Unread)
}

/// When the newest dated line of a record was written or sent.
fn newest_at(r: &Record) -> Option<i64> {
    r.items.values().rev().find_map(|i| match i {
        Item::Inbound { at, .. } | Item::Refused { at, .. } => Some(*at),
        Item::Reply(s) => Some(s.at),
        _ => None,
    })
}

/// How the exchange's loop ended and whether it is over; whether it ran its loop until
/// something other than `REPLY_SKIP` stopped it (the traffic view's loop mark).
fn finish(b: &mut Building, records: &HashMap<String, Record>, now: i64) -> bool {
    b.summary.rounds = b
        .turns
        .iter()
        .filter(|t| t.status != RunStatus::Running)
        .count() as u32;
    let last = b.turns.last();
    let settled = announce_item(b, records).is_some() || now - b.last_at > SETTLE_MS;
    let mut looped = false;
    let (reason, detail) = match (last, b.unanswered) {
        (Some(t), _) if t.status == RunStatus::Running => (None, String::new()),
        // Its run may still write the reply: said only once the exchange is quiet.
        (_, Some(_)) if !settled => (None, String::new()),
        (_, Some(round)) => (
            Some(ExchangeEnd::NotRecorded),
            format!(
                "no reply to round {round}'s message is recorded (the run failed, timed out \
                 or was aborted: {NOT_RECORDED} which)"
            ),
        ),
        (Some(t), None) if t.status == RunStatus::Error => (
            Some(ExchangeEnd::Error),
            format!(
                "round {} failed: {}",
                t.round,
                t.error.clone().unwrap_or_default()
            ),
        ),
        (Some(t), None) if t.text == REPLY_SKIP && t.ended_at.is_none() => (
            Some(ExchangeEnd::ReplySkip),
            format!(
                "{} replied REPLY_SKIP in round {} (the reply is hidden by chat.history)",
                t.speaker, t.round
            ),
        ),
        (Some(t), None) if t.ended_at.is_none() => (
            Some(ExchangeEnd::NotRecorded),
            format!(
                "the target's reply is hidden by chat.history (NO_REPLY, REPLY_SKIP or \
                 ANNOUNCE_SKIP: {NOT_RECORDED} which)"
            ),
        ),
        (Some(t), None) if settled && t.round >= 2 => {
            looped = true;
            (
                Some(ExchangeEnd::NotRecorded),
                format!(
                    "the reply-back loop stopped after round {} without REPLY_SKIP: \
                     {NOT_RECORDED} why (the maxPingPongTurns cap, {} turns, or a step that \
                     never started)",
                    t.round,
                    t.round - 1
                ),
            )
        }
        (Some(_), None) if settled => (
            Some(ExchangeEnd::NotRecorded),
            format!(
                "no reply-back loop after round 1: {NOT_RECORDED} why (maxPingPongTurns 0, or \
                 the step never started)"
            ),
        ),
        _ => (None, String::new()),
    };
    b.summary.ended_reason = reason;
    b.summary.detail = detail;
    if reason.is_some() && settled {
        b.summary.status = ExchangeStatus::Done;
        b.summary.ended_at = Some(b.last_at);
    }
    looped
}

/// The announce run's line in the target: the first reply of a run nobody forwarded a
/// message to, right after the exchange's last line there.
fn announce_item<'a>(
    b: &Building,
    records: &'a HashMap<String, Record>,
) -> Option<(i64, &'a Item)> {
    let r = records.get(&b.summary.target)?;
    let claimed: HashSet<&str> = b
        .turns
        .iter()
        .map(|t| t.run_id.as_str())
        .filter(|id| !id.is_empty())
        .collect();
    let mut s = b.target_last_seq + 1;
    while s <= r.last() {
        match r.at(s) {
            Some(Item::Tool(_) | Item::Refused { .. }) => {}
            Some(Item::Reply(Said { run_id, .. })) if claimed.contains(run_id.as_str()) => {}
            Some(i @ (Item::Reply(_) | Item::Hidden)) => return Some((s, i)),
            _ => return None,
        }
        s += 1;
    }
    None
}

fn announce_of(
    b: &Building,
    records: &HashMap<String, Record>,
    now: i64,
) -> Option<ExchangeAnnounce> {
    let target = records.get(&b.summary.target);
    let route = target.and_then(Record::route);
    match announce_item(b, records) {
        Some((_, Item::Hidden)) => Some(ExchangeAnnounce {
            outcome: AnnounceOutcome::Skipped,
            delivery: None,
            text: None,
            channel: None,
            to: None,
            detail: "the target's announce reply is hidden by chat.history (ANNOUNCE_SKIP or \
                     NO_REPLY): nothing announced"
                .into(),
        }),
        Some((_, Item::Reply(Said { text, error, .. }))) => Some(match (error, route) {
            (Some(e), _) => ExchangeAnnounce {
                outcome: AnnounceOutcome::Failed,
                delivery: None,
                text: None,
                channel: None,
                to: None,
                detail: format!("the announce run failed: {e}"),
            },
            (None, Some((channel, to))) => ExchangeAnnounce {
                outcome: AnnounceOutcome::NotRecorded,
                delivery: None,
                text: Some(text.clone()),
                detail: format!(
                    "posted to {channel} {to} unless the delivery failed: OpenClaw records the \
                     announce's text, not its delivery"
                ),
                channel: Some(channel),
                to: Some(to),
            },
            (None, None) => ExchangeAnnounce {
                outcome: AnnounceOutcome::NoRoute,
                delivery: None,
                text: Some(text.clone()),
                channel: None,
                to: None,
                detail: "recorded in the target session; it has no delivery route".into(),
            },
        }),
        Some(_) => None,
        None if b.summary.status == ExchangeStatus::Done && b.unanswered == Some(1) => {
            Some(ExchangeAnnounce {
                outcome: AnnounceOutcome::NotRun,
                delivery: None,
                text: None,
                channel: None,
                to: None,
                detail: "OpenClaw runs no announce when the target gave no reply".into(),
            })
        }
        None if b.summary.status == ExchangeStatus::Done || now - b.last_at > SETTLE_MS => {
            Some(ExchangeAnnounce {
                outcome: AnnounceOutcome::NotRecorded,
                delivery: None,
                text: None,
                channel: None,
                to: None,
                detail: format!("no announce line in what was read: {NOT_RECORDED}"),
            })
        }
        None => None,
    }
}

/// Sub-agents: every session whose row names the session that spawned it.
fn spawns(records: &HashMap<String, Record>) -> Vec<SpawnRecord> {
    let mut out: Vec<SpawnRecord> = records
        .iter()
        .filter_map(|(child, r)| {
            let requester = text_of(&r.row, "spawnedBy")?.to_string();
            let replies: Vec<&Item> = r
                .items
                .values()
                .filter(|i| matches!(i, Item::Reply(_)))
                .collect();
            let (mut tokens_in, mut tokens_out) = (0, 0);
            for i in &replies {
                if let Item::Reply(Said {
                    tokens_in: ti,
                    tokens_out: to,
                    ..
                }) = i
                {
                    tokens_in += ti.unwrap_or(0);
                    tokens_out += to.unwrap_or(0);
                }
            }
            let last = replies.last();
            let started_at = r.row.get("createdAt").and_then(Value::as_i64).unwrap_or(0);
            let said = match last {
                Some(Item::Reply(said)) => Some(said),
                _ => None,
            };
            // The row's run status (2026.9.6: running|done|failed|killed|timeout) says how
            // the child's run ended where its lines cannot: a run that timed out or was
            // killed may leave no reply, or a reply written before it stopped.
            let row_ended = r.row.get("endedAt").and_then(Value::as_i64).unwrap_or(0);
            let ended_at = said.map_or(row_ended, |s| s.at.max(row_ended));
            let (outcome, error, result, ended) = match (text_of(&r.row, "status"), said) {
                _ if r.running() => (None, None, None, 0),
                (Some("timeout"), _) => (
                    Some(SpawnOutcome::TimedOut),
                    Some("timed out".to_string()),
                    said.filter(|s| s.error.is_none()).map(|s| s.text.clone()),
                    ended_at,
                ),
                (Some(status @ ("failed" | "killed")), _) => (
                    Some(SpawnOutcome::Failed),
                    Some(said.and_then(|s| s.error.clone()).unwrap_or_else(|| {
                        format!("the run {status} (the reason is {NOT_RECORDED})")
                    })),
                    None,
                    ended_at,
                ),
                (
                    _,
                    Some(Said {
                        error: Some(e), at, ..
                    }),
                ) => (Some(SpawnOutcome::Failed), Some(e.clone()), None, *at),
                (_, Some(Said { text, at, .. })) => {
                    (Some(SpawnOutcome::Completed), None, Some(text.clone()), *at)
                }
                _ => (None, None, None, 0),
            };
            let announce = records.get(&requester).and_then(|p| {
                p.items.values().find_map(|i| match i {
                    Item::SpawnAnnounce { child: c, text } if c == child => Some(text.clone()),
                    _ => None,
                })
            });
            Some(SpawnRecord {
                requester,
                child: child.clone(),
                label: text_of(&r.row, "label").map(str::to_string),
                // The task is in the requester's tool call, not kept here: the label names it.
                task: String::new(),
                started_at,
                outcome,
                error,
                result,
                runtime_ms: if ended > 0 && started_at > 0 {
                    (ended - started_at).max(0)
                } else {
                    0
                },
                tokens_in,
                tokens_out,
                announce,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.started_at, &a.child).cmp(&(b.started_at, &b.child)));
    out
}

/// The engine events that turn the last build into the next one, as our engine would have
/// sent them live.
fn changes(
    old: &Built,
    new: &Built,
    announced: &mut HashSet<String>,
    silenced: &mut HashSet<String>,
) -> Vec<EngineEvent> {
    let before: HashMap<&str, &ExchangeDetail> = old
        .exchanges
        .iter()
        .map(|d| (d.summary.id.as_str(), d))
        .collect();
    // The turns of exchanges told (announced) and gone from this build: an exchange whose first
    // lines left the book (a session past `MAX_ITEMS_PER_SESSION`, or lines read again after
    // a gap) is found again from what is left, under a later line's id and sometimes the
    // other way round; a run's reply is one turn of one exchange, so a "new" exchange made
    // of such turns is that one again, and is not told.
    let now_ids: HashSet<&str> = new
        .exchanges
        .iter()
        .map(|d| d.summary.id.as_str())
        .collect();
    let gone_turns: HashSet<&str> = old
        .exchanges
        .iter()
        .filter(|d| announced.contains(&d.summary.id) && !now_ids.contains(d.summary.id.as_str()))
        .flat_map(|d| d.turns.iter().map(|t| t.run_id.as_str()))
        .filter(|r| !r.is_empty())
        .collect();
    let mut events = Vec::new();
    // Oldest first, as they happened.
    for d in new.exchanges.iter().rev() {
        let s = &d.summary;
        // Not told yet: told once the record decides it is an exchange of its own, then
        // with every round so far.
        let was = if silenced.contains(&s.id) {
            continue;
        } else if announced.contains(&s.id) {
            before.get(s.id.as_str()).copied()
        } else if new.held.contains(&s.id) {
            continue;
        } else if d
            .turns
            .iter()
            .any(|t| gone_turns.contains(t.run_id.as_str()))
        {
            // Told already, under the id it had: the rest of it is told as nothing and
            // counted nowhere (its requester may even read the wrong way round).
            silenced.insert(s.id.clone());
            continue;
        } else {
            announced.insert(s.id.clone());
            None
        };
        // A refused send never started: our engine says only that it ended, refused.
        if s.status == ExchangeStatus::Refused {
            if was.is_none() {
                events.push(EngineEvent::ExchangeEnded {
                    exchange_id: s.id.clone(),
                    status: s.status,
                    reason: s.ended_reason.unwrap_or(ExchangeEnd::Policy),
                });
            }
            continue;
        }
        if was.is_none() {
            events.push(EngineEvent::ExchangeStarted {
                exchange_id: s.id.clone(),
                chain_id: String::new(),
                hop: 1,
                requester: s.requester.clone(),
                target: s.target.clone(),
                message: s.message.clone(),
                run_id: d
                    .turns
                    .first()
                    .map(|t| t.run_id.clone())
                    .unwrap_or_default(),
                unattributed: !new.attributed.contains(&s.id),
            });
        }
        let done_turns = was.map_or(0, |w| {
            w.turns
                .iter()
                .filter(|t| t.status != RunStatus::Running)
                .count()
        });
        for t in d
            .turns
            .iter()
            .filter(|t| t.status != RunStatus::Running)
            .skip(done_turns)
        {
            events.push(EngineEvent::ExchangeRound {
                exchange_id: s.id.clone(),
                round: t.round,
                speaker: t.speaker.clone(),
                listener: t.listener.clone(),
                run_id: t.run_id.clone(),
                text: t.text.clone(),
                status: t.status,
            });
        }
        if let Some(reason) = s.ended_reason
            && was.is_none_or(|w| w.summary.ended_reason.is_none())
        {
            events.push(EngineEvent::ExchangeLoopEnded {
                exchange_id: s.id.clone(),
                reason,
                rounds: s.rounds,
                detail: s.detail.clone(),
            });
        }
        if let Some(a) = &d.announce
            && was.is_none_or(|w| w.announce.is_none())
        {
            events.push(EngineEvent::Announce {
                exchange_id: s.id.clone(),
                target: s.target.clone(),
                outcome: a.outcome,
                text: a.text.clone(),
                channel: a.channel.clone(),
                to: a.to.clone(),
                detail: a.detail.clone(),
            });
        }
        if s.status == ExchangeStatus::Done && was.is_none_or(|w| w.summary.status != s.status) {
            events.push(EngineEvent::ExchangeEnded {
                exchange_id: s.id.clone(),
                status: s.status,
                reason: s.ended_reason.unwrap_or(ExchangeEnd::NotRecorded),
            });
        }
    }
    let spawned: HashMap<&str, &SpawnRecord> =
        old.spawns.iter().map(|s| (s.child.as_str(), s)).collect();
    for s in &new.spawns {
        let was = spawned.get(s.child.as_str()).copied();
        if was.is_none() {
            events.push(EngineEvent::Spawned {
                requester: s.requester.clone(),
                child: s.child.clone(),
                run_id: String::new(),
                agent_id: s
                    .child
                    .strip_prefix("agent:")
                    .and_then(|a| a.split(':').next())
                    .unwrap_or("")
                    .to_string(),
                label: s.label.clone(),
                task: s.task.clone(),
                cleanup: switchboard_types::api::Cleanup::Keep,
            });
        }
        if let Some(outcome) = s.outcome
            && was.is_none_or(|w| w.outcome.is_none())
        {
            events.push(EngineEvent::SpawnEnded {
                requester: s.requester.clone(),
                child: s.child.clone(),
                outcome,
                error: s.error.clone(),
                runtime_ms: s.runtime_ms,
                tokens_in: s.tokens_in,
                tokens_out: s.tokens_out,
            });
        }
        if let Some(text) = &s.announce
            && was.is_none_or(|w| w.announce.is_none())
        {
            events.push(EngineEvent::SpawnAnnounce {
                requester: s.requester.clone(),
                child: s.child.clone(),
                outcome: AnnounceOutcome::NotRecorded,
                text: Some(text.clone()),
                channel: None,
                to: None,
                detail: format!(
                    "recorded in {}: {NOT_RECORDED} whether it reached a channel",
                    s.requester
                ),
            });
        }
    }
    events
}

#[cfg(test)]
mod tests;
