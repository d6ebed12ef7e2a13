//! Random and mutated frames fed to a running gateway (in this process, over a real engine
//! on disk): mutations of the recorded OpenClaw 2026.9.6 frames, random bytes, deep nesting,
//! huge numbers, cut-off text, oversize frames, before and after `connect`. The property:
//! no panic in the gateway, no hang (every case ends within a bounded wait, by an answer or
//! a close), and a healthy client is still served afterwards.

use crate::common;
use crate::gateway_support;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use switchboard_server::{AuthLimit, Options};
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message;

use gateway_support::{TOKEN, Ws, connect_params, open, recorded_frames};

/// A case that takes longer than this is a hang.
const CASE_LIMIT: Duration = Duration::from_secs(20);
const MAX_PAYLOAD: usize = 16 * 1024;
const WORKER: &str = "gateway-fuzz-worker";

/// Panics on the gateway's threads (the test's own assertions panic on the test thread).
static GATEWAY_PANICS: AtomicUsize = AtomicUsize::new(0);

struct Rig {
    rt: Runtime,
    addr: String,
    _bench: common::Bench,
}

fn rig() -> &'static Rig {
    static RIG: OnceLock<Rig> = OnceLock::new();
    RIG.get_or_init(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(WORKER) {
                GATEWAY_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default_hook(info);
        }));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(WORKER)
            .enable_all()
            .build()
            .expect("runtime");
        let bench = common::bench(json!({
            "agents": { "list": [
                { "id": "main", "default": true, "model": "scripted",
                  "script": [ { "reply": "re: {{text}}" } ] },
            ] },
        }));
        let api = rt.block_on(async { bench.engine.start() });
        let options = Options {
            max_payload: MAX_PAYLOAD,
            // Many cases send wrong tokens on purpose: no lockout here.
            auth_limit: AuthLimit {
                max_failures: u32::MAX,
                max_failures_global: u32::MAX,
                window: Duration::from_secs(1),
            },
            ..gateway_support::options()
        };
        let gw = rt.block_on(gateway_support::start_with(api, options));
        let addr = gw.addr.clone();
        std::mem::forget(gw); // runs for the whole test binary
        Rig {
            rt,
            addr,
            _bench: bench,
        }
    })
}

/// One frame a client might send.
#[derive(Debug, Clone)]
enum Input {
    /// A recorded client frame with values replaced or removed at random places.
    Mutated {
        base: usize,
        edits: Vec<(u32, Option<Value>)>,
    },
    /// A recorded client frame cut at a random byte.
    Cut { base: usize, at: usize },
    /// Arbitrary bytes, as text (lossy) or as a binary frame.
    Bytes { bytes: Vec<u8>, binary: bool },
    /// A request whose params nest `depth` arrays deep.
    Deep { depth: usize },
    /// A request with a number no integer type holds, in `field`.
    Huge { method: String, field: String },
    /// A frame over `maxPayload`.
    Oversize,
}

fn client_frames() -> Vec<Value> {
    recorded_frames()
        .into_iter()
        .filter(|f| f["type"] == "req")
        .collect()
}

fn random_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::String),
        prop_oneof![
            Just("main"),
            Just("agent:main:main"),
            Just("chat.send"),
            Just("connect"),
            Just("switchboard.subscribe"),
            Just("req"),
            Just(""),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z]{1,12}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn input(bases: usize) -> impl Strategy<Value = Input> {
    let methods = prop_oneof![
        Just("chat.send"),
        Just("chat.history"),
        Just("sessions.list"),
        Just("agent.wait"),
        Just("agent"),
        Just("sessions.patch"),
        Just("switchboard.transcript"),
    ];
    let fields = prop_oneof![
        Just("limit"),
        Just("offset"),
        Just("timeoutMs"),
        Just("activeMinutes"),
        Just("message"),
    ];
    prop_oneof![
        4 => (0..bases, prop::collection::vec((any::<u32>(), prop::option::of(random_json())), 1..4))
            .prop_map(|(base, edits)| Input::Mutated { base, edits }),
        1 => (0..bases, any::<usize>()).prop_map(|(base, at)| Input::Cut { base, at }),
        1 => (prop::collection::vec(any::<u8>(), 0..200), any::<bool>())
            .prop_map(|(bytes, binary)| Input::Bytes { bytes, binary }),
        1 => prop_oneof![Just(64usize), Just(200), Just(5_000)].prop_map(|depth| Input::Deep { depth }),
        1 => (methods, fields).prop_map(|(m, f)| Input::Huge { method: m.into(), field: f.into() }),
        1 => Just(Input::Oversize),
    ]
}

/// Every (path to a) value in `v`, parents before children.
fn paths(v: &Value, here: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let mut p = here.clone();
                p.push(k.clone());
                paths(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let mut p = here.clone();
                p.push(i.to_string());
                paths(c, p, out);
            }
        }
        _ => {}
    }
}

fn edit(v: &mut Value, path: &[String], new: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        if let Some(n) = new {
            *v = n;
        }
        return;
    };
    let mut cur = v;
    for p in parents {
        cur = match cur {
            Value::Object(m) => match m.get_mut(p) {
                Some(c) => c,
                None => return,
            },
            Value::Array(a) => match p.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(c) => c,
                None => return,
            },
            _ => return,
        };
    }
    match (cur, new) {
        (Value::Object(m), Some(n)) => {
            m.insert(last.clone(), n);
        }
        (Value::Object(m), None) => {
            m.shift_remove(last);
        }
        (Value::Array(a), Some(n)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                *slot = n;
            }
        }
        (Value::Array(a), None) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < a.len()) {
                a.remove(i);
            }
        }
        _ => {}
    }
}

/// A recorded `connect` gets our token, so the frames after it reach the methods.
fn with_our_token(mut f: Value) -> Value {
    if f["method"] == "connect" && f["params"]["auth"].is_object() {
        f["params"]["auth"]["token"] = json!(TOKEN);
    }
    f
}

fn message(input: &Input, bases: &[Value]) -> Message {
    match input {
        Input::Mutated { base, edits } => {
            let mut v = with_our_token(bases[*base].clone());
            for (seed, new) in edits {
                let mut all = Vec::new();
                paths(&v, Vec::new(), &mut all);
                let path = &all[*seed as usize % all.len()];
                edit(&mut v, path, new.clone());
            }
            Message::text(v.to_string())
        }
        Input::Cut { base, at } => {
            let text = bases[*base].to_string();
            let mut end = at % (text.len() + 1);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Message::text(text[..end].to_string())
        }
        Input::Bytes {
            bytes,
            binary: true,
        } => Message::binary(bytes.clone()),
        Input::Bytes {
            bytes,
            binary: false,
        } => Message::text(String::from_utf8_lossy(bytes).into_owned()),
        Input::Deep { depth } => Message::text(format!(
            r#"{{"type":"req","id":"deep","method":"chat.send","params":{}{}}}"#,
            "[".repeat(*depth),
            "]".repeat(*depth)
        )),
        Input::Huge { method, field } => Message::text(format!(
            r#"{{"type":"req","id":"huge","method":"{method}","params":{{"sessionKey":"main","key":"main","runId":"r","message":"m","{field}":1e400,"limit":184467440737095516150}}}}"#
        )),
        Input::Oversize => Message::text(format!(
            r#"{{"type":"req","id":"big","method":"chat.send","params":{{"sessionKey":"main","message":"{}"}}}}"#,
            "x".repeat(MAX_PAYLOAD + 1)
        )),
    }
}

/// Reads until the answer to `id` or the end of the connection; `Err` on a hang.
async fn settle(ws: &mut Ws, id: &str) -> Result<(), String> {
    let wait = async {
        while let Some(msg) = ws.next().await {
            match msg {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str())
                        .map_err(|e| format!("the gateway sent non-JSON: {e}"))?;
                    if v["type"] == "res" && v["id"] == id {
                        return Ok(());
                    }
                }
                Ok(Message::Close(_)) | Err(_) => return Ok(()),
                Ok(_) => {}
            }
        }
        Ok(())
    };
    tokio::time::timeout(CASE_LIMIT, wait)
        .await
        .map_err(|_| format!("no answer to {id} and no close within {CASE_LIMIT:?}"))?
}

async fn run_case(
    addr: &str,
    connect_first: bool,
    inputs: &[Input],
    bases: &[Value],
) -> Result<(), String> {
    let mut ws = open(addr).await;
    // The challenge.
    settle_first(&mut ws).await?;
    if connect_first {
        let connect = json!({"type": "req", "id": "c", "method": "connect",
                             "params": connect_params(TOKEN, &["switchboard.v1"], &["operator.admin"])});
        ws.send(Message::text(connect.to_string()))
            .await
            .map_err(|e| e.to_string())?;
        settle(&mut ws, "c").await?;
    }
    for i in inputs {
        if ws.send(message(i, bases)).await.is_err() {
            break; // closed on us: fine
        }
    }
    // Whatever state the connection is in, it answers or closes.
    let probe = json!({"type": "req", "id": "probe", "method": "health"});
    if ws.send(Message::text(probe.to_string())).await.is_ok() {
        settle(&mut ws, "probe").await?;
    }
    Ok(())
}

async fn settle_first(ws: &mut Ws) -> Result<(), String> {
    match tokio::time::timeout(CASE_LIMIT, ws.next()).await {
        Ok(Some(Ok(_))) => Ok(()),
        other => Err(format!("no challenge: {other:?}")),
    }
}

async fn healthy(addr: &str) -> Result<(), String> {
    let (mut ws, _) = gateway_support::connected(addr, &[]).await;
    let res = gateway_support::call(&mut ws, "h", "sessions.list", json!({"limit": 5})).await;
    if res["ok"] != true {
        return Err(format!("a healthy client was refused: {res}"));
    }
    Ok(())
}

#[test]
fn random_and_mutated_frames_never_panic_or_hang_the_gateway() {
    let rig = rig();
    let bases = client_frames();
    assert!(bases.len() >= 10, "recorded client frames: {}", bases.len());
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        any::<bool>(),
        prop::collection::vec(input(bases.len()), 1..5),
    );
    let result = runner.run(&strategy, |(connect_first, inputs)| {
        let outcome = rig
            .rt
            .block_on(run_case(&rig.addr, connect_first, &inputs, &bases));
        outcome.map_err(TestCaseError::fail)?;
        let panics = GATEWAY_PANICS.load(Ordering::SeqCst);
        prop_assert_eq!(panics, 0, "the gateway panicked");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    rig.rt
        .block_on(healthy(&rig.addr))
        .expect("served after the fuzzing");
}
