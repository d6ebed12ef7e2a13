//! The sessions pane's state: a window of the sessions matching the filters, the selection
//! (a position in the whole newest-first order), the filters, and the marks (running, unread).

use std::collections::{HashMap, HashSet};

use switchboard_types::api::{self, PolicySetting, SessionKind};
use switchboard_types::text_safety::safe_line;

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct SessionsPane {
    /// A window of the sessions matching the filters, starting at `offset` in that
    /// (newest-first) order; `selected` is a position in the whole order, not the window.
    pub rows: Vec<SessionRow>,
    pub total: u64,
    /// How many sessions match the filters (0 = not known: the window is all there is).
    pub matching: u64,
    pub selected: usize,
    pub offset: usize,
    pub filter: String,
    pub kind_filter: Option<SessionKind>,
    /// Only this source's sessions (several merged; `:source NAME`, `O`).
    pub source_filter: Option<String>,
    /// Only sessions active within this many minutes.
    pub active_within: Option<i64>,
    pub show_archived: bool,
    pub running: HashSet<String>,
    pub unread: HashMap<String, u32>,
    /// How the pane is ordered, and the rows marked with new activity.
    pub order: crate::sessions_order::Order,
    /// Effective policy of the selected session and where it comes from (status line).
    pub selected_policy: Option<String>,
}

impl SessionsPane {
    pub fn selected_key(&self) -> Option<&str> {
        let i = self.selected.checked_sub(self.offset)?;
        self.rows.get(i).map(|r| r.key.as_str())
    }

    /// How many sessions the pane can scroll through.
    pub fn session_count(&self) -> usize {
        (self.matching as usize).max(self.offset + self.rows.len())
    }
}

/// One row of the sessions pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub key: String,
    /// The source it is on, when several are merged (the key is then `source/key`).
    pub source: Option<String>,
    pub kind: SessionKind,
    /// Display name, or the key when there is none.
    pub name: String,
    pub channel: String,
    pub updated_at: i64,
    /// `allow` / `deny`, and whether it is this session's own override.
    pub policy: PolicySetting,
    pub policy_override: bool,
    /// Where the policy comes from, in words (the status line shows it).
    pub policy_detail: String,
    /// The policy in plain words, for the status line's policy slot.
    pub policy_words: String,
    pub archived: bool,
    /// It has a display name or label (else `name` is its key, shortened in the middle).
    pub named: bool,
    /// The start of its last message, escaped (the preview column).
    pub preview: Option<String>,
}

impl SessionRow {
    /// A row as the API lists it, made safe for the screen: names are labels stored as
    /// given, so they are escaped here, where they enter the console.
    pub fn from_api(r: &api::SessionRow) -> SessionRow {
        SessionRow {
            key: r.key.clone(),
            source: switchboard_types::api::source::SessionRef::parse(&r.key)
                .source
                .map(str::to_string),
            kind: r.kind,
            name: safe_line(&r.name).into_owned(),
            channel: safe_line(&r.channel).into_owned(),
            updated_at: r.updated_at,
            policy: r.policy.policy,
            policy_override: r.policy.is_override(),
            policy_detail: safe_line(&r.policy.detail).into_owned(),
            policy_words: {
                let words = crate::status::policy_words(&r.policy);
                // The narrower stop sits beside the policy: the replies still follow it.
                let words = if r.agents_stopped {
                    format!("{words} · agent sends stopped")
                } else {
                    words
                };
                safe_line(&words).into_owned()
            },
            archived: r.archived,
            named: r.display_name.is_some() || r.label.is_some(),
            preview: r.last_message.as_deref().map(|m| safe_line(m).into_owned()),
        }
    }

    /// What the status line's policy slot says about this session's send policy.
    pub fn policy_line(&self) -> String {
        self.policy_words.clone()
    }
}
