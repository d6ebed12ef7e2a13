//! Sessions' display names by key, as the sessions pane's pages gave them, so the traffic
//! view, the rounds pane and the drill-down list name a session as the sessions pane does
//! (a display name or label from its start, a bare key cut in the middle), not by a key cut
//! from the left.

use std::collections::HashMap;

use crate::sessions::SessionRow;

/// A reference without its source (`home/agent:main:main` → `agent:main:main`).
fn bare(key: &str) -> &str {
    switchboard_types::api::source::SessionRef::parse(key).key
}

/// The most names remembered: a bound on memory whatever the number of sessions paged
/// through; past it the table starts over from the next page (what is on screen is there
/// again at once).
const MAX_NAMES: usize = 4096;

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Key → display name (already made safe for the screen), for named sessions only.
    named: HashMap<String, String>,
}

impl Names {
    /// Remember the names of a page of rows.
    pub fn learn(&mut self, rows: &[SessionRow]) {
        if self.named.len() + rows.len() > MAX_NAMES {
            self.named.clear();
        }
        for r in rows {
            // A name that is the key itself reads as a key: cut in the middle like one.
            if r.named && r.name != r.key {
                self.named.insert(r.key.clone(), r.name.clone());
            } else {
                self.named.remove(&r.key);
            }
        }
    }

    /// The session's name as the sessions pane shows it in `width` columns: its display
    /// name from its start, else the key cut in the middle (both ends tell keys apart).
    pub fn shown(&self, key: &str, width: usize) -> String {
        match self.named.get(key) {
            Some(name) => crate::view::fit(name, width),
            None => crate::view::middle_ellipsis(key, width),
        }
    }

    /// [`Names::shown`] within a line that names the source already: a bare key without it.
    fn shown_in_source(&self, key: &str, width: usize) -> String {
        match self.named.get(key) {
            Some(name) => crate::view::fit(name, width),
            None => crate::view::middle_ellipsis(bare(key), width),
        }
    }

    fn full_in_source(&self, key: &str) -> String {
        match self.named.get(key) {
            Some(name) => name.clone(),
            None => bare(key).to_string(),
        }
    }

    /// `source requester → target`, for a pair on one of several sources (`None` when the
    /// requester names no source).
    fn pair_on_source(&self, requester: &str, target: &str, width: usize) -> Option<String> {
        use unicode_width::UnicodeWidthStr;
        let source = switchboard_types::api::source::SessionRef::parse(requester).source?;
        let lead = format!("{source} ");
        let room = width.saturating_sub(lead.width());
        Some(format!(
            "{lead}{}",
            self.pair_with(requester, target, room, true)
        ))
    }

    /// The name in full (the breadcrumb cuts the whole line, not each part).
    pub fn full(&self, key: &str) -> String {
        match self.named.get(key) {
            Some(name) => name.clone(),
            None => key.to_string(),
        }
    }

    /// `requester → target` in at most `width` columns: half each, and what one side does
    /// not need goes to the other; each side shortened as [`Names::shown`] does.
    /// On one of several sources, the source leads (`home Alice → #incidents`): the same
    /// names on two sources are two pairs.
    pub fn pair(&self, requester: &str, target: &str, width: usize) -> String {
        self.pair_on_source(requester, target, width)
            .unwrap_or_else(|| self.pair_with(requester, target, width, false))
    }

    fn pair_with(&self, requester: &str, target: &str, width: usize, in_source: bool) -> String {
        use unicode_width::UnicodeWidthStr;
        const ARROW: &str = " → ";
        let full = |k: &str| {
            if in_source {
                self.full_in_source(k)
            } else {
                self.full(k)
            }
        };
        let shown = |k: &str, w: usize| {
            if in_source {
                self.shown_in_source(k, w)
            } else {
                self.shown(k, w)
            }
        };
        let (r, t) = (full(requester), full(target));
        let room = width.saturating_sub(ARROW.width());
        let (rw, tw) = (r.width(), t.width());
        // The shorter side is cut first (to at most half), and the other takes every column
        // it leaves, also those a cut at a part's start left unused.
        let share =
            |short: usize, long: usize| short.min((room / 2).max(room.saturating_sub(long)));
        let (left, right) = if rw <= tw {
            let left = shown(requester, share(rw, tw));
            (
                left.clone(),
                shown(target, room.saturating_sub(left.width())),
            )
        } else {
            let right = shown(target, share(tw, rw));
            (shown(requester, room.saturating_sub(right.width())), right)
        };
        format!("{left}{ARROW}{right}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_types::api::{PolicySetting, SessionKind};
    use unicode_width::UnicodeWidthStr;

    fn row(key: &str, name: Option<&str>) -> SessionRow {
        SessionRow {
            key: key.into(),
            source: None,
            kind: SessionKind::Main,
            name: name.unwrap_or(key).into(),
            channel: String::new(),
            updated_at: 0,
            policy: PolicySetting::Allow,
            policy_override: false,
            policy_detail: String::new(),
            policy_words: String::new(),
            archived: false,
            named: name.is_some(),
            preview: None,
        }
    }

    #[test]
    fn a_pair_shows_names_and_keys_cut_in_the_middle_within_the_width() {
        let mut n = Names::default();
        n.learn(&[
            row("agent:main:main", Some("Main desk")),
            row("agent:ops:slack:group:incidents", None),
        ]);
        assert_eq!(
            n.pair("agent:main:main", "agent:ops:slack:group:incidents", 60),
            "Main desk → agent:ops:slack:group:incidents"
        );
        // Cut: the key keeps both ends (not `…up:incidents`), the name its start.
        let cut = n.pair("agent:main:main", "agent:ops:slack:group:incidents", 32);
        assert_eq!(cut, "Main desk → agent:…incidents");
        for w in 0..50 {
            let p = n.pair("agent:main:main", "agent:ops:slack:group:incidents", w);
            assert!(p.width() <= w.max(3), "{w}: {p:?}");
        }
        // A key never named stays a key; a name unset later is forgotten.
        n.learn(&[row("agent:main:main", None)]);
        assert_eq!(n.shown("agent:main:main", 40), "agent:main:main");
    }
}
