//! `OpenClawApi`: `SessionsApi` on a real OpenClaw gateway, speaking its own methods over
//! any `Rpc` (`sessions.list`, `sessions.describe`, `chat.history`, `chat.send`,
//! `agent.wait`, `sessions.patch`, `sessions.delete`, `agents.list`, and the
//! `sessions.subscribe` events). Exchanges, their rounds and announces, traffic and
//! sub-agents are rebuilt from what its transcripts record (`exchanges`, filled by
//! `backfill`, kept current from events). What OpenClaw does not expose (session tools
//! called as a session, a call's whole work) is reported `Unavailable`, never faked.

mod backfill;
mod events;
pub mod exchanges;
pub mod map;
mod recheck;
mod settle;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use switchboard_types::api::time::now_ms;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::rpc::{Rpc, RpcError};
use map::KeyRules;
use switchboard_types::api::{
    AbortOutcome, AgentInfo, ApiError, EngineEvent, EventStream, ExchangeDetail, ExchangesPage,
    ExchangesQuery, KeyPurpose, LineRole, Link, PatchRequest, PatchResult, PolicySetting,
    ResolvedKey, RunResult, RunStatus, SendReceipt, SendRequest, Sender, Sequenced, SessionDetail,
    SessionsApi, SessionsOrder, SessionsPage, SessionsQuery, Status, ToolCall, ToolResult,
    TrafficCount, TranscriptPage, TranscriptQuery, WorkId,
};

/// `chat.history` serves at most this many messages per call.
const HISTORY_MAX: usize = 1000;
/// Sends remembered for `wait_work` / `still_running` (the oldest are forgotten first).
const WORKS_REMEMBERED: usize = 4096;
/// Room for bursts of events between two draws of the console.
const EVENTS_CAPACITY: usize = 4096;

/// Why each missing feature is missing, in the words the user sees.
const NO_TOOLS: &str = "not available on an OpenClaw gateway: session tools run inside its \
                        agents, and the gateway has no method to call one as a session";

/// How often a wait for a work re-reads the book once the work's run ended.
const SETTLE_POLL: Duration = Duration::from_millis(250);

/// A run started by `send`, for `wait_work` / `still_running`, and what the wait learned of
/// the work it set off once it ended.
struct Work {
    run_id: String,
    key: String,
    sent: Instant,
    /// When the run was seen over (the work goes on: its exchanges, sub-agents).
    ended: Option<Instant>,
    /// When the run started, on the gateway's clock (`agent.wait`'s `startedAt`).
    since: Option<i64>,
    /// Sessions its `sessions_send`/`sessions_spawn` calls reached.
    reached: BTreeSet<String>,
    /// Since when the work is watched for silence: the run's end, or later when a re-read
    /// found more of the work (a session a reached session's run sent to).
    quiet_from: Option<Instant>,
    /// What the book did not yet record as over, at the last look.
    pending: Vec<String>,
    /// Over, and how that is known (`None`: not yet).
    over: Option<WorkEnd>,
}

/// How the end of a work was known.
#[derive(Debug, Clone, PartialEq)]
enum WorkEnd {
    /// The book records the end of all it set off.
    Recorded,
    /// Taken from silence (or the outer bound): why, in words for the user.
    Inferred(String),
}

pub struct OpenClawApi {
    rpc: Arc<dyn Rpc>,
    /// `agents.list`'s default agent and main key, once read.
    rules: Mutex<Option<KeyRules>>,
    tx: broadcast::Sender<Sequenced>,
    pumping: AtomicBool,
    /// Sessions whose transcript was read: their `session.message` events are asked for.
    read_keys: Arc<Mutex<HashSet<String>>>,
    works: Mutex<BTreeMap<u64, Work>>,
    next_work: AtomicU64,
    /// The gateway refused `chat.history`'s `offset` (OpenClaw before 2026.6): older lines
    /// are read from a longer newest page instead.
    no_offset: AtomicBool,
    /// Exchanges and sub-agents rebuilt from the gateway's record.
    book: Arc<events::Ledger>,
    /// Numbers every event this API sends (the pump's and the backfill's alike).
    numbering: Arc<Mutex<events::Numbering>>,
    /// A session shown running and silent this long is read again (`recheck`).
    recheck_after: Duration,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data under these locks stays consistent at every step, so a panic elsewhere
    // while holding one leaves nothing half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn count_of(payload: &Value) -> Option<u64> {
    payload
        .get("totalCount")
        .or_else(|| payload.get("count"))
        .and_then(Value::as_u64)
}

fn bad_answer(method: &str, what: &str) -> ApiError {
    ApiError::Unavailable(format!(
        "the OpenClaw gateway's {method} answer has no {what}"
    ))
}

impl OpenClawApi {
    pub fn new(rpc: Arc<dyn Rpc>) -> OpenClawApi {
        let tx = broadcast::channel(EVENTS_CAPACITY).0;
        OpenClawApi {
            rpc,
            rules: Mutex::new(None),
            tx: tx.clone(),
            pumping: AtomicBool::new(false),
            read_keys: Arc::new(Mutex::new(HashSet::new())),
            works: Mutex::new(BTreeMap::new()),
            next_work: AtomicU64::new(1),
            no_offset: AtomicBool::new(false),
            book: Arc::new(events::Ledger::default()),
            numbering: Arc::new(Mutex::new(events::Numbering::new(tx))),
            recheck_after: recheck::RECHECK_AFTER,
        }
    }

    /// Re-check sessions shown running after this much silence instead of 90 s (tests;
    /// before the first `subscribe`, which starts the checks).
    pub fn with_recheck_after(mut self, after: Duration) -> OpenClawApi {
        self.recheck_after = after;
        self
    }

    /// The book of exchanges, backfilled once (and again after a reconnect) before it is
    /// read: callers wait here, in their own task. The sub-agents the backfill found are
    /// announced as events (a console's sub-agent tree is built from them alone); its
    /// exchanges are not: lists and traffic read them from here, and replayed as events now
    /// they would be counted again as this minute's traffic.
    async fn filled(&self) -> std::sync::MutexGuard<'_, exchanges::Book> {
        let _one_at_a_time = self.book.fill.lock().await;
        if !self.book.ready.load(Ordering::SeqCst) || self.book.stale.swap(false, Ordering::SeqCst)
        {
            let done =
                backfill::fill(self.rpc.as_ref(), &self.book.book, exchanges::MAX_SESSIONS).await;
            tracing::info!(
                sessions = done.sessions,
                histories = done.histories,
                cut_short = done.cut_short,
                "openclaw: exchanges backfilled"
            );
            let events = self.book.lock().rebuild(now_ms());
            let mut out = locked(&self.numbering);
            for e in events.into_iter().filter(|e| {
                matches!(
                    e,
                    EngineEvent::Spawned { .. }
                        | EngineEvent::SpawnEnded { .. }
                        | EngineEvent::SpawnAnnounce { .. }
                )
            }) {
                out.emit(e);
            }
            self.book.ready.store(true, Ordering::SeqCst);
            // What was read is shown; the next read tries the rest again.
            if done.cut_short {
                self.book.stale.store(true, Ordering::SeqCst);
            }
        }
        self.book.lock()
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, ApiError> {
        self.rpc
            .request(method, params)
            .await
            .map_err(RpcError::into_api)
    }

    /// The gateway's key rules (read once; the defaults stand in while it cannot be asked).
    async fn rules(&self) -> KeyRules {
        if let Some(r) = locked(&self.rules).clone() {
            return r;
        }
        match self.call("agents.list", json!({})).await {
            Ok(p) => {
                let (_, rules) = map::agents(&p);
                *locked(&self.rules) = Some(rules.clone());
                rules
            }
            Err(e) => {
                tracing::warn!("openclaw: agents.list failed, default key rules used: {e}");
                KeyRules::default()
            }
        }
    }

    /// `sessions.describe`'s row for a canonical key (`None`: no such session).
    async fn describe(&self, key: &str) -> Result<Option<Value>, ApiError> {
        let p = self
            .call("sessions.describe", json!({ "key": key }))
            .await?;
        Ok(p.get("session").filter(|s| s.is_object()).cloned())
    }

    /// Ask for `session.message` events of `key` from now on (once per key).
    async fn watch_messages(&self, key: &str) {
        let new = locked(&self.read_keys).insert(key.to_string());
        // Before the pump runs, it subscribes every key itself.
        if new && self.pumping.load(Ordering::SeqCst) {
            let r = self
                .rpc
                .request("sessions.messages.subscribe", json!({ "key": key }))
                .await;
            if let Err(e) = r {
                tracing::warn!("openclaw: sessions.messages.subscribe {key} failed: {e}");
            }
        }
    }

    fn remember(&self, run_id: &str, key: &str) -> WorkId {
        let id = self.next_work.fetch_add(1, Ordering::SeqCst);
        let mut works = locked(&self.works);
        while works.len() >= WORKS_REMEMBERED {
            works.pop_first();
        }
        works.insert(
            id,
            Work {
                run_id: run_id.to_string(),
                key: key.to_string(),
                sent: Instant::now(),
                ended: None,
                since: None,
                reached: BTreeSet::new(),
                quiet_from: None,
                pending: Vec::new(),
                over: None,
            },
        );
        WorkId(id)
    }

    fn emit(&self, events: Vec<EngineEvent>) {
        let mut out = locked(&self.numbering);
        for e in events {
            out.emit(e);
        }
    }

    /// A session's newest lines, into the book (its changes go out as events); the page.
    async fn reread(&self, key: &str) -> Result<Value, ApiError> {
        let page = self
            .call(
                "chat.history",
                json!({ "sessionKey": key, "limit": backfill::HISTORY_LINES }),
            )
            .await?;
        let events = self.book.reread(key, &page);
        self.emit(events);
        Ok(page)
    }

    /// Follow a session of a work: its events go into the book from now on, its row and
    /// newest lines are read in (the page).
    async fn follow(&self, key: &str) -> Result<Value, ApiError> {
        self.book.follow(key);
        self.watch_messages(key).await;
        if let Some(row) = self.describe(key).await? {
            self.book.lock().row(&row);
        }
        self.reread(key).await
    }

    /// The work's run just ended: its session is read (its tool calls name the sessions it
    /// reached), and it and they are followed from now on. No backfill: the wait needs
    /// those sessions only.
    async fn run_ended(&self, work: WorkId, run_id: &str, key: &str, since: Option<i64>) {
        let reached = match self.follow(key).await {
            Ok(page) => settle::reached(&page, run_id),
            Err(e) => {
                tracing::warn!("openclaw: reading {key} after its run failed: {e}");
                BTreeSet::new()
            }
        };
        for k in reached.iter().take(settle::REREAD_MAX) {
            if let Err(e) = self.follow(k).await {
                tracing::warn!("openclaw: reading {k}, reached by {run_id}, failed: {e}");
            }
        }
        if let Some(w) = locked(&self.works).get_mut(&work.0) {
            w.ended = Some(Instant::now());
            w.since = since;
            w.reached = reached;
        }
    }

    /// Read a work's sessions again (their newest lines into the book) and follow the
    /// sessions they sent to or spawned since the run started (`since`) that the work did not
    /// hold: whether any was added (then the book has more of the work to show).
    async fn widen(&self, sessions: &BTreeSet<String>, since: Option<i64>) -> bool {
        let mut further = BTreeSet::new();
        for k in sessions.iter().take(settle::REREAD_MAX) {
            match self.follow(k).await {
                Ok(page) => {
                    if let Some(s) = since {
                        further.extend(settle::reached_since(&page, s));
                    }
                }
                Err(e) => tracing::warn!("openclaw: re-reading {k} failed: {e}"),
            }
        }
        further.retain(|k| !sessions.contains(k) && !self.book.follows(k));
        let room = settle::REREAD_MAX.saturating_sub(sessions.len());
        let mut added = false;
        for k in further.iter().take(room) {
            match self.follow(k).await {
                Ok(_) => added = true,
                Err(e) => tracing::warn!("openclaw: reading {k}, sent to by the work, failed: {e}"),
            }
        }
        added
    }

    /// More of a work was found: it is watched for a quiet period of its own from now.
    fn watch_again(&self, work: WorkId) -> bool {
        if let Some(w) = locked(&self.works).get_mut(&work.0) {
            w.quiet_from = Some(Instant::now());
        }
        false
    }

    /// Whether the work whose run ended is over: as the book records it, else inferred
    /// from its sessions' silence (or `WORK_MAX`), re-reading them first. Remembered.
    async fn settled(&self, work: WorkId) -> bool {
        let Some((key, since, reached, ended, quiet_from)) =
            locked(&self.works).get(&work.0).and_then(|w| {
                let floor = w.quiet_from.unwrap_or(w.ended?);
                Some((w.key.clone(), w.since, w.reached.clone(), w.ended?, floor))
            })
        else {
            return true;
        };
        let look = || settle::progress(self.book.lock().built(), &key, since, &reached);
        let now = look();
        let verdict = if now.pending.is_empty() {
            // Before calling it over: the record may show a session of the work sending on
            // to one nobody follows (a second hop, whose events never reached the book).
            if self.widen(&now.sessions, since).await {
                return self.watch_again(work);
            }
            let again = look();
            if !again.pending.is_empty() {
                return self.watch_again(work);
            }
            Some(WorkEnd::Recorded)
        } else if ended.elapsed() > settle::WORK_MAX {
            Some(WorkEnd::Inferred(format!(
                "gave up after {} min: OpenClaw's record does not show the end of {}",
                settle::WORK_MAX.as_secs() / 60,
                now.pending.join(", ")
            )))
        } else {
            let quiet = settle::quiet_period();
            let last = settle::last_active(&self.book.activity(), &now.sessions, quiet_from);
            match last {
                Some(l) if l.elapsed() >= quiet => {
                    // The record may hold the end the events did not bring, or more of the
                    // work (a second hop): read it again.
                    if self.widen(&now.sessions, since).await {
                        return self.watch_again(work);
                    }
                    let again = look();
                    Some(if again.pending.is_empty() {
                        WorkEnd::Recorded
                    } else {
                        WorkEnd::Inferred(format!(
                            "no run or event in {} for {:.0?}, and OpenClaw's record does not \
                             show the end of {}: taken as over",
                            again
                                .sessions
                                .iter()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", "),
                            quiet,
                            again.pending.join(", ")
                        ))
                    })
                }
                _ => None,
            }
        };
        let mut works = locked(&self.works);
        let Some(w) = works.get_mut(&work.0) else {
            return true;
        };
        w.pending = now.pending;
        if let Some(v) = verdict {
            if let WorkEnd::Inferred(why) = &v {
                tracing::info!(run = %w.run_id, "openclaw: a work's end inferred: {why}");
            }
            w.over = Some(v);
            return true;
        }
        false
    }

    async fn wait(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        let p = self
            .call("agent.wait", json!({ "runId": run_id, "timeoutMs": ms }))
            .await?;
        let mut result = map::run_result(run_id, &p);
        // OpenClaw 2026.5.28 ends a wait without the reply: the transcript has it.
        if result.status == RunStatus::Ok && p.get("terminalReply").is_none() {
            let key = locked(&self.works)
                .values()
                .rev()
                .find(|w| w.run_id == run_id)
                .map(|w| w.key.clone());
            if let Some(key) = key {
                match self.reply_in_history(&key, run_id).await {
                    Ok(Some(reply)) => result.reply = reply,
                    Ok(None) => {}
                    Err(e) => tracing::warn!("openclaw: reading {run_id}'s reply failed: {e}"),
                }
            }
        }
        Ok(result)
    }

    /// A finished run's reply as its session's transcript holds it: the newest assistant
    /// text of that run (by `__openclaw.runId` where the gateway records it; where it records
    /// none, the newest assistant text).
    async fn reply_in_history(&self, key: &str, run_id: &str) -> Result<Option<String>, ApiError> {
        let p = self
            .call("chat.history", json!({ "sessionKey": key, "limit": 20 }))
            .await?;
        let messages = p
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default();
        let run_of = |m: &Value| {
            m.pointer("/__openclaw/runId")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let tagged = messages.iter().any(|m| run_of(m).is_some());
        Ok(messages
            .iter()
            .rev()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter(|m| !tagged || run_of(m).as_deref() == Some(run_id))
            .map(map::message_text)
            .find(|t| !t.is_empty()))
    }

    /// The `chat.history` page holding the lines before `before` (at most `limit` of them
    /// once filtered). OpenClaw numbers messages 1.. from the oldest and its `offset` skips
    /// back from the newest, so the page starts `total - before + 1` from the end; a gateway
    /// without `offset` is asked for a longer newest page (reaching back 1,000 messages).
    async fn history_before(
        &self,
        key: &str,
        before: i64,
        limit: usize,
    ) -> Result<Value, ApiError> {
        let probe = self
            .call("chat.history", json!({ "sessionKey": key, "limit": 1 }))
            .await?;
        let total = probe
            .get("totalMessages")
            .and_then(Value::as_i64)
            .or_else(|| {
                probe
                    .get("messages")
                    .and_then(Value::as_array)
                    .and_then(|m| m.iter().filter_map(map::message_seq).max())
            })
            .unwrap_or(0);
        let skip = (total - before + 1).max(0);
        if !self.no_offset.load(Ordering::SeqCst) {
            let paged = self
                .call(
                    "chat.history",
                    json!({ "sessionKey": key, "limit": limit, "offset": skip }),
                )
                .await;
            match paged {
                Err(ApiError::BadInput(m)) if m.contains("offset") => {
                    self.no_offset.store(true, Ordering::SeqCst);
                }
                other => return other,
            }
        }
        let longer = (usize::try_from(skip).unwrap_or(HISTORY_MAX))
            .saturating_add(limit)
            .min(HISTORY_MAX);
        self.call(
            "chat.history",
            json!({ "sessionKey": key, "limit": longer }),
        )
        .await
    }

    /// `/send on|off|inherit` from the owner: the session's override, through
    /// `sessions.patch`, answered as OpenClaw answers the command.
    async fn send_command(
        &self,
        key: String,
        change: PolicySetting,
    ) -> Result<SendReceipt, ApiError> {
        let existed = self.describe(&key).await?.is_some();
        self.patch(PatchRequest {
            key: key.clone(),
            send_policy: Some(change),
        })
        .await?;
        let word = match change {
            PolicySetting::Allow => "on",
            PolicySetting::Deny => "off",
            PolicySetting::Inherit => "inherit",
        };
        Ok(SendReceipt {
            display_key: key.clone(),
            key,
            created: !existed,
            seq: 0,
            run_id: None,
            command_reply: Some(format!("⚙️ Send policy set to {word}.")),
            work: WorkId(0),
        })
    }
}

/// OpenClaw's own channel, the one `chat.send` runs on.
const WEBCHAT: &str = "webchat";

/// What a message's sender says that an OpenClaw gateway cannot take, as a refusal naming
/// it: neither `chat.send` nor `agent` has a field for the sender, the chat type or the
/// chat's label (the channel it can take: `agent`'s `channel`). `None` when all can go.
fn uncarried(from: &Sender) -> Option<String> {
    let mut lost = Vec::new();
    if from.sender.is_some() {
        lost.push("--sender");
    }
    if from.chat_type.is_some() {
        lost.push("--chat-type");
    }
    if from.display_name.is_some() {
        lost.push("--display-name");
    }
    if lost.is_empty() {
        return None;
    }
    Some(format!(
        "an OpenClaw gateway cannot record {}: its chat.send and agent methods take no sender,          chat type or chat label (only the channel, with --channel); leave {} out, or inject          into a Switchboard gateway or a local state folder",
        lost.join(", "),
        if lost.len() == 1 { "it" } else { "them" }
    ))
}

/// The policy change a message is, when it is the owner's `/send <word>` command.
fn send_command(request: &SendRequest) -> Option<PolicySetting> {
    if !request.from.owner {
        return None;
    }
    let arg = request.text.trim().strip_prefix("/send")?;
    if !arg.starts_with(char::is_whitespace) {
        return None;
    }
    arg.parse::<PolicySetting>().ok()
}

#[async_trait]
impl SessionsApi for OpenClawApi {
    async fn status(&self) -> Result<Status, ApiError> {
        let p = self.call("sessions.list", json!({ "limit": 1 })).await?;
        let server = self
            .rpc
            .hello()
            .map(|h| format!(" (OpenClaw {})", h.server.version))
            .unwrap_or_default();
        Ok(Status {
            attached: format!("{}{server}", self.rpc.target()),
            sessions: count_of(&p).ok_or_else(|| bad_answer("sessions.list", "totalCount"))?,
        })
    }

    async fn sessions(&self, q: SessionsQuery) -> Result<SessionsPage, ApiError> {
        let rules = self.rules().await;
        let mut params = json!({ "limit": q.limit.clamp(1, 10_000), "offset": q.offset });
        let search = q.text.trim();
        if !search.is_empty() {
            params["search"] = search.into();
        }
        if let Some(since) = q.active_since {
            // Whole minutes, rounded up so the window holds every session asked for.
            let minutes = ((now_ms() - since).max(0) as u64).div_ceil(60_000).max(1);
            params["activeMinutes"] = minutes.into();
        }
        let filtered = !search.is_empty() || q.active_since.is_some();
        let p = self.call("sessions.list", params).await?;
        let matching = count_of(&p).ok_or_else(|| bad_answer("sessions.list", "totalCount"))?;
        let rows = p
            .get("sessions")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|r| map::session_row(&rules, r))
            // OpenClaw filters by kind and archive state with its own words; these are
            // applied to the page it returned.
            .filter(|r| q.kinds.is_empty() || q.kinds.contains(&r.kind))
            .filter(|r| q.archived || !r.archived)
            .collect();
        let total = if filtered {
            let all = self.call("sessions.list", json!({ "limit": 1 })).await?;
            count_of(&all).ok_or_else(|| bad_answer("sessions.list", "totalCount"))?
        } else {
            matching
        };
        Ok(SessionsPage {
            rows,
            offset: q.offset,
            matching: q.count.then_some(matching),
            total,
            // OpenClaw lists newest first only: a front end that asked for the name order
            // sorts what it got.
            order: SessionsOrder::Activity,
        })
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        let rules = self.rules().await;
        Ok(self.describe(key).await?.and_then(|entry| {
            map::session_row(&rules, &entry).map(|row| SessionDetail { row, entry })
        }))
    }

    async fn transcript(&self, q: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        self.watch_messages(&q.key).await;
        let limit = q.limit.clamp(1, HISTORY_MAX);
        let p = match q.before {
            Some(before) if before <= 1 => {
                return Ok(TranscriptPage {
                    key: q.key.clone(),
                    exists: self.describe(&q.key).await?.is_some(),
                    lines: Vec::new(),
                    last_seq: 0,
                    left_out: 0,
                });
            }
            Some(before) => self.history_before(&q.key, before, limit).await?,
            None => {
                self.call(
                    "chat.history",
                    json!({ "sessionKey": q.key, "limit": limit }),
                )
                .await?
            }
        };
        let exists = p
            .get("sessionId")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        let messages = p
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default();
        let mut lines: Vec<_> = messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| map::transcript_line(m, i as i64 + 1, q.raw))
            .filter(|l| q.tools || l.role != LineRole::Result)
            // Lines written while paging would shift the window; never show one twice.
            .filter(|l| q.before.is_none_or(|b| l.seq < b))
            .collect();
        // A longer page (no `offset`) holds more than was asked: the newest of them.
        let extra = lines.len().saturating_sub(limit);
        lines.drain(..extra);
        let newest = messages
            .iter()
            .filter_map(map::message_seq)
            .max()
            .unwrap_or(0);
        let total = p.get("totalMessages").and_then(Value::as_i64).unwrap_or(0);
        Ok(TranscriptPage {
            key: q.key,
            exists,
            lines,
            last_seq: newest.max(total),
            left_out: 0,
        })
    }

    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        let word = raw.trim().to_ascii_lowercase();
        if purpose == KeyPurpose::Inbound && (word == "current" || word == "unknown") {
            return Err(ApiError::BadInput(format!(
                "a message needs a real session key, not {word:?}"
            )));
        }
        let rules = self.rules().await;
        let key = rules.canonical(raw)?;
        let mut found = self.describe(&key).await?.map(|_| key.clone());
        if found.is_none() && purpose == KeyPurpose::Existing {
            // A session id typed instead of a key: OpenClaw's search covers both.
            let p = self
                .call(
                    "sessions.list",
                    json!({ "limit": 50, "search": raw.trim() }),
                )
                .await?;
            found = p
                .get("sessions")
                .and_then(Value::as_array)
                .and_then(|rows| {
                    rows.iter()
                        .find(|r| r.get("sessionId").and_then(Value::as_str) == Some(raw.trim()))
                })
                .and_then(|r| r.get("key").and_then(Value::as_str))
                .map(str::to_string);
            if found.is_none() {
                return Err(ApiError::NotFound(format!("no session found: {key}")));
            }
        }
        Ok(ResolvedKey {
            exists: found.is_some(),
            display_key: found.clone().unwrap_or_else(|| key.clone()),
            key: found.unwrap_or(key),
        })
    }

    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        // Before anything reaches the gateway: what it cannot take is refused, not dropped.
        if let Some(refusal) = uncarried(&request.from) {
            return Err(ApiError::BadInput(refusal));
        }
        let resolved = self.resolve_key(&request.key, KeyPurpose::Inbound).await?;
        if let Some(change) = send_command(&request) {
            return self.send_command(resolved.key, change).await;
        }
        // The caller's key carries its retry through; without one each send gets its own
        // (OpenClaw requires one).
        let idempotency_key = request
            .idempotency_key
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // `chat.send` runs on OpenClaw's webchat channel; another channel goes by `agent`,
        // which takes it (`deliver: false`: recorded as arrived there, nothing is sent out).
        let (method, params) = match request.from.channel.as_deref() {
            Some(channel) if channel != WEBCHAT => (
                "agent",
                json!({
                    "sessionKey": resolved.key,
                    "message": request.text,
                    "channel": channel,
                    "deliver": false,
                    "idempotencyKey": idempotency_key,
                }),
            ),
            _ => (
                "chat.send",
                json!({
                    "sessionKey": resolved.key,
                    "message": request.text,
                    "idempotencyKey": idempotency_key,
                }),
            ),
        };
        // `agent` answers twice; the first answer (`accepted`) names the run, whose end
        // `agent.wait` then reports.
        let p = self.call(method, params).await?;
        let run_id = p
            .get("runId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_answer(method, "runId"))?
            .to_string();
        let work = self.remember(&run_id, &resolved.key);
        Ok(SendReceipt {
            display_key: resolved.display_key,
            key: resolved.key,
            created: !resolved.exists,
            // Its place is known once the gateway writes it (the `session.message` event).
            seq: 0,
            run_id: Some(run_id),
            command_reply: None,
            work,
        })
    }

    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        self.wait(run_id, limit).await
    }

    /// OpenClaw tells of the run a message started, not of the exchanges and sub-agents
    /// that run set off: their end is read off the book (`settle`), or inferred.
    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        let deadline = Instant::now() + limit;
        let Some((run_id, key, ended, over)) = locked(&self.works).get(&work.0).map(|w| {
            (
                w.run_id.clone(),
                w.key.clone(),
                w.ended.is_some(),
                w.over.is_some(),
            )
        }) else {
            return Ok(true);
        };
        if over {
            return Ok(true);
        }
        if !ended {
            let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
            let p = self
                .call("agent.wait", json!({ "runId": run_id, "timeoutMs": ms }))
                .await?;
            if !map::run_result(&run_id, &p).status.is_over() {
                return Ok(false);
            }
            let since = p.get("startedAt").and_then(Value::as_i64);
            self.run_ended(work, &run_id, &key, since).await;
        }
        loop {
            if self.settled(work).await {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            tokio::time::sleep(left.min(SETTLE_POLL)).await;
        }
    }

    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        let run = locked(&self.works).get(&work.0).map(|w| {
            (
                w.run_id.clone(),
                w.key.clone(),
                w.sent.elapsed(),
                w.ended.is_some(),
                w.pending.clone(),
            )
        });
        let Some((run_id, key, age, ended, pending)) = run else {
            return Ok(Vec::new());
        };
        if ended {
            return Ok(pending.into_iter().map(|p| (p, age)).collect());
        }
        if self.wait(&run_id, Duration::ZERO).await?.status == RunStatus::Running {
            Ok(vec![(format!("run {run_id} in {key}"), age)])
        } else {
            Ok(Vec::new())
        }
    }

    fn work_end_inferred(&self, work: WorkId) -> Option<String> {
        match &locked(&self.works).get(&work.0)?.over {
            Some(WorkEnd::Inferred(why)) => Some(why.clone()),
            Some(WorkEnd::Recorded) | None => None,
        }
    }

    /// 2026.9.6 runs ping-pong and announce steps with `deliver: false`, which its send
    /// policy check skips (seen on a live gateway: a loop went on after `deny`).
    fn policy_stops_exchanges(&self) -> bool {
        false
    }

    async fn call_tool(&self, _call: ToolCall) -> Result<ToolResult, ApiError> {
        Err(ApiError::Unavailable(NO_TOOLS.into()))
    }

    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        let entry = match request.send_policy {
            Some(change) => {
                let p = self
                    .call(
                        "sessions.patch",
                        json!({ "key": request.key, "sendPolicy": change.stored() }),
                    )
                    .await?;
                p.get("entry").cloned().unwrap_or(Value::Null)
            }
            // Nothing to change: what is stored now.
            None => self
                .describe(&request.key)
                .await?
                .ok_or_else(|| ApiError::NotFound(format!("no session found: {}", request.key)))?,
        };
        let stored = map::send_policy_of(&entry);
        Ok(PatchResult {
            display_key: request.key.clone(),
            key: request.key,
            effective: map::policy_view(stored),
            send_policy: stored,
        })
    }

    async fn exchanges(&self, query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        Ok(self.filled().await.page(&query))
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        Ok(self.filled().await.exchange(id))
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        Ok(self.filled().await.traffic(since))
    }

    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        let p = self.call("sessions.delete", json!({ "key": key })).await?;
        Ok(p.get("deleted").and_then(Value::as_bool) == Some(true))
    }

    async fn abort(&self, key: &str, run_id: Option<&str>) -> Result<AbortOutcome, ApiError> {
        let mut params = json!({ "sessionKey": key });
        if let Some(id) = run_id {
            params["runId"] = json!(id);
        }
        let p = self.call("chat.abort", params).await?;
        let run_ids = p
            .get("runIds")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(AbortOutcome { run_ids })
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        let p = self.call("agents.list", json!({})).await?;
        let (list, rules) = map::agents(&p);
        *locked(&self.rules) = Some(rules);
        Ok(list)
    }

    /// The first subscription starts the event pump (`sessions.subscribe`, then the
    /// gateway's events mapped and numbered); later ones share it.
    fn subscribe(&self) -> EventStream {
        let stream = EventStream::new(self.tx.subscribe());
        if !self.pumping.swap(true, Ordering::SeqCst) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    // Taken here, not in the task, so no event between now and the task's
                    // first poll is lost.
                    let wire = self.rpc.events();
                    rt.spawn(events::pump(
                        self.rpc.clone(),
                        wire,
                        self.numbering.clone(),
                        self.read_keys.clone(),
                        self.book.clone(),
                        self.recheck_after,
                    ));
                }
                Err(_) => {
                    self.pumping.store(false, Ordering::SeqCst);
                    tracing::warn!("openclaw: subscribe outside a runtime; no events");
                }
            }
        }
        stream
    }

    fn link(&self) -> Option<Link> {
        Some(Link {
            target: self.rpc.target(),
            state: self.rpc.state(),
            // Exchanges, rounds, announces and sub-agents are rebuilt from its record; what
            // that cannot say is marked where it would be shown.
            unavailable: None,
        })
    }
}
