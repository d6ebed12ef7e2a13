//! Taking the terminal and giving it back: raw mode, the alternate screen, bracketed paste,
//! optional mouse capture; restored on every way out (return, error, panic, suspend).

use std::io::{Write, stdout};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::style::ResetColor;
use crossterm::terminal::{
    Clear, ClearType, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen,
    disable_raw_mode, enable_raw_mode,
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
    TAKEN.store(true, Ordering::SeqCst);
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableBracketedPaste,
        cursor::Hide
    )?;
    Ok(())
}

/// The terminal is ours (raw mode, alternate screen): set by `take`, cleared by `restore`,
/// so a second restore (the panic hook's, then the guard's) writes nothing, and never clears
/// the shell's screen.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Put the terminal back as we found it, in the order full-screen programs do: end any
/// synchronized update (a frame cut short would hold the terminal's output), wipe the
/// alternate screen (a terminal that copies it back when its size changed meanwhile, as
/// tmux does when leaving it after a resize, then has nothing of ours to copy), leave it,
/// show the cursor, turn off the modes we set, flush, and only then leave raw mode, so the
/// shell's first output lands on its own screen. Idempotent, and safe to call from a panic.
pub fn restore() {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = stdout();
    let _ = execute!(
        out,
        EndSynchronizedUpdate,
        ResetColor,
        Clear(ClearType::All),
        cursor::MoveTo(0, 0),
        LeaveAlternateScreen,
        cursor::Show,
        DisableMouseCapture,
        DisableBracketedPaste,
    );
    let _ = out.flush();
    let _ = disable_raw_mode();
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The message must land on a normal screen, or it is lost with the alternate one.
        restore();
        previous(info);
    }));
}
