//! Several engines as one `SessionsApi`: the local state folder, `switchboard serve`
//! gateways and OpenClaw gateways, attached at once. Every reference that comes out names its
//! source (`home/agent:main:main`, `team/<exchange id>`, `oc/<run id>`), every call goes to
//! the source its reference names, and a bare key is taken only when exactly one source has
//! it. Lists merge per-source pages (`pages`), events merge per-source streams (`feed`), and a
//! source that is dialling, refused or gone answers for itself while the others go on.

mod feed;
mod pages;
pub mod refs;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::{BoxFuture, join_all};
use switchboard_types::api::source::{SourceInfo, SourceKind, check_name};
use switchboard_types::api::{
    AbortOutcome, AgentInfo, AgentSendsResult, ApiError, DeliveryCounts, EventStream,
    ExchangeDetail, ExchangesPage, ExchangesQuery, Fed, KeyPurpose, LinkState, OutboxQuery,
    OutboxRow, PatchRequest, PatchResult, ResolvedKey, RunResult, SendReceipt, SendRequest,
    SessionDetail, SessionsApi, SessionsPage, SessionsQuery, Status, ToolCall, ToolResult,
    TrafficCount, TranscriptPage, TranscriptQuery, WorkId,
};
use tokio::sync::watch;

use feed::Feed;
use pages::{Cursor, Cursors, Positions};
use refs::{Qualify, split};

/// Dials a gateway source: reports its attempts on the watch, and gives the attached API or,
/// when refused for good, why.
pub type Dialer = Box<
    dyn FnOnce(watch::Sender<LinkState>) -> BoxFuture<'static, Result<Arc<dyn SessionsApi>, String>>
        + Send,
>;

/// How a source's engine is reached.
pub enum Attach {
    /// Already there (the local engine, or a gateway dialled before).
    Ready(Arc<dyn SessionsApi>),
    /// Dialled in the background: the source answers "connecting" until it is attached, and
    /// nothing waits for it.
    Dial(Dialer),
}

/// One source to attach.
pub struct Source {
    pub name: String,
    pub kind: SourceKind,
    /// The state folder or the gateway's address, as given.
    pub target: String,
    pub attach: Attach,
}

impl Source {
    /// A source whose engine is already there (the local engine, a gateway dialled before).
    pub fn ready(
        name: impl Into<String>,
        kind: SourceKind,
        target: impl Into<String>,
        api: Arc<dyn SessionsApi>,
    ) -> Source {
        Source {
            name: name.into(),
            kind,
            target: target.into(),
            attach: Attach::Ready(api),
        }
    }
}

/// Why a set of sources cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourcesError {
    #[error("no sources")]
    None,
    #[error("{0}")]
    Name(#[from] switchboard_types::api::source::BadSourceName),
    #[error("two sources are named {0:?}: give each its own name")]
    SameName(String),
    #[error("sources {0:?} and {1:?} are the same place ({2}): attach it once")]
    SameTarget(String, String, String),
    #[error("at most {MAX_SOURCES} sources")]
    TooMany,
}

/// How long a read asked of every source at once (a merged page, traffic, a bare key's
/// lookup) waits for one of them: one source that stalls must not hold up the others'
/// answer. The source's own calls (a send, its transcript) wait as long as its link does.
const MERGED_WAIT: Duration = Duration::from_secs(1);
/// How often a source that missed a merged read's wait is asked whether it answers again.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Work ids carry their source in their low bits.
const SOURCE_BITS: u32 = 6;
/// The most sources one API merges.
pub const MAX_SOURCES: usize = 1 << SOURCE_BITS;

/// One attached (or attaching) source.
struct Slot {
    name: String,
    kind: SourceKind,
    target: String,
    api: RwLock<Option<Arc<dyn SessionsApi>>>,
    /// The link's state as the header shows it (gateways only).
    state: Option<watch::Sender<LinkState>>,
    unavailable: RwLock<Option<String>>,
    /// Taken out (a source removed from the config): it answers that, and nothing more.
    removed: std::sync::atomic::AtomicBool,
    /// It missed a merged read's wait and has not answered a probe since.
    slow: std::sync::atomic::AtomicBool,
    /// A probe of it is under way.
    probing: std::sync::atomic::AtomicBool,
    /// The merged events, to tell the subscriber to reload when it answers again.
    feed: Arc<Feed>,
    /// The last page each of its listings gave at each position (rows and counts), shown
    /// again while it cannot answer.
    kept_rows: Mutex<std::collections::HashMap<(String, usize), SessionsPage>>,
}

impl Slot {
    fn api(&self) -> Result<Arc<dyn SessionsApi>, ApiError> {
        if self.removed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ApiError::Unavailable(format!(
                "source {} was removed",
                self.name
            )));
        }
        let api = match self.api.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        api.ok_or_else(|| {
            let why = match self.state.as_ref().map(|s| s.borrow().clone()) {
                Some(LinkState::Failed { message }) => format!("refused: {message}"),
                Some(LinkState::Reconnecting { message, .. }) => {
                    format!("not reachable: {message}")
                }
                _ => "still connecting".to_string(),
            };
            ApiError::Unavailable(format!("source {} is {why}", self.name))
        })
    }

    fn q(&self) -> Qualify<'_> {
        Qualify { source: &self.name }
    }

    /// A read that is part of a merged answer, bounded by `MERGED_WAIT`. A source that
    /// missed it is not waited for again: its reads fail at once (its last page stands in)
    /// while a probe asks it every `PROBE_EVERY` whether it answers again; when it does, the
    /// subscriber is told to reload.
    async fn bounded<T>(
        self: &Arc<Self>,
        read: impl std::future::Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.slow.load(SeqCst) {
            self.probe();
            return Err(ApiError::Unavailable(format!(
                "source {} is not answering",
                self.name
            )));
        }
        match tokio::time::timeout(MERGED_WAIT, read).await {
            Ok(answer) => answer,
            Err(_) => {
                if !self.slow.swap(true, SeqCst) {
                    tracing::warn!(source = %self.name, "a source did not answer in time; its last answer is shown");
                }
                self.probe();
                Err(ApiError::Unavailable(format!(
                    "source {} did not answer within {} ms",
                    self.name,
                    MERGED_WAIT.as_millis()
                )))
            }
        }
    }

    /// Start the probe of a slow source, unless one runs.
    fn probe(self: &Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.probing.swap(true, SeqCst) {
            return;
        }
        let slot = self.clone();
        tokio::spawn(async move {
            // Ends when it answers, or when it has no API to ask (not attached, removed):
            // the next merged read starts another.
            while let Ok(api) = slot.api() {
                if matches!(
                    tokio::time::timeout(MERGED_WAIT, api.status()).await,
                    Ok(Ok(_))
                ) {
                    slot.slow.store(false, SeqCst);
                    tracing::info!(source = %slot.name, "a slow source answers again");
                    // What was shown for it is its last page: reload.
                    slot.feed.send(Fed::Gap(0));
                    break;
                }
                tokio::time::sleep(PROBE_EVERY).await;
            }
            slot.probing.store(false, SeqCst);
        });
    }
}

/// Several engines as one.
pub struct Sources {
    slots: Vec<Arc<Slot>>,
    feed: Arc<Feed>,
    positions: Mutex<Positions>,
    cursors: Mutex<Cursors>,
    /// Where a bare key no source holds goes: the first source (the local folder when
    /// included).
    default: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Sources {
    /// Attach every source (gateways in the background). Needs a tokio runtime.
    pub fn new(sources: Vec<Source>) -> Result<Arc<Sources>, SourcesError> {
        if sources.is_empty() {
            return Err(SourcesError::None);
        }
        if sources.len() > MAX_SOURCES {
            return Err(SourcesError::TooMany);
        }
        let mut names = HashSet::new();
        let mut targets: Vec<(String, String)> = Vec::new();
        for s in &sources {
            check_name(&s.name)?;
            if !names.insert(s.name.clone()) {
                return Err(SourcesError::SameName(s.name.clone()));
            }
            let place = normal_target(&s.target);
            if let Some((other, _)) = targets.iter().find(|(_, t)| *t == place) {
                return Err(SourcesError::SameTarget(
                    other.clone(),
                    s.name.clone(),
                    s.target.clone(),
                ));
            }
            targets.push((s.name.clone(), place));
        }
        let feed = Feed::new();
        let mut slots = Vec::new();
        let mut dialers = Vec::new();
        for s in sources {
            let state = match s.kind {
                SourceKind::Local => None,
                SourceKind::Gateway => Some(watch::channel(LinkState::Connecting { attempt: 1 }).0),
            };
            let slot = Arc::new(Slot {
                name: s.name,
                kind: s.kind,
                target: s.target,
                api: RwLock::new(None),
                state,
                unavailable: RwLock::new(None),
                removed: Default::default(),
                slow: Default::default(),
                probing: Default::default(),
                feed: feed.clone(),
                kept_rows: Mutex::new(Default::default()),
            });
            match s.attach {
                Attach::Ready(api) => attached(&slot, &feed, api),
                Attach::Dial(dial) => dialers.push((slot.clone(), dial)),
            }
            slots.push(slot);
        }
        for (slot, dial) in dialers {
            let feed = feed.clone();
            tokio::spawn(async move {
                let Some(tx) = slot.state.clone() else { return };
                match dial(tx.clone()).await {
                    Ok(api) => {
                        attached(&slot, &feed, api);
                        // What the subscriber drew has none of this source yet: reload.
                        feed.send(Fed::Gap(0));
                    }
                    Err(message) => {
                        tracing::warn!(source = %slot.name, %message, "a source refused to attach");
                        tx.send_replace(LinkState::Failed { message });
                    }
                }
            });
        }
        Ok(Arc::new(Sources {
            slots,
            feed,
            positions: Mutex::new(Positions::default()),
            cursors: Mutex::new(Cursors::default()),
            default: 0,
        }))
    }

    /// Take a source out (removed from the config while running): its calls answer that it
    /// was removed, its rows leave the lists, and the subscriber is told to reload.
    pub fn remove(&self, name: &str) -> bool {
        let Some(slot) = self.slots.iter().find(|s| s.name == name) else {
            return false;
        };
        let was = slot.removed.swap(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(tx) = &slot.state {
            tx.send_replace(LinkState::Failed {
                message: switchboard_types::api::source::REMOVED.into(),
            });
        }
        lock(&slot.kept_rows).clear();
        if !was {
            self.feed.send(Fed::Gap(0));
        }
        !was
    }

    fn index(&self, name: &str) -> Result<usize, ApiError> {
        self.slots
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.slots.iter().map(|s| s.name.as_str()).collect();
                ApiError::BadInput(format!(
                    "no source named {name:?} (sources: {})",
                    names.join(", ")
                ))
            })
    }

    /// The source a reference names and what it names there. A bare key goes to the one
    /// source that has it, to the default source when none has, and is refused when several
    /// have it: nothing is sent where the owner did not mean.
    async fn route(&self, reference: &str) -> Result<(usize, String), ApiError> {
        if let Some((source, key)) = split(reference) {
            return Ok((self.index(source)?, key.to_string()));
        }
        let i = self
            .holder(reference, |api| async move {
                Ok(api.session(reference).await?.is_some())
            })
            .await?;
        Ok((i, reference.to_string()))
    }

    /// The one source that holds a bare key (by `holds`), the default source when none
    /// does; refused when several do, or when one that could not be asked might.
    async fn holder<F, Fut>(&self, reference: &str, holds: F) -> Result<usize, ApiError>
    where
        F: Fn(Arc<dyn SessionsApi>) -> Fut,
        Fut: std::future::Future<Output = Result<bool, ApiError>>,
    {
        // Each source: holds it, does not, or could not be asked (None).
        let found = join_all(self.slots.iter().map(|s| {
            let asked = s.api().map(&holds);
            async move {
                match s.bounded(asked.ok()?).await {
                    Ok(held) => Some(held),
                    // "No such session" and "not a key here" are answers; only a source
                    // that could not answer is unknown.
                    Err(ApiError::NotFound(_) | ApiError::BadInput(_)) => Some(false),
                    Err(_) => None,
                }
            }
        }))
        .await;
        let holders: Vec<usize> = found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| (*f == Some(true)).then_some(i))
            .collect();
        let unknown: Vec<&str> = found
            .iter()
            .zip(&self.slots)
            .filter(|(f, s)| f.is_none() && !s.removed.load(std::sync::atomic::Ordering::SeqCst))
            .map(|(_, s)| s.name.as_str())
            .collect();
        let refs = |at: &[usize]| -> String {
            at.iter()
                .map(|i| format!("{}/{reference}", self.slots[*i].name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match holders.as_slice() {
            // A source that could not be asked may hold it too: guessing could send where
            // the owner did not mean.
            _ if !unknown.is_empty() && holders.len() <= 1 => Err(ApiError::BadInput(format!(
                "cannot tell which source holds {reference}: {} did not answer; name the source \
                 ({})",
                unknown.join(", "),
                self.slots
                    .iter()
                    .map(|s| format!("{}/{reference}", s.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            [] => Ok(self.default),
            [one] => Ok(*one),
            many => Err(ApiError::BadInput(format!(
                "{reference} is on several sources: name one ({})",
                refs(many)
            ))),
        }
    }

    /// A run's, exchange's or other id: it must name its source.
    fn route_id<'a>(&self, reference: &'a str, what: &str) -> Result<(usize, &'a str), ApiError> {
        match split(reference) {
            Some((source, id)) => Ok((self.index(source)?, id)),
            None if self.slots.len() == 1 => Ok((0, reference)),
            None => Err(ApiError::BadInput(format!(
                "{what} {reference:?} does not name its source (source/{what})"
            ))),
        }
    }

    /// A second reference in the same call (a parent, a run) must be on the same source.
    fn same_source(&self, slot: usize, reference: &str) -> Result<String, ApiError> {
        match split(reference) {
            Some((source, key)) if source == self.slots[slot].name => Ok(key.to_string()),
            Some((source, _)) => Err(ApiError::BadInput(format!(
                "{reference} is on source {source}, not {}",
                self.slots[slot].name
            ))),
            None => Ok(reference.to_string()),
        }
    }

    fn work(&self, slot: usize, work: WorkId) -> WorkId {
        WorkId((work.0 << SOURCE_BITS) | slot as u64)
    }

    fn unwork(&self, work: WorkId) -> Result<(Arc<dyn SessionsApi>, WorkId), ApiError> {
        let slot = (work.0 & ((1 << SOURCE_BITS) - 1)) as usize;
        let s = self
            .slots
            .get(slot)
            .ok_or_else(|| ApiError::BadInput(format!("no such work: {}", work.0)))?;
        Ok((s.api()?, WorkId(work.0 >> SOURCE_BITS)))
    }

    /// One page of one source at its own position; on failure, what it gave last time there
    /// (the front end greys a source that is not linked).
    async fn source_page(
        &self,
        i: usize,
        sig: &str,
        query: &SessionsQuery,
        at: usize,
    ) -> Result<SessionsPage, ApiError> {
        let slot = &self.slots[i];
        if query.source.as_ref().is_some_and(|only| *only != slot.name) {
            // Filtered to another source: this one has nothing on the page.
            return Ok(SessionsPage {
                offset: at,
                order: query.order,
                ..Default::default()
            });
        }
        let mut q = query.clone();
        q.offset = at;
        q.source = None;
        let answer = match slot.api() {
            Ok(api) => slot.bounded(api.sessions(q)).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(mut page) => {
                for row in &mut page.rows {
                    slot.q().row(row);
                }
                let mut kept = lock(&slot.kept_rows);
                if kept.len() >= 64 {
                    kept.clear();
                }
                kept.insert((sig.to_string(), at), page.clone());
                Ok(page)
            }
            Err(e) => {
                let kept = lock(&slot.kept_rows).get(&(sig.to_string(), at)).cloned();
                kept.ok_or(e)
            }
        }
    }

    /// The merged page at per-source `positions`, and the positions after it.
    async fn merged_page(
        &self,
        sig: &str,
        query: &SessionsQuery,
        positions: &[usize],
    ) -> Result<(SessionsPage, Vec<usize>), ApiError> {
        let answers = join_all(
            positions
                .iter()
                .enumerate()
                .map(|(i, at)| self.source_page(i, sig, query, *at)),
        )
        .await;
        let mut first_error = None;
        let mut pages = Vec::new();
        let mut matching: Option<u64> = None;
        let mut total = 0;
        let mut answered = 0;
        for a in answers {
            match a {
                Ok(p) => {
                    answered += 1;
                    if let Some(m) = p.matching {
                        matching = Some(matching.unwrap_or(0) + m);
                    }
                    total += p.total;
                    pages.push(p.rows);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    pages.push(Vec::new());
                }
            }
        }
        if answered == 0 {
            return Err(first_error.unwrap_or(ApiError::Unavailable("no source answered".into())));
        }
        let order = query.order;
        let (rows, taken) =
            pages::merge(pages, query.limit, |a, b| pages::compare_rows(order, a, b));
        let next = positions.iter().zip(&taken).map(|(p, t)| p + t).collect();
        Ok((
            SessionsPage {
                rows,
                offset: query.offset,
                matching,
                total,
                order,
            },
            next,
        ))
    }

    /// Merged exchanges from per-source cursors: the page and the cursors after it.
    async fn merged_exchanges(
        &self,
        query: &ExchangesQuery,
        cursors: Vec<Cursor>,
    ) -> Result<ExchangesPage, ApiError> {
        let answers = join_all(self.slots.iter().zip(&cursors).map(|(slot, c)| async move {
            let before = match c {
                Cursor::Done => return Ok(None),
                Cursor::Start => None,
                Cursor::After(id) => Some(id.clone()),
            };
            let api = slot.api()?;
            let mut q = query.clone();
            q.before = before;
            let mut page = slot.bounded(api.exchanges(q)).await?;
            for e in &mut page.exchanges {
                slot.q().summary(e);
            }
            Ok::<_, ApiError>(Some(page))
        }))
        .await;
        let mut pages = Vec::new();
        let mut more = Vec::new();
        let mut first_error = None;
        let mut answered = 0;
        for a in answers {
            match a {
                Ok(Some(p)) => {
                    answered += 1;
                    more.push(p.more);
                    pages.push(p.exchanges);
                }
                Ok(None) => {
                    answered += 1;
                    more.push(false);
                    pages.push(Vec::new());
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    // A source that cannot answer now may have more later.
                    more.push(true);
                    pages.push(Vec::new());
                }
            }
        }
        if answered == 0 {
            return Err(first_error.unwrap_or(ApiError::Unavailable("no source answered".into())));
        }
        let lens: Vec<usize> = pages.iter().map(Vec::len).collect();
        let (exchanges, taken) = pages::merge(pages, query.limit, pages::compare_exchanges);
        let mut next = cursors.clone();
        for (i, t) in taken.iter().enumerate() {
            if *t > 0 {
                let last = exchanges
                    .iter()
                    .rev()
                    .find(|e| split(&e.id).is_some_and(|(s, _)| s == self.slots[i].name))
                    .and_then(|e| split(&e.id).map(|(_, id)| id.to_string()));
                if let Some(id) = last {
                    next[i] = Cursor::After(id);
                }
            }
            if *t == lens[i] && !more[i] {
                next[i] = Cursor::Done;
            }
        }
        let any_more = next.iter().any(|c| *c != Cursor::Done);
        if let Some(last) = exchanges.last() {
            lock(&self.cursors).keep(last.id.clone(), next);
        }
        Ok(ExchangesPage {
            exchanges,
            more: any_more,
        })
    }

    /// Cursors for a merged page that starts after `before` with none kept (a page asked for
    /// by hand): its own source continues after it; every other source is walked from its
    /// newest past everything that started at or after it.
    async fn cursors_after(&self, before: &str) -> Result<Vec<Cursor>, ApiError> {
        let (i, id) = self.route_id(before, "exchange")?;
        let api = self.slots[i].api()?;
        let Some(anchor) = api.exchange(id).await? else {
            return Err(ApiError::NotFound(format!("no exchange {before}")));
        };
        let at = anchor.summary.started_at;
        let mut cursors = Vec::new();
        for (j, slot) in self.slots.iter().enumerate() {
            if j == i {
                cursors.push(Cursor::After(id.to_string()));
                continue;
            }
            let Ok(api) = slot.api() else {
                cursors.push(Cursor::Start);
                continue;
            };
            let mut cursor = Cursor::Start;
            // Bounded: 20 pages of 200 per source.
            for _ in 0..20 {
                let q = ExchangesQuery {
                    before: match &cursor {
                        Cursor::After(x) => Some(x.clone()),
                        _ => None,
                    },
                    limit: 200,
                    ..Default::default()
                };
                let page = api.exchanges(q).await?;
                let newer: Vec<_> = page
                    .exchanges
                    .iter()
                    .take_while(|e| e.started_at >= at)
                    .collect();
                if let Some(last) = newer.last() {
                    cursor = Cursor::After(last.id.clone());
                }
                if newer.len() < page.exchanges.len() || !page.more {
                    break;
                }
            }
            cursors.push(cursor);
        }
        Ok(cursors)
    }
}

/// An attached source: its API in its slot, its events forwarded, its link mirrored.
fn attached(slot: &Arc<Slot>, feed: &Arc<Feed>, api: Arc<dyn SessionsApi>) {
    let stream = api.subscribe();
    let link = api.link();
    match slot.api.write() {
        Ok(mut g) => *g = Some(api),
        Err(poisoned) => *poisoned.into_inner() = Some(api),
    }
    feed.forward(slot.name.clone(), stream);
    if let Some(link) = link {
        match slot.unavailable.write() {
            Ok(mut g) => *g = link.unavailable.clone(),
            Err(poisoned) => *poisoned.into_inner() = link.unavailable.clone(),
        }
        if let Some(tx) = slot.state.clone() {
            let mut rx = link.state;
            tokio::spawn(async move {
                loop {
                    let now = rx.borrow_and_update().clone();
                    tx.send_replace(now);
                    // The link is gone with its API: the last state stays shown.
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            });
        }
    } else if let Some(tx) = &slot.state {
        // A gateway source handed over ready without a link: call it connected.
        tx.send_replace(LinkState::Connected {
            protocol: 0,
            server: String::new(),
            rtt_ms: None,
            resynced: false,
        });
    }
}

/// A place compared for "the same source twice": a gateway address without its trailing
/// slash and in lower case, a folder as given.
fn normal_target(target: &str) -> String {
    let t = target.trim().trim_end_matches('/');
    if t.contains("://") {
        t.to_ascii_lowercase()
    } else {
        t.to_string()
    }
}

#[async_trait]
impl SessionsApi for Sources {
    async fn status(&self) -> Result<Status, ApiError> {
        let answers = join_all(self.slots.iter().map(|s| async move {
            match s.api() {
                Ok(api) => s.bounded(api.status()).await.ok(),
                Err(_) => None,
            }
        }))
        .await;
        let sessions = answers.iter().flatten().map(|s| s.sessions).sum();
        let names: Vec<&str> = self.slots.iter().map(|s| s.name.as_str()).collect();
        Ok(Status {
            attached: names.join(" · "),
            sessions,
        })
    }

    async fn sessions(&self, query: SessionsQuery) -> Result<SessionsPage, ApiError> {
        let sig = pages::signature(&query);
        let n = self.slots.len();
        let (mut at, mut positions) = lock(&self.positions).nearest(&sig, query.offset, n);
        // Walk to the page asked for from the nearest kept one, a page at a time.
        while at < query.offset {
            let step = (query.offset - at).min(200);
            let mut q = query.clone();
            q.offset = at;
            q.limit = step;
            q.count = false;
            q.entries = false;
            q.previews = false;
            let walk_sig = pages::signature(&q);
            let (page, next) = self.merged_page(&walk_sig, &q, &positions).await?;
            if page.rows.is_empty() {
                break;
            }
            at += page.rows.len();
            positions = next;
            lock(&self.positions).keep(&sig, at, positions.clone());
        }
        let (page, next) = self.merged_page(&sig, &query, &positions).await?;
        lock(&self.positions).keep(&sig, query.offset + page.rows.len(), next);
        Ok(page)
    }

    async fn set_agent_sends(
        &self,
        key: &str,
        stopped: bool,
    ) -> Result<AgentSendsResult, ApiError> {
        let (i, key) = self.route(key).await?;
        let slot = &self.slots[i];
        let mut r = slot.api()?.set_agent_sends(&key, stopped).await?;
        slot.q().agent_sends(&mut r);
        Ok(r)
    }

    async fn session(&self, key: &str) -> Result<Option<SessionDetail>, ApiError> {
        let (i, key) = self.route(key).await?;
        let slot = &self.slots[i];
        let mut d = slot.api()?.session(&key).await?;
        if let Some(d) = &mut d {
            slot.q().detail(d);
        }
        Ok(d)
    }

    async fn transcript(&self, mut query: TranscriptQuery) -> Result<TranscriptPage, ApiError> {
        let (i, key) = self.route(&query.key).await?;
        query.key = key;
        let slot = &self.slots[i];
        let mut page = slot.api()?.transcript(query).await?;
        slot.q().transcript(&mut page);
        Ok(page)
    }

    async fn resolve_key(&self, raw: &str, purpose: KeyPurpose) -> Result<ResolvedKey, ApiError> {
        let (i, key) = match split(raw) {
            Some((source, key)) => (self.index(source)?, key.to_string()),
            None => {
                // A key or session id one source knows is that source's.
                let i = self
                    .holder(raw, |api| async move {
                        Ok(api.resolve_key(raw, KeyPurpose::Existing).await?.exists)
                    })
                    .await?;
                (i, raw.to_string())
            }
        };
        let slot = &self.slots[i];
        let mut r = slot.api()?.resolve_key(&key, purpose).await?;
        slot.q().resolved(&mut r);
        Ok(r)
    }

    async fn send(&self, mut request: SendRequest) -> Result<SendReceipt, ApiError> {
        let (i, key) = self.route(&request.key).await?;
        request.key = key;
        let slot = &self.slots[i];
        let mut r = slot.api()?.send(request).await?;
        slot.q().receipt(&mut r);
        r.work = self.work(i, r.work);
        Ok(r)
    }

    async fn wait_run(&self, run_id: &str, limit: Duration) -> Result<RunResult, ApiError> {
        let (i, id) = self.route_id(run_id, "run")?;
        let slot = &self.slots[i];
        let mut r = slot.api()?.wait_run(id, limit).await?;
        slot.q().run(&mut r);
        Ok(r)
    }

    async fn wait_work(&self, work: WorkId, limit: Duration) -> Result<bool, ApiError> {
        let (api, work) = self.unwork(work)?;
        api.wait_work(work, limit).await
    }

    async fn still_running(&self, work: WorkId) -> Result<Vec<(String, Duration)>, ApiError> {
        let (api, work) = self.unwork(work)?;
        api.still_running(work).await
    }

    fn work_end_inferred(&self, work: WorkId) -> Option<String> {
        let (api, work) = self.unwork(work).ok()?;
        api.work_end_inferred(work)
    }

    fn policy_stops_exchanges(&self) -> bool {
        // Per source it may differ; a front end that believes it does not stops the running
        // step too, which is harmless where the policy alone would have.
        self.slots
            .iter()
            .filter_map(|s| s.api().ok())
            .all(|api| api.policy_stops_exchanges())
    }

    async fn call_tool(&self, mut call: ToolCall) -> Result<ToolResult, ApiError> {
        let (i, requester) = self.route(&call.requester).await?;
        let slot = &self.slots[i];
        call.requester = requester;
        refs::bare_json(&slot.name, &mut call.params).map_err(ApiError::BadInput)?;
        let mut r = slot.api()?.call_tool(call).await?;
        slot.q().tool(&mut r);
        r.work = self.work(i, r.work);
        Ok(r)
    }

    async fn patch(&self, mut request: PatchRequest) -> Result<PatchResult, ApiError> {
        let (i, key) = self.route(&request.key).await?;
        request.key = key;
        let slot = &self.slots[i];
        let mut r = slot.api()?.patch(request).await?;
        slot.q().patch(&mut r);
        Ok(r)
    }

    async fn abort(&self, key: &str, run_id: Option<&str>) -> Result<AbortOutcome, ApiError> {
        let (i, key) = self.route(key).await?;
        let run = run_id.map(|r| self.same_source(i, r)).transpose()?;
        let slot = &self.slots[i];
        let mut r = slot.api()?.abort(&key, run.as_deref()).await?;
        slot.q().abort(&mut r);
        Ok(r)
    }

    async fn exchanges(&self, mut query: ExchangesQuery) -> Result<ExchangesPage, ApiError> {
        if let Some(key) = query.key.clone() {
            // One session's exchanges are on its own source.
            let (i, key) = self.route(&key).await?;
            query.key = Some(key);
            if let Some(before) = &query.before {
                query.before = Some(self.same_source(i, before)?);
            }
            let slot = &self.slots[i];
            let mut page = slot.api()?.exchanges(query).await?;
            for e in &mut page.exchanges {
                slot.q().summary(e);
            }
            return Ok(page);
        }
        let cursors = match &query.before {
            None => vec![Cursor::Start; self.slots.len()],
            Some(before) => {
                let kept = lock(&self.cursors).get(before);
                match kept {
                    Some(c) => c,
                    None => self.cursors_after(before).await?,
                }
            }
        };
        self.merged_exchanges(&query, cursors).await
    }

    async fn exchange(&self, id: &str) -> Result<Option<ExchangeDetail>, ApiError> {
        let (i, id) = self.route_id(id, "exchange")?;
        let slot = &self.slots[i];
        let mut d = slot.api()?.exchange(id).await?;
        if let Some(d) = &mut d {
            slot.q().exchange(d);
        }
        Ok(d)
    }

    async fn deliveries(&self, mut query: OutboxQuery) -> Result<Vec<OutboxRow>, ApiError> {
        // A delivery's id is its own source's: one session's are listed from its source, a
        // list of all would mix ids that `retry` could not tell apart.
        let Some(key) = query.session_key.clone() else {
            return Err(ApiError::BadInput(
                "with several sources, deliveries are listed per gateway: connect to one \
                 (--connect NAME=URL alone)"
                    .into(),
            ));
        };
        let (i, key) = self.route(&key).await?;
        query.session_key = Some(key);
        self.slots[i].api()?.deliveries(query).await
    }

    async fn delivery_counts(&self) -> Result<Option<DeliveryCounts>, ApiError> {
        let answers = join_all(self.slots.iter().map(|s| async move {
            match s.api() {
                Ok(api) => s.bounded(api.delivery_counts()).await.ok().flatten(),
                Err(_) => None,
            }
        }))
        .await;
        let mut total: Option<DeliveryCounts> = None;
        for c in answers.into_iter().flatten() {
            let t = total.get_or_insert_with(DeliveryCounts::default);
            for (status, n) in c.by_status() {
                t.add(status, n);
            }
        }
        Ok(total)
    }

    async fn retry_delivery(&self, id: i64) -> Result<Option<OutboxRow>, ApiError> {
        let _ = id;
        Err(ApiError::BadInput(
            "with several sources, a delivery is retried on its gateway: connect to that one \
             (--connect NAME=URL alone)"
                .into(),
        ))
    }

    async fn traffic(&self, since: i64) -> Result<Vec<TrafficCount>, ApiError> {
        let answers = join_all(self.slots.iter().map(|s| async move {
            let mut counts = s.bounded(s.api()?.traffic(since)).await?;
            for c in &mut counts {
                s.q().traffic(c);
            }
            Ok::<_, ApiError>(counts)
        }))
        .await;
        let mut all = Vec::new();
        let mut first_error = None;
        let mut answered = 0;
        for a in answers {
            match a {
                Ok(c) => {
                    answered += 1;
                    all.extend(c);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if answered == 0 {
            return Err(first_error.unwrap_or(ApiError::Unavailable("no source answered".into())));
        }
        all.sort_by(|a, b| {
            (a.minute, &a.requester, &a.target).cmp(&(b.minute, &b.requester, &b.target))
        });
        Ok(all)
    }

    async fn create(&self, key: &str, parent: Option<&str>) -> Result<bool, ApiError> {
        let (i, key) = self.route(key).await?;
        let parent = parent.map(|p| self.same_source(i, p)).transpose()?;
        self.slots[i].api()?.create(&key, parent.as_deref()).await
    }

    async fn delete(&self, key: &str) -> Result<bool, ApiError> {
        let (i, key) = self.route(key).await?;
        self.slots[i].api()?.delete(&key).await
    }

    async fn agents(&self) -> Result<Vec<AgentInfo>, ApiError> {
        // Agents by id across sources (the first source's wins a shared id): what the
        // console offers to talk to.
        let answers = join_all(self.slots.iter().map(|s| async move {
            match s.api() {
                Ok(api) => s.bounded(api.agents()).await.ok(),
                Err(_) => None,
            }
        }))
        .await;
        let mut seen = HashSet::new();
        let mut all = Vec::new();
        for a in answers.into_iter().flatten() {
            for agent in a {
                if seen.insert(agent.id.clone()) {
                    all.push(agent);
                }
            }
        }
        Ok(all)
    }

    fn subscribe(&self) -> EventStream {
        self.feed.subscribe()
    }

    fn sources(&self) -> Vec<SourceInfo> {
        self.slots
            .iter()
            .filter(|s| !s.removed.load(std::sync::atomic::Ordering::SeqCst))
            .map(|s| SourceInfo {
                name: s.name.clone(),
                kind: s.kind,
                target: s.target.clone(),
                state: s.state.as_ref().map(|tx| tx.subscribe()),
                unavailable: match s.unavailable.read() {
                    Ok(g) => g.clone(),
                    Err(poisoned) => poisoned.into_inner().clone(),
                },
            })
            .collect()
    }
}
