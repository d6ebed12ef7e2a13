//! The console's key reference, written from a keymap: the table README.md carries (a test keeps
//! the two equal) and what `switchboard keys` prints, so neither can drift from the keys the
//! console really answers.

use super::action::Intent;
use super::keymap::Keymap;

/// What an intent does, in the words of the reference (longer than the help overlay's).
fn detail(intent: Intent) -> &'static str {
    match intent {
        Intent::Quit => "quit (in the composer, Ctrl+C first clears the draft)",
        Intent::Help => "the keys, and a legend of the sessions pane's marks",
        Intent::Close => {
            "close the exchange view, the traffic view (cancelling a pending stop first), the notices log or the help; drilled down, back one level (the header's breadcrumb says where)"
        }
        Intent::Command => {
            "the command line (k9s style): `:traffic`, `:exchanges`, `:sessions`, `:transcript`, \
             `:messages`, `:send on|off|inherit`, `:status`, `:abort`, `:help`, `:quit` and the \
             composer's other commands; Tab completes, Enter runs, Esc closes"
        }
        Intent::FocusNext => {
            "next pane: sessions, transcript, rounds (the composer is entered with `i` or Enter; \
             with mouse capture on, a click focuses)"
        }
        Intent::FocusPrev => "previous pane",
        Intent::FocusSessions => {
            "the sessions pane (in the exchange view: go to the session that sent, its `[1]`)"
        }
        Intent::FocusTranscript => {
            "the transcript pane (in the exchange view: go to the session it was sent to, its `[2]`)"
        }
        Intent::FocusRounds => "the rounds pane",
        Intent::Zoom => {
            "zoom the focused pane to the whole screen, or restore the layout (the zoom follows \
             the focus from pane to pane)"
        }
        Intent::Down => "down in the focused pane",
        Intent::Up => "up in the focused pane (in the transcript this pauses follow)",
        Intent::PageDown => "a page down",
        Intent::PageUp => "a page up (in the transcript this pauses follow)",
        Intent::Top => {
            "the first row; in the transcript its first line, however long (loading as needed)"
        }
        Intent::Bottom => "the last row; in the transcript the newest line (follow resumes)",
        Intent::Filter => {
            "filter sessions by text (Esc clears); in the transcript, search it (a regex, or the \
             text as typed): the newest hit is selected, so `y` copies its message"
        }
        Intent::Compose => "write to the selected session as the owner",
        Intent::Open => {
            "sessions: write; rounds and the exchanges lists: open the exchange (every turn, how it ended, the announce); traffic view: the pair's exchanges, newest first; transcript: open or close the selected tool card"
        }
        Intent::SessionExchanges => {
            "the selected session's exchanges, newest first, over the panes (Enter opens one, Esc walks back)"
        }
        Intent::JumpRequester => "exchange view: go to the session that sent",
        Intent::JumpTarget => "exchange view: go to the session it was sent to",
        Intent::ToggleTools => "show or hide tool calls (as one-line cards)",
        Intent::ToggleTimestamps => "show or hide times",
        Intent::ToggleWrap => "wrap long lines, or cut them with `…` and scroll sideways",
        Intent::ToggleFollow => "follow new messages, or hold the view where it is",
        Intent::ToggleRoundsScope => {
            "rounds pane: this session's exchanges or all; traffic view: pairs of agents or of sessions"
        }
        Intent::CycleKind => "filter by kind (main, group, cron, hook, node, other)",
        Intent::CycleSource => {
            "filter by source, with several gateways attached (each in turn, then all)"
        }
        Intent::CycleActive => "filter by recent activity (5 min, 1 h, 24 h)",
        Intent::ToggleArchived => "show archived sessions",
        Intent::ToggleMouse => {
            "mouse capture on/off (off keeps your terminal's own text selection)"
        }
        Intent::ToggleTraffic => {
            "traffic view: messages and exchanges per pair of sessions over 1/5/60 minutes with a sparkline, likely loops marked"
        }
        Intent::StopPair => {
            "traffic view: stop the selected pair (`/send off` on its target; on OpenClaw also \
             aborts the pair's running step), once `y` confirms; `a` instead stops only agent sends into \
             it, its replies to its chat go on (not on OpenClaw)"
        }
        Intent::UndoStop => "traffic view: undo the last stop (`/send inherit` on its target)",
        Intent::SearchNext => {
            "transcript: the next search hit, selected (wraps around; the indicator shows `3/17`)"
        }
        Intent::SearchPrev => "transcript: the previous search hit, selected",
        Intent::ScrollLeft => "transcript with wrap off: scroll left",
        Intent::ScrollRight => "transcript with wrap off: scroll right",
        Intent::SelectPrev => "transcript: select the previous message",
        Intent::SelectNext => "transcript: select the next message",
        Intent::Copy => {
            "copy the selected message, as shown, to the clipboard (OSC 52, up to 100 KB)"
        }
        Intent::CycleSort => {
            "sort the sessions: by activity, by name (over every session), by unread (over the loaded rows)"
        }
        Intent::Notices => {
            "the notices log: the last 200 answers and notices with times (also `:messages`)"
        }
        Intent::Repaint => "repaint the whole screen",
    }
}

/// Markdown cell text: a `|` would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The key table as Markdown: one row per action, its keys, its name in the keymap file and
/// what it does. Unbound actions say so, so a remap that drops a key shows.
pub fn markdown(keymap: &Keymap) -> String {
    let mut out = String::from("| keys | action | does |\n|---|---|---|\n");
    for intent in Intent::ALL {
        let keys = keymap.keys_list(*intent);
        let keys = if keys.is_empty() {
            "(none)".to_string()
        } else {
            keys.iter()
                .map(|k| format!("`{}`", cell(k)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push_str(&format!(
            "| {keys} | {} | {} |\n",
            intent.name(),
            cell(detail(*intent))
        ));
    }
    out
}

/// The same table as plain text, in columns.
pub fn text(keymap: &Keymap) -> String {
    let rows: Vec<(String, &str, &str)> = Intent::ALL
        .iter()
        .map(|i| {
            let keys = keymap.keys_list(*i);
            let keys = if keys.is_empty() {
                "(none)".to_string()
            } else {
                keys.join(" ")
            };
            (keys, i.name(), detail(*i))
        })
        .collect();
    let kw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let nw = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (keys, name, does) in rows {
        out.push_str(&format!("{keys:<kw$}  {name:<nw$}  {does}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_listed_with_its_keys() {
        let md = markdown(&Keymap::defaults());
        assert_eq!(md.lines().count(), Intent::ALL.len() + 2);
        assert!(md.contains("| `j` `down` | down |"), "{md}");
        assert!(md.contains("| `esc` | close |"), "{md}");
    }

    #[test]
    fn a_remap_shows_in_the_table() {
        let k = Keymap::with_overrides(r#"{ "x": "quit", "q": null, "ctrl+c": null }"#)
            .expect("keymap");
        let md = markdown(&k);
        assert!(md.contains("| `x` | quit |"), "{md}");
        let t = text(&Keymap::with_overrides(r#"{ "v": null }"#).expect("keymap"));
        assert!(
            t.lines()
                .any(|l| l.starts_with("(none)") && l.contains("toggle-traffic")),
            "{t}"
        );
    }

    #[test]
    fn a_pipe_key_does_not_break_the_table() {
        let k = Keymap::with_overrides(r#"{ "|": "help" }"#).expect("keymap");
        assert!(markdown(&k).contains(r"`\|`"));
    }
}
