//! The terminal while the TUI owns it: raw mode, the alternate screen and bracketed paste on
//! entry, and everything put back on exit, on a panic and on a signal.

use std::io::{Stdout, Write};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The TUI's terminal; dropping it restores the terminal.
pub struct Screen {
    /// The ratatui terminal drawing on stdout.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Puts the terminal back as it was (safe to call more than once).
pub fn restore() {
    let mut stdout = std::io::stdout();
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = stdout.flush();
}

impl Screen {
    /// Takes over the terminal; a panic from here on restores it before its message is printed.
    pub fn enter() -> std::io::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        enable_raw_mode()?;
        let mut stdout = std::io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, EnableBracketedPaste) {
            restore();
            return Err(e);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => terminal,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        Ok(Screen { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
