//! The command line: arguments, dispatch, and exit statuses.
//!
//! Exit status: 0 done, 1 the run ended in an error, 2 bad usage or configuration,
//! 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM).
//!
//! Standard output is written only through `output::{out, outln}` (or `writeln!`), never with
//! `print!`, which panics when the reader has gone away; a closed stdout ends the command with
//! status 0.

// A closed stdout must never panic: see `output::outln`.
#![deny(clippy::print_stdout)]

mod agents;
mod answer;
mod asks;
mod attach_drive;
mod attach_run;
mod cluster;
mod commands;
mod completion;
mod context;
mod demo;
mod live;
pub mod logging;
mod output;
mod paths;
mod permission;
mod request;
mod run;
mod screen;
mod serve;
mod sessions;
mod show_config;
pub(crate) mod signals;
mod tui;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use context::Context;
pub use output::is_closed_stdout;

/// taskforce: an actor-based multi-agent runtime.
#[derive(Debug, Parser)]
#[command(name = "taskforce", version, about, propagate_version = true)]
pub struct Cli {
    /// Flags every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Flags of the TUI, which opens when no subcommand is given.
    #[command(flatten)]
    pub tui: tui::TuiArgs,
    /// What to do; the TUI on this project when absent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// Whether this command line opens the TUI (which owns the terminal).
    pub fn opens_tui(&self) -> bool {
        matches!(self.command, None | Some(Command::Attach(_)))
    }
}

/// Flags every subcommand takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// A config file read after the project's (also `TASKFORCE_CONFIG`).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where sessions and tool output are stored (also `TASKFORCE_DATA_DIR`).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// More logging on stderr (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List or inspect agents.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// List slash commands.
    #[command(subcommand)]
    Commands(commands::CommandsCommand),
    /// Explain permission decisions.
    #[command(subcommand)]
    Permission(permission::PermissionCommand),
    /// Run a prompt and print the answer.
    Run(run::RunArgs),
    /// List, show, inspect or delete stored sessions.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// The offline demo: a primary agent fans out to parallel explore subagents.
    Demo(demo::DemoArgs),
    /// Serve OpenCode's HTTP/SSE API on this machine.
    Serve(serve::ServeArgs),
    /// Look at the cluster of the config's `[cluster]`: its nodes, their load and leases.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Open the TUI against a running `taskforce serve` (or any OpenCode-compatible server).
    Attach(tui::AttachArgs),
    /// Show the config files read, the data directory and the database file.
    Paths(paths::PathsArgs),
    /// Print the merged configuration (TOML, or JSON with --json), secrets redacted.
    Config(show_config::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completion(completion::CompletionArgs),
}

/// An error caused by the user's input or configuration (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct UsageError(#[from] pub anyhow::Error);

impl UsageError {
    /// Wraps any error as a usage error.
    pub fn new(error: impl Into<anyhow::Error>) -> Self {
        UsageError(error.into())
    }
}

/// An error that ends the process with a given status (and maybe no message).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExitStatus {
    /// The exit status.
    pub code: u8,
    /// What to print after `error: `; nothing when empty.
    pub message: String,
}

impl ExitStatus {
    /// An exit with `code` and `message`.
    pub fn new(code: u8, message: &str) -> Self {
        ExitStatus {
            code,
            message: message.to_string(),
        }
    }
}

/// The exit status for an error: 2 for usage and configuration errors, else 1.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    if let Some(exit) = error.downcast_ref::<ExitStatus>() {
        exit.code
    } else if error.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Some(Command::Attach(args)) => {
            // The server's configuration counts; a broken local one does not stop the TUI.
            let context = Context::load(&cli.global).ok();
            return tui::attach(context.as_ref(), args);
        }
        Some(Command::Run(args)) if args.attach.is_some() => {
            // The server's configuration counts; a broken local one does not stop the run.
            let context = Context::load(&cli.global).ok();
            let url = args.attach.clone().unwrap_or_default();
            return attach_run::run(context.as_ref(), &url, args);
        }
        // Completion scripts need no configuration (a broken one must not stop them).
        Some(Command::Completion(args)) => return completion::run(args),
        _ => {}
    }
    let context = Context::load(&cli.global)?;
    for warning in &context.loaded.warnings {
        eprintln!("warning: {warning}");
    }
    let Some(command) = cli.command else {
        return tui::run(&context, cli.tui);
    };
    match command {
        Command::Agents(cmd) => agents::run(&context, cmd),
        Command::Commands(cmd) => commands::run(&context, cmd),
        Command::Permission(cmd) => permission::run(&context, cmd),
        Command::Run(args) => run::run(&context, args),
        Command::Sessions(cmd) => sessions::run(&context, cmd),
        Command::Demo(args) => demo::run(&context, args),
        Command::Serve(args) => serve::run(&context, args),
        Command::Cluster(cmd) => cluster::run(&context, cmd),
        Command::Paths(args) => paths::run(&context, args),
        Command::Config(args) => show_config::run(&context, args),
        Command::Attach(_) | Command::Completion(_) => Ok(()),
    }
}
