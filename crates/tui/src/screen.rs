//! The terminal the console draws on: every frame is drawn off-screen first and written
//! only when the picture (or the cursor) changed, in synchronized output, so an idle
//! console writes nothing.

use std::io::{Stdout, Write, stdout};

use ratatui::Terminal;
use ratatui::backend::{CrosstermBackend, TestBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Position;

use super::keymap::Keymap;
use super::sgr::ColorWriter;
use super::state::State;
use super::theme::Theme;
use super::{strip_colors, view};

/// The terminal, the off-screen frame and the last picture written.
pub(super) struct Screen {
    term: Terminal<CrosstermBackend<ColorWriter<Stdout>>>,
    shadow: Terminal<TestBackend>,
    last: Option<(Buffer, Option<Position>)>,
    no_color: bool,
}

impl Screen {
    /// Takes the terminal (`w`×`h`) and clears it. Before the input thread starts: setting
    /// up may query the terminal (cursor position), and the thread would swallow the answer.
    pub(super) fn new(w: u16, h: u16, theme: &Theme, no_color: bool) -> anyhow::Result<Screen> {
        // Colours go out in the form the terminal takes (crossterm writes 256-colour codes).
        let mut term = Terminal::new(CrosstermBackend::new(ColorWriter::new(
            stdout(),
            theme.colors,
        )))?;
        term.clear()?;
        Ok(Screen {
            term,
            shadow: Terminal::new(TestBackend::new(w, h))?,
            last: None,
            no_color,
        })
    }

    /// Draws `st` if the picture changed. `Ok(false)`: the terminal cannot be written any
    /// more (EIO after an SSH drop), so the console should stop, quietly.
    pub(super) fn draw(&mut self, st: &State, keymap: &Keymap) -> anyhow::Result<bool> {
        let no_color = self.no_color;
        let area = self.shadow.backend().buffer().area;
        if area.width != st.width || area.height != st.height {
            self.shadow = Terminal::new(TestBackend::new(st.width, st.height))?;
            self.last = None;
            self.term.autoresize()?;
        }
        self.shadow.draw(|f| {
            view::draw(f, st, keymap);
            if no_color {
                strip_colors(f.buffer_mut());
            }
        })?;
        let picture = self.shadow.backend().buffer().clone();
        // The composer's cursor is the terminal's: where the frame put it, if it did.
        let cursor = self
            .shadow
            .backend()
            .cursor_visible()
            .then(|| self.shadow.backend().cursor_position());
        if self.last.as_ref() == Some(&(picture.clone(), cursor)) {
            return Ok(true);
        }
        let term = &mut self.term;
        let drawn: std::io::Result<()> = (|| {
            crossterm::execute!(stdout(), crossterm::terminal::BeginSynchronizedUpdate)?;
            // The picture is already rendered: hand it over instead of drawing again
            // (unless the terminal's size moved on since: then draw it fresh).
            term.draw(|f| {
                if f.area() == picture.area {
                    f.buffer_mut().clone_from(&picture);
                    if let Some(at) = cursor {
                        f.set_cursor_position(at);
                    }
                } else {
                    view::draw(f, st, keymap);
                    if no_color {
                        strip_colors(f.buffer_mut());
                    }
                }
            })?;
            crossterm::execute!(stdout(), crossterm::terminal::EndSynchronizedUpdate)?;
            stdout().flush()
        })();
        if let Err(e) = drawn {
            tracing::info!(error = %e, "the terminal cannot be written; quitting");
            return Ok(false);
        }
        self.last = Some((picture, cursor));
        Ok(true)
    }

    /// Whatever the terminal shows now (another program's output, a cell it drew wider than
    /// we meant) is wiped, and the next frame draws every cell. Cleared by hand, not with
    /// `term.clear()`: that asks the terminal for the cursor position, and the input thread
    /// would swallow the answer.
    pub(super) fn wipe(&mut self) -> std::io::Result<()> {
        crossterm::execute!(
            stdout(),
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
        )?;
        self.term.swap_buffers();
        self.last = None;
        Ok(())
    }

    /// Gives the terminal back. ratatui's Terminal shows the cursor when dropped and reports
    /// a failure with `eprintln!`, which panics on a dead terminal (an SSH drop, SIGHUP).
    /// Show it ourselves first; if that fails, or the terminal is known `gone`, it is gone
    /// and the Terminal is not dropped at all.
    pub(super) fn close(self, gone: bool) {
        let mut term = self.term;
        if gone || term.show_cursor().is_err() {
            std::mem::forget(term);
        } else {
            drop(term);
        }
    }
}
