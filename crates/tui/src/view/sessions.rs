//! The sessions pane: a window onto the newest sessions under column headers, one row each
//! with kind, name (the display name, or the key cut in the middle), channel, activity,
//! effective policy (`*` = this session's override), running, unread, and the last message
//! when the pane is wide.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{border, middle_ellipsis, pad};
use crate::sessions_order::SortMode;
use crate::state::{Focus, SessionRow, State};
use switchboard_types::api::time::{AgoStyle, ago};

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title(state))
        .border_style(border(state, Focus::Sessions));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 {
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    // The filter box takes the first line while it is in use.
    let filter_active = state.focus == Focus::Filter || !state.sessions.filter.is_empty();
    if filter_active {
        let cursor = if state.focus == Focus::Filter {
            state.theme.glyphs().caret
        } else {
            ""
        };
        lines.push(Line::from(vec![
            Span::styled("/", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "{}{cursor}",
                switchboard_types::text_safety::safe_line(&state.sessions.filter)
            )),
        ]));
    }
    let width = inner.width as usize;
    // Several sources: a column naming each row's, first.
    let source_w = if state.sources.merged() {
        state.sources.column_width() + 1
    } else {
        0
    };
    let layout = RowLayout::new(width.saturating_sub(source_w));
    if !state.sessions.rows.is_empty() && (inner.height as usize) > lines.len() + 1 {
        let head = if source_w > 0 {
            format!("{}{}", pad("src", source_w), layout.head())
        } else {
            layout.head()
        };
        lines.push(Line::styled(
            pad(&head, width),
            Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        ));
    }
    let rows_room = inner.height as usize - lines.len();
    if state.sessions.rows.is_empty() {
        let msg = if state.sessions.filter.is_empty()
            && state.sessions.kind_filter.is_none()
            && state.sessions.source_filter.is_none()
            && state.sessions.active_within.is_none()
        {
            "No sessions yet. They appear as messages arrive."
        } else {
            "No session matches the filter (Esc clears it)."
        };
        lines.push(Line::from(msg));
    }
    let top = top_row(state, rows_room);
    let first = top.saturating_sub(state.sessions.offset);
    for (j, row) in state
        .sessions
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(rows_room)
    {
        let i = state.sessions.offset + j;
        let selected = i == state.sessions.selected;
        let line = row_line(state, row, selected, &layout);
        lines.push(if source_w > 0 {
            with_source(state, row, line, source_w)
        } else {
            line
        });
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The pane's title: counts, the filters in force, and the order when it is not activity.
fn title(state: &State) -> String {
    let mut title = format!(
        " Sessions {}/{} ",
        state.sessions.session_count(),
        state.sessions.total
    );
    if let Some(source) = &state.sessions.source_filter {
        title.push_str(&format!("[{source}] "));
    }
    if let Some(k) = state.sessions.kind_filter {
        title.push_str(&format!("[{}] ", k.as_str()));
    }
    if let Some(m) = state.sessions.active_within {
        title.push_str(&if m >= 60 {
            format!("[<{}h] ", m / 60)
        } else {
            format!("[<{m}m] ")
        });
    }
    if state.sessions.show_archived {
        title.push_str("[+archived] ");
    }
    let mode = state.sessions.order.mode;
    if mode != SortMode::Activity {
        // Sorted by the console over what it loaded: say so when that is not everything.
        if state.sessions.order.sorts_loaded()
            && (state.sessions.rows.len() as u64) < state.sessions.session_count() as u64
        {
            title.push_str(&format!(
                "[by {}, {} loaded] ",
                mode.label(),
                state.sessions.rows.len()
            ));
        } else {
            title.push_str(&format!("[by {}] ", mode.label()));
        }
    }
    title
}

/// A row with its source's name before it, in the source's colour; a source that is not
/// linked (dialling, lost, refused) has its rows greyed, kept rather than emptied.
fn with_source(
    state: &State,
    row: &SessionRow,
    line: Line<'static>,
    source_w: usize,
) -> Line<'static> {
    use crate::sources::Reach;
    let source = row.source.as_deref().unwrap_or_default();
    let mut style = line.style;
    let mut name_style = style;
    // NO_COLOR is the screen's to apply, to every colour alike.
    if let Some(c) = state.sources.colour(source) {
        name_style = name_style.fg(c);
    }
    let linked = state
        .sources
        .of(&row.key)
        .is_none_or(|s| s.reach() == Reach::Linked);
    if !linked {
        style = style.add_modifier(Modifier::DIM);
        name_style = name_style.add_modifier(Modifier::DIM);
    }
    let mut spans = vec![Span::styled(
        pad(&super::fit(source, source_w - 1), source_w),
        name_style,
    )];
    spans.extend(line.spans.into_iter().map(|s| s.style(style)));
    Line::from(spans)
}

/// Which columns a pane `width` wide shows, and how wide the name and preview are.
#[derive(Clone, Copy)]
struct RowLayout {
    width: usize,
    kind: bool,
    channel: bool,
    unread: bool,
    preview: bool,
    name_w: usize,
    preview_w: usize,
}

impl RowLayout {
    fn new(width: usize) -> RowLayout {
        // Columns give way as the pane narrows: channel first, then unread counts; the name
        // takes whatever is left, and the last message what is left beyond a comfortable name.
        let Columns {
            kind,
            channel,
            unread,
            fixed,
        } = columns(width);
        let preview = shows_preview(width);
        let name_w = if preview {
            24.max((width - fixed) * 2 / 5)
        } else {
            width.saturating_sub(fixed).max(6)
        };
        let preview_w = width.saturating_sub(fixed + name_w + 1);
        RowLayout {
            width,
            kind,
            channel,
            unread,
            preview,
            name_w,
            preview_w,
        }
    }

    /// The column headers.
    fn head(&self) -> String {
        let mut head = "  ".to_string();
        if self.kind {
            head.push_str(&format!("{} ", pad("kind", 5)));
        }
        head.push_str(&format!("{} ", pad("name", self.name_w)));
        if self.channel {
            head.push_str(&pad("channel", 8));
            head.push(' ');
        }
        head.push_str(&format!("{:>4} {}", "age", pad("policy", 6)));
        if self.unread {
            head.push_str(" new");
        }
        if self.preview {
            head.push_str("  last message");
        }
        head
    }
}

/// One session's row: marks (running or streaming, new activity), then the columns.
fn row_line(state: &State, row: &SessionRow, selected: bool, layout: &RowLayout) -> Line<'static> {
    let RowLayout {
        width,
        kind: show_kind,
        channel: show_channel,
        unread: show_unread,
        preview: show_preview,
        name_w,
        preview_w,
    } = *layout;
    let g = state.theme.glyphs();
    let running = if state.transcript.streams.streaming_in(&row.key) {
        g.streaming
    } else if state.sessions.running.contains(&row.key) {
        g.running
    } else {
        " "
    };
    let mark = if state.sessions.order.marked.contains(&row.key) {
        g.activity
    } else {
        " "
    };
    let unread = state
        .sessions
        .unread
        .get(&row.key)
        .filter(|n| **n > 0)
        .map(|n| {
            if *n > 999 {
                "999+".to_string()
            } else {
                format!("{n:>3}")
            }
        })
        .unwrap_or_else(|| "   ".into());
    let policy = format!(
        "{}{}",
        row.policy,
        if row.policy_override { "*" } else { " " }
    );
    let prefix = if row.archived { "[a] " } else { "" };
    let room = name_w.saturating_sub(prefix.len());
    // A display name is kept from its start; a bare key keeps its distinguishing end.
    let name = if row.named {
        super::fit(&row.name, room)
    } else {
        middle_ellipsis(&row.name, room)
    };
    let mut text = format!("{running}{mark}");
    if show_kind {
        text.push_str(&format!("{} ", pad(row.kind.as_str(), 5)));
    }
    text.push_str(&format!("{} ", pad(&format!("{prefix}{name}"), name_w)));
    if show_channel {
        text.push_str(&pad(&row.channel, 8));
        text.push(' ');
    }
    text.push_str(&format!(
        "{:>4} {}",
        ago(state.now_ms, row.updated_at, AgoStyle::Terse),
        pad(&policy, 6)
    ));
    if show_unread {
        text.push(' ');
        text.push_str(&unread);
    }
    if show_preview && let Some(p) = &row.preview {
        text.push_str("  ");
        text.push_str(&super::fit(p, preview_w.saturating_sub(1)));
    }
    let mut style = Style::default();
    if row.policy == switchboard_types::api::PolicySetting::Deny {
        style = style.add_modifier(Modifier::DIM);
    }
    if selected {
        style = style.add_modifier(Modifier::REVERSED);
    }
    Line::styled(pad(&text, width), style)
}

/// Which of channel and unread fit in a pane `width` wide, and the width of the columns
/// other than name and preview.
fn columns(width: usize) -> Columns {
    // The name comes first: the channel only once the name keeps about 20 columns.
    let kind = width >= 40;
    let channel = width >= 56;
    let unread = width >= 30;
    let fixed = 2
        + if kind { 6 } else { 0 }
        + 5
        + 7
        + if channel { 9 } else { 0 }
        + if unread { 4 } else { 0 };
    Columns {
        kind,
        channel,
        unread,
        fixed,
    }
}

/// The optional columns a pane's width leaves room for (the name takes what is left).
struct Columns {
    kind: bool,
    channel: bool,
    unread: bool,
    /// Columns taken by everything but the name and the last message.
    fixed: usize,
}

/// A pane `width` wide (inside its border) shows the last-message column.
pub fn shows_preview(width: usize) -> bool {
    width >= columns(width).fixed + 24 + 16
}

/// The first session (position in the whole order) shown in a pane with `rows_room` rows:
/// the selection stays in view, with the newest at the top while it fits.
fn top_row(state: &State, rows_room: usize) -> usize {
    if rows_room == 0 || state.sessions.selected < rows_room {
        0
    } else {
        state.sessions.selected + 1 - rows_room
    }
}

/// The first session shown in the sessions pane at `area` (for mouse clicks).
pub fn top_for(state: &State, area: Rect) -> usize {
    let inner_h = area.height.saturating_sub(2) as usize;
    top_row(state, inner_h.saturating_sub(rows_above(state, inner_h)))
}

/// Lines above the first row: the filter box while in use, then the column headers.
pub fn rows_above(state: &State, inner_h: usize) -> usize {
    let filter_line =
        usize::from(state.focus == Focus::Filter || !state.sessions.filter.is_empty());
    let header = usize::from(!state.sessions.rows.is_empty() && inner_h > filter_line + 1);
    filter_line + header
}
