//! The gateway protocol's frames against real frames captured from an OpenClaw 2026.9.6 gateway.
//!
//! `tests/fixtures/openclaw-2026.9.6/protocol-frames.jsonl` is a copy of the team's
//! `shared/reference/observed/protocol-frames.jsonl` (35 frames, one `{"dir": "in"|"out",
//! "frame": {...}}` a line; method and event lists in `hello-ok` are truncated there).

use serde_json::Value;
use switchboard_protocol::{
    ConnectChallenge, ConnectParams, Frame, HelloOk, INVALID_REQUEST, MIN_CLIENT_PROTOCOL,
    PROTOCOL_VERSION, ProtocolError,
};

const MAX: usize = 25 * 1024 * 1024;

fn captured() -> Vec<(String, Value)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openclaw-2026.9.6/protocol-frames.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("fixture present");
    let lines: Vec<(String, Value)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("fixture line is JSON");
            let dir = v["dir"].as_str().expect("dir").to_string();
            (dir, v["frame"].take())
        })
        .collect();
    assert_eq!(lines.len(), 35, "the capture has 35 frames");
    lines
}

fn decode(frame: &Value) -> Frame {
    let text = serde_json::to_string(frame).expect("serialises");
    Frame::decode(&text, MAX).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn every_captured_frame_decodes_and_re_encodes_unchanged() {
    let (mut reqs, mut ress, mut events) = (0, 0, 0);
    for (_, original) in captured() {
        let frame = decode(&original);
        match &frame {
            Frame::Req(_) => reqs += 1,
            Frame::Res(_) => ress += 1,
            Frame::Event(_) => events += 1,
        }
        let back: Value = serde_json::from_str(&frame.encode().expect("encodes")).expect("JSON");
        assert_eq!(back, original);
    }
    assert_eq!((reqs, ress, events), (13, 14, 8));
}

#[test]
fn the_handshake_payloads_parse_from_the_real_frames() {
    let frames = captured();

    let Frame::Event(ev) = decode(&frames[0].1) else {
        panic!("first frame is an event")
    };
    assert_eq!(ev.event, "connect.challenge");
    let challenge: ConnectChallenge = ev.payload_as().expect("challenge");
    assert_eq!(challenge.nonce, "51b5d3f7-5575-42cc-b10b-897002d9020a");
    assert_eq!(challenge.ts, 1795354437523);
    assert_eq!(
        challenge.capabilities.as_deref(),
        Some(&["model-catalog-snapshot".to_string()][..])
    );

    let Frame::Req(req) = decode(&frames[1].1) else {
        panic!("second frame is a req")
    };
    assert_eq!(req.method, "connect");
    let p: ConnectParams = req.params_as().expect("connect params");
    assert_eq!((p.min_protocol, p.max_protocol), (4, 4));
    assert!((MIN_CLIENT_PROTOCOL..=PROTOCOL_VERSION).contains(&p.max_protocol));
    assert_eq!(
        (p.client.id.as_str(), p.client.mode.as_str()),
        ("cli", "cli")
    );
    assert_eq!(p.client.platform, "linux");
    assert_eq!(p.client.display_name.as_deref(), Some("pyclient"));
    assert_eq!(p.role, "operator");
    assert_eq!(p.scopes.len(), 5);
    assert_eq!(p.caps, Some(vec!["tool-events".to_string()]));
    assert_eq!(p.user_agent.as_deref(), Some("oc-pyclient/0.1"));
    let device = p.device.expect("device auth");
    assert_eq!(
        device.nonce, challenge.nonce,
        "the device signs the challenge"
    );
    assert_eq!(device.signed_at, challenge.ts);
    assert!(p.auth.and_then(|a| a.token).is_some());

    let Frame::Res(res) = decode(&frames[2].1) else {
        panic!("third frame is a res")
    };
    assert_eq!(res.id, req.id, "hello-ok answers the connect");
    assert!(res.ok);
    let hello: HelloOk = res.payload_as().expect("hello-ok");
    assert_eq!(hello.protocol, PROTOCOL_VERSION);
    assert_eq!(hello.server.version, "2026.9.6");
    assert_eq!(hello.features.methods[0], "health");
    assert!(
        hello
            .features
            .methods
            .contains(&"doctor.memory.status".to_string())
    );
    assert_eq!(hello.features.events[0], "connect.challenge");
    assert!(
        hello
            .features
            .events
            .contains(&"session.message".to_string())
    );
    assert_eq!(hello.policy.max_payload, 26_214_400);
    assert_eq!(hello.policy.max_buffered_bytes, 52_428_800);
    assert_eq!(hello.policy.tick_interval_ms, 30_000);
    assert!(hello.policy.extra.contains_key("attachments"));
    assert!(
        hello.extra.contains_key("auth"),
        "unmodelled fields are kept"
    );
}

#[test]
fn the_captured_errors_carry_code_and_message() {
    let errors: Vec<_> = captured()
        .into_iter()
        .filter_map(|(_, v)| match decode(&v) {
            Frame::Res(r) if !r.ok => Some(r.error.expect("a failed res has an error")),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2);
    assert!(errors.iter().all(|e| e.code == INVALID_REQUEST));
    assert_eq!(errors[0].message, "unknown method: nonexistent.method");
    assert!(errors[1].message.contains("required property 'message'"));
}

#[test]
fn a_hello_ok_payload_of_another_type_is_refused() {
    let (_, mut v) = captured().swap_remove(2);
    v["payload"]["type"] = "hello-nope".into();
    let Frame::Res(res) = decode(&v) else {
        panic!("a res")
    };
    assert!(matches!(
        res.payload_as::<HelloOk>(),
        Err(ProtocolError::Payload { ref path, .. }) if path == "type"
    ));
}

#[test]
fn bad_inputs_give_the_right_errors() {
    let err = |text: &str| Frame::decode(text, MAX).expect_err(text);
    assert!(matches!(err("{not json"), ProtocolError::BadJson(_)));
    assert!(matches!(err(""), ProtocolError::BadJson(_)));
    assert!(matches!(err("[1,2]"), ProtocolError::NotAnObject("array")));
    assert!(matches!(
        err("\"req\""),
        ProtocolError::NotAnObject("string")
    ));
    assert!(matches!(err(r#"{"id":"1"}"#), ProtocolError::MissingType));
    assert!(matches!(err(r#"{"type":7}"#), ProtocolError::MissingType));
    let unknown = err(r#"{"type":"ping","id":"1"}"#);
    assert!(matches!(&unknown, ProtocolError::UnknownType(t) if t == "ping"));
    assert!(unknown.to_string().contains("`ping`"), "{unknown}");
    assert!(matches!(
        err(r#"{"type":"req","method":"health"}"#),
        ProtocolError::MissingField {
            kind: "req",
            field: "id"
        }
    ));
    assert!(matches!(
        err(r#"{"type":"req","id":"1","params":{}}"#),
        ProtocolError::MissingField {
            kind: "req",
            field: "method"
        }
    ));
    assert!(matches!(
        err(r#"{"type":"res","id":"1"}"#),
        ProtocolError::MissingField {
            kind: "res",
            field: "ok"
        }
    ));
    assert!(matches!(
        err(r#"{"type":"event","payload":{}}"#),
        ProtocolError::MissingField {
            kind: "event",
            field: "event"
        }
    ));
    assert!(matches!(
        err(r#"{"type":"req","id":1,"method":"health"}"#),
        ProtocolError::Malformed { kind: "req", .. }
    ));
    assert!(matches!(
        err(r#"{"type":"event","event":"tick","seq":-1}"#),
        ProtocolError::Malformed { kind: "event", .. }
    ));
    let big = format!(r#"{{"type":"event","event":"{}"}}"#, "x".repeat(100));
    assert!(matches!(
        Frame::decode(&big, 64),
        Err(ProtocolError::TooLarge { max: 64, .. })
    ));
}

#[test]
fn a_frame_we_do_not_model_round_trips_with_nulls_and_extra_fields() {
    let v: Value = serde_json::json!({
        "type": "res", "id": "x", "ok": true, "payload": null, "future": {"a": [1, 2.5, null]}
    });
    let back: Value = serde_json::from_str(&decode(&v).encode().expect("encodes")).expect("JSON");
    assert_eq!(back, v);
}
