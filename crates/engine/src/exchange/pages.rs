//! The engine's answers about agent-to-agent exchanges (`SessionsApi::exchanges`,
//! `exchange`, `traffic`): the stored rows of `flows` and `runs` turned into the API's types.

use super::Exchanges;
use switchboard_types::api::{
    AnnounceOutcome, ExchangeAnnounce, ExchangeDetail, ExchangeEnd, ExchangeKind, ExchangeStatus,
    ExchangeSummary, ExchangeTurn, ExchangesPage, ExchangesQuery, OutboxQuery, RunStatus, Step,
    TrafficCount,
};
use switchboard_store::{ExchangePageQuery, ExchangeRow, RunRow, StoreError};

/// The most exchanges one page returns.
pub const EXCHANGES_PAGE_MAX: usize = 1_000;
/// Exchanges per page when the query does not say.
const EXCHANGES_PAGE_DEFAULT: usize = 100;

impl Exchanges {
    pub(crate) async fn exchanges_page(
        &self,
        q: &ExchangesQuery,
    ) -> Result<ExchangesPage, StoreError> {
        let limit = match q.limit {
            0 => EXCHANGES_PAGE_DEFAULT,
            n => n.min(EXCHANGES_PAGE_MAX),
        };
        let query = ExchangePageQuery {
            key: q.key.clone(),
            before: q.before.clone(),
            since: q.since,
            limit,
        };
        let (rows, more) = self.ctx.store().backend().page_exchanges(query).await?;
        Ok(ExchangesPage {
            exchanges: rows.into_iter().map(summary).collect(),
            more,
        })
    }

    pub(crate) async fn exchange_detail(
        &self,
        id: &str,
    ) -> Result<Option<ExchangeDetail>, StoreError> {
        let found = self.ctx.store().backend().exchange_with_runs(id).await?;
        let Some((flow, runs)) = found else {
            return Ok(None);
        };
        let announce_run = runs.iter().find(|r| r.step == Step::Announce).cloned();
        let turns = runs
            .into_iter()
            .filter(|r| matches!(r.step, Step::Message | Step::Reply))
            .map(|r| turn(&flow, r))
            .collect();
        let mut announce = announce_of(&flow, announce_run.as_ref());
        if let Some(a) = announce
            .as_mut()
            .filter(|a| a.outcome == AnnounceOutcome::Delivered)
        {
            // The announce's row is the target's, marked with the exchange.
            let query = OutboxQuery {
                limit: 1,
                session_key: Some(flow.target.clone()),
                flow_id: Some(flow.flow_id.clone()),
                ..OutboxQuery::default()
            };
            a.delivery = self
                .ctx
                .store()
                .backend()
                .list_outbox(query)
                .await?
                .into_iter()
                .next();
        }
        Ok(Some(ExchangeDetail {
            summary: summary(flow),
            turns,
            announce,
        }))
    }

    pub(crate) async fn traffic_since(&self, since: i64) -> Result<Vec<TrafficCount>, StoreError> {
        let rows = self.ctx.store().backend().traffic_since(since).await?;
        Ok(rows
            .into_iter()
            .map(|r| TrafficCount {
                requester: r.requester,
                target: r.target,
                minute: r.minute,
                exchanges: r.exchanges,
                messages: r.messages,
                capped: r.capped,
                chain_stopped: r.chain_stopped,
                refused: r.refused,
            })
            .collect())
    }
}

fn summary(f: ExchangeRow) -> ExchangeSummary {
    ExchangeSummary {
        id: f.flow_id,
        kind: f.kind,
        requester: f.requester,
        target: f.target,
        message: f.message,
        started_at: f.started_at,
        ended_at: f.ended_at,
        status: f.status,
        rounds: f.rounds,
        ended_reason: f.ended_reason,
        detail: f.detail.unwrap_or_default(),
        announce: f.announce.map(|a| a.outcome),
    }
}

/// A run of the exchange as a turn: the other party is the one it answered.
fn turn(f: &ExchangeRow, r: RunRow) -> ExchangeTurn {
    let listener = if r.session_key == f.target {
        f.requester.clone()
    } else {
        f.target.clone()
    };
    ExchangeTurn {
        round: r.round,
        listener,
        speaker: r.session_key,
        run_id: r.run_id,
        status: r.status,
        text: r.reply.unwrap_or_default(),
        error: r.error,
        started_at: r.started_at,
        ended_at: r.ended_at,
        tokens_in: r.tokens_in,
        tokens_out: r.tokens_out,
    }
}

/// What the announce did: as recorded, or (for an exchange that ended without one) why
/// there was none.
fn announce_of(f: &ExchangeRow, run: Option<&RunRow>) -> Option<ExchangeAnnounce> {
    if let Some(a) = &f.announce {
        return Some(ExchangeAnnounce {
            outcome: a.outcome,
            text: a.text.clone(),
            channel: a.channel.clone(),
            to: a.to.clone(),
            detail: a.detail.clone(),
            delivery: None,
        });
    }
    if f.kind != ExchangeKind::Send {
        return None;
    }
    match (run, f.status) {
        // The announce run is under way (or its outcome was never written: a crash).
        (Some(r), _) => Some(ExchangeAnnounce {
            outcome: match r.status {
                RunStatus::Running => AnnounceOutcome::Running,
                _ => AnnounceOutcome::Unknown,
            },
            text: r.reply.clone(),
            channel: None,
            to: None,
            detail: format!("announce run {} {}", r.run_id, r.status),
            delivery: None,
        }),
        (None, ExchangeStatus::Running) => None,
        _ => Some(ExchangeAnnounce {
            outcome: AnnounceOutcome::NotRun,
            text: None,
            channel: None,
            to: None,
            detail: format!(
                "no announce: the exchange ended {}",
                f.ended_reason.map_or("early", ExchangeEnd::as_str)
            ),
            delivery: None,
        }),
    }
}
