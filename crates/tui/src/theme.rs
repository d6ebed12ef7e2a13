//! What the terminal can show, from `TERM` and `COLORTERM`: Unicode or ASCII line drawing,
//! and how many colours. The console's own glyphs (`●`, `▍`, `…`, `→`) live here, with their
//! ASCII stand-ins, so every pane draws the same marks and a vt100 sees none it cannot show.

use ratatui::buffer::Buffer;

/// How many colours the terminal takes (the SGR forms it understands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ColorDepth {
    /// `ESC[30-37m` only (vt100 and the like).
    Ansi8,
    /// Also the bright `ESC[90-97m` (the Linux console).
    Ansi16,
    /// `ESC[38;5;Nm` (xterm-256color and most terminal emulators).
    Indexed256,
    /// `ESC[38;2;r;g;bm`, only when `COLORTERM` says so.
    TrueColor,
}

/// The terminal the console draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Draw borders and marks in ASCII.
    pub ascii: bool,
    pub colors: ColorDepth,
}

impl Default for Theme {
    fn default() -> Theme {
        Theme {
            ascii: false,
            colors: ColorDepth::Indexed256,
        }
    }
}

/// Why the console will not start on this terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `TERM=dumb`: no cursor addressing at all.
    Dumb,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Dumb => f.write_str(
                "the console needs a terminal with cursor addressing; TERM=dumb has none \
                 (set TERM, e.g. TERM=xterm-256color, or use `switchboard sessions list`)",
            ),
        }
    }
}

impl Theme {
    /// The theme for `TERM` and `COLORTERM` as given (None: unset).
    pub fn detect(term: Option<&str>, colorterm: Option<&str>) -> Result<Theme, Refusal> {
        let term = term.unwrap_or("").to_ascii_lowercase();
        if term == "dumb" {
            return Err(Refusal::Dumb);
        }
        // The families whose terminfo has Unicode-capable emulators behind them; anything
        // else (linux, vt100, vt220, ansi, cons25 …) gets ASCII, which every one shows.
        let unicode = ["xterm", "screen", "tmux", "rxvt", "alacritty", "kitty", "wezterm", "foot", "st", "konsole", "gnome", "iterm", "vte", "putty", "contour", "ghostty"]
            .iter()
            .any(|f| term == *f || term.starts_with(&format!("{f}-")) || term.starts_with(&format!("{f}.")))
            // `screen.xterm-256color` and the like: a 256-colour emulator behind a multiplexer.
            || term.contains("256color")
            // Unset TERM: a modern emulator is the likely case (Windows consoles set none).
            || term.is_empty();
        let truecolor = matches!(
            colorterm.map(str::to_ascii_lowercase).as_deref(),
            Some("truecolor" | "24bit")
        );
        let colors = if truecolor {
            ColorDepth::TrueColor
        } else if term == "linux" || term.starts_with("linux-") {
            ColorDepth::Ansi16
        } else if term.contains("256color") || (unicode && !term.starts_with("vt")) {
            ColorDepth::Indexed256
        } else if term.contains("16color") {
            ColorDepth::Ansi16
        } else {
            ColorDepth::Ansi8
        };
        Ok(Theme {
            ascii: !unicode,
            colors,
        })
    }

    /// The theme for this process's environment.
    pub fn from_env() -> Result<Theme, Refusal> {
        let term = std::env::var("TERM").ok();
        let colorterm = std::env::var("COLORTERM").ok();
        Theme::detect(term.as_deref(), colorterm.as_deref())
    }

    pub fn glyphs(&self) -> &'static Glyphs {
        if self.ascii { &ASCII } else { &UNICODE }
    }

    /// Make a drawn frame showable: in ASCII mode every box-drawing cell and every glyph of
    /// [`Glyphs`] becomes its ASCII stand-in (borders are drawn by ratatui's widgets, which
    /// know nothing of the terminal; one pass here covers every pane and overlay).
    pub fn adapt(&self, buf: &mut Buffer) {
        if !self.ascii {
            return;
        }
        let area = buf.area;
        for y in area.top()..area.bottom() {
            for x in area.left()..area.right() {
                if let Some(cell) = buf.cell_mut((x, y)) {
                    let mut chars = cell.symbol().chars();
                    if let (Some(c), None) = (chars.next(), chars.next())
                        && let Some(a) = ascii_for(c)
                    {
                        cell.set_char(a);
                    }
                }
            }
        }
    }
}

/// The console's marks.
#[derive(Debug)]
pub struct Glyphs {
    /// A run of this session's agent is executing.
    pub running: &'static str,
    /// Its reply is streaming in.
    pub streaming: &'static str,
    /// New activity since the list was last sorted.
    pub activity: &'static str,
    /// Text cut short.
    pub ellipsis: &'static str,
    /// From → to.
    pub arrow: &'static str,
    /// Separates the parts of a status line.
    pub dot: &'static str,
    /// An error.
    pub cross: &'static str,
}

pub static UNICODE: Glyphs = Glyphs {
    running: "●",
    streaming: "▍",
    activity: "+",
    ellipsis: "…",
    arrow: "→",
    dot: "·",
    cross: "✗",
};

pub static ASCII: Glyphs = Glyphs {
    running: "@",
    streaming: "|",
    activity: "+",
    ellipsis: "~",
    arrow: ">",
    dot: "-",
    cross: "x",
};

/// The ASCII stand-in for a drawing character or one of the glyphs.
fn ascii_for(c: char) -> Option<char> {
    Some(match c {
        // Box drawing: horizontal, vertical, and every corner or junction.
        '─' | '━' | '═' | '╌' | '┄' => '-',
        '│' | '┃' | '║' | '╎' | '┆' | '▏' | '▍' | '▕' => '|',
        '\u{2500}'..='\u{257F}' => '+',
        '●' => '@',
        '…' => '~',
        '→' => '>',
        '←' => '<',
        '·' => '-',
        '✗' => 'x',
        '×' => 'x',
        '▲' => '^',
        '▼' => 'v',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_decides_ascii_and_colours() {
        let t = |term, ct| Theme::detect(term, ct);
        assert_eq!(t(Some("dumb"), None), Err(Refusal::Dumb));
        assert_eq!(
            t(Some("linux"), None),
            Ok(Theme {
                ascii: true,
                colors: ColorDepth::Ansi16
            })
        );
        assert_eq!(
            t(Some("vt100"), None),
            Ok(Theme {
                ascii: true,
                colors: ColorDepth::Ansi8
            })
        );
        assert_eq!(t(Some("xterm-256color"), None), Ok(Theme::default()));
        assert_eq!(t(Some("tmux-256color"), None), Ok(Theme::default()));
        assert_eq!(t(Some("screen.xterm-256color"), None), Ok(Theme::default()));
        assert_eq!(t(None, None), Ok(Theme::default()));
        assert_eq!(
            t(Some("xterm-256color"), Some("truecolor")),
            Ok(Theme {
                ascii: false,
                colors: ColorDepth::TrueColor
            })
        );
        assert_eq!(
            t(Some("screen"), Some("24bit")).map(|t| t.colors),
            Ok(ColorDepth::TrueColor)
        );
    }
}
