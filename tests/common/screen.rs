//! The console drawn on a test terminal and read back as text, for the tests that look at
//! what a user would see (it was copied in each of them).

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::State;
use switchboard_tui::view;
use unicode_width::UnicodeWidthStr;

/// Draw `state` on a `w`×`h` test terminal with the default keymap.
pub fn render(state: &State, w: u16, h: u16) -> Buffer {
    render_with(state, &Keymap::defaults(), w, h)
}

/// Draw `state` on a `w`×`h` test terminal with `keymap`.
pub fn render_with(state: &State, keymap: &Keymap, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal
        .draw(|f| view::draw(f, state, keymap))
        .expect("draw");
    terminal.backend().buffer().clone()
}

/// The buffer as lines of text: each row's cell symbols joined (the cells a wide character
/// covers are skipped), trailing blanks trimmed, each line ending in `\n`.
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        let mut skip = 0usize;
        for x in area.left()..area.right() {
            let symbol = buf[(x, y)].symbol();
            if skip > 0 {
                skip -= 1;
                continue;
            }
            line.push_str(symbol);
            skip = symbol.width().saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Draw on a `w`×`h` terminal and return the screen's [`text`].
pub fn screen(state: &State, w: u16, h: u16) -> String {
    text(&render(state, w, h))
}

/// Draw on a terminal of the state's own size with `keymap` and return every cell's symbol,
/// rows joined by `\n`, nothing trimmed or skipped (for tests that look for exact cells).
pub fn cells(state: &State, keymap: &Keymap) -> String {
    let buf = render_with(state, keymap, state.width, state.height);
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
