//! Switchboard's own methods (`switchboard.*`): each request's params decoded into the API's
//! serde types, the `SessionsApi` call made, its result returned as JSON, so a remote client
//! gets exactly what the embedded engine would answer.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::fit;
use switchboard_protocol::ErrorShape;
use switchboard_protocol::switchboard::{
    AbortParams, AgentSendsParams, AgentsResult, ApprovePairingParams, DeleteResult,
    DeliveryCountsResult, DeliveryParams, ExchangeParams, KeyParams, PairingsParams,
    PairingsResult, ResolveParams, StillRunningItem, StillRunningResult, TrafficParams,
    TrafficResult, WaitRunParams, WaitWorkParams, WaitWorkResult, WorkParams, decode, error_shape,
    method,
};
use switchboard_types::api::{
    ApiError, ExchangesQuery, OutboxQuery, PatchRequest, SendRequest, SessionsApi, SessionsQuery,
    ToolCall, TranscriptQuery,
};

/// The longest a `waitRun`/`waitWork` may hold a request open: a client asking for more
/// asks again, and a connection is never tied up for hours by one call.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// Answers a `switchboard.*` method (other than `subscribe`, which needs the connection);
/// `None` for any other method, so the caller falls through to its own.
pub async fn call(
    api: &Arc<dyn SessionsApi>,
    method: &str,
    params: &mut Option<Value>,
    max_payload: usize,
) -> Option<Result<Value, ErrorShape>> {
    if !method::ALL.contains(&method) || method == method::SUBSCRIBE {
        return None;
    }
    // Taken only once the method is known to be ours: others keep their params.
    let params = match params.take() {
        None | Some(Value::Null) => json!({}),
        Some(v) => v,
    };
    Some(answer(api.as_ref(), method, params, max_payload).await)
}

fn bad(message: String) -> ErrorShape {
    error_shape(&ApiError::BadInput(message))
}

fn out<T: Serialize>(r: Result<T, ApiError>) -> Result<Value, ErrorShape> {
    let v = r.map_err(|e| error_shape(&e))?;
    serde_json::to_value(v).map_err(|e| error_shape(&ApiError::storage(e.to_string())))
}

fn p<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T, ErrorShape> {
    decode(&format!("{method} params"), v).map_err(bad)
}

/// A transcript page made to fit one frame: its oldest lines left out (`leftOut`, the
/// client pages back for them), a line too long for a quarter of the frame cut with the
/// marker.
fn fit_transcript(page: &mut Value, max_payload: usize) {
    let paged = fit::page_field(page, "lines", fit::budget(max_payload), |line| {
        json!({
            "seq": line["seq"], "role": line["role"], "timestamp": line["timestamp"],
            "from": "", "text": "[omitted: message too large for the gateway's frame limit]",
        })
    });
    if paged.dropped > 0 {
        page["leftOut"] = json!(paged.dropped);
    }
}

/// A page of deliveries (newest first) fitted to the frame: its oldest rows left out, and
/// counted, when their texts (an agent's 100 KB reply each) would not fit.
fn fit_deliveries(rows: Value, max_payload: usize) -> Value {
    let mut rows = match rows {
        Value::Array(rows) => rows,
        _ => Vec::new(),
    };
    // `fit::page` keeps the end of the list: the newest, once reversed.
    rows.reverse();
    let mut page = json!({ "deliveries": rows });
    let paged = fit::page_field(&mut page, "deliveries", fit::budget(max_payload), |row| {
        let mut row = row.clone();
        row["text"] = json!("[omitted: message too large for the gateway's frame limit]");
        row
    });
    if let Some(Value::Array(rows)) = page.get_mut("deliveries") {
        rows.reverse();
    }
    if paged.dropped > 0 {
        page["leftOut"] = json!(paged.dropped);
    }
    page
}

fn limit(ms: u64) -> Duration {
    Duration::from_millis(ms).min(MAX_WAIT)
}

async fn answer(
    api: &dyn SessionsApi,
    m: &str,
    v: Value,
    max_payload: usize,
) -> Result<Value, ErrorShape> {
    match m {
        method::STATUS => out(api.status().await),
        method::SESSIONS => out(api.sessions(p::<SessionsQuery>(m, v)?).await),
        method::SESSION => out(api.session(&p::<KeyParams>(m, v)?.key).await),
        method::TRANSCRIPT => {
            let mut page = out(api.transcript(p::<TranscriptQuery>(m, v)?).await)?;
            fit_transcript(&mut page, max_payload);
            Ok(page)
        }
        method::RESOLVE_KEY => {
            let r: ResolveParams = p(m, v)?;
            out(api.resolve_key(&r.raw, r.purpose).await)
        }
        method::SEND => out(api.send(p::<SendRequest>(m, v)?).await),
        method::WAIT_RUN => {
            let r: WaitRunParams = p(m, v)?;
            out(api.wait_run(&r.run_id, limit(r.timeout_ms)).await)
        }
        method::WAIT_WORK => {
            let r: WaitWorkParams = p(m, v)?;
            out(api
                .wait_work(r.work, limit(r.timeout_ms))
                .await
                .map(|done| WaitWorkResult { done }))
        }
        method::STILL_RUNNING => {
            let r: WorkParams = p(m, v)?;
            out(api
                .still_running(r.work)
                .await
                .map(|tasks| StillRunningResult {
                    running: tasks
                        .into_iter()
                        .map(|(label, age)| StillRunningItem {
                            label,
                            age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                        })
                        .collect(),
                }))
        }
        method::CALL_TOOL => out(api.call_tool(p::<ToolCall>(m, v)?).await),
        method::PATCH => out(api.patch(p::<PatchRequest>(m, v)?).await),
        method::AGENT_SENDS => {
            let a = p::<AgentSendsParams>(m, v)?;
            out(api.set_agent_sends(&a.key, a.stopped).await)
        }
        method::DELETE => out(api
            .delete(&p::<KeyParams>(m, v)?.key)
            .await
            .map(|deleted| DeleteResult { deleted })),
        method::AGENTS => out(api.agents().await.map(|agents| AgentsResult { agents })),
        method::ABORT => {
            let r: AbortParams = p(m, v)?;
            out(api.abort(&r.key, r.run_id.as_deref()).await)
        }
        method::EXCHANGES => out(api.exchanges(p::<ExchangesQuery>(m, v)?).await),
        method::EXCHANGE => out(api.exchange(&p::<ExchangeParams>(m, v)?.id).await),
        method::TRAFFIC => out(api
            .traffic(p::<TrafficParams>(m, v)?.since)
            .await
            .map(|counts| TrafficResult { counts })),
        method::DELIVERIES => {
            let rows = out(api.deliveries(p::<OutboxQuery>(m, v)?).await)?;
            Ok(fit_deliveries(rows, max_payload))
        }
        method::DELIVERY_COUNTS => out(api
            .delivery_counts()
            .await
            .map(|counts| DeliveryCountsResult { counts })),
        method::RETRY_DELIVERY => out(api.retry_delivery(p::<DeliveryParams>(m, v)?.id).await),
        method::PAIRINGS => out(api
            .pairings(p::<PairingsParams>(m, v)?.channel)
            .await
            .map(|pairings| PairingsResult { pairings })),
        method::APPROVE_PAIRING => {
            let a: ApprovePairingParams = p(m, v)?;
            out(api.approve_pairing(&a.channel, &a.code).await)
        }
        other => Err(bad(format!("unknown method: {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_types::api::TranscriptPage;

    #[test]
    fn a_page_of_deliveries_over_the_frame_keeps_the_newest_and_counts_the_rest() {
        // Newest first, each with a 100 KB reply: forty do not fit in 512 KiB.
        let rows: Vec<Value> = (0..40)
            .rev()
            .map(|id| json!({"id": id, "status": "failed", "text": "x".repeat(100_000)}))
            .collect();
        let page = fit_deliveries(Value::Array(rows), 512 * 1024);
        assert!(serde_json::to_string(&page).expect("json").len() <= 512 * 1024);
        let ids: Vec<i64> = page["deliveries"]
            .as_array()
            .expect("rows")
            .iter()
            .filter_map(|r| r["id"].as_i64())
            .collect();
        assert_eq!(ids.first(), Some(&39), "the newest is kept, first: {ids:?}");
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
        assert!(ids.len() < 40);
        assert_eq!(page["leftOut"].as_u64(), Some(40 - ids.len() as u64));
    }

    #[test]
    fn a_transcript_page_over_the_frame_leaves_its_oldest_lines_out() {
        let line = |seq: i64| {
            json!({"seq": seq, "role": "user", "timestamp": 0, "from": "a",
                   "text": "x".repeat(250_000)})
        };
        let mut page = json!({"key": "k", "exists": true, "lines": (1..=6).map(line).collect::<Vec<_>>(),
                              "lastSeq": 6});
        fit_transcript(&mut page, 1 << 20);
        assert!(fit::json_len(&page) <= fit::budget(1 << 20));
        let read: TranscriptPage = serde_json::from_value(page).expect("a page");
        assert_eq!(read.left_out, 2);
        assert_eq!(
            read.lines.iter().map(|l| l.seq).collect::<Vec<_>>(),
            vec![3, 4, 5, 6]
        );
        // A page that fits is untouched and says nothing was left out.
        let mut small = json!({"key": "k", "exists": true, "lines": [line(1)], "lastSeq": 1});
        fit_transcript(&mut small, 1 << 20);
        assert!(small.get("leftOut").is_none());
    }
}
