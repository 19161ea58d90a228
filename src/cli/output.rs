//! Writing to standard output without panicking when its reader has gone away.

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
