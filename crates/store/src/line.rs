//! A transcript line as every store writes it: the header fields the store owns (`type`,
//! `id`, `parentId`, `timestamp`) decided and serialised before the write, so the write
//! itself only splices in the parent it finds at the transcript's end. Shared by the stores
//! so a line reads the same whichever database holds it.

use serde_json::{Map, Value};

use crate::{NewLine, TranscriptRow, iso_timestamp};
use switchboard_types::entry::SessionEntry;
use switchboard_types::key::SessionKey;

/// A line made ready for the writer: everything but `parentId` is decided and serialised
/// beforehand, so the writer only splices the parent in (it is the bottleneck).
#[derive(Debug, Clone)]
pub struct PreparedLine {
    pub kind: String,
    /// The row's role column (`notice::row_role`).
    pub role: Option<String>,
    pub id: String,
    /// The line as a value, `parentId` still null.
    pub value: Value,
    /// Serialised text before and after the `parentId` value.
    head: String,
    tail: String,
}

impl PreparedLine {
    pub fn new(line: NewLine, now_ms: i64) -> PreparedLine {
        let id = short_id();
        // A shown notice's row gets the notice role, as an imported one does, so history
        // reads select it (`notice::row_role`).
        let shown = crate::notice::notice_shown(
            line.body.get("display") == Some(&Value::Bool(true)),
            line.body.get("customType").and_then(Value::as_str),
        );
        let role = crate::notice::row_role(&line.kind, line.role(), shown);
        let mut obj = Map::with_capacity(line.body.len() + 4);
        obj.insert("type".into(), Value::String(line.kind.clone()));
        obj.insert("id".into(), Value::String(id.clone()));
        obj.insert("parentId".into(), Value::Null);
        obj.insert("timestamp".into(), Value::String(iso_timestamp(now_ms)));
        for (k, v) in line.body {
            // The header fields belong to the store.
            if matches!(k.as_str(), "type" | "id" | "parentId") {
                continue;
            }
            obj.insert(k, v);
        }
        let value = Value::Object(obj);
        // Serialise once and cut around the parent's `null`: `type` and `id` come first
        // and are plain strings, so the first `"parentId":null` is the header's.
        let text = value.to_string();
        const MARK: &str = "\"parentId\":null";
        let (head, tail) = match text.find(MARK) {
            Some(at) => (
                text[..at + MARK.len() - "null".len()].to_string(),
                text[at + MARK.len()..].to_string(),
            ),
            // Unreachable with the fields above; keep a valid line anyway.
            None => (text.clone(), String::new()),
        };
        PreparedLine {
            kind: line.kind,
            role,
            id,
            value,
            head,
            tail,
        }
    }

    /// The line's stored text with `parent` as its `parentId`.
    pub fn text(&self, parent: Option<&str>) -> String {
        let parent = match parent {
            Some(p) => Value::String(p.to_string()).to_string(),
            None => "null".to_string(),
        };
        let mut text = String::with_capacity(self.head.len() + parent.len() + self.tail.len());
        text.push_str(&self.head);
        text.push_str(&parent);
        text.push_str(&self.tail);
        text
    }
}

/// Where each prepared line landed: its `seq` and the parent it was given.
pub type Placed = Vec<(i64, Option<String>)>;

/// Join prepared lines with where they landed: the rows as committed.
pub fn finish_rows(lines: Vec<PreparedLine>, placed: Placed) -> Vec<TranscriptRow> {
    lines
        .into_iter()
        .zip(placed)
        .map(|(l, (seq, parent))| {
            let mut line = l.value;
            if let (Some(p), Some(obj)) = (parent, line.as_object_mut()) {
                obj.insert("parentId".into(), Value::String(p));
            }
            TranscriptRow {
                seq,
                entry_id: l.id,
                line,
            }
        })
        .collect()
}

/// What the name order sorts on: the name front ends show, lower-cased (Unicode, so
/// `Émile` sorts with `émile`); byte order of the result is code point order.
pub fn name_key(key: &SessionKey, entry: &SessionEntry) -> String {
    entry.shown_name(key.shown()).to_lowercase()
}

/// A line id: 8 hex digits, as OpenClaw's are, from a counter mixed so ids look random
/// and never repeat within a process.
fn short_id() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: OnceLock<AtomicU64> = OnceLock::new();
    let state = STATE.get_or_init(|| AtomicU64::new(uuid::Uuid::new_v4().as_u64_pair().0));
    let mut z = state
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    format!("{:08x}", z >> 32)
}

/// The error of a run its engine stopped in the middle of (a crash, `kill -9`, power loss),
/// as recovery records it.
pub const INTERRUPTED: &str = "the engine stopped while this run was in progress";

/// The failed turn's message, as a run that ends in error records it (`stopReason: "error"`,
/// `errorMessage`, the run in `__switchboard`): what recovery appends for a run it closes.
pub fn interruption_message(run: &crate::RunRow, now: i64) -> Value {
    serde_json::json!({
        "role": "assistant",
        "content": [],
        "stopReason": "error",
        "errorMessage": INTERRUPTED,
        "timestamp": now,
        "__switchboard": {
            "runId": run.run_id, "step": run.step, "round": run.round, "flowId": run.flow_id,
        },
    })
}
