//! Header, status line, hint bar, help overlay, and the too-small notice.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::{MIN_HEIGHT, MIN_WIDTH, fit, middle_ellipsis, pad};
use crate::action::Intent;
use crate::keymap::Keymap;
use crate::state::{Focus, State};
use switchboard_types::api::LinkState;
use switchboard_types::words::count;

/// How the gateway connection is, for the header: `connected v4 · 3 ms`, `reconnecting in
/// 2s (attempt 3): <reason>`, `refused: <reason>`.
pub fn link_text(link: &LinkState) -> String {
    /// A reason is the server's or the OS's words: kept short so the counts stay in view.
    fn short(reason: &str) -> String {
        let one: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        if one.chars().count() > 60 {
            format!("{}…", one.chars().take(59).collect::<String>())
        } else {
            one
        }
    }
    match link {
        LinkState::Connecting { attempt } if *attempt <= 1 => "connecting".into(),
        LinkState::Connecting { attempt } => format!("connecting (attempt {attempt})"),
        LinkState::Connected {
            protocol,
            rtt_ms,
            resynced,
            ..
        } => {
            let mut t = format!("connected v{protocol}");
            if let Some(ms) = rtt_ms {
                t.push_str(&format!(" · {ms} ms"));
            }
            if *resynced {
                t.push_str(" · resynced");
            }
            t
        }
        LinkState::Reconnecting {
            attempt,
            retry_in_ms,
            message: reason,
        } => format!(
            "reconnecting in {}s (attempt {attempt}): {}",
            retry_in_ms.div_ceil(1000),
            short(reason)
        ),
        LinkState::Failed { message: reason } => format!("refused: {}", short(reason)),
    }
}

/// Where the console is attached, in at most `width` columns: a folder cut in the middle;
/// a gateway's address keeps its scheme and host whole (`ws:…27.0.0.1:18911` named no
/// gateway at all) and gives up its path first, then its scheme; `None` when even the host
/// does not fit.
pub(crate) fn short_place(place: &str, width: usize) -> Option<String> {
    use unicode_width::UnicodeWidthStr;
    if place.width() <= width {
        return Some(place.to_string());
    }
    let Some((scheme, rest)) = place.split_once("://") else {
        return Some(middle_ellipsis(place, width));
    };
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let root = format!("{scheme}://{host}");
    // The path cut in the middle, when the root and at least a few of its columns fit.
    if !path.is_empty() && root.width() + 4 <= width {
        return Some(format!(
            "{root}{}",
            middle_ellipsis(path, width - root.width())
        ));
    }
    if root.width() <= width {
        return Some(root);
    }
    (host.width() <= width).then(|| host.to_string())
}

/// The most columns the header gives the rounds pane's session name.
const SCOPE_NAME_W: usize = 16;

/// The exchanges the rounds pane lists, with their scope when it is one session's
/// (`12 exchanges (Sam)`): the other counts are global, and a bare "0 exchanges" beside them
/// read as none anywhere while other sessions had a dozen.
/// `name_w`: the columns the session's name may take.
fn exchanges_count(state: &State, name_w: usize) -> String {
    use crate::exchanges::Scope;
    let label = state.rounds.exchanges.count_label();
    match &state.rounds.exchanges.scope {
        Scope::Session(key) => {
            let row = state.sessions.rows.iter().find(|r| &r.key == key);
            let name = match row {
                Some(r) if r.named => fit(&r.name, name_w),
                Some(r) => middle_ellipsis(&r.name, name_w),
                None => middle_ellipsis(key, name_w),
            };
            format!("{label} ({name})")
        }
        // A pair's list is the drill-down's, whose header is its breadcrumb.
        Scope::All | Scope::Nothing | Scope::Pair(_) => label,
    }
}

pub fn header(frame: &mut Frame, area: Rect, state: &State) {
    if let Some(d) = &state.drill {
        // Drilled down, the header says where the owner is.
        return super::drill::header(frame, area, state, d);
    }
    // A remote console names the gateway and how the link is (read now, never waited on);
    // the link's state is never cut, only the path or address before it.
    let (place, link) = match &state.link {
        Some(link) => (link.target.clone(), Some(link_text(&link.state.borrow()))),
        None => (state.attached.clone(), None),
    };
    let counts_with = |name_w: usize| {
        let rounds = if state.link.as_ref().is_some_and(|l| l.unavailable.is_some()) {
            // Counting what the engine does not report would show a reassuring, wrong zero.
            "exchanges n/a".to_string()
        } else {
            format!(
                "{} · {}",
                count(state.rounds.spawns.len(), "sub-agent"),
                exchanges_count(state, name_w)
            )
        };
        // Deliveries given up on are the owner's to act on (`switchboard deliveries`).
        let failed = match state.deliveries.failed() {
            Some(n) if n > 0 => format!(
                " · {}",
                switchboard_types::words::count_as(n, "failed delivery", "failed deliveries")
            ),
            _ => String::new(),
        };
        format!(
            " · {} · {} running · {rounds}{failed}",
            count(state.sessions.total, "session"),
            state.sessions.running.len(),
        )
    };
    use unicode_width::UnicodeWidthStr;
    if state.sources.merged() {
        return sources_header(frame, area, state, counts_with(SCOPE_NAME_W));
    }
    // What gives way when the line is short, first to last: the path (cut in the middle),
    // the link's reason (cut at its end), the counts' long words. The counts are what the
    // header is for; a gateway's address, though, is kept whole before the scope's session
    // name is (that name is cut down to 6 columns first).
    let width = area.width as usize;
    let lead = " Switchboard";
    let counts = match &link {
        Some(l) => {
            let rest = lead.width() + 3 + l.width() + 3 + place.width();
            (6..=SCOPE_NAME_W)
                .rev()
                .map(counts_with)
                .find(|c| rest + c.width() <= width)
                .unwrap_or_else(|| counts_with(SCOPE_NAME_W))
        }
        None => counts_with(SCOPE_NAME_W),
    };
    // A gateway's host is kept before the counts' long words are: what the line needs
    // besides the counts is the lead, the link and the host (`host:port`).
    let kept = match &link {
        Some(l) => {
            // The least `short_place` shows of an address: its host alone.
            let host = place.split_once("://").map_or(0, |(_, rest)| {
                rest.split('/').next().unwrap_or_default().width()
            });
            3 + l.width() + 3 + host
        }
        None => 0,
    };
    let short = short_counts(&counts);
    // The long words go when the counts alone do not fit, or when going lets the host fit.
    let counts = if lead.width() + counts.width() > width
        || (lead.width() + kept + counts.width() > width
            && lead.width() + kept + short.width() <= width)
    {
        short
    } else {
        counts
    };
    let mut room = width.saturating_sub(lead.width() + counts.width());
    let link = match link {
        Some(l) if room > 4 => {
            let l = fit(&format!(" · {l}"), room);
            room -= l.width();
            l
        }
        _ => String::new(),
    };
    let place = if room >= 11 {
        short_place(&place, room - 3)
            .map(|p| format!(" · {p}"))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let text = format!("{lead}{place}{link}{counts}");
    frame.render_widget(
        Paragraph::new(Line::styled(
            pad(&text, area.width as usize),
            Style::default().add_modifier(Modifier::REVERSED),
        )),
        area,
    );
}

/// The header with several sources: every source's link comes before the long counts,
/// which give way first (shorter words, then the sub-agent and exchange counts).
/// The header's counts in their short words, for a narrow line.
fn short_counts(counts: &str) -> String {
    counts
        .replace(" exchanges", " exch")
        .replace(" exchange", " exch")
        .replace(" sub-agents", " sub")
        .replace(" sub-agent", " sub")
        .replace(" failed deliveries", " failed")
        .replace(" failed delivery", " failed")
}

fn sources_header(frame: &mut Frame, area: Rect, state: &State, full: String) {
    use unicode_width::UnicodeWidthStr;
    let lead = " Switchboard · ";
    let links = state.sources.header(state.theme.glyphs());
    let short = short_counts(&full);
    let least = format!(
        " · {} · {} running",
        count(state.sessions.total, "session"),
        state.sessions.running.len()
    );
    let width = area.width as usize;
    let counts = [full, short]
        .into_iter()
        .find(|c| lead.width() + links.width() + c.width() <= width)
        .unwrap_or(least);
    let room = width.saturating_sub(lead.width() + counts.width());
    let text = format!("{lead}{}{counts}", fit(&links, room));
    frame.render_widget(
        Paragraph::new(Line::styled(
            pad(&text, width),
            Style::default().add_modifier(Modifier::REVERSED),
        )),
        area,
    );
}

/// The status line: the selected session's send policy in its fixed slot (always shown),
/// then the answer to the owner's last action. Background notices have a line of their own.
pub fn status(frame: &mut Frame, area: Rect, state: &State) {
    use ratatui::text::Span;
    use unicode_width::UnicodeWidthStr;
    let width = area.width as usize;
    let g = state.theme.glyphs();
    let policy = state
        .sessions
        .selected_policy
        .as_deref()
        .unwrap_or("no session selected");
    // The slot is as wide as its words: up to the whole line when there is no answer to show,
    // up to half of it when there is (an answer never pushes it out, nor it the answer).
    let cap = if state.flash.is_some() {
        (width / 2).max(12)
    } else {
        width
    };
    let slot = fit(&format!(" send: {policy} "), cap);
    let slot_w = slot.width();
    let mut style = Style::default().add_modifier(Modifier::BOLD);
    if policy.starts_with("deny") {
        style = style.fg(Color::Yellow);
    }
    let mut spans = vec![Span::styled(slot, style)];
    let rest = width.saturating_sub(slot_w + 2);
    if let Some(f) = &state.flash {
        spans.push(Span::raw(format!("{} ", g.dot)));
        spans.push(if f.error {
            Span::styled(
                fit(&format!("{} {}", g.cross, f.text), rest),
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            )
        } else {
            Span::styled(fit(&f.text, rest), Style::default().fg(Color::Green))
        });
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The notice line: the newest background notice (what agents did), or how many the log
/// holds.
pub fn notice(frame: &mut Frame, area: Rect, state: &State, keymap: &Keymap) {
    let width = area.width as usize;
    let line = match &state.notice {
        Some(n) => Line::styled(
            fit(
                &format!(" {} {}", if n.error { "!" } else { "i" }, n.text),
                width,
            ),
            if n.error {
                Style::default().fg(Color::Red)
            } else {
                Style::default()
            },
        ),
        None if !state.notices.is_empty() => Line::styled(
            fit(
                &format!(
                    " {} ({} shows them)",
                    count(state.notices.len(), "notice"),
                    match keymap.keys_for(Intent::Notices) {
                        k if k.is_empty() => ":messages".to_string(),
                        k => k,
                    }
                ),
                width,
            ),
            Style::default().add_modifier(Modifier::DIM),
        ),
        None => Line::from(""),
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The hint bar: the most useful keys for the focused pane, from the keymap table.
pub fn hints(frame: &mut Frame, area: Rect, state: &State, keymap: &Keymap) {
    // Help and quit first: they must survive a narrow terminal's truncation.
    let wanted: &[Intent] = match state.focus {
        Focus::Composer | Focus::Filter | Focus::Search => &[],
        Focus::Rounds => &[
            Intent::Help,
            Intent::Quit,
            Intent::Open,
            Intent::Down,
            Intent::ToggleRoundsScope,
            Intent::FocusNext,
        ],
        Focus::Transcript => &[
            Intent::Help,
            Intent::Quit,
            Intent::ToggleTools,
            Intent::ToggleTimestamps,
            Intent::ToggleWrap,
            Intent::ToggleFollow,
            Intent::FocusNext,
        ],
        _ => &[
            Intent::Help,
            Intent::Quit,
            Intent::Filter,
            Intent::Compose,
            Intent::CycleKind,
            Intent::ToggleTools,
            Intent::ToggleRoundsScope,
            Intent::FocusNext,
        ],
    };
    // Zoomed, the way back comes right after help and quit.
    let zoomed: Vec<Intent>;
    let wanted = if state.zoom.is_some() && wanted.len() >= 2 {
        zoomed = [&wanted[..2], &[Intent::Zoom], &wanted[2..]].concat();
        &zoomed[..]
    } else {
        wanted
    };
    let text = if state.focus == Focus::Search {
        " type a regex (or plain text) · enter keep the search · esc clear it · n/N next/prev after enter"
            .to_string()
    } else if state.focus == Focus::Filter {
        " type to filter by key or name · enter keep the filter · esc clear it".to_string()
    } else if wanted.is_empty() {
        " enter send · alt+enter newline · tab complete · ctrl+c clear · esc leave · ↑↓ history"
            .to_string()
    } else {
        let parts: Vec<String> = wanted
            .iter()
            .filter_map(|i| {
                let keys = keymap.keys_for(*i);
                (!keys.is_empty()).then(|| format!("{} {}", keys, i.description()))
            })
            .collect();
        format!(" {}", parts.join(" · "))
    };
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit(&text, area.width as usize),
            Style::default().add_modifier(Modifier::DIM),
        )),
        area,
    );
}

/// What the sessions pane's marks mean (the help's legend), one item each.
pub fn legend(state: &State) -> Vec<String> {
    let g = state.theme.glyphs();
    vec![
        format!("{} running", g.running),
        format!("{} replying", g.streaming),
        "* own policy".to_string(),
        format!("{} active", g.activity),
        "12 unread".to_string(),
    ]
}

/// `items` packed into lines of at most `width` columns, two spaces apart.
fn pack(items: &[String], width: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthStr;
    let mut lines: Vec<String> = Vec::new();
    for item in items {
        match lines.last_mut() {
            Some(l) if l.width() + 2 + item.width() <= width => {
                l.push_str("  ");
                l.push_str(item);
            }
            _ => lines.push(fit(item, width)),
        }
    }
    lines
}

/// The key column's width in the help: `ctrl+c/q` fits; longer (remapped) keys are cut.
const HELP_KEY_W: usize = 9;
/// The narrowest a help column may get (key, space, a readable description).
const HELP_MIN_COL_W: usize = 26;

/// Where the help's entries go at this screen size: columns, rows per column, the rows that
/// show at once, and the packed legend. Fewest columns that show every entry, as many as stay
/// readable otherwise; what still does not fit scrolls.
struct HelpLayout {
    columns: usize,
    per_column: usize,
    visible: usize,
    col_w: usize,
    box_w: usize,
    legend: Vec<String>,
}

/// The keys the help lists: every one, but the source filter only with several sources
/// (with one it has nothing to do, and an 80×24 help has no row to spare).
fn help_intents(state: &State) -> impl Iterator<Item = &'static Intent> + '_ {
    Intent::ALL
        .iter()
        .filter(|i| **i != Intent::CycleSource || state.sources.merged())
}

fn help_layout(state: &State, width: u16, height: u16) -> HelpLayout {
    let n = help_intents(state).count();
    let inner_w = (width as usize).saturating_sub(4);
    let rows = (height as usize).saturating_sub(2);
    let col_w_of = |columns: usize| (inner_w / columns).min(40);
    let legend_of = |columns: usize| {
        pack(
            &legend(state),
            (col_w_of(columns) * columns).clamp(20, inner_w.max(20)),
        )
    };
    let mut columns = 1;
    while n.div_ceil(columns) + legend_of(columns).len() > rows
        && columns < 4
        && col_w_of(columns + 1) >= HELP_MIN_COL_W
    {
        columns += 1;
    }
    let col_w = col_w_of(columns);
    let box_w = (col_w * columns).max(40).min(inner_w);
    let legend = pack(&legend(state), box_w);
    let per_column = n.div_ceil(columns);
    // One row is kept for the "more" line when the entries scroll.
    let room = rows.saturating_sub(legend.len());
    let visible = if per_column <= room {
        per_column
    } else {
        room.saturating_sub(1).max(1)
    };
    HelpLayout {
        columns,
        per_column,
        visible,
        col_w,
        box_w,
        legend,
    }
}

/// How far the help can scroll at the state's size (0 when everything shows).
pub fn help_max_scroll(state: &State) -> usize {
    let l = help_layout(state, state.width, state.height);
    l.per_column - l.visible
}

pub fn help(frame: &mut Frame, area: Rect, state: &State, keymap: &Keymap) {
    let entries: Vec<(String, &str)> = help_intents(state)
        .map(|i| (keymap.keys_for(*i), i.help_text()))
        .collect();
    let composer = format!(
        "Composer: {}",
        crate::complete::names(crate::complete::Sigil::Slash)
    );
    let footer = [
        composer.as_str(),
        "Command line: :traffic :exchanges :messages :send off :quit … (Tab lists all)",
    ];
    let rows = area.height.saturating_sub(2) as usize;
    let l = help_layout(state, area.width, area.height);
    let scroll = state.help_scroll.min(l.per_column - l.visible);
    let cell = |(keys, desc): &(String, &str)| {
        pad(
            &fit(
                &format!("{} {desc}", pad(&fit(keys, HELP_KEY_W), HELP_KEY_W)),
                l.col_w.saturating_sub(1),
            ),
            l.col_w,
        )
    };
    let mut lines: Vec<Line> = (scroll..scroll + l.visible)
        .map(|r| {
            let mut row = String::new();
            for c in 0..l.columns {
                if let Some(e) = entries.get(c * l.per_column + r) {
                    row.push_str(&cell(e));
                }
            }
            Line::from(row.trim_end().to_string())
        })
        .collect();
    if l.visible < l.per_column {
        let below = l.per_column - l.visible - scroll;
        let more = match (scroll, below) {
            (0, _) => "↓ more: j/k scroll".to_string(),
            (_, 0) => "↑ more above".to_string(),
            _ => "↑↓ more: j/k scroll".to_string(),
        };
        lines.push(Line::styled(
            fit(&more, l.box_w),
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    // The blank line and the composer's commands only where there is room for them.
    let spare = rows.saturating_sub(lines.len() + l.legend.len());
    if spare > footer.len() {
        lines.push(Line::from(""));
    }
    lines.extend(l.legend.into_iter().map(Line::from));
    if spare >= footer.len() {
        lines.extend(footer.iter().map(|f| Line::from(fit(f, l.box_w))));
    }
    let w = (l.box_w + 2) as u16;
    let h = (lines.len() as u16 + 2).min(area.height);
    let rect = Rect::new(
        area.width.saturating_sub(w) / 2,
        area.height.saturating_sub(h) / 2,
        w,
        h,
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" Keys · ? or esc closes "),
        ),
        rect,
    );
}

/// The `:` command line over the hint bar (`:traf▏`), and what Tab found on the notice line
/// above it.
pub fn command_line(
    frame: &mut Frame,
    r: &super::Regions,
    line: &crate::command_line::CommandLine,
) {
    use ratatui::text::Span;
    let width = r.hints.width as usize;
    // The end of a long line is where the typing is: it stays in view.
    let typed = super::keep_end(&format!(":{}", line.text), width.saturating_sub(1));
    frame.render_widget(Clear, r.hints);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(typed, Style::default().add_modifier(Modifier::BOLD)),
            Span::styled("▏", Style::default().fg(Color::Cyan)),
        ])),
        r.hints,
    );
    let below = if line.candidates.is_empty() {
        " enter run · tab complete · esc close".to_string()
    } else {
        format!(" {}", line.candidates.join("  "))
    };
    frame.render_widget(Clear, r.notice);
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit(&below, r.notice.width as usize),
            Style::default().add_modifier(Modifier::DIM),
        )),
        r.notice,
    );
}

pub fn too_small(frame: &mut Frame, area: Rect) {
    let text = format!(
        "Terminal too small: {}×{}. Switchboard needs at least {MIN_WIDTH}×{MIN_HEIGHT}.",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}

#[cfg(test)]
mod tests {
    use super::short_place;

    /// The header's place gives way path first, then scheme; the host is never cut.
    #[test]
    fn a_gateway_address_keeps_its_host_whole() {
        let url = "ws://127.0.0.1:18911";
        assert_eq!(short_place(url, 40).as_deref(), Some(url));
        assert_eq!(short_place(url, 19).as_deref(), Some("127.0.0.1:18911"));
        assert_eq!(short_place(url, 14), None);
        let long = "wss://gateway.example.org/tenants/acme/console";
        let cut = short_place(long, 34).unwrap_or_default();
        assert!(cut.starts_with("wss://gateway.example.org/"), "{cut}");
        assert!(cut.ends_with("console") || cut.contains('…'), "{cut}");
        assert!(
            unicode_width::UnicodeWidthStr::width(cut.as_str()) <= 34,
            "{cut}"
        );
        assert_eq!(
            short_place(long, 26).as_deref(),
            Some("wss://gateway.example.org")
        );
        assert_eq!(
            short_place(long, 20).as_deref(),
            Some("gateway.example.org")
        );
        // A folder is cut in the middle, as before.
        let dir = "/home/owner/agents/state/switchboard";
        let cut = short_place(dir, 20).unwrap_or_default();
        assert!(cut.ends_with("switchboard") && cut.contains('…'), "{cut}");
    }
}
