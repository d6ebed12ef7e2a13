//! A `SessionsApi` over data held in memory, for console tests: rows and transcript lines
//! are given as data, every transcript line's text starts with its session's key (so a test
//! can tell whose lines are shown), and calls can be held until the test lets them answer,
//! in any order it likes (or never, for a request "in flight" during a measurement).
//! What the engine would do about a message or a tool call is scripted by the test
//! (`on_send`, `set_tool_result`); changes announce themselves as the engine's events do.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use switchboard_types::api::*;
use tokio::sync::{broadcast, oneshot};

/// The in-memory data a fake answers from.
#[derive(Default)]
pub struct Data {
    /// Newest first, as the engine orders them.
    pub rows: Vec<SessionRow>,
    pub lines: HashMap<String, Vec<TranscriptLine>>,
    /// Messages received, in the order the calls reached the fake.
    pub sent: Vec<SendRequest>,
    pub tool_calls: Vec<ToolCall>,
    /// `set_agent_sends` calls, in order: the key and whether sends were stopped.
    pub agent_sends: Vec<(String, bool)>,
    /// Agent-to-agent exchanges, newest first, and the ones that open in full by id.
    pub exchanges: Vec<ExchangeSummary>,
    pub exchange_details: HashMap<String, ExchangeDetail>,
    /// What `traffic` answers (counts per pair and minute); `None`: "unavailable", as an
    /// engine without traffic history answers.
    pub traffic: Option<Vec<TrafficCount>>,
    /// The outbox, newest first; `None`: deliveries not recorded (as an OpenClaw gateway).
    pub deliveries: Option<Vec<OutboxRow>>,
    /// Answer every page newest first, whatever order was asked (an engine or gateway that
    /// predates `SessionsQuery::order`).
    pub ignore_order: bool,
}

/// How the fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// At once.
    Now,
    /// After this delay.
    After(Duration),
    /// Never (a request that stays in flight).
    Never,
    /// When the test releases the call (`release`).
    Held,
}

/// What happens after a message is recorded (the agent's reply, a command's effect): may
/// append lines, change rows and emit events through the fake; returns the command reply.
pub type OnSend = Box<dyn Fn(&FakeApi, &SendRequest) -> Option<String> + Send + Sync>;

pub struct FakeApi {
    pub data: Mutex<Data>,
    on_send: Mutex<Option<OnSend>>,
    /// What `call_tool` answers (`{"status": "ok"}` when unset).
    tool_result: Mutex<Option<Result<serde_json::Value, ApiError>>>,
    /// What `send` fails with, when set (`fail_sends`).
    send_error: Mutex<Option<ApiError>>,
    /// What `status` fails with, when set (`fail_status`): a store that stopped answering.
    status_error: Mutex<Option<ApiError>>,
    answer: Mutex<Answer>,
    held: Mutex<Vec<oneshot::Sender<()>>>,
    events: broadcast::Sender<Sequenced>,
    seq: AtomicU64,
    /// Loads answered so far.
    pub answered: AtomicU64,
}

/// A plain session row as the engine would list it (policy allowed by default).
pub fn row(key: &str, name: &str, kind: SessionKind, updated_at: i64) -> SessionRow {
    SessionRow {
        key: key.to_string(),
        display_key: key.to_string(),
        kind,
        agent_id: "main".into(),
        channel: "internal".into(),
        name: name.to_string(),
        label: None,
        display_name: Some(name.to_string()),
        session_id: format!("sid-{key}"),
        updated_at,
        policy: PolicyView {
            policy: "allow".parse().unwrap(),
            source: "default".parse().unwrap(),
            rule: None,
            matched: None,
            detail: "default (session.sendPolicy.default)".into(),
            summary: "allow, from default (session.sendPolicy.default)".into(),
        },
        running: false,
        archived: false,
        agents_stopped: false,
        entry: None,
        last_message: None,
    }
}

/// A user line of `key`'s transcript, its text tagged with the key.
pub fn line(key: &str, seq: i64) -> TranscriptLine {
    TranscriptLine {
        seq,
        role: LineRole::User,
        timestamp: 1_750_000_000_000 + seq * 1_000,
        from: "owner".into(),
        text: format!("{key} says #{seq}"),
        message: None,
    }
}

impl FakeApi {
    pub fn new(data: Data) -> FakeApi {
        FakeApi {
            data: Mutex::new(data),
            on_send: Mutex::new(None),
            tool_result: Mutex::new(None),
            send_error: Mutex::new(None),
            status_error: Mutex::new(None),
            answer: Mutex::new(Answer::Now),
            held: Mutex::new(Vec::new()),
            events: broadcast::channel(1024).0,
            seq: AtomicU64::new(0),
            answered: AtomicU64::new(0),
        }
    }

    /// `n` sessions `agent:main:s<i>` named `session <i>`, newest first, each with `lines`
    /// tagged lines.
    pub fn with_sessions(n: usize, lines: i64) -> FakeApi {
        let mut data = Data::default();
        for i in 0..n {
            let key = format!("agent:main:s{i:03}");
            data.rows.push(row(
                &key,
                &format!("session {i}"),
                if i % 3 == 0 {
                    SessionKind::Group
                } else {
                    SessionKind::Main
                },
                1_750_000_000_000 - i as i64 * 60_000,
            ));
            data.lines
                .insert(key.clone(), (1..=lines).map(|s| line(&key, s)).collect());
        }
        FakeApi::new(data)
    }

    pub fn set_answer(&self, answer: Answer) {
        *self.answer.lock().expect("fake lock") = answer;
    }

    pub fn on_send(
        &self,
        f: impl Fn(&FakeApi, &SendRequest) -> Option<String> + Send + Sync + 'static,
    ) {
        *self.on_send.lock().expect("fake lock") = Some(Box::new(f));
    }

    /// Refuse every message with this error (`None`: accept them again), as a gateway whose
    /// link is down does.
    pub fn fail_sends(&self, error: Option<ApiError>) {
        *self.send_error.lock().expect("fake lock") = error;
    }

    pub fn fail_status(&self, error: Option<ApiError>) {
        *self.status_error.lock().expect("fake lock") = error;
    }

    pub fn set_tool_result(&self, result: Result<serde_json::Value, ApiError>) {
        *self.tool_result.lock().expect("fake lock") = Some(result);
    }

    /// A line appended to `key`'s transcript (the row moves to the top, as the engine's
    /// newest-first order has it), announced as `MessageAppended`.
    pub fn append(&self, key: &str, role: LineRole, from: &str, text: &str) -> i64 {
        let (session_id, seq) = {
            let mut data = self.data.lock().expect("fake lock");
            let lines = data.lines.entry(key.to_string()).or_default();
            let seq = lines.last().map(|l| l.seq).unwrap_or(0) + 1;
            lines.push(TranscriptLine {
                role,
                from: from.to_string(),
                text: text.to_string(),
                ..line(key, seq)
            });
            let session_id = match data.rows.iter().position(|r| r.key == key) {
                Some(i) => {
                    let r = data.rows.remove(i);
                    let id = r.session_id.clone();
                    data.rows.insert(0, r);
                    id
                }
                None => format!("sid-{key}"),
            };
            (session_id, seq)
        };
        self.emit(EngineEvent::MessageAppended {
            key: key.to_string(),
            session_id,
            seq,
            line: serde_json::Value::Null,
        });
        seq
    }

    /// `key`'s effective policy changed (`by` as the engine names it), announced as
    /// `PolicyChanged`.
    pub fn set_policy(&self, key: &str, policy: PolicyView, by: &str) {
        let name = policy.policy;
        if let Some(r) = self
            .data
            .lock()
            .expect("fake lock")
            .rows
            .iter_mut()
            .find(|r| r.key == key)
        {
            r.policy = policy;
        }
        self.emit(EngineEvent::PolicyChanged {
            key: key.to_string(),
            policy: name,
            by: by.to_string(),
        });
    }

    /// `key` deleted (by anyone), announced as `SessionDeleted`.
    pub fn remove(&self, key: &str) {
        {
            let mut data = self.data.lock().expect("fake lock");
            data.rows.retain(|r| r.key != key);
            data.lines.remove(key);
        }
        self.emit(EngineEvent::SessionDeleted {
            key: key.to_string(),
        });
    }

    /// Calls waiting to be released.
    pub fn held(&self) -> usize {
        self.held.lock().expect("fake lock").len()
    }

    /// Let the `i`-th waiting call answer.
    pub fn release(&self, i: usize) {
        let mut held = self.held.lock().expect("fake lock");
        if i < held.len() {
            let _ = held.remove(i).send(());
        }
    }

    /// Announce an event to subscribers, numbered as the engine does.
    pub fn emit(&self, event: EngineEvent) {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.events.send(Sequenced { seq, event });
    }

    async fn wait_turn(&self) {
        let answer = *self.answer.lock().expect("fake lock");
        match answer {
            Answer::Now => {}
            Answer::After(d) => tokio::time::sleep(d).await,
            Answer::Never => std::future::pending::<()>().await,
            Answer::Held => {
                let (tx, rx) = oneshot::channel();
                self.held.lock().expect("fake lock").push(tx);
                let _ = rx.await;
            }
        }
    }

    /// The page the engine would answer `q` with (sync: the test harness may compute it
    /// itself).
    pub fn page(&self, q: &SessionsQuery) -> SessionsPage {
        let data = self.data.lock().expect("fake lock");
        let needle = q.text.to_lowercase();
        let mut matching: Vec<&SessionRow> = data
            .rows
            .iter()
            .filter(|r| q.kinds.is_empty() || q.kinds.contains(&r.kind))
            .filter(|r| q.archived || !r.archived)
            .filter(|r| q.active_since.is_none_or(|t| r.updated_at >= t))
            .filter(|r| {
                needle.is_empty()
                    || r.key.to_lowercase().contains(&needle)
                    || r.name.to_lowercase().contains(&needle)
            })
            .collect();
        let order = if data.ignore_order {
            SessionsOrder::Activity
        } else {
            q.order
        };
        if order == SessionsOrder::Name {
            matching.sort_by_cached_key(|r| (r.name.to_lowercase(), r.key.clone()));
        }
        SessionsPage {
            order,
            rows: matching
                .iter()
                .skip(q.offset)
                .take(q.limit)
                .map(|r| (*r).clone())
                .collect(),
            offset: q.offset,
            matching: q.count.then_some(matching.len() as u64),
            total: data.rows.len() as u64,
        }
    }

    pub fn transcript_page(&self, q: &TranscriptQuery) -> TranscriptPage {
        let data = self.data.lock().expect("fake lock");
        let Some(lines) = data.lines.get(&q.key) else {
            return TranscriptPage {
                key: q.key.clone(),
                exists: false,
                ..TranscriptPage::default()
            };
        };
        let older: Vec<&TranscriptLine> = lines
            .iter()
            .filter(|l| q.before.is_none_or(|b| l.seq < b))
            .collect();
        let skip = older.len().saturating_sub(q.limit);
        TranscriptPage {
            key: q.key.clone(),
            exists: true,
            lines: older.into_iter().skip(skip).cloned().collect(),
            last_seq: lines.last().map(|l| l.seq).unwrap_or(0),
            left_out: 0,
        }
    }
}

#[async_trait]
impl SessionsApi for FakeApi {
    async fn status(&self) -> Result<Status, ApiError> {
        if let Some(e) = self.status_error.lock().expect("fake lock").clone() {
            return Err(e);
        }
        Ok(Status {
            attached: "fake".into(),
            sessions: self.data.lock().expect("fake lock").rows.len() as u64,
        })
    }

    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        self.wait_turn().await;
        self.answered.fetch_add(1, Ordering::SeqCst);
        Ok(self.page(&query))
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        let data = self.data.lock().expect("fake lock");
        Ok(data
            .rows
            .iter()
            .find(|r| r.key == key)
            .map(|r| SessionDetail {
                row: r.clone(),
                entry: serde_json::Value::Null,
            }))
    }

    async fn transcript(&self, query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        self.wait_turn().await;
        self.answered.fetch_add(1, Ordering::SeqCst);
        Ok(self.transcript_page(&query))
    }

    async fn resolve_key(&self, raw: &str, _purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        let exists = self
            .data
            .lock()
            .expect("fake lock")
            .rows
            .iter()
            .any(|r| r.key == raw);
        Ok(ResolvedKey {
            key: raw.to_string(),
            display_key: raw.to_string(),
            exists,
        })
    }

    async fn set_agent_sends(
        &self,
        key: &str,
        stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        {
            let mut data = self.data.lock().expect("fake lock");
            data.agent_sends.push((key.to_string(), stopped));
            if let Some(r) = data.rows.iter_mut().find(|r| r.key == key) {
                r.agents_stopped = stopped;
            }
        }
        self.emit(EngineEvent::AgentSendsChanged {
            key: key.to_string(),
            stopped,
            by: "patch".into(),
        });
        Ok(AgentSendsResult {
            key: key.to_string(),
            display_key: key.to_string(),
            stopped,
        })
    }

    async fn send(&self, request: SendRequest) -> Result<SendReceipt, ApiError> {
        if let Some(e) = self.send_error.lock().expect("fake lock").clone() {
            return Err(e);
        }
        let seq = self.append(&request.key, LineRole::User, "owner", &request.text);
        let command_reply = match &*self.on_send.lock().expect("fake lock") {
            Some(f) => f(self, &request),
            None => None,
        };
        let key = request.key.clone();
        self.data.lock().expect("fake lock").sent.push(request);
        Ok(SendReceipt {
            display_key: key.clone(),
            key,
            created: false,
            seq,
            run_id: None,
            command_reply,
            work: WorkId(0),
        })
    }

    async fn wait_run(&self, run_id: &str, _limit: Duration) -> Result<RunResult, ApiError> {
        Err(ApiError::NotFound(format!("no run {run_id}")))
    }

    async fn wait_work(&self, _work: WorkId, _limit: Duration) -> Result<bool, ApiError> {
        Ok(true)
    }

    async fn still_running(&self, _work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        Ok(Vec::new())
    }

    async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, ApiError> {
        self.data.lock().expect("fake lock").tool_calls.push(call);
        let scripted = self.tool_result.lock().expect("fake lock").clone();
        Ok(ToolResult {
            result: scripted.unwrap_or_else(|| Ok(serde_json::json!({ "status": "ok" })))?,
            work: WorkId(0),
        })
    }

    async fn patch(&self, request: PatchRequest) -> Result<PatchResult, ApiError> {
        Err(ApiError::NotFound(format!(
            "no session found: {}",
            request.key
        )))
    }

    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        let mut data = self.data.lock().expect("fake lock");
        let before = data.rows.len();
        data.rows.retain(|r| r.key != key);
        data.lines.remove(key);
        Ok(data.rows.len() < before)
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        Ok(Vec::new())
    }

    /// Pages of `Data::exchanges` as the engine pages its table: one session's or all,
    /// older than `before`, `limit` at a time.
    async fn exchanges(&self, q: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        self.wait_turn().await;
        self.answered.fetch_add(1, Ordering::SeqCst);
        let data = self.data.lock().expect("fake lock");
        let matching: Vec<&ExchangeSummary> = data
            .exchanges
            .iter()
            .filter(|e| {
                q.key
                    .as_deref()
                    .is_none_or(|k| e.requester == k || e.target == k)
            })
            .filter(|e| q.since.is_none_or(|t| e.started_at >= t))
            .collect();
        let start = match &q.before {
            Some(b) => match matching.iter().position(|e| &e.id == b) {
                Some(i) => i + 1,
                None => matching.len(),
            },
            None => 0,
        };
        let limit = q.limit.max(1);
        let rest = &matching[start.min(matching.len())..];
        Ok(ExchangesPage {
            exchanges: rest.iter().take(limit).map(|e| (*e).clone()).collect(),
            more: rest.len() > limit,
        })
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        self.wait_turn().await;
        let data = self.data.lock().expect("fake lock");
        Ok(data.exchange_details.get(id).cloned())
    }

    async fn deliveries(&self, query: OutboxQuery) -> Result<Vec<OutboxRow>, ApiError> {
        self.wait_turn().await;
        let data = self.data.lock().expect("fake lock");
        let Some(rows) = &data.deliveries else {
            return Err(ApiError::Unavailable("no outbox here".into()));
        };
        Ok(rows
            .iter()
            .filter(|r| !query.failed_only || r.status == OutboxStatus::Failed)
            .filter(|r| {
                query
                    .session_key
                    .as_ref()
                    .is_none_or(|k| &r.session_key == k)
            })
            .filter(|r| query.flow_id.is_none() || r.flow_id == query.flow_id)
            .take(query.limit as usize)
            .cloned()
            .collect())
    }

    async fn delivery_counts(&self) -> Result<Option<DeliveryCounts>, ApiError> {
        let data = self.data.lock().expect("fake lock");
        Ok(data.deliveries.as_ref().map(|rows| {
            let mut c = DeliveryCounts::default();
            for r in rows {
                c.add(r.status, 1);
            }
            c
        }))
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        self.wait_turn().await;
        let data = self.data.lock().expect("fake lock");
        match &data.traffic {
            Some(counts) => Ok(counts
                .iter()
                .filter(|c| c.minute >= since)
                .cloned()
                .collect()),
            None => Err(ApiError::Unavailable(
                "this connection does not report traffic".to_string(),
            )),
        }
    }

    fn subscribe(&self) -> EventStream {
        EventStream::new(self.events.subscribe())
    }
}
