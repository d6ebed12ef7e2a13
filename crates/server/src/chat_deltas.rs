//! OpenClaw's `chat` delta events for one connection: each `ReplyDelta` of a run it follows
//! becomes `{runId, sessionKey, agentId, seq, state: "delta", deltaText, message}` whose
//! message carries the reply accumulated so far, as OpenClaw sends it. The accumulated text
//! is per connection and per run, bounded, and freed when the run ends.

use std::collections::HashMap;

use serde_json::{Value, json};

use switchboard_types::api::EngineEvent;

/// The most reply text accumulated for one run: every delta frame carries all of it, so a
/// longer reply stops getting deltas there (its `final` still carries it whole).
pub const MAX_ACCUMULATED: usize = 256 * 1024;
/// The most runs followed at once per connection; the oldest is forgotten beyond it.
pub const MAX_RUNS: usize = 256;

struct Run {
    /// The model call within the run the text belongs to.
    step: u32,
    text: String,
    /// Numbers this run's delta frames, 1, 2, …
    seq: u64,
    /// Text was missed or outgrew the bound: no more deltas for this run.
    stopped: bool,
    /// Arrival order, for forgetting the oldest.
    order: u64,
}

/// The accumulated replies of the runs one connection follows.
#[derive(Default)]
pub struct ChatDeltas {
    runs: HashMap<String, Run>,
    next_order: u64,
}

impl ChatDeltas {
    /// The `chat` payload for `event` if it is a delta of a run the connection follows
    /// (`follows` says so for a session key); keeps the accumulated text current and frees
    /// a run's text when it ends.
    pub fn translate(
        &mut self,
        event: &EngineEvent,
        follows: impl Fn(&str) -> bool,
        ts: i64,
    ) -> Option<Value> {
        match event {
            EngineEvent::ReplyDelta {
                run_id,
                key,
                agent_id,
                step,
                offset,
                delta,
            } => {
                if !follows(key) {
                    return None;
                }
                let run = self.run(run_id, *step)?;
                if *step < run.step {
                    return None; // an earlier model call's late text
                }
                if *step > run.step {
                    // A new model call (the last ended in tool calls): its text starts afresh.
                    run.step = *step;
                    run.text.clear();
                    run.stopped = false;
                }
                // Text missed (this connection joined mid-run, or lagged): what it would
                // show as the reply would be wrong, so it waits for the final instead.
                if run.stopped
                    || *offset != run.text.len()
                    || run.text.len() + delta.len() > MAX_ACCUMULATED
                {
                    run.stopped = true;
                    return None;
                }
                run.text.push_str(delta);
                run.seq += 1;
                Some(json!({
                    "runId": run_id,
                    "sessionKey": key,
                    "agentId": agent_id,
                    "seq": run.seq,
                    "state": "delta",
                    "deltaText": delta,
                    "message": {
                        "role": "assistant",
                        "content": [{ "type": "text", "text": run.text }],
                        "timestamp": ts,
                    },
                }))
            }
            EngineEvent::RunEnded { run_id, .. } => {
                self.runs.remove(run_id);
                None
            }
            _ => None,
        }
    }

    /// Events were lost: no accumulated text can be trusted any more.
    pub fn missed(&mut self) {
        self.runs.clear();
    }

    /// How many runs' texts are held (for tests of the bound).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.runs.len()
    }

    fn run(&mut self, run_id: &str, step: u32) -> Option<&mut Run> {
        if !self.runs.contains_key(run_id) {
            if self.runs.len() >= MAX_RUNS {
                let oldest = self
                    .runs
                    .iter()
                    .min_by_key(|(_, r)| r.order)
                    .map(|(k, _)| k.clone())?;
                self.runs.remove(&oldest);
            }
            self.next_order += 1;
            self.runs.insert(
                run_id.to_string(),
                Run {
                    step,
                    text: String::new(),
                    seq: 0,
                    stopped: false,
                    order: self.next_order,
                },
            );
        }
        self.runs.get_mut(run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(run: &str, step: u32, offset: usize, text: &str) -> EngineEvent {
        EngineEvent::ReplyDelta {
            run_id: run.into(),
            key: "agent:main:main".into(),
            agent_id: "main".into(),
            step,
            offset,
            delta: text.into(),
        }
    }

    fn ended(run: &str) -> EngineEvent {
        EngineEvent::RunEnded {
            run_id: run.into(),
            key: "agent:main:main".into(),
            step: switchboard_types::api::Step::Message,
            round: 0,
            status: switchboard_types::api::RunStatus::Ok,
            reply: None,
            error: None,
            duration_ms: 1,
            tokens_in: None,
            tokens_out: None,
            exchange_id: None,
        }
    }

    fn text(v: &Value) -> &str {
        v["message"]["content"][0]["text"].as_str().unwrap_or("?")
    }

    #[test]
    fn deltas_accumulate_numbered_and_are_freed_at_the_end() {
        let mut d = ChatDeltas::default();
        let a = d.translate(&delta("r", 1, 0, "pro"), |_| true, 5).unwrap();
        let b = d.translate(&delta("r", 1, 3, "to"), |_| true, 6).unwrap();
        assert_eq!((a["seq"].as_u64(), text(&a)), (Some(1), "pro"));
        assert_eq!((b["seq"].as_u64(), text(&b)), (Some(2), "proto"));
        assert_eq!(b["deltaText"], "to");
        assert_eq!(b["state"], "delta");
        assert_eq!(d.held(), 1);
        assert_eq!(d.translate(&ended("r"), |_| true, 7), None);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn a_run_not_followed_costs_nothing() {
        let mut d = ChatDeltas::default();
        assert_eq!(d.translate(&delta("r", 1, 0, "x"), |_| false, 1), None);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn missed_text_stops_the_deltas_instead_of_sending_a_wrong_reply() {
        let mut d = ChatDeltas::default();
        assert_eq!(d.translate(&delta("r", 1, 4, "late"), |_| true, 1), None);
        assert_eq!(d.translate(&delta("r", 1, 8, "r"), |_| true, 1), None);
        // A new model call starts clean again.
        let v = d.translate(&delta("r", 2, 0, "ok"), |_| true, 1).unwrap();
        assert_eq!(text(&v), "ok");
        d.missed();
        assert_eq!(d.translate(&delta("r", 2, 2, "!"), |_| true, 1), None);
    }

    #[test]
    fn bounded_in_text_and_in_runs() {
        let mut d = ChatDeltas::default();
        let big = "x".repeat(MAX_ACCUMULATED);
        assert!(d.translate(&delta("r", 1, 0, &big), |_| true, 1).is_some());
        assert_eq!(
            d.translate(&delta("r", 1, big.len(), "y"), |_| true, 1),
            None
        );
        for i in 0..MAX_RUNS + 10 {
            d.translate(&delta(&format!("run{i}"), 1, 0, "a"), |_| true, 1);
        }
        assert_eq!(d.held(), MAX_RUNS);
    }
}
