//! The `taskforce` command.

mod cli;
mod client;
mod tui;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, exit_code, logging};

/// mimalloc: the runtime allocates many small, short-lived values across threads (parts, events),
/// where it is markedly faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.opens_tui() {
        // The TUI owns the terminal: logs go to a file.
        logging::init_file(
            cli.global.verbose,
            &std::env::temp_dir().join("taskforce-tui.log"),
        );
    } else {
        logging::init(cli.global.verbose);
    }
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`taskforce … | head`): not a failure.
        Err(error) if cli::is_closed_stdout(&error) => ExitCode::SUCCESS,
        Err(error) => {
            let message = logging::redact(&format!("{error:#}"));
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            ExitCode::from(exit_code(&error))
        }
    }
}
