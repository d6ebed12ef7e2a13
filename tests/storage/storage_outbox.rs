//! The outbox's delivery state on both stores (issue 29): a claim takes due rows once and
//! counts the attempt, two claims at once never share a row, an outcome is recorded only
//! under the claim that sent it, a lapsed claim is taken again, a held row's attempt is not
//! counted, `retry_outbox` makes a failed row due with its attempts reset, and the list
//! filters failed rows.

use std::sync::Arc;

use switchboard_store::{OutboxClaim, OutboxOutcome, OutboxQuery, OutboxRow, OutboxStatus, Store};
use switchboard_store_postgres::PgStore;
use switchboard_store_sqlite::{SqliteStore, Storage};

use crate::common::pg;

fn row(i: usize) -> OutboxRow {
    OutboxRow {
        created_at: 1,
        session_key: format!("hook:ops:c{i}"),
        kind: "reply".into(),
        channel: "webhook".into(),
        to: "ops".into(),
        text: format!("m{i}"),
        status: OutboxStatus::Queued,
        ..OutboxRow::default()
    }
}

fn claim(owner: &str, now: i64, limit: u32) -> OutboxClaim {
    OutboxClaim {
        owner: owner.into(),
        now,
        claim_until: now + 1_000,
        limit,
        channels: vec!["webhook".into()],
    }
}

async fn the_delivery_state_machine(store: Arc<dyn Store>) {
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(store.insert_outbox(row(i)).await.expect("queue"));
    }
    let other = store
        .insert_outbox(OutboxRow {
            channel: "telegram".into(),
            ..row(9)
        })
        .await
        .expect("queue");
    // Two claims at once share no row; a channel with no adapter is not claimed.
    let (a, b) = tokio::join!(
        store.claim_outbox(claim("a", 10, 2)),
        store.claim_outbox(claim("b", 10, 10))
    );
    let (a, b) = (a.expect("claim a"), b.expect("claim b"));
    let mut all: Vec<i64> = a.iter().chain(&b).map(|r| r.id).collect();
    all.sort();
    assert_eq!(all, ids);
    assert!(!all.contains(&other));
    assert!(
        a.iter()
            .chain(&b)
            .all(|r| r.status == OutboxStatus::Sending && r.attempt == 1)
    );
    assert!(
        store
            .claim_outbox(claim("c", 10, 10))
            .await
            .expect("claim")
            .is_empty()
    );

    let mine = |r: &OutboxRow| {
        if a.iter().any(|x| x.id == r.id) {
            "a"
        } else {
            "b"
        }
    };
    let (first, second, third, fourth) = (ids[0], ids[1], ids[2], ids[3]);
    let owner_of = |id: i64| {
        a.iter()
            .chain(&b)
            .find(|r| r.id == id)
            .map(mine)
            .unwrap_or("?")
    };
    // Only the claim's owner records.
    let wrong = if owner_of(first) == "a" { "b" } else { "a" };
    let sent = OutboxOutcome::Sent {
        message_id: "m-1".into(),
    };
    assert!(
        !store
            .record_outbox(first, wrong, 11, sent.clone())
            .await
            .expect("record")
    );
    assert!(
        store
            .record_outbox(first, owner_of(first), 11, sent)
            .await
            .expect("record")
    );
    let retry = OutboxOutcome::Retry {
        next_at: 100,
        error: "HTTP 500".into(),
    };
    assert!(
        store
            .record_outbox(second, owner_of(second), 11, retry)
            .await
            .expect("record")
    );
    let failed = OutboxOutcome::Failed {
        error: "HTTP 400: no such chat".into(),
    };
    assert!(
        store
            .record_outbox(third, owner_of(third), 11, failed)
            .await
            .expect("record")
    );
    let held = OutboxOutcome::Held {
        next_at: 50,
        error: "channel webhook:ops stopped: HTTP 401".into(),
    };
    assert!(
        store
            .record_outbox(fourth, owner_of(fourth), 11, held)
            .await
            .expect("record")
    );

    let listed = store
        .list_outbox(OutboxQuery {
            failed_only: false,
            limit: 100,
            ..OutboxQuery::default()
        })
        .await
        .expect("list");
    let get = |id: i64| listed.iter().find(|r| r.id == id).cloned().expect("listed");
    assert_eq!(listed[0].id, other, "newest first");
    assert_eq!(get(first).status, OutboxStatus::Sent);
    assert_eq!(get(first).message_id.as_deref(), Some("m-1"));
    assert_eq!(get(second).status, OutboxStatus::Retrying);
    assert_eq!(get(second).next_at, Some(100));
    assert_eq!(get(third).status, OutboxStatus::Failed);
    assert_eq!(get(fourth).attempt, 0, "a held claim did not try");
    assert_eq!(get(fourth).claimed_by, None);
    let failed_only = store
        .list_outbox(OutboxQuery {
            failed_only: true,
            limit: 100,
            ..OutboxQuery::default()
        })
        .await
        .expect("list failed");
    assert_eq!(
        failed_only.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![third]
    );
    // One session's rows (the console's transcript marks), one exchange's (its announce).
    let announce = store
        .insert_outbox(OutboxRow {
            kind: "announce".into(),
            flow_id: Some("flow-7".into()),
            // A channel the claims below do not take.
            channel: "telegram".into(),
            ..row(2)
        })
        .await
        .expect("queue");
    let of = |session: &str, flow: Option<&str>| OutboxQuery {
        limit: 100,
        session_key: Some(session.into()),
        flow_id: flow.map(str::to_string),
        ..OutboxQuery::default()
    };
    let ids_of = |rows: Vec<OutboxRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
    let session = store
        .list_outbox(of("hook:ops:c2", None))
        .await
        .expect("list");
    assert_eq!(ids_of(session), vec![announce, third], "newest first");
    let flow = store
        .list_outbox(of("hook:ops:c2", Some("flow-7")))
        .await
        .expect("list");
    assert_eq!(ids_of(flow), vec![announce]);
    let counts = store.count_outbox().await.expect("count");
    assert_eq!(
        (counts.queued, counts.sent, counts.retrying, counts.failed),
        // The held row waits as retrying.
        (2, 1, 2, 1),
        "{counts:?}"
    );

    // Due in order of their time: the held one at 50, the retry at 100.
    let due = store.claim_outbox(claim("a", 60, 10)).await.expect("claim");
    assert_eq!(due.iter().map(|r| r.id).collect::<Vec<_>>(), vec![fourth]);
    // A claim that lapsed (its owner presumed dead) is taken again, its attempt counted.
    let again = store
        .claim_outbox(claim("b", 2_000, 10))
        .await
        .expect("claim");
    let mut again_ids: Vec<i64> = again.iter().map(|r| r.id).collect();
    again_ids.sort();
    assert_eq!(again_ids, vec![second, fourth]);
    assert!(
        !store
            .record_outbox(
                fourth,
                "a",
                2_001,
                OutboxOutcome::Sent {
                    message_id: "late".into()
                }
            )
            .await
            .expect("record"),
        "the lapsed claim's owner no longer records"
    );

    // retry: a failed row is due again with its attempts from zero; a sent one is left.
    let retried = store
        .retry_outbox(third, 3_000)
        .await
        .expect("retry")
        .expect("row");
    assert_eq!((retried.status, retried.attempt), (OutboxStatus::Queued, 0));
    assert_eq!(
        store
            .retry_outbox(first, 3_000)
            .await
            .expect("retry")
            .map(|r| r.status),
        Some(OutboxStatus::Sent)
    );
    assert_eq!(
        store.retry_outbox(99_999, 3_000).await.expect("retry"),
        None
    );

    // Parts of a long message went before a failure: their ids are kept with the retry, so
    // the next attempt sends only the rest.
    let long = store.insert_outbox(row(7)).await.expect("queue");
    let claimed = store
        .claim_outbox(claim("c", 10_000, 100))
        .await
        .expect("claim");
    assert!(claimed.iter().any(|r| r.id == long));
    let partly = OutboxOutcome::Partly {
        sent: "m-1,m-2".into(),
        then: Box::new(OutboxOutcome::Retry {
            next_at: 20_000,
            error: "HTTP 429".into(),
        }),
    };
    assert!(
        store
            .record_outbox(long, "c", 10_001, partly)
            .await
            .expect("record")
    );
    let kept = store
        .list_outbox(OutboxQuery {
            limit: 1,
            session_key: Some("hook:ops:c7".into()),
            ..OutboxQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(kept[0].status, OutboxStatus::Retrying);
    assert_eq!(kept[0].message_id.as_deref(), Some("m-1,m-2"));
    assert_eq!(kept[0].next_at, Some(20_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_state_machine_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::new(Storage::open(dir.path()).expect("storage"));
    the_delivery_state_machine(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_state_machine_on_postgres() {
    let Some(cluster) = pg::cluster_or_skip("the_delivery_state_machine_on_postgres") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let store = PgStore::open(&url).expect("open");
    the_delivery_state_machine(Arc::new(store)).await;
}
