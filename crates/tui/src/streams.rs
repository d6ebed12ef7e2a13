//! Replies being streamed: the provisional text the transcript pane shows at its bottom while
//! a model writes a reply, one per run, kept until the real line is on screen. Plain data,
//! changed by `update` only; delta text is made safe here, where it enters the console.

use std::collections::BTreeMap;

use switchboard_types::text_safety::safe_text;

/// The most provisional text kept per run (its newest part): a 1 MB reply streams in full
/// to the transcript, but the console holds only what a pane could ever show of it.
pub const STREAM_MAX_BYTES: usize = 64 * 1024;
/// The most runs followed at once; beyond it the oldest is forgotten (its line still
/// arrives with the transcript).
pub const STREAMS_MAX: usize = 64;
/// Shown where deltas were missed, so a hole is never passed off as the reply's text.
pub const GAP_MARKER: &str = " [… text missed …] ";

/// One run's reply as streamed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamingReply {
    pub key: String,
    pub agent_id: String,
    /// The model call within the run whose text this is.
    pub step: u32,
    /// Bytes of that step's raw text accounted for (received or known missed).
    pub end: usize,
    /// The text so far, made safe for the screen, with gap markers; its newest
    /// `STREAM_MAX_BYTES` at most.
    pub text: String,
    /// The start of the text was dropped to stay within `STREAM_MAX_BYTES`.
    pub cut: bool,
    /// When the first delta arrived (console clock).
    pub started: i64,
    /// The run's reply line has been appended at this seq: the provisional text stays until
    /// a transcript load reaches it, so the pane never shows neither (or both).
    pub done_seq: Option<i64>,
    /// Arrival order, for drawing and for forgetting the oldest.
    pub order: u64,
    /// Events were missed since its last delta: its end may have been among them.
    pub suspect: bool,
    /// Deltas applied so far (each one turns the pane's spinner a step).
    pub deltas: u64,
}

impl StreamingReply {
    /// Whether the model is still writing (the reply line has not been appended).
    pub fn live(&self) -> bool {
        self.done_seq.is_none()
    }

    fn push(&mut self, text: &str) {
        self.text.push_str(&safe_text(text));
        if self.text.len() > STREAM_MAX_BYTES {
            let mut cut_at = self.text.len() - STREAM_MAX_BYTES;
            while !self.text.is_char_boundary(cut_at) {
                cut_at += 1;
            }
            self.text.drain(..cut_at);
            self.cut = true;
        }
    }

    fn gap(&mut self) {
        // Two holes in a row read as one.
        if !self.text.ends_with(GAP_MARKER) {
            self.push(GAP_MARKER);
        }
    }

    /// Apply one delta of `step` that starts `offset` bytes into that step's text.
    fn apply(&mut self, step: u32, offset: usize, delta: &str) {
        if step < self.step {
            return; // an earlier model call's text, already replaced
        }
        if step > self.step {
            // A new model call (the last one ended in tool calls): its text starts afresh.
            self.step = step;
            self.end = 0;
            self.text.clear();
            self.cut = false;
        }
        let whole = delta.len();
        let new_part = if offset > self.end {
            self.gap();
            delta
        } else if offset < self.end {
            // Seen before, at least in part: keep only what is new, if it can be cut there.
            let seen = self.end - offset;
            if seen >= whole {
                return;
            }
            if delta.is_char_boundary(seen) {
                &delta[seen..]
            } else {
                self.gap();
                delta
            }
        } else {
            delta
        };
        self.push(new_part);
        self.end = offset.saturating_add(whole).max(self.end);
    }
}

/// One `ReplyDelta` event's fields.
#[derive(Debug, Clone, Copy)]
pub struct Delta<'a> {
    pub run_id: &'a str,
    pub key: &'a str,
    pub agent_id: &'a str,
    pub step: u32,
    pub offset: usize,
    pub text: &'a str,
}

/// The replies being streamed, by run id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Streams {
    pub runs: BTreeMap<String, StreamingReply>,
    next_order: u64,
}

impl Streams {
    /// A delta of run `run_id`'s reply arrived.
    pub fn delta(&mut self, d: Delta<'_>, now: i64) {
        if !self.runs.contains_key(d.run_id) {
            self.next_order += 1;
            self.runs.insert(
                d.run_id.to_string(),
                StreamingReply {
                    key: d.key.to_string(),
                    agent_id: d.agent_id.to_string(),
                    step: d.step,
                    end: 0,
                    text: String::new(),
                    cut: false,
                    started: now,
                    done_seq: None,
                    order: self.next_order,
                    suspect: false,
                    deltas: 0,
                },
            );
            self.trim();
        }
        if let Some(s) = self.runs.get_mut(d.run_id)
            && s.done_seq.is_none()
        {
            s.suspect = false;
            s.deltas = s.deltas.wrapping_add(1);
            s.apply(d.step, d.offset, d.text);
        }
    }

    /// Run `run_id`'s reply line was appended at `seq`. `shown`: its session's transcript is
    /// on screen (a load will bring the line); otherwise the provisional text just goes.
    pub fn reply_appended(&mut self, run_id: &str, seq: i64, shown: bool) {
        if shown {
            if let Some(s) = self.runs.get_mut(run_id) {
                s.done_seq = Some(seq);
            }
        } else {
            self.runs.remove(run_id);
        }
    }

    /// Run `run_id` ended. Its provisional text stays only while its reply line is on its
    /// way to the screen; a run that wrote no line (failed early, skipped) leaves nothing.
    /// A run whose line was not announced as its own (a gateway's lines carry no run id)
    /// but that ended with `reply` shows that whole reply until a load past `loaded_seq`
    /// (the last seq on screen) brings its line.
    pub fn run_ended(&mut self, run_id: &str, shown: bool, reply: Option<&str>, loaded_seq: i64) {
        match (self.runs.get_mut(run_id), reply) {
            (Some(s), _) if shown && s.done_seq.is_some() => {}
            (Some(s), Some(reply)) if shown => {
                s.text.clear();
                s.cut = false;
                s.push(reply);
                s.done_seq = Some(loaded_seq.saturating_add(1));
            }
            _ => {
                self.runs.remove(run_id);
            }
        }
    }

    /// A transcript load for `key` up to `last_seq` is now on screen: the replies it holds
    /// replace their provisional text; finished replies of other sessions are not awaited.
    pub fn transcript_loaded(&mut self, key: &str, last_seq: i64) {
        self.runs.retain(|_, s| match s.done_seq {
            None => true,
            Some(seq) => s.key == key && seq > last_seq,
        });
    }

    /// Events were missed: any run's end may have been among them.
    pub fn events_missed(&mut self) {
        for s in self.runs.values_mut() {
            s.suspect = true;
        }
    }

    /// A sessions page says `key` is not running. A run whose end may have been missed is
    /// over; any other is trusted over the page, which may have been read before it began.
    pub fn not_running(&mut self, key: &str) {
        self.runs
            .retain(|_, s| s.key != key || s.done_seq.is_some() || !s.suspect);
    }

    /// Whether a reply is being written in `key` now.
    pub fn streaming_in(&self, key: &str) -> bool {
        self.runs.values().any(|s| s.key == key && s.live())
    }

    /// The provisional replies of `key`, oldest first.
    pub fn of(&self, key: &str) -> Vec<&StreamingReply> {
        let mut v: Vec<&StreamingReply> = self.runs.values().filter(|s| s.key == key).collect();
        v.sort_by_key(|s| s.order);
        v
    }

    fn trim(&mut self) {
        while self.runs.len() > STREAMS_MAX {
            let oldest = self
                .runs
                .iter()
                .min_by_key(|(_, s)| s.order)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.runs.remove(&k);
                }
                None => break,
            }
        }
    }
}
