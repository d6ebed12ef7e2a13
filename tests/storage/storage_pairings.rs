//! Direct-message pairing on both stores (issue 29, `dmPolicy: "pairing"`): a new sender is
//! given the code asked with, asking again while it waits gives nothing new, a channel holds
//! at most `cap` waiting codes (others' expired ones are dropped to make room), a code
//! approves its sender once and only before it expires, and the list shows what waits and
//! what was approved, per channel.

use std::sync::Arc;

use switchboard_store::{PairingAnswer, PairingRequest, Store};
use switchboard_store_postgres::PgStore;
use switchboard_store_sqlite::{SqliteStore, Storage};

use crate::common::pg;

const HOUR: i64 = 3_600_000;

fn asking(channel: &str, sender: &str) -> PairingRequest {
    PairingRequest {
        channel: channel.into(),
        sender: sender.into(),
        display_name: Some(format!("user {sender}")),
    }
}

async fn pairing(store: Arc<dyn Store>) {
    let ask = |sender: &'static str, code: &'static str, now: i64| {
        let store = store.clone();
        async move {
            store
                .request_pairing(asking("telegram", sender), code, now, HOUR, 2)
                .await
                .expect("request")
        }
    };
    assert_eq!(
        ask("42", "AAAA2222", 1_000).await,
        PairingAnswer::New {
            code: "AAAA2222".into(),
            expires_at: 1_000 + HOUR
        }
    );
    assert_eq!(ask("42", "BBBB3333", 2_000).await, PairingAnswer::Waiting);
    assert_eq!(
        ask("43", "CCCC4444", 3_000).await,
        PairingAnswer::New {
            code: "CCCC4444".into(),
            expires_at: 3_000 + HOUR
        }
    );
    // Two wait on telegram: a third sender gets nothing; another channel is not counted.
    assert_eq!(ask("44", "DDDD5555", 4_000).await, PairingAnswer::Full);
    assert!(matches!(
        store
            .request_pairing(asking("discord", "44"), "DDDD5555", 4_000, HOUR, 2)
            .await
            .expect("request"),
        PairingAnswer::New { .. }
    ));

    // A wrong code, or the right one on another channel, approves nobody.
    assert_eq!(
        store
            .approve_pairing("telegram", "ZZZZ9999", 5_000)
            .await
            .expect("approve"),
        None
    );
    assert_eq!(
        store
            .approve_pairing("discord", "AAAA2222", 5_000)
            .await
            .expect("approve"),
        None
    );
    let approved = store
        .approve_pairing("telegram", "AAAA2222", 5_000)
        .await
        .expect("approve")
        .expect("approved");
    assert_eq!(
        (approved.sender.as_str(), approved.approved_at),
        ("42", Some(5_000))
    );
    assert_eq!(approved.display_name.as_deref(), Some("user 42"));
    assert_eq!(
        store
            .approve_pairing("telegram", "AAAA2222", 6_000)
            .await
            .expect("again"),
        None,
        "a code approves once"
    );
    assert_eq!(ask("42", "EEEE6666", 7_000).await, PairingAnswer::Approved);
    // Now one waits: room for the third.
    assert!(matches!(
        ask("44", "FFFF7777", 8_000).await,
        PairingAnswer::New { .. }
    ));

    // An hour later 43's code has expired: it cannot be approved, it is not listed, and 43
    // asking again gets a new code.
    let later = 3_000 + HOUR + 1;
    assert_eq!(
        store
            .approve_pairing("telegram", "CCCC4444", later)
            .await
            .expect("approve"),
        None
    );
    let listed = store
        .pairings(Some("telegram".into()), later)
        .await
        .expect("list");
    let senders: Vec<&str> = listed.iter().map(|p| p.sender.as_str()).collect();
    assert_eq!(senders, ["44", "42"], "newest first: {listed:?}");
    assert!(matches!(
        ask("43", "GGGG8888", later).await,
        PairingAnswer::New { .. }
    ));
    assert_eq!(store.pairings(None, later).await.expect("all").len(), 4);
    let found = store
        .pairing_of("telegram", "42")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(found.approved_at, Some(5_000));

    // Approved without a code (an import of OpenClaw's approvals): once; a waiting sender
    // becomes approved too.
    assert!(
        store
            .approve_sender("telegram", "99", later)
            .await
            .expect("approve")
    );
    assert!(
        !store
            .approve_sender("telegram", "99", later + 1)
            .await
            .expect("again")
    );
    assert!(
        store
            .approve_sender("telegram", "44", later)
            .await
            .expect("waiting one")
    );
    for sender in ["99", "44"] {
        let p = store
            .pairing_of("telegram", sender)
            .await
            .expect("read")
            .expect("there");
        assert!(p.approved_at.is_some(), "{p:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::new(Storage::open(dir.path()).expect("storage"));
    pairing(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_on_postgres() {
    let Some(cluster) = pg::cluster_or_skip("pairing_on_postgres") else {
        return;
    };
    let url = pg::fresh_database(cluster);
    let store = PgStore::open(&url).expect("open");
    pairing(Arc::new(store)).await;
}
