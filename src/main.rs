//! The `taskforce` command.

use std::process::ExitCode;

use clap::Parser;
use taskforce::cli::{Cli, exit_code};

/// mimalloc: the runtime allocates many small, short-lived values across threads (parts, events),
/// where it is markedly faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.global.verbose);
    match taskforce::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let message = format!("{error:#}");
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            ExitCode::from(exit_code(&error))
        }
    }
}

/// Logs go to stderr: warnings by default, `-v` debug, `-vv` trace; `RUST_LOG` overrides.
fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
