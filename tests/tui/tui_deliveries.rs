//! Deliveries in the console (issue 29 item 3): a reply that did not reach its chat is marked
//! under it in the transcript (failed with the reason and the retry command, retrying with
//! the next attempt, queued), a sent one is not; the header counts failed deliveries; the
//! exchange view's announce line says how its delivery stands and follows it live; `/status`
//! lists the session's deliveries and the engine's counts. An engine that records no
//! deliveries (an OpenClaw gateway) shows none of it. Over the fake API; snapshots in
//! tests/tui/snapshots/.

use crate::common;
use crate::common::screen::screen;

use std::collections::HashMap;
use std::sync::Arc;

use crossterm::event::KeyCode;
use switchboard_tui::exchanges::ExchangeView;
use switchboard_tui::state::State;
use switchboard_types::api::{
    EngineEvent, ExchangeAnnounce, ExchangeDetail, ExchangeSummary, LineRole, OutboxRow,
    OutboxStatus, SessionKind, TranscriptLine,
};

use common::console_driver::Driver;
use common::fake_api::{self, Data, FakeApi};

/// 2025-06-15 15:06:40 UTC.
const NOW: i64 = 1_750_000_000_000;
const TG: &str = "agent:main:telegram:direct:1234";
const OPS: &str = "agent:ops:main";

fn said(seq: i64, role: LineRole, text: &str) -> TranscriptLine {
    TranscriptLine {
        role,
        from: if role == LineRole::User {
            "Ada (telegram)".into()
        } else {
            "agent".into()
        },
        text: text.into(),
        ..fake_api::line(TG, seq)
    }
}

fn reply(id: i64, at: i64, text: &str, status: OutboxStatus) -> OutboxRow {
    OutboxRow {
        id,
        created_at: at,
        session_key: TG.into(),
        kind: "reply".into(),
        channel: "telegram".into(),
        to: "1234".into(),
        text: text.into(),
        status,
        attempt: 1,
        ..OutboxRow::default()
    }
}

/// Ada's chat: two replies, the first sent, the second failed.
fn data() -> Data {
    let mut data = Data::default();
    data.rows
        .push(fake_api::row(TG, "Ada", SessionKind::Other, NOW + 4_000));
    data.rows
        .push(fake_api::row(OPS, "ops", SessionKind::Main, NOW - 60_000));
    data.lines.insert(
        TG.into(),
        vec![
            said(1, LineRole::User, "is the import done?"),
            said(2, LineRole::Assistant, "On it."),
            said(3, LineRole::User, "and now?"),
            said(4, LineRole::Assistant, "Done: 3 rows fixed."),
        ],
    );
    data.deliveries = Some(vec![
        OutboxRow {
            last_error: Some("Bad Request: chat not found".into()),
            attempt: 5,
            ..reply(2, NOW + 4_200, "Done: 3 rows fixed.", OutboxStatus::Failed)
        },
        OutboxRow {
            message_id: Some("501".into()),
            ..reply(1, NOW + 2_300, "On it.", OutboxStatus::Sent)
        },
    ]);
    data
}

/// A `DeliveryUpdated` of Telegram delivery `id`.
fn updated(
    id: i64,
    status: OutboxStatus,
    attempt: u32,
    message_id: Option<String>,
    next_at: Option<i64>,
    error: Option<String>,
) -> EngineEvent {
    EngineEvent::DeliveryUpdated {
        outbox_id: id,
        channel: "telegram".into(),
        status,
        attempt,
        message_id,
        next_at,
        error,
    }
}

fn state(w: u16, h: u16) -> State {
    let mut s = State::new("/srv/switchboard/state".to_string(), NOW + 5_000);
    s.width = w;
    s.height = h;
    s
}

async fn console(api: Arc<FakeApi>, w: u16, h: u16) -> Driver {
    let mut d = Driver::new(api, state(w, h));
    d.settle().await;
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_failed_is_marked_and_the_header_counts_it() {
    let api = Arc::new(FakeApi::new(data()));
    let mut d = console(api.clone(), 120, 30).await;
    let shown = screen(&d.console.state, 120, 30);
    assert!(shown.contains("· 1 failed delivery"), "{shown}");
    assert!(
        // Wrapped at the pane's edge.
        shown.contains("⚠ not delivered: failed to reach telegram 1234: Bad Request: chat"),
        "{shown}"
    );
    // The sent reply carries no mark: only one line says "delivered".
    assert_eq!(shown.matches("not delivered").count(), 1, "{shown}");
    insta::assert_snapshot!(shown);

    // `deliveries retry 2` elsewhere: the row is queued again, then sent.
    let update = |status: OutboxStatus, message_id: Option<&str>| {
        if let Some(rows) = &mut api.data.lock().expect("fake lock").deliveries {
            rows[0].status = status;
            rows[0].message_id = message_id.map(str::to_string);
        }
        api.emit(updated(
            2,
            status,
            1,
            message_id.map(str::to_string),
            None,
            None,
        ));
    };
    update(OutboxStatus::Queued, None);
    d.until("the mark says queued", |s| {
        screen(s, 120, 30).contains("… queued for telegram 1234")
    })
    .await;
    d.until("the header drops the failed count", |s| {
        !screen(s, 120, 30).contains("failed deliver")
    })
    .await;
    update(OutboxStatus::Sent, Some("502"));
    d.until("the mark goes once sent", |s| {
        !screen(s, 120, 30).contains("queued for telegram")
    })
    .await;
    assert!(!screen(&d.console.state, 120, 30).contains("not delivered"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_queued_while_watching_is_marked_until_sent() {
    let api = Arc::new(FakeApi::new(data()));
    let mut d = console(api.clone(), 120, 30).await;
    api.append(TG, LineRole::Assistant, "agent", "Anything else?");
    // The engine queues the reply just after recording it.
    let row = reply(3, NOW + 5_500, "Anything else?", OutboxStatus::Queued);
    if let Some(rows) = &mut api.data.lock().expect("fake lock").deliveries {
        rows.insert(0, row.clone());
    }
    api.emit(EngineEvent::Delivery {
        key: TG.into(),
        kind: "reply".parse().expect("kind"),
        channel: "telegram".into(),
        to: "1234".into(),
        account_id: None,
        text: row.text.clone(),
        outbox_id: 3,
    });
    d.until("the new reply is marked queued", |s| {
        screen(s, 120, 30).contains("… queued for telegram 1234")
    })
    .await;
    api.emit(updated(
        3,
        OutboxStatus::Retrying,
        1,
        None,
        Some(NOW + 5_000 + 30_000),
        Some("429 Too Many Requests: retry after 30".into()),
    ));
    d.until("the mark says when the next attempt is", |s| {
        screen(s, 120, 30).contains("⚠ not delivered yet: retrying (next attempt in 30 s) to")
    })
    .await;
}

fn announced(delivery: OutboxRow) -> (ExchangeSummary, ExchangeDetail) {
    let summary = ExchangeSummary {
        id: "x9".into(),
        kind: "send".parse().expect("kind"),
        requester: OPS.into(),
        target: TG.into(),
        message: "tell Ada the import is fixed".into(),
        started_at: NOW - 10_000,
        ended_at: Some(NOW - 2_000),
        status: "done".parse().expect("status"),
        rounds: 1,
        ended_reason: Some("reply_skip".parse().expect("reason")),
        detail: String::new(),
        announce: Some("delivered".parse().expect("outcome")),
    };
    let detail = ExchangeDetail {
        summary: summary.clone(),
        turns: Vec::new(),
        announce: Some(ExchangeAnnounce {
            outcome: "delivered".parse().expect("outcome"),
            text: Some("The import is fixed.".into()),
            channel: Some("telegram".into()),
            to: Some("1234".into()),
            detail: "queued for telegram 1234".into(),
            delivery: Some(delivery),
        }),
    };
    (summary, detail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_views_announce_line_follows_its_delivery() {
    let retrying = OutboxRow {
        kind: "announce".into(),
        flow_id: Some("x9".into()),
        next_at: Some(NOW + 5_000 + 4_000),
        last_error: Some("Telegram answered 502 Bad Gateway".into()),
        ..reply(
            7,
            NOW - 2_000,
            "The import is fixed.",
            OutboxStatus::Retrying,
        )
    };
    let (summary, detail) = announced(retrying);
    let mut data = data();
    data.exchanges = vec![summary.clone()];
    data.exchange_details = HashMap::from([("x9".to_string(), detail)]);
    let api = Arc::new(FakeApi::new(data));
    let mut d = console(api.clone(), 100, 30).await;
    d.console.state.rounds.exchange_view = Some(ExchangeView::new(summary, 1));
    d.settle().await;
    let shown = screen(&d.console.state, 100, 30);
    assert!(
        shown.contains(
            "Announce: retrying (next attempt in 4 s) to telegram 1234 · Telegram answered 502"
        ),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
    api.emit(updated(
        7,
        OutboxStatus::Sent,
        2,
        Some("9001".into()),
        None,
        None,
    ));
    d.until("the announce line says sent", |s| {
        screen(s, 100, 30).contains("Announce: sent to telegram 1234 (message 9001)")
    })
    .await;
    api.emit(updated(
        7,
        OutboxStatus::Failed,
        2,
        None,
        None,
        Some("Forbidden: bot was blocked by the user\u{1b}[31m".into()),
    ));
    d.until(
        "the announce line says failed, the channel's words made safe",
        |s| {
            let shown = screen(s, 100, 30);
            shown.contains("failed to reach telegram 1234: Forbidden: bot was blocked by the user")
                && !shown.contains('\u{1b}')
        },
    )
    .await;
}

/// `/status` typed and its card loaded.
async fn open_status(d: &mut Driver) {
    d.console.state.focus = switchboard_tui::state::Focus::Composer;
    d.type_text("/status");
    d.press(KeyCode::Enter);
    d.until("the status card is loaded", |s| {
        matches!(
            &s.card,
            Some(switchboard_tui::cards::Card::Status { rows: Some(_), .. })
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_the_sessions_deliveries_and_the_engines_counts() {
    let api = Arc::new(FakeApi::new(data()));
    let mut d = console(api, 100, 30).await;
    open_status(&mut d).await;
    let shown = screen(&d.console.state, 100, 30);
    assert!(
        shown.contains("1 sent · 1 failed · newest failed: #2 to telegram 1234"),
        "{shown}"
    );
    insta::assert_snapshot!(shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_records_no_deliveries_shows_none() {
    let mut data = data();
    data.deliveries = None;
    let api = Arc::new(FakeApi::new(data));
    let mut d = console(api, 120, 30).await;
    open_status(&mut d).await;
    let shown = screen(&d.console.state, 120, 30);
    assert!(!shown.contains("deliveries"), "{shown}");
    assert!(!shown.contains("delivered"), "{shown}");
}
