//! The name order of the sessions page (`SessionsQuery::order`): the engine sorts every
//! session by the name front ends show (display name, else label, else the key),
//! case-insensitive, ties by key, and pages through it by offset as the activity order
//! does, together with every filter the page takes (kinds, text, archived, active since)
//! and the last-message previews.

use crate::common;

use std::collections::HashSet;

use serde_json::json;
use switchboard_engine::Engine;
use switchboard_engine::store::SessionInit;
use switchboard_store_sqlite::queries::NewLine;
use switchboard_types::api::{SessionKind, SessionsApi, SessionsOrder, SessionsQuery};
use switchboard_types::key::SessionKey;

/// Sessions made for the order tests.
const N: usize = 1_200;

/// One made session: its key, kind and the name the pane shows for it.
#[derive(Debug, Clone)]
struct Made {
    key: String,
    kind: SessionKind,
    shown: String,
    archived: bool,
}

/// A name with a mixed-case start that is not in creation order (so the activity order and
/// the name order disagree everywhere), some of them non-ASCII.
fn scrambled(i: usize) -> String {
    const STARTS: [&str; 10] = [
        "Zulu", "alpha", "Émile", "echo", "BRAVO", "éclair", "Charlie", "delta", "Äpfel", "zeta",
    ];
    let j = (i * 7_919) % N;
    format!("{} {j:04}", STARTS[(i * 31) % STARTS.len()])
}

/// `N` sessions: a third with a display name, a third with a label only, a third with
/// neither (the key is the name). Every fifth is a group, every seventh a cron job; a few
/// share a display name (differing in case only), and some are archived.
async fn populate(engine: &Engine) -> Vec<Made> {
    let mut made = Vec::with_capacity(N);
    for i in 0..N {
        let key = if i % 5 == 0 {
            format!("agent:main:discord:group:g{i:04}")
        } else if i % 7 == 0 {
            format!("agent:main:cron:job{i:04}")
        } else {
            // Keys sort against the names: `agent:…` falls between `Äpfel`… and `bravo`….
            format!("agent:main:dm-{:04}", (i * 613) % N)
        };
        let mut init = SessionInit::default();
        let shown = match i % 3 {
            0 if i % 60 == 0 => {
                // The same name as another, in another case: the key decides.
                let name = if i % 120 == 0 { "Twin" } else { "twin" };
                init.display_name = Some(name.into());
                name.to_string()
            }
            0 => {
                let name = scrambled(i);
                init.display_name = Some(name.clone());
                name
            }
            1 => {
                let name = scrambled(i).to_uppercase();
                init.label = Some(name.clone());
                name
            }
            _ => key.clone(),
        };
        let k = SessionKey::from_canonical(key.clone());
        let (s, _) = engine.store().ensure(&k, init).await.expect("ensure");
        let kind = s.kind;
        let archived = i % 11 == 0;
        if archived {
            engine
                .store()
                .patch(&k, |e| {
                    e.archived_at = Some(1);
                    Ok(())
                })
                .await
                .expect("archive");
        }
        made.push(Made {
            key,
            kind,
            shown,
            archived,
        });
    }
    made
}

/// The keys of `made` that pass `keep`, in the name order worked out here.
fn expected(made: &[Made], keep: impl Fn(&Made) -> bool) -> Vec<String> {
    let mut rows: Vec<&Made> = made.iter().filter(|m| keep(m)).collect();
    rows.sort_by_cached_key(|m| (m.shown.to_lowercase(), m.key.clone()));
    rows.into_iter().map(|m| m.key.clone()).collect()
}

/// Every page of `q` (in pages of `page`), concatenated; checks each page's order and count.
async fn page_through(engine: &Engine, q: SessionsQuery, page: usize) -> Vec<String> {
    let mut keys = Vec::new();
    let mut offset = 0;
    loop {
        let got = engine
            .sessions(SessionsQuery {
                offset,
                limit: page,
                count: true,
                ..q.clone()
            })
            .await
            .expect("page");
        assert_eq!(got.order, q.order, "the page says which order it is in");
        assert_eq!(got.offset, offset);
        if got.rows.is_empty() {
            assert_eq!(got.matching, Some(keys.len() as u64), "count of {q:?}");
            return keys;
        }
        keys.extend(got.rows.iter().map(|r| r.key.clone()));
        offset += got.rows.len();
    }
}

fn by_name() -> SessionsQuery {
    SessionsQuery {
        order: SessionsOrder::Name,
        ..SessionsQuery::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_through_the_name_order_gives_every_session_once_in_order() {
    let b = common::bench(json!({}));
    let made = populate(&b.engine).await;
    let want = expected(&made, |m| !m.archived);
    assert!(want.len() > 1_000, "{} sessions listed", want.len());

    let got = page_through(&b.engine, by_name(), 97).await;
    let unique: HashSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "a session listed twice");
    assert_eq!(got, want);
    // The start is what the owner sees first: names, mixed case, folded.
    let first = b
        .engine
        .sessions(SessionsQuery {
            limit: 3,
            ..by_name()
        })
        .await
        .expect("first page");
    let names: Vec<&str> = first.rows.iter().map(|r| r.name.as_str()).collect();
    assert!(
        names.iter().all(
            |n| n.to_lowercase().starts_with("agent:") || n.to_lowercase().starts_with("alpha")
        ),
        "{names:?}"
    );
    // Non-ASCII capitals sort with their small letters, after every ASCII letter.
    let pos = |name_start: &str| {
        got.iter()
            .position(|k| {
                made.iter()
                    .any(|m| &m.key == k && m.shown.to_lowercase().starts_with(name_start))
            })
            .expect("present")
    };
    assert!(pos("zulu") < pos("äpfel") && pos("äpfel") < pos("éclair"));
    // The activity order is still the default, and differs.
    let activity = page_through(&b.engine, SessionsQuery::default(), 400).await;
    assert_eq!(activity.len(), want.len());
    assert_ne!(activity, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_order_keeps_every_filter() {
    let b = common::bench(json!({}));
    let made = populate(&b.engine).await;
    let groups = page_through(
        &b.engine,
        SessionsQuery {
            kinds: vec![SessionKind::Group],
            ..by_name()
        },
        53,
    )
    .await;
    assert_eq!(
        groups,
        expected(&made, |m| m.kind == SessionKind::Group && !m.archived)
    );
    assert!(groups.len() > 150);
    let two_kinds = page_through(
        &b.engine,
        SessionsQuery {
            kinds: vec![SessionKind::Group, SessionKind::Cron],
            ..by_name()
        },
        53,
    )
    .await;
    assert_eq!(
        two_kinds,
        expected(&made, |m| {
            matches!(m.kind, SessionKind::Group | SessionKind::Cron) && !m.archived
        })
    );
    let archived_too = page_through(
        &b.engine,
        SessionsQuery {
            archived: true,
            ..by_name()
        },
        211,
    )
    .await;
    assert_eq!(archived_too, expected(&made, |_| true));
    // A text filter matches the key or the name, case-insensitive.
    let text = page_through(
        &b.engine,
        SessionsQuery {
            text: "ÉCLAIR".into(),
            ..by_name()
        },
        7,
    )
    .await;
    let want_text = expected(&made, |m| {
        !m.archived && m.shown.to_lowercase().contains("éclair")
    });
    assert!(want_text.len() > 10);
    assert_eq!(text, want_text);
    // Active since: only the sessions touched after the mark, still by name.
    let touched: Vec<&Made> = made.iter().filter(|m| !m.archived).step_by(9).collect();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let mark = now_ms();
    for m in &touched {
        let line = NewLine::message(json!({"role": "user", "content": "hi"}));
        b.engine
            .store()
            .append(&SessionKey::from_canonical(m.key.clone()), vec![line])
            .await
            .expect("append");
    }
    let recent = page_through(
        &b.engine,
        SessionsQuery {
            active_since: Some(mark),
            ..by_name()
        },
        10,
    )
    .await;
    let touched_keys: HashSet<&str> = touched.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(
        recent,
        expected(&made, |m| touched_keys.contains(m.key.as_str()))
    );
    // Previews come with the name order too: the last message of each touched row.
    let page = b
        .engine
        .sessions(SessionsQuery {
            active_since: Some(mark),
            limit: 5,
            previews: true,
            ..by_name()
        })
        .await
        .expect("page with previews");
    assert_eq!(page.rows.len(), 5);
    assert!(
        page.rows
            .iter()
            .all(|r| r.last_message.as_deref() == Some("hi")),
        "{:?}",
        page.rows
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_session_moves_to_its_new_place() {
    let b = common::bench(json!({}));
    for (key, name) in [
        ("agent:main:dm-a", "Mike"),
        ("agent:main:dm-b", "november"),
        ("agent:main:dm-c", "Oscar"),
    ] {
        let init = SessionInit {
            display_name: Some(name.into()),
            ..SessionInit::default()
        };
        b.engine
            .store()
            .ensure(&SessionKey::from_canonical(key), init)
            .await
            .expect("ensure");
    }
    let names = |page: switchboard_types::api::SessionsPage| -> Vec<String> {
        page.rows.into_iter().map(|r| r.name).collect()
    };
    let page = b.engine.sessions(by_name_all()).await.expect("page");
    assert_eq!(names(page), ["Mike", "november", "Oscar"]);
    b.engine
        .store()
        .patch(&SessionKey::from_canonical("agent:main:dm-c"), |e| {
            e.display_name = Some("able".into());
            Ok(())
        })
        .await
        .expect("rename");
    let page = b.engine.sessions(by_name_all()).await.expect("page");
    assert_eq!(names(page), ["able", "Mike", "november"]);
}

fn by_name_all() -> SessionsQuery {
    SessionsQuery {
        limit: 50,
        ..by_name()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
