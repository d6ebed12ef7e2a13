//! The composer's draft: a multi-line editor (ratatui-textarea's `TextArea` does the editing:
//! cursor and word motions, kill/yank, undo), with the history of sent messages, completion
//! candidates and the inline error. The draft is read as text (`text()`: what is sent, and
//! what tests check); the view draws the lines itself through `safe_line`, so a pasted control
//! character never reaches the terminal, and the editor's own renderer is not used.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::{CursorMove, Input, Key, TextArea};

/// The most a draft may hold (bytes of UTF-8). A message is stored whole in the transcript
/// and sent to a model: a megabyte is far beyond a message and far below what hurts.
pub const MAX_DRAFT_BYTES: usize = 1 << 20;

/// The most text lines the composer box shows before it scrolls (it grows up to this).
pub const MAX_ROWS: u16 = 6;

/// The composer's text, cursor and history. Not `PartialEq`: the editor is not.
#[derive(Debug, Clone, Default)]
pub struct Composer {
    editor: TextArea<'static>,
    pub history: Vec<String>,
    /// Position while recalling history (None: editing a new message).
    pub recall: Option<usize>,
    /// An inline error about the last attempt (bad slash command, a paste too big …).
    pub error: Option<String>,
    /// What Tab found when it could not decide alone, shown under the draft.
    pub candidates: Vec<String>,
    /// A session `/new` named that does not exist yet: the next message starts it.
    pub target: Option<String>,
}

/// What a key did to the draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edited {
    /// The text changed.
    Text,
    /// Only the cursor moved (or nothing happened).
    Cursor,
    /// Refused: the draft would pass `MAX_DRAFT_BYTES` (the error says so).
    TooBig,
}

impl Composer {
    /// The draft, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.editor.lines().join("\n")
    }

    pub fn lines(&self) -> &[String] {
        self.editor.lines()
    }

    pub fn is_empty(&self) -> bool {
        self.editor.is_empty()
    }

    /// The cursor as (line, character) in the draft.
    pub fn cursor(&self) -> (usize, usize) {
        let c = self.editor.cursor();
        (c.0, c.1)
    }

    /// Bytes the draft holds (as sent: lines plus the newlines between them).
    pub fn bytes(&self) -> usize {
        let lines = self.editor.lines();
        lines.iter().map(String::len).sum::<usize>() + lines.len().saturating_sub(1)
    }

    /// Replace the draft (history recall, a picked command), cursor at its end. The yank
    /// buffer survives, so a kill before a recall can still be yanked.
    pub fn set_text(&mut self, text: &str) {
        let yank = self.editor.yank_text();
        let lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        self.editor = TextArea::new(lines);
        self.editor.set_yank_text(yank);
        self.editor.move_cursor(CursorMove::Bottom);
        self.editor.move_cursor(CursorMove::End);
        self.candidates.clear();
    }

    /// Empty the draft after it was sent.
    pub fn clear_sent(&mut self) {
        self.set_text("");
        self.error = None;
    }

    /// Ctrl+C: empty the draft as a kill (Ctrl+Y or undo brings it back).
    pub fn kill_all(&mut self) {
        self.editor.clear();
        self.candidates.clear();
        self.error = None;
    }

    /// Insert `text` at the cursor (a paste, a completion), unless the draft would pass the
    /// cap: then nothing is inserted and the error says why (the draft is kept).
    pub fn insert(&mut self, text: &str) -> Edited {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let total = self.bytes() + text.len();
        if total > MAX_DRAFT_BYTES {
            self.error = Some(format!(
                "Not inserted: the draft would be {} KiB; a message holds at most {} KiB (the draft is kept).",
                total.div_ceil(1024),
                MAX_DRAFT_BYTES / 1024
            ));
            return Edited::TooBig;
        }
        self.editor.insert_str(&text);
        self.error = None;
        self.candidates.clear();
        Edited::Text
    }

    /// Delete the `chars` characters before the cursor (on its line), for completion.
    pub fn delete_before(&mut self, chars: usize) {
        for _ in 0..chars {
            self.editor.delete_char();
        }
    }

    /// Move the cursor (recalled history, tests).
    pub fn move_cursor(&mut self, m: CursorMove) {
        self.editor.move_cursor(m);
    }

    /// The text from the start of the draft to the cursor.
    pub fn before_cursor(&self) -> String {
        let (row, col) = self.cursor();
        let lines = self.editor.lines();
        let mut out = lines[..row.min(lines.len())].join("\n");
        if row > 0 {
            out.push('\n');
        }
        if let Some(line) = lines.get(row) {
            out.extend(line.chars().take(col));
        }
        out
    }

    /// An editing key (everything the console does not take for itself: Enter, Tab, Esc,
    /// Ctrl+C and history are decided by `update`). Emacs/readline keys where they differ
    /// from the widget's defaults: Ctrl+U kills to the line's start (the widget would
    /// undo), Ctrl+J is a newline; undo is Ctrl+_ (also sent as Ctrl+/ or Ctrl+7).
    pub fn edit(&mut self, k: KeyEvent) -> Edited {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let alt = k.modifiers.contains(KeyModifiers::ALT);
        let before = self.bytes();
        let changed = match k.code {
            KeyCode::Enter if alt => self.newline(),
            KeyCode::Char('j') if ctrl => self.newline(),
            // Never a character in a line: the editor keeps lines apart.
            KeyCode::Char('\n' | '\r') => self.newline(),
            KeyCode::Char('u') if ctrl => self.editor.delete_line_by_head(),
            KeyCode::Char('_' | '/' | '7') if ctrl => self.editor.undo(),
            KeyCode::Char(c) if !ctrl && !alt => {
                if before + c.len_utf8() > MAX_DRAFT_BYTES {
                    return self.too_big();
                }
                self.editor.insert_char(c);
                true
            }
            // Ctrl+Y yanks what a kill took: refuse it like a paste when it would not fit.
            KeyCode::Char('y') if ctrl => {
                if before + self.editor.yank_text().len() > MAX_DRAFT_BYTES {
                    return self.too_big();
                }
                self.editor.paste()
            }
            // The widget would scroll its own viewport, which the console does not draw.
            KeyCode::PageUp | KeyCode::PageDown | KeyCode::Tab | KeyCode::BackTab => false,
            // Ctrl+X/Ctrl+C act on the widget's selection, which the console never starts.
            KeyCode::Char('x' | 'c' | 'v') if ctrl && !alt => false,
            code => match key_of(code) {
                Some(key) => self.editor.input(Input {
                    key,
                    ctrl,
                    alt,
                    shift: k.modifiers.contains(KeyModifiers::SHIFT),
                }),
                None => false,
            },
        };
        if changed {
            self.error = None;
            self.candidates.clear();
            Edited::Text
        } else {
            Edited::Cursor
        }
    }

    fn newline(&mut self) -> bool {
        if self.bytes() + 1 > MAX_DRAFT_BYTES {
            return false;
        }
        self.editor.insert_newline();
        true
    }

    fn too_big(&mut self) -> Edited {
        self.error = Some(format!(
            "The draft is full: a message holds at most {} KiB.",
            MAX_DRAFT_BYTES / 1024
        ));
        Edited::TooBig
    }
}

/// The widget's key for a terminal key (built here rather than through the widget's own
/// crossterm conversion, which would tie the console to the widget's crossterm version).
fn key_of(code: KeyCode) -> Option<Key> {
    Some(match code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Delete => Key::Delete,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(c, m)
    }

    #[test]
    fn kill_and_yank_move_text() {
        let mut c = Composer::default();
        c.insert("hello brave world");
        c.edit(key(KeyCode::Char('w'), KeyModifiers::CONTROL));
        assert_eq!(c.text(), "hello brave ");
        c.edit(key(KeyCode::Home, KeyModifiers::NONE));
        c.edit(key(KeyCode::Char('y'), KeyModifiers::CONTROL));
        assert_eq!(c.text(), "worldhello brave ");
        c.edit(key(KeyCode::Char('_'), KeyModifiers::CONTROL));
        assert_eq!(c.text(), "hello brave ");
    }

    #[test]
    fn before_cursor_spans_lines() {
        let mut c = Composer::default();
        c.insert("ab\ncd");
        c.edit(key(KeyCode::Left, KeyModifiers::NONE));
        assert_eq!(c.before_cursor(), "ab\nc");
        assert_eq!(c.cursor(), (1, 1));
    }

    #[test]
    fn the_cap_refuses_and_keeps_the_draft() {
        let mut c = Composer::default();
        c.insert("keep me");
        let big = "x".repeat(MAX_DRAFT_BYTES);
        assert_eq!(c.insert(&big), Edited::TooBig);
        assert_eq!(c.text(), "keep me");
        assert!(c.error.as_deref().unwrap_or("").contains("1024 KiB"));
    }
}
