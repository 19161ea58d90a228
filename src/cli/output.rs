//! Shared rendering of messages for the command line.

use taskforce_actors::store::MessageWithParts;
use taskforce_agents::model::PartKind;

/// The text parts of a message joined, as the final answer.
pub fn final_text(message: &MessageWithParts) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if t.synthetic != Some(true) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `println!` that returns the write's `io::Result` instead of panicking: a closed stdout (a
/// reader such as `head` that went away) becomes an error that `main` turns into a quiet exit.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

/// `print!` that returns the write's `io::Result` (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*).and_then(|()| stdout.flush())
    }};
}
pub(crate) use out;

/// Whether `error` is stdout's reader having gone away (`EPIPE`): the command's output is not
/// wanted any more, which is no failure.
pub fn is_closed_stdout(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
