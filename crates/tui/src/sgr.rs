//! The colour codes written to the terminal, brought down to what it takes. crossterm writes
//! every colour as a 256-colour index (`ESC[38;5;9m` even for plain red), which a Linux
//! console or a vt100 shows as garbage or not at all; this writer sits between the backend
//! and stdout and rewrites each colour parameter to the `ColorDepth` the terminal has.

use std::io::{self, Write};

use super::theme::ColorDepth;

/// A CSI sequence longer than this is not one crossterm writes: pass it on untouched.
const MAX_CSI: usize = 64;

/// Writes through to `inner`, rewriting colour SGR sequences for `depth`.
pub struct ColorWriter<W: Write> {
    inner: W,
    depth: ColorDepth,
    /// An escape sequence begun and not yet ended (crossterm writes one in pieces).
    pending: Vec<u8>,
}

impl<W: Write> ColorWriter<W> {
    pub fn new(inner: W, depth: ColorDepth) -> ColorWriter<W> {
        ColorWriter {
            inner,
            depth,
            pending: Vec::new(),
        }
    }

    /// A whole sequence in `pending`: write it, rewritten when it is an SGR.
    fn finish(&mut self) -> io::Result<()> {
        let seq = std::mem::take(&mut self.pending);
        match seq
            .strip_prefix(b"\x1b[")
            .and_then(|s| s.strip_suffix(b"m"))
        {
            Some(params) => {
                let params = String::from_utf8_lossy(params);
                let out = rewrite_sgr(&params, self.depth);
                write!(self.inner, "\x1b[{out}m")
            }
            None => self.inner.write_all(&seq),
        }
    }
}

impl<W: Write> Write for ColorWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.depth >= ColorDepth::TrueColor {
            return self.inner.write(buf);
        }
        let mut plain_from = 0;
        for (i, &b) in buf.iter().enumerate() {
            if self.pending.is_empty() {
                if b == 0x1b {
                    self.inner.write_all(&buf[plain_from..i])?;
                    self.pending.push(b);
                }
                continue;
            }
            self.pending.push(b);
            let n = self.pending.len();
            let done = if n == 2 {
                // Only CSI (`ESC [`) carries colours; any other escape passes as it is.
                b != b'['
            } else {
                (0x40..=0x7e).contains(&b) || n >= MAX_CSI
            };
            if done {
                self.finish()?;
            }
            plain_from = i + 1;
        }
        if self.pending.is_empty() {
            self.inner.write_all(&buf[plain_from..])?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let seq = std::mem::take(&mut self.pending);
            self.inner.write_all(&seq)?;
        }
        self.inner.flush()
    }
}

/// The parameters of one SGR (`38;5;9;1`), with every colour in a form `depth` takes.
pub fn rewrite_sgr(params: &str, depth: ColorDepth) -> String {
    let p: Vec<&str> = params.split(';').collect();
    let mut out: Vec<String> = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let base = match p[i] {
            "38" => Some(30u16),
            "48" => Some(40u16),
            // Underline colour: a terminal without 256 colours has none; drop it.
            "58" => Some(0u16),
            _ => None,
        };
        let Some(base) = base else {
            out.push(p[i].to_string());
            i += 1;
            continue;
        };
        let (rgb, used) = match p.get(i + 1).copied() {
            Some("5") => (
                p.get(i + 2)
                    .and_then(|v| v.parse::<u8>().ok())
                    .map(index_rgb),
                3,
            ),
            Some("2") => {
                let c = |k: usize| p.get(i + k).and_then(|v| v.parse::<u8>().ok());
                (c(2).zip(c(3)).zip(c(4)).map(|((r, g), b)| (r, g, b)), 5)
            }
            _ => (None, 1),
        };
        i += used;
        let Some(rgb) = rgb else { continue };
        if base == 0 {
            continue;
        }
        if depth >= ColorDepth::Indexed256 {
            out.push(format!("{};5;{}", base + 8, to_256(rgb)));
            continue;
        }
        let (n, bright) = to_16(rgb);
        let bright = bright && depth >= ColorDepth::Ansi16;
        out.push(format!(
            "{}",
            base + u16::from(n) + if bright { 60 } else { 0 }
        ));
    }
    out.join(";")
}

/// The 16 basic colours as xterm draws them (0-7 normal, 8-15 bright).
const BASIC: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
];

/// The colour a 256-colour index stands for.
fn index_rgb(n: u8) -> (u8, u8, u8) {
    match n {
        0..16 => BASIC[n as usize],
        16..232 => {
            let k = n - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            (level(k / 36), level((k / 6) % 6), level(k % 6))
        }
        _ => {
            let g = 8 + (n - 232) * 10;
            (g, g, g)
        }
    }
}

fn distance(a: (u8, u8, u8), b: (u8, u8, u8)) -> u32 {
    let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).unsigned_abs();
    d(a.0, b.0).pow(2) + d(a.1, b.1).pow(2) + d(a.2, b.2).pow(2)
}

/// The nearest basic colour: its number (0-7) and whether it is the bright one.
fn to_16(rgb: (u8, u8, u8)) -> (u8, bool) {
    let best = (0..16u8)
        .min_by_key(|&k| distance(rgb, BASIC[k as usize]))
        .unwrap_or(7);
    (best % 8, best >= 8)
}

/// The nearest 256-colour index (for an RGB colour on a terminal without truecolor).
fn to_256(rgb: (u8, u8, u8)) -> u8 {
    (0..=255u8)
        .min_by_key(|&k| distance(rgb, index_rgb(k)))
        .unwrap_or(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_come_down_to_the_terminal_depth() {
        // crossterm's red, green and cyan (bright indexes), bold kept.
        assert_eq!(rewrite_sgr("38;5;9", ColorDepth::Ansi16), "91");
        assert_eq!(rewrite_sgr("38;5;9", ColorDepth::Ansi8), "31");
        assert_eq!(rewrite_sgr("1;38;5;14", ColorDepth::Ansi16), "1;96");
        assert_eq!(rewrite_sgr("48;5;1", ColorDepth::Ansi8), "41");
        assert_eq!(rewrite_sgr("38;5;196", ColorDepth::Ansi16), "91");
        assert_eq!(rewrite_sgr("38;2;0;0;0", ColorDepth::Ansi8), "30");
        assert_eq!(
            rewrite_sgr("38;2;255;0;0", ColorDepth::Indexed256),
            "38;5;9"
        );
        assert_eq!(rewrite_sgr("39;49;0", ColorDepth::Ansi8), "39;49;0");
    }

    #[test]
    fn the_writer_rewrites_sequences_split_across_writes() {
        let mut w = ColorWriter::new(Vec::new(), ColorDepth::Ansi16);
        for piece in ["ab\x1b[", "38;", "5;9", "mred\x1b[2J", "\x1b[1;1H", "x"] {
            w.write_all(piece.as_bytes()).expect("write");
        }
        w.flush().expect("flush");
        assert_eq!(
            String::from_utf8_lossy(&w.inner),
            "ab\x1b[91mred\x1b[2J\x1b[1;1Hx"
        );
    }
}
