//! `sessions.list` answered from rows the gateway keeps rendered (`switchboard_server`'s
//! `rows.rs`): a kept row is used only while nothing it shows has moved. Each change an
//! owner or another process can make shows on the next list, and the spliced answer equals
//! the one built whole (the path a text search still takes).

use crate::common;
use crate::gateway_support::*;

use serde_json::{Value, json};

fn bench() -> common::Bench {
    common::bench(json!({
        "agents": { "list": [
            { "id": "main", "default": true, "model": "fake/fake-1",
              "script": [ { "reply": "re: {{text}}" } ] },
        ] },
        "models": { "providers": { "fake": { "baseUrl": "http://127.0.0.1:9/v1",
            "models": [ { "id": "fake-1", "contextWindow": 64000 } ] } } },
    }))
}

fn payload(res: &Value) -> Value {
    assert_eq!(res["ok"], true, "{res}");
    let mut p = res["payload"].clone();
    if let Some(m) = p.as_object_mut() {
        m.remove("ts");
    }
    p
}

fn row<'a>(list: &'a Value, key: &str) -> Option<&'a Value> {
    list["sessions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["key"] == key))
}

/// The same page built whole: an agent filter takes the text path, which reads every row
/// anew (every session here is `main`'s, so the rows are the same ones).
async fn built(ws: &mut Ws) -> Value {
    payload(
        &call(
            ws,
            "b",
            "sessions.list",
            json!({"limit": 50, "agentId": "main"}),
        )
        .await,
    )
}

async fn kept(ws: &mut Ws) -> Value {
    payload(&call(ws, "k", "sessions.list", json!({"limit": 50})).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_row_never_shows_what_changed() {
    let b = bench();
    let gw = start(b.engine.start()).await;
    let (mut ws, _) = connected(&gw.addr, &[]).await;
    for key in ["agent:main:a", "agent:main:b", "agent:main:c"] {
        let created = call(&mut ws, "c", "sessions.create", json!({"key": key})).await;
        assert_eq!(created["ok"], true, "{created}");
    }
    let first = kept(&mut ws).await;
    assert_eq!(first["count"], 3, "{first}");
    assert_eq!(
        kept(&mut ws).await,
        first,
        "a second list from the kept rows is the same"
    );
    assert_eq!(
        built(&mut ws).await,
        first,
        "and the same as one built whole"
    );

    // The owner's patch: the row shows the new policy.
    let patched = call(
        &mut ws,
        "p",
        "sessions.patch",
        json!({"key": "agent:main:a", "sendPolicy": "deny"}),
    )
    .await;
    assert_eq!(patched["ok"], true, "{patched}");
    let list = kept(&mut ws).await;
    assert_eq!(
        row(&list, "agent:main:a").map(|r| r["sendPolicy"].clone()),
        Some(json!("deny"))
    );

    // A message and its reply: the row moves up with its new activity time.
    let before = row(&list, "agent:main:b").map(|r| r["updatedAt"].clone());
    send_and_wait(&mut ws, "agent:main:b", "hello", "i1").await;
    let list = kept(&mut ws).await;
    assert_eq!(list["sessions"][0]["key"], "agent:main:b", "{list}");
    assert_ne!(
        row(&list, "agent:main:b").map(|r| r["updatedAt"].clone()),
        before
    );
    assert_eq!(built(&mut ws).await, list);

    // Another process edits an entry straight in the database: the trigger gives the row
    // a new revision, so the kept one is not used.
    let db =
        rusqlite::Connection::open(b.dir().join(switchboard_store_sqlite::DB_FILE)).expect("db");
    db.busy_timeout(std::time::Duration::from_secs(10))
        .expect("timeout");
    let n = db
        .execute(
            "UPDATE sessions SET entry = json_set(entry, '$.displayName', 'Edited elsewhere') \
             WHERE key = 'agent:main:c'",
            [],
        )
        .expect("update");
    assert_eq!(n, 1);
    let list = kept(&mut ws).await;
    assert_eq!(
        row(&list, "agent:main:c").map(|r| r["displayName"].clone()),
        Some(json!("Edited elsewhere")),
        "{list}"
    );
    assert_eq!(built(&mut ws).await, list);

    // A deleted session is gone from the next list.
    let deleted = call(
        &mut ws,
        "d",
        "sessions.delete",
        json!({"key": "agent:main:c"}),
    )
    .await;
    assert_eq!(deleted["ok"], true, "{deleted}");
    let list = kept(&mut ws).await;
    assert!(row(&list, "agent:main:c").is_none(), "{list}");
    assert_eq!(list["count"], 2);
    assert_eq!(built(&mut ws).await, list);
}
