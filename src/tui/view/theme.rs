//! The colours of the TUI, or none at all when `NO_COLOR` is set.

use ratatui::style::{Color, Modifier, Style};

/// The colours every view draws with.
#[derive(Debug, Clone)]
pub struct Theme {
    /// Whether colours are drawn at all.
    pub color: bool,
    /// Headings, the current selection, the agent's name.
    pub accent: Color,
    /// Secondary text: hints, timestamps, gutters.
    pub muted: Color,
    /// Inline code and code without a known language.
    pub code: Color,
    /// Links.
    pub link: Color,
    /// Success: a completed tool.
    pub ok: Color,
    /// Failure: an error, a rejected call.
    pub error: Color,
    /// Waiting: an ask, a retry.
    pub warn: Color,
    /// The user's own messages.
    pub user: Color,
}

impl Theme {
    /// The theme for this terminal: plain when `no_color`.
    pub fn new(no_color: bool) -> Theme {
        if no_color {
            return Theme::plain();
        }
        Theme {
            color: true,
            accent: Color::Cyan,
            muted: Color::DarkGray,
            code: Color::Yellow,
            link: Color::Blue,
            ok: Color::Green,
            error: Color::Red,
            warn: Color::Yellow,
            user: Color::Magenta,
        }
    }

    /// No colours: every colour is the terminal's own.
    pub fn plain() -> Theme {
        Theme {
            color: false,
            accent: Color::Reset,
            muted: Color::Reset,
            code: Color::Reset,
            link: Color::Reset,
            ok: Color::Reset,
            error: Color::Reset,
            warn: Color::Reset,
            user: Color::Reset,
        }
    }

    /// Bold text in the accent colour.
    pub fn strong(&self) -> Style {
        Style::default()
            .fg(self.accent)
            .add_modifier(Modifier::BOLD)
    }

    /// Muted text.
    pub fn dim(&self) -> Style {
        Style::default().fg(self.muted)
    }

    /// The style of the selected row of a list.
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}
