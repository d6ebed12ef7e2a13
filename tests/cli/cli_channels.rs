//! Issue 29 from the command line: `config check` explains a channel that cannot work (no
//! url, no secret, a short secret, an unknown key) without repeating a secret; `deliveries`
//! on a state with none, and `deliveries retry` of an id that does not exist.

use crate::common::CliBench;

#[test]
fn config_check_explains_a_webhook_that_cannot_work() {
    let bench = CliBench::new(
        r#"{
  channels: { webhook: {
    ops: { secret: "0123456789abcdef-secret" },
    alerts: { url: "https://example.com/hook", secret: "short-pw" },
    bad: { url: "ftp://example.com", secret: "0123456789abcdef0123", retry: { attemps: 3 } },
    "no/slash": { url: "https://example.com", secret: "0123456789abcdef0123" },
  } },
}"#,
    );
    let out = bench.command(&["config", "check"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("channels.webhook.ops.url"), "{err}");
    assert!(
        err.contains("missing: the address webhook \"ops\" POSTs deliveries to"),
        "{err}"
    );
    assert!(err.contains("channels.webhook.alerts.secret"), "{err}");
    assert!(err.contains("too short (8 characters)"), "{err}");
    assert!(err.contains("unknown key \"attemps\""), "{err}");
    assert!(err.contains("must be 1 to 64 of a-z"), "{err}");
    assert!(
        !err.contains("short-pw"),
        "a secret is never repeated: {err}"
    );

    let fine = CliBench::new(
        r#"{ channels: { webhook: { ops: { url: "https://example.com/hook", secret: "0123456789abcdef0123" } } } }"#,
    );
    let out = fine.command(&["config", "check"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn deliveries_lists_none_and_retry_names_a_missing_id() {
    let bench = CliBench::new("{}");
    bench.ok(&["inject", "agent:main:main", "hello"]);
    assert_eq!(bench.ok(&["deliveries", "--json"]).trim(), "[]");
    let out = bench.run(&["deliveries", "retry", "999"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no delivery 999"), "{err}");
}
