//! The sources a console merges (the local folder and gateways), as the header and the
//! sessions pane show them: each one's name, colour and link state, read when drawn.

use ratatui::style::Color;
use switchboard_types::api::LinkState;
use switchboard_types::api::source::{REMOVED, SessionRef, SourceInfo, SourceKind};

use crate::theme::Glyphs;

/// Colours told apart on a 16-colour terminal, one per source in turn.
const COLOURS: [Color; 6] = [
    Color::Cyan,
    Color::Magenta,
    Color::Yellow,
    Color::Green,
    Color::Blue,
    Color::LightRed,
];

/// One source, as configured.
#[derive(Debug, Clone)]
pub struct SourceView {
    pub name: String,
    pub kind: SourceKind,
    pub state: Option<tokio::sync::watch::Receiver<LinkState>>,
    pub unavailable: Option<String>,
    /// The link's state last told in a notice (`None`: none yet).
    pub told: Option<LinkState>,
}

impl From<SourceInfo> for SourceView {
    fn from(s: SourceInfo) -> SourceView {
        SourceView {
            name: s.name,
            kind: s.kind,
            state: s.state,
            unavailable: s.unavailable,
            told: None,
        }
    }
}

/// A change of one source's link worth a notice: what it says, and whether it is bad news.
fn change(name: &str, before: Option<&LinkState>, now: &LinkState) -> Option<(String, bool)> {
    let same_kind =
        before.is_some_and(|b| std::mem::discriminant(b) == std::mem::discriminant(now));
    match now {
        // Attempts and round trips change all the time; only a change of kind is news.
        _ if same_kind => None,
        LinkState::Connecting { .. } => None,
        LinkState::Connected { server, .. } => before.map(|_| {
            let who = if server.is_empty() {
                String::new()
            } else {
                format!(" ({server})")
            };
            (format!("source {name}: linked{who}"), false)
        }),
        LinkState::Reconnecting { message, .. } => Some((
            format!("source {name}: lost, reconnecting: {message}"),
            true,
        )),
        LinkState::Failed { message } if message == REMOVED => {
            Some((format!("source {name}: {REMOVED}"), true))
        }
        LinkState::Failed { message } => Some((format!("source {name}: refused: {message}"), true)),
    }
}

/// How a source's link is, in the terms the header uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Local, or a gateway attached.
    Linked,
    /// Dialling, or lost and retrying.
    Trying,
    /// Refused for good.
    Refused,
}

impl SourceView {
    pub fn reach(&self) -> Reach {
        match self.state.as_ref().map(|s| s.borrow().clone()) {
            None | Some(LinkState::Connected { .. }) => Reach::Linked,
            Some(LinkState::Connecting { .. } | LinkState::Reconnecting { .. }) => Reach::Trying,
            Some(LinkState::Failed { .. }) => Reach::Refused,
        }
    }

    /// `home ●`, `team ● 41 ms`, `oc ◌ reconnecting 3s`, `lab ✗ refused`.
    pub fn label(&self, g: &Glyphs) -> String {
        let state = self.state.as_ref().map(|s| s.borrow().clone());
        match state {
            None | Some(LinkState::Connected { rtt_ms: None, .. }) => {
                format!("{} {}", self.name, g.running)
            }
            Some(LinkState::Connected {
                rtt_ms: Some(ms), ..
            }) => format!("{} {} {ms} ms", self.name, g.running),
            Some(LinkState::Connecting { .. }) => format!("{} {} connecting", self.name, g.idle),
            Some(LinkState::Reconnecting { retry_in_ms, .. }) => format!(
                "{} {} reconnecting {}s",
                self.name,
                g.idle,
                retry_in_ms.div_ceil(1000)
            ),
            Some(LinkState::Failed { message }) if message == REMOVED => {
                format!("{} {} removed", self.name, g.cross)
            }
            Some(LinkState::Failed { .. }) => format!("{} {} refused", self.name, g.cross),
        }
    }
}

/// The sources, in the order they were given.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub list: Vec<SourceView>,
}

impl Sources {
    pub fn new(infos: Vec<SourceInfo>) -> Sources {
        Sources {
            list: infos.into_iter().map(SourceView::from).collect(),
        }
    }

    /// The console merges several sources (else keys are bare and nothing here is shown).
    pub fn merged(&self) -> bool {
        !self.list.is_empty()
    }

    /// The source a reference names, when it names one of these.
    pub fn of<'a>(&'a self, reference: &str) -> Option<&'a SourceView> {
        let name = SessionRef::parse(reference).source?;
        self.list.iter().find(|s| s.name == name)
    }

    /// A source's colour (by its place in the list).
    pub fn colour(&self, name: &str) -> Option<Color> {
        let i = self.list.iter().position(|s| s.name == name)?;
        Some(COLOURS[i % COLOURS.len()])
    }

    /// The widest name, for the sessions pane's source column (at most 8 columns).
    pub fn column_width(&self) -> usize {
        self.list
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(3, 8)
    }

    /// The name after `current` in the cycle all → first → … → last → all.
    pub fn next_filter(&self, current: Option<&str>) -> Option<String> {
        match current {
            None => self.list.first().map(|s| s.name.clone()),
            Some(name) => {
                let i = self.list.iter().position(|s| s.name == name)?;
                self.list.get(i + 1).map(|s| s.name.clone())
            }
        }
    }

    /// What changed in the sources' links since last told, as notices (`source team:
    /// refused: bad token`, `source team: lost, reconnecting: …`, `source team: linked`).
    pub fn news(&mut self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for s in &mut self.list {
            let Some(now) = s.state.as_ref().map(|r| r.borrow().clone()) else {
                continue;
            };
            if let Some(n) = change(&s.name, s.told.as_ref(), &now) {
                out.push(n);
            }
            s.told = Some(now);
        }
        out
    }

    /// The header's link part: every source's name and state.
    pub fn header(&self, g: &Glyphs) -> String {
        let parts: Vec<String> = self.list.iter().map(|s| s.label(g)).collect();
        parts.join(&format!(" {} ", g.dot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::watch;

    fn source(name: &str, state: Option<LinkState>) -> SourceView {
        SourceView {
            name: name.into(),
            kind: if state.is_some() {
                SourceKind::Gateway
            } else {
                SourceKind::Local
            },
            state: state.map(|s| watch::channel(s).1),
            unavailable: None,
            told: None,
        }
    }

    #[test]
    fn the_header_names_each_source_and_its_link() {
        let g = &crate::theme::UNICODE;
        let s = Sources {
            list: vec![
                source("home", None),
                source(
                    "team",
                    Some(LinkState::Connected {
                        protocol: 4,
                        server: "switchboard".into(),
                        rtt_ms: Some(41),
                        resynced: false,
                    }),
                ),
                source(
                    "oc",
                    Some(LinkState::Reconnecting {
                        attempt: 2,
                        retry_in_ms: 2_500,
                        message: "refused".into(),
                    }),
                ),
                source(
                    "lab",
                    Some(LinkState::Failed {
                        message: "bad token".into(),
                    }),
                ),
            ],
        };
        assert_eq!(
            s.header(g),
            "home ● · team ● 41 ms · oc ◌ reconnecting 3s · lab ✗ refused"
        );
        assert_eq!(
            s.of("team/agent:main:main").map(|v| v.reach()),
            Some(Reach::Linked)
        );
        assert_eq!(
            s.of("lab/agent:main:main").map(|v| v.reach()),
            Some(Reach::Refused)
        );
        assert!(s.of("agent:main:main").is_none());
        assert_eq!(s.next_filter(None).as_deref(), Some("home"));
        assert_eq!(s.next_filter(Some("oc")).as_deref(), Some("lab"));
        assert_eq!(s.next_filter(Some("lab")), None);
    }
}
