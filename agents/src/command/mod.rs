//! Slash commands: built-in definitions and those from config and markdown, template
//! expansion, `` !`cmd` `` substitution, and `@` references in prompts.
//!
//! Running a command (subtasks, message parts, events) belongs to the runtime; this module knows
//! what a command is, how its template takes arguments and shell output, and what the files and
//! directories a prompt references contribute to it.

mod builtin;
mod config;
mod info;
mod prompt_files;
mod references;
mod shell;
mod template;

pub use builtin::{
    INIT, INIT_DESCRIPTION, INIT_TEMPLATE, REVIEW, REVIEW_DESCRIPTION, REVIEW_TEMPLATE,
    builtin_commands,
};
pub use config::CommandConfig;
pub use info::{CommandInfo, CommandSource, Commands, UnknownCommand};
pub use prompt_files::{DIRECTORY_MIME, FILE_MIME, PromptPiece, attachment_pieces, file_pieces};
pub use references::{Reference, find_references};
pub use shell::{SHELL_TIMEOUT, ShellContext, ShellGate, render, substitute_shell};
pub use template::{Piece, expand, expand_pieces, hints, split_arguments};
