//! A command's bounded, reported waits for the work it set off.

use std::time::{Duration, Instant};

use anyhow::Result;

use switchboard_engine::Engine;
use switchboard_types::api::{RunResult, SessionsApi, WorkId};
use switchboard_types::text_safety::safe_line;

/// How often a command waiting for the work it set off says what it still waits for.
/// `SWITCHBOARD_WAIT_REPORT_SECS` shortens it for tests, which cannot wait 30 s.
fn wait_report_every() -> Duration {
    std::env::var("SWITCHBOARD_WAIT_REPORT_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(Duration::from_secs(30), Duration::from_secs)
}

/// A command's waits for what it set off. Every wait is bounded by the work's own timeouts,
/// but some are long (a scripted delay, a 60 s exchange step), so a wait is never a silent
/// one: every `wait_report_every()` stderr says what is still running and for how long.
pub(crate) struct Waiting {
    started: Instant,
    every: Duration,
}

impl Waiting {
    pub(crate) fn new() -> Waiting {
        Waiting {
            started: Instant::now(),
            every: wait_report_every(),
        }
    }

    pub(crate) fn report(&self, tasks: &[(String, Duration)]) {
        let mut line = format!(
            "{} still running after {:.0?}",
            switchboard_types::words::count(tasks.len(), "task"),
            self.started.elapsed()
        );
        for (i, (what, age)) in tasks.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            line.push_str(&format!("{sep}{what} (for {age:.1?})"));
        }
        eprintln!("still waiting: {}", safe_line(&line));
    }

    /// The run's end (its reply), reporting what of `work` still runs meanwhile.
    pub(crate) async fn run(
        &self,
        api: &dyn SessionsApi,
        run_id: &str,
        work: WorkId,
    ) -> Result<RunResult> {
        loop {
            let asked = Instant::now();
            let result = api.wait_run(run_id, self.every).await?;
            if result.status.is_over() {
                return Ok(result);
            }
            // A run this engine does not execute is answered from its record at once:
            // wait out the slice before asking again.
            if let Some(rest) = self.every.checked_sub(asked.elapsed()) {
                tokio::time::sleep(rest).await;
            }
            self.report(&api.still_running(work).await?);
        }
    }

    /// Everything one call set off.
    pub(crate) async fn work(&self, api: &dyn SessionsApi, work: WorkId) -> Result<()> {
        while !api.wait_work(work, self.every).await? {
            self.report(&api.still_running(work).await?);
        }
        Ok(())
    }

    /// Everything this engine started (start-up work too, which exit must not cut off).
    pub(crate) async fn drain(&self, engine: &Engine) {
        let idle = engine.idle();
        tokio::pin!(idle);
        loop {
            tokio::select! {
                () = &mut idle => return,
                () = tokio::time::sleep(self.every) => self.report(&engine.still_running()),
            }
        }
    }
}
