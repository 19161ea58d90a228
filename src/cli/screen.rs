//! What a run shows: the answer streaming on stdout, the live view on stderr (with a status line
//! of the running sessions, a spinner and their elapsed times, when stderr is a terminal), or
//! one JSON event per line on stdout.

use std::io::{IsTerminal, Stdout, Write};
use std::time::{Duration, Instant};

use taskforce_actors::bus::Event;
use taskforce_actors::store::MessageWithParts;
use taskforce_agents::config::Config;
use taskforce_agents::id::SessionId;

use super::answer::AnswerStream;
use super::live::{LiveView, Running};
use super::run::Format;

/// How often the status line is redrawn.
pub const TICK: Duration = Duration::from_millis(120);

/// The spinner's frames.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Clears the line the cursor is on.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// The output of one run.
pub struct Screen {
    format: Format,
    quiet: bool,
    answer: AnswerStream<Stdout>,
    live: LiveView,
    /// stdout and stderr are one terminal: an open line of answer text is ended before a line
    /// of the live view.
    shared_terminal: bool,
    /// The status line may be drawn (stderr is a terminal that takes escape codes).
    animated: bool,
    /// The status line is on the screen now.
    drawn: bool,
    frame: usize,
}

impl Screen {
    /// The output of a run of `root`, whose agent is `agent`.
    pub fn new(root: SessionId, agent: &str, config: Config, format: Format, quiet: bool) -> Self {
        let stdout_tty = std::io::stdout().is_terminal();
        let stderr_tty = std::io::stderr().is_terminal();
        Screen {
            format,
            quiet,
            answer: AnswerStream::new(root.clone(), std::io::stdout()),
            live: LiveView::new(root, agent, config),
            shared_terminal: stdout_tty && stderr_tty,
            animated: format == Format::Text && !quiet && stderr_tty && !no_color(),
            drawn: false,
            frame: 0,
        }
    }

    /// Whether the status line wants redrawing every [`TICK`].
    pub fn animated(&self) -> bool {
        self.animated
    }

    /// Shows `event`.
    pub fn show(&mut self, event: &Event) {
        if self.format == Format::Json {
            if let Ok(line) = serde_json::to_string(event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
            return;
        }
        let line = self.live.line(event);
        if matches!(event, Event::PartDelta { .. } | Event::PartUpdated { .. })
            && self.shared_terminal
        {
            self.clear();
        }
        let shown = self.answer.show(event);
        if shown.retracted {
            self.note("(the model call failed midway: the text above is repeated by the retry)");
        }
        if let Some(line) = line
            && !self.quiet
        {
            self.note(&line);
        }
    }

    /// Writes `line` on stderr, on a line of its own.
    pub fn note(&mut self, line: &str) {
        self.clear();
        if self.shared_terminal {
            self.answer.break_line();
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }

    /// Redraws the status line: a spinner and the running sessions with their elapsed times.
    pub fn tick(&mut self) {
        if !self.animated || (self.shared_terminal && self.answer.open_line()) {
            return;
        }
        let running = self.live.running(Instant::now());
        self.frame = self.frame.wrapping_add(1);
        let line = status_line(FRAMES[self.frame % FRAMES.len()], &running, width());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{CLEAR_LINE}\x1b[2m{line}\x1b[0m");
        let _ = err.flush();
        self.drawn = !line.is_empty();
    }

    /// Takes the status line off the screen (before a question on the terminal, or the end).
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{CLEAR_LINE}");
            let _ = err.flush();
            self.drawn = false;
        }
    }

    /// Ends the run's output: the whole final answer on stdout, ending with a newline.
    pub fn finish(&mut self, answer: &MessageWithParts) {
        self.clear();
        if self.format == Format::Text {
            self.answer.finish(answer);
        }
    }
}

/// Whether `NO_COLOR` asks for no escape codes (set and not empty).
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// The terminal's width in columns, as the shell says (`COLUMNS`), else 80.
fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&c| c > 10)
        .unwrap_or(80)
}

/// `⠋ @build 3s · @explore (Find the tests) 1s`, cut to `width - 1` characters; empty when
/// nothing runs.
pub fn status_line(spinner: char, running: &[Running], width: usize) -> String {
    if running.is_empty() {
        return String::new();
    }
    let sessions: Vec<String> = running
        .iter()
        .map(|r| format!("{} {}s", r.label, r.elapsed.as_secs()))
        .collect();
    let line = format!("{spinner} {}", sessions.join(" · "));
    let max = width.saturating_sub(1);
    if line.chars().count() > max {
        let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(label: &str, secs: u64) -> Running {
        Running {
            label: label.into(),
            elapsed: Duration::from_millis(secs * 1000 + 400),
        }
    }

    #[test]
    fn the_status_line_names_each_running_session_with_its_time() {
        assert_eq!(status_line('⠋', &[], 80), "");
        assert_eq!(
            status_line(
                '⠋',
                &[
                    running("@build", 3),
                    running("@explore (Find the tests)", 1)
                ],
                80
            ),
            "⠋ @build 3s · @explore (Find the tests) 1s"
        );
        let cut = status_line('⠋', &[running("@explore (a very long description)", 1)], 20);
        assert_eq!(cut, "⠋ @explore (a very…");
        assert_eq!(cut.chars().count(), 19);
    }
}
