//! What the terminal can show, from `TERM`, `COLORTERM` and the locale: Unicode or ASCII line
//! drawing, whether text may hold anything but ASCII, and how many colours. The console's own
//! glyphs (`●`, `▍`, `▌`, `…`, `→`) live here, with their ASCII stand-ins, so every pane draws
//! the same marks and a vt100 or a `LANG=C` shell sees none it cannot show.

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

/// Which characters reach the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// Anything: box drawing, the Unicode marks, agents' text as written.
    Unicode,
    /// Borders and marks in ASCII (a `TERM` without line drawing: vt100, linux); agents'
    /// text as written (the locale is UTF-8, or not said).
    AsciiMarks,
    /// Every cell ASCII (the locale is not UTF-8: `LANG=C`): marks and borders as in
    /// `AsciiMarks`, any other character as `?` (its UTF-8 bytes would show as mojibake).
    Ascii,
}

/// The terminal the console draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub charset: Charset,
    pub colors: ColorDepth,
}

impl Default for Theme {
    fn default() -> Theme {
        Theme {
            charset: Charset::Unicode,
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
            charset: if unicode {
                Charset::Unicode
            } else {
                Charset::AsciiMarks
            },
            colors,
        })
    }

    /// This theme under the locale whose character type is `ctype` (the first of `LC_ALL`,
    /// `LC_CTYPE`, `LANG` that is set, see [`locale_ctype`]): one that is not UTF-8 makes
    /// every cell ASCII, whatever `TERM` says. `None` (no locale variable at all) changes
    /// nothing: that is most often an environment that did not pass the locale on (a
    /// container, cron, Windows), not a terminal that cannot show UTF-8.
    pub fn with_locale(self, ctype: Option<&str>) -> Theme {
        match ctype {
            Some(l) if !is_utf8_locale(l) => Theme {
                charset: Charset::Ascii,
                ..self
            },
            _ => self,
        }
    }

    /// The theme for this process's environment.
    pub fn from_env() -> Result<Theme, Refusal> {
        let term = std::env::var("TERM").ok();
        let colorterm = std::env::var("COLORTERM").ok();
        let var = |name: &str| std::env::var(name).ok();
        let ctype = locale_ctype(var("LC_ALL"), var("LC_CTYPE"), var("LANG"));
        Ok(Theme::detect(term.as_deref(), colorterm.as_deref())?.with_locale(ctype.as_deref()))
    }

    /// Borders and marks are drawn in ASCII.
    pub fn ascii(&self) -> bool {
        self.charset != Charset::Unicode
    }

    pub fn glyphs(&self) -> &'static Glyphs {
        if self.ascii() { &ASCII } else { &UNICODE }
    }

    /// Make a drawn frame showable: in ASCII mode every box-drawing cell and every glyph of
    /// [`Glyphs`] becomes its ASCII stand-in (borders are drawn by ratatui's widgets, which
    /// know nothing of the terminal; one pass here covers every pane and overlay).
    /// Under [`Charset::Ascii`] any other non-ASCII cell becomes `?`.
    pub fn adapt(&self, buf: &mut Buffer) {
        if !self.ascii() {
            return;
        }
        let all = self.charset == Charset::Ascii;
        let area = buf.area;
        for y in area.top()..area.bottom() {
            for x in area.left()..area.right() {
                if let Some(cell) = buf.cell_mut((x, y)) {
                    let symbol = cell.symbol();
                    let mut chars = symbol.chars();
                    if let (Some(c), None) = (chars.next(), chars.next())
                        && let Some(a) = ascii_for(c)
                    {
                        cell.set_char(a);
                    } else if all && !symbol.is_ascii() {
                        // A grapheme of several chars (a flag, an accent written apart)
                        // too: one cell, one `?`.
                        cell.set_char('?');
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
    /// A source not linked yet, or retrying.
    pub idle: &'static str,
    /// The selected message, in the transcript's first column (beside the border: its
    /// ASCII form must not read as a second border).
    pub select: &'static str,
    /// Where typing goes in a one-line box (the filter, the search, the command line).
    pub caret: &'static str,
}

pub static UNICODE: Glyphs = Glyphs {
    running: "●",
    streaming: "▍",
    activity: "+",
    ellipsis: "…",
    arrow: "→",
    dot: "·",
    cross: "✗",
    idle: "◌",
    select: "▌",
    caret: "▏",
};

/// No mark is `|` or `-`: beside a border those read as a second border.
pub static ASCII: Glyphs = Glyphs {
    running: "@",
    streaming: ">",
    activity: "+",
    ellipsis: "~",
    arrow: ">",
    dot: "-",
    cross: "x",
    idle: "o",
    select: ">",
    caret: "_",
};

/// The character type of the locale as the C library picks it: `LC_ALL`, else `LC_CTYPE`,
/// else `LANG`, the first that is set and not empty.
pub fn locale_ctype(
    lc_all: Option<String>,
    lc_ctype: Option<String>,
    lang: Option<String>,
) -> Option<String> {
    [lc_all, lc_ctype, lang]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty())
}

/// `en_US.UTF-8`, `C.utf8`, `de_DE.utf8@euro`: the codeset after the dot is UTF-8. `C`,
/// `POSIX`, `en_US` (Latin-1 on glibc), `en_US.ISO-8859-1` are not.
fn is_utf8_locale(locale: &str) -> bool {
    locale
        .split_once('.')
        .map(|(_, rest)| rest.split('@').next().unwrap_or(rest))
        .is_some_and(|codeset| {
            let c = codeset.to_ascii_lowercase();
            c == "utf-8" || c == "utf8"
        })
}

/// The ASCII stand-in for a drawing character or one of the glyphs.
fn ascii_for(c: char) -> Option<char> {
    Some(match c {
        // Box drawing: horizontal, vertical, and every corner or junction.
        '─' | '━' | '═' | '╌' | '┄' => '-',
        '│' | '┃' | '║' | '╎' | '┆' | '▕' => '|',
        '\u{2500}'..='\u{257F}' => '+',
        // The marks (drawn as glyphs already; these catch a literal one): never `|`, which
        // beside a border reads as a second border.
        '▍' | '▌' | '›' | '▸' => '>',
        '▾' => 'v',
        '▏' => '_',
        '●' => '@',
        '…' => '~',
        '→' => '>',
        '←' => '<',
        '·' => '-',
        '✗' => 'x',
        '×' => 'x',
        '▲' | '↑' => '^',
        '▼' | '↓' => 'v',
        '“' | '”' => '"',
        '‘' | '’' => '\'',
        '–' | '—' => '-',
        '⚙' => '#',
        // The traffic view's sparkline: its bars by height.
        '▁' | '▂' => '.',
        '▃' | '▄' | '▅' => 'o',
        '▆' | '▇' | '█' => '#',
        // The streaming spinner.
        '\u{2800}'..='\u{28FF}' => '*',
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
                charset: Charset::AsciiMarks,
                colors: ColorDepth::Ansi16
            })
        );
        assert_eq!(
            t(Some("vt100"), None),
            Ok(Theme {
                charset: Charset::AsciiMarks,
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
                charset: Charset::Unicode,
                colors: ColorDepth::TrueColor
            })
        );
        assert_eq!(
            t(Some("screen"), Some("24bit")).map(|t| t.colors),
            Ok(ColorDepth::TrueColor)
        );
    }

    /// A locale that is not UTF-8 makes every cell ASCII, whatever TERM says; a UTF-8 one
    /// or none at all leaves TERM's choice.
    #[test]
    fn locale_decides_ascii_text() {
        let xterm = Theme::default();
        let ctype = |all: Option<&str>, ct: Option<&str>, lang: Option<&str>| {
            locale_ctype(
                all.map(String::from),
                ct.map(String::from),
                lang.map(String::from),
            )
        };
        for l in ["C", "POSIX", "en_US", "en_US.ISO-8859-1", "de_DE@euro"] {
            assert_eq!(xterm.with_locale(Some(l)).charset, Charset::Ascii, "{l}");
        }
        for l in ["C.UTF-8", "en_US.utf8", "de_DE.UTF-8@euro", "ja_JP.Utf-8"] {
            assert_eq!(xterm.with_locale(Some(l)), xterm, "{l}");
        }
        assert_eq!(xterm.with_locale(None), xterm);
        // LC_ALL over LC_CTYPE over LANG; an empty one is as if unset.
        assert_eq!(
            ctype(Some("C"), Some("en_US.UTF-8"), Some("en_US.UTF-8")).as_deref(),
            Some("C")
        );
        assert_eq!(
            ctype(Some(""), Some("C"), Some("en_US.UTF-8")).as_deref(),
            Some("C")
        );
        assert_eq!(
            ctype(None, None, Some("C.UTF-8")).as_deref(),
            Some("C.UTF-8")
        );
        assert_eq!(ctype(None, Some(""), None), None);
    }

    /// ASCII text: every glyph and border has its stand-in, any other character is `?`,
    /// and no mark becomes `|` (beside a border it reads as a second one).
    #[test]
    fn ascii_text_leaves_no_non_ascii_cell() {
        use ratatui::layout::Rect;
        let theme = Theme::default().with_locale(Some("C"));
        let text = "┌─│▍▌▏›●…→←·✗×▲▼↑↓“”⚙▁█⠋ Grüße 日本";
        let mut buf = Buffer::empty(Rect::new(0, 0, 60, 1));
        buf.set_string(0, 0, text, ratatui::style::Style::default());
        theme.adapt(&mut buf);
        let drawn: String = buf.content().iter().map(|c| c.symbol()).collect();
        assert!(drawn.is_ascii(), "{drawn}");
        assert!(
            drawn.starts_with("+-|>>_>@~><-xx^v^v\"\"#.#* Gr??e ?"),
            "{drawn}"
        );
        for c in [UNICODE.select, UNICODE.streaming, UNICODE.caret] {
            let mut buf = Buffer::empty(Rect::new(0, 0, 1, 1));
            buf.set_string(0, 0, c, ratatui::style::Style::default());
            theme.adapt(&mut buf);
            assert_ne!(buf.content()[0].symbol(), "|", "{c}");
        }
        for g in [ASCII.select, ASCII.streaming, ASCII.caret] {
            assert!(g != "|" && g != "-", "{g}");
        }
    }
}
