//! Taking the terminal and giving it back: raw mode, the alternate screen, bracketed paste,
//! optional mouse capture; restored on every way out (return, error, panic, suspend).

use std::io::{Write, stdout};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};

/// Holds the terminal; dropping it restores the terminal.
pub struct TerminalGuard {
    mouse: bool,
}

impl TerminalGuard {
    pub fn enter() -> std::io::Result<TerminalGuard> {
        install_panic_hook();
        take()?;
        Ok(TerminalGuard { mouse: false })
    }

    pub fn set_mouse(&mut self, on: bool) -> std::io::Result<()> {
        if on != self.mouse {
            if on {
                execute!(stdout(), EnableMouseCapture)?;
            } else {
                execute!(stdout(), DisableMouseCapture)?;
            }
            self.mouse = on;
        }
        Ok(())
    }

    /// Ctrl-Z: give the terminal back, stop, and take it again when continued.
    #[cfg(unix)]
    pub fn suspend(&mut self) -> std::io::Result<()> {
        restore();
        // SAFETY: raising a signal at our own process; it stops here until SIGCONT.
        unsafe {
            libc::raise(libc::SIGTSTP);
        }
        take()?;
        if self.mouse {
            execute!(stdout(), EnableMouseCapture)?;
        }
        Ok(())
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn take() -> std::io::Result<()> {
    enable_raw_mode()?;
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableBracketedPaste,
        cursor::Hide
    )?;
    Ok(())
}

/// Put the terminal back as we found it. Idempotent, and safe to call from a panic.
pub fn restore() {
    let mut out = stdout();
    let _ = execute!(
        out,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The message must land on a normal screen, or it is lost with the alternate one.
        restore();
        previous(info);
    }));
}
