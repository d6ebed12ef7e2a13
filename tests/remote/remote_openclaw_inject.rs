//! `switchboard --connect <openclaw> inject …` as a process against a fake OpenClaw gateway
//! on a real socket that plays a ping-pong as 2026.9.6 does it: the message's run calls
//! `sessions_send` and ends; the reply-back loop and the announce go on afterwards, each
//! step a run with its `agent` lifecycle events and its lines. Inject must wait for what it
//! set off, as it does on our engine, and say when the end was inferred (OpenClaw sends no
//! "exchange ended").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_protocol::HelloOk;
use switchboard_remote::rpc::{Rpc, RpcError, WireEvent};
use switchboard_types::api::LinkState;
use switchboard_types::api::time::now_ms;
use tokio::sync::{broadcast, watch};

use crate::openclaw_record::{RecordGateway, forwarded, reply, row, serve};
use crate::remote_openclaw_cli::client_with_env;

const A: &str = "agent:main:inj";
const B: &str = "agent:work:inj";
/// The session B sends on to in a second hop (`Ending::Nested`).
const C: &str = "agent:work:deep";
const MAIN_RUN: &str = "run-main";
/// Between two steps of the loop: no run going anywhere, as between OpenClaw's steps.
const GAP: Duration = Duration::from_millis(400);

/// How the played exchange ends.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// The target's `REPLY_SKIP` and a skipped announce: both hidden lines the record
    /// numbers, so the book records the end.
    Recorded,
    /// The loop stops on a visible reply and no announce line comes (a cap OpenClaw does not
    /// expose): the record never says it ended.
    Silent,
    /// B's last turn sends on to C (a second hop) before its `REPLY_SKIP`: A's exchange ends
    /// recorded, and B and C's own reply-back loop goes on after it, C's turn slower than the
    /// quiet period. Nobody follows C's events.
    Nested,
}

/// The fake gateway: a record plus the script `chat.send` starts.
struct PingPong {
    gw: Arc<RecordGateway>,
    ending: Ending,
    /// The message's own run ended (`agent.wait` answers then).
    main_done: watch::Sender<bool>,
    /// The script's last step was played.
    finished: AtomicBool,
    started_at: i64,
}

impl PingPong {
    fn new(ending: Ending) -> Arc<PingPong> {
        let gw = Arc::new(RecordGateway::default());
        let t0 = now_ms();
        gw.add(row(A, t0), &json!({ "messages": [] }));
        gw.add(row(B, t0), &json!({ "messages": [] }));
        if ending == Ending::Nested {
            gw.add(row(C, t0), &json!({ "messages": [] }));
        }
        Arc::new(PingPong {
            gw,
            ending,
            main_done: watch::channel(false).0,
            finished: AtomicBool::new(false),
            started_at: t0,
        })
    }

    /// A line written to `key` (numbered next), and its `session.message` event.
    fn line(&self, key: &str, mut message: Value) {
        let seq = {
            let mut h = self.gw.histories.lock().unwrap();
            let (lines, total) = h.get_mut(key).unwrap();
            *total += 1;
            message["__openclaw"]["seq"] = json!(*total);
            lines.push(message.clone());
            *total
        };
        self.gw.push(
            "session.message",
            json!({ "sessionKey": key, "messageSeq": seq, "message": message }),
        );
    }

    /// A line `chat.history` hides (`REPLY_SKIP`, `ANNOUNCE_SKIP`): numbered, not returned,
    /// and no `session.message` for it here (the run's end makes the reader look).
    fn hidden(&self, key: &str) {
        let mut h = self.gw.histories.lock().unwrap();
        h.get_mut(key).unwrap().1 += 1;
    }

    fn lifecycle(&self, key: &str, run: &str, phase: &str) {
        self.gw.push(
            "agent",
            json!({ "runId": run, "sessionKey": key, "stream": "lifecycle",
                    "data": { "phase": phase }, "ts": now_ms() }),
        );
    }

    /// One step of the loop: `speaker` takes `text` forwarded from `from` and its run
    /// answers `answer` (`None`: a hidden line).
    async fn step(&self, speaker: &str, from: &str, text: &str, run: &str, answer: Option<&str>) {
        self.timed_step(speaker, from, text, run, answer, Duration::from_millis(100))
            .await;
    }

    /// `step`, its run taking `took`.
    async fn timed_step(
        &self,
        speaker: &str,
        from: &str,
        text: &str,
        run: &str,
        answer: Option<&str>,
        took: Duration,
    ) {
        let t = now_ms();
        self.line(speaker, forwarded(0, t, Some(from), text));
        self.lifecycle(speaker, run, "start");
        tokio::time::sleep(took).await;
        match answer {
            Some(a) => self.line(speaker, reply(0, now_ms(), run, a)),
            None => self.hidden(speaker),
        }
        self.lifecycle(speaker, run, "end");
    }

    async fn play(self: Arc<Self>) {
        self.lifecycle(A, MAIN_RUN, "start");
        self.line(
            A,
            json!({ "role": "user", "content": "ask work", "timestamp": now_ms() }),
        );
        self.step(B, A, "PING", "rb1", Some("pong 1")).await;
        let sent = json!({ "sessionKey": B, "status": "ok", "reply": "pong 1" });
        self.line(
            A,
            json!({ "role": "toolResult", "toolName": "sessions_send", "timestamp": now_ms(),
                    "content": [{ "type": "text", "text": sent.to_string() }],
                    "__openclaw": { "runId": MAIN_RUN } }),
        );
        self.line(A, reply(0, now_ms(), MAIN_RUN, "asked work"));
        self.lifecycle(A, MAIN_RUN, "end");
        self.main_done.send_replace(true);
        // The reply-back loop and the announce run after the message's run ended.
        tokio::time::sleep(GAP).await;
        self.step(A, B, "pong 1", "ra2", Some("ping 2")).await;
        tokio::time::sleep(GAP).await;
        match self.ending {
            Ending::Recorded => {
                self.step(B, A, "ping 2", "rb3", None).await;
                tokio::time::sleep(GAP).await;
                self.lifecycle(B, "rb-announce", "start");
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.hidden(B);
                self.lifecycle(B, "rb-announce", "end");
            }
            Ending::Silent => {
                self.step(B, A, "ping 2", "rb3", Some("pong 3")).await;
            }
            Ending::Nested => {
                // B's turn 3: it sends on to C (C answers within the call), then says
                // REPLY_SKIP to A; A's exchange announces nothing.
                self.line(B, forwarded(0, now_ms(), Some(A), "ping 2"));
                self.lifecycle(B, "rb3", "start");
                self.step(C, B, "deep ping", "rc1", Some("deep pong 1"))
                    .await;
                let sent = json!({ "sessionKey": C, "status": "ok", "reply": "deep pong 1" });
                self.line(
                    B,
                    json!({ "role": "toolResult", "toolName": "sessions_send",
                            "timestamp": now_ms(),
                            "content": [{ "type": "text", "text": sent.to_string() }],
                            "__openclaw": { "runId": "rb3" } }),
                );
                self.hidden(B);
                self.lifecycle(B, "rb3", "end");
                tokio::time::sleep(GAP).await;
                self.lifecycle(B, "rb-announce", "start");
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.hidden(B);
                self.lifecycle(B, "rb-announce", "end");
                // The second hop's loop: B's turn, then a turn of C's slower than the quiet
                // period, which ends it (REPLY_SKIP); its announce says nothing.
                tokio::time::sleep(GAP).await;
                self.step(B, C, "deep pong 1", "rb-n1", Some("deep ping 2"))
                    .await;
                tokio::time::sleep(GAP).await;
                let slow = Duration::from_millis(2_500);
                self.timed_step(C, B, "deep ping 2", "rc2", None, slow)
                    .await;
                tokio::time::sleep(GAP).await;
                self.lifecycle(C, "rc-announce", "start");
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.hidden(C);
                self.lifecycle(C, "rc-announce", "end");
            }
        }
        self.finished.store(true, Ordering::SeqCst);
    }
}

/// The fake gateway as the socket serves it.
struct Served(Arc<PingPong>);

#[async_trait]
impl Rpc for Served {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let me = &self.0;
        match method {
            "chat.send" => {
                tokio::spawn(me.clone().play());
                Ok(json!({ "runId": MAIN_RUN, "status": "started" }))
            }
            "agent.wait" => {
                let limit = params["timeoutMs"].as_u64().unwrap_or(30_000);
                let mut done = me.main_done.subscribe();
                let ended =
                    tokio::time::timeout(Duration::from_millis(limit), done.wait_for(|d| *d))
                        .await
                        .is_ok();
                Ok(if ended {
                    json!({ "runId": MAIN_RUN, "status": "ok", "startedAt": me.started_at })
                } else {
                    json!({ "runId": MAIN_RUN, "status": "timeout" })
                })
            }
            _ => me.gw.request(method, params).await,
        }
    }

    async fn request_final(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request(method, params).await
    }

    fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.0.gw.events.subscribe()
    }

    fn hello(&self) -> Option<HelloOk> {
        None
    }

    fn state(&self) -> watch::Receiver<LinkState> {
        watch::channel(LinkState::Connecting { attempt: 1 }).1
    }

    fn target(&self) -> String {
        "ws://127.0.0.1:18789".into()
    }
}

/// `inject` into A through the played gateway: its output, and whether the script had
/// played its last step when the process ended.
async fn inject(
    ending: Ending,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, bool) {
    let pp = PingPong::new(ending);
    let url = serve(Arc::new(Served(pp.clone()))).await;
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<&str> = ["inject", A, "ask work"]
        .iter()
        .chain(args)
        .copied()
        .collect();
    let out = client_with_env(&url, dir.path(), &args, env).await;
    (out, pp.finished.load(Ordering::SeqCst))
}

/// The loop and the announce run after the message's own run ended: inject returns only
/// once the record shows their end (before: right after the run, the loop still going).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_over_openclaw_waits_for_the_exchange_it_started() {
    let (out, finished) = inject(Ending::Recorded, &[], &[]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        finished,
        "inject returned before the exchange's last round:\n{stderr}"
    );
    assert_eq!(stdout.trim(), "asked work");
    // The book recorded the end (REPLY_SKIP, the announce skipped): nothing inferred.
    assert!(!stderr.contains("end inferred"), "{stderr}");
    // Its rounds were shown as they came, as on our engine.
    assert!(stderr.contains("round 3"), "{stderr}");
}

/// A loop that stops on a visible reply with no announce line: OpenClaw's record never
/// says it ended, so the end is taken from its sessions' silence, and said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_over_openclaw_says_when_the_end_was_inferred() {
    // Quiet sooner than the default, still well above the script's gaps between steps.
    let quiet = [("SWITCHBOARD_OPENCLAW_QUIET_MS", "1500")];
    let (out, finished) = inject(Ending::Silent, &[], &quiet).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(finished, "inject returned before the last round:\n{stderr}");
    assert!(
        stderr.contains("end inferred: no run or event in"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("exchange {B}#1")), "{stderr}");
    // And in --json, with the reply.
    let (out, finished) = inject(Ending::Silent, &["--json"], &quiet).await;
    assert!(finished && out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(
        (&v["status"], &v["reply"]),
        (&json!("ok"), &json!("asked work"))
    );
    let why = v["endInferred"].as_str().expect("endInferred says why");
    assert!(why.contains(&format!("exchange {B}#1")), "{why}");
}

/// A second hop: B sends on to C in its last turn, and B and C's own loop goes on after A's
/// exchange has ended, C's turn slower than the quiet period. Inject waits for it as our
/// engine waits for a chain's hops (before: it returned once A's exchange ended, C's loop
/// still going, and nobody read C).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_over_openclaw_waits_for_a_second_hop() {
    let quiet = [("SWITCHBOARD_OPENCLAW_QUIET_MS", "1500")];
    let (out, finished) = inject(Ending::Nested, &[], &quiet).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        finished,
        "inject returned before the second hop's last round:\n{stderr}"
    );
    assert!(!stderr.contains("end inferred"), "{stderr}");
}
