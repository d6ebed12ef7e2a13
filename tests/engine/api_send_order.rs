//! `SessionsApi::send`: messages into one session are recorded in the order the calls were
//! made, however many are under way at once (issue 11: six lines pasted one Enter each were
//! stored `L1 L2 L3 L6 L4 L5`).

use crate::common;

use std::future::Future;
use std::pin::Pin;

use serde_json::json;
use switchboard_types::api::{LineRole, SendReceipt, SendRequest, Sender, TranscriptQuery};

type Call<'a> = Pin<
    Box<dyn Future<Output = Result<SendReceipt, switchboard_types::api::ApiError>> + Send + 'a>,
>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sends_under_way_at_once_are_recorded_in_call_order() {
    let bench = common::bench(json!({
        "agents": { "list": [ { "id": "main", "default": true, "model": "scripted",
                                "script": [ { "reply": "pong: {{text}}" } ] } ] },
    }));
    let api = bench.engine.start();
    let sent: Vec<String> = (1..=100).map(|i| format!("L{i}")).collect();
    let calls: Vec<Call<'_>> = sent
        .iter()
        .map(|text| {
            api.send(SendRequest {
                key: "agent:main:main".into(),
                text: text.clone(),
                from: Sender::owner(),
                idempotency_key: None,
            })
        })
        .collect();
    let receipts: Vec<SendReceipt> = common::join::join_in_order(calls)
        .await
        .into_iter()
        .map(|r| r.expect("the message is recorded"))
        .collect();
    let seqs: Vec<i64> = receipts.iter().map(|r| r.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "sequence numbers follow the call order: {seqs:?}"
    );
    let page = api
        .transcript(TranscriptQuery {
            key: "agent:main:main".into(),
            limit: 1000,
            ..TranscriptQuery::default()
        })
        .await
        .expect("the transcript");
    let stored: Vec<&str> = page
        .lines
        .iter()
        .filter(|l| l.role == LineRole::User)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(stored, sent);
}
