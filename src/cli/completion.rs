//! `taskforce completion SHELL`: a shell completion script on stdout.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use super::output::out;

/// `taskforce completion` arguments.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script for `args.shell`.
pub fn run(args: CompletionArgs) -> anyhow::Result<()> {
    // Generated into memory first: clap_complete panics when its writer fails, and a closed
    // stdout must end the command quietly instead.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "taskforce", &mut script);
    out!("{}", String::from_utf8_lossy(&script))?;
    Ok(())
}
