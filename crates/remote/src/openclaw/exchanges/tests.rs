//! Tests of the exchange book: the captured scenarios, partial records, held exchanges, and
//! live updates that must equal a whole build.

use super::*;
use serde_json::json;

const A: &str = "agent:main:a";
const B: &str = "agent:work:b";
const T0: i64 = 1_700_000_000_000;

fn forwarded(seq: i64, at: i64, from: &str, text: &str) -> Value {
    json!({ "role": "user", "content": text, "timestamp": at,
            "provenance": { "kind": "inter_session", "sourceSessionKey": from,
                            "sourceTool": "sessions_send" },
            "__openclaw": { "seq": seq } })
}

fn book(b_lines: Vec<Value>, b_row: Value) -> Book {
    let mut book = Book::default();
    book.row(&json!({ "key": A }));
    let mut row = b_row;
    row["key"] = json!(B);
    book.row(&row);
    let total = b_lines.len() as i64;
    book.history(B, &json!({ "messages": b_lines, "totalMessages": total }));
    book
}

fn only(book: &mut Book, now: i64) -> (ExchangeDetail, Vec<EngineEvent>) {
    let events = book.rebuild(now);
    assert_eq!(book.built().exchanges.len(), 1);
    (book.built().exchanges[0].clone(), events)
}

/// A run's reply line.
fn said(seq: i64, at: i64, run: &str, text: &str) -> Value {
    json!({ "role": "assistant", "content": [{ "type": "text", "text": text }],
            "timestamp": at, "stopReason": "stop",
            "__openclaw": { "seq": seq, "runId": run } })
}

/// A book of A and B with only A's record read: A sent B "PING", got "pong" forwarded back
/// and answered "ping again" (run `a1`), a ping-pong's first reply-back turn.
fn requester_read_first() -> Book {
    let call = json!({ "role": "assistant", "stopReason": "toolUse", "timestamp": T0,
                       "content": [{ "type": "toolCall", "id": "c1", "name": "sessions_send",
                                     "arguments": { "sessionKey": B, "message": "PING" } }],
                       "__openclaw": { "seq": 1 } });
    let mut book = Book::default();
    book.row(&json!({ "key": A }));
    book.row(&json!({ "key": B }));
    let a_lines = [
        call,
        forwarded(2, T0 + 2_000, B, "pong"),
        said(3, T0 + 3_000, "a1", "ping again"),
    ];
    book.history(A, &json!({ "messages": a_lines, "totalMessages": 3 }));
    book
}

/// The reply-back line of a ping-pong read before the exchange it continues (the
/// requester's record came first): no exchange of its own is told or counted, ever.
#[test]
fn a_reply_back_line_read_before_its_exchange_is_never_told_as_one() {
    let mut book = requester_read_first();
    let events = book.rebuild(T0 + 4_000);
    assert!(events.is_empty(), "{events:?}");
    assert!(book.traffic(0).is_empty(), "{:?}", book.traffic(0));
    let b_lines = [
        forwarded(1, T0 + 500, A, "PING"),
        said(2, T0 + 1_000, "b1", "pong"),
    ];
    book.history(B, &json!({ "messages": b_lines, "totalMessages": 2 }));
    let events = book.rebuild(T0 + 5_000);
    let started: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ExchangeStarted {
                exchange_id,
                requester,
                ..
            } => Some((exchange_id.clone(), requester.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(started, [(format!("{B}#1"), A.to_string())]);
    let rounds = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::ExchangeRound { .. }))
        .count();
    assert_eq!(rounds, 2, "{events:?}");
    assert_eq!(book.built().exchanges.len(), 1);
    let counted: u32 = book.traffic(0).iter().map(|c| c.messages).sum();
    assert_eq!(counted, 3, "the message and two rounds");
}

#[test]
fn a_failed_reply_ends_the_exchange_with_its_error() {
    let mut b = book(
        vec![
            forwarded(1, T0, A, "go"),
            json!({ "role": "assistant", "content": [], "stopReason": "error",
                    "errorMessage": "model overloaded", "timestamp": T0 + 5,
                    "__openclaw": { "seq": 2, "runId": "r1" } }),
        ],
        json!({}),
    );
    let (d, _) = only(&mut b, T0 + 10 * SETTLE_MS);
    assert_eq!(d.summary.ended_reason, Some(ExchangeEnd::Error));
    assert_eq!(d.turns[0].status, RunStatus::Error);
    assert_eq!(d.turns[0].error.as_deref(), Some("model overloaded"));
    assert!(d.summary.detail.contains("model overloaded"));
}

/// A run that failed before it replied leaves OpenClaw's notice, not an assistant line:
/// the exchange ends in that error, with the notice's words.
#[test]
fn a_failed_runs_notice_ends_the_exchange_with_its_words() {
    let mut b = book(
        vec![
            forwarded(1, T0, A, "go"),
            json!({ "role": "custom", "customType": RUN_FAILED_NOTICE,
                    "content": "This turn ended before a reply: model overloaded",
                    "timestamp": T0 + 5, "__openclaw": { "seq": 2 } }),
        ],
        json!({}),
    );
    let (d, _) = only(&mut b, T0 + 10 * SETTLE_MS);
    assert_eq!(d.summary.ended_reason, Some(ExchangeEnd::Error));
    assert_eq!(d.turns[0].status, RunStatus::Error);
    assert!(
        d.summary.detail.contains("model overloaded"),
        "{}",
        d.summary.detail
    );
}

#[test]
fn a_message_without_reply_is_pending_then_not_recorded_and_no_round_is_made_up() {
    let mut b = book(vec![forwarded(1, T0, A, "go")], json!({}));
    let (d, events) = only(&mut b, T0 + 1_000);
    assert_eq!(d.summary.status, ExchangeStatus::Running);
    assert_eq!(d.summary.ended_reason, None);
    assert!(d.turns.is_empty());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EngineEvent::ExchangeLoopEnded { .. }))
    );
    let (d, events) = only(&mut b, T0 + 10 * SETTLE_MS);
    assert_eq!(d.summary.ended_reason, Some(ExchangeEnd::NotRecorded));
    assert_eq!(d.summary.status, ExchangeStatus::Done);
    assert!(
        d.summary.detail.contains(NOT_RECORDED),
        "{}",
        d.summary.detail
    );
    // No reply: OpenClaw runs no announce.
    assert_eq!(d.announce.map(|a| a.outcome), Some(AnnounceOutcome::NotRun));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::ExchangeEnded { .. }))
    );
}

#[test]
fn a_run_still_going_is_a_running_round() {
    let mut b = book(
        vec![forwarded(1, T0, A, "go")],
        json!({ "hasActiveRun": true }),
    );
    let (d, _) = only(&mut b, T0 + 10 * SETTLE_MS);
    assert_eq!(d.turns.len(), 1);
    assert_eq!(d.turns[0].status, RunStatus::Running);
    assert_eq!(d.summary.rounds, 0);
    assert_eq!(d.summary.ended_reason, None);
}

#[test]
fn an_announce_to_a_routed_target_names_the_route_and_not_the_delivery() {
    let mut b = book(
        vec![
            forwarded(1, T0, A, "go"),
            json!({ "role": "assistant", "content": "done", "timestamp": T0 + 5,
                    "__openclaw": { "seq": 2, "runId": "r1" } }),
            json!({ "role": "assistant", "content": "posted", "timestamp": T0 + 9,
                    "__openclaw": { "seq": 3, "runId": "r2" } }),
        ],
        json!({ "deliveryContext": { "channel": "telegram", "to": "123" } }),
    );
    let (d, _) = only(&mut b, T0 + 10 * SETTLE_MS);
    let a = d.announce.expect("an announce");
    assert_eq!(a.outcome, AnnounceOutcome::NotRecorded);
    assert_eq!(
        (a.channel.as_deref(), a.to.as_deref()),
        (Some("telegram"), Some("123"))
    );
    assert_eq!(a.text.as_deref(), Some("posted"));
}

/// A `sessions_send` OpenClaw refused (the target's send policy: the `agent` method's
/// error; the visibility guard: `forbidden`) is an exchange that never started, as our
/// engine keeps it; a send to a missing session is not (nor is it on our engine).
#[test]
fn refused_sends_are_exchanges_that_never_started() {
    let call = |seq: i64, id: &str, message: &str| {
        json!({ "role": "assistant", "stopReason": "toolUse", "timestamp": T0 + seq,
                "content": [{ "type": "toolCall", "id": id, "name": "sessions_send",
                              "arguments": { "sessionKey": B, "message": message } }],
                "__openclaw": { "seq": seq, "runId": "ra" } })
    };
    let result = |seq: i64, id: &str, status: &str, error: &str| {
        let r = json!({ "runId": "x", "status": status, "error": error, "sessionKey": B });
        json!({ "role": "toolResult", "toolName": "sessions_send", "toolCallId": id,
                "isError": true, "timestamp": T0 + seq,
                "content": [{ "type": "text", "text": r.to_string() }],
                "__openclaw": { "seq": seq, "runId": "ra" } })
    };
    let mut book = Book::default();
    book.row(&json!({ "key": B }));
    book.history(
        A,
        &json!({ "totalMessages": 6, "messages": [
            call(1, "c1", "blocked one"),
            result(2, "c1", "error", "send blocked by session policy"),
            call(3, "c2", "hidden one"),
            result(4, "c2", "forbidden", "Session not visible from this agent session"),
            call(5, "c3", "lost one"),
            result(6, "c3", "error", "No session found: agent:work:b"),
        ]}),
    );
    let events = book.rebuild(T0 + 100);
    let got: Vec<_> = book
        .built()
        .exchanges
        .iter()
        .map(|d| {
            let s = &d.summary;
            (
                s.id.as_str(),
                s.kind,
                s.status,
                s.ended_reason,
                s.message.as_str(),
                s.requester.as_str(),
                s.target.as_str(),
                s.rounds,
                d.turns.len(),
            )
        })
        .collect();
    let refused = |id, message| {
        (
            id,
            ExchangeKind::Refused,
            ExchangeStatus::Refused,
            Some(ExchangeEnd::Policy),
            message,
            A,
            B,
            0,
            0,
        )
    };
    assert_eq!(
        got,
        [
            refused("agent:main:a#4", "hidden one"),
            refused("agent:main:a#2", "blocked one"),
        ]
    );
    assert!(
        book.built().exchanges[1]
            .summary
            .detail
            .contains("send blocked by session policy")
    );
    // As our engine says it: ended, refused; no start, no round.
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| matches!(
        e,
        EngineEvent::ExchangeEnded {
            status: ExchangeStatus::Refused,
            reason: ExchangeEnd::Policy,
            ..
        }
    )));
    let traffic = book.traffic(0);
    assert_eq!(
        traffic
            .iter()
            .map(|c| (c.exchanges, c.messages, c.refused))
            .collect::<Vec<_>>(),
        [(2, 0, 2)]
    );
}

/// Live updates build only the pairs that changed: after every step of any sequence of
/// lines, pages, rows, forgotten sessions and time passing, the book equals a whole
/// build, and sends the events a whole build would.
mod incremental {
    use super::*;
    use proptest::prelude::*;

    const KEYS: [&str; 4] = ["agent:a:x", "agent:b:y", "agent:c:z", "agent:d:w"];

    #[derive(Debug, Clone)]
    enum Line {
        /// Forwarded from a session (`None`: no provenance), one of a few texts so
        /// replies are forwarded back verbatim.
        Inbound(Option<usize>, u8),
        Reply(u8, bool),
        /// A number `chat.history` skipped.
        Hidden,
        /// A `sessions_send` call; `Refused`: the refusal of the call just before.
        Tool,
        Refused(Option<usize>),
        Other,
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A `session.message` line (`skip`: numbered past a gap nobody read).
        Message(usize, Line, bool),
        /// A `chat.history` page of lines after the newest held (`far`: not reaching
        /// back to them).
        Page(usize, Vec<Line>, bool),
        Row(usize, bool, Option<usize>, bool),
        Know(usize),
        Forget(usize),
        Tick(i64),
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            3 => (proptest::option::weighted(0.9, 0..KEYS.len()), 0u8..3)
                .prop_map(|(f, t)| Line::Inbound(f, t)),
            3 => (0u8..3, proptest::bool::weighted(0.1)).prop_map(|(t, e)| Line::Reply(t, e)),
            1 => Just(Line::Hidden),
            1 => Just(Line::Tool),
            1 => proptest::option::weighted(0.9, 0..KEYS.len()).prop_map(Line::Refused),
            1 => Just(Line::Other),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        let k = 0..KEYS.len();
        prop_oneof![
            8 => (k.clone(), line(), proptest::bool::weighted(0.05))
                .prop_map(|(k, l, s)| Op::Message(k, l, s)),
            2 => (k.clone(), proptest::collection::vec(line(), 0..6),
                  proptest::bool::weighted(0.2))
                .prop_map(|(k, ls, far)| Op::Page(k, ls, far)),
            2 => (k.clone(), any::<bool>(), proptest::option::weighted(0.3, 0..KEYS.len()),
                  any::<bool>())
                .prop_map(|(k, a, p, r)| Op::Row(k, a, p, r)),
            1 => k.clone().prop_map(Op::Know),
            1 => k.prop_map(Op::Forget),
            2 => (0i64..200_000).prop_map(Op::Tick),
        ]
    }

    fn message(seq: i64, at: i64, line: &Line) -> Option<Value> {
        let text = |t: &u8| format!("t{t}");
        Some(match line {
            Line::Inbound(Some(f), t) => forwarded(seq, at, KEYS[*f], &text(t)),
            Line::Inbound(None, t) => json!({ "role": "assistant", "content": text(t),
                "senderLabel": "Forwarded from main", "timestamp": at,
                "__openclaw": { "seq": seq } }),
            Line::Reply(t, false) => json!({ "role": "assistant", "content": text(t),
                "timestamp": at, "__openclaw": { "seq": seq, "runId": format!("r{seq}") } }),
            Line::Reply(_, true) => json!({ "role": "assistant", "content": [],
                "stopReason": "error", "errorMessage": "boom", "timestamp": at,
                "__openclaw": { "seq": seq, "runId": format!("r{seq}") } }),
            Line::Hidden => return None,
            Line::Tool => json!({ "role": "assistant", "timestamp": at,
                "content": [{ "type": "toolCall", "id": format!("c{seq}"),
                              "name": "sessions_send", "arguments": { "message": "m" } }],
                "__openclaw": { "seq": seq } }),
            Line::Refused(target) => {
                let mut result = json!({ "status": "forbidden", "error": "denied" });
                if let Some(t) = target {
                    result["sessionKey"] = json!(KEYS[*t]);
                }
                json!({ "role": "toolResult", "toolName": "sessions_send",
                    "toolCallId": format!("c{}", seq - 1), "timestamp": at,
                    "content": [{ "type": "text", "text": result.to_string() }],
                    "__openclaw": { "seq": seq } })
            }
            Line::Other => json!({ "role": "user", "content": "hi", "timestamp": at,
                "__openclaw": { "seq": seq } }),
        })
    }

    /// Both books take every step; one builds only what changed, one builds whole.
    fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let (mut live, mut whole) = (Book::default(), Book::default());
        let mut now = T0;
        for op in ops {
            now += 1_000;
            for book in [&mut live, &mut whole] {
                let newest = |b: &Book, k: &str| b.records.get(k).map_or(0, Record::last);
                match &op {
                    Op::Message(k, l, skip) => {
                        let seq = newest(book, KEYS[*k]) + if *skip { 3 } else { 1 };
                        if let Some(m) = message(seq, now, l) {
                            book.message(KEYS[*k], seq, &m);
                        }
                    }
                    Op::Page(k, lines, far) => {
                        let mut seq = newest(book, KEYS[*k]) + if *far { 10 } else { 0 };
                        let mut messages = Vec::new();
                        for l in lines {
                            seq += 1;
                            messages.extend(message(seq, now, l));
                        }
                        book.history(
                            KEYS[*k],
                            &json!({ "messages": messages, "totalMessages": seq }),
                        );
                    }
                    Op::Row(k, active, parent, route) => {
                        let mut row = json!({ "key": KEYS[*k], "hasActiveRun": active,
                                              "createdAt": now });
                        if let Some(p) = parent {
                            row["spawnedBy"] = json!(KEYS[*p]);
                        }
                        if *route {
                            row["deliveryContext"] = json!({ "channel": "telegram", "to": "1" });
                        }
                        book.row(&row);
                    }
                    Op::Know(k) => book.know(KEYS[*k]),
                    Op::Forget(k) => book.forget(KEYS[*k]),
                    Op::Tick(dt) => now += dt,
                }
            }
            let got = live.rebuild(now);
            whole.incremental = false;
            let want = whole.rebuild(now);
            prop_assert_eq!(&live.built, &whole.built);
            prop_assert_eq!(&live.built, &build(&live.records, &live.known, now, None));
            prop_assert_eq!(got, want);
        }
        Ok(())
    }

    /// The captured scenarios' rows and `chat.history` lines (each session's in order).
    fn captured() -> Vec<(Value, Vec<Value>)> {
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/openclaw-2026.9.6/exchanges"
        );
        let mut out = Vec::new();
        let read = |p: &std::path::Path| -> Value {
            serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_default())
                .unwrap_or(Value::Null)
        };
        let mut dirs: Vec<_> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let mut files: Vec<_> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect();
            files.sort();
            for f in &files {
                let name = f.file_name().map(|n| n.to_string_lossy().to_string());
                let Some(rest) = name.as_deref().and_then(|n| n.strip_prefix("entry-")) else {
                    continue;
                };
                let history = read(&dir.join(format!("history-{rest}")));
                let lines = history["messages"].as_array().cloned().unwrap_or_default();
                out.push((read(f), lines));
            }
        }
        out
    }

    /// The captured scenarios' lines arriving as `session.message` events in any order
    /// that keeps each session's own order, their rows at any point: after every one the
    /// live book equals a whole build.
    fn replay(picks: Vec<usize>, row_first: Vec<bool>) -> Result<(), TestCaseError> {
        let sessions = captured();
        prop_assert!(sessions.len() >= 10, "the captured scenarios are read");
        let (mut live, mut whole) = (Book::default(), Book::default());
        let mut next = vec![0usize; sessions.len()];
        let mut rowed = vec![false; sessions.len()];
        let now = 1_795_360_000_000;
        for (i, pick) in picks.into_iter().enumerate() {
            let open: Vec<usize> = (0..sessions.len())
                .filter(|&s| next[s] < sessions[s].1.len() || !rowed[s])
                .collect();
            let Some(&s) = open.get(pick % open.len().max(1)) else {
                break;
            };
            let (row, lines) = &sessions[s];
            let key = row["key"].as_str().unwrap_or_default();
            // The row now, or once its lines are all in.
            let take_row =
                !rowed[s] && (row_first.get(i).copied().unwrap_or(true) || next[s] == lines.len());
            for book in [&mut live, &mut whole] {
                if take_row {
                    book.row(row);
                } else if let Some(m) = lines.get(next[s]) {
                    let seq = message_seq(m).unwrap_or(next[s] as i64 + 1);
                    book.message(key, seq, m);
                }
            }
            if take_row {
                rowed[s] = true;
            } else {
                next[s] += 1;
            }
            let got = live.rebuild(now);
            whole.incremental = false;
            let want = whole.rebuild(now);
            prop_assert_eq!(&live.built, &whole.built);
            prop_assert_eq!(got, want);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn live_updates_equal_a_whole_build(ops in proptest::collection::vec(op(), 1..40)) {
            run(ops)?;
        }

        #[test]
        fn the_captured_scenarios_in_any_order_equal_a_whole_build(
            picks in proptest::collection::vec(0usize..64, 60..80),
            row_first in proptest::collection::vec(proptest::bool::weighted(0.7), 80),
        ) {
            replay(picks, row_first)?;
        }
    }
}

/// An exchange told whole, then its first lines pushed out of the book by newer ones (a
/// session past `MAX_ITEMS_PER_SESSION`): what is left of it is found again under a later
/// line's id, and must not be told as another exchange.
#[test]
fn an_exchange_whose_first_lines_leave_the_book_is_not_told_again() {
    let mut book = requester_read_first();
    let b_lines = [
        forwarded(1, T0 + 500, A, "PING"),
        said(2, T0 + 1_000, "b1", "pong"),
        forwarded(3, T0 + 3_500, A, "ping again"),
        said(4, T0 + 4_000, "b2", "pong again"),
    ];
    book.history(B, &json!({ "messages": b_lines, "totalMessages": 4 }));
    let started = |events: &[EngineEvent]| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                EngineEvent::ExchangeStarted { exchange_id, .. } => Some(exchange_id.clone()),
                _ => None,
            })
            .collect()
    };
    let first = book.rebuild(T0 + 5_000);
    assert_eq!(started(&first), [format!("{B}#1")], "{first:?}");
    // Newer lines in B push its first two out: the rest of the exchange starts at line 3.
    let filler = MAX_ITEMS_PER_SESSION as i64 - 2;
    for seq in 5..5 + filler {
        book.message(
            B,
            seq,
            &json!({ "role": "user", "content": "chatter", "timestamp": T0 + 6_000 }),
        );
    }
    let later = book.rebuild(T0 + 7_000);
    // Before: `agent:main:a#2`, from B to A (the reply-back read as a send), told again.
    assert!(later.is_empty(), "{later:?}");
    let edges: Vec<(String, String)> = book
        .traffic(0)
        .into_iter()
        .map(|c| (c.requester, c.target))
        .collect();
    assert!(
        !edges.contains(&(B.to_string(), A.to_string())),
        "{edges:?}"
    );
    // A later line of that rest is not told either.
    book.message(
        B,
        5 + filler,
        &said(5 + filler, T0 + 8_000, "b3", "still pong"),
    );
    let after = book.rebuild(T0 + 9_000);
    assert!(after.is_empty(), "{after:?}");
}
