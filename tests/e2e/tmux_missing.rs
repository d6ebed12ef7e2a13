//! Without tmux the end-to-end tests skip, saying so; under CI they fail instead, so a
//! runner whose tmux install failed cannot report the end-to-end suite green with nothing
//! run. Checked on this very binary: one end-to-end test run again as a child process with
//! a `PATH` that holds no tmux, with and without `CI=true`.

use std::process::{Command, Output};

use crate::common::bounded;

/// An end-to-end test that needs tmux before anything else.
const NEEDS_TMUX: &str = "e2e_console::a_wait_that_runs_out_fails_with_the_screen";

/// This test binary run for `NEEDS_TMUX` alone, with no tmux to be found and `ci` as `CI`.
fn run_without_tmux(ci: Option<&str>) -> Output {
    let empty = tempfile::tempdir().expect("temp dir");
    let mut c = Command::new(std::env::current_exe().expect("the test binary"));
    c.args([NEEDS_TMUX, "--exact", "--nocapture", "--test-threads=1"])
        .env("PATH", empty.path())
        .env_remove("CI");
    if let Some(ci) = ci {
        c.env("CI", ci);
    }
    bounded(c)
}

fn all_output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn without_tmux_an_end_to_end_test_skips_saying_so() {
    let out = run_without_tmux(None);
    let text = all_output(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the test ran: {text}");
    assert!(
        text.contains("tmux is not installed: skipping this end-to-end test"),
        "{text}"
    );
}

#[test]
fn under_ci_without_tmux_an_end_to_end_test_fails() {
    for ci in ["true", "1"] {
        let out = run_without_tmux(Some(ci));
        let text = all_output(&out);
        assert!(!out.status.success(), "CI={ci}: {text}");
        assert!(text.contains("1 failed"), "CI={ci}: {text}");
        assert!(
            text.contains("tmux is not installed and CI is set"),
            "CI={ci}: {text}"
        );
    }
}
